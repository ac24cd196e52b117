// RUN: hpc-opt %s --dist-propagate=mesh=dp=2 --dist-partition 2>&1 | FileCheck %s

// A reduction over the batch that dp splits: a sum reduces its local half
// and all-reduces the partial sums; a mean of local halves would not add up
// to the mean, so it takes its axis whole (no slice, no collective). The partial
// sum is reduced where it is needed: at the return.

// CHECK: dist-partition: each rank sends 32 bytes per step in 1 collectives
// CHECK-LABEL: func.func @main
// CHECK: %[[XS:.+]] = dist.all_slice %arg0 over ["dp"] dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[S:.+]] = hpc.reduce_sum %[[XS]] {axes = array<i64: 0>, keepdims = false} : (tensor<2x8xf32>) -> tensor<8xf32>
// CHECK: %[[M:.+]] = hpc.reduce_mean %arg0 {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK: %[[R:.+]] = dist.all_reduce %[[S]] over ["dp"] sum : tensor<8xf32> -> tensor<8xf32>
// CHECK: return %[[R]], %[[M]]
func.func @main(%x: tensor<4x8xf32> {hpc.name = "x"}) -> (tensor<8xf32> {hpc.name = "sum"}, tensor<8xf32> {hpc.name = "mean"}) {
  %0 = hpc.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %1 = hpc.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
