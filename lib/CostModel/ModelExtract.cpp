//===- ModelExtract.cpp - hpc IR -> layer sequence ------------------------===//
//
// Implements ModelExtract.h: activations, cut points, repeated-layer
// detection, and per-layer figures with a Megatron-style tensor-parallel
// layout found by propagating "replicated" / "sharded" through the layer.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/ModelExtract.h"
#include "hpc/CostModel/OpCost.h"

#include "HPC/HPCOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>
#include <numeric>

using namespace mlir;
using namespace hpc::cost;

namespace {

/// Weight GEMMs with fewer outputs than this are not split by tensor
/// parallelism (MoE routers, small classifiers).
constexpr int64_t kMinSplitDim = 128;

int64_t elementsOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

bool isView(Operation *op) { return hpc::isViewOp(op); }

/// True when `v` is a one-hot selection matrix (possibly transposed,
/// reshaped, cast or scaled by gate values): a product with it is a gather or
/// scatter of tokens (MoE dispatch / combine), not arithmetic.
bool isOneHotDerived(Value v, int depth = 0) {
  Operation *d = v.getDefiningOp();
  if (!d || depth > 8)
    return false;
  if (isa<hpc::OneHotOp>(d))
    return true;
  if (isa<hpc::ReshapeOp, hpc::SqueezeOp, hpc::UnsqueezeOp, hpc::TransposeOp,
          hpc::CastOp>(d))
    return isOneHotDerived(d->getOperand(0), depth + 1);
  if (isa<hpc::MulOp, hpc::WhereOp, hpc::ReduceSumOp>(d))
    for (Value o : d->getOperands())
      if (isOneHotDerived(o, depth + 1))
        return true;
  return false;
}

/// One piece of the op sequence between cut points.
struct Segment {
  std::vector<Operation *> ops;
  Value output;
  int signature = 0;
};

/// A layer as a range of segments.
struct LayerRange {
  int begin, end;
  bool repeated;
};

/// The longest periodic run in s[lo, hi): (period, start, count).
struct Run {
  int period = 0, start = 0, count = 0;
  int coverage() const { return period * count; }
};

Run bestRun(const std::vector<int> &s, int lo, int hi) {
  Run best;
  int n = hi - lo;
  for (int p = 1; p <= std::min(64, n / 2); ++p) {
    for (int start = lo; start + 2 * p <= hi; ++start) {
      int count = 1;
      while (start + (count + 1) * p <= hi &&
             std::equal(s.begin() + start, s.begin() + start + p,
                        s.begin() + start + count * p))
        ++count;
      if (count >= 2 && count * p > best.coverage())
        best = {p, start, count};
    }
  }
  return best;
}

void splitLayers(const std::vector<int> &s, int lo, int hi, bool anyRepetition,
                 std::vector<LayerRange> &out) {
  if (lo >= hi)
    return;
  Run r = bestRun(s, lo, hi);
  if (r.count == 0) {
    if (anyRepetition)
      out.push_back({lo, hi, false});
    else
      for (int i = lo; i < hi; ++i)
        out.push_back({i, i + 1, false});
    return;
  }
  splitLayers(s, lo, r.start, anyRepetition, out);
  for (int c = 0; c < r.count; ++c)
    out.push_back({r.start + c * r.period, r.start + (c + 1) * r.period, true});
  splitLayers(s, r.start + r.count * r.period, hi, anyRepetition, out);
}

/// Computes one layer's figures.
class LayerBuilder {
public:
  LayerBuilder(const llvm::DenseSet<Value> &act, double irBatch,
               llvm::DenseSet<Operation *> &countedWeights,
               const llvm::DenseSet<Value> &results)
      : act(act), irBatch(irBatch), countedWeights(countedWeights),
        results(results) {}

  void build(const std::vector<Operation *> &ops, Value input, Value output,
             Layer &layer) {
    L = &layer;
    for (Operation *op : ops)
      if (isa<hpc::TopKOp>(op))
        hasTopK = true;
    formRegions(ops);
    for (Operation *op : ops)
      visit(op);
    finishRegions();
    for (Operation *op : ops)
      for (Value r : op->getResults())
        if (results.contains(r)) {
          double e = perSample(r);
          if (isSharded(r))
            L->savedFp32 += e;
          else
            L->savedReplicated += 2 * e; // fp32: two 16-bit elements
        }
    L->inputElems = input ? perSample(input) : 0;
    if (output) {
      L->outputElems = perSample(output);
      if (isSharded(output) && !results.contains(output)) {
        L->tpForwardAllReduce += perSample(output); // gather at the boundary
        L->tpForwardCollectives += 1;
      } else if (isSharded(output)) {
        L->tpResultGather += perSample(output); // the logits, for the loss
      }
    }
    L->tpDivisor = tpDivisor;
  }

  bool hasTopK = false;
  std::vector<std::string> names;

private:
  double perSample(Value v) const { return double(elementsOf(v)) / irBatch; }
  bool isAct(Value v) const { return act.contains(v); }
  bool isSharded(Value v) const {
    auto it = sharded.find(v);
    return it != sharded.end() && it->second;
  }
  void constrain(int64_t d) {
    if (d > 0)
      tpDivisor = std::gcd(tpDivisor, d);
  }
  void save(Value v) {
    if (!isAct(v) || !savedSet.insert(v).second)
      return;
    (isSharded(v) ? L->savedSharded : L->savedReplicated) += perSample(v);
  }
  bool feedsResult(Value v, int depth = 0) const {
    if (results.contains(v))
      return true;
    if (depth > 4)
      return false;
    for (Operation *user : v.getUsers())
      if (isView(user) || isa<hpc::TransposeOp, hpc::CastOp>(user))
        if (feedsResult(user->getResult(0), depth + 1))
          return true;
    return false;
  }

  /// Records the parameters (hpc.weight ops of float type) `v` is computed
  /// from, the first time any layer uses them.
  void noteWeights(Value v, bool shardedUse, bool expertUse) {
    llvm::SmallVector<Value> work{v};
    llvm::DenseSet<Operation *> seen;
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (isAct(x))
        continue;
      Operation *d = x.getDefiningOp();
      if (!d || !seen.insert(d).second)
        continue;
      if (auto w = dyn_cast<hpc::WeightOp>(d)) {
        auto t = cast<RankedTensorType>(w.getType());
        // Scalars (exporters' constants) are not parameters.
        if (!isa<FloatType>(t.getElementType()) || t.getRank() == 0)
          continue;
        if (!countedWeights.insert(d).second) {
          // An earlier layer's parameter (its gradients meet across stages).
          if (!ownWeights.contains(d) && tiedWeights.insert(d).second) {
            L->paramsTied += double(t.getNumElements());
            // Read in pieces here and whole by its lookup, it is held
            // whole, and the gradient's pieces computed here are gathered.
            if (shardedUse) {
              L->tpGradGatherElems += double(t.getNumElements());
              L->tpGradGathers += 1;
            }
          }
          continue;
        }
        ownWeights.insert(d);
        L->paramTensors += 1;
        double e = double(t.getNumElements());
        bool expert = expertUse ||
                      (L->numExperts > 0 && t.getRank() >= 2 &&
                       t.getDimSize(0) == L->numExperts);
        if (expert)
          (shardedUse ? L->paramsExpertSharded : L->paramsExpertReplicated) += e;
        else
          (shardedUse ? L->paramsSharded : L->paramsReplicated) += e;
        tensorOf[d] = L->tensors.size();
        L->tensors.push_back({e, shardedUse, expert});
        names.push_back(w.getName().str());
        continue;
      }
      for (Value o : d->getOperands())
        work.push_back(o);
    }
  }

  /// Marks this layer's split parameter `v` is computed from as held whole
  /// by the compiled step, its gradient gathered over tp in `gathers`
  /// pieces (0: computed whole on every rank).
  void holdWhole(Value v, double gathers) {
    Operation *d = v.getDefiningOp();
    while (d && isView(d))
      d = d->getOperand(0).getDefiningOp();
    auto it = tensorOf.find(d);
    if (it == tensorOf.end())
      return;
    ParamTensor &t = L->tensors[it->second];
    if (!t.tpSharded || t.tpWhole || t.expert)
      return;
    t.tpWhole = true;
    L->paramsTpWhole += t.elems;
    if (gathers > 0) {
      L->tpGradGatherElems += t.elems;
      L->tpGradGathers += gathers;
    }
  }

  void visit(Operation *op) {
    if (auto split = dyn_cast<hpc::SplitOp>(op)) {
      // A fused projection split into Q, K and V: each rank reads three
      // column blocks of the weight, not one piece, so dist-partition holds
      // it whole and gathers its gradient, a gather per block (the bias's
      // blocks in one).
      if (isSharded(split.getInput()))
        if (std::optional<hpc::SplitProjection> p = hpc::matchSplitProjection(split)) {
          holdWhole(p->weight, double(split.getNumResults()));
          if (p->bias)
            holdWhole(p->bias, 1);
        }
    }
    bool anySharded = false;
    for (Value o : op->getOperands())
      anySharded |= isAct(o) && isSharded(o);
    if (auto mm = dyn_cast<hpc::MatMulOp>(op)) {
      gemm(op, mm.getLhs(), mm.getRhs(), false, false, Value());
      return;
    }
    if (auto g = dyn_cast<hpc::GemmOp>(op)) {
      gemm(op, g.getA(), g.getB(), g.getTransA(), g.getTransB(), g.getC());
      return;
    }
    if (auto c = dyn_cast<hpc::ConvOp>(op)) {
      conv(c);
      return;
    }
    if (auto ga = dyn_cast<hpc::GatherOp>(op)) {
      if (!isAct(ga.getInput()) && isAct(ga.getIndices())) {
        // Vocabulary-parallel embedding: each rank looks up its rows; the
        // partial results are all-reduced.
        // (Megatron-LM's; the compiled step looks up in the whole table.)
        Value r = ga.getResult();
        sharded[r] = false;
        L->tpLookupAllReduce += perSample(r);
        L->tpLookupCollectives += 1;
        noteWeights(ga.getInput(), true, false);
        holdWhole(ga.getInput(), 0);
        L->otherElemsReplicated += 2 * perSample(r);
        L->kernels += 1;
        return;
      }
    }
    for (Value r : op->getResults())
      sharded[r] = anySharded;
    if (isView(op))
      return;
    for (Value o : op->getOperands())
      if (!isAct(o))
        noteWeights(o, anySharded, false);
    if (regionOf.count(op)) {
      // Part of a fused elementwise region: costed as a whole at the end.
      L->otherFlops += double(hpc::estimateFlops(op)) / irBatch;
      return;
    }
    double moved = double(hpc::estimateElementsMoved(op)) / irBatch;
    (anySharded ? L->otherElemsSharded : L->otherElemsReplicated) += moved;
    L->otherFlops += double(hpc::estimateFlops(op)) / irBatch;
    L->kernels += 1;
    saveForBackward(op);
  }

  /// What backward needs from this (non-elementwise) op.
  void saveForBackward(Operation *op) {
    if (isa<hpc::LayerNormOp, hpc::RMSNormOp, hpc::BatchNormOp,
            hpc::ReduceMaxOp, hpc::ReduceMinOp, hpc::ReduceProdOp,
            hpc::MaxPoolOp>(op))
      save(op->getOperand(0));
    else if (isa<hpc::SoftmaxOp, hpc::LogSoftmaxOp>(op))
      save(op->getResult(0));
  }

  /// Elementwise ops (the result has the shape of an activation operand;
  /// other operands broadcast).
  bool isElementwise(Operation *op) const {
    if (op->getNumResults() != 1 || isView(op))
      return false;
    if (!isa<hpc::NegOp, hpc::AbsOp, hpc::ExpOp, hpc::LogOp, hpc::SqrtOp,
             hpc::ReciprocalOp, hpc::ReluOp, hpc::SigmoidOp, hpc::TanhOp,
             hpc::ErfOp, hpc::SiluOp, hpc::SoftplusOp, hpc::HardSwishOp,
             hpc::GeluOp, hpc::LeakyReluOp, hpc::EluOp, hpc::HardSigmoidOp,
             hpc::ClipOp, hpc::CastOp, hpc::AddOp, hpc::SubOp, hpc::MulOp,
             hpc::DivOp, hpc::PowOp, hpc::MaxOp, hpc::MinOp, hpc::WhereOp>(op))
      return false;
    Type rt = op->getResult(0).getType();
    for (Value o : op->getOperands())
      if (isAct(o) && o.getType() == rt)
        return true;
    return false;
  }

  /// Linear in its activation operands: backward needs none of them.
  bool isLinear(Operation *op) const {
    if (isa<hpc::AddOp, hpc::SubOp, hpc::NegOp, hpc::CastOp>(op))
      return true;
    if (isa<hpc::MulOp, hpc::DivOp>(op))
      return !(isAct(op->getOperand(0)) && isAct(op->getOperand(1))) &&
             !(isa<hpc::DivOp>(op) && isAct(op->getOperand(1)));
    // where(c, x, y) passes gradients through; the condition gets none.
    return isa<hpc::WhereOp>(op);
  }

  int findRegion(int r) {
    while (parent[r] != r)
      r = parent[r] = parent[parent[r]];
    return r;
  }

  /// Groups chains of elementwise ops into fused regions (one kernel each,
  /// as a fusing compiler runs them): an op joins the region of an operand's
  /// producer when every user of that operand is elementwise.
  void formRegions(const std::vector<Operation *> &ops) {
    llvm::DenseSet<Operation *> inLayer(ops.begin(), ops.end());
    for (Operation *op : ops) {
      if (!isElementwise(op))
        continue;
      int mine = int(parent.size());
      parent.push_back(mine);
      regionOf[op] = mine;
      regionOrder.push_back(op);
      for (Value o : op->getOperands()) {
        Operation *d = o.getDefiningOp();
        if (!isAct(o) || !d || !regionOf.count(d) || !inLayer.count(d))
          continue;
        bool internal = true;
        for (Operation *user : o.getUsers())
          internal &= inLayer.count(user) && isElementwise(user);
        if (internal)
          parent[findRegion(mine)] = findRegion(regionOf[d]);
      }
    }
  }

  /// Costs the regions: inputs read and outputs written once; backward keeps
  /// the region's inputs when it has a nonlinear op (and recomputes the
  /// rest, as fused kernels do).
  void finishRegions() {
    struct Region {
      llvm::SetVector<Value> inputs;
      double outputs = 0, weights = 0;
      bool nonlinear = false, shardedOut = false;
    };
    std::map<int, Region> regions;
    // Program order, so that equal layers add up in the same order.
    for (Operation *op : regionOrder) {
      Region &r = regions[findRegion(regionOf[op])];
      r.nonlinear |= !isLinear(op);
      for (Value o : op->getOperands()) {
        Operation *d = o.getDefiningOp();
        bool inside = d && regionOf.count(d) &&
                      findRegion(regionOf[d]) == findRegion(regionOf[op]);
        if (inside)
          continue;
        if (isAct(o))
          r.inputs.insert(o);
        else
          r.weights += perSample(o);
      }
      Value res = op->getResult(0);
      bool usedOutside = results.contains(res);
      for (Operation *user : res.getUsers()) {
        auto it = regionOf.find(user);
        usedOutside |= it == regionOf.end() ||
                       findRegion(it->second) != findRegion(regionOf[op]);
      }
      if (usedOutside) {
        r.outputs += perSample(res);
        r.shardedOut |= isSharded(res);
      }
    }
    for (auto &[id, r] : regions) {
      (void)id;
      double moved = r.outputs + r.weights;
      for (Value in : r.inputs)
        moved += perSample(in);
      (r.shardedOut ? L->otherElemsSharded : L->otherElemsReplicated) += moved;
      L->kernels += 1;
      if (r.nonlinear)
        for (Value in : r.inputs)
          save(in);
    }
  }

  void gemm(Operation *op, Value A, Value B, bool tA, bool tB, Value C) {
    auto at = cast<RankedTensorType>(A.getType());
    auto bt = cast<RankedTensorType>(B.getType());
    Value r = op->getResult(0);
    int64_t m, k, n;
    double batchA = 1, batchB = 1, batchOut = 1;
    if (isa<hpc::GemmOp>(op)) {
      m = at.getDimSize(tA ? 1 : 0);
      k = at.getDimSize(tA ? 0 : 1);
      n = bt.getDimSize(tB ? 0 : 1);
    } else {
      m = at.getRank() >= 2 ? at.getDimSize(at.getRank() - 2) : 1;
      k = at.getDimSize(at.getRank() - 1);
      n = bt.getRank() >= 2 ? bt.getDimSize(bt.getRank() - 1) : 1;
      batchA = double(at.getNumElements()) / double(m * k);
      batchB = double(bt.getNumElements()) / double(k * n);
      batchOut = double(elementsOf(r)) / double(m * n);
    }
    bool aAct = isAct(A), bAct = isAct(B);
    L->kernels += 1;
    if (C && !isAct(C)) // the bias add is fused into the GEMM
      noteWeights(C, false, false);
    if (aAct && bAct) {
      if (isOneHotDerived(A) || isOneHotDerived(B)) {
        // Token dispatch / combine: a gather or scatter, not arithmetic.
        bool s = isSharded(A) || isSharded(B);
        sharded[r] = s;
        (s ? L->otherElemsSharded : L->otherElemsReplicated) +=
            2 * perSample(r);
        return;
      }
      Gemm g;
      g.scalesBatch = true;
      g.batch = batchOut / irBatch;
      g.m = double(m);
      g.k = double(k);
      g.n = double(n);
      bool sa = isSharded(A), sb = isSharded(B);
      if (sa && sb) {
        g.split = Gemm::Split::Batch;
        sharded[r] = true;
        constrain(int64_t(g.batch));
      } else {
        g.split = Gemm::Split::None;
        sharded[r] = false;
        if (sa)
          L->tpForwardAllReduce += perSample(A);
        if (sb)
          L->tpForwardAllReduce += perSample(B);
        L->tpForwardCollectives += double(sa) + double(sb);
      }
      save(A);
      save(B);
      L->gemms.push_back(g);
      return;
    }
    // A product with a weight: x[.., m, k] * W[k, n] (or W * x).
    Value x = aAct ? A : B, w = aAct ? B : A;
    double weightBatch = aAct ? batchB : batchA;
    int64_t outDim = aAct ? n : m, rows = aAct ? m : n;
    Gemm g;
    g.batch = weightBatch;
    g.k = double(k);
    g.n = double(outDim);
    g.m = batchOut / weightBatch * double(rows) / irBatch;
    auto wt = cast<RankedTensorType>(w.getType());
    if (weightBatch > 1 && hasTopK && wt.getRank() >= 3) {
      g.expert = true;
      L->numExperts = std::max<int64_t>(L->numExperts, wt.getDimSize(0));
    }
    linear(x, w, r, g, outDim, k);
  }

  /// A convolution as the implicit GEMM it runs as: [output pixels,
  /// Cin/groups * window] x [Cin/groups * window, Cout]; tensor parallelism
  /// splits output channels (column) or input channels (row).
  void conv(hpc::ConvOp op) {
    L->kernels += 1;
    Value x = op.getInput(), w = op.getWeight(), r = op.getResult();
    if (!isAct(x) || isAct(w)) { // not a layer with a weight: data movement
      sharded[r] = isAct(x) && isSharded(x);
      L->otherElemsReplicated += double(hpc::estimateElementsMoved(op)) / irBatch;
      return;
    }
    auto wt = cast<RankedTensorType>(w.getType());
    int64_t cout = wt.getDimSize(0);
    int64_t k = wt.getNumElements() / cout;
    Gemm g;
    g.k = double(k);
    g.n = double(cout);
    g.m = double(elementsOf(r)) / double(cout) / irBatch;
    if (Value bias = op.getBias())
      if (!isAct(bias))
        noteWeights(bias, !isSharded(x) && cout >= kMinSplitDim, false);
    linear(x, w, r, g, cout, k);
  }

  /// Records a product of activation `x` with weight `w` (result `r`) and
  /// its tensor-parallel layout.
  void linear(Value x, Value w, Value r, Gemm g, int64_t outDim, int64_t k) {
    if (!isSharded(x) && outDim < kMinSplitDim) {
      // A small projection (a router, a few-class classifier): replicated.
      g.split = Gemm::Split::None;
      sharded[r] = false;
      noteWeights(w, false, false);
      save(x);
      L->gemms.push_back(g);
      return;
    }
    if (!isSharded(x)) {
      // Column-parallel: outputs split; the input's gradient is all-reduced.
      g.split = Gemm::Split::N;
      sharded[r] = true;
      if (!feedsResult(r))
        constrain(outDim); // a vocabulary projection is padded instead
      if (bwdReduced.insert(x).second) {
        L->tpBackwardAllReduce += perSample(x);
        L->tpBackwardCollectives += 1;
      }
      if (g.expert && dispatched.insert(x).second)
        L->moeAllToAll += perSample(x);
    } else {
      // Row-parallel: the reduction is split; outputs are all-reduced.
      g.split = Gemm::Split::K;
      sharded[r] = false;
      constrain(k);
      L->tpForwardAllReduce += perSample(r);
      L->tpForwardCollectives += 1;
    }
    noteWeights(w, true, g.expert);
    save(x);
    L->gemms.push_back(g);
  }

  const llvm::DenseSet<Value> &act;
  double irBatch;
  llvm::DenseSet<Operation *> &countedWeights;
  /// The weights this layer counted, and those it reads of earlier layers.
  llvm::DenseSet<Operation *> ownWeights, tiedWeights;
  const llvm::DenseSet<Value> &results;
  Layer *L = nullptr;
  llvm::DenseMap<Value, bool> sharded;
  llvm::DenseSet<Value> savedSet, bwdReduced, dispatched;
  llvm::DenseMap<Operation *, int> regionOf;
  /// This layer's parameters: the weight op -> its index in L->tensors.
  llvm::DenseMap<Operation *, size_t> tensorOf;
  std::vector<Operation *> regionOrder;
  std::vector<int> parent;
  int64_t tpDivisor = 0;
};

/// "h.3" from {"h.3.attn.q.weight", "h.3.mlp.fc.bias", ...}; "" if none.
std::string commonPrefix(const std::vector<std::string> &names) {
  if (names.empty())
    return "";
  std::string p = names[0];
  for (const std::string &n : names) {
    size_t i = 0;
    while (i < p.size() && i < n.size() && p[i] == n[i])
      ++i;
    p.resize(i);
  }
  if (p.size() == names[0].size() && names.size() == 1)
    return p;
  size_t dot = p.rfind('.');
  return dot == std::string::npos ? "" : p.substr(0, dot);
}

/// An exact key of a layer's figures (equal keys: equal costs).
std::string figureKey(const Layer &l) {
  std::string key = std::to_string(int(l.kind)) + "|";
  auto add = [&](double d) {
    char buf[sizeof(double)];
    std::memcpy(buf, &d, sizeof(double));
    key.append(buf, sizeof(double));
  };
  for (const Gemm &g : l.gemms) {
    add(g.batch), add(g.m), add(g.k), add(g.n);
    key += char('0' + int(g.split)) + std::string(g.scalesBatch ? "b" : "m") +
           (g.expert ? "e" : "d");
  }
  for (double d : {l.otherFlops, l.otherElemsReplicated, l.otherElemsSharded,
                   l.kernels, l.paramsReplicated, l.paramsSharded,
                   l.paramsExpertReplicated, l.paramsExpertSharded, l.paramsTied,
                   l.savedReplicated, l.savedSharded, l.savedFp32,
                   l.inputElems, l.outputElems, l.tpForwardAllReduce,
                   l.tpBackwardAllReduce, l.tpForwardCollectives, l.tpBackwardCollectives,
                   l.paramTensors, l.paramsTpWhole, l.tpGradGatherElems, l.tpGradGathers,
                   l.tpResultGather, l.tpLookupAllReduce, l.tpLookupCollectives,
                   l.moeAllToAll, double(l.numExperts), double(l.tpDivisor)})
    add(d);
  for (const ParamTensor &t : l.tensors) {
    add(t.elems);
    key += std::string(t.tpSharded ? "s" : "r") + (t.expert ? "e" : "d") + (t.tpWhole ? "w" : "");
  }
  return key;
}

} // namespace

bool hpc::cost::extractModel(func::FuncOp func, ExtractedModel &out,
                             std::string &error) {
  std::string fname = "@" + func.getSymName().str();
  if (func.getBody().empty()) {
    error = fname + " has no body";
    return false;
  }
  if (func.getNumArguments() == 0) {
    error = fname + " has no inputs: nothing to split over a batch";
    return false;
  }
  Block &block = func.getBody().front();
  Operation *terminator = block.getTerminator();
  std::vector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);

  auto staticShape = [](Type t) {
    auto rt = dyn_cast<RankedTensorType>(t);
    return !rt || rt.hasStaticShape();
  };
  for (Type t : func.getArgumentTypes())
    if (!staticShape(t)) {
      error = fname + ": an input has a dynamic shape (fix it with "
              "--input-shape)";
      return false;
    }
  for (Operation *op : ops)
    for (Type t : op->getResultTypes())
      if (!staticShape(t)) {
        error = fname + ": '" + op->getName().getStringRef().str() +
                "' has a dynamic result shape";
        return false;
      }

  // Activations: what depends on the first (primary) input. Other inputs
  // (masks, position ids) are side inputs every stage receives.
  Value primary = func.getArgument(0);
  llvm::DenseSet<Value> act{primary};
  for (Operation *op : ops) {
    bool depends = false;
    for (Value o : op->getOperands())
      depends |= act.contains(o);
    if (depends)
      for (Value r : op->getResults())
        act.insert(r);
  }
  auto primaryType = cast<RankedTensorType>(primary.getType());
  double irBatch = primaryType.getRank() ? double(primaryType.getDimSize(0)) : 1;
  if (irBatch < 1)
    irBatch = 1;
  out.irBatch = int64_t(irBatch);
  out.model.tokensPerSample =
      isa<IntegerType>(primaryType.getElementType())
          ? double(primaryType.getNumElements()) / irBatch
          : 1;
  out.model.name = func.getSymName().str();

  // Cut points: after an op when its result is the only live activation.
  llvm::DenseMap<Value, int64_t> remaining;
  int64_t live = 0;
  auto uses = [](Value v) {
    return int64_t(std::distance(v.use_begin(), v.use_end()));
  };
  remaining[primary] = uses(primary);
  live = remaining[primary] > 0 ? 1 : 0;
  std::vector<Segment> segments;
  Segment current;
  for (Operation *op : ops) {
    bool isActOp = false;
    for (Value r : op->getResults())
      isActOp |= act.contains(r);
    if (!isActOp)
      continue;
    current.ops.push_back(op);
    for (Value o : op->getOperands())
      if (act.contains(o) && --remaining[o] == 0)
        --live;
    Value liveResult;
    for (Value r : op->getResults())
      if (act.contains(r) && !r.use_empty()) {
        remaining[r] = uses(r);
        ++live;
        liveResult = r;
      }
    if (live == 1 && liveResult) {
      current.output = liveResult;
      segments.push_back(std::move(current));
      current = Segment();
    }
  }
  if (!current.ops.empty()) {
    for (Value o : terminator->getOperands())
      if (act.contains(o))
        current.output = o;
    segments.push_back(std::move(current));
  }
  if (segments.empty()) {
    error = fname + ": no op depends on the first input";
    return false;
  }

  // Segment signatures.
  std::map<std::string, int> signatures;
  std::vector<int> sig;
  for (Segment &s : segments) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DenseMap<Value, int> local;
    int index = 0;
    for (Operation *op : s.ops) {
      os << op->getName() << "(";
      for (Value o : op->getOperands()) {
        auto it = local.find(o);
        if (it != local.end())
          os << "%" << it->second;
        else
          os << (act.contains(o) ? "in" : "c");
        os << ":" << o.getType() << ",";
      }
      os << ")";
      for (NamedAttribute a : op->getAttrs())
        if (!a.getName().getValue().starts_with("hpc."))
          os << a.getName().getValue() << "=" << a.getValue() << ";";
      os << "->";
      for (Value r : op->getResults()) {
        os << r.getType() << ",";
        local[r] = index++;
      }
      os << "\n";
    }
    auto [it, inserted] =
        signatures.insert({text, int(signatures.size())});
    s.signature = it->second;
    sig.push_back(s.signature);
  }

  std::vector<LayerRange> ranges;
  bool anyRepetition = bestRun(sig, 0, int(sig.size())).count > 0;
  splitLayers(sig, 0, int(sig.size()), anyRepetition, ranges);

  // Figures per layer.
  llvm::DenseSet<Value> results;
  for (Value o : terminator->getOperands())
    results.insert(o);
  llvm::DenseSet<Operation *> countedWeights;
  std::map<std::string, int> classes;
  llvm::DenseMap<Operation *, int> layerOf;
  Value input = primary;
  for (size_t li = 0; li < ranges.size(); ++li) {
    const LayerRange &r = ranges[li];
    std::vector<Operation *> layerOps;
    std::string sigKey;
    for (int s = r.begin; s < r.end; ++s) {
      layerOps.insert(layerOps.end(), segments[s].ops.begin(),
                      segments[s].ops.end());
      sigKey += std::to_string(segments[s].signature) + ",";
    }
    for (Operation *op : layerOps)
      layerOf[op] = int(li);
    Value output = segments[r.end - 1].output;
    Layer layer;
    LayerBuilder builder(act, irBatch, countedWeights, results);
    builder.build(layerOps, input, output, layer);
    bool embedding = false, head = false;
    for (Operation *op : layerOps) {
      if (auto g = dyn_cast<hpc::GatherOp>(op))
        embedding |= !act.contains(g.getInput());
      for (Value v : op->getResults())
        head |= results.contains(v);
    }
    if (layer.numExperts > 0)
      layer.kind = LayerKind::MoE;
    else if (r.repeated)
      layer.kind = LayerKind::Block;
    else if (embedding)
      layer.kind = LayerKind::Embedding;
    else if (head)
      layer.kind = LayerKind::Head;
    else
      layer.kind = LayerKind::Other;
    std::string prefix = commonPrefix(builder.names);
    layer.name = !prefix.empty() && layer.kind != LayerKind::Embedding
                     ? prefix
                     : std::string(layerKindName(layer.kind)) + "." +
                           std::to_string(li);
    // Equal classes: equal segment signatures and exactly equal figures.
    auto [it, inserted] = classes.insert(
        {sigKey + "#" + figureKey(layer), int(classes.size())});
    (void)inserted;
    layer.classId = it->second;
    out.model.layers.push_back(std::move(layer));
    input = output;
  }

  // Ops outside the layers (weights, constants, side inputs): the layer of
  // their first user.
  int lastLayer = int(ranges.size()) - 1;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Operation *op = *it;
    if (layerOf.count(op))
      continue;
    int l = lastLayer;
    for (Operation *user : op->getUsers()) {
      auto found = layerOf.find(user);
      if (found != layerOf.end())
        l = std::min(l, found->second);
    }
    layerOf[op] = l;
  }
  out.opLayers.clear();
  for (Operation *op : ops)
    out.opLayers.push_back({op, layerOf[op]});
  return true;
}
