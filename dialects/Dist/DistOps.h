//===- DistOps.h - the dist dialect ------------------------------*- C++ -*-===//
//
// Declares the dist dialect: mesh and sharding attributes, the token type,
// sharding annotations and collectives.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_DIALECT_DIST_DISTOPS_H
#define HPC_DIALECT_DIST_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Dist/DistDialect.h.inc"
#include "Dist/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Dist/DistAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "Dist/DistTypes.h.inc"

#define GET_OP_CLASSES
#include "Dist/DistOps.h.inc"

namespace hpc::dist {

/// The mesh of the nearest enclosing op carrying a `dist.mesh` attribute.
MeshAttr lookupMesh(mlir::Operation *op);

/// Checks `sharding` against a tensor type and a mesh: one entry per
/// dimension, known and unrepeated axes, divisible dimensions.
mlir::LogicalResult
verifySharding(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
               ShardingAttr sharding, mlir::RankedTensorType type,
               MeshAttr mesh);

/// The axis names of a collective's `axes` attribute, in order.
llvm::SmallVector<llvm::StringRef> axisNames(mlir::ArrayAttr axes);

/// Product of the sizes of `axes` in `mesh` (the group size of a collective).
int64_t groupSize(MeshAttr mesh, llvm::ArrayRef<llvm::StringRef> axes);

/// The world ranks of the group that world rank `rank` belongs to in a
/// collective over the mesh axes `axes` (indices), in group-index order;
/// `index` (when given) receives `rank`'s group index.
llvm::SmallVector<int64_t> groupWorldRanks(MeshAttr mesh, llvm::ArrayRef<int64_t> axes,
                                           int64_t rank, int64_t *index = nullptr);

/// A group's members laid on nodes of consecutive world ranks: `nodes`
/// nodes of `perNode` members each.
struct TwoLevels {
  int64_t nodes = 1;
  int64_t perNode = 1;
};

/// Whether every group of a collective over `axes` spans several nodes of
/// `ranksPerNode` consecutive world ranks with the same number (more than
/// one) of its members on each: then a reduction over them runs in two
/// levels (dist-hierarchical). On a node, members are ordered by group
/// index; nodes by their first member's group index.
std::optional<TwoLevels> twoLevels(MeshAttr mesh, llvm::ArrayRef<llvm::StringRef> axes,
                                   int64_t ranksPerNode);

/// Bytes one rank sends for an op, and of those the bytes to a rank on
/// another node.
struct SentBytes {
  int64_t total = 0;
  int64_t acrossNodes = 0;
};

/// The bytes world rank `rank` puts on the wire for `op` (as
/// bytesSentByRankZero counts them, for any rank), the part sent to
/// another node counted apart when the ranks are laid on nodes of
/// `ranksPerNode` (0: unknown, nothing is counted across).
SentBytes bytesSentByRank(mlir::Operation *op, int64_t rank, int64_t ranksPerNode);

/// bytesSentByRank summed over every rank of the mesh and every op nested
/// in `root`: what crosses each level in one run of the whole job.
SentBytes bytesSentByAllRanksIn(mlir::Operation *root, int64_t ranksPerNode);

/// Bytes the rank with mesh coordinates all 0 puts on the wire for `op`, as
/// the runtime's algorithms send them (rings for all_reduce, reduce_scatter,
/// all_gather and all_to_all, two levels of rings for a reduction with
/// ranks_per_node, a chain from the root for broadcast, one message for
/// send); 0 for ops that move nothing (all_slice, recv,
/// non-dist ops). The one definition of "bytes per rank" that compiler
/// reports and tests compare with the runtime's counters.
int64_t bytesSentByRankZero(mlir::Operation *op);

/// bytesSentByRankZero summed over every op nested in `root`.
int64_t bytesSentByRankZeroIn(mlir::Operation *root);

/// Bytes of a ranked tensor type's data (i1 as one byte per element).
int64_t bytesOf(mlir::Type type);

/// The block of `#dist.int8_block` when none is written.
constexpr int64_t kDefaultInt8Block = 256;

/// One piece of a PowerSGD reduction's values: a matrix of `rows` x
/// `cols` it compresses, or (cols == 0) a run of `rows` values it reduces
/// exactly.
struct CodecPiece {
  int64_t rows = 0;
  int64_t cols = 0;
  bool isMatrix() const { return cols > 0; }
  int64_t size() const { return cols > 0 ? rows * cols : rows; }
};

/// The pieces of a PowerSGD reduction of `input`'s values: the attribute's
/// list, or (none listed) the whole value as one matrix, its first
/// dimension by the product of the others.
llvm::SmallVector<CodecPiece> powerSgdPieces(PowerSgdAttr codec, mlir::RankedTensorType input);

/// How the L members of a node split PowerSGD's pieces in a two-level
/// reduction: L + 1 piece indices b, chunk j being pieces [b_j, b_j+1),
/// contiguous, whole pieces, each bound the piece boundary nearest j/L of
/// the values (the lower on a tie). The node's ring reduce-scatter leaves
/// member l with chunk (l + 1) mod L, as for even chunks. L = 1: [0, P].
/// The compiler encodes the bounds for the runtime (hpcrt.h).
llvm::SmallVector<int64_t> powerSgdChunks(llvm::ArrayRef<CodecPiece> pieces, int64_t L);

/// What PowerSGD's two all-reduces carry for pieces [begin, end) at
/// `rank`: first the matrices' P (rows x rank each) and the exact values,
/// then the matrices' Q (cols x rank each).
struct PowerSgdSums {
  int64_t first = 0;
  int64_t second = 0;
};
PowerSgdSums powerSgdSums(llvm::ArrayRef<CodecPiece> pieces, int64_t begin, int64_t end,
                          int64_t rank);

/// The codec state of a compressed reduction (all_reduce or
/// reduce_scatter, either form, with a `compression`): the f32 values of
/// its `feedback` operand, the most any rank needs (int8 and top-k have
/// one only with error feedback); 0 for any other op. An all_reduce
/// whose int8 hop reduces m values over G members keeps m + ceil(m / G)
/// (what it sent, and the quantized sum of its part it gathers back), with
/// m = ceil(n / L) in two levels of L members a node; top-k keeps the m
/// values it sent; a reduce_scatter keeps its G blocks of the hop's input.
/// PowerSGD keeps, for the pieces of a member's chunk, each matrix's Q
/// (cols x rank) and, with error feedback, its residual (rows x cols).
int64_t codecStateElements(mlir::Operation *op);

} // namespace hpc::dist

#endif // HPC_DIALECT_DIST_DISTOPS_H
