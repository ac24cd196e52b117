//===- HPCDialect.td - the hpc tensor graph dialect --------*- tablegen -*-===//
//
// The hpc dialect is the tensor-level graph an ONNX model imports into. Every
// op works on ranked tensors with value semantics; shapes are static once the
// importer has fixed the dynamic dimensions, so every result type is inferred
// from the operands and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_DIALECT_TD
#define HPC_DIALECT_TD

include "mlir/IR/OpBase.td"

def HPC_Dialect : Dialect {
  let name = "hpc";
  let cppNamespace = "::hpc";
  let summary = "Tensor graph ops for hybrid-parallel compilation";
  let description = [{
    The `hpc` dialect holds a model's dataflow graph: the ops of transformer
    and CNN model families (matmul, convolution, normalization, softmax,
    elementwise math, data movement) on ranked tensors. It is what the ONNX
    importer produces and what the distributed-parallel passes split.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 0;
}

#endif // HPC_DIALECT_TD
