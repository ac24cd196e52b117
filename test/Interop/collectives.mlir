// RUN: hpc-opt %s --convert-dist-to-shard | FileCheck %s --check-prefix=SHARD
// RUN: hpc-opt %s --convert-dist-to-shard --convert-shard-to-dist | FileCheck %s --check-prefix=BACK

// A per-rank program: collectives translate one to one, axis names to grid
// axis indices and back (the grid keeps the mesh), a broadcast root's index
// within its group to its grid coordinates and back.

// SHARD: shard.grid @mesh(shape = 2x2) {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>}
// SHARD: %[[A:.+]] = shard.all_reduce %arg0 on @mesh grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
// SHARD: %[[B:.+]] = shard.reduce_scatter %[[A]] on @mesh grid_axes = [0, 1] reduction = max scatter_axis = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
// SHARD: %[[C:.+]] = shard.all_gather %[[B]] on @mesh grid_axes = [0, 1] gather_axis = 0 : tensor<1x8xf32> -> tensor<4x8xf32>
// SHARD: %[[D:.+]] = shard.all_to_all %[[C]] on @mesh grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
// SHARD: %[[E:.+]] = shard.broadcast %[[D]] on @mesh grid_axes = [0, 1] root = [1, 0] : (tensor<8x4xf32>) -> tensor<8x4xf32>
// SHARD: %[[F:.+]] = shard.all_slice %[[E]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
// SHARD: return %[[F]]
// SHARD-NOT: shard.shard

// BACK: module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>}
// BACK: %[[A:.+]] = dist.all_reduce %arg0 over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
// BACK: %[[B:.+]] = dist.reduce_scatter %[[A]] over ["dp", "tp"] max dim 0 : tensor<4x8xf32> -> tensor<1x8xf32>
// BACK: %[[C:.+]] = dist.all_gather %[[B]] over ["dp", "tp"] dim 0 : tensor<1x8xf32> -> tensor<4x8xf32>
// BACK: %[[D:.+]] = dist.all_to_all %[[C]] over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
// BACK: %[[E:.+]] = dist.broadcast %[[D]] over ["dp", "tp"] root 2 : tensor<8x4xf32> -> tensor<8x4xf32>
// BACK: %[[F:.+]] = dist.all_slice %[[E]] over ["dp"] dim 1 : tensor<8x4xf32> -> tensor<8x2xf32>
// BACK: return %[[F]]
// BACK-NOT: shard.
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>} {
  func.func @collectives(%x: tensor<4x8xf32>) -> tensor<8x2xf32> {
    %0 = dist.all_reduce %x over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %1 = dist.reduce_scatter %0 over ["dp", "tp"] max dim 0 : tensor<4x8xf32> -> tensor<1x8xf32>
    %2 = dist.all_gather %1 over ["dp", "tp"] dim 0 : tensor<1x8xf32> -> tensor<4x8xf32>
    %3 = dist.all_to_all %2 over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    %4 = dist.broadcast %3 over ["dp", "tp"] root 2 : tensor<8x4xf32> -> tensor<8x4xf32>
    %5 = dist.all_slice %4 over ["dp"] dim 1 : tensor<8x4xf32> -> tensor<8x2xf32>
    return %5 : tensor<8x2xf32>
  }
}
