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
