//===- Passes.td - HPC-Opt pass declarations ---------------*- tablegen -*-===//
//
// Every pass of the project, declared once; GEN_PASS_DEF_<NAME> in each
// pass's own .cpp.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_TD
#define HPC_PASSES_TD

include "mlir/Pass/PassBase.td"

def HPCPrintSummary : Pass<"hpc-print-summary", "mlir::ModuleOp"> {
  let summary = "Print a one-screen summary of a model: ops, parameters, FLOPs";
  let description = [{
    Analysis only; the IR is unchanged. For each function it prints to
    stderr the number of ops of each kind, the parameter count and bytes (the
    `hpc.weight` ops), and the forward FLOPs in total and per token (the
    elements of the first integer input, the token ids) or per sample (the
    leading dimension of the first input).

    ```
    hpc-opt model.onnx --input-shape input_ids=1,16 --hpc-print-summary
    ```
  }];
  let dependentDialects = ["hpc::HPCDialect"];
}

def HPCFuseComposites : Pass<"hpc-fuse-composites", "mlir::ModuleOp"> {
  let summary = "Replace exporter decompositions of GELU, SiLU and RMSNorm by single ops";
  let description = [{
    Exporters spell several model-level ops as chains of elementwise math.
    This pass recognizes them, whatever the operand order, and replaces each
    chain by the one hpc op that kernels, the cost model and sharding rules
    understand:

    - `0.5 * x * (1 + erf(x / sqrt(2)))`            -> `hpc.gelu` (none)
    - `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`
                                                     -> `hpc.gelu` (tanh)
    - `x * sigmoid(x)`                               -> `hpc.silu`
    - `w * (x / sqrt(mean(x^2, trailing axes) + eps))` (also with
      `x * (1 / sqrt(..))`, `reciprocal`, `x * x`)    -> `hpc.rms_norm`

    Before:
    ```mlir
    %s = hpc.sigmoid %x : tensor<4x8xf32>
    %y = hpc.mul %x, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
    After:
    ```mlir
    %y = hpc.silu %x : tensor<4x8xf32>
    ```
    Constants must match to 1e-4 relative; intermediate values used
    elsewhere keep the chain as it is.
  }];
  let dependentDialects = ["hpc::HPCDialect"];
}

def HPCPrintShardingRules : Pass<"hpc-print-sharding-rules", "mlir::ModuleOp"> {
  let summary = "Print every hpc op's sharding rule (for tests and debugging)";
  let description = [{
    For each hpc op, prints `<op name>: <rule>` to stderr, where the rule is
    einsum-like: operand dimension lists `->` result dimension lists, each
    dimension a factor `fN` or `-`, then the reduction and replicated
    factors.

    ```
    hpc.matmul: [f0, f2], [f2, f1] -> [f0, f1] reduction{f2}
    ```
  }];
}

def HPCLowerToRuntime : Pass<"hpc-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower func @main of hpc ops to LLVM dialect calls of libhpcrt";
  let description = [{
    Plans the program (tensor slots, one arena with liveness-based reuse,
    weights data) and replaces `func.func @main` by:

    - `llvm.func @hpc_program_run(%ctx: !llvm.ptr)`: one call of
      `hpcrt_<op>(ctx, op index, ids, iattrs, fattrs, sattrs)` per op that
      needs a kernel, in program order, with its operand ids and attributes
      in constant globals (runtime/include/hpcrt.h defines the encoding);
    - `llvm.mlir.global @hpc_manifest`: the JSON manifest (tensor table,
      inputs, outputs, arena size, weights file and hash, ops).

    With `weights-file`, the weights are written there as safetensors.

    ```mlir
    %y = hpc.relu %x : tensor<4xf32>
    ```
    becomes
    ```mlir
    llvm.call @hpcrt_relu(%ctx, %c0, %ids, %null, %null, %null) : ...
    ```
  }];
  let options = [
    Option<"weightsFile", "weights-file", "std::string", /*default=*/"\"\"",
           "Write the weights (safetensors) to this path">,
    Option<"weightsName", "weights-name", "std::string", /*default=*/"\"\"",
           "File name of the weights recorded in the manifest (default: the "
           "base name of weights-file)">,
    Option<"modelName", "model-name", "std::string", /*default=*/"\"\"",
           "Model name recorded in the manifest">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // HPC_PASSES_TD
