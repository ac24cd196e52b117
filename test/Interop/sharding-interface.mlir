// RUN: hpc-opt %s --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition,cse))' | FileCheck %s

// Upstream shard propagation and partitioning run on hpc ops through the
// ShardingInterface models derived from each op's sharding rule.

shard.grid @mesh(shape = 2)

// The softmax axis needs replication: the split is dropped and the operand
// gathered.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>) -> tensor<4x8xf32>
// CHECK: %[[G:.+]] = shard.all_gather %[[X]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[C:.+]] = tensor.cast %[[G]]
// CHECK: hpc.softmax %[[C]] {axis = -1 : i64} : tensor<4x8xf32>
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<4x8xf32>
  %y = hpc.softmax %a {axis = -1 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// A split contraction is all-reduced; gemm's beta*C is added once, after.
// CHECK-LABEL: func.func @gemm
// CHECK-SAME: (%[[A:.+]]: tensor<4x4xf32>, %[[B:.+]]: tensor<4x6xf32>, %[[C:.+]]: tensor<6xf32>)
// CHECK: %[[P:.+]] = hpc.gemm %[[A]], %[[B]] {beta = 2.000000e+00 : f64} : (tensor<4x4xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[R:.+]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0] : tensor<4x6xf32> -> tensor<4x6xf32>
// CHECK: %[[BETA:.+]] = hpc.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[BC:.+]] = hpc.mul %[[C]], %[[BETA]]
// CHECK: hpc.add %[[R]], %[[BC]] : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
func.func @gemm(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>) -> tensor<4x6xf32> {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %s2 = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %aa = shard.shard %a to %s annotate_for_users : tensor<4x8xf32>
  %bb = shard.shard %b to %s2 annotate_for_users : tensor<8x6xf32>
  %y = hpc.gemm %aa, %bb, %c {beta = 2.0 : f64} : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// Hidden features split by heads through reshape and transpose; the
// reshape's shape attribute becomes the local shape.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x32xf32>) -> tensor<2x2x8x16xf32>
// CHECK: %[[R:.+]] = hpc.reshape %[[X]] {shape = array<i64: 2, 8, 2, 16>} : (tensor<2x8x32xf32>) -> tensor<2x8x2x16xf32>
// CHECK: hpc.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x16xf32>) -> tensor<2x2x8x16xf32>
// CHECK-NOT: shard.
func.func @heads(%x: tensor<2x8x64xf32>) -> tensor<2x4x8x16xf32> {
  %s = shard.sharding @mesh split_axes = [[], [], [0]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<2x8x64xf32>
  %r = hpc.reshape %a {shape = array<i64: 2, 8, 4, 16>} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  %t = hpc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  return %t : tensor<2x4x8x16xf32>
}

// A weight is read whole and each rank keeps its piece (no communication);
// a sum over the split dimension is all-reduced, a mean gathers its axis
// first (partial means do not add up).
// CHECK-LABEL: func.func @weight_reduce
// CHECK: %[[W:.+]] = hpc.weight "w" : tensor<4x8xf32>
// CHECK: %[[WS:.+]] = shard.all_slice %[[W]] on @mesh grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK: %[[WG:.+]] = shard.all_gather %[[WS]] on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[WC:.+]] = tensor.cast %[[WG]]
// CHECK: %[[S:.+]] = hpc.reduce_sum %[[WS]] {axes = array<i64: 1>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK: shard.all_reduce %[[S]] on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: hpc.reduce_mean %[[WC]] {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
func.func @weight_reduce() -> (tensor<4xf32>, tensor<4xf32>) {
  %w = hpc.weight "w" : tensor<4x8xf32> = dense<1.0>
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<4x8xf32>
  %sum = hpc.reduce_sum %ws {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %mean = hpc.reduce_mean %ws {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %sum, %mean : tensor<4xf32>, tensor<4xf32>
}
