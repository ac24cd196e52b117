// RUN: hpc-opt %s --dist-propagate=mesh=tp=2 --dist-partition 2>&1 | FileCheck %s

// A fused QKV projection as transformers' Conv1D exports it (tokens
// flattened for a gemm, then split into q, k, v) becomes one gemm per piece
// on slices of the weight and bias, so each piece is column parallel and
// the split needs no gather first; the only traffic is the three outputs
// leaving whole (1x4x4 f32 pieces: 3 x 64 bytes).

// CHECK: dist-partition: each rank sends 192 bytes per step in 3 collectives
// CHECK-LABEL: func.func @main
// CHECK-COUNT-3: hpc.gemm %{{.+}}, %{{.+}}, %{{.+}} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: hpc.split
// CHECK-COUNT-3: dist.all_gather {{.+}} : tensor<1x4x4xf32> -> tensor<1x4x8xf32>
func.func @main(%x: tensor<1x4x8xf32> {hpc.name = "x"}) -> (tensor<1x4x8xf32> {hpc.name = "q"}, tensor<1x4x8xf32> {hpc.name = "k"}, tensor<1x4x8xf32> {hpc.name = "v"}) {
  %w = hpc.weight "c_attn.weight" : tensor<8x24xf32> = dense<0.5>
  %b = hpc.weight "c_attn.bias" : tensor<24xf32> = dense<0.25>
  %0 = hpc.reshape %x {shape = array<i64: 4, 8>} : (tensor<1x4x8xf32>) -> tensor<4x8xf32>
  %1 = hpc.gemm %0, %w, %b : (tensor<4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<4x24xf32>
  %2 = hpc.reshape %1 {shape = array<i64: 1, 4, 24>} : (tensor<4x24xf32>) -> tensor<1x4x24xf32>
  %3:3 = hpc.split %2 {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %3#0, %3#1, %3#2 : tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
}
