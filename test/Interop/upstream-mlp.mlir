// RUN: hpc-opt %s --pass-pipeline='builtin.module(dist-propagate{mesh=dp=2,tp=2},dist-partition,canonicalize)' 2>&1 | FileCheck %s --check-prefixes=CHECK,OURS
// RUN: hpc-opt %s --pass-pipeline='builtin.module(dist-propagate{mesh=dp=2,tp=2},convert-dist-to-shard,func.func(shard-partition),convert-shard-to-dist,canonicalize,dist-comm-report)' 2>&1 | FileCheck %s --check-prefixes=CHECK,UPSTREAM
// RUN: hpc-opt %s --pass-pipeline='builtin.module(dist-propagate{mesh=dp=2,tp=2},convert-dist-to-shard{annotations=inputs},func.func(sharding-propagation,shard-partition),convert-shard-to-dist,canonicalize,dist-comm-report)' 2>&1 | FileCheck %s --check-prefix=PROP

// The Megatron MLP on a dp x tp mesh, partitioned three ways:
//  - by dist-partition (OURS);
//  - by upstream --shard-partition from the shardings dist-propagate chose,
//    translated with convert-dist-to-shard (UPSTREAM): the same per-rank
//    program, collective for collective;
//  - by upstream --sharding-propagation (default backward-forward
//    traversal) from the input and weight shardings alone (PROP): the
//    whole output annotation propagates backwards and the batch is
//    gathered after the first matmul, so each rank sends twice the bytes.

// OURS: dist-partition: each rank sends 128 bytes per step in 2 collectives
// UPSTREAM: dist-comm-report: each rank sends 128 bytes per step in 2 collectives (all_reduce x1, all_gather x1)
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<4x16xf32> {hpc.name = "x"}) -> (tensor<4x8xf32> {hpc.name = "y"})
// CHECK-DAG: %[[XS:.+]] = dist.all_slice %arg0 over ["dp"] dim 0 : tensor<4x16xf32> -> tensor<2x16xf32>
// CHECK-DAG: %[[W1S:.+]] = dist.all_slice %{{.+}} over ["tp"] dim 1 : tensor<16x32xf32> -> tensor<16x16xf32>
// CHECK: %[[H:.+]] = hpc.matmul %[[XS]], %[[W1S]] : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// CHECK: %[[R:.+]] = hpc.relu %[[H]] : tensor<2x16xf32>
// CHECK: %[[P:.+]] = hpc.matmul %[[R]], %{{.+}} : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S:.+]] = dist.all_reduce %[[P]] over ["tp"] sum : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK: %[[Y:.+]] = hpc.add %[[S]], %{{.+}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// CHECK: %[[G:.+]] = dist.all_gather %[[Y]] over ["dp"] dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[G]] : tensor<4x8xf32>

// PROP: dist-comm-report: each rank sends 256 bytes per step in 2 collectives (all_gather x1, all_reduce x1)
// PROP: %[[H:.+]] = hpc.matmul {{.+}} : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// PROP: %[[G:.+]] = dist.all_gather %[[H]] over ["dp"] dim 0 : tensor<2x16xf32> -> tensor<4x16xf32>
// PROP: %[[R:.+]] = hpc.relu %[[G]] : tensor<4x16xf32>
// PROP: %[[P:.+]] = hpc.matmul %[[R]], %{{.+}} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// PROP: dist.all_reduce %[[P]] over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
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
