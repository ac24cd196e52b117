// RUN: hpc-opt %s --convert-shard-to-dist | FileCheck %s
// RUN: hpc-opt %s --convert-shard-to-dist --dist-propagate=presets=false --dist-partition 2>&1 | FileCheck %s --check-prefix=PART

// A program annotated for upstream shard (a grid without axis names) in
// dist form: axes are named a0, a1, ... and shard.shard becomes
// dist.annotate, so dist-propagate and dist-partition take the
// annotations as seeds.

// CHECK: module attributes {dist.mesh = #dist.mesh<a0 = 2 : inter_node, a1 = 2 : inter_node>}
// CHECK: dist.annotate %arg0 : tensor<4x16xf32> to #dist.sharding<{{\[\[}}a0], []]>
// CHECK: %[[W1:.+]] = hpc.weight "w1"
// CHECK: dist.annotate %[[W1]] : tensor<16x32xf32> to #dist.sharding<{{\[\[}}], [a1]]>
// CHECK: %[[W2:.+]] = hpc.weight "w2"
// CHECK: dist.annotate %[[W2]] : tensor<32x8xf32> to #dist.sharding<{{\[\[}}a1], []]>
// CHECK-NOT: shard.

// PART: dist-partition: each rank sends 128 bytes per step in 2 collectives on mesh #dist.mesh<a0 = 2 : inter_node, a1 = 2 : inter_node>
// PART: hpc.matmul {{.+}} : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// PART: %[[P:.+]] = hpc.matmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
// PART: %[[R:.+]] = dist.all_reduce %[[P]] over ["a1"] sum
// PART: dist.all_gather %[[R]] over ["a0"] dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<4x16xf32> {hpc.name = "x"}) -> (tensor<4x8xf32> {hpc.name = "y"}) {
  %dp = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %col = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %row = shard.sharding @g split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %dp annotate_for_users : tensor<4x16xf32>
  %w1 = hpc.weight "w1" : tensor<16x32xf32> = dense<0.5>
  %w1s = shard.shard %w1 to %col : tensor<16x32xf32>
  %w2 = hpc.weight "w2" : tensor<32x8xf32> = dense<0.25>
  %w2s = shard.shard %w2 to %row : tensor<32x8xf32>
  %0 = hpc.matmul %xs, %w1s : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %1 = hpc.relu %0 : tensor<4x32xf32>
  %2 = hpc.matmul %1, %w2s : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
