// RUN: hpc-opt %s -split-input-file -verify-diagnostics

// One case per verifier and shape-inference error of the hpc ops.

//===----------------------------------------------------------------------===//
// Constants and weights
//===----------------------------------------------------------------------===//

func.func @constant_type_mismatch() -> tensor<3xi64> {
  // expected-error @+1 {{'hpc.constant' op value type 'tensor<2xi64>' does not match result type 'tensor<3xi64>'}}
  %0 = "hpc.constant"() <{value = dense<1> : tensor<2xi64>}> : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @constant_not_a_tensor() {
  // expected-error @+1 {{'hpc.constant' op result #0 must be ranked tensor of any type values, but got 'vector<2xi64>'}}
  %0 = hpc.constant dense<1> : vector<2xi64>
  return
}

// -----

func.func @weight_empty_name() -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.weight' op needs a non-empty name}}
  %0 = hpc.weight "" : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @weight_value_type_mismatch() -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.weight' op value type 'tensor<3xf32>' does not match result type 'tensor<2xf32>'}}
  %0 = "hpc.weight"() <{name = "w", value = dense<1.0> : tensor<3xf32>}> : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @gelu_approximate(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.gelu' op approximate must be "none" or "tanh", got "fast"}}
  %0 = hpc.gelu %x {approximate = "fast"} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gelu_grad_approximate(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.gelu_grad' op approximate must be "none" or "tanh", got "fast"}}
  %0 = hpc.gelu_grad %x, %x {approximate = "fast"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gelu_grad_types(%x: tensor<2xf32>, %dy: tensor<3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{grad_output type 'tensor<3xf32>' is not the input type 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gelu_grad %x, %dy : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<2x3xf32>, %s: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{scale type 'tensor<2xf32>' is not the input's normalized dims of 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.layer_norm_grad %x, %s, %x : (tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @exp_of_integers(%x: tensor<2xi64>) -> tensor<2xi64> {
  // expected-error @+1 {{'hpc.exp' op operand #0 must be ranked tensor of floating-point values}}
  %0 = hpc.exp %x : tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @broadcast_failure(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{shapes [2,3] and [4,3] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.add %a, %b : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<2xf32>, %b: tensor<2xi64>) {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.mul %a, %b : (tensor<2xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @inferred_type_mismatch(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'hpc.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @compare_result_is_i1(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+2 {{'hpc.less' op inferred type(s) 'tensor<2xi1>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.less %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @where_value_types(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+2 {{value element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.where %c, %a, %b : (tensor<2xi1>, tensor<2xf32>, tensor<2xf16>) -> tensor<2xf32>
  return
}

// -----

func.func @where_broadcast(%c: tensor<3xi1>, %a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+2 {{shapes [3], [2] and [2] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.where %c, %a, %b : (tensor<3xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

func.func @matmul_contracting(%a: tensor<4x8xf32>, %b: tensor<7x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: [4,8] x [7,5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.matmul %a, %b : (tensor<4x8xf32>, tensor<7x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x5xf32>) {
  // expected-error @+2 {{batch dimensions do not broadcast: [2,4,8] x [3,8,5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x5xf32>) -> tensor<3x4x5xf32>
  return
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{matmul operands must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.matmul %a, %b : (tensor<f32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @gemm_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{gemm operands must be 2-D}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gemm %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_contracting(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gemm %a, %b {trans_a = true} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @gemm_c(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x1x5xf32>) {
  // expected-error @+2 {{c of shape [3,1,5] does not broadcast to [3,5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x1x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_activation(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'hpc.gemm' op activation must be one of "none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu", got "leaky_relu"}}
  %0 = hpc.gemm %a, %b {activation = "leaky_relu"} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @conv_activation(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) {
  // expected-error @+1 {{'hpc.conv' op activation must be one of "none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu", got "gelu_erf"}}
  %0 = hpc.conv %x, %w {activation = "gelu_erf", strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

func.func @conv_channels_group(%x: tensor<1x6x8x8xf32>, %w: tensor<16x2x1x1xf32>) {
  // expected-error @+2 {{input has 6 channels but weight expects 2 x group 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x6x8x8xf32>, tensor<16x2x1x1xf32>) -> tensor<1x16x8x8xf32>
  return
}

// -----

func.func @conv_output_channels_group(%x: tensor<1x8x8x8xf32>, %w: tensor<6x2x1x1xf32>) {
  // expected-error @+2 {{output channels 6 are not divisible by group 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x8x8x8xf32>, tensor<6x2x1x1xf32>) -> tensor<1x6x8x8xf32>
  return
}

// -----

func.func @conv_group_zero(%x: tensor<1x8x8x8xf32>, %w: tensor<8x8x1x1xf32>) {
  // expected-error @+2 {{group must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 0 : i64} : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @conv_input_rank(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) {
  // expected-error @+2 {{convolution needs an [N, C, D1...] input, got rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64>, pads = array<i64>, dilations = array<i64>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @conv_weight_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{weight rank 3 differs from input rank 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_element_types(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) {
  // expected-error @+2 {{input and weight element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{bias must be 1-D of size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_strides_count(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{strides and dilations need 2 entries (one per spatial dimension)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_pads_count(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{pads need 4 entries (begins, then ends), got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_stride_zero(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{kernel sizes, strides and dilations must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 0, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_negative_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{pads must not be negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_kernel_too_big(%x: tensor<1x3x2x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{kernel does not fit spatial dimension 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x2x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x6xf32>
  return
}

// -----

func.func @conv_dynamic_kernel(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x?x3xf32>) {
  // expected-error @+2 {{kernel sizes must be static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x?x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x4x5x5xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+2 {{input has 4 channels but weight expects 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x4x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{output_padding needs 2 entries}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @conv_transpose_output_size(%x: tensor<1x4x1x5xf32>, %w: tensor<4x2x1x1xf32>) {
  // expected-error @+2 {{output size of spatial dimension 0 is not positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : (tensor<1x4x1x5xf32>, tensor<4x2x1x1xf32>) -> tensor<1x2x1x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pooling and resizing
//===----------------------------------------------------------------------===//

func.func @pool_window_too_big(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+2 {{pooling window 3 does not fit spatial dimension 0 of size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<4x4xf32>) {
  // expected-error @+2 {{pooling needs an [N, C, D1...] input, got rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.avg_pool %x {kernel_shape = array<i64>, strides = array<i64>, pads = array<i64>, dilations = array<i64>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @pool_kernel_count(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{expected 2 kernel dimensions, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.max_pool %x {kernel_shape = array<i64: 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @global_pool_rank(%x: tensor<4x4xf32>) {
  // expected-error @+2 {{global pooling needs an [N, C, D1...] input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.global_avg_pool %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @resize_mode(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{resize mode must be "nearest" or "linear", got "cubic"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.resize %x {sizes = array<i64: 1, 1, 8, 8>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>, mode = "cubic"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32>
  return
}

// -----

func.func @resize_coordinate_mode(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{unsupported coordinate_transformation_mode "tf_crop_and_resize"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.resize %x {sizes = array<i64: 1, 1, 8, 8>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>, coordinate_transformation_mode = "tf_crop_and_resize"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32>
  return
}

// -----

func.func @resize_nearest_mode(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{unsupported nearest_mode "round"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.resize %x {sizes = array<i64: 1, 1, 8, 8>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>, nearest_mode = "round"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32>
  return
}

// -----

func.func @resize_entries(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{sizes and scales need one entry per dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.resize %x {sizes = array<i64: 8, 8>, scales = array<f64: 2.0, 2.0>} : (tensor<1x1x4x4xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @resize_positive(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{resize sizes and scales must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.resize %x {sizes = array<i64: 1, 1, 0, 8>, scales = array<f64: 1.0, 1.0, 0.0, 2.0>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x0x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = hpc.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = hpc.log_softmax %x {axis = -3 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_missing_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'hpc.softmax' op requires attribute 'axis'}}
  %0 = hpc.softmax %x : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x7x64xf32>, %s: tensor<32xf32>) {
  // expected-error @+2 {{scale of shape [32] does not broadcast to the normalized shape [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.layer_norm %x, %s : (tensor<2x7x64xf32>, tensor<32xf32>) -> tensor<2x7x64xf32>
  return
}

// -----

func.func @layer_norm_bias_type(%x: tensor<2x64xf32>, %s: tensor<64xf32>, %b: tensor<64xf16>) {
  // expected-error @+2 {{bias element type differs from the input's}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.layer_norm %x, %s, %b : (tensor<2x64xf32>, tensor<64xf32>, tensor<64xf16>) -> tensor<2x64xf32>
  return
}

// -----

func.func @rms_norm_scale_rank(%x: tensor<2x64xf32>, %s: tensor<2x64xf32>) {
  // expected-error @+2 {{scale of shape [2,64] does not broadcast to the normalized shape [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.rms_norm %x, %s : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @batch_norm_params(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) {
  // expected-error @+2 {{scale, bias, mean and variance must be 1-D of size 3, got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.batch_norm %x, %c, %c, %c, %d : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @batch_norm_rank(%x: tensor<3xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{batch_norm needs an [N, C, ...] input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.batch_norm %x, %c, %c, %c, %c : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @reduce_axis_range(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduction axis 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.reduce_sum %x {axes = array<i64: 3>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_axes_sorted(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reduction axes must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.reduce_max %x {axes = array<i64: 2, 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  return
}

// -----

func.func @argmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.argmax %x {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

func.func @gather_axis(%x: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gather %x, %i {axis = -3 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_scalar_input(%x: tensor<f32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{gather input must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gather %x, %i {axis = 0 : i64} : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_elements_rank(%x: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{input and indices ranks differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.gather_elements %x, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @scatter_elements_shapes(%x: tensor<10x4xf32>, %i: tensor<10x2xi64>, %u: tensor<10x3xf32>) {
  // expected-error @+2 {{indices and updates must have one shape and the input's rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.scatter_elements %x, %i, %u {axis = 1 : i64} : (tensor<10x4xf32>, tensor<10x2xi64>, tensor<10x3xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @scatter_elements_types(%x: tensor<10x4xf32>, %i: tensor<10x2xi64>, %u: tensor<10x2xf16>) {
  // expected-error @+2 {{input and updates element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.scatter_elements %x, %i, %u {axis = 1 : i64} : (tensor<10x4xf32>, tensor<10x2xi64>, tensor<10x2xf16>) -> tensor<10x4xf32>
  return
}

// -----

func.func @scatter_elements_reduction(%x: tensor<10x4xf32>, %i: tensor<10x2xi64>, %u: tensor<10x2xf32>) {
  // expected-error @+2 {{unknown reduction "sub"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "sub"} : (tensor<10x4xf32>, tensor<10x2xi64>, tensor<10x2xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @one_hot_values(%i: tensor<5xi64>, %v: tensor<3xf32>) {
  // expected-error @+2 {{values must be [off_value, on_value]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.one_hot %i, %v {depth = 8 : i64} : (tensor<5xi64>, tensor<3xf32>) -> tensor<5x8xf32>
  return
}

// -----

func.func @one_hot_depth(%i: tensor<5xi64>, %v: tensor<2xf32>) {
  // expected-error @+2 {{depth must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.one_hot %i, %v {depth = 0 : i64} : (tensor<5xi64>, tensor<2xf32>) -> tensor<5x0xf32>
  return
}

// -----

func.func @top_k_too_large(%x: tensor<3x10xf32>) {
  // expected-error @+2 {{k = 11 does not fit dimension of size 10}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = hpc.top_k %x {k = 11 : i64} : (tensor<3x10xf32>) -> (tensor<3x11xf32>, tensor<3x11xi64>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @reshape_element_count(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{cannot reshape [2,3,4] (24 elements) to [5,5] (25 elements)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.reshape %x {shape = array<i64: 5, 5>} : (tensor<2x3x4xf32>) -> tensor<5x5xf32>
  return
}

// -----

func.func @reshape_negative(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{reshape target [-1,4] must be fully static and non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.reshape %x {shape = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm [0,0,1] is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.transpose %x {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm has 2 entries for a rank-3 input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<10xf32>) {
  // expected-error @+2 {{slice bounds [0, 11) step 1 are not normalized for dimension 0 of size 10}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.slice %x {starts = array<i64: 0>, ends = array<i64: 11>, steps = array<i64: 1>} : (tensor<10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @slice_negative_step_bounds(%x: tensor<10xf32>) {
  // expected-error @+2 {{slice bounds [10, -1) step -1 are not normalized for dimension 0 of size 10}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.slice %x {starts = array<i64: 10>, ends = array<i64: -1>, steps = array<i64: -1>} : (tensor<10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @slice_step_zero(%x: tensor<10xf32>) {
  // expected-error @+2 {{slice step must not be 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.slice %x {starts = array<i64: 0>, ends = array<i64: 10>, steps = array<i64: 0>} : (tensor<10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<10x2xf32>) {
  // expected-error @+2 {{starts, ends and steps need one entry per dimension (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.slice %x {starts = array<i64: 0>, ends = array<i64: 10>, steps = array<i64: 1>} : (tensor<10x2xf32>) -> tensor<10x2xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{concat needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.concat {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_outside_axis(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{concat inputs [2,3] and [4,5] differ outside axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{concat inputs differ in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<6x4xf32>) {
  // expected-error @+2 {{split sizes add up to 5 but the dimension has size 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = hpc.split %x {axis = 0 : i64, sizes = array<i64: 2, 3>} : (tensor<6x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @split_negative(%x: tensor<6x4xf32>) {
  // expected-error @+2 {{split sizes must not be negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = hpc.split %x {axis = 0 : i64, sizes = array<i64: 7, -1>} : (tensor<6x4xf32>) -> (tensor<7x4xf32>, tensor<1x4xf32>)
  return
}

// -----

func.func @expand_incompatible(%x: tensor<3x2xf32>) {
  // expected-error @+2 {{cannot expand [3,2] to [3,4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.expand %x {shape = array<i64: 3, 4>} : (tensor<3x2xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @squeeze_non_unit(%x: tensor<1x3xf32>) {
  // expected-error @+2 {{cannot squeeze dimension 1 of size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.squeeze %x {axes = array<i64: 1>} : (tensor<1x3xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @squeeze_axis(%x: tensor<1x3xf32>) {
  // expected-error @+2 {{squeeze axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.squeeze %x {axes = array<i64: 2>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @unsqueeze_duplicate_axes(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{unsqueeze axes [0,0] are not distinct result dimensions of rank 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.unsqueeze %x {axes = array<i64: 0, 0>} : (tensor<3x4xf32>) -> tensor<1x1x3x4xf32>
  return
}

// -----

func.func @unsqueeze_negative_axis(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{unsqueeze axes [-1] are not distinct result dimensions of rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.unsqueeze %x {axes = array<i64: -1>} : (tensor<3x4xf32>) -> tensor<3x4x1xf32>
  return
}

// -----

func.func @pad_entries(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{pads need 4 entries, got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.pad %x {pads = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{unknown pad mode "wrap"}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.pad %x {pads = array<i64: 0, 0, 0, 0>, mode = "wrap"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @pad_crop(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{pads crop dimension 0 below zero}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.pad %x {pads = array<i64: -2, 0, -1, 0>} : (tensor<2x3xf32>) -> tensor<0x3xf32>
  return
}

// -----

func.func @tile_repeats(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{repeats need one entry per dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.tile %x {repeats = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @tile_negative(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{repeats must not be negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.tile %x {repeats = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Training state, updates and backward ops (HPCTrainOps.td)
//===----------------------------------------------------------------------===//

func.func @variable_role() -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.variable' op role must be "param", "buffer", "optimizer", "rng" or "error_feedback", got "weights"}}
  %0 = hpc.variable "bn.running_mean" {role = "weights"} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @variable_empty_name() -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.variable' op needs a non-empty name}}
  %0 = hpc.variable "" : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @variable_value_type_mismatch() -> tensor<2xf32> {
  // expected-error @+1 {{'hpc.variable' op value type 'tensor<3xf32>' does not match result type 'tensor<2xf32>'}}
  %0 = "hpc.variable"() <{name = "w", value = dense<1.0> : tensor<3xf32>}> : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @sgd_momentum_without_buffer(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'hpc.sgd_update' op momentum 9.000000e-01 needs a momentum buffer}}
  hpc.sgd_update %p, %g, %lr {momentum = 0.9} : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @sgd_clip_of_one(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'hpc.sgd_update' op clip takes the gradient norm and the max norm, got 1 operand}}
  hpc.sgd_update %p, %g, %lr clip(%lr : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @adamw_clip_of_three(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'hpc.adamw_update' op clip takes the gradient norm and the max norm, got 3 operands}}
  hpc.adamw_update %p, %g, %p, %p, %lr, %step clip(%lr, %lr, %lr : tensor<f32>, tensor<f32>, tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  return
}

// -----

func.func @sgd_nesterov_without_momentum(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'hpc.sgd_update' op nesterov needs a non-zero momentum}}
  hpc.sgd_update %p, %g, %lr {nesterov = true} : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @sgd_gradient_type(%p: tensor<3xf32>, %g: tensor<3xf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'hpc.sgd_update' op gradient type 'tensor<3xf16>' does not match the parameter type 'tensor<3xf32>'}}
  hpc.sgd_update %p, %g, %lr : tensor<3xf32>, tensor<3xf16>, tensor<f32>
  return
}

// -----

func.func @sgd_buffer_type(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'hpc.sgd_update' op momentum buffer type 'tensor<4xf32>' does not match the parameter type 'tensor<3xf32>'}}
  hpc.sgd_update %p, %g, %lr, %b {momentum = 0.9} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<4xf32>
  return
}

// -----

func.func @sgd_lr_not_scalar(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<1xf32>) {
  // expected-error @+1 {{'hpc.sgd_update' op operand #2 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  hpc.sgd_update %p, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
  return
}

// -----

func.func @adamw_betas(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'hpc.adamw_update' op betas must be in [0, 1), got 9.000000e-01, 1.000000e+00}}
  hpc.adamw_update %p, %p, %p, %p, %lr, %step {beta2 = 1.0} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  return
}

// -----

func.func @adamw_eps(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'hpc.adamw_update' op eps must not be negative}}
  hpc.adamw_update %p, %p, %p, %p, %lr, %step {eps = -1.0e-8} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  return
}

// -----

func.func @adamw_exp_avg_type(%p: tensor<3xf32>, %m: tensor<3xbf16>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'hpc.adamw_update' op exp_avg type 'tensor<3xbf16>' does not match the parameter type 'tensor<3xf32>'}}
  hpc.adamw_update %p, %p, %m, %p, %lr, %step : tensor<3xf32>, tensor<3xf32>, tensor<3xbf16>, tensor<3xf32>, tensor<f32>, tensor<i64>
  return
}

// -----

func.func @adamw_exp_avg_sq_type(%p: tensor<3xf32>, %v: tensor<1x3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'hpc.adamw_update' op exp_avg_sq type 'tensor<1x3xf32>' does not match the parameter type 'tensor<3xf32>'}}
  hpc.adamw_update %p, %p, %p, %v, %lr, %step : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3xf32>, tensor<f32>, tensor<i64>
  return
}

// -----

func.func @adamw_step_type(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  // expected-error @+1 {{'hpc.adamw_update' op operand #5 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  hpc.adamw_update %p, %p, %p, %p, %lr, %step : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i32>
  return
}

// -----

func.func @conv_weight_grad_rank(%x: tensor<1x4x6x6xf32>, %dy: tensor<1x6x4xf32>) {
  // expected-error @+2 {{input and grad_output must be [N, C, D...] and [N, M, O...] of one rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<1x6x4xf32>) -> tensor<6x4x3x3xf32>
  return
}

// -----

func.func @conv_weight_grad_kernel_count(%x: tensor<1x4x6x6xf32>, %dy: tensor<1x6x4x4xf32>) {
  // expected-error @+2 {{kernel_shape needs one entry per spatial dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<1x6x4x4xf32>) -> tensor<6x4x3xf32>
  return
}

// -----

func.func @conv_weight_grad_channels_group(%x: tensor<1x4x6x6xf32>, %dy: tensor<1x6x4x4xf32>) {
  // expected-error @+2 {{channels 4 and 6 must be divisible by group 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<1x4x6x6xf32>, tensor<1x6x4x4xf32>) -> tensor<6x1x3x3xf32>
  return
}

// -----

func.func @conv_weight_grad_batch(%x: tensor<2x4x6x6xf32>, %dy: tensor<1x6x4x4xf32>) {
  // expected-error @+2 {{input and grad_output have different batch sizes}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x4x6x6xf32>, tensor<1x6x4x4xf32>) -> tensor<6x4x3x3xf32>
  return
}

// -----

func.func @conv_weight_grad_spatial(%x: tensor<1x4x6x6xf32>, %dy: tensor<1x6x4x5xf32>) {
  // expected-error @+2 {{grad_output spatial dimension 1 is 5 but the convolution gives 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>, tensor<1x6x4x5xf32>) -> tensor<6x4x3x3xf32>
  return
}

// -----

func.func @conv_weight_grad_result_type(%x: tensor<1x4x6x6xf32>, %dy: tensor<1x6x4x4xf32>) {
  // expected-error @+2 {{'hpc.conv_weight_grad' op inferred type(s) 'tensor<6x2x3x3xf32>' are incompatible with return type(s) of operation 'tensor<6x4x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x6x6xf32>, tensor<1x6x4x4xf32>) -> tensor<6x4x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_type(%x: tensor<1x3x5x5xf32>, %dy: tensor<1x3x2x2xf32>) {
  // expected-error @+2 {{grad_output type 'tensor<1x3x2x2xf32>' is not the pooling's result type 'tensor<1x3x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.max_pool_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x5x5xf32>, tensor<1x3x2x2xf32>) -> tensor<1x3x5x5xf32>
  return
}

// -----

func.func @avg_pool_grad_element_type(%x: tensor<1x3x5x5xf32>, %dy: tensor<1x3x3x3xf16>) {
  // expected-error @+2 {{grad_output type 'tensor<1x3x3x3xf16>' is not the pooling's result type 'tensor<1x3x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.avg_pool_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x5x5xf32>, tensor<1x3x3x3xf16>) -> tensor<1x3x5x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

func.func @moe_route_top_k_above_experts(%choices: tensor<6x3xi64>) {
  // expected-error @+2 {{top-k of 3 does not fit 2 experts}}
  // expected-error @+1 {{failed to infer returned types}}
  %slots, %load = hpc.moe_route %choices {num_experts = 2 : i64, capacity = 3 : i64} : (tensor<6x3xi64>) -> (tensor<6x3xi64>, tensor<2xi64>)
  return
}

// -----

func.func @moe_route_no_capacity(%choices: tensor<6x2xi64>) {
  // expected-error @+2 {{num_experts (4) and capacity (0) must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %slots, %load = hpc.moe_route %choices {num_experts = 4 : i64, capacity = 0 : i64} : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<4xi64>)
  return
}

// -----

func.func @moe_dispatch_tokens_mismatch(%x: tensor<5x4xf32>, %slots: tensor<6x2xi64>) {
  // expected-error @+2 {{input [5,4] does not match slots [6,2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.moe_dispatch %x, %slots {num_experts = 4 : i64, capacity = 3 : i64} : (tensor<5x4xf32>, tensor<6x2xi64>) -> tensor<4x3x4xf32>
  return
}

// -----

func.func @moe_gather_not_a_buffer(%buffer: tensor<12x4xf32>, %slots: tensor<6x2xi64>) {
  // expected-error @+2 {{buffer must be [experts, capacity, hidden], got rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = hpc.moe_gather %buffer, %slots : (tensor<12x4xf32>, tensor<6x2xi64>) -> tensor<6x2x4xf32>
  return
}
