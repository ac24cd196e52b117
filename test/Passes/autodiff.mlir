// RUN: split-file %s %t
// RUN: hpc-opt %t/trainable.mlir --hpc-autodiff | FileCheck %t/trainable.mlir
// RUN: hpc-opt %t/frozen.mlir --hpc-autodiff=freeze=fc.b | FileCheck %t/frozen.mlir
// RUN: hpc-opt %t/batch-norm.mlir --hpc-autodiff | FileCheck %t/batch-norm.mlir
// RUN: hpc-opt %t/unreachable.mlir --hpc-autodiff | FileCheck %t/unreachable.mlir
// RUN: hpc-opt %t/accumulate.mlir --hpc-autodiff | FileCheck %t/accumulate.mlir
// RUN: hpc-opt %t/print.mlir --hpc-autodiff="print-trainable=true freeze=b" | FileCheck %t/print.mlir
// RUN: hpc-opt %t/wrt-inputs.mlir --hpc-autodiff=wrt-inputs=true | FileCheck %t/wrt-inputs.mlir
// RUN: hpc-opt %t/comparison.mlir --hpc-autodiff=print-trainable=true | FileCheck %t/comparison.mlir
// RUN: hpc-opt %t/gelu.mlir --hpc-autodiff | FileCheck %t/gelu.mlir
// RUN: hpc-opt %t/gelu.mlir --hpc-autodiff=fused-gradients=false | FileCheck %t/gelu.mlir --check-prefix=COMPOSED
// RUN: hpc-opt %t/layer-norm.mlir --hpc-autodiff | FileCheck %t/layer-norm.mlir
// RUN: hpc-opt %t/layer-norm-broadcast.mlir --hpc-autodiff | FileCheck %t/layer-norm-broadcast.mlir

// hpc-autodiff: which weights train, what they become, and what @main
// returns. The values of the gradients are checked numerically by
// test/Train/gradcheck.test.

//--- trainable.mlir
// Float weights that reach the loss become variables (role "param", same
// name and value); @main returns the loss, then grad.<name> per parameter in
// the order of the weights.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32> {hpc.name = "x"})
// CHECK-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "fc.w", hpc.name = "grad.fc.w"}, tensor<3xf32> {hpc.gradient_of = "fc.b", hpc.name = "grad.fc.b"})
// CHECK-NOT: hpc.weight
// CHECK: %[[W:.+]] = hpc.variable "fc.w" {role = "param"} : tensor<3xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>
// CHECK: %[[B:.+]] = hpc.variable "fc.b" {role = "param"} : tensor<3xf32> = dense<5.000000e-01>
// CHECK: %[[Y:.+]] = hpc.mul %[[X]], %[[W]]
// CHECK: %[[Z:.+]] = hpc.add %[[Y]], %[[B]]
// CHECK: %[[LOSS:.+]] = hpc.reduce_sum %[[Z]]
// The seed dL/dL = 1, broadcast to the summed shape.
// CHECK: %[[ONE:.+]] = hpc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[ONE2:.+]] = hpc.reshape %[[ONE]] {shape = array<i64: 1, 1>}
// CHECK: %[[DZ:.+]] = hpc.expand %[[ONE2]] {shape = array<i64: 2, 3>} : (tensor<1x1xf32>) -> tensor<2x3xf32>
// The bias gradient sums the broadcast dim away.
// CHECK: %[[DB1:.+]] = hpc.reduce_sum %[[DZ]] {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK: %[[DB:.+]] = hpc.reshape %[[DB1]] {shape = array<i64: 3>}
// CHECK: %[[DWX:.+]] = hpc.mul %[[DZ]], %[[X]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[DW1:.+]] = hpc.reduce_sum %[[DWX]] {axes = array<i64: 0>}
// CHECK: %[[DW:.+]] = hpc.reshape %[[DW1]] {shape = array<i64: 3>}
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "fc.w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %b = hpc.weight "fc.b" : tensor<3xf32> = dense<0.5>
  %y = hpc.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %z = hpc.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = hpc.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- frozen.mlir
// A frozen weight stays an hpc.weight and gets no gradient result.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "fc.w", hpc.name = "grad.fc.w"}) {
// CHECK: hpc.variable "fc.w" {role = "param"}
// CHECK: hpc.weight "fc.b" : tensor<3xf32> = dense<5.000000e-01>
// CHECK-NOT: hpc.variable "fc.b"
// CHECK: return %{{[^,]+}}, %{{[^,]+}} : tensor<f32>, tensor<3xf32>{{$}}
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "fc.w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %b = hpc.weight "fc.b" : tensor<3xf32> = dense<0.5>
  %y = hpc.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %z = hpc.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = hpc.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- batch-norm.mlir
// Batch-norm scale and bias train; the running mean and variance (weights
// read only as batch-norm operands 3 and 4) are buffers and stay weights.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "bn.weight", hpc.name = "grad.bn.weight"}, tensor<3xf32> {hpc.gradient_of = "bn.bias", hpc.name = "grad.bn.bias"}) {
// CHECK: %[[S:.+]] = hpc.variable "bn.weight" {role = "param"}
// CHECK: %[[B:.+]] = hpc.variable "bn.bias" {role = "param"}
// CHECK: %[[M:.+]] = hpc.weight "bn.running_mean" : tensor<3xf32>
// CHECK: %[[V:.+]] = hpc.weight "bn.running_var" : tensor<3xf32>
// CHECK: hpc.batch_norm %{{.+}}, %[[S]], %[[B]], %[[M]], %[[V]]
// CHECK-NOT: hpc.variable
// CHECK: return
func.func @main(%x: tensor<2x3x4x4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %s = hpc.weight "bn.weight" : tensor<3xf32> = dense<1.0>
  %b = hpc.weight "bn.bias" : tensor<3xf32> = dense<0.0>
  %m = hpc.weight "bn.running_mean" : tensor<3xf32> = dense<0.0>
  %v = hpc.weight "bn.running_var" : tensor<3xf32> = dense<1.0>
  %y = hpc.batch_norm %x, %s, %b, %m, %v : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- unreachable.mlir
// A float weight whose uses do not reach the loss, and an integer weight
// (gather indices), are not trainable.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<4x3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}) {
// CHECK: hpc.variable "w" {role = "param"}
// CHECK: %[[IDS:.+]] = hpc.weight "ids" : tensor<2xi64>
// CHECK: hpc.weight "aux" : tensor<4x3xf32>
// CHECK-NOT: hpc.variable
// CHECK: hpc.gather %{{.+}}, %[[IDS]]
// CHECK: return %{{[^,]+}}, %{{[^,]+}} : tensor<f32>, tensor<4x3xf32>{{$}}
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<4x3xf32> = dense<1.0>
  %ids = hpc.weight "ids" : tensor<2xi64> = dense<[0, 3]>
  %aux = hpc.weight "aux" : tensor<4x3xf32> = dense<2.0>
  %unused = hpc.mul %aux, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = hpc.mul %w, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g = hpc.gather %y, %ids {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %l = hpc.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- accumulate.mlir
// A weight used twice: the gradients of its two uses add up.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32> {hpc.name = "x"})
// CHECK: %[[W:.+]] = hpc.variable "w"
// CHECK: %[[E:.+]] = hpc.exp %[[W]] : tensor<3xf32>
// CHECK: %[[DY:.+]] = hpc.expand %{{.+}} {shape = array<i64: 3>}
// CHECK: %[[FROM_EXP:.+]] = hpc.mul %[[DY]], %[[E]]
// CHECK: %[[FROM_MUL:.+]] = hpc.mul %[[DY]], %[[X]]
// CHECK: %[[DW:.+]] = hpc.add %[[FROM_EXP]], %[[FROM_MUL]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK: return %{{.+}}, %[[DW]] : tensor<f32>, tensor<3xf32>
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %z = hpc.exp %w : tensor<3xf32>
  %s = hpc.add %y, %z : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = hpc.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- print.mlir
// print-trainable lists the trainable weights (frozen ones left out) before
// the module is printed.
// CHECK: trainable: 2 tensors, 15 elements
// CHECK-NEXT:   w tensor<4x3xf32>
// CHECK-NEXT:   c tensor<3xf32>
// CHECK-NEXT: module
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<4x3xf32> = dense<1.0>
  %b = hpc.weight "b" : tensor<3xf32> = dense<1.0>
  %c = hpc.weight "c" : tensor<3xf32> = dense<1.0>
  %y = hpc.mul %w, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %z = hpc.add %y, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %u = hpc.mul %z, %c : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = hpc.reduce_sum %u {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- wrt-inputs.mlir
// wrt-inputs: the float inputs get gradients too (after the weights'),
// named after their hpc.name; integer inputs do not.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32> {hpc.name = "x"}, %[[IDS:.+]]: tensor<2xi64> {hpc.name = "ids"})
// CHECK-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.gradient_of = "w", hpc.name = "grad.w"}, tensor<3xf32> {hpc.gradient_of = "x", hpc.name = "grad.x"})
// CHECK: %[[W:.+]] = hpc.variable "w"
// CHECK: %[[DY:.+]] = hpc.scatter_elements
// CHECK-DAG: %[[DW:.+]] = hpc.mul %[[DY]], %[[X]]
// CHECK-DAG: %[[DX:.+]] = hpc.mul %[[DY]], %[[W]]
// CHECK: return %{{.+}}, %[[DW]], %[[DX]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}, %ids: tensor<2xi64> {hpc.name = "ids"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %y = hpc.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = hpc.gather %y, %ids {axis = 0 : i64} : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  %l = hpc.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- comparison.mlir
// A weight that reaches the loss only through a comparison (a where's
// condition) takes no gradient: it is not trainable and stays a weight.
// CHECK: trainable: 1 tensors, 3 elements
// CHECK-NEXT: w tensor<3xf32>
// CHECK-NOT: threshold tensor
// CHECK: hpc.weight "threshold"
// CHECK: hpc.variable "w"
func.func @main(%x: tensor<3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %t = hpc.weight "threshold" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %c = hpc.greater %x, %t : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %y = hpc.where %c, %w, %x : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- gelu.mlir
// GELU's gradient is one hpc.gelu_grad of the forward input (with the
// forward's approximation), not the dozen elementwise ops of its formula.
// CHECK-LABEL: func.func @main
// CHECK: %[[H:.+]] = hpc.mul %{{.+}}, %{{.+}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: hpc.gelu %[[H]] {approximate = "tanh"}
// CHECK: %[[DG:.+]] = hpc.expand
// CHECK-NEXT: %[[DH:.+]] = hpc.gelu_grad %[[H]], %[[DG]] {approximate = "tanh"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: hpc.tanh
// CHECK: hpc.mul %[[DH]], %{{.+}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// fused-gradients=false: the formula's elementwise ops, and the module
// keeps no trace of the option.
// COMPOSED-NOT: hpc.composed_gradients
// COMPOSED-NOT: hpc.gelu_grad
// COMPOSED: hpc.tanh
// COMPOSED-NOT: hpc.gelu_grad
func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %h = hpc.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %g = hpc.gelu %h {approximate = "tanh"} : tensor<2x3xf32>
  %l = hpc.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- layer-norm.mlir
// A layer norm whose scale covers the normalized dims: the input gradient is
// one hpc.layer_norm_grad, the parameter gradients sum dy * xhat (xhat a
// layer_norm with unit scale) and dy over the rows. A broadcast scale keeps
// the composed form (reductions over the normalized dims).
// CHECK-LABEL: func.func @main
// CHECK: %[[X:.+]] = hpc.mul
// CHECK: %[[DY:.+]] = hpc.expand
// CHECK: %[[DX:.+]] = hpc.layer_norm_grad %[[X]], %{{.+}}, %[[DY]] : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[ONES:.+]] = hpc.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: %[[XHAT:.+]] = hpc.layer_norm %[[X]], %[[ONES]] :
// CHECK: hpc.mul %[[DY]], %[[XHAT]]
// CHECK-NOT: hpc.sqrt
// CHECK: hpc.mul %[[DX]]
func.func @main(%x: tensor<2x3x4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  %s = hpc.weight "ln.scale" : tensor<4xf32> = dense<1.5>
  %b = hpc.weight "ln.bias" : tensor<4xf32> = dense<0.5>
  %h = hpc.mul %x, %w : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %n = hpc.layer_norm %h, %s, %b : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %l = hpc.reduce_sum %n {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- layer-norm-broadcast.mlir
// CHECK-LABEL: func.func @main
// CHECK-NOT: hpc.layer_norm_grad
// CHECK: hpc.sqrt
// CHECK-NOT: hpc.layer_norm_grad
func.func @main(%x: tensor<2x3x4xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w = hpc.weight "w" : tensor<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  %s = hpc.weight "ln.scale" : tensor<4xf32> = dense<1.5>
  %h = hpc.mul %x, %w : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %n = hpc.layer_norm %h, %s {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %l = hpc.reduce_sum %n {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
