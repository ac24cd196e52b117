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

// A collective among one rank (an axis of size 1) is its operand.
// CHECK-LABEL: func.func @single_rank
// CHECK-NEXT: return %arg0, %arg0, %arg0
// The same axes with two ranks stay.
// CHECK-LABEL: func.func @two_ranks
// CHECK: dist.all_reduce
module attributes {dist.mesh = #dist.mesh<dp = 1 : inter_node, tp = 2 : intra_node>} {
  func.func @single_rank(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = dist.all_reduce %x over ["dp"] sum : tensor<8x8xf32> -> tensor<8x8xf32>
    %1 = dist.all_gather %x over ["dp"] dim 0 : tensor<8x8xf32> -> tensor<8x8xf32>
    %2 = dist.broadcast %x over ["dp"] root 0 : tensor<8x8xf32> -> tensor<8x8xf32>
    return %0, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
  func.func @two_ranks(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = dist.all_reduce %x over ["dp", "tp"] sum : tensor<8x8xf32> -> tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}
