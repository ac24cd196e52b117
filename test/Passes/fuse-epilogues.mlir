// RUN: hpc-opt %s --hpc-fuse-epilogues | FileCheck %s

// A 3-D projection: the leading dimensions are flattened into the gemm's
// rows and restored after it (both reshapes are views).
// CHECK-LABEL: func @matmul_bias_3d
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[B:.+]]: tensor<32xf32>)
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>} : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X2]], %[[W]], %[[B]] : (tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: %[[Y:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 8, 32>} : (tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @matmul_bias_3d(%x: tensor<2x8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %1 = hpc.add %0, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %1 : tensor<2x8x32xf32>
}

// A 2-D projection needs no reshape.
// CHECK-LABEL: func @matmul_bias_2d
// CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[B:.+]]: tensor<32xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X]], %[[W]], %[[B]] : (tensor<8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[G]]
func.func @matmul_bias_2d(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.add %0, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// The bias on the left of the add.
// CHECK-LABEL: func @bias_on_the_left
// CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[B:.+]]: tensor<32xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X]], %[[W]], %[[B]] : (tensor<8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[G]]
func.func @bias_on_the_left(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.add %b, %0 : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// A [1, 1, N] bias is reshaped to the gemm's [N].
// CHECK-LABEL: func @bias_with_unit_dims
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[B:.+]]: tensor<1x1x32xf32>)
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>}
// CHECK-NEXT: %[[B1:.+]] = hpc.reshape %[[B]] {shape = array<i64: 32>} : (tensor<1x1x32xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X2]], %[[W]], %[[B1]] :
// CHECK-NEXT: %[[Y:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 8, 32>}
// CHECK-NEXT: return %[[Y]]
func.func @bias_with_unit_dims(%x: tensor<2x8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<1x1x32xf32>) -> tensor<2x8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %1 = hpc.add %0, %b : (tensor<2x8x32xf32>, tensor<1x1x32xf32>) -> tensor<2x8x32xf32>
  return %1 : tensor<2x8x32xf32>
}

// CHECK-LABEL: func @gemm_relu
// CHECK-SAME: (%[[A:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<32x64xf32>, %[[B:.+]]: tensor<32xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[A]], %[[W]], %[[B]] {activation = "relu", alpha = 5.000000e-01 : f64, trans_b = true} : (tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[G]]
func.func @gemm_relu(%a: tensor<8x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w, %b {alpha = 0.5 : f64, trans_b = true} : (tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %1 = hpc.relu %0 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// CHECK-LABEL: func @conv_relu
// CHECK-SAME: (%[[X:.+]]: tensor<1x3x8x8xf32>, %[[W:.+]]: tensor<4x3x3x3xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[C:.+]] = hpc.conv %[[X]], %[[W]], %[[B]] {activation = "relu", dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @conv_relu(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x8x8xf32> {
  %0 = hpc.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %1 = hpc.relu %0 : tensor<1x4x8x8xf32>
  return %1 : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func @gemm_gelu_tanh
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "gelu_tanh"}
// CHECK-NEXT: return %[[G]]
func.func @gemm_gelu_tanh(%a: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.gelu %0 {approximate = "tanh"} : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// Each activation op and the attribute value it becomes.
// CHECK-LABEL: func @activation_names
// CHECK-NEXT: %[[G0:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "gelu"}
// CHECK-NEXT: %[[G1:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "sigmoid"}
// CHECK-NEXT: %[[G2:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "tanh"}
// CHECK-NEXT: %[[G3:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "silu"}
// CHECK-NEXT: return %[[G0]], %[[G1]], %[[G2]], %[[G3]]
func.func @activation_names(%a: tensor<8x64xf32>, %w: tensor<64x32xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %0 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.gelu %0 : tensor<8x32xf32>
  %2 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %3 = hpc.sigmoid %2 : tensor<8x32xf32>
  %4 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %5 = hpc.tanh %4 : tensor<8x32xf32>
  %6 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %7 = hpc.silu %6 : tensor<8x32xf32>
  return %1, %3, %5, %7 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// An MLP's first layer: bias and GELU both go into one gemm, the activation
// through the reshape the bias fusion put after it.
// CHECK-LABEL: func @matmul_bias_gelu
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf32>, %[[W:.+]]: tensor<64x256xf32>, %[[B:.+]]: tensor<256xf32>)
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>}
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X2]], %[[W]], %[[B]] {activation = "gelu"} : (tensor<16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<16x256xf32>
// CHECK-NEXT: %[[Y:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 8, 256>}
// CHECK-NEXT: return %[[Y]]
func.func @matmul_bias_gelu(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>) -> tensor<2x8x256xf32> {
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x256xf32>) -> tensor<2x8x256xf32>
  %1 = hpc.add %b, %0 : (tensor<256xf32>, tensor<2x8x256xf32>) -> tensor<2x8x256xf32>
  %2 = hpc.gelu %1 : tensor<2x8x256xf32>
  return %2 : tensor<2x8x256xf32>
}

// A conv flattened before its activation.
// CHECK-LABEL: func @conv_reshape_sigmoid
// CHECK-NEXT: %[[C:.+]] = hpc.conv %{{.+}}, %{{.+}} {activation = "sigmoid",
// CHECK-NEXT: %[[R:.+]] = hpc.reshape %[[C]]
// CHECK-NEXT: return %[[R]]
func.func @conv_reshape_sigmoid(%x: tensor<1x3x4x4xf32>, %w: tensor<2x3x1x1xf32>) -> tensor<1x32xf32> {
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = hpc.reshape %0 {shape = array<i64: 1, 32>} : (tensor<1x2x4x4xf32>) -> tensor<1x32xf32>
  %2 = hpc.sigmoid %1 : tensor<1x32xf32>
  return %2 : tensor<1x32xf32>
}

//===----------------------------------------------------------------------===//
// bf16 products (hpc-autocast): through the cast back to f32
//===----------------------------------------------------------------------===//

// The bias add of a bf16 matmul: a bf16 gemm whose bias is the weight stored
// in bf16 (the f32 weight, now unread, goes); the cast back is its only
// reader, through the reshape, so the gemm writes f32 (rewrite 4).
// CHECK-LABEL: func @bf16_matmul_bias
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xbf16>, %[[W:.+]]: tensor<64x32xbf16>)
// CHECK-NEXT: %[[B:.+]] = hpc.weight "fc.b" : tensor<32xbf16> = dense<5.000000e-01>
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>} : (tensor<2x8x64xbf16>) -> tensor<16x64xbf16>
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X2]], %[[W]], %[[B]] : (tensor<16x64xbf16>, tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<16x32xf32>
// CHECK-NEXT: %[[Y:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 8, 32>} : (tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bf16_matmul_bias(%x: tensor<2x8x64xbf16>, %w: tensor<64x32xbf16>) -> tensor<2x8x32xf32> {
  %b = hpc.weight "fc.b" : tensor<32xf32> = dense<0.5>
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xbf16>, tensor<64x32xbf16>) -> tensor<2x8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<2x8x32xbf16> to tensor<2x8x32xf32>
  %2 = hpc.add %1, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %2 : tensor<2x8x32xf32>
}

// A bias computed at run time is cast to bf16 once for both gemms.
// CHECK-LABEL: func @bf16_bias_cast_once
// CHECK-SAME: (%[[X:.+]]: tensor<8x64xbf16>, %[[W:.+]]: tensor<64x32xbf16>, %[[B:.+]]: tensor<32xf32>)
// CHECK-NEXT: %[[B16:.+]] = hpc.cast %[[B]] {to = bf16} : tensor<32xf32> to tensor<32xbf16>
// CHECK-NEXT: %[[G0:.+]] = hpc.gemm %[[X]], %[[W]], %[[B16]] : ({{.*}}) -> tensor<8x32xf32>
// CHECK-NEXT: %[[G1:.+]] = hpc.gemm %[[X]], %[[W]], %[[B16]] : ({{.*}}) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[G0]], %[[G1]]
func.func @bf16_bias_cast_once(%x: tensor<8x64xbf16>, %w: tensor<64x32xbf16>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %0 = hpc.matmul %x, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %2 = hpc.add %b, %1 : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %3 = hpc.matmul %x, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %4 = hpc.cast %3 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %5 = hpc.add %4, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %2, %5 : tensor<8x32xf32>, tensor<8x32xf32>
}

// The activation is applied in the gemm's epilogue, which then writes f32.
// CHECK-LABEL: func @bf16_gemm_gelu
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}}, %{{.+}} {activation = "gelu"} : (tensor<8x64xbf16>, tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<8x32xf32>
// CHECK-NEXT: return %[[G]]
func.func @bf16_gemm_gelu(%a: tensor<8x64xbf16>, %w: tensor<64x32xbf16>, %b: tensor<32xbf16>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w, %b : (tensor<8x64xbf16>, tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %2 = hpc.gelu %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// CHECK-LABEL: func @bf16_conv_relu
// CHECK-NEXT: %[[C:.+]] = hpc.conv %{{.+}}, %{{.+}}, %{{.+}} {activation = "relu", {{.*}}} : (tensor<1x3x8x8xbf16>, tensor<4x3x3x3xbf16>, tensor<4xbf16>) -> tensor<1x4x8x8xbf16>
// CHECK-NEXT: %[[Y:.+]] = hpc.cast %[[C]] {to = f32} : tensor<1x4x8x8xbf16> to tensor<1x4x8x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bf16_conv_relu(%x: tensor<1x3x8x8xbf16>, %w: tensor<4x3x3x3xbf16>, %b: tensor<4xbf16>) -> tensor<1x4x8x8xf32> {
  %0 = hpc.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xbf16>, tensor<4x3x3x3xbf16>, tensor<4xbf16>) -> tensor<1x4x8x8xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<1x4x8x8xbf16> to tensor<1x4x8x8xf32>
  %2 = hpc.relu %1 : tensor<1x4x8x8xf32>
  return %2 : tensor<1x4x8x8xf32>
}

// A transformer MLP: bias and GELU into one gemm, through the cast back and
// the reshape the bias fusion put before it; the next matmul, which read the
// GELU cast to bf16 again, reads the gemm's bf16 result (both casts go), and
// writes f32 (its cast back goes).
// CHECK-LABEL: func @bf16_mlp
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xbf16>, %[[W1:.+]]: tensor<64x256xbf16>, %[[B1:.+]]: tensor<256xf32>, %[[W2:.+]]: tensor<256x64xbf16>)
// CHECK-NEXT: %[[B16:.+]] = hpc.cast %[[B1]] {to = bf16}
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]] {shape = array<i64: 16, 64>}
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[X2]], %[[W1]], %[[B16]] {activation = "gelu_tanh"} : (tensor<16x64xbf16>, tensor<64x256xbf16>, tensor<256xbf16>) -> tensor<16x256xbf16>
// CHECK-NEXT: %[[H:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 8, 256>} : (tensor<16x256xbf16>) -> tensor<2x8x256xbf16>
// CHECK-NEXT: %[[M:.+]] = hpc.matmul %[[H]], %[[W2]] : (tensor<2x8x256xbf16>, tensor<256x64xbf16>) -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[M]]
func.func @bf16_mlp(%x: tensor<2x8x64xbf16>, %w1: tensor<64x256xbf16>, %b1: tensor<256xf32>, %w2: tensor<256x64xbf16>) -> tensor<2x8x64xf32> {
  %0 = hpc.matmul %x, %w1 : (tensor<2x8x64xbf16>, tensor<64x256xbf16>) -> tensor<2x8x256xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<2x8x256xbf16> to tensor<2x8x256xf32>
  %2 = hpc.add %1, %b1 : (tensor<2x8x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
  %3 = hpc.gelu %2 {approximate = "tanh"} : tensor<2x8x256xf32>
  %4 = hpc.cast %3 {to = bf16} : tensor<2x8x256xf32> to tensor<2x8x256xbf16>
  %5 = hpc.matmul %4, %w2 : (tensor<2x8x256xbf16>, tensor<256x64xbf16>) -> tensor<2x8x64xbf16>
  %6 = hpc.cast %5 {to = f32} : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
  return %6 : tensor<2x8x64xf32>
}

// Attention's q and k split from the QKV gemm's result: the cast back only
// moves (split, reshape, transpose) on the way to casts to bf16 again, so
// the moves run on the bf16 result and every cast goes (rewrite 4); the
// scores' product then writes f32 (rewrite 5).
// CHECK-LABEL: func @bf16_split_moves
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xbf16>, %[[W:.+]]: tensor<16x32xbf16>)
// CHECK-NOT: hpc.cast
// CHECK: %[[G:.+]] = hpc.gemm %[[X]], %[[W]] : ({{.*}}) -> tensor<8x32xbf16>
// CHECK-NEXT: %[[R:.+]] = hpc.reshape %[[G]] {{.*}} -> tensor<2x4x32xbf16>
// CHECK-NEXT: %[[S:.+]]:2 = hpc.split %[[R]] {{.*}} -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>)
// CHECK-NEXT: %[[Q:.+]] = hpc.reshape %[[S]]#0 {{.*}} -> tensor<2x4x2x8xbf16>
// CHECK-NEXT: %[[QT:.+]] = hpc.transpose %[[Q]] {{.*}} -> tensor<2x2x4x8xbf16>
// CHECK-NEXT: %[[K:.+]] = hpc.reshape %[[S]]#1 {{.*}} -> tensor<2x4x2x8xbf16>
// CHECK-NEXT: %[[KT:.+]] = hpc.transpose %[[K]] {{.*}} -> tensor<2x2x8x4xbf16>
// CHECK-NEXT: %[[P:.+]] = hpc.matmul %[[QT]], %[[KT]] : ({{.*}}) -> tensor<2x2x4x4xf32>
// CHECK-NEXT: return %[[P]]
func.func @bf16_split_moves(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>) -> tensor<2x2x4x4xf32> {
  %0 = hpc.gemm %x, %w : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.reshape %0 {shape = array<i64: 2, 4, 32>} : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
  %2 = hpc.cast %1 {to = f32} : tensor<2x4x32xbf16> to tensor<2x4x32xf32>
  %3:2 = hpc.split %2 {axis = 2 : i64, sizes = array<i64: 16, 16>} : (tensor<2x4x32xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %4 = hpc.reshape %3#0 {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %5 = hpc.transpose %4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %6 = hpc.reshape %3#1 {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %7 = hpc.transpose %6 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x8x4xf32>
  %8 = hpc.cast %5 {to = bf16} : tensor<2x2x4x8xf32> to tensor<2x2x4x8xbf16>
  %9 = hpc.cast %7 {to = bf16} : tensor<2x2x8x4xf32> to tensor<2x2x8x4xbf16>
  %10 = hpc.matmul %8, %9 : (tensor<2x2x4x8xbf16>, tensor<2x2x8x4xbf16>) -> tensor<2x2x4x4xbf16>
  %11 = hpc.cast %10 {to = f32} : tensor<2x2x4x4xbf16> to tensor<2x2x4x4xf32>
  return %11 : tensor<2x2x4x4xf32>
}

// One piece of the split is also read in f32 (a bias gradient's sum would
// be): nothing moves in bf16, the casts stay.
// CHECK-LABEL: func @bf16_split_read_in_f32
// CHECK: hpc.split {{.*}} -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
// CHECK: hpc.cast {{.*}} {to = bf16}
// CHECK: hpc.cast {{.*}} {to = bf16}
func.func @bf16_split_read_in_f32(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>) -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xf32>) {
  %0 = hpc.gemm %x, %w : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.reshape %0 {shape = array<i64: 2, 4, 32>} : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
  %2 = hpc.cast %1 {to = f32} : tensor<2x4x32xbf16> to tensor<2x4x32xf32>
  %3:2 = hpc.split %2 {axis = 2 : i64, sizes = array<i64: 16, 16>} : (tensor<2x4x32xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %4 = hpc.cast %3#0 {to = bf16} : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
  %5 = hpc.cast %3#1 {to = bf16} : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
  return %4, %5, %3#1 : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xf32>
}

// A bf16 conv cast back, then flattened, then activated.
// CHECK-LABEL: func @bf16_conv_reshape_sigmoid
// CHECK-NEXT: %[[C:.+]] = hpc.conv %{{.+}}, %{{.+}} {activation = "sigmoid",
// CHECK-NEXT: %[[Y:.+]] = hpc.cast %[[C]] {to = f32}
// CHECK-NEXT: %[[R:.+]] = hpc.reshape %[[Y]]
// CHECK-NEXT: return %[[R]]
func.func @bf16_conv_reshape_sigmoid(%x: tensor<1x3x4x4xbf16>, %w: tensor<2x3x1x1xbf16>) -> tensor<1x32xf32> {
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x4x4xbf16>, tensor<2x3x1x1xbf16>) -> tensor<1x2x4x4xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<1x2x4x4xbf16> to tensor<1x2x4x4xf32>
  %2 = hpc.reshape %1 {shape = array<i64: 1, 32>} : (tensor<1x2x4x4xf32>) -> tensor<1x32xf32>
  %3 = hpc.sigmoid %2 : tensor<1x32xf32>
  return %3 : tensor<1x32xf32>
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

// The matmul's result is also returned (as a backward pass would read it):
// the bias add stays.
// CHECK-LABEL: func @matmul_two_uses
// CHECK-NEXT: hpc.matmul
// CHECK-NEXT: hpc.add
// CHECK-NOT: hpc.gemm
func.func @matmul_two_uses(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %0 = hpc.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.add %0, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %0, %1 : tensor<8x32xf32>, tensor<8x32xf32>
}

// The pre-activation is read by another op: the relu stays.
// CHECK-LABEL: func @pre_activation_two_uses
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} : (
// CHECK-NEXT: %[[R:.+]] = hpc.relu %[[G]]
// CHECK-NEXT: hpc.mul %[[G]], %[[R]]
func.func @pre_activation_two_uses(%a: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.relu %0 : tensor<8x32xf32>
  %2 = hpc.mul %0, %1 : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// The reshape between the gemm and the activation has another use.
// CHECK-LABEL: func @reshape_two_uses
// CHECK-NEXT: hpc.gemm %{{.+}}, %{{.+}} : (
// CHECK-NEXT: hpc.reshape
// CHECK-NEXT: hpc.tanh
func.func @reshape_two_uses(%a: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> (tensor<256xf32>, tensor<256xf32>) {
  %0 = hpc.gemm %a, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.reshape %0 {shape = array<i64: 256>} : (tensor<8x32xf32>) -> tensor<256xf32>
  %2 = hpc.tanh %1 : tensor<256xf32>
  return %1, %2 : tensor<256xf32>, tensor<256xf32>
}

// CHECK-LABEL: func @integer_matmul
// CHECK-NEXT: hpc.matmul
// CHECK-NEXT: hpc.add
func.func @integer_matmul(%x: tensor<8x64xi32>, %w: tensor<64x32xi32>, %b: tensor<32xi32>) -> tensor<8x32xi32> {
  %0 = hpc.matmul %x, %w : (tensor<8x64xi32>, tensor<64x32xi32>) -> tensor<8x32xi32>
  %1 = hpc.add %0, %b : (tensor<8x32xi32>, tensor<32xi32>) -> tensor<8x32xi32>
  return %1 : tensor<8x32xi32>
}

// A bias that varies over the rows is not a vector over N.
// CHECK-LABEL: func @bias_not_a_vector
// CHECK-NEXT: hpc.matmul
// CHECK-NEXT: hpc.add
func.func @bias_not_a_vector(%x: tensor<2x8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<8x32xf32>) -> tensor<2x8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %1 = hpc.add %0, %b : (tensor<2x8x32xf32>, tensor<8x32xf32>) -> tensor<2x8x32xf32>
  return %1 : tensor<2x8x32xf32>
}

// A bias of higher rank broadcasts the sum to another type than the matmul's.
// CHECK-LABEL: func @bias_adds_dims
// CHECK-NEXT: hpc.matmul
// CHECK-NEXT: hpc.add
func.func @bias_adds_dims(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<1x1x32xf32>) -> tensor<1x8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.add %0, %b : (tensor<8x32xf32>, tensor<1x1x32xf32>) -> tensor<1x8x32xf32>
  return %1 : tensor<1x8x32xf32>
}

// A batched weight (one matrix per batch element) is no gemm.
// CHECK-LABEL: func @weight_rank_3
// CHECK-NEXT: hpc.matmul
// CHECK-NEXT: hpc.add
func.func @weight_rank_3(%x: tensor<2x8x64xf32>, %w: tensor<2x64x32xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %0 = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<2x64x32xf32>) -> tensor<2x8x32xf32>
  %1 = hpc.add %0, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %1 : tensor<2x8x32xf32>
}

// The gemm already applies an activation: the relu stays after it.
// CHECK-LABEL: func @activation_already_set
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} {activation = "tanh"}
// CHECK-NEXT: hpc.relu %[[G]]
func.func @activation_already_set(%a: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w {activation = "tanh"} : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = hpc.relu %0 : tensor<8x32xf32>
  return %1 : tensor<8x32xf32>
}

// The cast back is also returned (the pre-activation another op reads): the
// gelu stays; the gemm writes the f32 both read.
// CHECK-LABEL: func @bf16_cast_two_uses
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} : ({{.*}}) -> tensor<8x32xf32>
// CHECK-NEXT: %[[Y:.+]] = hpc.gelu %[[G]]
// CHECK-NEXT: return %[[G]], %[[Y]]
func.func @bf16_cast_two_uses(%a: tensor<8x64xbf16>, %w: tensor<64x32xbf16>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %0 = hpc.gemm %a, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %2 = hpc.gelu %1 : tensor<8x32xf32>
  return %1, %2 : tensor<8x32xf32>, tensor<8x32xf32>
}

// The same for a bias add: the matmul's cast back has two uses.
// CHECK-LABEL: func @bf16_matmul_cast_two_uses
// CHECK-NEXT: hpc.matmul {{.*}} -> tensor<8x32xf32>
// CHECK-NEXT: hpc.add
// CHECK-NOT: hpc.gemm
func.func @bf16_matmul_cast_two_uses(%x: tensor<8x64xbf16>, %w: tensor<64x32xbf16>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %0 = hpc.matmul %x, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %2 = hpc.add %1, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %1, %2 : tensor<8x32xf32>, tensor<8x32xf32>
}

// The bf16 product's result is read besides its cast back.
// CHECK-LABEL: func @bf16_product_two_uses
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} : (
// CHECK-NEXT: %[[Y:.+]] = hpc.cast %[[G]] {to = f32}
// CHECK-NEXT: hpc.relu %[[Y]]
func.func @bf16_product_two_uses(%a: tensor<8x64xbf16>, %w: tensor<64x32xbf16>) -> (tensor<8x32xbf16>, tensor<8x32xf32>) {
  %0 = hpc.gemm %a, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
  %2 = hpc.relu %1 : tensor<8x32xf32>
  return %0, %2 : tensor<8x32xbf16>, tensor<8x32xf32>
}

// The reshape between a bf16 product and its cast back is read by another
// op in bf16: the product keeps its bf16 result and the cast stays.
// CHECK-LABEL: func @bf16_reshape_two_uses
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} : ({{.*}}) -> tensor<8x32xbf16>
// CHECK-NEXT: %[[R:.+]] = hpc.reshape %[[G]]
// CHECK-NEXT: %[[Y:.+]] = hpc.cast %[[R]] {to = f32}
// CHECK-NEXT: return %[[R]], %[[Y]]
func.func @bf16_reshape_two_uses(%a: tensor<8x64xbf16>, %w: tensor<64x32xbf16>) -> (tensor<2x4x32xbf16>, tensor<2x4x32xf32>) {
  %0 = hpc.gemm %a, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
  %1 = hpc.reshape %0 {shape = array<i64: 2, 4, 32>} : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
  %2 = hpc.cast %1 {to = f32} : tensor<2x4x32xbf16> to tensor<2x4x32xf32>
  return %1, %2 : tensor<2x4x32xbf16>, tensor<2x4x32xf32>
}

// Only autocast's cast back from bf16 is looked through, not another cast.
// CHECK-LABEL: func @f16_cast
// CHECK-NEXT: hpc.gemm %{{.+}}, %{{.+}} : (
// CHECK-NEXT: hpc.cast
// CHECK-NEXT: hpc.relu
func.func @f16_cast(%a: tensor<8x64xf16>, %w: tensor<64x32xf16>) -> tensor<8x32xf32> {
  %0 = hpc.gemm %a, %w : (tensor<8x64xf16>, tensor<64x32xf16>) -> tensor<8x32xf16>
  %1 = hpc.cast %0 {to = f32} : tensor<8x32xf16> to tensor<8x32xf32>
  %2 = hpc.relu %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----

// The tied LM head: the transposed weight is read in place with trans_b.
// CHECK-LABEL: func @transposed_weight
// CHECK-NOT: hpc.transpose
// CHECK: %[[A:.+]] = hpc.reshape %arg0 {shape = array<i64: 16, 64>}
// CHECK: %[[G:.+]] = hpc.gemm %[[A]], %arg1 {{.*}}trans_b = true{{.*}} : (tensor<16x64xf32>, tensor<100x64xf32>) -> tensor<16x100xf32>
// CHECK: hpc.reshape %[[G]] {shape = array<i64: 2, 8, 100>}
func.func @transposed_weight(%x: tensor<2x8x64xf32>, %w: tensor<100x64xf32>) -> tensor<2x8x100xf32> {
  %t = hpc.transpose %w {perm = array<i64: 1, 0>} : (tensor<100x64xf32>) -> tensor<64x100xf32>
  %y = hpc.matmul %x, %t : (tensor<2x8x64xf32>, tensor<64x100xf32>) -> tensor<2x8x100xf32>
  return %y : tensor<2x8x100xf32>
}

// -----

// A transposed weight another op reads too stays for it; the product
// reads the weight in place all the same.
// CHECK-LABEL: func @transposed_weight_two_uses
// CHECK: %[[T:.+]] = hpc.transpose
// CHECK: hpc.gemm %arg0, %arg1 {{.*}}trans_b = true
// CHECK-NOT: hpc.matmul
// CHECK: return %{{.+}}, %[[T]]
func.func @transposed_weight_two_uses(%x: tensor<8x64xf32>, %w: tensor<100x64xf32>) -> (tensor<8x100xf32>, tensor<64x100xf32>) {
  %t = hpc.transpose %w {perm = array<i64: 1, 0>} : (tensor<100x64xf32>) -> tensor<64x100xf32>
  %y = hpc.matmul %x, %t : (tensor<8x64xf32>, tensor<64x100xf32>) -> tensor<8x100xf32>
  return %y, %t : tensor<8x100xf32>, tensor<64x100xf32>
}

// -----

// The weight gradients of an unfused QKV projection: three products read
// one transpose of their input (CSE); each is a gemm and the transpose goes.
// CHECK-LABEL: func @weight_gradients_shared_input
// CHECK-NOT: hpc.transpose
// CHECK-COUNT-2: hpc.gemm %{{.+}}, %{{.+}} {{.*}}trans_a = true
// CHECK-NOT: hpc.reduce_sum
func.func @weight_gradients_shared_input(%x: tensor<2x8x64xf32>, %dq: tensor<2x8x32xf32>, %dk: tensor<2x8x32xf32>)
    -> (tensor<1x64x32xf32>, tensor<1x64x32xf32>) {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x64xf32>) -> tensor<2x64x8xf32>
  %p = hpc.matmul %t, %dq : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  %p2 = hpc.matmul %t, %dk : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s2 = hpc.reduce_sum %p2 {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  return %s, %s2 : tensor<1x64x32xf32>, tensor<1x64x32xf32>
}

// -----

// A linear layer's weight gradient as the autodiff writes it: one gemm with
// trans_a over the 16 rows of the batch.
// CHECK-LABEL: func @weight_gradient
// CHECK-NOT: hpc.transpose
// CHECK-NOT: hpc.reduce_sum
// CHECK-DAG: %[[A:.+]] = hpc.reshape %arg0 {shape = array<i64: 16, 64>}
// CHECK-DAG: %[[D:.+]] = hpc.reshape %arg1 {shape = array<i64: 16, 32>}
// CHECK: %[[G:.+]] = hpc.gemm %[[A]], %[[D]] {{.*}}trans_a = true{{.*}} : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
// CHECK: hpc.reshape %[[G]] {shape = array<i64: 1, 64, 32>}
func.func @weight_gradient(%x: tensor<2x8x64xf32>, %dy: tensor<2x8x32xf32>) -> tensor<1x64x32xf32> {
  %t = hpc.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x8x64xf32>) -> tensor<2x64x8xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  return %s : tensor<1x64x32xf32>
}

// Two batch dimensions, summed without keepdims.
// CHECK-LABEL: func @weight_gradient_two_batch_dims
// CHECK: hpc.gemm %{{.+}}, %{{.+}} {{.*}}trans_a = true{{.*}} : (tensor<24x16xf32>, tensor<24x8xf32>) -> tensor<16x8xf32>
// CHECK-NOT: hpc.reduce_sum
func.func @weight_gradient_two_batch_dims(%x: tensor<2x3x4x16xf32>, %dy: tensor<2x3x4x8xf32>) -> tensor<16x8xf32> {
  %t = hpc.transpose %x {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x4x16xf32>) -> tensor<2x3x16x4xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x3x16x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x16x8xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3x16x8xf32>) -> tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}

// A sum over only some of the batch dimensions, a transpose that is not of
// the last two, or a product another op reads stay as they are.
// CHECK-LABEL: func @weight_gradient_not_matched
// CHECK-NOT: hpc.gemm
// CHECK: return
func.func @weight_gradient_not_matched(%x: tensor<2x3x4x16xf32>, %dy: tensor<2x3x4x8xf32>, %x3: tensor<2x8x64xf32>, %dy3: tensor<2x8x32xf32>)
    -> (tensor<1x3x16x8xf32>, tensor<1x64x32xf32>, tensor<2x64x32xf32>) {
  %t = hpc.transpose %x {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x4x16xf32>) -> tensor<2x3x16x4xf32>
  %p = hpc.matmul %t, %dy : (tensor<2x3x16x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x16x8xf32>
  %s = hpc.reduce_sum %p {axes = array<i64: 0>} : (tensor<2x3x16x8xf32>) -> tensor<1x3x16x8xf32>
  %t3 = hpc.transpose %x3 {perm = array<i64: 0, 2, 1>} : (tensor<2x8x64xf32>) -> tensor<2x64x8xf32>
  %p3 = hpc.matmul %t3, %dy3 : (tensor<2x64x8xf32>, tensor<2x8x32xf32>) -> tensor<2x64x32xf32>
  %s3 = hpc.reduce_sum %p3 {axes = array<i64: 0>} : (tensor<2x64x32xf32>) -> tensor<1x64x32xf32>
  return %s, %s3, %p3 : tensor<1x3x16x8xf32>, tensor<1x64x32xf32>, tensor<2x64x32xf32>
}

// A ResNet block's shortcut: relu(add(conv2, x)) is one conv with the
// residual x and the relu in its epilogue.
// CHECK-LABEL: func @conv_residual_relu
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x8x8xf32>, %[[W:.+]]: tensor<4x4x3x3xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[C:.+]] = hpc.conv %[[X]], %[[W]], %[[B]] residual(%[[X]]) {activation = "relu", {{.*}}} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @conv_residual_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x8x8xf32> {
  %0 = hpc.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %1 = hpc.add %0, %x : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %2 = hpc.relu %1 : tensor<1x4x8x8xf32>
  return %2 : tensor<1x4x8x8xf32>
}

// The residual computed after the conv (a downsampling shortcut): the conv
// moves to the add's place, where both are defined; the conv on the add's
// left is the one fused, the other one stays the residual.
// CHECK-LABEL: func @conv_residual_defined_later
// CHECK-NEXT: %[[D:.+]] = hpc.conv %{{.+}}, %{{.+}} {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK-NEXT: %[[C:.+]] = hpc.conv %{{.+}}, %{{.+}} residual(%[[D]]) {dilations
// CHECK-NEXT: return %[[C]]
func.func @conv_residual_defined_later(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %wd: tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = hpc.conv %x, %wd {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %2 = hpc.add %0, %1 : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %2 : tensor<1x4x8x8xf32>
}

// Not fused: a broadcast add (a per-channel bias is not a residual), an
// activated conv (relu(conv) + r is not relu(conv + r)), a conv result that
// another op reads too, and conv(x) + conv(x) of one value.
// CHECK-LABEL: func @conv_residual_not_fused
// CHECK-NOT: residual(
// CHECK: return
func.func @conv_residual_not_fused(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %c: tensor<1x4x1x1xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = hpc.add %0, %c : (tensor<1x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %2 = hpc.conv %x, %w {activation = "relu", strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %3 = hpc.add %2, %x : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %4 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %5 = hpc.add %4, %x : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %6 = hpc.sigmoid %4 : tensor<1x4x8x8xf32>
  %7 = hpc.add %5, %6 : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %8 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %9 = hpc.add %8, %8 : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %1, %3, %7, %9 : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>
}

// The transpose of a plain gemm's result (a tied LM head's weight gradient,
// through the reshapes autodiff puts around it) is the gemm of the swapped
// operands: (A^T D)^T = D^T A, no pass over the result.
// CHECK-LABEL: func @transposed_product
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x64xf32>, %[[D:.+]]: tensor<8x100xf32>)
// CHECK-NEXT: %[[X2:.+]] = hpc.reshape %[[X]]
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[D]], %[[X2]] {beta = 0.000000e+00 : f64, trans_a = true} : (tensor<8x100xf32>, tensor<8x64xf32>) -> tensor<100x64xf32>
// CHECK-NEXT: return %[[G]]
func.func @transposed_product(%x: tensor<2x4x64xf32>, %d: tensor<8x100xf32>) -> tensor<100x64xf32> {
  %x2 = hpc.reshape %x {shape = array<i64: 8, 64>} : (tensor<2x4x64xf32>) -> tensor<8x64xf32>
  %g = hpc.gemm %x2, %d {beta = 0.0 : f64, trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>) -> tensor<64x100xf32>
  %r = hpc.reshape %g {shape = array<i64: 1, 64, 100>} : (tensor<64x100xf32>) -> tensor<1x64x100xf32>
  %r2 = hpc.reshape %r {shape = array<i64: 64, 100>} : (tensor<1x64x100xf32>) -> tensor<64x100xf32>
  %t = hpc.transpose %r2 {perm = array<i64: 1, 0>} : (tensor<64x100xf32>) -> tensor<100x64xf32>
  return %t : tensor<100x64xf32>
}

// Two micro-batches' weight gradients summed (hpc-micro-batches): the later
// product adds the earlier as its c, where it is computed; the earlier one,
// made before the later term exists, stays plain.
// CHECK-LABEL: func @accumulated_gradient
// CHECK-SAME: (%[[X0:.+]]: tensor<8x64xf32>, %[[D0:.+]]: tensor<8x100xf32>, %[[X1:.+]]: tensor<8x64xf32>, %[[D1:.+]]: tensor<8x100xf32>)
// CHECK-NEXT: %[[G0:.+]] = hpc.gemm %[[X0]], %[[D0]] {beta = 0.000000e+00 : f64, trans_a = true}
// CHECK-NEXT: %[[S:.+]] = hpc.gemm %[[X1]], %[[D1]], %[[G0]] {trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
// CHECK-NEXT: return %[[S]]
func.func @accumulated_gradient(%x0: tensor<8x64xf32>, %d0: tensor<8x100xf32>, %x1: tensor<8x64xf32>, %d1: tensor<8x100xf32>) -> tensor<64x100xf32> {
  %g0 = hpc.gemm %x0, %d0 {beta = 0.0 : f64, trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>) -> tensor<64x100xf32>
  %g1 = hpc.gemm %x1, %d1 {beta = 0.0 : f64, trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>) -> tensor<64x100xf32>
  %r1 = hpc.reshape %g1 {shape = array<i64: 1, 64, 100>} : (tensor<64x100xf32>) -> tensor<1x64x100xf32>
  %r2 = hpc.reshape %r1 {shape = array<i64: 64, 100>} : (tensor<1x64x100xf32>) -> tensor<64x100xf32>
  %s = hpc.add %g0, %r2 : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
  return %s : tensor<64x100xf32>
}

// Neither rewrite: a bf16 product's f32 result plus an f32 sum (c has the
// operands' type), and a product another op reads too.
// CHECK-LABEL: func @product_not_fused
// CHECK-NEXT: %[[B:.+]] = hpc.gemm %{{.+}}, %{{.+}} {beta = 0.000000e+00 : f64, trans_a = true} : (tensor<8x64xbf16>, tensor<8x100xbf16>) -> tensor<64x100xf32>
// CHECK-NEXT: hpc.add %{{.+}}, %[[B]]
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %{{.+}}, %{{.+}} {beta = 0.000000e+00 : f64, trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>) -> tensor<64x100xf32>
// CHECK-NEXT: hpc.add %{{.+}}, %[[G]]
// CHECK-NEXT: hpc.transpose %[[G]]
func.func @product_not_fused(%xb: tensor<8x64xbf16>, %db: tensor<8x100xbf16>, %x: tensor<8x64xf32>, %d: tensor<8x100xf32>, %s: tensor<64x100xf32>) -> (tensor<64x100xf32>, tensor<64x100xf32>, tensor<100x64xf32>) {
  %b = hpc.gemm %xb, %db {beta = 0.0 : f64, trans_a = true} : (tensor<8x64xbf16>, tensor<8x100xbf16>) -> tensor<64x100xf32>
  %ab = hpc.add %s, %b : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
  %g = hpc.gemm %x, %d {beta = 0.0 : f64, trans_a = true} : (tensor<8x64xf32>, tensor<8x100xf32>) -> tensor<64x100xf32>
  %a = hpc.add %s, %g : (tensor<64x100xf32>, tensor<64x100xf32>) -> tensor<64x100xf32>
  %t = hpc.transpose %g {perm = array<i64: 1, 0>} : (tensor<64x100xf32>) -> tensor<100x64xf32>
  return %ab, %a, %t : tensor<64x100xf32>, tensor<64x100xf32>, tensor<100x64xf32>
}

// An embedding's gradient, rows scattered into zeros, added to a sum: the
// rows go into the sum (no zero fill, no add).
// CHECK-LABEL: func @embedding_gradient_sum
// CHECK-SAME: (%[[S:.+]]: tensor<16x4xf32>, %[[I:.+]]: tensor<6x4xi64>, %[[U:.+]]: tensor<6x4xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.scatter_elements %[[S]], %[[I]], %[[U]] {axis = 0 : i64, reduction = "add"}
// CHECK-NEXT: return %[[G]]
func.func @embedding_gradient_sum(%s: tensor<16x4xf32>, %i: tensor<6x4xi64>, %u: tensor<6x4xf32>) -> tensor<16x4xf32> {
  %z = hpc.constant dense<0.0> : tensor<16x4xf32>
  %g = hpc.scatter_elements %z, %i, %u {axis = 0 : i64, reduction = "add"} : (tensor<16x4xf32>, tensor<6x4xi64>, tensor<6x4xf32>) -> tensor<16x4xf32>
  %a = hpc.add %s, %g : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return %a : tensor<16x4xf32>
}

// A tied embedding's micro-batch: the running sum plus (the head's gemm plus
// the lookup's rows) is the head's gemm with c = the sum, then the rows
// scattered into it.
// CHECK-LABEL: func @tied_embedding_sum
// CHECK-SAME: (%[[SUM:.+]]: tensor<16x4xf32>, %[[H:.+]]: tensor<8x16xf32>, %[[D:.+]]: tensor<8x4xf32>, %[[I:.+]]: tensor<6x4xi64>, %[[U:.+]]: tensor<6x4xf32>)
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[H]], %[[D]], %[[SUM]] {trans_a = true}
// CHECK-NEXT: %[[R:.+]] = hpc.scatter_elements %[[G]], %[[I]], %[[U]] {axis = 0 : i64, reduction = "add"}
// CHECK-NEXT: return %[[R]]
func.func @tied_embedding_sum(%sum: tensor<16x4xf32>, %h: tensor<8x16xf32>, %d: tensor<8x4xf32>, %i: tensor<6x4xi64>, %u: tensor<6x4xf32>) -> tensor<16x4xf32> {
  %z = hpc.constant dense<0.0> : tensor<16x4xf32>
  %head = hpc.gemm %h, %d {beta = 0.0 : f64, trans_a = true} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %look = hpc.scatter_elements %z, %i, %u {axis = 0 : i64, reduction = "add"} : (tensor<16x4xf32>, tensor<6x4xi64>, tensor<6x4xf32>) -> tensor<16x4xf32>
  %part = hpc.add %head, %look : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  %a = hpc.add %sum, %part : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return %a : tensor<16x4xf32>
}

// Left alone: a scatter that takes the max, and a scatter-add into a value
// another op reads too.
// CHECK-LABEL: func @scatter_not_moved
// CHECK-NEXT: %[[M:.+]] = hpc.scatter_elements %{{.+}} {axis = 0 : i64, reduction = "max"}
// CHECK-NEXT: hpc.add %{{.+}}, %[[M]]
// CHECK-NEXT: %[[G:.+]] = hpc.scatter_elements %{{.+}} {axis = 0 : i64, reduction = "add"}
// CHECK-NEXT: hpc.add %{{.+}}, %[[G]]
func.func @scatter_not_moved(%s: tensor<16x4xf32>, %x: tensor<16x4xf32>, %i: tensor<6x4xi64>, %u: tensor<6x4xf32>) -> (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>) {
  %m = hpc.scatter_elements %x, %i, %u {axis = 0 : i64, reduction = "max"} : (tensor<16x4xf32>, tensor<6x4xi64>, tensor<6x4xf32>) -> tensor<16x4xf32>
  %a = hpc.add %s, %m : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  %g = hpc.scatter_elements %x, %i, %u {axis = 0 : i64, reduction = "add"} : (tensor<16x4xf32>, tensor<6x4xi64>, tensor<6x4xf32>) -> tensor<16x4xf32>
  %b = hpc.add %s, %g : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  return %a, %b, %x : tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
}
