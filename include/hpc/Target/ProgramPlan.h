//===- ProgramPlan.h - tensors, buffers and kernels of a program -*- C++ -*-===//
//
// The static plan the compiler hands to the runtime: every tensor of the
// program gets a slot (a graph input, a range of the one arena, or a range of
// the weights file), arena ranges are reused once their tensor is dead, and
// the ops that need a kernel are listed in program order. View ops (reshape,
// squeeze, unsqueeze) get their operand's storage with a new shape.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TARGET_PROGRAMPLAN_H
#define HPC_TARGET_PROGRAMPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace hpc {

/// Where a tensor's bytes live at run time. State is the mutable training
/// state (hpc.variable): allocated and initialized once, kept across steps.
enum class Region { Input, Arena, Weights, State };

struct TensorSlot {
  Region region = Region::Arena;
  /// Input number (Region::Input).
  int64_t index = 0;
  /// Byte offset in the arena, the state or the weights data section.
  int64_t offset = 0;
  int64_t bytes = 0;
  /// A view's bytes past the start of its root (a piece of an outermost
  /// split); 0 for roots and whole views.
  int64_t viewOffset = 0;
  mlir::RankedTensorType type;
  /// A rank's piece of a weight split along its outermost dimension (a
  /// dist.all_slice planned as a view): the data starts rankStride bytes
  /// further per group index over these mesh axes (indices).
  std::vector<int64_t> rankAxes;
  int64_t rankStride = 0;
  /// Stored in the CPU's blocked channel layout (its producer carries
  /// kBlockedAttrName); the manifest says "layout": "blocked".
  bool blocked = false;
};

struct ProgramPlan {
  std::vector<TensorSlot> tensors;
  llvm::DenseMap<mlir::Value, int32_t> tensorIds;
  /// Ops that need a kernel call, in program order.
  std::vector<mlir::Operation *> kernels;
  /// Planned arena size: the peak of simultaneously live intermediates.
  int64_t arenaBytes = 0;
  /// The weights data section and its named entries.
  struct WeightEntry {
    std::string name;
    int32_t tensor;
    /// Where the data is in the weights data section.
    int64_t dataOffset;
    /// `dist.pieces_of` of a weight stored piece-major (dist-weight-pieces):
    /// the model's shape and the split dim; null otherwise.
    mlir::DictionaryAttr piecesOf;
    /// A ZeRO-3 parameter's whole initial value (its tensor is one rank's
    /// rows): the shape the entry has in the file; null otherwise.
    mlir::RankedTensorType wholeType;
  };
  std::string weightsData;
  std::vector<WeightEntry> weightEntries;
  /// The state region (hpc.variable): its size and one entry per tensor.
  struct StateEntry {
    std::string name;
    int32_t tensor;
    std::string role;
    /// Offset of the initial value in the weights data; -1: zeros.
    int64_t initOffset;
    /// ZeRO-3: the initial value holds every rank's rows; this rank's are
    /// at initOffset + (its index over these mesh axes) * rankStride.
    std::vector<int64_t> rankAxes = {};
    int64_t rankStride = 0;
    /// A sharded variable (dist.state_split): per dimension, the mesh axes
    /// that split it (major first); empty when every rank holds it whole.
    std::vector<std::vector<int64_t>> split = {};
  };
  int64_t stateBytes = 0;
  std::vector<StateEntry> stateEntries;
  /// Graph inputs and outputs: (name, tensor id).
  std::vector<std::pair<std::string, int32_t>> inputs, outputs;
};

/// The discardable unit attribute (set by hpc-plan-layouts) on an op whose
/// result 0 is stored in oneDNN's blocked channel layout for the CPU
/// (nChw8c on AVX2, nChw16c on AVX-512; the runtime picks the block size).
/// Every other activation is plain (row-major in its type's shape).
constexpr llvm::StringLiteral kBlockedAttrName = "hpc.blocked";

/// Every block size the runtime picks divides this, so a blocked tensor
/// whose channel count is a multiple of it has its plain size in bytes.
constexpr int64_t kBlockedChannelMultiple = 16;

/// A type a blocked tensor may have: a static rank-4 [N, C, H, W] f32 or
/// bf16 tensor with C a multiple of kBlockedChannelMultiple (bf16 only for
/// hpc.conv and hpc.cast, the ops a --precision=bf16 conv chain has
/// between its f32 parts).
bool isBlockableType(mlir::Type type);

/// Ops whose result 0 may be written blocked: hpc.conv; hpc.cast of a
/// blockable tensor; hpc.relu, hpc.add of two operands of the same type and
/// hpc.max_pool with all dilations 1 in f32, when their operands are blocked
/// (see propagatesLayout). The result's type must be blockable.
bool mayWriteBlocked(mlir::Operation *op);

/// Whether `use` may read a blocked tensor: hpc.conv's input and residual
/// (not its weight or bias), hpc.cast, and in f32 hpc.relu, hpc.add of two
/// operands of the same type, hpc.max_pool with all dilations 1 and
/// hpc.global_avg_pool (its result stays plain). The operand's type must be
/// blockable.
bool mayReadBlocked(mlir::OpOperand &use);

/// Ops whose result is blocked exactly when their operands are (relu, add,
/// max_pool, cast): they read and write one layout.
bool propagatesLayout(mlir::Operation *op);

/// Whether `use` reads its tensor in the layout its op writes the result
/// in: every operand of a layout-propagating op, and hpc.conv's residual
/// (oneDNN adds it in the convolution's epilogue, element by element of the
/// destination).
bool readsInResultLayout(mlir::OpOperand &use);

/// Whether a conv may read its input and write its result in these layouts:
/// the same one, or a plain input of at most 4 channels (an image stem) into
/// a blocked result. oneDNN's direct JIT convolutions exist for these; the
/// other mixes run on its reference implementation (a plain 32-channel input
/// into a blocked 64-channel result, 1x1 at 8x8: 4.2 ms, against 0.02 ms
/// for the same layout on both sides, AVX2).
bool convLayoutsFit(mlir::Operation *conv, bool inputBlocked, bool resultBlocked);

/// Plans `func` (one block of hpc ops ending in func.return). Reports the
/// first problem (an op without a kernel, a weight without data, an element
/// type the runtime lacks, an update of state that a later op still reads)
/// on the op and fails. A tensor is blocked when its producer carries
/// kBlockedAttrName; a layout the rules above do not allow (a blocked tensor
/// read by a view, an output or any other op; a relu/add/max_pool whose
/// operands and result differ in layout) is reported the same way.
mlir::FailureOr<ProgramPlan> planProgram(mlir::func::FuncOp func);

/// Little-endian bytes of an elements attribute (splats expanded, i1 as one
/// byte per element); failure for data the compiler cannot read.
mlir::FailureOr<std::string> elementBytesOf(mlir::ElementsAttr attr);

/// The runtime's dtype code (the ONNX data type) of an element type, or -1.
int32_t runtimeDType(mlir::Type elementType);

/// The hash of the weights data the runtime checks (hpcrt_hash64), as the
/// 16 lowercase hex digits the manifest and the safetensors metadata hold.
std::string weightsHashHex(llvm::StringRef data);

/// The safetensors key of each of `plan.weightEntries`, in order: the
/// entry's name, with "#N" appended to the Nth repeat (keys are unique). The
/// weights file and the manifest's list of weight names both use these.
std::vector<std::string> weightKeys(const ProgramPlan &plan);

/// Writes `plan`'s weights as a safetensors file, atomically (a temporary
/// file renamed into place), with the hash in its metadata.
mlir::LogicalResult writeWeightsFile(const ProgramPlan &plan,
                                     llvm::StringRef path, std::string &error);

} // namespace hpc

#endif // HPC_TARGET_PROGRAMPLAN_H
