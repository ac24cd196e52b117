// RUN: split-file %s %t
// RUN: hpc-opt %t/autodiff.mlir --hpc-autodiff -split-input-file -verify-diagnostics
// RUN: hpc-opt %t/freeze.mlir --hpc-autodiff=freeze=fc.w,encoder.w -verify-diagnostics
// RUN: hpc-opt %t/loss-kind.mlir --hpc-append-loss=loss=hinge:logits,labels -verify-diagnostics
// RUN: hpc-opt %t/loss-name.mlir --hpc-append-loss=loss=cross-entropy:scores,labels -verify-diagnostics
// RUN: hpc-opt %t/loss-names.mlir --hpc-append-loss=loss=mse:logits -verify-diagnostics
// RUN: hpc-opt %t/loss-scalar.mlir --hpc-append-loss=loss=output:logits -verify-diagnostics
// RUN: hpc-opt %t/loss-input.mlir --hpc-append-loss=loss=mse:logits,x -verify-diagnostics
// RUN: hpc-opt %t/loss-int.mlir --hpc-append-loss=loss=output:count -verify-diagnostics
// RUN: hpc-opt %t/schedule.mlir --hpc-optimizer=lr-schedule=cosine:100,10 -verify-diagnostics
// RUN: hpc-opt %t/optimizer.mlir --hpc-optimizer=optimizer=adam -verify-diagnostics
// RUN: hpc-opt %t/lr.mlir --hpc-optimizer=lr=0 -verify-diagnostics
// RUN: hpc-opt %t/nesterov.mlir --hpc-optimizer=nesterov=true -verify-diagnostics
// RUN: hpc-opt %t/betas.mlir --hpc-optimizer="optimizer=adamw beta2=1.0" -verify-diagnostics
// RUN: hpc-opt %t/clip.mlir --hpc-optimizer=clip-norm=-1 -verify-diagnostics
// RUN: hpc-opt %t/no-gradients.mlir --hpc-optimizer -split-input-file -verify-diagnostics

// What hpc-append-loss, hpc-autodiff and hpc-optimizer refuse: one case per
// diagnostic (the options differ, so each group is a file of its own).

//--- autodiff.mlir
// expected-error @+1 {{@main has no result named "loss" (give --loss)}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<3xf32> {hpc.name = "logits"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<1.0>
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// expected-error @+1 {{the loss must be a 0-d floating-point tensor, got 'tensor<3xf32>'}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<3xf32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<1.0>
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// The only weight is integer (indices): nothing to train.
// expected-error @+1 {{no trainable parameters: no floating-point weight reaches the loss through a differentiable path}}
func.func @main(%x: tensor<4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %ids = hpc.weight "ids" : tensor<2xi64> = dense<[0, 3]>
  %g = hpc.gather %x, %ids {axis = 0 : i64} : (tensor<4xf32>, tensor<2xi64>) -> tensor<2xf32>
  %l = hpc.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Ops without a gradient model on a path from a weight to the loss: each
// one is reported.
func.func @main(%x: tensor<1x1x2x2xf32> {hpc.name = "x"}, %labels: tensor<4xi64> {hpc.name = "labels"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<1x1x2x2xf32> = dense<1.0>
  %on_off = hpc.weight "on_off" : tensor<2xf32> = dense<[0.0, 1.0]>
  %y = hpc.mul %w, %x : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  // expected-error @+1 {{'hpc.resize' has no gradient (it is on a path from a trainable weight to the loss)}}
  %r = hpc.resize %y {sizes = array<i64: 1, 1, 4, 4>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  // expected-error @+1 {{'hpc.one_hot' has no gradient (it is on a path from a trainable weight to the loss)}}
  %h = hpc.one_hot %labels, %on_off {depth = 4 : i64} : (tensor<4xi64>, tensor<2xf32>) -> tensor<4x4xf32>
  %s = hpc.reshape %r {shape = array<i64: 4, 4>} : (tensor<1x1x4x4xf32>) -> tensor<4x4xf32>
  %p = hpc.mul %s, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = hpc.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A fused activation (hpc-fuse-epilogues runs after autodiff) has no
// gradient: the op does not keep its pre-activation.
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3x4xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.gemm' op has no gradient with activation "relu" (differentiate before hpc-fuse-epilogues)}}
  %y = hpc.gemm %x, %w {activation = "relu"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @main(%x: tensor<1x2x4x4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3x2x1x1xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.conv' op has no gradient with activation "gelu_tanh" (differentiate before hpc-fuse-epilogues)}}
  %y = hpc.conv %x, %w {activation = "gelu_tanh", strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x3x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @main(%x: tensor<1x2x4x4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<2x2x1x1xf32> = dense<1.0>
  // expected-error @+1 {{'hpc.conv' op has no gradient with a residual (differentiate before hpc-fuse-epilogues)}}
  %y = hpc.conv %x, %w residual(%x) {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x2x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- freeze.mlir
// expected-error @+1 {{--freeze: no weight named 'encoder.w'}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "fc.w" : tensor<3xf32> = dense<1.0>
  %b = hpc.weight "fc.b" : tensor<3xf32> = dense<1.0>
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %z = hpc.add %y, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = hpc.reduce_sum %z {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- loss-kind.mlir
// expected-error @+1 {{--loss: unknown kind 'hinge' (cross-entropy:LOGITS,LABELS, mse:OUT,TARGET or output:NAME)}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

//--- loss-name.mlir
// expected-error @+1 {{--loss: no tensor 'scores' among @main's results ('logits', 'output1')}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"}, tensor<2x3xf32>) {
  return %x, %x : tensor<2x3xf32>, tensor<2x3xf32>
}

//--- loss-names.mlir
// expected-error @+1 {{--loss=mse:logits: expected mse:OUT,TARGET}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

//--- loss-scalar.mlir
// expected-error @+1 {{--loss=output:logits: the loss must be a scalar, got 'tensor<2x3xf32>'}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

//--- loss-input.mlir
// expected-error @+1 {{--loss: 'x' is already an input of the model; name the labels or target input differently}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

//--- loss-int.mlir
// expected-error @+1 {{--loss: 'count' is 'tensor<i64>', not a floating-point tensor}}
func.func @main(%x: tensor<i64> {hpc.name = "x"}) -> (tensor<i64> {hpc.name = "count"}) {
  return %x : tensor<i64>
}

//--- schedule.mlir
// expected-error @+1 {{--lr-schedule: expected constant, cosine:WARMUP,TOTAL or linear:WARMUP,TOTAL (0 <= WARMUP < TOTAL), got 'cosine:100,10'}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- optimizer.mlir
// expected-error @+1 {{--optimizer: expected sgd or adamw, got 'adam'}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- lr.mlir
// expected-error @+1 {{--lr must be positive, got 0.000000e+00}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- nesterov.mlir
// expected-error @+1 {{--momentum must be >= 0 (and > 0 with --nesterov)}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- betas.mlir
// expected-error @+1 {{--beta1/--beta2 must be in [0, 1) and --eps >= 0}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- clip.mlir
// expected-error @+1 {{--clip-norm must not be negative}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

//--- no-gradients.mlir
// hpc-optimizer before hpc-autodiff: no gradient results.
// expected-error @+1 {{hpc-optimizer needs the loss and gradients of hpc-autodiff}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A gradient of a name that is no variable.
// expected-error @+1 {{the gradient of 'w' has no parameter to update}}
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<1.0>
  %l = hpc.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}
