// RUN: hpc-opt %s --dist-propagate --dist-partition --split-input-file 2>&1 | FileCheck %s

// A pending reduction whose axes then split a dimension becomes one
// reduce_scatter: (2-1) pieces of 2x8 f32 = 64 bytes; gathering the output
// whole sends 64 more.
// CHECK: dist-partition: each rank sends 128 bytes per step in 2 collectives
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.+]] = hpc.matmul {{.*}} -> tensor<4x8xf32>
// CHECK: %[[RS:.+]] = dist.reduce_scatter %[[P]] over ["tp"] sum dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NOT: dist.all_reduce
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
    %xs = dist.annotate %x : tensor<4x16xf32> to #dist.sharding<[[], [tp]]>
    %ws = dist.annotate %w : tensor<16x8xf32> to #dist.sharding<[[tp], []]>
    %0 = hpc.matmul %xs, %ws : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %1 = dist.annotate %0 : tensor<4x8xf32> to #dist.sharding<[[tp], []]>
    %2 = hpc.relu %1 : tensor<4x8xf32>
    %3 = dist.annotate %2 : tensor<4x8xf32> to #dist.sharding<[[], []]>
    return %3 : tensor<4x8xf32>
  }
}

// -----

// A split moving from one dimension to another is one all_to_all: half of
// the 4x8 f32 local piece (64 bytes) leaves each rank.
// CHECK-LABEL: func.func @main
// CHECK: %[[S:.+]] = dist.all_slice %{{.+}} over ["tp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: dist.all_to_all %[[S]] over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = dist.annotate %x : tensor<8x8xf32> to #dist.sharding<[[tp], []]>
    %1 = dist.annotate %0 : tensor<8x8xf32> to #dist.sharding<[[], [tp]]>
    return %1 : tensor<8x8xf32>
  }
}

// -----

// The last axis of a dimension's list moving to another dimension (expert
// parallelism: dp+ep groups to dp groups of ep-split experts) and back is
// one all_to_all over that axis each way; dp stays.
// CHECK-LABEL: func.func @main
// CHECK: %[[S:.+]] = dist.all_slice %{{.+}} over ["dp", "ep"] dim 0 : tensor<4x8x2xf32> -> tensor<1x8x2xf32>
// CHECK: %[[E:.+]] = dist.all_to_all %[[S]] over ["ep"] split 1 concat 0 : tensor<1x8x2xf32> -> tensor<2x4x2xf32>
// CHECK: dist.all_to_all %[[E]] over ["ep"] split 0 concat 1 : tensor<2x4x2xf32> -> tensor<1x8x2xf32>
// CHECK-NOT: dist.all_gather{{.*}}over ["ep"]
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, ep = 2 : intra_node>} {
  func.func @main(%x: tensor<4x8x2xf32>) -> tensor<4x8x2xf32> {
    %0 = dist.annotate %x : tensor<4x8x2xf32> to #dist.sharding<[[dp, ep], [], []]>
    %1 = dist.annotate %0 : tensor<4x8x2xf32> to #dist.sharding<[[dp], [ep], []]>
    %2 = dist.annotate %1 : tensor<4x8x2xf32> to #dist.sharding<[[dp, ep], [], []]>
    return %2 : tensor<4x8x2xf32>
  }
}

