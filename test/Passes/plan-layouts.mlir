// RUN: hpc-opt %s --split-input-file --hpc-plan-layouts | FileCheck %s

// A conv reads and writes one layout, except that a stem conv (a plain
// input of at most 4 channels) may write a blocked result; graph inputs and
// outputs are plain. So a blocked chain starts at a stem conv and ends in a
// reader that writes plain (global_avg_pool).

// stem conv -> relu -> conv -> global_avg_pool: every result but the
// pool's is blocked.
// CHECK-LABEL: func @chain
// CHECK-NEXT: %[[C:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: %[[R:.+]] = hpc.relu %[[C]] {hpc.blocked}
// CHECK-NEXT: %[[D:.+]] = hpc.conv %[[R]], {{.*}}hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[D]] :
// CHECK-NEXT: return
func.func @chain(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.relu %0 : tensor<1x16x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// The same chain with the last conv's result returned: that conv writes
// plain, so it reads plain, and so on back to the stem conv: nothing is
// blocked.
// CHECK-LABEL: func @chain_returned
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @chain_returned(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.relu %0 : tensor<1x16x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  return %2 : tensor<1x16x4x4xf32>
}

// A conv of a plain 16-channel input (a graph input, not a stem) writes
// plain, and so does the chain after it.
// CHECK-LABEL: func @no_stem
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @no_stem(%x: tensor<1x16x4x4xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.relu %0 : tensor<1x16x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// A residual block: the skip value %a is read by a conv and the add, both
// readers of blocked tensors, so everything up to the pool is blocked.
// CHECK-LABEL: func @residual
// CHECK-NEXT: %[[A:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: %[[B:.+]] = hpc.conv %[[A]], {{.*}}hpc.blocked
// CHECK-NEXT: %[[S:.+]] = hpc.add %[[B]], %[[A]] {hpc.blocked}
// CHECK-NEXT: %[[R:.+]] = hpc.relu %[[S]] {hpc.blocked}
// CHECK-NEXT: %[[C:.+]] = hpc.conv %[[R]], {{.*}}hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[C]] :
// CHECK-NEXT: return
func.func @residual(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %a = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %b = hpc.conv %a, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %s = hpc.add %b, %a : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %r = hpc.relu %s : tensor<1x16x4x4xf32>
  %c = hpc.conv %r, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %p = hpc.global_avg_pool %c : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %p : tensor<1x16x1x1xf32>
}

// A conv whose result is returned, even if a conv reads it too, is plain.
// CHECK-LABEL: func @returned
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @returned(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.conv %0, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  return %0, %1 : tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>
}

// A reshape (a view) reads the plain layout: the relu before it is plain,
// and with it the conv it reads.
// CHECK-LABEL: func @reshape_reader
// CHECK-NOT: hpc.blocked
// CHECK: hpc.gemm
func.func @reshape_reader(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %fc: tensor<256x10xf32>) -> tensor<1x10xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.relu %0 : tensor<1x16x4x4xf32>
  %2 = hpc.reshape %1 {shape = array<i64: 1, 256>} : (tensor<1x16x4x4xf32>) -> tensor<1x256xf32>
  %3 = hpc.gemm %2, %fc : (tensor<1x256xf32>, tensor<256x10xf32>) -> tensor<1x10xf32>
  return %3 : tensor<1x10xf32>
}

// 8 channels are not a multiple of 16: plain.
// CHECK-LABEL: func @eight_channels
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @eight_channels(%x: tensor<1x3x4x4xf32>, %w0: tensor<8x3x1x1xf32>, %w: tensor<8x8x1x1xf32>) -> tensor<1x8x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<8x3x1x1xf32>) -> tensor<1x8x4x4xf32>
  %1 = hpc.relu %0 : tensor<1x8x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x8x4x4xf32>) -> tensor<1x8x1x1xf32>
  return %3 : tensor<1x8x1x1xf32>
}

// stem conv -> max_pool -> conv -> global_avg_pool: the pool reads and
// writes blocked.
// CHECK-LABEL: func @max_pool
// CHECK-NEXT: %[[C:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: %[[P:.+]] = hpc.max_pool %[[C]] {{.*}}hpc.blocked
// CHECK-NEXT: %[[D:.+]] = hpc.conv %[[P]], {{.*}}hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[D]] :
// CHECK-NEXT: return
func.func @max_pool(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.max_pool %0 {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf32>) -> tensor<1x16x2x2xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x2x2xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x2x2xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// A dilated max_pool reads plain tensors: the stem conv before it writes
// plain, and the conv after it reads plain and so writes plain.
// CHECK-LABEL: func @dilated_max_pool
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @dilated_max_pool(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.max_pool %0 {dilations = array<i64: 2, 2>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>) -> tensor<1x16x2x2xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x2x2xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x2x2xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x2x2xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// global_avg_pool reads blocked and writes a plain [N, C, 1, 1] result.
// CHECK-LABEL: func @global_avg_pool
// CHECK-NEXT: %[[C:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[C]] :
// CHECK-NEXT: return
func.func @global_avg_pool(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.global_avg_pool %0 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %1 : tensor<1x16x1x1xf32>
}

// An add of a blocked candidate and a plain value (an argument): neither
// the add nor the conv before it is blocked, nor the conv after it reads
// anything blocked.
// CHECK-LABEL: func @add_with_plain
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @add_with_plain(%x: tensor<1x3x4x4xf32>, %y: tensor<1x16x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.add %0, %y : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// A broadcasting add (a per-channel bias) reads plain tensors.
// CHECK-LABEL: func @broadcast_add
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @broadcast_add(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>, %b: tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.add %0, %b : (tensor<1x16x4x4xf32>, tensor<1x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %3 : tensor<1x16x1x1xf32>
}

// A conv result read as another conv's weight is plain (only the input x
// is read blocked), though it is a stem conv's.
// CHECK-LABEL: func @read_as_weight
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @read_as_weight(%x: tensor<16x3x1x1xf32>, %w0: tensor<16x3x1x1xf32>, %y: tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<16x3x1x1xf32>, tensor<16x3x1x1xf32>) -> tensor<16x16x1x1xf32>
  %1 = hpc.conv %y, %0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  return %1 : tensor<1x16x4x4xf32>
}

// -----

// A train step is left as it is: the backward kernels read plain tensors.
// CHECK-LABEL: module attributes {hpc.train
// CHECK-NOT: hpc.blocked
module attributes {hpc.train = {batch = 1 : i64, lr_schedule = {kind = "constant", total = 0 : i64, warmup = 0 : i64}, optimizer = {lr = 1.000000e-01 : f64, momentum = 0.000000e+00 : f64, name = "sgd", nesterov = false, weight_decay = 0.000000e+00 : f64}}} {
  func.func @main(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x1x1xf32>) -> tensor<1x16x1x1xf32> {
    %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
    %1 = hpc.relu %0 : tensor<1x16x4x4xf32>
    %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
    %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
    return %3 : tensor<1x16x1x1xf32>
  }
}

// -----

// A fused residual block: the conv reads its residual in its result's
// layout, so the stem's result (input and residual of the block's conv)
// and the block's result are blocked together.
// CHECK-LABEL: func @residual_block
// CHECK-NEXT: %[[S:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: %[[B:.+]] = hpc.conv %[[S]], %{{.+}} residual(%[[S]]) {{.*}}hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[B]] :
func.func @residual_block(%x: tensor<1x3x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.conv %0, %w residual(%0) {activation = "relu", dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x3x3xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %2 = hpc.global_avg_pool %1 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %2 : tensor<1x16x1x1xf32>
}

// -----

// The residual is a graph input (plain): the conv that adds it writes plain
// and then reads plain, so nothing before it is blocked either.
// CHECK-LABEL: func @residual_plain_input
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @residual_plain_input(%x: tensor<1x3x4x4xf32>, %r: tensor<1x16x4x4xf32>, %w0: tensor<16x3x1x1xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x4x4xf32>
  %1 = hpc.conv %0, %w residual(%r) {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xf32>, tensor<16x16x3x3xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %2 = hpc.global_avg_pool %1 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %2 : tensor<1x16x1x1xf32>
}

// -----

// --precision=bf16's conv chain: bf16 convs with f32 relus and adds between
// casts. The convs and the casts carry bf16 in the blocked layout, the f32
// ops the f32 tensors between the casts.
// CHECK-LABEL: func @bf16_chain
// CHECK-NEXT: %[[C:.+]] = hpc.conv {{.*}}hpc.blocked
// CHECK-NEXT: %[[F:.+]] = hpc.cast %[[C]] {hpc.blocked
// CHECK-NEXT: %[[R:.+]] = hpc.relu %[[F]] {hpc.blocked}
// CHECK-NEXT: %[[B:.+]] = hpc.cast %[[R]] {hpc.blocked
// CHECK-NEXT: %[[D:.+]] = hpc.conv %[[B]], {{.*}}hpc.blocked
// CHECK-NEXT: %[[G:.+]] = hpc.cast %[[D]] {hpc.blocked
// CHECK-NEXT: hpc.global_avg_pool %[[G]] :
func.func @bf16_chain(%x: tensor<1x3x4x4xbf16>, %w0: tensor<16x3x1x1xbf16>, %w: tensor<16x16x1x1xbf16>) -> tensor<1x16x1x1xf32> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xbf16>, tensor<16x3x1x1xbf16>) -> tensor<1x16x4x4xbf16>
  %1 = hpc.cast %0 {to = f32} : tensor<1x16x4x4xbf16> to tensor<1x16x4x4xf32>
  %2 = hpc.relu %1 : tensor<1x16x4x4xf32>
  %3 = hpc.cast %2 {to = bf16} : tensor<1x16x4x4xf32> to tensor<1x16x4x4xbf16>
  %4 = hpc.conv %3, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xbf16>, tensor<16x16x1x1xbf16>) -> tensor<1x16x4x4xbf16>
  %5 = hpc.cast %4 {to = f32} : tensor<1x16x4x4xbf16> to tensor<1x16x4x4xf32>
  %6 = hpc.global_avg_pool %5 : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  return %6 : tensor<1x16x1x1xf32>
}

// -----

// relu, add and the pools keep bf16 tensors plain (they are f32 ops under
// --precision=bf16): a bf16 relu between two convs leaves the chain plain.
// CHECK-LABEL: func @bf16_relu
// CHECK-NOT: hpc.blocked
// CHECK: return
func.func @bf16_relu(%x: tensor<1x3x4x4xbf16>, %w0: tensor<16x3x1x1xbf16>, %w: tensor<16x16x1x1xbf16>) -> tensor<1x16x1x1xbf16> {
  %0 = hpc.conv %x, %w0 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xbf16>, tensor<16x3x1x1xbf16>) -> tensor<1x16x4x4xbf16>
  %1 = hpc.relu %0 : tensor<1x16x4x4xbf16>
  %2 = hpc.conv %1, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x4x4xbf16>, tensor<16x16x1x1xbf16>) -> tensor<1x16x4x4xbf16>
  %3 = hpc.global_avg_pool %2 : (tensor<1x16x4x4xbf16>) -> tensor<1x16x1x1xbf16>
  return %3 : tensor<1x16x1x1xbf16>
}
