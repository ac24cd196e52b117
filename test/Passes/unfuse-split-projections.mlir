// RUN: hpc-opt %s --hpc-unfuse-split-projections | FileCheck %s

// A fused QKV projection with its bias, split three ways: one product per
// piece, on one hpc.split of the weight and one of the bias (the weight
// stays one tensor; its gradient is then one concat).
// CHECK-LABEL: func @qkv
// CHECK-DAG: %[[W:.+]]:3 = hpc.split %[[WV:.+]] {axis = 1 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<16x48xf32>)
// CHECK-DAG: %[[B:.+]]:3 = hpc.split %[[BV:.+]] {axis = 0 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<48xf32>)
// CHECK: %[[Q:.+]] = hpc.matmul %arg0, %[[W]]#0 : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[QB:.+]] = hpc.add %[[Q]], %[[B]]#0
// CHECK: %[[K:.+]] = hpc.matmul %arg0, %[[W]]#1
// CHECK: %[[KB:.+]] = hpc.add %[[K]], %[[B]]#1
// CHECK: %[[V:.+]] = hpc.matmul %arg0, %[[W]]#2
// CHECK: %[[VB:.+]] = hpc.add %[[V]], %[[B]]#2
// CHECK-NOT: hpc.split
// CHECK: return %[[QB]], %[[KB]], %[[VB]]
func.func @qkv(%x: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %w = hpc.weight "c_attn.weight" : tensor<16x48xf32> = dense<1.0>
  %b = hpc.weight "c_attn.bias" : tensor<48xf32> = dense<0.5>
  %y = hpc.matmul %x, %w : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %z = hpc.add %y, %b : (tensor<2x4x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
  %q, %k, %v = hpc.split %z {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x4x48xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return %q, %k, %v : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// A gemm with trans_b (W is [N, K]) splits W's rows; unequal pieces too.
// CHECK-LABEL: func @gemm_trans_b
// CHECK: %[[W:.+]]:2 = hpc.split %{{.+}} {axis = 0 : i64, sizes = array<i64: 8, 24>} : (tensor<32x16xf32>)
// CHECK: hpc.gemm %arg0, %[[W]]#0 {trans_b = true} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
// CHECK: hpc.gemm %arg0, %[[W]]#1 {trans_b = true} : (tensor<4x16xf32>, tensor<24x16xf32>) -> tensor<4x24xf32>
func.func @gemm_trans_b(%x: tensor<4x16xf32>) -> (tensor<4x8xf32>, tensor<4x24xf32>) {
  %w = hpc.weight "w" : tensor<32x16xf32> = dense<1.0>
  %y = hpc.gemm %x, %w {trans_b = true} : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
  %a, %b = hpc.split %y {axis = 1 : i64, sizes = array<i64: 8, 24>} : (tensor<4x32xf32>) -> (tensor<4x8xf32>, tensor<4x24xf32>)
  return %a, %b : tensor<4x8xf32>, tensor<4x24xf32>
}

// Not a projection by a weight, not along the last dimension, or a product
// another op reads: unchanged.
// CHECK-LABEL: func @not_matched
// CHECK-COUNT-3: hpc.split
// CHECK-NOT: hpc.split
func.func @not_matched(%x: tensor<2x4x16xf32>, %w: tensor<16x48xf32>) -> (tensor<2x4x24xf32>, tensor<2x2x48xf32>, tensor<2x4x48xf32>) {
  %c = hpc.weight "c" : tensor<16x48xf32> = dense<1.0>
  %y = hpc.matmul %x, %w : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %a:2 = hpc.split %y {axis = 2 : i64, sizes = array<i64: 24, 24>} : (tensor<2x4x48xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x24xf32>)
  %z = hpc.matmul %x, %c : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %b:2 = hpc.split %z {axis = 1 : i64, sizes = array<i64: 2, 2>} : (tensor<2x4x48xf32>) -> (tensor<2x2x48xf32>, tensor<2x2x48xf32>)
  %u = hpc.matmul %x, %c : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %d:2 = hpc.split %u {axis = 2 : i64, sizes = array<i64: 24, 24>} : (tensor<2x4x48xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x24xf32>)
  return %a#0, %b#0, %u : tensor<2x4x24xf32>, tensor<2x2x48xf32>, tensor<2x4x48xf32>
}
