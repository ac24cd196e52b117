// RUN: hpc-opt %s --split-input-file --dist-propagate=mesh=tp=2 --dist-partition 2>&1 | FileCheck %s

// A train step's weight gradient whose operands every tp rank holds whole
// (the tied LM head's: the logits are gathered for the loss, so their
// gradient arrives whole): each rank computes its columns of the product
// from its slice of dY (free), and the reader that needs the gradient whole
// gathers them, instead of every rank computing all of it.
// CHECK-LABEL: func.func @main
// CHECK: %[[D:.+]] = dist.all_slice %arg1 over ["tp"] dim 2 : tensor<2x8x32xf32> -> tensor<2x8x16xf32>
// CHECK: %[[P:.+]] = hpc.matmul %{{.+}}, %[[D]] : (tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
// CHECK: %[[S:.+]] = hpc.reduce_sum %[[P]] {axes = array<i64: 0>} : (tensor<2x16x16xf32>) -> tensor<1x16x16xf32>
// CHECK: dist.all_gather %[[S]] over ["tp"] dim 2 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
module attributes {hpc.train} {
func.func @main(%x: tensor<2x8x16xf32> {hpc.name = "x"}, %dy: tensor<2x8x32xf32> {hpc.name = "dy"})
    -> (tensor<1x16x32xf32> {hpc.name = "g"}) {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x16x8xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x16x32xf32>) -> tensor<1x16x32xf32>
  return %s : tensor<1x16x32xf32>
}
}

// -----

// Outside a train step, or summed over other dimensions (not a weight
// gradient), the product stays whole on every rank.
// CHECK-LABEL: func.func @main
// CHECK-NOT: dist.all_slice
// CHECK: hpc.matmul %{{.+}}, %arg1 : (tensor<2x16x8xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
// CHECK-NOT: dist.all_gather
func.func @main(%x: tensor<2x8x16xf32> {hpc.name = "x"}, %dy: tensor<2x8x32xf32> {hpc.name = "dy"})
    -> (tensor<1x16x32xf32> {hpc.name = "g"}) {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x16x8xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x16x32xf32>) -> tensor<1x16x32xf32>
  return %s : tensor<1x16x32xf32>
}

// -----

// CHECK-LABEL: func.func @main
// CHECK-NOT: dist.all_slice
// CHECK: hpc.matmul %{{.+}}, %arg1 : (tensor<2x16x8xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
// CHECK-NOT: dist.all_gather
module attributes {hpc.train} {
func.func @main(%x: tensor<2x8x16xf32> {hpc.name = "x"}, %dy: tensor<2x8x32xf32> {hpc.name = "dy"})
    -> (tensor<2x16x1xf32> {hpc.name = "g"}) {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x16x8xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 2>} : (tensor<2x16x32xf32>) -> tensor<2x16x1xf32>
  return %s : tensor<2x16x1xf32>
}
}
