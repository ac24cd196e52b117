// RUN: hpc-opt %s --hpc-fuse-epilogues | FileCheck %s

// A tensor-parallel rank's piece of a transposed weight (the backward
// product of a row-parallel projection): the gemm reads the piece of W
// along the other dimension, in place.
// CHECK-LABEL: func @transposed_weight_piece
// CHECK-NOT: hpc.transpose
// CHECK: %[[P:.+]] = dist.all_slice %arg1 over ["tp"] dim 1 : tensor<100x64xf32> -> tensor<100x32xf32>
// CHECK: hpc.gemm %{{.+}}, %[[P]] {{.*}}trans_b = true{{.*}} : (tensor<16x32xf32>, tensor<100x32xf32>) -> tensor<16x100xf32>
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
func.func @transposed_weight_piece(%x: tensor<2x8x32xf32>, %w: tensor<100x64xf32>) -> tensor<2x8x100xf32> {
  %t = hpc.transpose %w {perm = array<i64: 1, 0>} : (tensor<100x64xf32>) -> tensor<64x100xf32>
  %s = dist.all_slice %t over ["tp"] dim 0 : tensor<64x100xf32> -> tensor<32x100xf32>
  %y = hpc.matmul %x, %s : (tensor<2x8x32xf32>, tensor<32x100xf32>) -> tensor<2x8x100xf32>
  return %y : tensor<2x8x100xf32>
}

// Sequence parallelism's weight gradient of a column-parallel product: the
// partitioner gathers the transposed input (sequence pieces [2,4,64] ->
// [2,64,4] -> gathered on dim 2). The gather moves before the transpose
// (dim 1 of the input), which the gemm then reads with trans_a: the same
// gathered values, no batched product and no sum over the batch.
// CHECK-LABEL: func @gathered_weight_gradient
// CHECK-NOT: hpc.transpose
// CHECK: %[[T:.+]] = dist.all_gather_start %arg0 over ["tp"] dim 1 : tensor<2x4x64xf32> -> !dist.token<tensor<2x8x64xf32>>
// CHECK: %[[X:.+]] = dist.wait %[[T]] : !dist.token<tensor<2x8x64xf32>> -> tensor<2x8x64xf32>
// CHECK: %[[A:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>}
// CHECK: hpc.gemm %[[A]], %{{.+}} {{.*}}trans_a = true{{.*}} : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
// CHECK-NOT: hpc.reduce_sum
// CHECK: return
func.func @gathered_weight_gradient(%x: tensor<2x4x64xf32>, %dy: tensor<2x8x32xf32>) -> tensor<1x64x32xf32> {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x4x64xf32>) -> tensor<2x64x4xf32>
  %g = dist.all_gather_start %t over ["tp"] dim 2 : tensor<2x64x4xf32> -> !dist.token<tensor<2x64x8xf32>>
  %a = dist.wait %g : !dist.token<tensor<2x64x8xf32>> -> tensor<2x64x8xf32>
  %p = hpc.matmul %a, %dy : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  return %s : tensor<1x64x32xf32>
}

// The synchronous gather the same way.
// CHECK-LABEL: func @gathered_weight_gradient_sync
// CHECK: %[[X:.+]] = dist.all_gather %arg0 over ["tp"] dim 1 : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
// CHECK: hpc.gemm %{{.+}}, %{{.+}} {{.*}}trans_a = true{{.*}} : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
func.func @gathered_weight_gradient_sync(%x: tensor<2x4x64xf32>, %dy: tensor<2x8x32xf32>) -> tensor<1x64x32xf32> {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x4x64xf32>) -> tensor<2x64x4xf32>
  %a = dist.all_gather %t over ["tp"] dim 2 : tensor<2x64x4xf32> -> tensor<2x64x8xf32>
  %p = hpc.matmul %a, %dy : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  return %s : tensor<1x64x32xf32>
}

// A gathered transpose another op also reads, or a sum over another
// dimension, keeps its gather where it was.
// CHECK-LABEL: func @gathered_weight_gradient_not_matched
// CHECK: hpc.transpose
// CHECK: dist.all_gather_start %{{.+}} over ["tp"] dim 2
// CHECK: hpc.reduce_sum
// CHECK: hpc.transpose
// CHECK: dist.all_gather_start %{{.+}} over ["tp"] dim 2
// CHECK: hpc.reduce_sum
// CHECK: return
func.func @gathered_weight_gradient_not_matched(%x: tensor<2x4x64xf32>, %dy: tensor<2x8x32xf32>)
    -> (tensor<1x64x32xf32>, tensor<2x64x4xf32>, tensor<2x64x1xf32>) {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x4x64xf32>) -> tensor<2x64x4xf32>
  %g = dist.all_gather_start %t over ["tp"] dim 2 : tensor<2x64x4xf32> -> !dist.token<tensor<2x64x8xf32>>
  %a = dist.wait %g : !dist.token<tensor<2x64x8xf32>> -> tensor<2x64x8xf32>
  %p = hpc.matmul %a, %dy : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  %t2 = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x4x64xf32>) -> tensor<2x64x4xf32>
  %g2 = dist.all_gather_start %t2 over ["tp"] dim 2 : tensor<2x64x4xf32> -> !dist.token<tensor<2x64x8xf32>>
  %a2 = dist.wait %g2 : !dist.token<tensor<2x64x8xf32>> -> tensor<2x64x8xf32>
  %p2 = hpc.matmul %a2, %dy : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s2 = hpc.reduce_sum %p2 {axes = array<i64: 2>} : (tensor<2x64x32xf32>) -> tensor<2x64x1xf32>
  return %s, %t, %s2 : tensor<1x64x32xf32>, tensor<2x64x4xf32>, tensor<2x64x1xf32>
}
}
