//===- HPCOps.td - ops of the hpc tensor graph dialect -----*- tablegen -*-===//
//
// Op definitions. Every op infers its result types (InferTypeOpAdaptor), so
// the importer builds ops from operands and attributes alone and the verifier
// rejects any declared type that disagrees with the inferred one. Attribute
// checks (axes in range, permutations, window sizes) live in the same
// inference functions, in HPCOps.cpp, so a bad op fails with one message.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_OPS_TD
#define HPC_OPS_TD

include "HPCDialect.td"
include "HPCInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class HPC_Op<string mnemonic, list<Trait> traits = []>
    : Op<HPC_Dialect, mnemonic,
         !listconcat([Pure, DeclareOpInterfaceMethods<HPC_ShardingRuleInterface>],
                     traits)>;

// Ops whose result types come from a hand-written inferReturnTypes.
class HPC_InferOp<string mnemonic, list<Trait> traits = []>
    : HPC_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor])>;

// A product whose result type is inferred from its operands, or is f32 where
// they are bf16 or f16: the kernel accumulates in f32 and writes that sum
// without rounding it to the operands' type (hpc-fuse-epilogues puts the
// cast back to f32 of an hpc-autocast product there).
class HPC_ProductOp<string mnemonic, list<Trait> traits = []>
    : HPC_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptorWithIsCompatible])>;

//===----------------------------------------------------------------------===//
// Constants and weights
//===----------------------------------------------------------------------===//

def HPC_ConstantOp : HPC_Op<"constant", [ConstantLike]> {
  let summary = "A constant tensor";
  let description = [{
    A tensor value known at compile time. Small values are stored inline as
    dense elements; the importer stores large ones as `dense_resource` blobs so
    the IR does not print them inline.

    ```mlir
    %0 = hpc.constant dense<[1, 64]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let hasCustomAssemblyFormat = 1;
  let hasFolder = 1;
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
    build($_builder, $_state, ::llvm::cast<::mlir::RankedTensorType>(value.getType()), value);
  }]>];
}

def HPC_WeightOp : HPC_Op<"weight"> {
  let summary = "A named model parameter";
  let description = [{
    A trainable parameter of the model (an ONNX initializer of floating-point
    type). `name` is the initializer's name, kept for checkpoints and
    reports. `value` holds the data; it is absent when the model was imported
    with `--shapes-only`, which plans a model without reading its weights.

    ```mlir
    %w = hpc.weight "h.0.attn.c_attn.weight" : tensor<64x192xf32>
    %e = hpc.weight "wte" : tensor<512x64xf32> = dense_resource<wte>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyRankedTensor:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// Unary elementwise ops: the result has the operand's type.
class HPC_UnaryOp<string mnemonic, list<Trait> traits = []>
    : HPC_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor])> {
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location>, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      inferred.push_back(adaptor.getInput().getType());
      return ::mlir::success();
    }
    ::mlir::OpFoldResult $cppClass::fold(FoldAdaptor adaptor) {
      return ::hpc::detail::foldElementwise(getOperation(), adaptor.getOperands());
    }
  }];
}

class HPC_FloatUnaryOp<string mnemonic, string summaryText>
    : HPC_UnaryOp<mnemonic> {
  let summary = summaryText;
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input);
}

def HPC_DropoutOp : HPC_InferOp<"dropout"> {
  let summary = "Dropout: the identity, except in a train step in train mode";
  let description = [{
    ONNX Dropout in inference: the result is the input (the compiler gives
    it the input's storage, like a reshape). A train step compiled with
    `--train-mode` (hpc-train-mode) replaces it by `input * mask`, the mask
    an `hpc.dropout_mask` of probability `ratio`.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<F64Attr, "0.5">:$ratio);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def HPC_NegOp : HPC_UnaryOp<"neg"> {
  let summary = "Elementwise negation";
  let arguments = (ins AnyRankedTensor:$input);
}
def HPC_AbsOp : HPC_UnaryOp<"abs"> {
  let summary = "Elementwise absolute value";
  let arguments = (ins AnyRankedTensor:$input);
}
def HPC_SignOp : HPC_UnaryOp<"sign"> {
  let summary = "Elementwise sign (-1, 0 or 1)";
  let arguments = (ins AnyRankedTensor:$input);
}
def HPC_NotOp : HPC_UnaryOp<"not"> {
  let summary = "Elementwise logical not";
  let arguments = (ins RankedTensorOf<[I1]>:$input);
}
def HPC_ExpOp : HPC_FloatUnaryOp<"exp", "Elementwise e^x">;
def HPC_LogOp : HPC_FloatUnaryOp<"log", "Elementwise natural logarithm">;
def HPC_SqrtOp : HPC_FloatUnaryOp<"sqrt", "Elementwise square root">;
def HPC_ReciprocalOp : HPC_FloatUnaryOp<"reciprocal", "Elementwise 1/x">;
def HPC_ReluOp : HPC_FloatUnaryOp<"relu", "Elementwise max(x, 0)">;
def HPC_SigmoidOp : HPC_FloatUnaryOp<"sigmoid", "Elementwise 1/(1+e^-x)">;
def HPC_TanhOp : HPC_FloatUnaryOp<"tanh", "Elementwise hyperbolic tangent">;
def HPC_ErfOp : HPC_FloatUnaryOp<"erf", "Elementwise Gauss error function">;
def HPC_SinOp : HPC_FloatUnaryOp<"sin", "Elementwise sine">;
def HPC_CosOp : HPC_FloatUnaryOp<"cos", "Elementwise cosine">;
def HPC_FloorOp : HPC_FloatUnaryOp<"floor", "Elementwise floor">;
def HPC_CeilOp : HPC_FloatUnaryOp<"ceil", "Elementwise ceiling">;
def HPC_RoundOp : HPC_FloatUnaryOp<"round", "Elementwise round half to even">;
def HPC_SiluOp : HPC_FloatUnaryOp<"silu", "Elementwise x * sigmoid(x)">;
def HPC_SoftplusOp : HPC_FloatUnaryOp<"softplus", "Elementwise log(1+e^x)">;
def HPC_HardSwishOp : HPC_FloatUnaryOp<"hard_swish",
    "Elementwise x * max(0, min(1, x/6 + 1/2))">;

def HPC_GeluOp : HPC_UnaryOp<"gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate` is "none" (x * Phi(x), with erf) or "tanh" (the tanh
    approximation), as in ONNX Gelu-20.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}
def HPC_LeakyReluOp : HPC_UnaryOp<"leaky_relu"> {
  let summary = "Elementwise x >= 0 ? x : alpha * x";
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<F64Attr, "0.01">:$alpha);
}
def HPC_EluOp : HPC_UnaryOp<"elu"> {
  let summary = "Elementwise x >= 0 ? x : alpha * (e^x - 1)";
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
def HPC_HardSigmoidOp : HPC_UnaryOp<"hard_sigmoid"> {
  let summary = "Elementwise max(0, min(1, alpha * x + beta))";
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<F64Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F64Attr, "0.5">:$beta);
}
def HPC_ClipOp : HPC_UnaryOp<"clip"> {
  let summary = "Elementwise clamp to [min, max]";
  let description = [{
    Either bound may be absent (unbounded on that side).
  }];
  let arguments = (ins AnyRankedTensor:$input, OptionalAttr<F64Attr>:$min,
                   OptionalAttr<F64Attr>:$max);
}

def HPC_CastOp : HPC_InferOp<"cast"> {
  let summary = "Elementwise conversion to another element type";
  let description = [{
    Converts each element to `to`, as ONNX Cast does: floats to integers
    truncate toward zero, anything to i1 is `x != 0`.
  }];
  let arguments = (ins AnyRankedTensor:$input, TypeAttr:$to);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

// Binary elementwise ops with numpy-style broadcasting.
class HPC_BroadcastBinaryOp<string mnemonic, bit boolResult = 0,
                            list<Trait> traits = []>
    : HPC_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor])> {
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::hpc::detail::inferBroadcastBinary(location,
          adaptor.getLhs().getType(), adaptor.getRhs().getType(), }]
          # !if(boolResult, "true", "false") # [{, inferred);
    }
    ::mlir::OpFoldResult $cppClass::fold(FoldAdaptor adaptor) {
      return ::hpc::detail::foldElementwise(getOperation(), adaptor.getOperands());
    }
  }];
}

def HPC_AddOp : HPC_BroadcastBinaryOp<"add", 0, [Commutative]> {
  let summary = "Elementwise addition with broadcasting";
}
def HPC_SubOp : HPC_BroadcastBinaryOp<"sub"> {
  let summary = "Elementwise subtraction with broadcasting";
}
def HPC_MulOp : HPC_BroadcastBinaryOp<"mul", 0, [Commutative]> {
  let summary = "Elementwise multiplication with broadcasting";
}
def HPC_DivOp : HPC_BroadcastBinaryOp<"div"> {
  let summary = "Elementwise division with broadcasting";
  let description = [{ Integer division truncates toward zero. }];
}
def HPC_PowOp : HPC_BroadcastBinaryOp<"pow"> {
  let summary = "Elementwise lhs^rhs with broadcasting";
}
def HPC_MaxOp : HPC_BroadcastBinaryOp<"max", 0, [Commutative]> {
  let summary = "Elementwise maximum with broadcasting";
}
def HPC_MinOp : HPC_BroadcastBinaryOp<"min", 0, [Commutative]> {
  let summary = "Elementwise minimum with broadcasting";
}
def HPC_ModOp : HPC_BroadcastBinaryOp<"mod"> {
  let summary = "Elementwise remainder (sign of the divisor, as Python %)";
}
def HPC_FModOp : HPC_BroadcastBinaryOp<"fmod"> {
  let summary = "Elementwise remainder (sign of the dividend, as C fmod)";
}
def HPC_AndOp : HPC_BroadcastBinaryOp<"and", 0, [Commutative]> {
  let summary = "Elementwise logical and";
}
def HPC_OrOp : HPC_BroadcastBinaryOp<"or", 0, [Commutative]> {
  let summary = "Elementwise logical or";
}
def HPC_XorOp : HPC_BroadcastBinaryOp<"xor", 0, [Commutative]> {
  let summary = "Elementwise logical exclusive or";
}
def HPC_EqualOp : HPC_BroadcastBinaryOp<"equal", 1, [Commutative]> {
  let summary = "Elementwise lhs == rhs, an i1 tensor";
}
def HPC_LessOp : HPC_BroadcastBinaryOp<"less", 1> {
  let summary = "Elementwise lhs < rhs, an i1 tensor";
}
def HPC_LessEqualOp : HPC_BroadcastBinaryOp<"less_equal", 1> {
  let summary = "Elementwise lhs <= rhs, an i1 tensor";
}
def HPC_GreaterOp : HPC_BroadcastBinaryOp<"greater", 1> {
  let summary = "Elementwise lhs > rhs, an i1 tensor";
}
def HPC_GreaterEqualOp : HPC_BroadcastBinaryOp<"greater_equal", 1> {
  let summary = "Elementwise lhs >= rhs, an i1 tensor";
}

def HPC_WhereOp : HPC_InferOp<"where"> {
  let summary = "Elementwise select with broadcasting";
  let description = [{ `condition ? lhs : rhs`, all three broadcast together. }];
  let arguments = (ins RankedTensorOf<[I1]>:$condition, AnyRankedTensor:$lhs,
                   AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def HPC_MatMulOp : HPC_ProductOp<"matmul"> {
  let summary = "Matrix product with batch dimensions (numpy matmul)";
  let description = [{
    `[..., m, k] x [..., k, n] -> [..., m, n]`; the batch dimensions broadcast
    and 1-D operands are promoted and the promoted dimension dropped, as in
    numpy.matmul and ONNX MatMul. With bf16 or f16 operands the result may
    be f32 (the f32 sum, not rounded to the operands' type).
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def HPC_GemmOp : HPC_ProductOp<"gemm"> {
  let summary = "act(alpha * op(A) * op(B) + beta * C)";
  let description = [{
    2-D general matrix multiply; `trans_a`/`trans_b` transpose the operands;
    the optional `c` broadcasts to the [m, n] result. `activation` is the
    elementwise function applied to the sum (an epilogue the kernel fuses):
    "none", "relu", "gelu" (erf form, as `hpc.gelu`), "gelu_tanh" (as
    `hpc.gelu {approximate = "tanh"}`), "sigmoid", "tanh" or "silu". The
    importer and autodiff build "none"; hpc-fuse-epilogues sets the others.
    With bf16 or f16 operands the result may be f32 (not rounded to the
    operands' type); `c` has the operands' type.

    ```mlir
    %y = hpc.gemm %a, %w, %b {activation = "relu"}
        : (tensor<8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$a, AnyRankedTensor:$b,
                   Optional<AnyRankedTensor>:$c,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F64Attr, "1.0">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_b,
                   DefaultValuedStrAttr<StrAttr, "none">:$activation);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "$a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)";
}

def HPC_ConvOp : HPC_InferOp<"conv", [AttrSizedOperandSegments]> {
  let summary = "N-d convolution (NCHW), with groups, strides, dilations, pads";
  let description = [{
    `input` is [N, C, D1...], `weight` [M, C/group, K1...], the optional `bias`
    [M]. `pads` holds the begin pads of every spatial dimension, then the end
    pads (ONNX order); the importer resolves auto_pad into explicit pads.
    The optional `residual` has the result's type and is added to
    convolution + bias (hpc-fuse-epilogues puts a residual add there, so
    that oneDNN adds it in the convolution's epilogue). `activation` is
    applied last, to convolution + bias + residual, with the values of
    `hpc.gemm`'s.

    ```mlir
    %y = hpc.conv %x, %w, %b residual(%r) {activation = "relu", ...}
        : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>,
           tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                   Optional<AnyRankedTensor>:$bias,
                   Optional<AnyRankedTensor>:$residual,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   DefaultValuedStrAttr<StrAttr, "none">:$activation);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`residual` `(` $residual^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def HPC_ConvTransposeOp : HPC_InferOp<"conv_transpose"> {
  let summary = "N-d transposed convolution (NCHW)";
  let description = [{
    `input` is [N, C, D1...], `weight` [C, M/group, K1...]. Output spatial size
    is `stride*(in-1) + output_padding + (k-1)*dilation + 1 - pad_begin - pad_end`.
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                   Optional<AnyRankedTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DenseI64ArrayAttr:$output_padding,
                   DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

def HPC_SoftmaxOp : HPC_InferOp<"softmax"> {
  let summary = "Softmax along one axis";
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def HPC_LogSoftmaxOp : HPC_InferOp<"log_softmax"> {
  let summary = "Log of softmax along one axis";
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def HPC_LayerNormOp : HPC_InferOp<"layer_norm"> {
  let summary = "Layer normalization over the trailing dimensions from axis";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, the statistics taken
    over dimensions `axis..rank-1`; `scale` and `bias` broadcast to those.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$scale,
                   Optional<RankedTensorOf<[AnyFloat]>>:$bias,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
}

def HPC_RMSNormOp : HPC_InferOp<"rms_norm"> {
  let summary = "Root-mean-square normalization over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale`, the mean over `axis..rank-1`.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$scale,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
}

def HPC_BatchNormOp : HPC_InferOp<"batch_norm"> {
  let summary = "Batch normalization with running statistics (inference)";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias` per channel (dim 1).
    `momentum` is ONNX's (running = running * momentum + batch * (1 -
    momentum)); only a train step in train mode (hpc-train-mode) uses it.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnyFloat]>:$scale,
                   RankedTensorOf<[AnyFloat]>:$bias,
                   RankedTensorOf<[AnyFloat]>:$mean,
                   RankedTensorOf<[AnyFloat]>:$variance,
                   DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.9">:$momentum);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class HPC_ReduceOp<string mnemonic, string summaryText> : HPC_InferOp<mnemonic> {
  let summary = summaryText;
  let description = [{
    Reduces the listed `axes` (sorted, unique, non-negative); with
    `keepdims` the reduced dimensions stay as size 1. Empty `axes` reduce
    nothing (the result equals the input).
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::hpc::detail::inferReduction(location,
          adaptor.getInput().getType(), adaptor.getAxes(), adaptor.getKeepdims(),
          /*resultElementType=*/nullptr, inferred);
    }
    ::mlir::OpFoldResult $cppClass::fold(FoldAdaptor adaptor) {
      return ::hpc::detail::foldReduction(getOperation(), adaptor.getInput(),
          getAxes(), getKeepdims());
    }
  }];
}

def HPC_ReduceSumOp : HPC_ReduceOp<"reduce_sum", "Sum over axes">;
def HPC_ReduceMeanOp : HPC_ReduceOp<"reduce_mean", "Mean over axes">;
def HPC_ReduceMaxOp : HPC_ReduceOp<"reduce_max", "Maximum over axes">;
def HPC_ReduceMinOp : HPC_ReduceOp<"reduce_min", "Minimum over axes">;
def HPC_ReduceProdOp : HPC_ReduceOp<"reduce_prod", "Product over axes">;
def HPC_ReduceSumSquareOp : HPC_ReduceOp<"reduce_sum_square", "Sum of squares over axes"> {
  let description = [{
    The sum of `input * input` over the listed `axes` (sorted, unique,
    non-negative), ONNX ReduceSumSquare; with `keepdims` the reduced
    dimensions stay as size 1, and empty `axes` square every element. One
    pass over the input where the product and the sum would be two (the
    train step's gradient norm is made of these).
  }];
}

class HPC_ArgReduceOp<string mnemonic, string summaryText> : HPC_InferOp<mnemonic> {
  let summary = summaryText;
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      auto type = ::llvm::cast<::mlir::RankedTensorType>(adaptor.getInput().getType());
      int64_t axis = adaptor.getAxis();
      if (axis < -type.getRank() || axis >= type.getRank())
        return ::mlir::emitOptionalError(location, "axis ", axis,
            " is out of range for rank ", type.getRank());
      if (axis < 0) axis += type.getRank();
      return ::hpc::detail::inferReduction(location, type,
          {axis}, adaptor.getKeepdims(), ::mlir::IntegerType::get(context, 64), inferred);
    }
  }];
}

def HPC_ArgMaxOp : HPC_ArgReduceOp<"argmax", "Index of the maximum along an axis">;
def HPC_ArgMinOp : HPC_ArgReduceOp<"argmin", "Index of the minimum along an axis">;

//===----------------------------------------------------------------------===//
// Indexing: embeddings, gating
//===----------------------------------------------------------------------===//

def HPC_GatherOp : HPC_InferOp<"gather"> {
  let summary = "Gather slices along an axis (embedding lookup)";
  let description = [{
    Result shape: `input.shape[:axis] + indices.shape + input.shape[axis+1:]`.
    Negative indices count from the end.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   RankedTensorOf<[AnyInteger]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_GatherElementsOp : HPC_InferOp<"gather_elements"> {
  let summary = "Gather single elements along an axis (result has indices' shape)";
  let arguments = (ins AnyRankedTensor:$input,
                   RankedTensorOf<[AnyInteger]>:$indices, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` functional-type(operands, results)";
}

def HPC_ScatterElementsOp : HPC_InferOp<"scatter_elements"> {
  let summary = "Scatter updates into a copy of input along an axis";
  let description = [{
    `reduction` is "none", "add", "mul", "max" or "min".
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   RankedTensorOf<[AnyInteger]>:$indices,
                   AnyRankedTensor:$updates, I64Attr:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def HPC_OneHotOp : HPC_InferOp<"one_hot"> {
  let summary = "One-hot encoding of indices";
  let description = [{
    A new dimension of size `depth` is inserted at `axis`; `values` is
    `[off_value, on_value]`. Negative indices count from `depth`.
  }];
  let arguments = (ins RankedTensorOf<[AnyInteger, AnyFloat]>:$indices,
                   AnyRankedTensor:$values, I64Attr:$depth,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def HPC_TopKOp : HPC_InferOp<"top_k"> {
  let summary = "The k largest (or smallest) values along an axis, and their indices";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$k,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$largest,
                   DefaultValuedAttr<BoolAttr, "true">:$sorted);
  let results = (outs AnyRankedTensor:$values, RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Mixture of experts: routing into per-expert buffers of static capacity
//===----------------------------------------------------------------------===//

def HPC_MoERouteOp : HPC_InferOp<"moe_route"> {
  let summary = "Slots of the per-expert buffers each token's chosen experts give it";
  let description = [{
    `experts` is `[tokens, k]`: each token's chosen experts (top-k's
    indices), in `[0, num_experts)`. Each expert's buffer holds `capacity`
    rows; a choice takes the expert's next free row, choices in priority
    order: every token's first choice in token order, then every second
    choice, and so on (GShard). `slots[t, j]` is `expert * capacity + row`,
    or -1 when the expert's buffer was full (the choice is dropped).
    `load[e]` counts the choices of expert e, dropped ones included, so the
    dropped choices are `sum(max(load - capacity, 0))`.
  }];
  let arguments = (ins RankedTensorOf<[AnyInteger]>:$experts, I64Attr:$num_experts,
                   I64Attr:$capacity);
  let results = (outs RankedTensorOf<[I64]>:$slots, RankedTensorOf<[I64]>:$load);
  let assemblyFormat = "$experts attr-dict `:` functional-type(operands, results)";
}

def HPC_MoEDispatchOp : HPC_InferOp<"moe_dispatch"> {
  let summary = "Rows into the per-expert buffers at their routed slots";
  let description = [{
    `input` is `[tokens, hidden]` (one row for all of a token's choices) or
    `[tokens, k, hidden]` (a row per choice); `slots` is moe_route's. The
    result is `[num_experts, capacity, hidden]`: row `s` (flattened) holds
    the row routed to slot `s`, and zeros where no choice was routed.

    Leading batch dimensions `B...` (those of `slots` before `[tokens, k]`)
    route independent groups: `input [B..., tokens, (k,) hidden]` into
    `[B..., num_experts, capacity, hidden]`, each group into its own
    buffers (expert parallelism's per-rank buffers).
  }];
  let arguments = (ins AnyRankedTensor:$input, RankedTensorOf<[I64]>:$slots,
                   I64Attr:$num_experts, I64Attr:$capacity);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def HPC_MoEGatherOp : HPC_InferOp<"moe_gather"> {
  let summary = "Each token's rows back from the per-expert buffers";
  let description = [{
    `buffer` is `[num_experts, capacity, hidden]`, `slots` moe_route's
    `[tokens, k]`; the result `[tokens, k, hidden]` holds the buffer's row
    at each slot, zeros for a dropped choice. The transpose of moe_dispatch
    (each slot holds one choice). Leading batch dimensions `B...` of
    `slots` and `buffer` gather each group from its own buffers.
  }];
  let arguments = (ins AnyRankedTensor:$buffer, RankedTensorOf<[I64]>:$slots);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def HPC_MoEExchangeSlotsOp : HPC_InferOp<"moe_exchange_slots"> {
  let summary = "Expert parallelism's slots: per-rank buffers and their compaction";
  let description = [{
    `slots` is moe_route's `[tokens, k]` over the whole batch (buffers of
    `capacity` rows). The tokens are `groups` equal consecutive blocks (the
    data-parallel ranks, `groups / ep` slices of `ep` ranks); each group
    dispatches its kept choices into buffers of its own,
    `[num_experts, group_capacity]`, which an all_to_all over the `ep`
    ranks of a slice brings to the ranks holding the experts.

    `local[t, j]` is `expert * group_capacity + row`, the row being the
    choice's place among its group's kept choices of that expert (in the
    order of their rows in the whole batch's buffer), or -1 (dropped).
    `rows[d, e, r]` lists, for slice `d`, expert `e`'s kept choices from the
    slice's groups, in that order, as rows of the `[ep * group_capacity]`
    rows the slice's ranks send the expert (`member * group_capacity +
    row`); -1 past the last. Its `rows` dimension is
    `min(capacity, ep * group_capacity)`. The capacity decisions are
    moe_route's, over the whole batch, so any grouping computes what one
    rank does.
  }];
  let arguments = (ins RankedTensorOf<[I64]>:$slots, I64Attr:$num_experts, I64Attr:$capacity,
                   I64Attr:$groups, I64Attr:$ep, I64Attr:$group_capacity);
  let results = (outs RankedTensorOf<[I64]>:$local, RankedTensorOf<[I64]>:$rows);
  let assemblyFormat = "$slots attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def HPC_ReshapeOp : HPC_InferOp<"reshape"> {
  let summary = "Reshape to a static shape with the same number of elements";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_TransposeOp : HPC_InferOp<"transpose"> {
  let summary = "Permute dimensions: result dim i is input dim perm[i]";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_SliceOp : HPC_InferOp<"slice"> {
  let summary = "Strided slice, one (start, end, step) per dimension";
  let description = [{
    `starts`, `ends` and `steps` have one entry per dimension, already clamped
    to the dimension as ONNX Slice defines; a negative step walks backwards
    and then `end` may be -1 (one before the first element).
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_ConcatOp : HPC_InferOp<"concat"> {
  let summary = "Concatenate tensors along an axis";
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_SplitOp : HPC_InferOp<"split"> {
  let summary = "Split a tensor along an axis into pieces of the given sizes";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def HPC_ExpandOp : HPC_InferOp<"expand"> {
  let summary = "Broadcast to a shape (numpy rules, as ONNX Expand)";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_SqueezeOp : HPC_InferOp<"squeeze"> {
  let summary = "Remove size-1 dimensions at the given axes";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_UnsqueezeOp : HPC_InferOp<"unsqueeze"> {
  let summary = "Insert size-1 dimensions at the given axes of the result";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def HPC_PadOp : HPC_InferOp<"pad"> {
  let summary = "Pad with a constant, by reflection or by repeating the edge";
  let description = [{
    `pads` holds the begin pads of every dimension, then the end pads;
    negative pads crop. `mode` is "constant", "reflect" or "edge".
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$pads,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def HPC_TileOp : HPC_InferOp<"tile"> {
  let summary = "Repeat a tensor along each dimension";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$repeats);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Pooling and resizing
//===----------------------------------------------------------------------===//

class HPC_PoolOp<string mnemonic, string summaryText> : HPC_InferOp<mnemonic> {
  let summary = summaryText;
  let description = [{
    Window over the spatial dimensions of an [N, C, D1...] input. `pads`:
    begin pads of every spatial dimension, then the end pads. With `ceil_mode`
    the output size rounds up, but no window starts inside the end padding.
  }];
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::hpc::detail::inferPool(location, adaptor.getInput().getType(),
          adaptor.getKernelShape(), adaptor.getStrides(), adaptor.getPads(),
          adaptor.getDilations(), adaptor.getCeilMode(), inferred);
    }
  }];
}

def HPC_MaxPoolOp : HPC_PoolOp<"max_pool", "Max pooling"> {
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
}

def HPC_AvgPoolOp : HPC_PoolOp<"avg_pool", "Average pooling"> {
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
}

class HPC_GlobalPoolOp<string mnemonic, string summaryText> : HPC_InferOp<mnemonic> {
  let summary = summaryText;
  let description = [{ [N, C, D1...] -> [N, C, 1...]. }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::hpc::detail::inferGlobalPool(location,
          adaptor.getInput().getType(), inferred);
    }
  }];
}

def HPC_GlobalAvgPoolOp : HPC_GlobalPoolOp<"global_avg_pool", "Mean over all spatial dimensions">;
def HPC_GlobalMaxPoolOp : HPC_GlobalPoolOp<"global_max_pool", "Maximum over all spatial dimensions">;

def HPC_ResizeOp : HPC_InferOp<"resize"> {
  let summary = "Resize by nearest-neighbour or (multi)linear interpolation";
  let description = [{
    `sizes` is the full output shape. `scales` (one per dimension) is what
    the coordinate transform divides by; the importer fills it from the ONNX
    scales, or from sizes/input when only sizes were given. `mode` is
    "nearest" or "linear"; `coordinate_transformation_mode` and
    `nearest_mode` take the ONNX Resize values.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$sizes,
                   DenseF64ArrayAttr:$scales,
                   DefaultValuedStrAttr<StrAttr, "nearest">:$mode,
                   DefaultValuedStrAttr<StrAttr, "half_pixel">:$coordinate_transformation_mode,
                   DefaultValuedStrAttr<StrAttr, "round_prefer_floor">:$nearest_mode);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

include "HPCTrainOps.td"

#endif // HPC_OPS_TD
