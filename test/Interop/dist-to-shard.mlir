// RUN: hpc-opt %s --dist-propagate=mesh=dp=2,tp=2 --convert-dist-to-shard | FileCheck %s --check-prefix=ALL
// RUN: hpc-opt %s --dist-propagate=mesh=dp=2,tp=2 --convert-dist-to-shard=annotations=inputs | FileCheck %s --check-prefix=INPUTS

// The Megatron MLP of test/Dist/partition.mlir after dist-propagate, in
// upstream shard form. The mesh becomes a grid that keeps the axis names;
// the graph input is annotated whole (it arrives whole on every rank) and
// the output whole for `return`.

// ALL: shard.grid @mesh(shape = 2x2) {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>}
// ALL-LABEL: func.func @main
// ALL-DAG: %[[REP:.+]] = shard.sharding @mesh split_axes = {{\[\[\]\]}} : !shard.sharding
// ALL-DAG: %[[DP:.+]] = shard.sharding @mesh split_axes = {{\[\[0\]\]}} : !shard.sharding
// ALL-DAG: %[[COL:.+]] = shard.sharding @mesh split_axes = {{\[\[\], \[1\]\]}} : !shard.sharding
// ALL-DAG: %[[DPTP:.+]] = shard.sharding @mesh split_axes = {{\[\[0\], \[1\]\]}} : !shard.sharding
// ALL-DAG: %[[ROW:.+]] = shard.sharding @mesh split_axes = {{\[\[1\]\]}} : !shard.sharding
// Every value gets one annotation where it is defined: inputs and weights whole...
// ALL: %[[X:.+]] = shard.shard %arg0 to %[[REP]] : tensor<4x16xf32>
// ALL: %[[W1:.+]] = hpc.weight "w1"
// ALL: %[[W1D:.+]] = shard.shard %[[W1]] to %[[REP]] : tensor<16x32xf32>
// ALL: %[[W2:.+]] = hpc.weight "w2"
// ALL: %[[W2D:.+]] = shard.shard %[[W2]] to %[[REP]] : tensor<32x8xf32>
// ... and each use the sharding its op needs: batch over dp, column parallel.
// ALL: %[[XU:.+]] = shard.shard %[[X]] to %[[DP]] annotate_for_users : tensor<4x16xf32>
// ALL: %[[W1U:.+]] = shard.shard %[[W1D]] to %[[COL]] annotate_for_users : tensor<16x32xf32>
// ALL: %[[H:.+]] = hpc.matmul %[[XU]], %[[W1U]]
// ALL: shard.shard %[[H]] to %[[DPTP]] : tensor<4x32xf32>
// ALL: hpc.relu
// Row parallel: the partial sum over tp has no shard counterpart; the
// result is annotated by its dimensions and the split reduction makes
// upstream partitioning all-reduce it.
// ALL: %[[W2U:.+]] = shard.shard %[[W2D]] to %[[ROW]] annotate_for_users : tensor<32x8xf32>
// ALL: %[[P:.+]] = hpc.matmul %{{.+}}, %[[W2U]]
// ALL: shard.shard %[[P]] to %[[DP]] : tensor<4x8xf32>
// ALL: %[[Y:.+]] = hpc.add
// ALL: %[[YD:.+]] = shard.shard %[[Y]] to %[[DP]] : tensor<4x8xf32>
// ALL: %[[YU:.+]] = shard.shard %[[YD]] to %[[REP]] annotate_for_users : tensor<4x8xf32>
// ALL: return %[[YU]]
// ALL-NOT: dist.

// With annotations=inputs only the values that enter the computation are
// annotated, where they are used; upstream propagation does the rest.
// INPUTS-LABEL: func.func @main
// INPUTS: %[[X:.+]] = shard.shard %arg0 to %{{.+}} : tensor<4x16xf32>
// INPUTS: %[[W1:.+]] = hpc.weight "w1"
// INPUTS-NOT: shard.shard %[[W1]] to
// INPUTS: %[[XU:.+]] = shard.shard %[[X]] to %{{.+}} annotate_for_users : tensor<4x16xf32>
// INPUTS: %[[W1U:.+]] = shard.shard %[[W1]] to %{{.+}} annotate_for_users : tensor<16x32xf32>
// INPUTS: %[[H:.+]] = hpc.matmul %[[XU]], %[[W1U]]
// INPUTS: %[[R:.+]] = hpc.relu %[[H]]
// INPUTS: %[[W2U:.+]] = shard.shard %{{.+}} to %{{.+}} annotate_for_users : tensor<32x8xf32>
// INPUTS: %[[P:.+]] = hpc.matmul %[[R]], %[[W2U]]
// INPUTS: %[[Y:.+]] = hpc.add %[[P]]
// INPUTS: %[[YU:.+]] = shard.shard %[[Y]] to %{{.+}} annotate_for_users : tensor<4x8xf32>
// INPUTS: return %[[YU]]
func.func @main(%x: tensor<4x16xf32> {hpc.name = "x"}) -> (tensor<4x8xf32> {hpc.name = "y"}) {
  %w1 = hpc.weight "w1" : tensor<16x32xf32> = dense<0.5>
  %w2 = hpc.weight "w2" : tensor<32x8xf32> = dense<0.25>
  %b = hpc.constant dense<1.0> : tensor<f32>
  %0 = hpc.matmul %x, %w1 : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %1 = hpc.relu %0 : tensor<4x32xf32>
  %2 = hpc.matmul %1, %w2 : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  %3 = hpc.add %2, %b : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
