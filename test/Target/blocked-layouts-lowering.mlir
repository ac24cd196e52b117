// RUN: hpc-opt %s --hpc-lower-to-runtime --split-input-file --verify-diagnostics | FileCheck %s

// A result whose producer carries hpc.blocked gets "layout": "blocked" in
// the manifest; the pool's result and the input stay plain (no key). The
// conv is a stem (3 input channels): a plain input into a blocked result.
// CHECK-LABEL: module
// CHECK: llvm.mlir.global external constant @hpc_manifest(
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22input\22,\22shape\22:[1,3,2,2]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[1,16,2,2]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:256,\22region\22:\22arena\22,\22shape\22:[1,16,1,1]}
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x16x1x1xf32> {
  %w = hpc.weight "w" : tensor<16x3x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  %1 = hpc.global_avg_pool %0 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %1 : tensor<1x16x1x1xf32>
}

// -----

// A stem conv into a blocked chain: the second conv reads and writes
// blocked.
// CHECK-LABEL: module
// CHECK: llvm.mlir.global external constant @hpc_manifest(
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[1,16,2,2]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:256,\22region\22:\22arena\22,\22shape\22:[1,16,2,2]}
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x16x1x1xf32> {
  %w0 = hpc.weight "w0" : tensor<16x3x1x1xf32> = dense<1.0>
  %w = hpc.weight "w" : tensor<16x16x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  %1 = hpc.conv %0, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x2x2xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x2x2xf32>
  %2 = hpc.global_avg_pool %1 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %2 : tensor<1x16x1x1xf32>
}

// -----

// A plain 16-channel input (not a stem) into a blocked result: oneDNN has
// no direct convolution for the mix.
func.func @main(%x: tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32> {
  %w = hpc.weight "w" : tensor<16x16x1x1xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.conv' op cannot read its input and write its result in these layouts}}
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x2x2xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x2x2xf32>
  %1 = hpc.global_avg_pool %0 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %1 : tensor<1x16x1x1xf32>
}

// -----

// A blocked input into a plain result is the other mix.
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x16x2x2xf32> {
  %w0 = hpc.weight "w0" : tensor<16x3x1x1xf32> = dense<1.0>
  %w = hpc.weight "w" : tensor<16x16x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  // expected-error @+1 {{'hpc.conv' op cannot read its input and write its result in these layouts}}
  %1 = hpc.conv %0, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x2x2xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x2x2xf32>
  return %1 : tensor<1x16x2x2xf32>
}

// -----

// 8 channels: no blocked layout has the plain bytes.
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x8x1x1xf32> {
  %w = hpc.weight "w" : tensor<8x3x1x1xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.conv' op cannot write its result in the blocked layout (hpc.blocked)}}
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<8x3x1x1xf32>) -> tensor<1x8x2x2xf32>
  %1 = hpc.global_avg_pool %0 : (tensor<1x8x2x2xf32>) -> tensor<1x8x1x1xf32>
  return %1 : tensor<1x8x1x1xf32>
}

// -----

// A view would give the blocked bytes another shape.
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x64xf32> {
  %w = hpc.weight "w" : tensor<16x3x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  // expected-error @+1 {{'hpc.reshape' op cannot read operand 0 in the blocked layout}}
  %1 = hpc.reshape %0 {shape = array<i64: 1, 64>} : (tensor<1x16x2x2xf32>) -> tensor<1x64xf32>
  return %1 : tensor<1x64xf32>
}

// -----

// Graph outputs are plain.
func.func @main(%x: tensor<1x3x2x2xf32>) -> tensor<1x16x2x2xf32> {
  %w = hpc.weight "w" : tensor<16x3x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  // expected-error @+1 {{'func.return' op cannot read operand 0 in the blocked layout}}
  return %0 : tensor<1x16x2x2xf32>
}

// -----

// An add reads and writes one layout.
func.func @main(%x: tensor<1x3x2x2xf32>, %y: tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32> {
  %w = hpc.weight "w" : tensor<16x3x1x1xf32> = dense<1.0>
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x2x2xf32>
  // expected-error @+1 {{'hpc.add' op must read and write one layout (its operands and result all blocked or all plain)}}
  %1 = hpc.add %0, %y : (tensor<1x16x2x2xf32>, tensor<1x16x2x2xf32>) -> tensor<1x16x2x2xf32>
  %2 = hpc.global_avg_pool %1 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %2 : tensor<1x16x1x1xf32>
}

// -----

// A conv reads its residual in its result's layout.
func.func @main(%x: tensor<1x3x2x2xf32>, %r: tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32> {
  %w = hpc.weight "w" : tensor<16x3x1x1xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.conv' op must read its residual in its result's layout}}
  %0 = hpc.conv %x, %w residual(%r) {dilations = array<i64: 1, 1>, hpc.blocked, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x2x2xf32>, tensor<16x3x1x1xf32>, tensor<1x16x2x2xf32>) -> tensor<1x16x2x2xf32>
  %1 = hpc.global_avg_pool %0 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %1 : tensor<1x16x1x1xf32>
}
