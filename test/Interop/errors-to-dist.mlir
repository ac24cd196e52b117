// RUN: hpc-opt %s --split-input-file --verify-diagnostics --convert-shard-to-dist

// Every error of convert-shard-to-dist.

shard.grid @g(shape = 2)
// expected-error @+1 {{'shard.grid' op is a second grid; convert-shard-to-dist handles one per module}}
shard.grid @h(shape = 4)

// -----

// expected-error @+1 {{'shard.grid' op has a dynamic size, which a dist mesh cannot have}}
shard.grid @g(shape = 2x?)

// -----

shard.grid @g(shape = 2)
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @g split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  // expected-error @+1 {{'shard.shard' op has halos or explicit shard offsets, which dist shardings cannot express}}
  %0 = shard.shard %x to %s : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)
func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'shard.all_reduce' op reduction 'bitwise_or' has no dist counterpart}}
  %0 = shard.all_reduce %x on @g grid_axes = [0] reduction = bitwise_or : tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

shard.grid @g(shape = 2)
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shard.shift' op has no counterpart in the dist dialect}}
  %0 = shard.shift %x on @g grid_axes = [0] shift_axis = 0 offset = 1 rotate : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
