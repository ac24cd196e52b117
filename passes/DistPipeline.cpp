//===- DistPipeline.cpp - pipeline stages of a train step -----------------===//
//
// dist-pipeline-stages tags the forward ops of a train step with their
// pipeline stage (before hpc-autodiff, which gives each op's gradient ops
// its stage); dist-pipeline (after hpc-optimizer) splits the whole step
// into one program per stage, each nested module @stageK holding the ops of
// its stage in the order of the schedule, with the values that cross
// stages sent and received along the mesh's pp axis.
//
// Why the split comes after the optimizer: the step is built, differentiated
// and micro-batched once, as on one rank, so every stage computes exactly
// the single rank's values (and accumulates the micro-batches' gradients in
// the same order); splitting is then only placement and order.
//
//===----------------------------------------------------------------------===//

#include "AddTrees.h"
#include "Dist/DistOps.h"
#include "DistSharding.h"
#include "hpc/CostModel/OpCost.h"
#include "hpc/Passes.h"
#include "hpc/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>

namespace hpc {
#define GEN_PASS_DEF_DISTPIPELINESTAGES
#define GEN_PASS_DEF_DISTPIPELINE
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

/// One NAME=SIZE[:level] item of a --mesh text: its name and size (0 when
/// the size is not a number).
static std::pair<StringRef, int64_t> meshItem(StringRef part) {
  auto [name, size] = part.trim().split('=');
  int64_t n = 0;
  if (size.split(':').first.getAsInteger(10, n))
    n = 0;
  return {name.trim(), n};
}

hpc::PipelineMesh hpc::splitPipelineAxis(StringRef mesh) {
  PipelineMesh out;
  SmallVector<StringRef> parts;
  mesh.split(parts, ',', -1, false);
  for (StringRef part : parts) {
    auto [name, n] = meshItem(part);
    if (name == "pp" && n > 0) {
      out.stages = n;
      continue;
    }
    out.rest += (out.rest.empty() ? "" : ",") + part.trim().str();
  }
  return out;
}

int64_t hpc::meshAxisSize(StringRef mesh, StringRef name) {
  SmallVector<StringRef> parts;
  mesh.split(parts, ',', -1, false);
  for (StringRef part : parts)
    if (auto [axis, n] = meshItem(part); axis == name)
      return n;
  return 0;
}

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

int64_t byteSize(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() * std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

/// The cost model's estimate of an op, as the stages are balanced and the
/// schedule replayed: FLOPs plus elements moved.
double estimatedCost(Operation *op) {
  return double(estimateFlops(op)) + double(estimateElementsMoved(op));
}

std::optional<int64_t> stageTag(Operation *op) {
  if (auto s = op->getAttrOfType<IntegerAttr>(kStageAttr))
    return s.getInt();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// dist-pipeline-stages
//===----------------------------------------------------------------------===//

struct DistPipelineStages : hpc::impl::DistPipelineStagesBase<DistPipelineStages> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1) {
      module.emitError() << "pipeline stages must be at least 1, not " << int64_t(stages);
      return signalPassFailure();
    }
    if (stages == 1 && boundaries.empty())
      return;
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("dist-pipeline-stages needs a func.func @main with a body");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    // A searched plan's own stage tags (dist-search) give way to these.
    body.walk([](Operation *op) { op->removeAttr(kStageAttr); });

    // The ops that a weight and the batch both reach, in program order:
    // what the stages split. The rest, made from the batch alone (masks,
    // positions, counts of labels) or from the weights alone (a tied
    // head's transpose), each stage that reads it computes itself.
    llvm::DenseSet<Value> fromWeights, fromBatch;
    for (BlockArgument arg : func.getArguments())
      fromBatch.insert(arg);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      if (isa<WeightOp>(op)) {
        if (isFloatTensor(op.getResult(0)))
          fromWeights.insert(op.getResult(0));
        continue;
      }
      bool weights = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return fromWeights.contains(v); });
      bool batch = llvm::any_of(op.getOperands(), [&](Value v) { return fromBatch.contains(v); });
      for (Value r : op.getResults()) {
        if (weights)
          fromWeights.insert(r);
        if (batch)
          fromBatch.insert(r);
      }
      if (weights && batch)
        ops.push_back(&op);
    }
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;

    // Where a stage may end: after an op whose result is then the only
    // value of the split ops that a later one reads.
    SmallVector<int64_t> lastUse(ops.size(), -1);
    for (auto [i, op] : llvm::enumerate(ops))
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && position.count(def))
          lastUse[position[def]] = std::max<int64_t>(lastUse[position[def]], i);
    // The loss (hpc-append-loss builds it at the location of the op that
    // makes its input) stays on the last stage with that op: no cut in it.
    int64_t limit = int64_t(ops.size()) - 1;
    while (limit > 0 && ops[limit - 1]->getLoc() == ops.back()->getLoc())
      --limit;
    SmallVector<int64_t> cuts; // positions after which one value crosses
    {
      // live(i) = defined at <= i and read after i
      std::multiset<int64_t> liveEnds;
      for (int64_t i = 0; i < limit; ++i) {
        if (lastUse[i] > i)
          liveEnds.insert(lastUse[i]);
        while (!liveEnds.empty() && *liveEnds.begin() <= i)
          liveEnds.erase(liveEnds.begin());
        if (liveEnds.size() == 1 && lastUse[i] > i)
          cuts.push_back(i);
      }
    }

    SmallVector<int64_t> ends; // the position that ends each stage but the last
    if (!boundaries.empty()) {
      if (int64_t(boundaries.size()) != stages - 1) {
        module.emitError() << "--stage-boundaries names " << boundaries.size()
                           << " node" << (boundaries.size() == 1 ? "" : "s") << " for "
                           << int64_t(stages) << " stages: give " << stages - 1
                           << " (the last node of every stage but the last)";
        return signalPassFailure();
      }
      llvm::StringSet<> anyNode;
      body.walk([&](Operation *op) { anyNode.insert(locationName(op->getLoc())); });
      for (const std::string &name : boundaries) {
        int64_t at = -1;
        for (auto [i, op] : llvm::enumerate(ops))
          if (locationName(op->getLoc()) == name)
            at = i;
        if (at < 0) {
          if (anyNode.contains(name))
            module.emitError() << "--stage-boundaries: node '" << name
                               << "' is not on the path from the weights to the loss";
          else
            module.emitError() << "--stage-boundaries: the model has no node named '" << name
                               << "'";
          return signalPassFailure();
        }
        if (!ends.empty() && at <= ends.back()) {
          module.emitError() << "--stage-boundaries: node '" << name
                             << "' does not come after the boundary before it";
          return signalPassFailure();
        }
        if (at + 1 >= int64_t(ops.size())) {
          module.emitError() << "--stage-boundaries: node '" << name
                             << "' is the last one: the stage after it would be empty";
          return signalPassFailure();
        }
        ends.push_back(at);
      }
    } else {
      if (int64_t(cuts.size()) < stages - 1) {
        int64_t pp = stages / chunks;
        if (chunks > 1)
          module.emitError() << "pp=" << pp << " interleaved in " << int64_t(chunks)
                             << " chunks needs " << int64_t(stages)
                             << " stages but the model has only " << cuts.size() + 1
                             << " layers (places where a single activation crosses): use "
                                "fewer chunks or stages";
        else
          module.emitError() << "pp=" << pp << " needs " << pp
                             << " stages but the model has only " << cuts.size() + 1
                             << " layers (places where a single activation crosses): use at "
                                "most pp="
                             << cuts.size() + 1;
        return signalPassFailure();
      }
      // Balance the estimated cost: each boundary at the cut whose prefix
      // cost is nearest to k/P of the whole, in order.
      SmallVector<double> prefix(ops.size() + 1, 0.0);
      for (auto [i, op] : llvm::enumerate(ops))
        prefix[i + 1] = prefix[i] + estimatedCost(op);
      double total = prefix.back();
      size_t next = 0;
      for (int64_t k = 1; k < stages; ++k) {
        double target = total * double(k) / double(stages);
        // Leave enough cuts for the boundaries after this one.
        size_t last = cuts.size() - size_t(stages - 1 - k) - 1;
        size_t best = next;
        for (size_t c = next; c <= last; ++c)
          if (std::abs(prefix[cuts[c] + 1] - target) < std::abs(prefix[cuts[best] + 1] - target))
            best = c;
        ends.push_back(cuts[best]);
        next = best + 1;
      }
    }

    // Each op: the largest stage of its operands, one more after a boundary.
    OpBuilder b(&getContext());
    llvm::DenseMap<Value, int64_t> stageOfValue;
    size_t boundary = 0;
    for (auto [i, op] : llvm::enumerate(ops)) {
      int64_t s = 0;
      for (Value v : op->getOperands())
        if (auto it = stageOfValue.find(v); it != stageOfValue.end())
          s = std::max(s, it->second);
      op->setAttr(kStageAttr, b.getI64IntegerAttr(s));
      int64_t after = s;
      if (boundary < ends.size() && int64_t(i) == ends[boundary]) {
        if (s != int64_t(boundary)) {
          op->emitError() << "pipeline stage boundary " << boundary
                          << " is inside stage " << s << ": a value crosses it";
          return signalPassFailure();
        }
        after = s + 1;
        ++boundary;
      }
      for (Value r : op->getResults())
        stageOfValue[r] = after;
    }
    module->setAttr("hpc.pipeline_stages", b.getI64IntegerAttr(stages));
  }
};

//===----------------------------------------------------------------------===//
// dist-pipeline
//===----------------------------------------------------------------------===//

/// A value made on stage `from` that stage `to` reads.
struct Transfer {
  Value value;
  int64_t from, to;
  int64_t sendPos = 0;     ///< index in the sender's order of the op making it
  int64_t firstUse = 0;    ///< index in the receiver's order of its first reader
  int64_t postBefore = 0;  ///< the receiver posts the receive before this index
  int64_t index = 0;       ///< order among the transfers of (from, to)
};

struct DistPipeline : hpc::impl::DistPipelineBase<DistPipeline> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1) {
      module.emitError() << "pipeline stages must be at least 1, not " << int64_t(stages);
      return signalPassFailure();
    }
    PipelineSchedule plan;
    std::string error;
    if (!parsePipelineSchedule(schedule, plan, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("dist-pipeline needs a func.func @main with a body");
      return signalPassFailure();
    }
    // P ranks along pp; stage tags are virtual stages, V of them a rank
    // (interleaved), virtual stage v on rank v % P as its chunk v / P.
    const int64_t P = stages, V = plan.chunks, stagesInAll = P * V;
    auto rankOf = [&](int64_t v) { return v % P; };
    int64_t micro = 1;
    if (auto m = module->getAttrOfType<IntegerAttr>("hpc.micro_batches"))
      micro = m.getInt();
    if (plan.kind == PipelineSchedule::Interleaved && micro % P != 0) {
      module.emitError() << "--pipeline-schedule=" << schedule << " needs micro-batches in "
                         << "groups of pp=" << P << ", not " << micro
                         << " (give --micro-batches a multiple of " << P << ")";
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Operation *> all;
    // 1. The stage of every op; -1: made from inputs, weights and state
    //    alone, computed by every stage that reads it.
    llvm::DenseMap<Operation *, int64_t> stageOf;
    auto valueStage = [&](Value v) -> int64_t {
      Operation *def = v.getDefiningOp();
      return def ? stageOf.lookup(def) : -1;
    };
    auto assignStages = [&]() -> LogicalResult {
      all.clear();
      stageOf.clear();
      for (Operation &op : body.without_terminator())
        all.push_back(&op);
      for (Operation *op : all) {
        if (auto s = stageTag(op)) {
          if (*s < 0 || *s >= stagesInAll)
            return op->emitError() << "pipeline stage " << *s << " is outside the "
                                   << stagesInAll << " stages";
          stageOf[op] = *s;
          continue;
        }
        // The stage of its largest operand made on a stage (ties: the later
        // stage): a gradient times a micro-batch's weight stays where the
        // gradient is.
        int64_t best = -1, bestBytes = -1;
        for (Value v : op->getOperands()) {
          int64_t s = valueStage(v);
          if (s < 0)
            continue;
          int64_t bytes = byteSize(v);
          if (bytes > bestBytes || (bytes == bestBytes && s > best)) {
            best = s;
            bestBytes = bytes;
          }
        }
        stageOf[op] = best;
      }
      return success();
    };
    if (failed(assignStages()))
      return signalPassFailure();
    // A sum of terms made on several stages (the global gradient norm adds
    // one square per parameter) would send each earlier stage's terms on
    // their own where the chain adds them (19 scalar sends a step on the
    // benchmark's small GPT at pp=2): each stage's terms are summed where
    // they are made, so one partial sum crosses per stage.
    bool regrouped = false;
    forEachAddTree(body, 3, [&](AddTree &tree) {
      // Only the step's scalar sums: a stage's own sums (a residual
      // stream) are its blocks' business.
      if (stageTag(tree.root) || cast<RankedTensorType>(tree.root.getType()).getRank() != 0)
        return;
      std::map<int64_t, SmallVector<Value>> byStage;
      for (Value v : tree.leaves)
        byStage[valueStage(v)].push_back(v);
      if (byStage.size() < 2 ||
          llvm::none_of(byStage, [&](auto &kv) { return kv.first >= 0 && kv.second.size() > 1; }))
        return;
      OpBuilder b(tree.root);
      Location loc = tree.root.getLoc();
      Type type = tree.root.getType();
      // The last stage's sum first: every other stage's then goes to it
      // straight (an add is on its later operand's stage), as the terms
      // did, and no stage waits for another's partial to pass it on.
      SmallVector<Value> terms;
      for (auto &[stage, leaves] : llvm::reverse(byStage))
        terms.push_back(sumInOrder(b, loc, type, leaves));
      replaceAddTree(tree, sumInOrder(b, loc, type, terms));
      regrouped = true;
    });
    if (regrouped && failed(assignStages()))
      return signalPassFailure();

    // 2. The stages each op runs on: its own; what no weight and batch
    //    both reach, every stage that reads it (it computes it itself).
    //    An op without results writes state (an update, an assign): it
    //    runs on every stage that holds that state, so a weight two stages
    //    read (a tied embedding and head) is updated alike on both.
    std::vector<llvm::DenseSet<Operation *>> in(P);
    auto include = [&](int64_t s, Operation *root) {
      SmallVector<Operation *> work{root};
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!in[s].insert(op).second)
          continue;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp(); def && stageOf[def] < 0)
            work.push_back(def);
      }
    };
    SmallVector<Operation *> writers;
    for (Operation *op : all) {
      if (op->getNumResults() == 0)
        writers.push_back(op);
      else if (stageOf[op] >= 0)
        include(rankOf(stageOf[op]), op);
    }
    for (Value r : ret.getOperands())
      if (Operation *def = r.getDefiningOp(); def && stageOf[def] < 0)
        for (int64_t s = 0; s < P; ++s)
          include(s, def);
    for (Operation *op : writers) {
      llvm::SmallSetVector<int64_t, 4> on;
      if (stageOf[op] >= 0)
        on.insert(rankOf(stageOf[op]));
      for (Value v : op->getOperands())
        if (auto var = v.getDefiningOp<VariableOp>())
          for (int64_t s = 0; s < P; ++s)
            if (in[s].contains(var))
              on.insert(s);
      for (int64_t s = 0; s < P; ++s)
        if (on.empty() || on.contains(s))
          include(s, op);
    }
    //    Each op runs once per stage it is in; a value it reads from
    //    another stage is received.
    auto homeOf = [&](Value v, int64_t s) -> int64_t {
      Operation *def = v.getDefiningOp();
      if (!def || in[s].contains(def))
        return s;
      return rankOf(stageOf[def]);
    };

    //    A backward op is B (it leads to a value another rank receives: an
    //    input gradient, or a tied weight's gradient part) or W (weight
    //    gradients only): zb-h1 runs the W's later. An op of no micro-batch
    //    that another rank reads (the transpose of a tied weight's gradient,
    //    summed into the other use's) leads back to the backward ops of every
    //    micro-batch it reads: left in W, the rank that waits for it in its
    //    own W block can hold up the B block that this rank waits for. With
    //    several micro-batches such an op is a sum over them (hpc-micro-
    //    batches' running sums of the tied weight's parts), sent once after
    //    the last and read with the optimizer, outside the blocks: it leaves
    //    the micro-batches' ops where they are (a first stage's backward
    //    stays all W, deferrable into the bubble).
    llvm::DenseSet<Operation *> inputGradient;
    {
      SmallVector<Operation *> work;
      for (int64_t s = 0; s < P; ++s)
        for (Operation *op : all)
          if (in[s].contains(op) &&
              (op->hasAttr(kBackwardAttr) || !op->hasAttr(kMicroBatchAttr)))
            for (Value r : op->getResults())
              for (Operation *user : r.getUsers())
                if (user != ret.getOperation() && stageOf.lookup(user) >= 0 &&
                    rankOf(stageOf.lookup(user)) != s)
                  work.push_back(op);
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!inputGradient.insert(op).second)
          continue;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && def->hasAttr(kBackwardAttr) && stageOf[def] == stageOf[op] &&
              (op->hasAttr(kMicroBatchAttr)
                   ? def->getAttr(kMicroBatchAttr) == op->getAttr(kMicroBatchAttr)
                   : micro == 1))
            work.push_back(def);
      }
    }

    // 3. Each stage's order: its blocks in the schedule's order; an op
    //    without a block as early as its operands allow, or, when it reads
    //    a value another stage sends outside a block (a sum over the
    //    micro-batches, the global gradient norm), at the end with the
    //    optimizer.
    //    Each op's block names it in the trace: "F3" (micro-batch 3's
    //    forward; "F3.1" on chunk 1), "B3", "W3", "pre" (before the first
    //    block) or "step" (the optimizer and the sums it waits for).
    //    An op's phase: F, or B (the whole backward; under zb-h1 the ops
    //    that lead to an input gradient) or W (zb-h1: the rest).
    auto phaseOf = [&](Operation *op) -> int64_t {
      if (!op->hasAttr(kBackwardAttr))
        return PipelineBlock::F;
      bool split = plan.automatic || plan.kind == PipelineSchedule::ZeroBubbleH1;
      return split && !inputGradient.contains(op) ? PipelineBlock::W : PipelineBlock::B;
    };
    //    The cost model's estimate of each op (FLOPs plus elements moved,
    //    as the stages were balanced) summed per block, for the replay
    //    below that predicts the bubble.
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, double> blockCost;
    for (int64_t s = 0; s < P; ++s)
      for (Operation *op : all)
        if (in[s].contains(op) && stageTag(op) &&
            (micro == 1 || op->hasAttr(kMicroBatchAttr))) {
          int64_t m = 0;
          if (auto a = op->getAttrOfType<IntegerAttr>(kMicroBatchAttr))
            m = a.getInt();
          int64_t phase = phaseOf(op);
          blockCost[{s, m, stageOf[op] / P, phase}] += estimatedCost(op);
        }
    auto costOf = [&](int64_t r, const PipelineBlock &b) {
      auto it = blockCost.find({r, b.microBatch, b.chunk, b.phase});
      return it == blockCost.end() ? 0.0 : it->second;
    };
    if (plan.automatic) {
      // auto: the fastest of gpipe, 1f1b and zb-h1 in the replay (within
      // 1%, the one with fewer activations alive: 1f1b, zb-h1, gpipe). The
      // costs above split B and W as zb-h1 does; the others run both as B.
      auto whole = [&](int64_t r, const PipelineBlock &b) {
        return b.phase == PipelineBlock::B ? costOf(r, b) + costOf(r, {PipelineBlock::W,
                                                                        b.microBatch, b.chunk})
                                           : costOf(r, b);
      };
      SmallVector<double> zeros(P, 0.0);
      PipelineSchedule best;
      double bestTime = std::numeric_limits<double>::infinity();
      llvm::errs() << "dist-pipeline: --pipeline-schedule=auto: predicted step";
      for (const PipelineSchedule &candidate : automaticPipelineSchedules()) {
        PipelineSchedule::Kind kind = candidate.kind;
        SmallVector<SmallVector<PipelineBlock>> order;
        for (int64_t r = 0; r < P; ++r)
          order.push_back(pipelineBlocks(candidate, r, P, micro));
        double t = kind == PipelineSchedule::ZeroBubbleH1
                       ? replayPipeline(order, 1, micro, costOf, zeros, zeros).stepTime
                       : replayPipeline(order, 1, micro, whole, zeros, zeros).stepTime;
        llvm::errs() << " " << pipelineScheduleName(candidate) << " "
                     << llvm::format("%.4g", t);
        if (t < 0.99 * bestTime) {
          bestTime = t;
          best = candidate;
        }
      }
      plan = best;
      schedule = pipelineScheduleName(plan);
      llvm::errs() << " (cost-model units): " << schedule << "\n";
      if (plan.kind != PipelineSchedule::ZeroBubbleH1)
        for (auto it = blockCost.begin(); it != blockCost.end();) {
          auto [r, m, c, phase] = it->first;
          if (phase != PipelineBlock::W) {
            ++it;
            continue;
          }
          blockCost[{r, m, c, int64_t(PipelineBlock::B)}] += it->second;
          it = blockCost.erase(it);
        }
    }
    SmallVector<SmallVector<PipelineBlock>> lists;
    for (int64_t s = 0; s < P; ++s)
      lists.push_back(pipelineBlocks(plan, s, P, micro));

    std::vector<SmallVector<Operation *>> order(P);
    std::vector<llvm::DenseMap<Operation *, std::string>> blockName(P);
    const int64_t late = std::numeric_limits<int64_t>::max() / 2;
    for (int64_t s = 0; s < P; ++s) {
      std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> blockPos; // (mb, chunk, phase)
      SmallVector<std::string> names;
      const SmallVector<PipelineBlock> &blocks = lists[s];
      for (auto [i, blk] : llvm::enumerate(blocks)) {
        blockPos[{blk.microBatch, blk.chunk, blk.phase}] = int64_t(i);
        names.push_back(std::string(1, "FBW"[blk.phase]) + std::to_string(blk.microBatch) +
                        (V > 1 ? "." + std::to_string(blk.chunk) : ""));
      }
      llvm::DenseMap<Operation *, int64_t> key;
      SmallVector<std::pair<int64_t, Operation *>> keyed;
      for (Operation *op : all) {
        if (!in[s].contains(op))
          continue;
        int64_t k = -1;
        // A stage's op in a block: of one micro-batch (with several, the
        // ops that read no batch, the gradient ops' constants, are shared
        // and go where their operands allow).
        bool staged = stageTag(op).has_value();
        bool tagged = staged && (micro == 1 || op->hasAttr(kMicroBatchAttr));
        if (tagged) {
          int64_t m = 0;
          if (auto a = op->getAttrOfType<IntegerAttr>(kMicroBatchAttr))
            m = a.getInt();
          int64_t phase = phaseOf(op);
          auto it = blockPos.find({m, stageOf[op] / P, phase});
          if (it == blockPos.end()) {
            op->emitError() << "micro-batch " << m << " is outside the step's " << micro;
            return signalPassFailure();
          }
          k = it->second;
        }
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def)
            continue;
          if (homeOf(v, s) != s) {
            if (!staged)
              k = late;
            continue;
          }
          k = std::max(k, key.lookup(def));
        }
        key[op] = k;
        keyed.push_back({k, op});
      }
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](auto &a, auto &b) { return a.first < b.first; });
      for (auto &[k, op] : keyed) {
        order[s].push_back(op);
        blockName[s][op] = k < 0 ? "pre" : k >= int64_t(names.size()) ? "step" : names[k];
      }
    }

    // The cost model's view of the schedule: the blocks replayed with the
    // stages waiting on each other, what runs outside them (weights'
    // transposes, the optimizer) before and after.
    {
      SmallVector<double> before(P, 0.0), after(P, 0.0);
      for (int64_t s = 0; s < P; ++s)
        for (Operation *op : order[s]) {
          const std::string &name = blockName[s][op];
          if (name == "pre")
            before[s] += estimatedCost(op);
          else if (name == "step")
            after[s] += estimatedCost(op);
        }
      PipelineReplay replay = replayPipeline(lists, V, micro, costOf, before, after);
      llvm::errs() << "dist-pipeline: pp=" << P << " " << schedule << ", " << micro
                   << " micro-batch" << (micro == 1 ? "" : "es") << ": predicted bubble";
      SmallVector<Attribute> bubbles;
      for (auto [s, f] : llvm::enumerate(replay.bubble)) {
        llvm::errs() << (s ? ", " : " ") << llvm::format("%.1f%%", 100 * f);
        bubbles.push_back(FloatAttr::get(Float64Type::get(&getContext()), f));
      }
      llvm::errs() << " (stages 0.." << P - 1 << ", the cost model's block times)\n";
      module->setAttr("hpc.predicted_bubble", ArrayAttr::get(&getContext(), bubbles));
    }

    // 4. The transfers, in each sender's order; each receive posted after
    //    the previous one from the same sender is waited (two in flight),
    //    and before its own wait.
    std::vector<llvm::DenseMap<Operation *, int64_t>> posOf(P);
    for (int64_t s = 0; s < P; ++s)
      for (auto [i, op] : llvm::enumerate(order[s]))
        posOf[s][op] = int64_t(i);
    std::vector<Transfer> transfers;
    llvm::DenseMap<std::pair<Value, int64_t>, size_t> transferOf; // (value, to)
    auto need = [&](Value v, int64_t to, int64_t usePos) {
      int64_t from = homeOf(v, to);
      if (from == to)
        return;
      auto [it, added] = transferOf.try_emplace({v, to}, transfers.size());
      if (added) {
        Transfer t;
        t.value = v;
        t.from = from;
        t.to = to;
        t.sendPos = posOf[from].lookup(v.getDefiningOp());
        t.firstUse = usePos;
        transfers.push_back(t);
      } else {
        transfers[it->second].firstUse = std::min(transfers[it->second].firstUse, usePos);
      }
    };
    for (int64_t s = 0; s < P; ++s) {
      for (auto [i, op] : llvm::enumerate(order[s]))
        for (Value v : op->getOperands())
          need(v, s, int64_t(i));
      for (Value r : ret.getOperands())
        need(r, s, int64_t(order[s].size()));
    }
    std::map<std::pair<int64_t, int64_t>, SmallVector<size_t>> byPair;
    for (auto [i, t] : llvm::enumerate(transfers))
      byPair[{t.from, t.to}].push_back(i);
    for (auto &[pair, list] : byPair) {
      llvm::stable_sort(list, [&](size_t a, size_t b) {
        return transfers[a].sendPos < transfers[b].sendPos;
      });
      // postBefore(k) = min(firstUse(k-1) + [after its wait], min_{j>=k} firstUse(j)).
      int64_t suffixMin = std::numeric_limits<int64_t>::max();
      SmallVector<int64_t> suffix(list.size());
      for (size_t k = list.size(); k-- > 0;) {
        suffixMin = std::min(suffixMin, transfers[list[k]].firstUse);
        suffix[k] = suffixMin;
      }
      for (size_t k = 0; k < list.size(); ++k) {
        Transfer &t = transfers[list[k]];
        t.index = int64_t(k);
        t.postBefore = k == 0 ? 0 : std::min(transfers[list[k - 1]].firstUse, suffix[k]);
      }
    }

    // The programs must not wait on each other in a cycle: replay them,
    // sends never blocking, each wait until its value was sent.
    {
      struct Step {
        int64_t pos;
        bool send;
        size_t transfer;
      };
      std::vector<SmallVector<Step>> steps(P);
      for (auto [i, t] : llvm::enumerate(transfers)) {
        steps[t.from].push_back({2 * t.sendPos + 1, true, i});
        steps[t.to].push_back({2 * t.firstUse, false, i});
      }
      for (auto &list : steps)
        llvm::stable_sort(list, [](const Step &a, const Step &b) { return a.pos < b.pos; });
      std::vector<size_t> next(P, 0);
      std::vector<bool> sent(transfers.size(), false);
      for (bool moved = true; moved;) {
        moved = false;
        for (int64_t s = 0; s < P; ++s)
          for (; next[s] < steps[s].size(); ++next[s], moved = true) {
            const Step &step = steps[s][next[s]];
            if (!step.send && !sent[step.transfer])
              break;
            if (step.send)
              sent[step.transfer] = true;
          }
      }
      for (int64_t s = 0; s < P; ++s)
        if (next[s] < steps[s].size()) {
          const Transfer &t = transfers[steps[s][next[s]].transfer];
          module.emitError() << "dist-pipeline: the " << schedule << " order deadlocks: stage "
                             << s << " waits for a value of stage " << t.from
                             << " that is sent after a wait of its own (a compiler bug)";
          return signalPassFailure();
        }
    }

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // The stages' mesh: pp first (stage K on world ranks [K N/P, (K+1) N/P)).
    SmallVector<StringAttr> axisNames{StringAttr::get(ctx, "pp")};
    SmallVector<int64_t> axisSizes{P};
    SmallVector<dist::TopologyLevel> axisLevels{dist::TopologyLevel::inter_node};
    if (!mesh.empty()) {
      std::string error;
      FailureOr<dist::MeshAttr> parsed = dist::parseMesh(ctx, mesh, error);
      if (failed(parsed)) {
        module.emitError(error);
        return signalPassFailure();
      }
      for (auto [name, size, level] :
           llvm::zip(parsed->getNames(), parsed->getSizes(), parsed->getLevels()))
        if (name.getValue() == "pp") {
          axisLevels[0] = level;
        } else {
          axisNames.push_back(name);
          axisSizes.push_back(size);
          axisLevels.push_back(level);
        }
    }
    auto meshAttr = dist::MeshAttr::get(ctx, axisNames, axisSizes, axisLevels);
    // With data parallelism inside the stages, what crosses them is
    // split as the batch is: a micro-batch's rows over dp (each dp rank
    // sends its rows to the same dp rank of the next stage), the rest
    // whole (the partitioner reduces a partial sum before it is sent).
    int64_t rows = 0;
    if (auto train = module->getAttrOfType<DictionaryAttr>("hpc.train"))
      if (auto batch = train.getAs<IntegerAttr>("batch"))
        rows = batch.getInt() / micro;
    int64_t dp = 1;
    for (auto [name, size] : llvm::zip(axisNames, axisSizes))
      if (name.getValue() == "dp")
        dp = size;
    auto transferSharding = [&](Value v) -> dist::ShardingAttr {
      if (axisNames.size() == 1)
        return nullptr; // pp alone: nothing is partitioned
      auto type = cast<RankedTensorType>(v.getType());
      dist::Sharding sharding = dist::Sharding::replicated(type.getRank());
      if (dp > 1 && type.getRank() > 0 && type.getDimSize(0) == rows && rows % dp == 0)
        sharding.dims[0] = {"dp"};
      return sharding.toAttr(&getContext());
    };

    // 5. The stage programs.
    module->removeAttr("hpc.pipeline_stages"); // dist-pipeline-stages' mark, done with
    auto recvToken = [&](Type t) { return dist::TokenType::get(ctx, t); };
    auto sendToken = dist::TokenType::get(ctx, Type());
    b.setInsertionPointToEnd(module.getBody());
    for (int64_t s = 0; s < P; ++s) {
      auto stageModule = ModuleOp::create(b, module.getLoc(), ("stage" + std::to_string(s)));
      for (NamedAttribute a : module->getAttrs())
        if (a.getName() != "sym_name" && a.getName() != "hpc.predicted_bubble")
          stageModule->setAttr(a.getName(), a.getValue());
      stageModule->setAttr("dist.mesh", meshAttr);
      stageModule->setAttr(kStageAttr, b.getI64IntegerAttr(s));
      stageModule->setAttr("hpc.pipeline",
                           b.getDictionaryAttr({b.getNamedAttr("chunks", b.getI64IntegerAttr(V)),
                                                b.getNamedAttr("stages", b.getI64IntegerAttr(P)),
                                                b.getNamedAttr("schedule",
                                                               b.getStringAttr(schedule)),
                                                b.getNamedAttr("micro_batches",
                                                               b.getI64IntegerAttr(micro))}));
      OpBuilder mb = OpBuilder::atBlockEnd(stageModule.getBody());
      auto stageFunc = cast<func::FuncOp>(mb.clone(*func));
      stageFunc.getBody().getBlocks().clear();
      Block *entry = stageFunc.addEntryBlock();
      IRMapping map;
      for (auto [from, to] : llvm::zip(func.getArguments(), entry->getArguments()))
        map.map(from, to);
      OpBuilder fb = OpBuilder::atBlockEnd(entry);

      // Receive events: (slot, then order) so that a wait precedes the
      // next post from the same sender, and a post its own wait.
      struct Event {
        int64_t slot, order;
        bool post;
        size_t transfer;
      };
      SmallVector<Event> events;
      for (auto [i, t] : llvm::enumerate(transfers)) {
        if (t.to != s)
          continue;
        events.push_back({t.postBefore, 2 * t.index, true, i});
        events.push_back({t.firstUse, 2 * t.index + 1, false, i});
      }
      llvm::stable_sort(events, [](const Event &a, const Event &b) {
        return std::tie(a.slot, a.order, a.post) < std::tie(b.slot, b.order, b.post);
      });
      // Sends made on this stage, by the op that makes the value.
      llvm::DenseMap<Operation *, SmallVector<size_t>> sendsAfter;
      for (auto [i, t] : llvm::enumerate(transfers))
        if (t.from == s)
          sendsAfter[t.value.getDefiningOp()].push_back(i);
      llvm::DenseMap<size_t, Value> tokens;
      std::map<int64_t, Value> pendingSend; // by destination: the last send's token
      size_t e = 0;
      auto eventsUpTo = [&](int64_t slot) {
        for (; e < events.size() && events[e].slot <= slot; ++e) {
          const Transfer &t = transfers[events[e].transfer];
          Location loc = t.value.getLoc();
          if (events[e].post) {
            auto recv = dist::RecvStartOp::create(fb, loc, recvToken(t.value.getType()), "pp",
                                                  t.from - s, nullptr);
            if (auto sharding = transferSharding(t.value))
              recv->setAttr("dist.sharding", sharding);
            tokens[events[e].transfer] = recv;
          } else {
            auto wait = dist::WaitOp::create(fb, loc, t.value.getType(),
                                             tokens.lookup(events[e].transfer));
            // The time a stage waits here is its bubble (the trace's "recv").
            wait->setAttr("hpc.recv", fb.getUnitAttr());
            Value received = wait.getResult();
            if (auto sharding = transferSharding(t.value))
              received = dist::AnnotateOp::create(fb, loc, received.getType(), received, sharding);
            map.map(t.value, received);
          }
        }
      };
      for (auto [i, op] : llvm::enumerate(order[s])) {
        eventsUpTo(int64_t(i));
        Operation *copy = fb.clone(*op, map);
        for (StringRef tag : {kStageAttr, kBackwardAttr, kMicroBatchAttr})
          copy->removeAttr(tag);
        copy->setAttr("hpc.block", fb.getStringAttr(blockName[s][op]));
        auto it = sendsAfter.find(op);
        if (it == sendsAfter.end())
          continue;
        for (size_t k : it->second) {
          const Transfer &t = transfers[k];
          if (Value prev = pendingSend[t.to])
            dist::WaitOp::create(fb, op->getLoc(), Type(), prev);
          Value sent = map.lookup(t.value);
          auto sharding = transferSharding(t.value);
          if (sharding)
            sent = dist::AnnotateOp::create(fb, op->getLoc(), sent.getType(), sent, sharding);
          auto send = dist::SendStartOp::create(fb, op->getLoc(), sendToken, sent, "pp",
                                                t.to - s, nullptr);
          if (sharding)
            send->setAttr("dist.sharding", sharding);
          pendingSend[t.to] = send;
        }
      }
      eventsUpTo(std::numeric_limits<int64_t>::max());
      for (auto &[to, token] : pendingSend)
        if (token)
          dist::WaitOp::create(fb, ret.getLoc(), Type(), token);
      SmallVector<Value> results;
      for (Value r : ret.getOperands())
        results.push_back(map.lookupOrDefault(r));
      func::ReturnOp::create(fb, ret.getLoc(), results);
    }
    func.erase();
  }
};

} // namespace
