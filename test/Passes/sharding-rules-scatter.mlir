// RUN: hpc-opt %s --hpc-print-sharding-rules -o /dev/null 2>&1 | FileCheck %s

// The gradient of an embedding gather is a scatter-add into zeros: when the
// updates (with their indices) outweigh twice the result, their scatter
// axis is a reduction (a split batch leaves partial sums, all-reduced like
// any weight gradient); otherwise, and for any other scatter, the axis is
// needed whole (the batch's rows gathered first).
func.func @scatter(%ids: tensor<1024x16xi64>, %dy: tensor<1024x16xf32>, %few: tensor<8x16xi64>,
                   %dyfew: tensor<8x16xf32>, %base: tensor<100x16xf32>) {
  %zero = hpc.constant dense<0.0> : tensor<100x16xf32>
  // CHECK: hpc.scatter_elements: [f0, f2], [f1, f2], [f1, f2] -> [f0, f2] reduction{f1} replicated{f0}
  %a = hpc.scatter_elements %zero, %ids, %dy {axis = 0 : i64, reduction = "add"} : (tensor<100x16xf32>, tensor<1024x16xi64>, tensor<1024x16xf32>) -> tensor<100x16xf32>
  // CHECK: hpc.scatter_elements: [f0, f1], [-, f1], [-, f1] -> [f0, f1] replicated{f0}
  %b = hpc.scatter_elements %zero, %few, %dyfew {axis = 0 : i64, reduction = "add"} : (tensor<100x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<100x16xf32>
  // CHECK: hpc.scatter_elements: [f0, f1], [-, f1], [-, f1] -> [f0, f1] replicated{f0}
  %c = hpc.scatter_elements %base, %ids, %dy {axis = 0 : i64, reduction = "add"} : (tensor<100x16xf32>, tensor<1024x16xi64>, tensor<1024x16xf32>) -> tensor<100x16xf32>
  return
}
