//===- DistDialect.td - the distributed-parallel dialect ---*- tablegen -*-===//
//
// The dist dialect describes how a program is spread over a mesh of devices:
// the mesh and its topology, shardings of tensors over mesh axes, and the
// collectives a per-rank (SPMD) program uses to exchange data.
//
//===----------------------------------------------------------------------===//

#ifndef DIST_DIALECT_TD
#define DIST_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::hpc::dist";
  let summary = "Meshes, shardings and collectives for hybrid parallelism";
  let description = [{
    A `#dist.mesh` names the axes of a device mesh (data, tensor, pipeline,
    ...), their sizes and the topology level each axis crosses (inside a node
    or across nodes). A `#dist.sharding` says which mesh axes split which
    dimensions of a tensor, and which axes hold partial values of a pending
    reduction. Collectives (`dist.all_reduce`, `dist.reduce_scatter`,
    `dist.all_gather`, `dist.all_to_all`, `dist.broadcast`, `dist.send`,
    `dist.recv`) act over mesh axes, synchronously or as a `_start` op that
    returns a `!dist.token` and a `dist.wait` that completes it.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // `dist.pieces_of` on a weight stored piece-major (dist-weight-pieces).
  let hasOperationAttrVerify = 1;
}

def Dist_TopologyLevel : I32EnumAttr<"TopologyLevel", "topology level of a mesh axis", [
  I32EnumAttrCase<"intra_node", 0>,
  I32EnumAttrCase<"inter_node", 1>
]> {
  let cppNamespace = "::hpc::dist";
  let genSpecializedAttr = 0;
}

def Dist_ReductionKind : I32EnumAttr<"ReductionKind", "reduction of a collective", [
  I32EnumAttrCase<"sum", 0>,
  I32EnumAttrCase<"max", 1>,
  I32EnumAttrCase<"min", 2>,
  I32EnumAttrCase<"prod", 3>,
  I32EnumAttrCase<"avg", 4>
]> {
  let cppNamespace = "::hpc::dist";
  let genSpecializedAttr = 0;
}

def Dist_ReductionKindAttr : EnumAttr<Dist_Dialect, Dist_ReductionKind, "reduction"> {
  let assemblyFormat = "$value";
}

class Dist_Attr<string name, string mnemonicText, list<Trait> traits = []>
    : AttrDef<Dist_Dialect, name, traits> {
  let mnemonic = mnemonicText;
}

def Dist_MeshAttr : Dist_Attr<"Mesh", "mesh"> {
  let summary = "A device mesh: named axes, their sizes and topology levels";
  let description = [{
    ```mlir
    #dist.mesh<dp = 2 : inter_node, tp = 4 : intra_node>
    ```
    Ranks are numbered row-major over the axes (the last axis varies
    fastest), so with this mesh ranks 0-3 form one tensor-parallel group
    inside a node. A module carries its mesh as the `dist.mesh` attribute.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr", "axis names">:$names,
                        ArrayRefParameter<"int64_t", "axis sizes">:$sizes,
                        ArrayRefParameter<"::hpc::dist::TopologyLevel", "axis levels">:$levels);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Index of the axis called `name`, or -1.
    int64_t axisIndex(::llvm::StringRef name) const;
    /// Number of devices (product of the axis sizes).
    int64_t numDevices() const;
  }];
}

def Dist_ShardingAttr : Dist_Attr<"Sharding", "sharding"> {
  let summary = "Which mesh axes split which tensor dimensions; partial axes";
  let description = [{
    One list of mesh axes per tensor dimension (major to minor); an empty
    list keeps the dimension whole. `partial` lists axes over which the
    tensor holds partial values of a pending reduction (finished later by
    all_reduce or, fused with a split, reduce_scatter).

    ```mlir
    #dist.sharding<[[dp], [], [tp]]>
    #dist.sharding<[[dp], []], partial = sum[tp]>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::ArrayAttr", "axes per dimension">:$dims,
                        ArrayRefParameter<"::mlir::StringAttr", "partial axes">:$partial,
                        "::hpc::dist::ReductionKind":$partialKind);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The mesh axes that split dimension `dim`.
    ::llvm::SmallVector<::llvm::StringRef> axesOf(unsigned dim) const;
    /// Whether no dimension is split and nothing is partial.
    bool isReplicated() const;
  }];
}

def Dist_Int8BlockAttr : Dist_Attr<"Int8Block", "int8_block"> {
  let summary = "A reduction's compression: int8 values in blocks with one f32 scale each";
  let description = [{
    On a `dist.all_reduce` or `dist.reduce_scatter` (f32, sum or avg) as its
    `compression`: the hop it applies to (the cross-node one of a two-level
    reduction, else the whole group) sends each block of `block` values
    (default 256) as one f32 scale (the block's largest magnitude / 127) and
    one int8 per value, rounded to nearest, ZeRO++'s block quantization.
    The reduction runs as an all-to-all of the quantized pieces, each member
    summing the pieces of its part in group order, then (all_reduce) an
    all-gather of the quantized sums, so every member holds bitwise the same
    result. With an error-feedback operand the rounding error of what a
    rank sent is added to what it sends next step.

    ```mlir
    #dist.int8_block
    #dist.int8_block<block = 128>
    ```
  }];
  let parameters = (ins "int64_t":$block);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_PowerSgdAttr : Dist_Attr<"PowerSgd", "powersgd"> {
  let summary = "A reduction's compression: PowerSGD's rank-R approximation of its matrices";
  let description = [{
    On a `dist.all_reduce` (f32, sum or avg) as its `compression`: the hop
    it applies to (the cross-node one of a two-level reduction, else the
    whole group) sends, for each matrix M (rows x cols) of its values, the
    rank-R factors of PowerSGD (Vogels et al. 2019): P = M Q summed over
    the hop, P's columns orthonormalized, Q = M^T P summed over the hop, and
    the result P Q^T, with Q kept for the next call (warm start). Both sums
    are plain f32 ring all-reduces, one over the P's of all matrices (and
    the values reduced exactly) and one over the Q's: R (rows + cols) values
    of a matrix instead of rows x cols.

    `pieces` lists the reduction's values in order: `RxC` a matrix it
    compresses, `N` a run of values it reduces exactly (biases, norms); none
    listed: the value is one matrix, its first dimension by the rest. In two
    levels the node's members each take a run of whole pieces (the node's
    reduce-scatter and all-gather run on piece boundaries, see
    hpc::dist::powerSgdChunks). Its state operand (required) holds each
    matrix's Q, then, with `error_feedback` (default true), each matrix's
    residual: what it held minus what the hop's result gave it, added to the
    next call's values.

    ```mlir
    #dist.powersgd<rank = 4>
    #dist.powersgd<rank = 2, pieces = [64x192, 192, 64x64], error_feedback = false>
    ```
  }];
  let parameters = (ins "int64_t":$rank, ArrayRefParameter<"int64_t", "rows">:$rows,
                        ArrayRefParameter<"int64_t", "columns (0: reduced exactly)">:$cols,
                        "bool":$errorFeedback);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_TopKAttr : Dist_Attr<"TopK", "topk"> {
  let summary = "A reduction's compression: the largest-magnitude values and their indices";
  let description = [{
    On a `dist.all_reduce` or `dist.reduce_scatter` (f32, sum or avg) as its
    `compression`: on the hop it applies to, each member keeps ceil(ratio x
    m) of the m values it would send, those of largest magnitude (ties to
    the lower index), and sends them as (u32 index, f32 value) pairs. An
    all_reduce all-gathers every member's pairs and sums them in group order
    (bitwise the same result on every member); a reduce_scatter sends each
    member the pairs of its block. With an error-feedback operand the values
    left out are added to what the rank sends next (Deep Gradient
    Compression's accumulation).

    ```mlir
    #dist.topk<ratio = 0.01>
    ```
  }];
  let parameters = (ins APFloatParameter<"the share of values kept">:$ratio);
  let builders = [
    AttrBuilder<(ins "double":$ratio), [{
      return $_get($_ctxt, ::llvm::APFloat(ratio));
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The share of values kept, in (0, 1].
    double getShare() const { return getRatio().convertToDouble(); }
  }];
}

def Dist_TokenType : TypeDef<Dist_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "An in-flight asynchronous collective";
  let description = [{
    Returned by a `_start` collective; `dist.wait` completes it and yields
    the payload, the collective's result (none for `send`).

    ```mlir
    !dist.token<tensor<4x8xf32>>
    !dist.token
    ```
  }];
  let parameters = (ins OptionalParameter<"::mlir::Type">:$payload);
  let assemblyFormat = "(`<` $payload^ `>`)?";
  let builders = [TypeBuilder<(ins), [{ return $_get($_ctxt, ::mlir::Type()); }]>];
}

#endif // DIST_DIALECT_TD
