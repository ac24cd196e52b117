//===- DistOps.td - dist dialect ops -----------------------*- tablegen -*-===//
//
// Sharding annotations (on the global program) and collectives (on the
// per-rank program). Collectives name the mesh axes they act over; their
// verifiers check the axes against the `dist.mesh` of the enclosing module
// and the result type against the operand's (local) type.
//
//===----------------------------------------------------------------------===//

#ifndef DIST_OPS_TD
#define DIST_OPS_TD

include "DistDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_AnnotateOp : Dist_Op<"annotate", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Constrain the sharding of a tensor in the global program";
  let description = [{
    ```mlir
    %y = dist.annotate %x : tensor<8x16xf32> to #dist.sharding<[[dp], []]>
    ```
    `dist-propagate` completes the shardings of all other tensors from these.
  }];
  let arguments = (ins AnyRankedTensor:$input, Dist_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  // The type comes first: an attribute at the end would take a following
  // `: type` as its own.
  let assemblyFormat = "$input `:` type($input) `to` qualified($sharding) attr-dict";
  let hasVerifier = 1;
}

def Dist_ReshardOp : Dist_Op<"reshard", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Change a tensor's sharding in the global program";
  let description = [{
    ```mlir
    %y = dist.reshard %x : tensor<8x16xf32> from #dist.sharding<[[tp], []]> to #dist.sharding<[[], [tp]]>
    ```
    `dist-partition` lowers it to the collectives that move the data.
  }];
  let arguments = (ins AnyRankedTensor:$input, Dist_ShardingAttr:$from,
                   Dist_ShardingAttr:$to);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `:` type($input) `from` qualified($from) `to` qualified($to) attr-dict";
  let hasVerifier = 1;
}

// A collective in its synchronous form (`name`) and asynchronous form
// (`name_start`, returning a token that dist.wait completes).
class Dist_CollectiveBase<string mnemonic> : Dist_Op<mnemonic> {
  let hasVerifier = 1;
}

// `tailArgs` follow `compression`: optional attributes that builders may
// leave out.
multiclass Dist_Collective<string mnemonic, string summaryText, dag extraArgs,
                           string attrFormat, dag tailArgs = (ins),
                           string tailFormat = ""> {
  def Op : Dist_CollectiveBase<mnemonic> {
    let summary = summaryText;
    let arguments = !con((ins AnyRankedTensor:$input, StrArrayAttr:$axes),
                         extraArgs, (ins OptionalAttr<AnyAttr>:$compression), tailArgs);
    let results = (outs AnyRankedTensor:$result);
    let assemblyFormat = "$input `over` $axes " # attrFormat # tailFormat #
                         " attr-dict `:` type($input) `->` type($result)";
    let hasFolder = 1;
  }
  def StartOp : Dist_CollectiveBase<mnemonic # "_start"> {
    let summary = summaryText # " (asynchronous start)";
    let arguments = !con((ins AnyRankedTensor:$input, StrArrayAttr:$axes),
                         extraArgs, (ins OptionalAttr<AnyAttr>:$compression), tailArgs);
    let results = (outs Dist_TokenType:$token);
    let assemblyFormat = "$input `over` $axes " # attrFormat # tailFormat #
                         " attr-dict `:` type($input) `->` qualified(type($token))";
  }
}

// A reduction with `ranks_per_node` = P runs in two levels over nodes of P
// consecutive world ranks (dist-hierarchical; ranks laid node-major): a
// reduce-scatter among the group's members on each node, the reduction of
// each member's part among the members at the same place on the other
// nodes, and (all_reduce) an all-gather on the node. The result is the
// flat collective's; only the bytes on each level differ.
//
// A reduction with a `compression` codec (#dist.int8_block, #dist.powersgd,
// #dist.topk) compresses its cross-node hop (the whole group when it has no
// ranks_per_node); its optional `feedback` operand is the codec's state, a
// 1-D f32 (or bf16, half the bytes) hpc.variable of hpc::dist::codecStateElements values that the
// reduction reads and writes in place (no other op touches it): the
// rounding error of what this rank sent, added to what it sends next, and
// PowerSGD's Q of each matrix (its operand is never absent).
defvar Dist_TwoLevel = (ins OptionalAttr<I64Attr>:$ranks_per_node,
                            Optional<RankedTensorOf<[F32, BF16]>>:$feedback);
defvar Dist_FeedbackFormat = " (`feedback` $feedback^ `:` type($feedback))?";
defm Dist_AllReduce : Dist_Collective<"all_reduce",
    "Reduce over the mesh axes; every rank gets the whole result",
    (ins Dist_ReductionKindAttr:$reduction), "`` $reduction", Dist_TwoLevel,
    Dist_FeedbackFormat>;
defm Dist_ReduceScatter : Dist_Collective<"reduce_scatter",
    "Reduce over the mesh axes and split dimension `dim` among the ranks",
    (ins Dist_ReductionKindAttr:$reduction, I64Attr:$dim), "`` $reduction `dim` $dim",
    Dist_TwoLevel, Dist_FeedbackFormat>;
defm Dist_AllGather : Dist_Collective<"all_gather",
    "Concatenate the ranks' pieces along dimension `dim`",
    (ins I64Attr:$dim), "`dim` $dim">;
defm Dist_AllToAll : Dist_Collective<"all_to_all",
    "Split `split_dim` among the ranks and concatenate what arrives along `concat_dim`",
    (ins I64Attr:$split_dim, I64Attr:$concat_dim),
    "`split` $split_dim `concat` $concat_dim">;
defm Dist_Broadcast : Dist_Collective<"broadcast",
    "Copy the root rank's tensor (index within the group) to all ranks",
    (ins I64Attr:$root), "`root` $root">;

def Dist_AllSliceOp : Dist_Op<"all_slice", [Pure]> {
  let summary = "Take this rank's piece of a tensor every rank holds whole";
  let description = [{
    The inverse of all_gather without communication: dimension `dim` is
    split into as many pieces as the group has ranks, and each rank keeps
    the piece at its index in the group.

    ```mlir
    %y = dist.all_slice %x over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x2xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `over` $axes `dim` $dim attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Dist_SendOp : Dist_Op<"send"> {
  let summary = "Send a tensor to the rank `offset` steps along a mesh axis";
  let description = [{
    ```mlir
    dist.send %x along "pp" offset 1 : tensor<4x8xf32>
    ```
    Pipeline stages send activations forward (offset 1) and gradients back
    (offset -1); a rank at the end of the axis sends nowhere past it.
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$offset,
                   OptionalAttr<AnyAttr>:$compression);
  let assemblyFormat = "$input `along` $axis `offset` $offset attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_SendStartOp : Dist_Op<"send_start"> {
  let summary = "Send a tensor (asynchronous start)";
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$offset,
                   OptionalAttr<AnyAttr>:$compression);
  let results = (outs Dist_TokenType:$token);
  let assemblyFormat = "$input `along` $axis `offset` $offset attr-dict `:` type($input) `->` qualified(type($token))";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "Receive a tensor from the rank `offset` steps along a mesh axis";
  let arguments = (ins StrAttr:$axis, I64Attr:$offset,
                   OptionalAttr<AnyAttr>:$compression);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`along` $axis `offset` $offset attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dist_RecvStartOp : Dist_Op<"recv_start"> {
  let summary = "Receive a tensor (asynchronous start)";
  let arguments = (ins StrAttr:$axis, I64Attr:$offset,
                   OptionalAttr<AnyAttr>:$compression);
  let results = (outs Dist_TokenType:$token);
  let assemblyFormat = "`along` $axis `offset` $offset attr-dict `:` qualified(type($token))";
  let hasVerifier = 1;
}

def Dist_WaitOp : Dist_Op<"wait"> {
  let summary = "Complete an asynchronous collective and yield its result";
  let description = [{
    ```mlir
    %t = dist.all_reduce_start %x over ["tp"] sum : tensor<4xf32> -> !dist.token<tensor<4xf32>>
    // ... independent compute ...
    %y = dist.wait %t : !dist.token<tensor<4xf32>> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Dist_TokenType:$token);
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = "$token attr-dict `:` qualified(type($token)) (`->` type($result)^)?";
  let hasVerifier = 1;
}

#endif // DIST_OPS_TD
