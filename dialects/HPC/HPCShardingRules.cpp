//===- HPCShardingRules.cpp - ShardingRuleInterface of every hpc op -------===//
//
// Each rule names the factors of an op's iteration space and maps operand and
// result dimensions onto them (see HPCInterfaces.td). Elementwise ops share
// one rule with numpy broadcasting; contractions mark their contracted factor
// as a reduction; ops that need a whole dimension (softmax axis, convolution
// windows, slices, concatenation axis) mark it as needing replication.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace hpc;

#include "HPC/HPCInterfaces.cpp.inc"

using Kind = FactorKind;

std::string ShardingRule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto dims = [&](ArrayRef<SmallVector<int64_t>> list) {
    llvm::interleaveComma(list, os, [&](const SmallVector<int64_t> &d) {
      os << "[";
      llvm::interleaveComma(d, os, [&](int64_t f) {
        if (f < 0)
          os << "-";
        else
          os << "f" << f;
      });
      os << "]";
    });
  };
  dims(operandDims);
  os << " -> ";
  dims(resultDims);
  auto kinds = [&](Kind k, StringRef name) {
    SmallVector<int64_t> fs;
    for (auto [i, f] : llvm::enumerate(factors))
      if (f.kind == k)
        fs.push_back(i);
    if (fs.empty())
      return;
    os << " " << name << "{";
    llvm::interleaveComma(fs, os, [&](int64_t f) { os << "f" << f; });
    os << "}";
  };
  kinds(Kind::Reduction, "reduction");
  kinds(Kind::NeedsReplication, "replicated");
  return s;
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// One factor per result dimension; operands map with numpy broadcasting
/// (right-aligned; a size-1 dimension against a larger one maps to none).
/// Factors in `replicated` (result dimensions) need replication.
static ShardingRule elementwiseRule(Operation *op, ArrayRef<int64_t> replicated = {}) {
  ShardingRule rule;
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int64_t> resultDims;
  for (auto [d, size] : llvm::enumerate(out))
    resultDims.push_back(rule.addFactor(
        size, llvm::is_contained(replicated, int64_t(d)) ? Kind::NeedsReplication
                                                          : Kind::Parallel));
  for (Value v : op->getOperands()) {
    ArrayRef<int64_t> in = shapeOf(v);
    SmallVector<int64_t> dims;
    int64_t lead = int64_t(out.size()) - int64_t(in.size());
    for (auto [d, size] : llvm::enumerate(in)) {
      int64_t r = lead + int64_t(d);
      dims.push_back(r >= 0 && size == out[r] ? resultDims[r] : -1);
    }
    rule.operandDims.push_back(dims);
  }
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.resultDims.push_back(resultDims);
  return rule;
}

/// A rule where operand and result have the same rank and dims map 1:1.
static ShardingRule sameShapeRule(Operation *op, ArrayRef<int64_t> replicated) {
  return elementwiseRule(op, replicated);
}

#define ELEMENTWISE_RULE(OP)                                                   \
  ShardingRule OP::getShardingRule() { return elementwiseRule(*this); }

ELEMENTWISE_RULE(NegOp)
ELEMENTWISE_RULE(AbsOp)
ELEMENTWISE_RULE(SignOp)
ELEMENTWISE_RULE(NotOp)
ELEMENTWISE_RULE(ExpOp)
ELEMENTWISE_RULE(LogOp)
ELEMENTWISE_RULE(SqrtOp)
ELEMENTWISE_RULE(ReciprocalOp)
ELEMENTWISE_RULE(ReluOp)
ELEMENTWISE_RULE(SigmoidOp)
ELEMENTWISE_RULE(TanhOp)
ELEMENTWISE_RULE(ErfOp)
ELEMENTWISE_RULE(SinOp)
ELEMENTWISE_RULE(CosOp)
ELEMENTWISE_RULE(FloorOp)
ELEMENTWISE_RULE(CeilOp)
ELEMENTWISE_RULE(RoundOp)
ELEMENTWISE_RULE(SiluOp)
ELEMENTWISE_RULE(SoftplusOp)
ELEMENTWISE_RULE(HardSwishOp)
ELEMENTWISE_RULE(GeluOp)
ELEMENTWISE_RULE(GeluGradOp)
ELEMENTWISE_RULE(LeakyReluOp)
ELEMENTWISE_RULE(EluOp)
ELEMENTWISE_RULE(HardSigmoidOp)
ELEMENTWISE_RULE(ClipOp)
ELEMENTWISE_RULE(CastOp)
ELEMENTWISE_RULE(AddOp)
ELEMENTWISE_RULE(SubOp)
ELEMENTWISE_RULE(MulOp)
ELEMENTWISE_RULE(DivOp)
ELEMENTWISE_RULE(PowOp)
ELEMENTWISE_RULE(MaxOp)
ELEMENTWISE_RULE(MinOp)
ELEMENTWISE_RULE(ModOp)
ELEMENTWISE_RULE(FModOp)
ELEMENTWISE_RULE(AndOp)
ELEMENTWISE_RULE(OrOp)
ELEMENTWISE_RULE(XorOp)
ELEMENTWISE_RULE(EqualOp)
ELEMENTWISE_RULE(LessOp)
ELEMENTWISE_RULE(LessEqualOp)
ELEMENTWISE_RULE(GreaterOp)
ELEMENTWISE_RULE(GreaterEqualOp)
ELEMENTWISE_RULE(WhereOp)
ELEMENTWISE_RULE(ConstantOp)
ELEMENTWISE_RULE(WeightOp)
ELEMENTWISE_RULE(ExpandOp)

/// Per-channel parameters (scale, bias, mean, variance) follow dimension 1,
/// not numpy's right alignment.
ShardingRule BatchNormOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> dims;
  for (int64_t size : shapeOf(getResult()))
    dims.push_back(rule.addFactor(size));
  rule.operandDims.push_back(dims);
  for (unsigned i = 1; i < getNumOperands(); ++i)
    rule.operandDims.push_back({dims[1]});
  rule.resultDims = {dims};
  return rule;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

ShardingRule MatMulOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs()),
                    out = shapeOf(getResult());
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  int64_t batchRank = int64_t(out.size()) - (vecA ? 0 : 1) - (vecB ? 0 : 1);
  SmallVector<int64_t> batch;
  for (int64_t d = 0; d < batchRank; ++d)
    batch.push_back(rule.addFactor(out[d]));
  int64_t m = vecA ? -1 : rule.addFactor(a[a.size() - 2]);
  int64_t n = vecB ? -1 : rule.addFactor(b.back());
  int64_t k = rule.addFactor(a.back(), Kind::Reduction);
  auto operand = [&](ArrayRef<int64_t> shape, bool isA) {
    SmallVector<int64_t> dims;
    int64_t own = (shape.size() == 1) ? 0 : int64_t(shape.size()) - 2;
    for (int64_t d = 0; d < own; ++d) {
      int64_t r = batchRank - own + d;
      dims.push_back(r >= 0 && shape[d] == out[r] ? batch[r] : -1);
    }
    if (shape.size() == 1)
      dims.push_back(k);
    else if (isA)
      dims.append({m, k});
    else
      dims.append({k, n});
    return dims;
  };
  rule.operandDims = {operand(a, true), operand(b, false)};
  SmallVector<int64_t> res(batch);
  if (!vecA)
    res.push_back(m);
  if (!vecB)
    res.push_back(n);
  rule.resultDims = {res};
  return rule;
}

ShardingRule GemmOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t m = rule.addFactor(out[0]), n = rule.addFactor(out[1]);
  // A fused activation applies to the full sum: partial sums over a split
  // reduction would each go through it.
  int64_t k = rule.addFactor(shapeOf(getA())[getTransA() ? 0 : 1],
                             getActivation() == "none" ? Kind::Reduction
                                                       : Kind::NeedsReplication);
  rule.operandDims.push_back(getTransA() ? SmallVector<int64_t>{k, m}
                                         : SmallVector<int64_t>{m, k});
  rule.operandDims.push_back(getTransB() ? SmallVector<int64_t>{n, k}
                                         : SmallVector<int64_t>{k, n});
  if (Value c = getC()) {
    ArrayRef<int64_t> cs = shapeOf(c);
    SmallVector<int64_t> dims;
    int64_t lead = 2 - int64_t(cs.size());
    for (auto [d, size] : llvm::enumerate(cs)) {
      int64_t r = lead + int64_t(d);
      dims.push_back(size == out[r] ? (r == 0 ? m : n) : -1);
    }
    rule.operandDims.push_back(dims);
  }
  rule.resultDims = {{m, n}};
  return rule;
}

/// Convolution-like: batch and output channels parallel, input channels a
/// reduction (when not grouped), spatial dimensions need halos.
/// `activated`: an activation is fused, so input channels, a sum, are not
/// split either.
/// `activated`: the kernel applies something after the sum over input
/// channels (an activation, a residual add), so that sum cannot stay partial.
static ShardingRule convRule(Operation *op, Value input, Value weight, Value bias,
                             int64_t group, bool transposed, bool activated = false,
                             Value residual = {}) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(input), w = shapeOf(weight),
                    out = shapeOf(op->getResult(0));
  int64_t nf = rule.addFactor(out[0]);
  int64_t mf = rule.addFactor(out[1], group == 1 ? Kind::Parallel : Kind::NeedsReplication);
  int64_t cf = rule.addFactor(in[1], group == 1 && !activated ? Kind::Reduction
                                                               : Kind::NeedsReplication);
  SmallVector<int64_t> spatial;
  for (size_t d = 2; d < out.size(); ++d)
    spatial.push_back(rule.addFactor(out[d], Kind::NeedsReplication));
  SmallVector<int64_t> inDims{nf, cf};
  SmallVector<int64_t> wDims = transposed ? SmallVector<int64_t>{cf, mf}
                                          : SmallVector<int64_t>{mf, cf};
  for (size_t d = 2; d < in.size(); ++d) {
    // Input spatial dims move only with their output dims when sizes agree.
    inDims.push_back(in[d] == out[d] ? spatial[d - 2] : -1);
    wDims.push_back(-1);
  }
  (void)w;
  rule.operandDims = {inDims, wDims};
  if (bias)
    rule.operandDims.push_back({mf});
  SmallVector<int64_t> res{nf, mf};
  res.append(spatial);
  if (residual)
    rule.operandDims.push_back(res);
  rule.resultDims = {res};
  return rule;
}

ShardingRule ConvOp::getShardingRule() {
  return convRule(*this, getInput(), getWeight(), getBias(), getGroup(), false,
                  getActivation() != "none" || getResidual(), getResidual());
}

ShardingRule ConvTransposeOp::getShardingRule() {
  return convRule(*this, getInput(), getWeight(), getBias(), getGroup(), true);
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

static int64_t positiveAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

ShardingRule SoftmaxOp::getShardingRule() {
  return sameShapeRule(*this, {positiveAxis(getAxis(), getType().getRank())});
}

ShardingRule LogSoftmaxOp::getShardingRule() {
  return sameShapeRule(*this, {positiveAxis(getAxis(), getType().getRank())});
}

/// Normalization over dims axis..rank-1: those need replication; scale and
/// bias map onto them from the right.
static ShardingRule normRule(Operation *op, int64_t axis) {
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  axis = positiveAxis(axis, rank);
  SmallVector<int64_t> replicated;
  for (int64_t d = axis; d < rank; ++d)
    replicated.push_back(d);
  return elementwiseRule(op, replicated);
}

ShardingRule LayerNormOp::getShardingRule() { return normRule(*this, getAxis()); }
ShardingRule RMSNormOp::getShardingRule() { return normRule(*this, getAxis()); }
ShardingRule LayerNormGradOp::getShardingRule() { return normRule(*this, getAxis()); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Reduced dims are reduction factors (kept as size 1 without a factor with
/// keepdims); others are parallel. `kind` is Reduction for sums/extrema and
/// NeedsReplication for ops that need the whole axis (argmax).
static ShardingRule reduceRule(Operation *op, ArrayRef<int64_t> axes, bool keepdims,
                               Kind kind) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  SmallVector<int64_t> inDims, outDims;
  for (auto [d, size] : llvm::enumerate(in)) {
    bool reduced = llvm::is_contained(axes, int64_t(d));
    int64_t f = rule.addFactor(size, reduced ? kind : Kind::Parallel);
    inDims.push_back(f);
    if (!reduced)
      outDims.push_back(f);
    else if (keepdims)
      outDims.push_back(-1);
  }
  rule.operandDims = {inDims};
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.resultDims.push_back(outDims);
  return rule;
}

// A split reduction leaves partial sums (the only partial state shardings
// carry), so only a sum may reduce a split axis; a mean, extremum or
// product of local pieces would need its own finishing collective and
// rescaling, so those ops take their reduced axes whole.
#define REDUCE_RULE(OP, KIND)                                                  \
  ShardingRule OP::getShardingRule() {                                         \
    return reduceRule(*this, getAxes(), getKeepdims(), KIND);                  \
  }
REDUCE_RULE(ReduceSumOp, Kind::Reduction)
// Squares of local pieces sum to partial sums of squares too (the operand
// itself must arrive reduced: squaring does not commute with the sum).
REDUCE_RULE(ReduceSumSquareOp, Kind::Reduction)
REDUCE_RULE(ReduceMeanOp, Kind::NeedsReplication)
REDUCE_RULE(ReduceMaxOp, Kind::NeedsReplication)
REDUCE_RULE(ReduceMinOp, Kind::NeedsReplication)
REDUCE_RULE(ReduceProdOp, Kind::NeedsReplication)

ShardingRule ArgMaxOp::getShardingRule() {
  int64_t rank = cast<RankedTensorType>(getInput().getType()).getRank();
  return reduceRule(*this, {positiveAxis(getAxis(), rank)}, getKeepdims(),
                    Kind::NeedsReplication);
}

ShardingRule ArgMinOp::getShardingRule() {
  int64_t rank = cast<RankedTensorType>(getInput().getType()).getRank();
  return reduceRule(*this, {positiveAxis(getAxis(), rank)}, getKeepdims(),
                    Kind::NeedsReplication);
}

ShardingRule GlobalAvgPoolOp::getShardingRule() {
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < getType().getRank(); ++d)
    axes.push_back(d);
  return reduceRule(*this, axes, true, Kind::NeedsReplication);
}

ShardingRule GlobalMaxPoolOp::getShardingRule() {
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < getType().getRank(); ++d)
    axes.push_back(d);
  return reduceRule(*this, axes, true, Kind::NeedsReplication);
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

ShardingRule GatherOp::getShardingRule() {
  // result = input[:axis] ++ indices ++ input[axis+1:]; the gathered axis of
  // the input must be whole (an index may point anywhere).
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), idx = shapeOf(getIndices());
  int64_t axis = positiveAxis(getAxis(), in.size());
  SmallVector<int64_t> inDims, idxDims, outDims;
  for (int64_t d = 0; d < int64_t(in.size()); ++d) {
    if (d == axis) {
      inDims.push_back(rule.addFactor(in[d], Kind::NeedsReplication));
      for (int64_t s : idx) {
        idxDims.push_back(rule.addFactor(s));
        outDims.push_back(idxDims.back());
      }
      continue;
    }
    inDims.push_back(rule.addFactor(in[d]));
    outDims.push_back(inDims.back());
  }
  rule.operandDims = {inDims, idxDims};
  rule.resultDims = {outDims};
  return rule;
}

/// Same-rank indexing ops: the axis needs replication, the rest map 1:1.
static ShardingRule axisIndexedRule(Operation *op, int64_t axis) {
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  return elementwiseRule(op, {positiveAxis(axis, rank)});
}

ShardingRule GatherElementsOp::getShardingRule() { return axisIndexedRule(*this, getAxis()); }

bool hpc::isZeroConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto splat = c ? dyn_cast<SplatElementsAttr>(c.getValue()) : nullptr;
  if (!splat)
    return false;
  if (isa<FloatType>(splat.getElementType()))
    return splat.getSplatValue<APFloat>().isZero();
  return splat.getSplatValue<APInt>().isZero();
}

/// A scatter-add into zeros (the gradient of a gather: an embedding's) sums
/// its updates, so the updates' scatter axis is a reduction: with a split
/// batch each rank scatters its own rows and the result stays a partial
/// sum, reduced like any weight gradient, instead of every rank gathering
/// the batch's rows first. That reduction moves 2(g-1)/g of the result, the
/// gather (g-1)/g of the indices and updates: the rule takes the cheaper
/// (a small batch of a large vocabulary keeps the gather). Any other
/// scatter needs its axis whole.
ShardingRule ScatterElementsOp::getShardingRule() {
  ArrayRef<int64_t> data = shapeOf(getInput()), upd = shapeOf(getUpdates());
  int64_t rank = data.size();
  int64_t axis = positiveAxis(getAxis(), rank);
  bool sameOffAxis = llvm::all_of(llvm::seq<int64_t>(0, rank),
                                  [&](int64_t d) { return d == axis || data[d] == upd[d]; });
  auto bytes = [](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getNumElements() * int64_t((t.getElementTypeBitWidth() + 7) / 8);
  };
  bool reduceIsCheaper = 2 * bytes(getResult()) < bytes(getIndices()) + bytes(getUpdates());
  if (getReduction() != "add" || !sameOffAxis || !reduceIsCheaper ||
      !isZeroConstant(getInput()))
    return axisIndexedRule(*this, getAxis());
  ShardingRule rule;
  SmallVector<int64_t> dataDims, updDims;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis) {
      dataDims.push_back(rule.addFactor(data[d], Kind::NeedsReplication));
      updDims.push_back(rule.addFactor(upd[d], Kind::Reduction));
    } else {
      dataDims.push_back(rule.addFactor(data[d]));
      updDims.push_back(dataDims.back());
    }
  }
  rule.operandDims = {dataDims, updDims, updDims};
  rule.resultDims = {dataDims};
  return rule;
}

ShardingRule OneHotOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t axis = positiveAxis(getAxis(), out.size());
  SmallVector<int64_t> outDims, idxDims;
  for (int64_t d = 0; d < int64_t(out.size()); ++d) {
    outDims.push_back(rule.addFactor(out[d], d == axis ? Kind::NeedsReplication
                                                       : Kind::Parallel));
    if (d != axis)
      idxDims.push_back(outDims.back());
  }
  rule.operandDims = {idxDims, {-1}};
  rule.resultDims = {outDims};
  return rule;
}

ShardingRule TopKOp::getShardingRule() {
  int64_t rank = cast<RankedTensorType>(getInput().getType()).getRank();
  ShardingRule rule = elementwiseRule(*this, {positiveAxis(getAxis(), rank)});
  // The input's axis is longer than k: it must be whole as well.
  rule.operandDims[0][positiveAxis(getAxis(), rank)] =
      rule.addFactor(shapeOf(getInput())[positiveAxis(getAxis(), rank)],
                     Kind::NeedsReplication);
  return rule;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// Routing fills each expert's buffer in token order over the whole batch
/// (capacity and drops are the global batch's), so the tokens stay whole
/// for the route and the dispatch; only the hidden dimension splits. The
/// gather reads whole buffers and may split its tokens.
ShardingRule MoERouteOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> e = shapeOf(getExperts());
  int64_t t = rule.addFactor(e[0], Kind::NeedsReplication);
  int64_t k = rule.addFactor(e[1], Kind::NeedsReplication);
  int64_t n = rule.addFactor(getNumExperts(), Kind::NeedsReplication);
  rule.operandDims = {{t, k}};
  rule.resultDims = {{t, k}, {n}};
  return rule;
}

/// Leading batch dimensions (expert parallelism's groups) are parallel.
ShardingRule MoEDispatchOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult()),
                    sl = shapeOf(getSlots());
  size_t batch = sl.size() - 2;
  SmallVector<int64_t> groups;
  for (size_t d = 0; d < batch; ++d)
    groups.push_back(rule.addFactor(sl[d]));
  int64_t t = rule.addFactor(sl[batch], Kind::NeedsReplication);
  int64_t k = rule.addFactor(sl[batch + 1], Kind::NeedsReplication);
  int64_t e = rule.addFactor(out[batch], Kind::NeedsReplication);
  int64_t c = rule.addFactor(out[batch + 1], Kind::NeedsReplication);
  int64_t h = rule.addFactor(out[batch + 2]);
  auto with = [&](std::initializer_list<int64_t> dims) {
    SmallVector<int64_t> all(groups);
    all.append(dims);
    return all;
  };
  rule.operandDims = {in.size() == batch + 3 ? with({t, k, h}) : with({t, h}), with({t, k})};
  rule.resultDims = {with({e, c, h})};
  return rule;
}

ShardingRule MoEGatherOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> buf = shapeOf(getBuffer()), out = shapeOf(getResult());
  size_t batch = shapeOf(getSlots()).size() - 2;
  SmallVector<int64_t> groups;
  for (size_t d = 0; d < batch; ++d)
    groups.push_back(rule.addFactor(buf[d]));
  int64_t e = rule.addFactor(buf[batch], Kind::NeedsReplication);
  int64_t c = rule.addFactor(buf[batch + 1], Kind::NeedsReplication);
  int64_t h = rule.addFactor(buf[batch + 2]);
  int64_t t = rule.addFactor(out[batch]);
  int64_t k = rule.addFactor(out[batch + 1]);
  auto with = [&](std::initializer_list<int64_t> dims) {
    SmallVector<int64_t> all(groups);
    all.append(dims);
    return all;
  };
  rule.operandDims = {with({e, c, h}), with({t, k})};
  rule.resultDims = {with({t, k, h})};
  return rule;
}

/// Computed whole on every rank from the whole batch's routing (a few
/// integers a token).
ShardingRule MoEExchangeSlotsOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> sl = shapeOf(getSlots()), rows = shapeOf(getRows());
  int64_t t = rule.addFactor(sl[0], Kind::NeedsReplication);
  int64_t k = rule.addFactor(sl[1], Kind::NeedsReplication);
  int64_t d = rule.addFactor(rows[0], Kind::NeedsReplication);
  int64_t e = rule.addFactor(rows[1], Kind::NeedsReplication);
  int64_t r = rule.addFactor(rows[2], Kind::NeedsReplication);
  rule.operandDims = {{t, k}};
  rule.resultDims = {{t, k}, {d, e, r}};
  return rule;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Reshape-like ops: dimensions are grouped where the products agree; a
/// group of one input and one output dimension is one factor; when one side
/// of a group is a single dimension, it splits with the major dimension of
/// the other side; other dimensions move whole.
static ShardingRule reshapeRule(Operation *op) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), out = shapeOf(op->getResult(0));
  SmallVector<int64_t> inDims(in.size(), -1), outDims(out.size(), -1);
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Size-1 dimensions form no group.
    if (i < in.size() && in[i] == 1 && (o >= out.size() || out[o] != 1)) {
      ++i;
      continue;
    }
    if (o < out.size() && out[o] == 1 && (i >= in.size() || in[i] != 1)) {
      ++o;
      continue;
    }
    if (i >= in.size() || o >= out.size())
      break;
    size_t i0 = i, o0 = o;
    int64_t pi = in[i++], po = out[o++];
    while (pi != po) {
      if (pi < po && i < in.size())
        pi *= in[i++];
      else if (po < pi && o < out.size())
        po *= out[o++];
      else
        break;
    }
    if (pi != po)
      break;
    size_t ni = i - i0, no = o - o0;
    if (ni == 1 || no == 1) {
      // The single dimension splits with the other side's major dimension.
      int64_t f = rule.addFactor(ni == 1 ? out[o0] : in[i0]);
      inDims[i0] = f;
      outDims[o0] = f;
    }
  }
  rule.operandDims = {inDims};
  rule.resultDims = {outDims};
  return rule;
}

ShardingRule ReshapeOp::getShardingRule() { return reshapeRule(*this); }

Value hpc::addGemmBias(OpBuilder &b, Location loc, GemmOp gemm, Value product, Value c) {
  double beta = gemm.getBeta().convertToDouble();
  if (beta != 1.0) {
    auto ct = cast<RankedTensorType>(c.getType());
    Value scale = ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, ct.getElementType()),
                                       b.getFloatAttr(ct.getElementType(), beta)));
    c = MulOp::create(b, loc, ct, c, scale);
  }
  return AddOp::create(b, loc, product.getType(), product, c);
}

void hpc::setLocalResultShape(Operation *op, ArrayRef<int64_t> shape) {
  Builder b(op->getContext());
  if (isa<ReshapeOp, ExpandOp>(op))
    op->setAttr("shape", b.getDenseI64ArrayAttr(shape));
  else if (isa<ResizeOp>(op))
    op->setAttr("sizes", b.getDenseI64ArrayAttr(shape));
  else if (auto slice = dyn_cast<SliceOp>(op)) {
    // Split dimensions are whole ranges (slicing needs replication).
    SmallVector<int64_t> ends(slice.getEnds());
    auto global = cast<RankedTensorType>(op->getResult(0).getType());
    for (size_t d = 0; d < ends.size(); ++d)
      if (shape[d] != global.getDimSize(d))
        ends[d] = shape[d];
    op->setAttr("ends", b.getDenseI64ArrayAttr(ends));
  }
}
ShardingRule SqueezeOp::getShardingRule() { return reshapeRule(*this); }
ShardingRule UnsqueezeOp::getShardingRule() { return reshapeRule(*this); }

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> inDims;
  for (int64_t s : in)
    inDims.push_back(rule.addFactor(s));
  SmallVector<int64_t> outDims;
  for (int64_t p : getPerm())
    outDims.push_back(inDims[p]);
  rule.operandDims = {inDims};
  rule.resultDims = {outDims};
  return rule;
}

/// Dimensions whose extent changes need replication; the others are 1:1.
static ShardingRule changedDimsRule(Operation *op, ArrayRef<bool> changed) {
  SmallVector<int64_t> replicated;
  for (auto [d, c] : llvm::enumerate(changed))
    if (c)
      replicated.push_back(d);
  ShardingRule rule = elementwiseRule(op, replicated);
  // The input's changed dimensions are whole too (their sizes differ).
  for (auto [d, c] : llvm::enumerate(changed))
    if (c)
      for (auto &dims : rule.operandDims)
        if (d < dims.size())
          dims[d] = rule.addFactor(shapeOf(op->getOperand(0))[d], Kind::NeedsReplication);
  return rule;
}

ShardingRule SliceOp::getShardingRule() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<bool> changed;
  for (size_t d = 0; d < in.size(); ++d)
    changed.push_back(!(getStarts()[d] == 0 && getEnds()[d] == in[d] && getSteps()[d] == 1));
  return changedDimsRule(*this, changed);
}

ShardingRule PadOp::getShardingRule() {
  int64_t rank = getType().getRank();
  SmallVector<bool> changed;
  for (int64_t d = 0; d < rank; ++d)
    changed.push_back(getPads()[d] != 0 || getPads()[d + rank] != 0);
  return changedDimsRule(*this, changed);
}

ShardingRule TileOp::getShardingRule() {
  SmallVector<bool> changed;
  for (int64_t r : getRepeats())
    changed.push_back(r != 1);
  return changedDimsRule(*this, changed);
}

ShardingRule ResizeOp::getShardingRule() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<bool> changed;
  for (size_t d = 0; d < in.size(); ++d)
    changed.push_back(getSizes()[d] != in[d]);
  return changedDimsRule(*this, changed);
}

ShardingRule ConcatOp::getShardingRule() {
  int64_t rank = getType().getRank();
  int64_t axis = positiveAxis(getAxis(), rank);
  ShardingRule rule = elementwiseRule(*this, {axis});
  for (auto &dims : rule.operandDims)
    dims[axis] = -1; // each input holds only a part of the axis
  return rule;
}

ShardingRule SplitOp::getShardingRule() {
  int64_t rank = cast<RankedTensorType>(getInput().getType()).getRank();
  int64_t axis = positiveAxis(getAxis(), rank);
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> inDims;
  for (int64_t d = 0; d < rank; ++d)
    inDims.push_back(rule.addFactor(in[d], d == axis ? Kind::NeedsReplication
                                                     : Kind::Parallel));
  rule.operandDims = {inDims};
  for (unsigned r = 0; r < getNumResults(); ++r) {
    SmallVector<int64_t> outDims(inDims);
    outDims[axis] = -1;
    rule.resultDims.push_back(outDims);
  }
  return rule;
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

static ShardingRule poolRule(Operation *op) {
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  SmallVector<bool> changed(rank, true);
  changed[0] = changed[1] = false;
  return changedDimsRule(op, changed);
}

ShardingRule MaxPoolOp::getShardingRule() { return poolRule(*this); }
ShardingRule AvgPoolOp::getShardingRule() { return poolRule(*this); }

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

ELEMENTWISE_RULE(VariableOp)
ELEMENTWISE_RULE(DropoutOp)

/// Every element of a mask comes from its global index: computed whole.
ShardingRule DropoutMaskOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> dims;
  for (int64_t size : shapeOf(getResult()))
    dims.push_back(rule.addFactor(size, Kind::NeedsReplication));
  rule.operandDims = {{}, {}};
  rule.resultDims = {dims};
  return rule;
}

/// An update splits like its parameter: every tensor operand of the
/// parameter's shape follows it dim by dim; the 0-d step inputs have no dims.
static ShardingRule updateRule(Operation *op, Value param) {
  ShardingRule rule;
  SmallVector<int64_t> dims;
  for (int64_t size : shapeOf(param))
    dims.push_back(rule.addFactor(size));
  for (Value v : op->getOperands())
    rule.operandDims.push_back(shapeOf(v).empty() ? SmallVector<int64_t>{} : dims);
  return rule;
}

ShardingRule SGDUpdateOp::getShardingRule() { return updateRule(*this, getParam()); }
ShardingRule AdamWUpdateOp::getShardingRule() { return updateRule(*this, getParam()); }
ShardingRule AssignOp::getShardingRule() { return updateRule(*this, getTarget()); }

/// The filter gradient sums over the batch and the output positions: a
/// split batch leaves partial sums (the data-parallel gradient reduction).
ShardingRule ConvWeightGradOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), dy = shapeOf(getGradOutput());
  int64_t n = rule.addFactor(in[0], Kind::Reduction);
  int64_t m = rule.addFactor(dy[1]);
  int64_t c = getGroup() == 1 ? rule.addFactor(in[1]) : -1;
  SmallVector<int64_t> inDims{n, c}, dyDims{n, m}, wDims{m, c};
  for (size_t d = 2; d < in.size(); ++d) {
    inDims.push_back(rule.addFactor(in[d], Kind::NeedsReplication));
    dyDims.push_back(rule.addFactor(dy[d], Kind::NeedsReplication));
    wDims.push_back(-1);
  }
  rule.operandDims = {inDims, dyDims};
  rule.resultDims = {wDims};
  return rule;
}

/// Batch and channels split freely; the windows need whole spatial dims.
static ShardingRule poolGradRule(Operation *op) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), dy = shapeOf(op->getOperand(1));
  SmallVector<int64_t> inDims{rule.addFactor(in[0]), rule.addFactor(in[1])};
  SmallVector<int64_t> dyDims = inDims;
  for (size_t d = 2; d < in.size(); ++d) {
    inDims.push_back(rule.addFactor(in[d], Kind::NeedsReplication));
    dyDims.push_back(rule.addFactor(dy[d], Kind::NeedsReplication));
  }
  rule.operandDims = {inDims, dyDims};
  rule.resultDims = {inDims};
  return rule;
}

ShardingRule MaxPoolGradOp::getShardingRule() { return poolGradRule(*this); }
ShardingRule AvgPoolGradOp::getShardingRule() { return poolGradRule(*this); }
