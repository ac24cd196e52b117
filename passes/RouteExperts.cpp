//===- RouteExperts.cpp - routed mixture-of-experts layers ----------------===//
//
// Exporters write a mixture-of-experts layer with a static dense dispatch
// (scripts/export_transformers.py for Mixtral): every expert computes every
// token, and a [tokens, experts] gate matrix, zero for the experts a token
// did not choose, weights the sum of the expert outputs:
//
//   w, i  = top_k(router probabilities)            [T, k]
//   G     = sum_k(cast(i[:, :, None] == arange(E)) * w'[:, :, None])    [T, E]
//   Y     = experts(x[None])                        [E, T, H]  (per-expert products)
//   out   = sum_E(Y * G^T[:, :, None])              [T, H]
//
// This pass computes only the chosen pairs: the tokens are routed into
// per-expert buffers of `capacity` rows (hpc.moe_route, hpc.moe_dispatch),
// the experts run on their buffers ([E, C, H], the same batched products),
// and each token's rows come back weighted by its gates (hpc.moe_gather):
//
//   out   = sum_k(moe_gather(experts(moe_dispatch(x)))[t, j] * w'[t, j])
//
// With capacity T (capacity-factor 0) no choice is dropped and the result
// equals the dense dispatch's; a factor f gives C = ceil(f k T / E) rows,
// f k T rows computed instead of E T. The experts' chain is moved as it is
// when every op in it works on each token alone (its sharding rule maps the
// token dimension of its operands and result to one parallel factor), which
// holds for the batched products, elementwise activations and slices of the
// hidden dimension; anything else leaves the layer dense.
//
// With a mesh of data-parallel ranks the routing stays the whole batch's,
// but each rank dispatches its own tokens into buffers of its own; with an
// ep axis (expert parallelism) dist.annotate pairs move them to the
// experts' ranks (one all_to_all each way once partitioned), and each rank
// runs its experts' chain on their rows of the whole batch's buffers
// (exchangeAndRun below).
//
//===----------------------------------------------------------------------===//

#include "DistSharding.h"
#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"
#include "HPC/HPCOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace hpc {
#define GEN_PASS_DEF_HPCROUTEEXPERTS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using hpc::GraphBuilder;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// `v` defined by an hpc.unsqueeze of `axis` alone; its input, or null.
Value unsqueezedAt(Value v, int64_t axis) {
  auto u = v ? v.getDefiningOp<hpc::UnsqueezeOp>() : nullptr;
  if (!u || u.getAxes().size() != 1 || u.getAxes()[0] != axis)
    return nullptr;
  return u.getInput();
}

/// A reduce_sum of the one axis `axis`, keepdims false.
bool isSumOver(Operation *op, int64_t axis) {
  auto sum = dyn_cast_or_null<hpc::ReduceSumOp>(op);
  if (!sum || sum.getKeepdims())
    return false;
  std::optional<ArrayRef<int64_t>> axes = sum.getAxes();
  return axes && axes->size() == 1 && (*axes)[0] == axis;
}

/// The only user of `v` when it is an op of one result, or null.
Operation *onlyUser(Value v) {
  Operation *user = v && v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  return user && user->getNumResults() == 1 ? user : nullptr;
}

/// The other operand of a binary op `op` that reads `v`.
Value otherOperand(Operation *op, Value v) {
  if (op->getNumOperands() != 2)
    return nullptr;
  return op->getOperand(0) == v ? op->getOperand(1) : op->getOperand(0);
}

/// A constant [0, 1, ..., n-1] of integers.
bool isIota(Value v, int64_t n) {
  auto c = v ? v.getDefiningOp<hpc::ConstantOp>() : nullptr;
  auto values = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
  if (!values || values.getType().getRank() != 1 || values.getNumElements() != n)
    return false;
  int64_t i = 0;
  for (const APInt &x : values)
    if (x.getSExtValue() != i++)
      return false;
  return true;
}

/// One dense-dispatch layer found from its top_k.
struct DenseLayer {
  hpc::TopKOp topk;
  Value gates;      ///< w' [T, k]: the weights the gate matrix is built from
  Value tokens;     ///< x [T, H]
  Value expertOut;  ///< Y [E, T, H]
  Operation *sum;   ///< out = sum_E(...) [T, H]
  SmallVector<Operation *> chain; ///< x[None] -> Y, in program order
  int64_t numExperts = 0;
};

/// The gate matrix G [T, E] built from the top-k indices: the weights w'
/// it carries, or null.
Value matchGateMatrix(hpc::TopKOp topk, int64_t numExperts, Value &matrix) {
  Value idx = topk.getIndices();
  Operation *unsq = onlyUser(idx);
  if (!unsq || unsqueezedAt(unsq->getResult(0), 2) != idx)
    return nullptr;
  auto eq = dyn_cast_or_null<hpc::EqualOp>(onlyUser(unsq->getResult(0)));
  if (!eq || !isIota(otherOperand(eq, unsq->getResult(0)), numExperts))
    return nullptr;
  auto cast = dyn_cast_or_null<hpc::CastOp>(onlyUser(eq.getResult()));
  if (!cast)
    return nullptr;
  auto mul = dyn_cast_or_null<hpc::MulOp>(onlyUser(cast.getResult()));
  if (!mul)
    return nullptr;
  Value w = unsqueezedAt(otherOperand(mul, cast.getResult()), 2);
  if (!w || shapeOf(w) != shapeOf(idx))
    return nullptr;
  Operation *sum = onlyUser(mul.getResult());
  if (!isSumOver(sum, 1))
    return nullptr;
  matrix = sum->getResult(0);
  return w;
}

/// The ops from x[None] to Y (those on a path from the one x[None], an
/// unsqueeze of a [tokens, hidden] value, to Y), if each works on every
/// token alone; the entry x[None] is `entry`.
bool collectChain(Value y, int64_t tokens, hpc::UnsqueezeOp &entry,
                  SmallVector<Operation *> &chain) {
  // Backwards from Y to the entry, weights and constants.
  llvm::SetVector<Operation *> above;
  SmallVector<Value> work{y};
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || above.contains(op) || isa<hpc::WeightOp, hpc::ConstantOp>(op))
      continue;
    auto u = dyn_cast<hpc::UnsqueezeOp>(op);
    if (u && unsqueezedAt(u.getResult(), 0) && shapeOf(u.getInput()).size() == 2) {
      if (entry && entry != u)
        return false; // one input x only
      entry = u;
      continue;
    }
    above.insert(op);
    llvm::append_range(work, op->getOperands());
  }
  if (!entry)
    return false;
  // Of those, the ones the entry reaches.
  llvm::SmallPtrSet<Operation *, 16> ops;
  SmallVector<Operation *> front{entry};
  while (!front.empty()) {
    Operation *op = front.pop_back_val();
    for (Operation *user : op->getUsers())
      if (above.contains(user) && ops.insert(user).second)
        front.push_back(user);
  }
  for (Operation *op : ops) {
    if (op->getNumResults() != 1 || !isa<RankedTensorType>(op->getResult(0).getType()) ||
        !isa<hpc::ShardingRuleInterface>(op))
      return false;
    ArrayRef<int64_t> out = shapeOf(op->getResult(0));
    if (out.size() != 3 || out[1] != tokens)
      return false;
    // Only a slice's ends attribute spells the token count (fixed when it
    // is moved); any other shape-carrying op cannot move.
    if (!isa<hpc::SliceOp>(op) &&
        llvm::any_of(op->getAttrs(), [](NamedAttribute a) {
          return isa<DenseI64ArrayAttr, ArrayAttr, DenseElementsAttr>(a.getValue());
        }))
      return false;
    if (auto slice = dyn_cast<hpc::SliceOp>(op))
      if (slice.getStarts()[1] != 0 || slice.getSteps()[1] != 1 ||
          slice.getEnds()[1] < tokens)
        return false;
    // The tokens are one parallel factor of the op, in exactly the
    // operands that come from the entry; so are the experts (row c of two
    // experts' buffers holds different tokens: nothing may mix them), in
    // those operands unless they broadcast along it (x[None]).
    hpc::ShardingRule rule = cast<hpc::ShardingRuleInterface>(op).getShardingRule();
    if (rule.operandDims.size() != op->getNumOperands() || rule.resultDims.empty() ||
        rule.resultDims[0].size() != 3)
      return false;
    int64_t f = rule.resultDims[0][1], e = rule.resultDims[0][0];
    auto parallel = [&](int64_t factor) {
      return factor >= 0 && rule.factors[factor].kind == hpc::FactorKind::Parallel;
    };
    if (!parallel(f) || !parallel(e))
      return false;
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      Operation *def = operand.getDefiningOp();
      bool fromEntry = def == entry.getOperation() || (def && ops.contains(def));
      const SmallVector<int64_t> &dims = rule.operandDims[i];
      if (fromEntry != llvm::is_contained(dims, f))
        return false;
      if (fromEntry && dims.size() == 3 && dims[0] != e && shapeOf(operand)[0] != 1)
        return false;
    }
  }
  chain.assign(ops.begin(), ops.end());
  llvm::sort(chain, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return !chain.empty() && chain.back() == y.getDefiningOp();
}

std::optional<DenseLayer> matchDenseLayer(hpc::TopKOp topk) {
  ArrayRef<int64_t> probs = shapeOf(topk.getInput());
  if (probs.size() != 2 || (topk.getAxis() != 1 && topk.getAxis() != -1) || !topk.getLargest())
    return std::nullopt;
  DenseLayer layer;
  layer.topk = topk;
  layer.numExperts = probs[1];
  int64_t tokens = probs[0];
  Value matrix;
  layer.gates = matchGateMatrix(topk, layer.numExperts, matrix);
  if (!layer.gates)
    return std::nullopt;
  // G^T[:, :, None] times Y, summed over the experts.
  auto transpose = dyn_cast_or_null<hpc::TransposeOp>(onlyUser(matrix));
  if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{1, 0})
    return std::nullopt;
  Operation *unsq = onlyUser(transpose.getResult());
  if (!unsq || unsqueezedAt(unsq->getResult(0), 2) != transpose.getResult())
    return std::nullopt;
  auto mul = dyn_cast_or_null<hpc::MulOp>(onlyUser(unsq->getResult(0)));
  if (!mul)
    return std::nullopt;
  layer.expertOut = otherOperand(mul, unsq->getResult(0));
  ArrayRef<int64_t> y = shapeOf(layer.expertOut);
  if (y.size() != 3 || y[0] != layer.numExperts || y[1] != tokens ||
      shapeOf(mul.getResult()) != y)
    return std::nullopt;
  layer.sum = onlyUser(mul.getResult());
  if (!isSumOver(layer.sum, 0))
    return std::nullopt;
  hpc::UnsqueezeOp entry;
  if (!collectChain(layer.expertOut, tokens, entry, layer.chain))
    return std::nullopt;
  layer.tokens = entry.getInput();
  if (shapeOf(layer.tokens)[0] != tokens || shapeOf(layer.tokens)[1] != y[2])
    return std::nullopt;
  // The chain must start at x[None]: its first op reads the entry.
  layer.chain.insert(layer.chain.begin(), entry);
  return layer;
}

/// Rows of each expert's buffer for `tokens` tokens routed top-k among
/// `experts`: all tokens (no drop) for factor 0.
int64_t capacityOf(double factor, int64_t tokens, int64_t k, int64_t experts) {
  if (factor <= 0)
    return tokens;
  double rows = std::ceil(factor * double(k) * double(tokens) / double(experts));
  return std::clamp<int64_t>(int64_t(rows), 1, tokens);
}

/// The experts' chain again, on `buffer` ([E, rows, H]) instead of
/// [E or 1, T, .]: its result Y.
Value cloneChain(OpBuilder &b, const DenseLayer &layer, Value buffer) {
  int64_t E = shapeOf(buffer)[0], rows = shapeOf(buffer)[1];
  IRMapping map;
  map.map(layer.chain.front()->getResult(0), buffer);
  for (Operation *op : ArrayRef(layer.chain).drop_front()) {
    Operation *copy = b.clone(*op, map);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = E;
    shape[1] = rows;
    copy->getResult(0).setType(RankedTensorType::get(shape, type.getElementType()));
    if (auto slice = dyn_cast<hpc::SliceOp>(copy)) {
      SmallVector<int64_t> ends(slice.getEnds());
      ends[1] = rows;
      slice.setEnds(ends);
    }
  }
  return map.lookup(layer.expertOut);
}

/// How the tokens and experts are split: `groups` consecutive blocks of
/// tokens (the data-parallel ranks, dp major, ep minor), the experts over
/// `ep` ranks.
struct ExpertMesh {
  int64_t ep = 1, dp = 1;
  int64_t groups() const { return ep * dp; }
};

/// `v` ([groups or dp slices, E, ...]) constrained to the groups' layout
/// (`source`: each data-parallel rank holds its own rows) or the experts'
/// (dim 0 over dp, the experts over ep).
Value annotateLayout(GraphBuilder &g, Value v, const ExpertMesh &m, bool source) {
  hpc::dist::Sharding s =
      hpc::dist::Sharding::replicated(cast<RankedTensorType>(v.getType()).getRank());
  if (m.dp > 1)
    s.dims[0].push_back("dp");
  if (m.ep > 1)
    (source ? s.dims[0] : s.dims[1]).push_back("ep");
  return g.builder().create<hpc::dist::AnnotateOp>(g.location(), v.getType(), v,
                                                   s.toAttr(v.getContext()));
}

/// `v` moved from the groups' ranks to the experts' (`toExperts`) or back:
/// one all_to_all over ep once partitioned; nothing without ep.
Value exchange(GraphBuilder &g, Value v, const ExpertMesh &m, bool toExperts) {
  if (m.ep == 1)
    return v;
  return annotateLayout(g, annotateLayout(g, v, m, /*source=*/toExperts), m,
                        /*source=*/!toExperts);
}

Value dispatch(GraphBuilder &g, Value input, Value slots, int64_t experts, int64_t capacity) {
  return g.op<hpc::MoEDispatchOp>({input, slots}, {g.i64("num_experts", experts),
                                                   g.i64("capacity", capacity)});
}

/// Y's rows for each token's choices, [T, k, H'], with the experts split
/// over `m.ep` ranks: each group's tokens go to its own [E, Cp] buffers,
/// which an all_to_all over ep brings to the experts' ranks; there they
/// are compacted into the slice's rows of the whole batch's buffers
/// ([E, D * Cd]), the chain runs, and the rows travel back alike. Under
/// data parallelism alone (ep 1) nothing travels: each dp rank runs every
/// expert on its own tokens' rows (min(C, its tokens) an expert) instead
/// of on the whole batch's buffers.
Value exchangeAndRun(GraphBuilder &g, const DenseLayer &layer, Value slots, int64_t C,
                     const ExpertMesh &m) {
  OpBuilder &b = g.builder();
  int64_t T = shapeOf(layer.tokens)[0], H = shapeOf(layer.tokens)[1];
  int64_t k = shapeOf(slots)[1], E = layer.numExperts;
  int64_t N = m.groups(), D = m.dp, G = m.ep, Tl = T / N;
  int64_t Cp = std::min(C, Tl), Cd = std::min(C, G * Cp);
  auto i64 = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, b.getI64Type());
  };
  auto plan = b.create<hpc::MoEExchangeSlotsOp>(
      g.location(), TypeRange{i64({T, k}), i64({D, E, Cd})}, slots, b.getI64IntegerAttr(E),
      b.getI64IntegerAttr(C), b.getI64IntegerAttr(N), b.getI64IntegerAttr(G),
      b.getI64IntegerAttr(Cp));
  // Computed whole on every rank; each takes its group's slots and its
  // experts' rows (a free slice, and the ops that read them stay split).
  Value local = annotateLayout(g, g.reshape(plan.getLocal(), {N, Tl, k}), m, /*source=*/true);
  Value rows = annotateLayout(g, g.reshape(plan.getRows(), {D, E, Cd, 1}), m, /*source=*/false);
  // Each group's buffers, then the experts' ranks' [D, E, G * Cp] rows.
  Value sent = dispatch(g, g.reshape(layer.tokens, {N, Tl, H}), local, E, Cp);
  Value got = exchange(g, sent, m, /*toExperts=*/true);
  got = g.transpose(g.reshape(got, {D, G, E, Cp, H}), {0, 2, 1, 3, 4});
  got = g.reshape(got, {D, E, 1, G * Cp, H});
  // Compacted into the whole batch's rows, [E, D * Cd] (dp splits the rows).
  Value in = g.reshape(g.op<hpc::MoEGatherOp>({got, rows}), {D, E, Cd, H});
  in = g.reshape(g.transpose(in, {1, 0, 2, 3}), {E, D * Cd, H});
  Value y = cloneChain(b, layer, in);
  int64_t H2 = shapeOf(y)[2];
  Value out = g.transpose(g.reshape(y, {E, D, Cd, H2}), {1, 0, 2, 3});
  out = dispatch(g, g.reshape(out, {D, E, Cd, 1, H2}), rows, 1, G * Cp);
  out = g.transpose(g.reshape(out, {D, E, G, Cp, H2}), {0, 2, 1, 3, 4});
  Value back = exchange(g, g.reshape(out, {N, E, Cp, H2}), m, /*toExperts=*/false);
  return g.reshape(g.op<hpc::MoEGatherOp>({back, local}), {T, k, H2});
}

void route(DenseLayer &layer, double capacityFactor, const ExpertMesh &mesh) {
  int64_t tokens = shapeOf(layer.tokens)[0];
  int64_t k = shapeOf(layer.gates)[1];
  int64_t E = layer.numExperts;
  int64_t C = capacityOf(capacityFactor, tokens, k, E);
  Operation *out = layer.sum;
  OpBuilder b(out);
  Location loc = layer.topk.getLoc();
  Type i64 = b.getI64Type();
  Value idx = layer.topk.getIndices();
  auto routed = b.create<hpc::MoERouteOp>(
      loc, TypeRange{RankedTensorType::get({tokens, k}, i64), RankedTensorType::get({E}, i64)},
      idx, b.getI64IntegerAttr(E), b.getI64IntegerAttr(C));
  Value slots = routed.getSlots();
  Type elem = cast<RankedTensorType>(layer.tokens.getType()).getElementType();
  GraphBuilder g(b, loc);
  Value rows;
  if (mesh.groups() > 1 && tokens % mesh.groups() == 0) {
    rows = exchangeAndRun(g, layer, slots, C, mesh);
  } else {
    Value buffer = dispatch(g, layer.tokens, slots, E, C);
    rows = g.op<hpc::MoEGatherOp>({cloneChain(b, layer, buffer), slots});
  }
  Value w = b.create<hpc::UnsqueezeOp>(loc, RankedTensorType::get({tokens, k, 1}, elem),
                                       layer.gates, b.getDenseI64ArrayAttr({2}));
  Value weighted = b.create<hpc::MulOp>(loc, rows.getType(), rows, w);
  Value sum = b.create<hpc::ReduceSumOp>(loc, out->getResult(0).getType(), weighted,
                                         b.getDenseI64ArrayAttr({1}), b.getBoolAttr(false));
  out->getResult(0).replaceAllUsesWith(sum);
  // The dense dispatch is dead now (its gate matrix and the experts on every
  // token): erase it, users first.
  SmallVector<Operation *> dead{out};
  while (!dead.empty()) {
    Operation *op = dead.pop_back_val();
    if (!op->use_empty() || !isPure(op))
      continue;
    SmallVector<Value> operands(op->getOperands());
    op->erase();
    for (Value v : operands)
      if (Operation *def = v.getDefiningOp(); def && def->use_empty())
        dead.push_back(def);
  }
}

} // namespace

std::string hpc::routingMesh(llvm::StringRef mesh, int64_t microBatches) {
  if (meshAxisSize(mesh, "ep") > 1 ||
      (meshAxisSize(mesh, "dp") > 1 && meshAxisSize(mesh, "pp") <= 1 && microBatches <= 1))
    return mesh.str();
  return "";
}

namespace {

struct RouteExperts : hpc::impl::HPCRouteExpertsBase<RouteExperts> {
  using HPCRouteExpertsBase::HPCRouteExpertsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (capacityFactor < 0) {
      module.emitError() << "moe-capacity-factor must be >= 0 (0: no token is "
                            "dropped), not "
                         << capacityFactor;
      return signalPassFailure();
    }
    ExpertMesh split;
    hpc::dist::MeshAttr meshAttr;
    if (!mesh.empty()) {
      std::string error;
      auto parsed = hpc::dist::parseMesh(&getContext(), mesh, error);
      if (failed(parsed)) {
        module.emitError(error);
        return signalPassFailure();
      }
      meshAttr = *parsed;
      auto size = [&](StringRef axis) {
        int64_t i = meshAttr.axisIndex(axis);
        return i < 0 ? int64_t(1) : meshAttr.getSizes()[i];
      };
      split.ep = size("ep");
      split.dp = size("dp");
    }
    SmallVector<DenseLayer> layers;
    module.walk([&](hpc::TopKOp topk) {
      if (std::optional<DenseLayer> layer = matchDenseLayer(topk))
        layers.push_back(std::move(*layer));
    });
    if (split.ep > 1) {
      if (layers.empty()) {
        module.emitError() << "the mesh's ep=" << split.ep
                           << " splits experts, but the model has no mixture-of-experts "
                              "layer that routes (see --moe-dispatch)";
        return signalPassFailure();
      }
      for (DenseLayer &layer : layers) {
        int64_t tokens = shapeOf(layer.tokens)[0];
        if (layer.numExperts % split.ep != 0) {
          layer.topk.emitError() << "ep=" << split.ep << " does not divide the "
                                 << layer.numExperts << " experts";
          return signalPassFailure();
        }
        if (tokens % split.groups() != 0) {
          layer.topk.emitError() << "the " << tokens << " tokens of a mixture-of-experts "
                                 << "layer do not split over dp*ep = " << split.groups()
                                 << " ranks";
          return signalPassFailure();
        }
      }
    }
    // The annotations name the mesh's axes.
    if (split.groups() > 1 && !layers.empty())
      module->setAttr("dist.mesh", meshAttr);
    for (DenseLayer &layer : layers)
      route(layer, capacityFactor, split);
  }
};

} // namespace
