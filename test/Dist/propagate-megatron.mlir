// RUN: hpc-opt %s --dist-propagate=mesh=dp=2,tp=2 | FileCheck %s

// A two-layer MLP: the first matmul is column parallel (its weight splits
// along the output features), the second row parallel (its weight splits
// along the contracted features, so its result is a partial sum over tp);
// dp splits the batch of the input.
// CHECK: module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>}
// CHECK-LABEL: func.func @main
// CHECK: hpc.matmul
// CHECK-SAME: dist.operand_shardings = [#dist.sharding<{{\[\[}}dp], []]>, #dist.sharding<{{\[\[}}], [tp]]>]
// CHECK-SAME: dist.result_shardings = [#dist.sharding<{{\[\[}}dp], [tp]]>]
// CHECK: hpc.relu
// CHECK-SAME: dist.result_shardings = [#dist.sharding<{{\[\[}}dp], [tp]]>]
// CHECK: hpc.matmul
// CHECK-SAME: dist.operand_shardings = [#dist.sharding<{{\[\[}}dp], [tp]]>, #dist.sharding<{{\[\[}}tp], []]>]
// CHECK-SAME: dist.result_shardings = [#dist.sharding<{{\[\[}}dp], []], partial = sum[tp]>]
// The bias add needs the partial sum finished: it asks for a plain operand.
// CHECK: hpc.add
// CHECK-SAME: dist.operand_shardings = [#dist.sharding<{{\[\[}}dp], []]>, #dist.sharding<[]>]
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
