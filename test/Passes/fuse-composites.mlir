// RUN: hpc-opt %s --hpc-fuse-composites --split-input-file | FileCheck %s

// The erf form torch exports: (x * (erf(x / sqrt2) + 1)) * 0.5.
// CHECK-LABEL: func @gelu_erf
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gelu %[[X]] : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = hpc.constant dense<1.41421354> : tensor<f32>
  %one = hpc.constant dense<1.0> : tensor<f32>
  %half = hpc.constant dense<0.5> : tensor<f32>
  %0 = hpc.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = hpc.erf %0 : tensor<2x8xf32>
  %2 = hpc.add %1, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = hpc.mul %x, %2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = hpc.mul %3, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

// -----

// GPT-2's tanh approximation, constants on the left, x^3 as pow.
// CHECK-LABEL: func @gelu_tanh
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gelu %[[X]] {approximate = "tanh"} : tensor<4xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = hpc.constant dense<0.5> : tensor<f32>
  %one = hpc.constant dense<1.0> : tensor<f32>
  %three = hpc.constant dense<3.0> : tensor<f32>
  %c = hpc.constant dense<0.044715> : tensor<f32>
  %k = hpc.constant dense<0.797884583> : tensor<f32>
  %0 = hpc.mul %half, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = hpc.pow %x, %three : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = hpc.mul %c, %1 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = hpc.add %x, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = hpc.mul %k, %3 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = hpc.tanh %4 : tensor<4xf32>
  %6 = hpc.add %one, %5 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %7 = hpc.mul %0, %6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %7 : tensor<4xf32>
}

// -----

// A wrong constant (0.6 instead of 0.5) is not GELU.
// CHECK-LABEL: func @not_gelu_wrong_constant
// CHECK-NOT: hpc.gelu
// CHECK: hpc.erf
func.func @not_gelu_wrong_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %sqrt2 = hpc.constant dense<1.41421354> : tensor<f32>
  %one = hpc.constant dense<1.0> : tensor<f32>
  %c = hpc.constant dense<0.6> : tensor<f32>
  %0 = hpc.div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = hpc.erf %0 : tensor<4xf32>
  %2 = hpc.add %1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = hpc.mul %x, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = hpc.mul %3, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----

// An intermediate with another use keeps the chain (fusing would compute the
// shared part twice).
// CHECK-LABEL: func @not_gelu_shared_intermediate
// CHECK-NOT: hpc.gelu
func.func @not_gelu_shared_intermediate(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %sqrt2 = hpc.constant dense<1.41421354> : tensor<f32>
  %one = hpc.constant dense<1.0> : tensor<f32>
  %half = hpc.constant dense<0.5> : tensor<f32>
  %0 = hpc.div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = hpc.erf %0 : tensor<4xf32>
  %2 = hpc.add %1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = hpc.mul %x, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = hpc.mul %3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %4, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func @silu
// CHECK-SAME: (%[[X:.+]]: tensor<3x5xf32>)
// CHECK-NEXT: %[[S:.+]] = hpc.silu %[[X]] : tensor<3x5xf32>
// CHECK-NEXT: return %[[S]]
func.func @silu(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %0 = hpc.sigmoid %x : tensor<3x5xf32>
  %1 = hpc.mul %0, %x : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %1 : tensor<3x5xf32>
}

// -----

// x * sigmoid(y) with y != x is a gate, not SiLU.
// CHECK-LABEL: func @not_silu
// CHECK-NOT: hpc.silu
// CHECK: hpc.sigmoid
func.func @not_silu(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = hpc.sigmoid %y : tensor<3xf32>
  %1 = hpc.mul %x, %0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

// Llama's export: w * (x * (1 / sqrt(mean(x^2) + eps))).
// CHECK-LABEL: func @rms_norm_llama
// CHECK-SAME: (%[[X:.+]]: tensor<1x16x64xf32>, %[[W:.+]]: tensor<64xf32>)
// CHECK-NEXT: %[[R:.+]] = hpc.rms_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64}
// CHECK-NEXT: return %[[R]]
func.func @rms_norm_llama(%x: tensor<1x16x64xf32>, %w: tensor<64xf32>) -> tensor<1x16x64xf32> {
  %two = hpc.constant dense<2.0> : tensor<f32>
  %eps = hpc.constant dense<1.0e-6> : tensor<f32>
  %one = hpc.constant dense<1.0> : tensor<f32>
  %0 = hpc.pow %x, %two : (tensor<1x16x64xf32>, tensor<f32>) -> tensor<1x16x64xf32>
  %1 = hpc.reduce_mean %0 {axes = array<i64: 2>} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %2 = hpc.add %1, %eps : (tensor<1x16x1xf32>, tensor<f32>) -> tensor<1x16x1xf32>
  %3 = hpc.sqrt %2 : tensor<1x16x1xf32>
  %4 = hpc.div %one, %3 : (tensor<f32>, tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %5 = hpc.mul %x, %4 : (tensor<1x16x64xf32>, tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
  %6 = hpc.mul %w, %5 : (tensor<64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  return %6 : tensor<1x16x64xf32>
}

// -----

// x / sqrt(mean(x*x) + eps) * w, with the epsilon on the left of the add.
// CHECK-LABEL: func @rms_norm_divide
// CHECK: hpc.rms_norm %{{.+}}, %{{.+}} {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64}
// CHECK-NOT: hpc.sqrt
func.func @rms_norm_divide(%x: tensor<4x32xf32>, %w: tensor<32xf32>) -> tensor<4x32xf32> {
  %eps = hpc.constant dense<1.0e-5> : tensor<f32>
  %0 = hpc.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %1 = hpc.reduce_mean %0 {axes = array<i64: 1>} : (tensor<4x32xf32>) -> tensor<4x1xf32>
  %2 = hpc.add %eps, %1 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %3 = hpc.sqrt %2 : tensor<4x1xf32>
  %4 = hpc.div %x, %3 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %5 = hpc.mul %4, %w : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %5 : tensor<4x32xf32>
}

// -----

// Statistics over a leading axis are not RMSNorm over trailing dimensions.
// CHECK-LABEL: func @not_rms_norm_leading_axis
// CHECK-NOT: hpc.rms_norm
func.func @not_rms_norm_leading_axis(%x: tensor<4x32xf32>, %w: tensor<32xf32>) -> tensor<4x32xf32> {
  %eps = hpc.constant dense<1.0e-5> : tensor<f32>
  %0 = hpc.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %1 = hpc.reduce_mean %0 {axes = array<i64: 0>} : (tensor<4x32xf32>) -> tensor<1x32xf32>
  %2 = hpc.add %eps, %1 : (tensor<f32>, tensor<1x32xf32>) -> tensor<1x32xf32>
  %3 = hpc.sqrt %2 : tensor<1x32xf32>
  %4 = hpc.div %x, %3 : (tensor<4x32xf32>, tensor<1x32xf32>) -> tensor<4x32xf32>
  %5 = hpc.mul %4, %w : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %5 : tensor<4x32xf32>
}

// -----

// A scale that varies along a non-normalized dimension cannot fold in.
// CHECK-LABEL: func @not_rms_norm_row_scale
// CHECK-NOT: hpc.rms_norm
func.func @not_rms_norm_row_scale(%x: tensor<4x32xf32>, %w: tensor<4x1xf32>) -> tensor<4x32xf32> {
  %eps = hpc.constant dense<1.0e-5> : tensor<f32>
  %0 = hpc.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %1 = hpc.reduce_mean %0 {axes = array<i64: 1>} : (tensor<4x32xf32>) -> tensor<4x1xf32>
  %2 = hpc.add %1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = hpc.sqrt %2 : tensor<4x1xf32>
  %4 = hpc.div %x, %3 : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %5 = hpc.mul %4, %w : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  return %5 : tensor<4x32xf32>
}
