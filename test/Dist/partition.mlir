// RUN: hpc-opt %s --dist-propagate=mesh=dp=2,tp=2 --dist-partition 2>&1 | FileCheck %s

// The per-rank program of the MLP in propagate-megatron.mlir: the input
// arrives whole and is sliced by dp; weights are sliced by tp (no
// communication); the row-parallel matmul's partial sum is all-reduced over
// tp (4x8 f32 over 2 ranks: 2*(2-1)/2 * 64 = 64 bytes... of the local 2x8:
// 64 bytes); the output is gathered whole over dp (2x8 f32 = 64 bytes).
// CHECK: dist-partition: each rank sends 128 bytes per step in 2 collectives on mesh #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<4x16xf32> {hpc.name = "x"}) -> (tensor<4x8xf32> {hpc.name = "y"})
// CHECK-DAG: %[[W1:.+]] = hpc.weight "w1" : tensor<16x32xf32>
// CHECK-DAG: %[[W2:.+]] = hpc.weight "w2" : tensor<32x8xf32>
// CHECK: %[[XS:.+]] = dist.all_slice %[[X]] over ["dp"] dim 0 : tensor<4x16xf32> -> tensor<2x16xf32>
// CHECK: %[[W1S:.+]] = dist.all_slice %[[W1]] over ["tp"] dim 1 : tensor<16x32xf32> -> tensor<16x16xf32>
// CHECK: %[[H:.+]] = hpc.matmul %[[XS]], %[[W1S]] : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// CHECK: %[[R:.+]] = hpc.relu %[[H]] : tensor<2x16xf32>
// CHECK: %[[W2S:.+]] = dist.all_slice %[[W2]] over ["tp"] dim 0 : tensor<32x8xf32> -> tensor<16x8xf32>
// CHECK: %[[P:.+]] = hpc.matmul %[[R]], %[[W2S]] : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S:.+]] = dist.all_reduce %[[P]] over ["tp"] sum : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK: %[[Y:.+]] = hpc.add %[[S]], %{{.+}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// CHECK: %[[G:.+]] = dist.all_gather %[[Y]] over ["dp"] dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[G]] : tensor<4x8xf32>
// CHECK-NOT: dist.operand_shardings
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
