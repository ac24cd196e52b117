// RUN: hpc-opt %s --hpc-print-sharding-rules -o /dev/null 2>&1 | FileCheck %s

func.func @rules(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>,
                 %img: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %ids: tensor<2x16xi64>,
                 %emb: tensor<100x64xf32>, %bn: tensor<1x8x4x8xf32>) {
  // CHECK: hpc.matmul: [f0, f1, f3], [f3, f2] -> [f0, f1, f2] reduction{f3}
  %0 = hpc.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // Broadcast: the bias maps onto the last factor only.
  // CHECK: hpc.add: [f0, f1, f2], [f2] -> [f0, f1, f2]
  %1 = hpc.add %0, %b : (tensor<2x16x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  // CHECK: hpc.softmax: [f0, f1, f2] -> [f0, f1, f2] replicated{f2}
  %2 = hpc.softmax %1 {axis = -1 : i64} : tensor<2x16x256xf32>
  // CHECK: hpc.reduce_sum: [f0, f1, f2] -> [f0, -, f2] reduction{f1}
  %3 = hpc.reduce_sum %2 {axes = array<i64: 1>} : (tensor<2x16x256xf32>) -> tensor<2x1x256xf32>
  // Only sums leave partial results that add up; a mean needs its axis whole.
  // CHECK: hpc.reduce_mean: [f0, f1, f2] -> [f0, -, f2] replicated{f1}
  %m = hpc.reduce_mean %2 {axes = array<i64: 1>} : (tensor<2x16x256xf32>) -> tensor<2x1x256xf32>
  // Heads split with the hidden dimension: [2,16,256] -> [2,16,4,64].
  // CHECK: hpc.reshape: [f0, f1, f2] -> [f0, f1, f2, -]
  %4 = hpc.reshape %2 {shape = array<i64: 2, 16, 4, 64>} : (tensor<2x16x256xf32>) -> tensor<2x16x4x64xf32>
  // CHECK: hpc.transpose: [f0, f1, f2, f3] -> [f0, f2, f1, f3]
  %5 = hpc.transpose %4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x64xf32>) -> tensor<2x4x16x64xf32>
  // CHECK: hpc.conv: [f0, f2, -, -], [f1, f2, -, -] -> [f0, f1, f3, f4] reduction{f2} replicated{f3, f4}
  %6 = hpc.conv %img, %k {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  // A fused activation needs the whole sum: no reduction factor to split.
  // CHECK: hpc.conv: [f0, f2, -, -], [f1, f2, -, -] -> [f0, f1, f3, f4] replicated{f2, f3, f4}
  %c6 = hpc.conv %img, %k {activation = "relu", dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  // CHECK: hpc.gemm: [f0, f2], [f2, f1], [f1] -> [f0, f1] reduction{f2}
  %g0 = hpc.gemm %emb, %w, %b : (tensor<100x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<100x256xf32>
  // CHECK: hpc.gemm: [f0, f2], [f2, f1], [f1] -> [f0, f1] replicated{f2}
  %g1 = hpc.gemm %emb, %w, %b {activation = "gelu"} : (tensor<100x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<100x256xf32>
  // CHECK: hpc.gather: [f0, f3], [f1, f2] -> [f1, f2, f3] replicated{f0}
  %7 = hpc.gather %emb, %ids {axis = 0 : i64} : (tensor<100x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  // CHECK: hpc.layer_norm: [f0, f1, f2], [f2] -> [f0, f1, f2] replicated{f2}
  %b2 = hpc.weight "g" : tensor<64xf32>
  %8 = hpc.layer_norm %x, %b2 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: hpc.slice: [f0, f3, f2] -> [f0, f1, f2] replicated{f1, f3}
  %9 = hpc.slice %x {starts = array<i64: 0, 2, 0>, ends = array<i64: 2, 10, 64>, steps = array<i64: 1, 1, 1>} : (tensor<2x16x64xf32>) -> tensor<2x8x64xf32>
  // Batch norm's per-channel parameters follow dimension 1 (here of size 8,
  // like the width: numpy's right alignment would pick the width).
  // CHECK: hpc.batch_norm: [f0, f1, f2, f3], [f1], [f1], [f1], [f1] -> [f0, f1, f2, f3]
  %c = hpc.weight "c" : tensor<8xf32>
  %10 = hpc.batch_norm %bn, %c, %c, %c, %c : (tensor<1x8x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x4x8xf32>
  return
}
