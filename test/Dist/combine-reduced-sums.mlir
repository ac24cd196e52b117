// RUN: hpc-opt %s --dist-propagate=mesh=dp=2 --dist-partition 2>&1 | FileCheck %s

// A sum of squares as the gradient norm builds it: the inputs x and z are
// split over dp, so their squares are partial sums, and the weight y is whole. Each partial sum
// would be all-reduced where the chain adds it (two round trips); the chain
// is rebuilt as the whole terms plus one all-reduce of the partial sums
// added locally. The mean's reduction (a partial sum read by a division) is
// no term of a sum and stays as it is.

// CHECK: dist-partition: each rank sends 8 bytes per step in 2 collectives
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[X:.+]] = hpc.reduce_sum_square %{{.+}} {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<f32>
// CHECK-DAG: %[[Y:.+]] = hpc.reduce_sum_square %{{.+}} {axes = array<i64: 0>, keepdims = false} : (tensor<8xf32>) -> tensor<f32>
// CHECK-DAG: %[[Z:.+]] = hpc.reduce_sum_square %{{.+}} {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x8xf32>) -> tensor<f32>
// CHECK: %[[P:.+]] = hpc.add %[[X]], %[[Z]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[R:.+]] = dist.all_reduce %[[P]] over ["dp"] sum : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[T:.+]] = hpc.add %[[Y]], %[[R]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[N:.+]] = hpc.sqrt %[[T]]
// CHECK: dist.all_reduce
// CHECK-NOT: dist.all_reduce
// CHECK: return %[[N]]
func.func @main(%xs: tensor<4x8xf32> {hpc.name = "x"}, %zs: tensor<6x8xf32> {hpc.name = "z"})
    -> (tensor<f32> {hpc.name = "norm"}, tensor<f32> {hpc.name = "mean"}) {
  %y = hpc.weight "y" : tensor<8xf32> = dense<0.5>
  %0 = hpc.reduce_sum_square %xs {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %1 = hpc.reduce_sum_square %y {axes = array<i64: 0>, keepdims = false} : (tensor<8xf32>) -> tensor<f32>
  %2 = hpc.reduce_sum_square %zs {axes = array<i64: 0, 1>, keepdims = false} : (tensor<6x8xf32>) -> tensor<f32>
  %3 = hpc.add %0, %1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %4 = hpc.add %3, %2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %5 = hpc.sqrt %4 : tensor<f32>
  %6 = hpc.reduce_sum %zs {axes = array<i64: 0, 1>, keepdims = false} : (tensor<6x8xf32>) -> tensor<f32>
  %c = hpc.constant dense<48.0> : tensor<f32>
  %7 = hpc.div %6, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %5, %7 : tensor<f32>, tensor<f32>
}
