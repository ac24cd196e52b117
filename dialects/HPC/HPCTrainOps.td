//===- HPCTrainOps.td - training state, updates and backward ops -*- tablegen -*-===//
//
// The ops a train step needs beyond the forward graph (see docs/training.md):
// mutable state (hpc.variable), optimizer updates that write state in place
// (hpc.sgd_update, hpc.adamw_update), and the backward computations the
// forward ops cannot express (convolution filter gradients, pooling
// gradients) or only as a long elementwise chain (GELU's, layer
// normalization's input gradient). Every other
// gradient is built from forward ops by hpc-autodiff.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TRAIN_OPS_TD
#define HPC_TRAIN_OPS_TD

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

def HPC_VariableOp : Op<HPC_Dialect, "variable",
    [DeclareOpInterfaceMethods<HPC_ShardingRuleInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "A named tensor of the mutable training state";
  let description = [{
    The current value of a state tensor (a trainable weight, an optimizer
    moment): the compiler places it in the state region, the runtime
    initializes it once (from `value` when present, else zeros), checkpoints
    it, and the update ops (`hpc.sgd_update`, `hpc.adamw_update`) write it in
    place at the end of a step. `role` says what it holds: "param" (a model
    weight, saved under its initializer `name`), "buffer" (model state that
    is not trained, such as batch-norm running statistics in train mode,
    also saved under its initializer name), "optimizer", "rng" (the
    random generator's seed of train-mode dropout), or "error_feedback" (a
    compressed reduction's rounding residual, this rank's own, written in
    place by the reduction: dist-compress).

    ```mlir
    %w = hpc.variable "fc.weight" {role = "param"} : tensor<10x64xf32> = dense_resource<fc.weight>
    %m = hpc.variable "fc.weight.exp_avg" {role = "optimizer"} : tensor<10x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<ElementsAttr>:$value,
                   DefaultValuedStrAttr<StrAttr, "param">:$role);
  let results = (outs AnyRankedTensor:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer updates (in place on hpc.variable values; the last readers)
//===----------------------------------------------------------------------===//

def HPC_SGDUpdateOp : Op<HPC_Dialect, "sgd_update",
    [DeclareOpInterfaceMethods<HPC_ShardingRuleInterface>, AttrSizedOperandSegments,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One SGD step on a parameter, in place (PyTorch's torch.optim.SGD)";
  let description = [{
    With g = grad + weight_decay * param: when `momentum` != 0,
    buf = momentum * buf + g (buf starts at zero, so the first step gives
    buf = g as PyTorch's does) and g = nesterov ? g + momentum * buf : buf;
    then param -= lr * g. `param` and `momentum_buffer` must be
    `hpc.variable` values that no op after this one reads; `lr` is a 0-d
    f32 tensor (a step input, so schedules need no recompile). With
    `unless_nonfinite` (the step's global gradient norm, 0-d f32), a
    non-finite value leaves the parameter and its buffer as they are
    (PyTorch GradScaler's skipped step). With `clip(%norm, %max_norm)`
    (both 0-d f32) the gradient is scaled by min(1, max_norm / (norm +
    1e-6)) as it is read (PyTorch's clip_grad_norm_, fused: no pass of its
    own over the gradients).
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$param,
                   RankedTensorOf<[AnyFloat]>:$grad,
                   0DTensorOf<[F32]>:$lr,
                   Optional<RankedTensorOf<[AnyFloat]>>:$momentum_buffer,
                   Optional<0DTensorOf<[F32]>>:$unless_nonfinite,
                   Variadic<0DTensorOf<[F32]>>:$clip,
                   DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                   DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  // The guard's type beside it: after an optional buffer type, a trailing
  // type list would not say which of the two it is.
  let assemblyFormat = [{
    $param `,` $grad `,` $lr (`,` $momentum_buffer^)?
    (`unless_nonfinite` `(` $unless_nonfinite^ `:` type($unless_nonfinite) `)`)?
    (`clip` `(` $clip^ `:` type($clip) `)`)?
    attr-dict `:` type($param) `,` type($grad) `,` type($lr) (`,` type($momentum_buffer)^)?
  }];
  let hasVerifier = 1;
}

def HPC_AdamWUpdateOp : Op<HPC_Dialect, "adamw_update",
    [DeclareOpInterfaceMethods<HPC_ShardingRuleInterface>, AttrSizedOperandSegments,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One AdamW step on a parameter, in place (PyTorch's torch.optim.AdamW)";
  let description = [{
    param *= 1 - lr * weight_decay; exp_avg += (1 - beta1) * (grad - exp_avg);
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2;
    param -= lr / (1 - beta1^step) * exp_avg /
             (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps).
    `step` (0-d i64, from 1: the optimizer's own count, which skipped steps
    do not advance) and `lr` (0-d f32) are step inputs; `param`, `exp_avg`
    and `exp_avg_sq` are `hpc.variable` values no later op reads. With
    `unless_nonfinite` (the step's global gradient norm, 0-d f32), a
    non-finite value leaves all three as they are (GradScaler's skip).
    `clip(%norm, %max_norm)` scales the gradient as hpc.sgd_update's does.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$param,
                   RankedTensorOf<[AnyFloat]>:$grad,
                   RankedTensorOf<[AnyFloat]>:$exp_avg,
                   RankedTensorOf<[AnyFloat]>:$exp_avg_sq,
                   0DTensorOf<[F32]>:$lr,
                   0DTensorOf<[I64]>:$step,
                   Optional<0DTensorOf<[F32]>>:$unless_nonfinite,
                   Variadic<0DTensorOf<[F32]>>:$clip,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                   DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step
    (`unless_nonfinite` `(` $unless_nonfinite^ `:` type($unless_nonfinite) `)`)?
    (`clip` `(` $clip^ `:` type($clip) `)`)?
    attr-dict `:` type($param) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `,`
    type($lr) `,` type($step)
  }];
  let hasVerifier = 1;
}

def HPC_AssignOp : Op<HPC_Dialect, "assign",
    [DeclareOpInterfaceMethods<HPC_ShardingRuleInterface>,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Write a new value into a state tensor, in place";
  let description = [{
    `target` (an `hpc.variable` value that no later op reads) takes the
    bytes of `value` (its type) at this point of the step: how train mode
    keeps batch-norm running statistics.

    ```mlir
    hpc.assign %running_mean, %new_mean : tensor<16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$target, AnyRankedTensor:$value);
  let assemblyFormat = "$target `,` $value attr-dict `:` type($target) `,` type($value)";
  let hasVerifier = 1;
}

def HPC_DropoutMaskOp : HPC_Op<"dropout_mask"> {
  let summary = "A dropout mask from a counter-based random generator";
  let description = [{
    Element i of the result is 0 with probability `ratio` and
    1 / (1 - ratio) otherwise, drawn from a hash of (`seed`, `step`,
    `stream`, i): the same seed, step and stream give the same mask on every
    run and rank, so a resumed run repeats it. `seed` is the 0-d i64 state
    tensor "hpc.rng_seed", `step` the train step's step input; `stream`
    tells the dropout sites of a step apart. The whole mask is computed
    where it is used (its dims need replication), so a partitioned step
    draws the single-rank mask.

    ```mlir
    %m = hpc.dropout_mask %seed, %step {ratio = 0.1 : f64, stream = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$seed, 0DTensorOf<[I64]>:$step,
                   F64Attr:$ratio, I64Attr:$stream);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$seed `,` $step attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops the forward ops cannot express
//===----------------------------------------------------------------------===//

def HPC_ConvWeightGradOp : HPC_InferOp<"conv_weight_grad"> {
  let summary = "Gradient of a convolution with respect to its filter";
  let description = [{
    `input` is the convolution's [N, C, D1...] input, `grad_output` the
    gradient of its [N, M, O1...] result; the result is the filter gradient
    [M, C/group, K1...] with `kernel_shape` = [K1...]. `strides`, `pads`,
    `dilations` and `group` are the convolution's.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$grad_output,
                   DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def HPC_GeluGradOp : HPC_InferOp<"gelu_grad"> {
  let summary = "Gradient of GELU with respect to its input";
  let description = [{
    `grad_output * gelu'(input)`, with `approximate` as the forward
    `hpc.gelu`'s ("none": Phi(x) + x phi(x); "tanh": the derivative of the
    tanh approximation). One kernel instead of the dozen elementwise ops the
    formula is made of (each a pass over the activation).
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$grad_output,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def HPC_LayerNormGradOp : HPC_InferOp<"layer_norm_grad"> {
  let summary = "Gradient of layer normalization with respect to its input";
  let description = [{
    The input gradient of `hpc.layer_norm` (same `axis` and `epsilon`):
    with xhat = (x - mean) * rstd over dims `axis..rank-1` (n elements) and
    g = grad_output * scale, `rstd * (g - mean(g) - xhat * mean(g * xhat))`.
    `scale` has the normalized dims' shape exactly. The statistics are
    recomputed from `input`; the scale and bias gradients are sums the
    autodiff builds from forward ops (they reduce over the rows, which the
    partitioner may split).
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$scale,
                   RankedTensorOf<[AnyFloat]>:$grad_output,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $scale `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

class HPC_PoolGradOp<string mnemonic, string summaryText> : HPC_InferOp<mnemonic> {
  let summary = summaryText;
  let description = [{
    `input` is the pooling's input, `grad_output` the gradient of its
    result; the result (the input gradient) has the input's type. The
    window attributes are the pooling's.
  }];
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}

def HPC_MaxPoolGradOp : HPC_PoolGradOp<"max_pool_grad",
    "Gradient of max pooling: each window's gradient goes to its first maximum"> {
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$grad_output,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
}

def HPC_AvgPoolGradOp : HPC_PoolGradOp<"avg_pool_grad",
    "Gradient of average pooling: each window's gradient spread over its divisor"> {
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$grad_output,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
}

#endif // HPC_TRAIN_OPS_TD
