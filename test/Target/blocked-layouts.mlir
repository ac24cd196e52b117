// RUN: hpc-opt %s --emit=llvm | FileCheck %s
// RUN: hpc-opt %s --emit=llvm --no-blocked-layouts | FileCheck %s --check-prefix=PLAIN

// hpc-compile plans blocked layouts for a small CNN: a stem conv+relu
// (fused) of the 3-channel image, max_pool, conv+relu, global_avg_pool.
// Tensors: 0 x (input, plain: the stem conv reads it so), 1-3 the weights,
// then 4 conv1, 5 max_pool, 6 conv2 blocked and 7 the pooled output plain.
// The arena does not change (16 channels: blocked tensors have the plain
// bytes). --no-blocked-layouts leaves every tensor plain.
// CHECK: @hpc_manifest = constant
// CHECK-SAME: \22arena_bytes\22:5120,
// CHECK-SAME: \22tensors\22:[{\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22input\22,\22shape\22:[1,3,8,8]},
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:1792,\22region\22:\22weights\22,\22shape\22:[16,16,1,1]},
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[1,16,8,8]},
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:4096,\22region\22:\22arena\22,\22shape\22:[1,16,4,4]},
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22layout\22:\22blocked\22,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[1,16,4,4]},
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:1024,\22region\22:\22arena\22,\22shape\22:[1,16,1,1]}],

// PLAIN: @hpc_manifest = constant
// PLAIN-SAME: \22arena_bytes\22:5120,
// PLAIN-NOT: \22layout\22
// PLAIN: define void @hpc_program_run

func.func @main(%x: tensor<1x3x8x8xf32> {hpc.name = "x"}) -> (tensor<1x16x1x1xf32> {hpc.name = "y"}) {
  %w1 = hpc.weight "conv1.w" : tensor<16x3x3x3xf32> = dense<0.01>
  %b1 = hpc.weight "conv1.b" : tensor<16xf32> = dense<0.1>
  %w2 = hpc.weight "conv2.w" : tensor<16x16x1x1xf32> = dense<0.02>
  %0 = hpc.conv %x, %w1, %b1 {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
  %1 = hpc.relu %0 : tensor<1x16x8x8xf32>
  %2 = hpc.max_pool %1 {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x16x8x8xf32>) -> tensor<1x16x4x4xf32>
  %3 = hpc.conv %2, %w2 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %4 = hpc.relu %3 : tensor<1x16x4x4xf32>
  %5 = hpc.global_avg_pool %4 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %5 : tensor<1x16x1x1xf32>
}
