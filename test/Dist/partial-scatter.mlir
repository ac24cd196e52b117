// RUN: hpc-opt %s --dist-propagate=mesh=dp=2 --dist-partition 2>&1 | FileCheck %s

// A position embedding's gradient: the batch (split by dp) summed out, a
// partial sum, then scattered into a zero table. A scatter-add into zeros is
// linear in its updates, so the table stays a partial sum and is all-reduced
// where it is needed (here the return; in a train step its gradient bucket),
// not before the scatter. The updates are reduced first where the table is
// bigger than they are (more bytes to move), and for a scatter into a table
// that is not zero (it would be counted once per rank).

// CHECK-LABEL: func.func @main
// CHECK: %[[XS:.+]] = dist.all_slice %arg0 over ["dp"] dim 0 : tensor<4x8x16xf32> -> tensor<2x8x16xf32>
// CHECK: %[[S:.+]] = hpc.reduce_sum %[[XS]] {axes = array<i64: 0>, keepdims = false} : (tensor<2x8x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[T:.+]] = hpc.scatter_elements %[[ZERO:.+]], %[[POS:.+]], %[[S]] {axis = 0 : i64, reduction = "add"}
// CHECK: %[[SUMMED:.+]] = dist.all_reduce %[[S]] over ["dp"] sum : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[B:.+]] = hpc.scatter_elements %arg1, %[[POS]], %[[SUMMED]] {axis = 0 : i64, reduction = "add"}
// CHECK: %[[SUMMED2:.+]] = dist.all_reduce %{{.+}} over ["dp"] sum : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: %[[L:.+]] = hpc.scatter_elements %{{.+}}, %[[POS]], %[[SUMMED2]] {axis = 0 : i64, reduction = "add"} : {{.*}} -> tensor<32x16xf32>
// CHECK: %[[R:.+]] = dist.all_reduce %[[T]] over ["dp"] sum : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: return %[[R]], %[[B]], %[[L]]
func.func @main(%dy: tensor<4x8x16xf32> {hpc.name = "dy"}, %base: tensor<8x16xf32> {hpc.name = "base"})
    -> (tensor<8x16xf32> {hpc.name = "grad"}, tensor<8x16xf32> {hpc.name = "based"},
        tensor<32x16xf32> {hpc.name = "long"}) {
  %zero = hpc.constant dense<0.0> : tensor<8x16xf32>
  %zeros = hpc.constant dense<0.0> : tensor<32x16xf32>
  %pos = hpc.constant dense<3> : tensor<8x16xi64>
  %0 = hpc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : (tensor<4x8x16xf32>) -> tensor<8x16xf32>
  %1 = hpc.scatter_elements %zero, %pos, %0 {axis = 0 : i64, reduction = "add"} : (tensor<8x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = hpc.scatter_elements %base, %pos, %0 {axis = 0 : i64, reduction = "add"} : (tensor<8x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = hpc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : (tensor<4x8x16xf32>) -> tensor<8x16xf32>
  %4 = hpc.scatter_elements %zeros, %pos, %3 {axis = 0 : i64, reduction = "add"} : (tensor<32x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<32x16xf32>
  return %1, %2, %4 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<32x16xf32>
}
