// RUN: hpc-opt %s --hpc-print-summary -o /dev/null 2>&1 | FileCheck %s
// RUN: hpc-opt %s --hpc-fuse-epilogues --hpc-print-summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUSED

// Embedding [100x8], matmul 1x4x8 * 8x16: 2*4*8*16 = 1024 FLOPs,
// add of 4x16 = 64 FLOPs; 4 tokens -> 272 FLOPs per token. The i1 mask is a
// buffer, not a parameter; parameters: 800 + 128.
// CHECK: === hpc model summary: @main ===
// CHECK-NEXT: inputs: ids:tensor<1x4xi64>
// CHECK-NEXT: outputs: y:tensor<1x4x16xf32>
// CHECK-NEXT: ops: 7 in 5 kinds
// CHECK: hpc.weight 3
// CHECK: parameters: 928 (928, 3.71KB), buffers: 2048 (2.05KB)
// CHECK-NEXT: forward FLOPs: 1088 (1.09K), per token: 272 (4 tokens)
// The gemm that hpc-fuse-epilogues makes of matmul + add counts the same.
// FUSED: hpc.gemm 1
// FUSED: forward FLOPs: 1088 (1.09K), per token: 272 (4 tokens)
func.func @main(%ids: tensor<1x4xi64> {hpc.name = "ids"}) -> (tensor<1x4x16xf32> {hpc.name = "y"}) {
  %emb = hpc.weight "emb" : tensor<100x8xf32>
  %w = hpc.weight "w" : tensor<8x16xf32>
  %mask = hpc.weight "mask" : tensor<2048xi1>
  %b = hpc.constant dense<1.0> : tensor<16xf32>
  %x = hpc.gather %emb, %ids {axis = 0 : i64} : (tensor<100x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %y = hpc.matmul %x, %w : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %z = hpc.add %y, %b : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  return %z : tensor<1x4x16xf32>
}
