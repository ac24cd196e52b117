//===- DistCompress.cpp - gradient reductions compressed across nodes -----===//
//
// The network between nodes is the scarce link of a data-parallel step: in
// two levels (dist-hierarchical) each node still sends its whole gradient
// across, once. This pass gives the gradient reductions whose cross-node
// hop is their own a codec:
//
// - #dist.int8_block: 1 byte a value and one f32 scale a block (0.254x of
//   f32 at 256-value blocks);
// - #dist.powersgd: a bucket's matrices as rank-R factors, R (rows + cols)
//   values instead of rows x cols (0.02x for a 256 x 1024 matrix at R = 4),
//   its vectors exact;
// - #dist.topk: the largest ratio x n values with their indices;
//
// and with error feedback the state that carries each rank's compression
// error into the next step, so that the compressed gradients sum to the
// true ones over time (1-bit Adam's, ZeRO++'s and PowerSGD's argument).
// `auto` picks, per reduction, the fastest of none, int8 and PowerSGD that
// the cost model of the cluster predicts (link time against codec time).
// The runtime's MpiComm runs the codecs; the bytes are counted by
// hpc::dist::bytesSentByRank, as the runtime sends them.
//
//===----------------------------------------------------------------------===//

#include "Relayouts.h"

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"
#include "common/Codecs.h"
#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/CostModel.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace hpc {
#define GEN_PASS_DEF_DISTCOMPRESS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// Whether `v` reaches an optimizer update as its gradient through ops
/// that only move, split or scale it (a bucket's split, reshapes, the
/// clipping product): then its reduction is a gradient's, which error
/// feedback may round (a loss or a norm must stay exact).
bool reachesUpdateAsGradient(Value v, llvm::SmallPtrSetImpl<Operation *> &seen) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<hpc::SGDUpdateOp, hpc::AdamWUpdateOp>(user) && use.getOperandNumber() == 1)
      return true;
    if (!isa<hpc::SplitOp, hpc::ReshapeOp, hpc::TransposeOp, hpc::SliceOp, hpc::MulOp,
             hpc::ConcatOp, AllGatherOp, WaitOp>(user) ||
        !seen.insert(user).second)
      continue;
    for (Value r : user->getResults())
      if (reachesUpdateAsGradient(r, seen))
        return true;
  }
  return false;
}

/// The shapes whose values a reduction's operand holds, in order: each
/// member of a dist-bucket bucket (a 1-D concat of reshaped gradients) as
/// the gradient's own shape, else the operand's shape.
SmallVector<ArrayRef<int64_t>> memberShapes(Value input) {
  SmallVector<ArrayRef<int64_t>> shapes;
  auto concat = input.getDefiningOp<hpc::ConcatOp>();
  if (!concat || cast<RankedTensorType>(input.getType()).getRank() != 1) {
    shapes.push_back(cast<RankedTensorType>(input.getType()).getShape());
    return shapes;
  }
  for (Value member : concat->getOperands()) {
    if (auto reshape = member.getDefiningOp<hpc::ReshapeOp>())
      member = reshape->getOperand(0);
    shapes.push_back(cast<RankedTensorType>(member.getType()).getShape());
  }
  return shapes;
}

/// PowerSGD's pieces of `input` at `rank`: each member with two or more
/// dimensions a matrix (its first dimension by the rest) where the factors
/// are smaller than it (rank (rows + cols) < rows x cols, so rank is below
/// both dimensions), everything else runs of exact values, merged.
SmallVector<CodecPiece> powerSgdPiecesOf(Value input, int64_t rank,
                                         int64_t *smallest = nullptr) {
  SmallVector<CodecPiece> pieces;
  auto exact = [&](int64_t n) {
    if (!pieces.empty() && !pieces.back().isMatrix())
      pieces.back().rows += n;
    else
      pieces.push_back({n, 0});
  };
  for (ArrayRef<int64_t> shape : memberShapes(input)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    int64_t rows = shape.empty() ? n : shape.front(), cols = rows ? n / rows : 0;
    bool matrix = shape.size() >= 2 && rank * (rows + cols) < rows * cols;
    if (shape.size() >= 2 && smallest)
      *smallest = std::max(*smallest, std::min(rows, cols));
    if (matrix)
      pieces.push_back({rows, cols});
    else if (n > 0)
      exact(n);
  }
  return pieces;
}

/// `pieces` with the matrices that straddle the boundaries of a split
/// among `members` node members (j/members of the values) cut at the row
/// nearest the boundary, where both parts stay worth compressing at
/// `rank`: powerSgdChunks then splits the bucket evenly on piece
/// boundaries, so each member sends, computes and keeps residuals for
/// about its share (a bucket of one large matrix would otherwise fall to
/// one member). Each part is approximated on its own (rank R per block of
/// rows), at the cost of one more Q of cols x R values per cut.
SmallVector<CodecPiece> splitForMembers(ArrayRef<CodecPiece> pieces, int64_t members,
                                        int64_t rank) {
  SmallVector<CodecPiece> out;
  int64_t total = 0;
  for (const CodecPiece &p : pieces)
    total += p.size();
  auto worth = [&](int64_t rows, int64_t cols) { return rank * (rows + cols) < rows * cols; };
  int64_t at = 0, j = 1;
  for (const CodecPiece &piece : pieces) {
    CodecPiece p = piece;
    // Boundaries j * total / members inside this piece (as values: cut
    // where prefix * members is nearest j * total).
    while (p.isMatrix() && j < members && (at + p.size()) * members > j * total) {
      int64_t want = j * total - at * members; // values into p, times members
      int64_t rows = (want + p.cols * members / 2) / (p.cols * members);
      ++j;
      if (rows <= 0 || rows >= p.rows || !worth(rows, p.cols) || !worth(p.rows - rows, p.cols))
        continue;
      out.push_back({rows, p.cols});
      at += rows * p.cols;
      p.rows -= rows;
    }
    while (j < members && (at + p.size()) * members > j * total)
      ++j;
    out.push_back(p);
    at += p.size();
  }
  return out;
}

/// printf's `format` of `value`.
std::string formatted(const char *format, double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format(format, value);
  return text;
}

RankedTensorType withElement(Type t, Type element) {
  return cast<RankedTensorType>(t).clone(element);
}

/// `v` as bf16 where it is made: the bucket's concat and the reshapes that
/// feed only it are retyped, each gradient they gather is rounded right
/// after its definition (so it waits for its bucket in half the bytes).
Value narrowedAtSource(Value v) {
  Type bf16 = BFloat16Type::get(v.getContext());
  Operation *def = v.getDefiningOp();
  if (def && v.hasOneUse() && isa<hpc::ConcatOp, hpc::ReshapeOp>(def)) {
    for (OpOperand &o : def->getOpOperands())
      o.set(narrowedAtSource(o.get()));
    v.setType(withElement(v.getType(), bf16));
    return v;
  }
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  return hpc::CastOp::create(b, v.getLoc(), withElement(v.getType(), bf16), v,
                             TypeAttr::get(bf16));
}

/// Retypes `reduced` (an all_reduce's result, now bf16) and the re-layouts
/// that follow it (a bucket's split, reshapes, transposes) to bf16, and
/// widens each value of that chain back to f32 right before its first
/// other user: the sums wait for the optimizer in bf16 too.
void widenedAtUse(Value reduced) {
  Block *block = reduced.getDefiningOp()->getBlock();
  llvm::SetVector<Operation *> chain = hpc::relayoutsOf(reduced, block);
  SmallVector<Value> values{reduced};
  for (Operation *op : chain)
    llvm::append_range(values, op->getResults());
  Type bf16 = BFloat16Type::get(reduced.getContext());
  for (Value v : values) {
    auto wide = cast<RankedTensorType>(v.getType());
    if (v != reduced)
      v.setType(wide.clone(bf16));
    else
      wide = wide.clone(Float32Type::get(v.getContext()));
    SmallVector<OpOperand *> outside;
    Operation *first = nullptr;
    bool elsewhere = false;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (chain.contains(user))
        continue;
      outside.push_back(&use);
      Operation *at = block->findAncestorOpInBlock(*user);
      elsewhere |= !at;
      if (at && (!first || at->isBeforeInBlock(first)))
        first = at;
    }
    if (outside.empty())
      continue;
    OpBuilder b(v.getContext());
    if (elsewhere || !first)
      b.setInsertionPointAfterValue(v);
    else
      b.setInsertionPoint(first);
    Value w = hpc::CastOp::create(b, v.getLoc(), wide, v, TypeAttr::get(wide.getElementType()));
    for (OpOperand *use : outside)
      use->set(w);
  }
}

/// The codecs dist-compress chooses among.
enum class Choice { None, Int8, PowerSgd, TopK };
constexpr int kChoices = 4;

struct DistCompress : hpc::impl::DistCompressBase<DistCompress> {
  using DistCompressBase::DistCompressBase;

  hpc::cost::ClusterSpec clusterSpec;
  bool haveCluster = false;
  int64_t perNode = 0;      ///< the module's ranks per node (0: not known)
  int64_t countPerNode = 1; ///< nodes for counting: every rank one when unknown
  int64_t narrowed = 0;     ///< all_reduces made bf16 (buffers-bf16)

  /// Why `op` cannot be compressed at all ("" when it can): its values,
  /// and its cross-node hop.
  std::string notCompressible(Operation *op) const {
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    auto kind = op->getAttrOfType<ReductionKindAttr>("reduction").getValue();
    if (!type.getElementType().isF32())
      return "not f32";
    if (kind != ReductionKind::sum && kind != ReductionKind::avg)
      return "not a sum";
    if (op->getAttr("compression"))
      return "already compressed";
    llvm::SmallPtrSet<Operation *, 16> seen;
    if (!reachesUpdateAsGradient(op->getResult(0), seen))
      return "not a gradient";
    if (perNode <= 0 || op->hasAttr("ranks_per_node"))
      return "";
    // A flat reduction: its ring is the cross-node hop only when no two
    // members share a node.
    MeshAttr mesh = lookupMesh(op);
    SmallVector<int64_t> axes;
    for (StringRef a : axisNames(op->getAttrOfType<ArrayAttr>("axes")))
      axes.push_back(mesh.axisIndex(a));
    for (int64_t r = 0, n = mesh.numDevices(); r < n; ++r) {
      SmallVector<int64_t> members = groupWorldRanks(mesh, axes, r);
      llvm::SmallDenseSet<int64_t> nodes;
      for (int64_t w : members)
        if (!nodes.insert(w / perNode).second)
          return "flat over ranks that share a node (compress after dist-hierarchical)";
      if (nodes.size() < 2)
        return "within one node";
    }
    return "";
  }

  /// The codec `choice` on `op` ({} with the reason when it does not apply).
  Attribute codecFor(Operation *op, Choice choice, std::string &why) const {
    MLIRContext *ctx = op->getContext();
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    switch (choice) {
    case Choice::None:
      return {};
    case Choice::Int8:
      if (type.getNumElements() < block) {
        why = "smaller than a block";
        return {};
      }
      return Int8BlockAttr::get(ctx, block);
    case Choice::TopK:
      if (type.getNumElements() >= hpc::codecs::kTopkMaxValues) {
        why = "too many values for 32-bit indices";
        return {};
      }
      return TopKAttr::get(ctx, ratio);
    case Choice::PowerSgd: {
      if (!isa<AllReduceOp>(op)) {
        why = "a reduce_scatter (ZeRO's gradient shards): PowerSGD compresses all-reduces";
        return {};
      }
      int64_t smallest = 0;
      SmallVector<CodecPiece> pieces = powerSgdPiecesOf(op->getOperand(0), rank, &smallest);
      if (llvm::none_of(pieces, [](const CodecPiece &p) { return p.isMatrix(); })) {
        why = smallest ? llvm::formatv("PowerSGD rank {0} is above the smaller dimension of "
                                       "its matrices (at most {1}) or saves nothing on them",
                                       rank.getValue(), smallest)
                             .str()
                       : "no matrix among its values";
        return {};
      }
      // In two levels the node's members split the pieces among them.
      if (auto perNode = op->getAttrOfType<IntegerAttr>("ranks_per_node"))
        if (auto levels = twoLevels(lookupMesh(op),
                                    axisNames(op->getAttrOfType<ArrayAttr>("axes")),
                                    perNode.getInt()))
          pieces = splitForMembers(pieces, levels->perNode, rank);
      SmallVector<int64_t> rows, cols;
      for (const CodecPiece &p : pieces) {
        rows.push_back(p.rows);
        cols.push_back(p.cols);
      }
      // One matrix that is the whole value needs no list.
      if (pieces.size() == 1 && type.getRank() >= 2 && pieces[0].rows == type.getDimSize(0))
        rows.clear(), cols.clear();
      return PowerSgdAttr::get(ctx, rank, rows, cols, errorFeedback);
    }
    }
    return {};
  }

  /// Predicted seconds of `op`'s cross-node hop with `codec` (null: none):
  /// rank 0's bytes across on the link, its messages' latency, and the
  /// codec's passes over memory and (PowerSGD) its products.
  double predictedSeconds(Operation *op, Attribute codec) const {
    Attribute old = op->getAttr("compression");
    if (codec)
      op->setAttr("compression", codec);
    else
      op->removeAttr("compression");
    SentBytes sent = bytesSentByRank(op, 0, countPerNode);
    if (old)
      op->setAttr("compression", old);
    else
      op->removeAttr("compression");
    MeshAttr mesh = lookupMesh(op);
    SmallVector<StringRef> axes = axisNames(op->getAttrOfType<ArrayAttr>("axes"));
    std::optional<TwoLevels> levels;
    if (auto p = op->getAttrOfType<IntegerAttr>("ranks_per_node"))
      levels = twoLevels(mesh, axes, p.getInt());
    int64_t G = levels ? levels->nodes : groupSize(mesh, axes);
    int64_t L = levels ? levels->perNode : 1;
    int64_t n = cast<RankedTensorType>(op->getOperand(0).getType()).getNumElements();
    int64_t hopValues = (n + L - 1) / L;
    int64_t messages = (isa<AllReduceOp>(op) ? 2 : 1) * (G - 1);
    const hpc::cost::DeviceSpec &device = clusterSpec.device;
    double bandwidth = device.memoryBandwidth * clusterSpec.efficiency.memory;
    double codecSeconds = 0;
    if (isa_and_nonnull<Int8BlockAttr>(codec)) {
      // The residual read and written, the value read, its int8 written,
      // the pieces decoded and summed, the same again for the gather.
      codecSeconds = 30.0 * double(hopValues) / bandwidth;
    } else if (isa_and_nonnull<TopKAttr>(codec)) {
      // The residual, the keys, a selection over them and the pairs:
      // hpcrt-codec-bench measures 6-7 ns a value on a core of ~16 GB/s,
      // about 100 bytes of memory traffic a value.
      codecSeconds = 100.0 * double(hopValues) / bandwidth;
    } else if (auto psgd = dyn_cast_or_null<PowerSgdAttr>(codec)) {
      // Two ring all-reduces across; M read by each of the three products
      // and written once, the residual read and written (six f32 passes),
      // 6R flops a value (hpcrt-codec-bench: 1.4-1.5 ns a value at R = 4).
      messages = 4 * (G - 1);
      double flops = device.peakFlops[int(hpc::cost::DType::FP32)] *
                     clusterSpec.efficiency.matmul;
      codecSeconds = 24.0 * double(hopValues) / bandwidth +
                     (flops > 0 ? 6.0 * double(psgd.getRank()) * double(hopValues) / flops : 0);
    }
    double link = sent.acrossNodes > 0
                      ? hpc::cost::sendTime(clusterSpec, double(sent.acrossNodes), true) +
                            double(messages - 1) * clusterSpec.interNode.latency
                      : 0;
    return link + codecSeconds;
  }

  /// What the codec on `op` carries from call to call: its state, an
  /// hpc.variable ({} for int8 and top-k without error feedback).
  Value stateFor(Operation *op, Attribute codec, int64_t index) {
    bool psgd = isa<PowerSgdAttr>(codec);
    if (!psgd && !errorFeedback)
      return {};
    int64_t elements = codecStateElements(op);
    auto func = op->getParentOfType<func::FuncOp>();
    OpBuilder vb(&func.getBody().front(), func.getBody().front().begin());
    auto type = RankedTensorType::get(
        {elements}, stateBf16 ? Type(vb.getBF16Type()) : Type(vb.getF32Type()));
    std::string name = (psgd ? "dist.powersgd_state." : "dist.error_feedback.") +
                       std::to_string(index);
    return hpc::VariableOp::create(vb, op->getLoc(), type, vb.getStringAttr(name),
                                   ElementsAttr(), vb.getStringAttr("error_feedback"));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Choice fixed = Choice::None;
    bool isAuto = mode == "auto";
    if (mode == "int8")
      fixed = Choice::Int8;
    else if (mode == "powersgd")
      fixed = Choice::PowerSgd;
    else if (mode == "topk")
      fixed = Choice::TopK;
    else if (!isAuto && mode != "none") {
      module.emitError() << "dist-compress: mode '" << mode
                         << "' is not one of auto, none, int8, powersgd, topk";
      return signalPassFailure();
    }
    if (block < 1 || block > (int64_t(1) << 24)) {
      module.emitError() << "dist-compress: block " << block << " is not in [1, 16777216]";
      return signalPassFailure();
    }
    if (rank < 1) {
      module.emitError() << "dist-compress: PowerSGD rank " << rank << " is not at least 1";
      return signalPassFailure();
    }
    if (!(ratio > 0 && ratio <= 1)) {
      module.emitError() << "dist-compress: top-k ratio " << formatted("%g", ratio)
                         << " is not in (0, 1]";
      return signalPassFailure();
    }
    haveCluster = !cluster.empty();
    if (haveCluster) {
      std::string error;
      if (!hpc::cost::parseClusterSpec(cluster, clusterSpec, error)) {
        module.emitError() << "dist-compress: " << error;
        return signalPassFailure();
      }
    }
    auto perNodeAttr = module->getAttrOfType<IntegerAttr>("dist.ranks_per_node");
    perNode = perNodeAttr ? perNodeAttr.getInt() : 0;
    // With no nodes known every reduction's group is its hop: count its
    // bytes "across" as if every rank were a node.
    countPerNode = perNode > 0 ? perNode : 1;
    SentBytes before = bytesSentByAllRanksIn(module, countPerNode);

    SmallVector<Operation *> candidates;
    int64_t reductions = 0;
    std::string firstReason;
    module.walk([&](Operation *op) {
      if (!isa<AllReduceOp, ReduceScatterOp>(op))
        return;
      bool crosses = false;
      for (int64_t r = 0, n = lookupMesh(op).numDevices(); r < n && !crosses; ++r)
        crosses = bytesSentByRank(op, r, countPerNode).acrossNodes > 0;
      if (!crosses)
        return;
      ++reductions;
      std::string why = notCompressible(op);
      if (why.empty())
        candidates.push_back(op);
      else if (firstReason.empty())
        firstReason = why;
    });

    double chosenTime = 0, uncompressedTime = 0;
    int64_t stateBytes = 0, made = 0, matrices = 0, matrixValues = 0, factorValues = 0;
    int64_t chosen[kChoices] = {};
    std::string declined, codecReason;
    SmallVector<std::string> reasons; // auto: each reduction's predicted times
    for (Operation *op : candidates) {
      std::string why;
      Choice pick = fixed;
      Attribute codec;
      double noneTime = haveCluster ? predictedSeconds(op, {}) : 0, pickTime = noneTime;
      if (isAuto && haveCluster) {
        // Why: each codec's predicted hop time, on a line of its own.
        std::string times = llvm::formatv("none {0:F3} ms", noneTime * 1e3).str();
        for (Choice c : {Choice::Int8, Choice::PowerSgd}) {
          std::string unused;
          Attribute a = codecFor(op, c, unused);
          const char *name = c == Choice::Int8 ? "int8" : "powersgd";
          if (!a) {
            times += llvm::formatv(", {0} n/a", name).str();
            continue;
          }
          double t = predictedSeconds(op, a);
          times += llvm::formatv(", {0} {1:F3} ms", name, t * 1e3).str();
          if (t < pickTime)
            pick = c, codec = a, pickTime = t;
        }
        reasons.push_back(llvm::formatv(
            "dist-compress:   {0} of {1} values: {2} -> {3}", op->getName().stripDialect(),
            cast<RankedTensorType>(op->getOperand(0).getType()).getNumElements(), times,
            pick == Choice::Int8 ? "int8" : pick == Choice::PowerSgd ? "powersgd" : "none"));
        if (!codec && declined.empty())
          declined = "the cost model predicts no codec faster than the link time it saves";
      } else if (!isAuto && fixed != Choice::None) {
        codec = codecFor(op, fixed, why);
        if (!codec && codecReason.empty())
          codecReason = why;
        if (codec && haveCluster)
          pickTime = predictedSeconds(op, codec);
      } else if (declined.empty()) {
        declined = isAuto ? "auto without --cluster: no link figures to weigh a codec against"
                          : "--compress=none";
      }
      if (!codec)
        continue;
      op->setAttr("compression", codec);
      ++made;
      ++chosen[int(pick)];
      uncompressedTime += noneTime;
      chosenTime += pickTime;
      if (auto psgd = dyn_cast<PowerSgdAttr>(codec))
        for (const CodecPiece &p :
             powerSgdPieces(psgd, cast<RankedTensorType>(op->getOperand(0).getType())))
          if (p.isMatrix()) {
            ++matrices;
            matrixValues += p.size();
            factorValues += rank * (p.rows + p.cols);
          }
      Value state = stateFor(op, codec, made - 1);
      if (!state)
        continue;
      if (auto ar = dyn_cast<AllReduceOp>(op))
        ar.getFeedbackMutable().assign(state);
      else
        cast<ReduceScatterOp>(op).getFeedbackMutable().assign(state);
      stateBytes += bytesOf(state.getType());
    }
    // Every gradient all_reduce across nodes, compressed or not, in bf16.
    if (buffersBf16)
      for (Operation *op : candidates)
        if (auto ar = dyn_cast<AllReduceOp>(op)) {
          ar.getInputMutable().assign(narrowedAtSource(ar.getInput()));
          ar.getResult().setType(withElement(ar.getResult().getType(),
                                             BFloat16Type::get(&getContext())));
          widenedAtUse(ar.getResult());
          ++narrowed;
        }
    if (fixed != Choice::None && !made) {
      module.emitError() << "dist-compress: --compress=" << mode
                         << " found no gradient reduction across nodes to compress ("
                         << (!codecReason.empty() ? "the first: " + codecReason
                             : reductions         ? "the first: " + firstReason
                                        : std::string("the program reduces nothing across "
                                                      "nodes: compile a train step with a "
                                                      "dp axis of the mesh on several nodes"))
                         << ")";
      return signalPassFailure();
    }
    compressedReductions = made;
    report(module, before, reductions, made, chosen, declined, firstReason, stateBytes,
           matrices, matrixValues, factorValues, chosenTime, uncompressedTime);
    for (const std::string &line : reasons)
      llvm::errs() << line << "\n";
  }

  /// Prints the one-line report and records the module's byte counts.
  void report(ModuleOp module, SentBytes before, int64_t reductions, int64_t made,
              const int64_t (&chosen)[kChoices], StringRef declined, StringRef firstReason,
              int64_t stateBytes, int64_t matrices, int64_t matrixValues, int64_t factorValues,
              double chosenTime, double uncompressedTime) {
    SentBytes now = bytesSentByAllRanksIn(module, countPerNode);
    // The codecs used: "int8 blocks of 256", "PowerSGD rank 4 on 9 matrices
    // (0.0210x of their values)", "top-k 1%", each with its count when mixed.
    SmallVector<std::string> used;
    for (Choice c : {Choice::Int8, Choice::PowerSgd, Choice::TopK}) {
      if (!chosen[int(c)])
        continue;
      std::string text =
          c == Choice::Int8 ? llvm::formatv("int8 blocks of {0}", block.getValue()).str()
          : c == Choice::TopK
              ? formatted("top-k ratio %g", ratio.getValue())
              : llvm::formatv("PowerSGD rank {0} on {1} matrix blocks ({2:F4}x of their values)",
                              rank.getValue(), matrices,
                              matrixValues ? double(factorValues) / double(matrixValues) : 0.0)
                    .str();
      if (chosen[int(c)] != made)
        text += llvm::formatv(" x{0}", chosen[int(c)]).str();
      used.push_back(text);
    }
    std::string codecs =
        made ? " (" + llvm::join(used, ", ") + ", error feedback " +
                   (errorFeedback ? "on" : "off") + (stateBf16 ? ", state in bf16" : "") + ")"
             : "";
    std::string why = made                ? ""
                      : !declined.empty() ? " (" + declined.str() + ")"
                      : reductions        ? " (the first: " + firstReason.str() + ")"
                                          : " (nothing is reduced across nodes)";
    llvm::errs() << llvm::formatv(
        "dist-compress: {0} of {1} reductions across nodes compressed{2}{3}{7}; per step the "
        "ranks send {4} bytes across nodes (uncompressed: {5}), codec state {6} bytes a rank",
        made, reductions, codecs, why, now.acrossNodes, before.acrossNodes, stateBytes,
        narrowed ? llvm::formatv("; {0} gradient all_reduces in bf16", narrowed).str() : "");
    if (haveCluster && made)
      llvm::errs() << llvm::formatv("; predicted hop time {0:E2} s compressed vs {1:E2} s",
                                    chosenTime, uncompressedTime);
    llvm::errs() << "\n";
    auto i64 = IntegerType::get(&getContext(), 64);
    if (perNode > 0) {
      module->setAttr("dist.bytes_across_nodes", IntegerAttr::get(i64, now.acrossNodes));
      module->setAttr("dist.bytes_within_nodes",
                      IntegerAttr::get(i64, now.total - now.acrossNodes));
    }
    module->setAttr("dist.error_feedback_bytes", IntegerAttr::get(i64, stateBytes));
    if (module->hasAttr("dist.bytes_per_rank"))
      module->setAttr("dist.bytes_per_rank", IntegerAttr::get(i64, bytesSentByRankZeroIn(module)));
  }
};

} // namespace
