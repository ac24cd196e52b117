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
}
