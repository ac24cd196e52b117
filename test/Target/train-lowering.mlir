// RUN: hpc-opt %s --hpc-lower-to-runtime --split-input-file --verify-diagnostics | FileCheck %s

// Lowering a train step (hpc-optimizer's output): variables live in the
// "state" region, listed in the manifest's "state" with their role and how
// the runtime initializes them; "train" tells the runtime's train command
// the lr and step inputs; the updates are calls with their operand ids.

// SGD with momentum. Tensors: 0 x, 1 hpc.lr, 2 hpc.step (inputs), 3 the
// buffer and 4 w (state, 64-byte aligned: 64 + 12 = 76 bytes), then the
// arena tensors.
// CHECK-LABEL: module
// CHECK: llvm.mlir.global external constant @hpc_manifest(
// CHECK-SAME: \22inputs\22:[{\22name\22:\22x\22,\22tensor\22:0},{\22name\22:\22hpc.lr\22,\22tensor\22:1},{\22name\22:\22hpc.step\22,\22tensor\22:2}]
// CHECK-SAME: \22state\22:[{\22init\22:\22zeros\22,\22name\22:\22w.momentum_buffer\22,\22role\22:\22optimizer\22,\22tensor\22:3},{\22init\22:\22weights\22,\22name\22:\22w\22,\22role\22:\22param\22,\22tensor\22:4,\22weights_offset\22:0}]
// CHECK-SAME: \22state_bytes\22:76
// CHECK-SAME: {\22dtype\22:7,\22index\22:2,\22offset\22:0,\22region\22:\22input\22,\22shape\22:[]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22state\22,\22shape\22:[3]},{\22dtype\22:1,\22index\22:0,\22offset\22:64,\22region\22:\22state\22,\22shape\22:[3]}
// CHECK-SAME: \22train\22:{\22batch\22:2,\22grad_norm_output\22:\22grad_norm\22,\22loss_output\22:\22loss\22,\22lr_input\22:\22hpc.lr\22,\22lr_schedule\22:{\22kind\22:\22constant\22,\22total\22:0,\22warmup\22:0},\22optimizer\22:{\22lr\22:0.10000000000000001,\22momentum\22:0.90000000000000002,\22name\22:\22sgd\22,\22nesterov\22:false,\22weight_decay\22:0},\22step_input\22:\22hpc.step\22}
// The initial value of w is weights data (12 bytes); the buffer has none.
// CHECK-SAME: \22weights\22:{\22bytes\22:12,
// CHECK: llvm.func @hpcrt_sgd_update(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK: llvm.func @hpc_program_run(%[[CTX:.+]]: !llvm.ptr)
// CHECK: llvm.call @hpcrt_sqrt(
// CHECK: %[[IDS:.+]] = llvm.mlir.addressof @[[G:ids[0-9]+]]
// CHECK: %[[IATTRS:.+]] = llvm.mlir.addressof @[[GI:iattrs[0-9]+]]
// CHECK: %[[FATTRS:.+]] = llvm.mlir.addressof @[[GF:fattrs[0-9]+]]
// CHECK: %[[OP:.+]] = llvm.mlir.constant(3 : i32)
// CHECK: llvm.call @hpcrt_sgd_update(%[[CTX]], %[[OP]], %[[IDS]], %[[IATTRS]], %[[FATTRS]],
// No results; 7 operand places: param 4, grad 0, lr 1, buffer 3, no guard,
// no clip (norm, max norm).
// CHECK: llvm.mlir.global internal constant @[[G]](dense<[0, 7, 4, 0, 1, 3, -1, -1, -1]> : tensor<9xi32>)
// nesterov, then momentum and weight decay.
// CHECK: llvm.mlir.global internal constant @[[GI]](dense<0> : tensor<1xi64>)
// CHECK: llvm.mlir.global internal constant @[[GF]](dense<[9.000000e-01, 0.000000e+00]> : tensor<2xf64>)
module attributes {hpc.train = {batch = 2 : i64, lr_schedule = {kind = "constant", total = 0 : i64, warmup = 0 : i64}, optimizer = {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, name = "sgd", nesterov = false, weight_decay = 0.000000e+00 : f64}}} {
  func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}, %step: tensor<i64> {hpc.name = "hpc.step"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<f32> {hpc.name = "grad_norm"}) {
    %buf = hpc.variable "w.momentum_buffer" {role = "optimizer"} : tensor<3xf32>
    %w = hpc.variable "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
    %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = hpc.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
    %n = hpc.sqrt %l : tensor<f32>
    hpc.sgd_update %w, %x, %lr, %buf {momentum = 0.9} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
    return %l, %n : tensor<f32>, tensor<f32>
  }
}

// -----

// SGD without momentum: the absent buffer operand is -1.
// CHECK-LABEL: module
// CHECK: \22state\22:[{\22init\22:\22weights\22,\22name\22:\22w\22,\22role\22:\22param\22,\22tensor\22:3,\22weights_offset\22:0}],\22state_bytes\22:12,
// CHECK: llvm.call @hpcrt_sgd_update
// CHECK: llvm.mlir.global internal constant @{{ids[0-9]+}}(dense<[0, 7, 3, 0, 1, -1, -1, -1, -1]> : tensor<9xi32>)
module attributes {hpc.train = {batch = 3 : i64, lr_schedule = {kind = "constant", total = 0 : i64, warmup = 0 : i64}, optimizer = {lr = 1.000000e-01 : f64, momentum = 0.000000e+00 : f64, name = "sgd", nesterov = false, weight_decay = 0.000000e+00 : f64}}} {
  func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}, %step: tensor<i64> {hpc.name = "hpc.step"}) -> (tensor<f32> {hpc.name = "loss"}) {
    %w = hpc.variable "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
    %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = hpc.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
    hpc.sgd_update %w, %x, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// AdamW: param, grad, exp_avg, exp_avg_sq, lr, step; the moments start at
// zero.
// CHECK-LABEL: module
// CHECK: \22state\22:[{\22init\22:\22zeros\22,\22name\22:\22w.exp_avg_sq\22,\22role\22:\22optimizer\22,\22tensor\22:3},{\22init\22:\22zeros\22,\22name\22:\22w.exp_avg\22,\22role\22:\22optimizer\22,\22tensor\22:4},{\22init\22:\22weights\22,\22name\22:\22w\22,\22role\22:\22param\22,\22tensor\22:5,\22weights_offset\22:0}],\22state_bytes\22:140,
// CHECK-SAME: \22optimizer\22:{\22beta1\22:0.90000000000000002,\22beta2\22:0.999,\22eps\22:1e-08,\22lr\22:0.001,\22name\22:\22adamw\22,\22weight_decay\22:0.01},\22step_input\22:\22hpc.step\22}
// CHECK: llvm.func @hpcrt_adamw_update(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK: llvm.call @hpcrt_reduce_sum(
// CHECK: %[[IDS:.+]] = llvm.mlir.addressof @[[G:ids[0-9]+]]
// CHECK: %[[FATTRS:.+]] = llvm.mlir.addressof @[[GF:fattrs[0-9]+]]
// CHECK: llvm.call @hpcrt_adamw_update(%{{.+}}, %{{.+}}, %[[IDS]], %{{.+}}, %[[FATTRS]], %{{.+}})
// CHECK: llvm.mlir.global internal constant @[[G]](dense<[0, 9, 5, 0, 4, 3, 1, 2, -1, -1, -1]> : tensor<11xi32>)
// beta1, beta2, eps, weight decay.
// CHECK: llvm.mlir.global internal constant @[[GF]](dense<[9.000000e-01, 0.99899999999999999, 1.000000e-08, 1.000000e-01]> : tensor<4xf64>)
module attributes {hpc.train = {batch = 3 : i64, lr_schedule = {kind = "cosine", total = 100 : i64, warmup = 10 : i64}, optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, name = "adamw", weight_decay = 1.000000e-02 : f64}}} {
  func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}, %step: tensor<i64> {hpc.name = "hpc.step"}) -> (tensor<f32> {hpc.name = "loss"}) {
    %v = hpc.variable "w.exp_avg_sq" {role = "optimizer"} : tensor<3xf32>
    %m = hpc.variable "w.exp_avg" {role = "optimizer"} : tensor<3xf32>
    %w = hpc.variable "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
    %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = hpc.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
    hpc.adamw_update %w, %x, %m, %v, %lr, %step {weight_decay = 0.1} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
    return %l : tensor<f32>
  }
}

// -----

// An op after the update would read the new parameter.
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}) -> (tensor<3xf32> {hpc.name = "y"}) {
  %w = hpc.variable "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  hpc.sgd_update %w, %x, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  // expected-error @+1 {{'hpc.mul' op reads state that an earlier optimizer update wrote}}
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// The same for an optimizer moment.
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}, %step: tensor<i64> {hpc.name = "hpc.step"}) -> (tensor<3xf32> {hpc.name = "m"}) {
  %v = hpc.variable "w.exp_avg_sq" {role = "optimizer"} : tensor<3xf32>
  %m = hpc.variable "w.exp_avg" {role = "optimizer"} : tensor<3xf32>
  %w = hpc.variable "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  hpc.adamw_update %w, %x, %m, %v, %lr, %step : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  // expected-error @+1 {{'hpc.neg' op reads state that an earlier optimizer update wrote}}
  %n = hpc.neg %m : tensor<3xf32>
  return %n : tensor<3xf32>
}

// -----

// Only state can be updated in place.
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}) -> (tensor<3xf32> {hpc.name = "x2"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  // expected-error @+1 {{'hpc.sgd_update' op updates operand 0, which is not a state tensor (hpc.variable)}}
  hpc.sgd_update %w, %x, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  return %x : tensor<3xf32>
}

// -----

func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<3xf32> {hpc.name = "y"}) {
  %a = hpc.variable "w" : tensor<3xf32>
  // expected-error @+1 {{'hpc.variable' op state name 'w' is used twice}}
  %b = hpc.variable "w" {role = "optimizer"} : tensor<3xf32>
  %y = hpc.add %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
