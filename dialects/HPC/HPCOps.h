//===- HPCOps.h - the hpc tensor graph dialect -------------------*- C++ -*-===//
//
// Declares the hpc dialect and its ops, and the shared shape-inference and
// folding helpers that the generated op classes call.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_DIALECT_HPC_HPCOPS_H
#define HPC_DIALECT_HPC_HPCOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "HPC/HPCOpsDialect.h.inc"

namespace hpc::detail {

using mlir::ArrayRef;
using mlir::Attribute;
using mlir::Location;
using mlir::LogicalResult;
using mlir::OpFoldResult;
using mlir::Operation;
using mlir::SmallVectorImpl;
using mlir::Type;

/// Result type of a numpy-broadcast binary op; `boolResult` makes it i1.
LogicalResult inferBroadcastBinary(std::optional<Location> loc, Type lhs,
                                   Type rhs, bool boolResult,
                                   SmallVectorImpl<Type> &inferred);

/// Broadcast two shapes (numpy rules); fails when they do not broadcast.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &result);

/// Result type of a reduction over `axes` (sorted, non-negative).
LogicalResult inferReduction(std::optional<Location> loc, Type input,
                             ArrayRef<int64_t> axes, bool keepdims,
                             Type resultElementType,
                             SmallVectorImpl<Type> &inferred);

/// Result type of a windowed pooling op.
LogicalResult inferPool(std::optional<Location> loc, Type input,
                        ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                        bool ceilMode, SmallVectorImpl<Type> &inferred);

/// Result type of a global pooling op.
LogicalResult inferGlobalPool(std::optional<Location> loc, Type input,
                              SmallVectorImpl<Type> &inferred);

/// Constant-folds an elementwise op (unary or binary, by op name) over small
/// dense constants; returns null when it does not apply.
OpFoldResult foldElementwise(Operation *op, ArrayRef<Attribute> operands);

/// Constant-folds a reduction over a small dense constant.
OpFoldResult foldReduction(Operation *op, Attribute input,
                           ArrayRef<int64_t> axes, bool keepdims);

/// Largest constant (in elements) that folders evaluate; bigger ones stay ops,
/// so folding never blows up compile time or memory.
constexpr int64_t kMaxFoldElements = 1 << 16;

} // namespace hpc::detail

namespace hpc {

/// How a factor of a sharding rule may be split.
enum class FactorKind {
  /// Splitting it splits the results the same way; no communication.
  Parallel,
  /// Only operands carry it; splitting it leaves partial results.
  Reduction,
  /// Splitting it needs data from other shards (softmax axis, halo, slice).
  NeedsReplication,
};

/// An op's sharding rule (see ShardingRuleInterface): factors with sizes and
/// kinds, and for every operand and result dimension its factor or -1.
struct ShardingRule {
  struct Factor {
    int64_t size;
    FactorKind kind;
  };
  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandDims, resultDims;

  /// Adds a factor and returns its index.
  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Parallel) {
    factors.push_back({size, kind});
    return factors.size() - 1;
  }
  /// Einsum-like text, e.g. "[f0, f2], [f2, f1] -> [f0, f1] reduction{f2}".
  std::string str() const;
};

/// Rewrites the attributes that spell out an op's result shape (reshape and
/// expand targets, resize sizes, slice ends) for the local piece `local` of
/// its result; partitioners call it before inferring the local result type.
void setLocalResultShape(mlir::Operation *op, llvm::ArrayRef<int64_t> local);

/// Ops whose result is their operand's storage with another shape (or the
/// same: inference dropout): no kernel, no bytes moved.
bool isViewOp(mlir::Operation *op);

/// The values of hpc.gemm's and hpc.conv's `activation` attribute, the
/// elementwise function their kernels apply to the result (the runtime reads
/// these strings): "none" first, then "relu", "gelu" (erf), "gelu_tanh",
/// "sigmoid", "tanh", "silu".
llvm::ArrayRef<llvm::StringRef> epilogueActivations();

/// The `activation` value that computes what the elementwise op `op` does
/// (hpc.relu -> "relu", hpc.gelu approximate "tanh" -> "gelu_tanh", ...);
/// std::nullopt for any other op.
std::optional<llvm::StringRef> epilogueActivationOf(mlir::Operation *op);

/// hpc.conv's operand segment sizes (input, weight, bias, residual) for ops
/// built from a generic operand list and attributes (the importer, the
/// gradient builder).
mlir::NamedAttribute convOperandSegments(mlir::OpBuilder &b, bool bias, bool residual);

/// The operands a state update (hpc.sgd_update, hpc.adamw_update,
/// hpc.assign) writes in place: its parameter and buffers; empty for every
/// other op. The planner and the partitioner both keep these whole.
llvm::SmallVector<unsigned> inPlaceOperands(mlir::Operation *op);

/// Attaches upstream MLIR's shard::ShardingInterface to every hpc op, derived
/// from its ShardingRule, so `--sharding-propagation` and `--shard-partition`
/// work on hpc programs (HPCShardInterface.cpp).
void registerShardingInterfaceModels(mlir::DialectRegistry &registry);

} // namespace hpc

#include "HPC/HPCInterfaces.h.inc"

#define GET_OP_CLASSES
#include "HPC/HPCOps.h.inc"

namespace hpc {

/// beta*C + product for a gemm whose C was taken off because its reduction
/// was split: partitioners add C once, after the partial products are summed.
mlir::Value addGemmBias(mlir::OpBuilder &b, mlir::Location loc, GemmOp gemm,
                        mlir::Value product, mlir::Value c);

/// Whether `v` is an hpc.constant whose every element is zero (the buffer a
/// gradient's scatter-add starts from).
bool isZeroConstant(mlir::Value v);

/// A unit attribute hpc-autodiff sets on the module while it builds the
/// backward with fused-gradients=false: GELU's and layer normalization's
/// gradient models then build their formulas from forward ops instead of
/// hpc.gelu_grad and hpc.layer_norm_grad (for comparison).
constexpr llvm::StringLiteral kComposedGradientsAttr = "hpc.composed_gradients";

/// Data above this many bytes is a resource blob (kept apart from the
/// printed IR), smaller data an inline dense attribute.
constexpr int64_t kInlineDataBytes = 1024;

/// Weight or constant data of `type` (not i1) from its row-major bytes: a
/// resource blob named after `name` above kInlineDataBytes when
/// `allowResource`, else inline dense. `bytes` must fit `type`.
mlir::ElementsAttr elementsFromBytes(mlir::RankedTensorType type, llvm::StringRef name,
                                     llvm::ArrayRef<char> bytes, bool allowResource = true);

/// The strided box starts[i] + k * steps[i], k < shape[i], of row-major data
/// of `inShape` with `eltBytes`-byte elements, as row-major bytes.
std::string sliceBytes(llvm::StringRef data, llvm::ArrayRef<int64_t> inShape, int64_t eltBytes,
                       llvm::ArrayRef<int64_t> starts, llvm::ArrayRef<int64_t> steps,
                       llvm::ArrayRef<int64_t> shape);

/// Row-major data of `shape` split into `pieces` equal pieces along `dim`,
/// stored piece after piece (each row-major): piece g is then one
/// contiguous block at g times its size (a tensor-parallel rank's part).
std::string pieceMajorBytes(llvm::StringRef data, llvm::ArrayRef<int64_t> shape,
                            int64_t eltBytes, int64_t dim, int64_t pieces);

/// A projection by a weight along the last dimension whose result a split
/// divides, as exporters fuse Q, K and V: matmul(x, W) [+ b] or gemm(x, W
/// [, b]), optionally followed by a reshape that keeps the last dimension
/// (exporters flatten the tokens around a gemm). Tensor parallelism runs it
/// as one projection per piece (hpc::unfuseSplitProjections), and the cost
/// model prices the weight that the compiled step then holds whole.
struct SplitProjection {
  mlir::Operation *op = nullptr; ///< the matmul or gemm
  AddOp add;                     ///< the bias add of a matmul
  ReshapeOp reshape;             ///< the reshape after it
  mlir::Value weight, bias;
  bool transposed = false;       ///< gemm trans_b: W is [N, K]
};

/// The projection `split` divides along its last dimension, each op between
/// them used once; std::nullopt when the split is not such.
std::optional<SplitProjection> matchSplitProjection(SplitOp split);

} // namespace hpc

#endif // HPC_DIALECT_HPC_HPCOPS_H
