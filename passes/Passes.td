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

#endif // HPC_PASSES_TD
