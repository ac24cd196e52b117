// RUN: hpc-opt %s --canonicalize | FileCheck %s

// Collectives that undo each other fold away under canonicalization.
// CHECK-LABEL: func.func @slice_gather
// CHECK-NEXT: return %arg0
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @slice_gather(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = dist.all_slice %x over ["tp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
    %1 = dist.all_gather %0 over ["tp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}
