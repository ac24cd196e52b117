// RUN: hpc-opt %s | hpc-opt | FileCheck %s
// RUN: hpc-opt %s --mlir-print-op-generic | hpc-opt | FileCheck %s

// Round trip of the training ops (HPCTrainOps.td) through their custom
// assembly format (and, in the second RUN line, through the generic form).

// CHECK-LABEL: func.func @variables
func.func @variables() -> (tensor<3xf32>, tensor<3xf32>, tensor<2x2xbf16>) {
  // The role defaults to "param" and is always printed.
  // CHECK: hpc.variable "fc.weight" {role = "param"} : tensor<3xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>{{$}}
  %0 = hpc.variable "fc.weight" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  // CHECK: hpc.variable "fc.weight.exp_avg" {role = "optimizer"} : tensor<3xf32>{{$}}
  %1 = hpc.variable "fc.weight.exp_avg" {role = "optimizer"} : tensor<3xf32>
  // CHECK: hpc.variable "emb" {role = "param"} : tensor<2x2xbf16> = dense_resource<emb_blob>{{$}}
  %2 = hpc.variable "emb" {role = "param"} : tensor<2x2xbf16> = dense_resource<emb_blob>
  return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @sgd
// CHECK-SAME: (%[[P:.+]]: tensor<3xf32>, %[[G:.+]]: tensor<3xf32>, %[[LR:.+]]: tensor<f32>, %[[BUF:.+]]: tensor<3xf32>)
func.func @sgd(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %buf: tensor<3xf32>) {
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]] : tensor<3xf32>, tensor<3xf32>, tensor<f32>{{$}}
  hpc.sgd_update %p, %g, %lr : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]], %[[BUF]] {momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 1.000000e-02 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
  hpc.sgd_update %p, %g, %lr, %buf {momentum = 0.9, nesterov = true, weight_decay = 0.01} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
  // The guard (hpc-optimizer's skip-nonfinite) with and without a buffer:
  // its type stays beside it, so neither is taken for the other.
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]] unless_nonfinite(%[[LR]] : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>{{$}}
  hpc.sgd_update %p, %g, %lr unless_nonfinite(%lr : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]], %[[BUF]] unless_nonfinite(%[[LR]] : tensor<f32>) {momentum = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>{{$}}
  hpc.sgd_update %p, %g, %lr, %buf unless_nonfinite(%lr : tensor<f32>) {momentum = 0.9} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
  // The fused clip (the norm and the max norm), with and without the guard.
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]], %[[BUF]] unless_nonfinite(%[[LR]] : tensor<f32>) clip(%[[LR]], %[[LR]] : tensor<f32>, tensor<f32>) {momentum = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>{{$}}
  hpc.sgd_update %p, %g, %lr, %buf unless_nonfinite(%lr : tensor<f32>) clip(%lr, %lr : tensor<f32>, tensor<f32>) {momentum = 0.9} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
  // CHECK: hpc.sgd_update %[[P]], %[[G]], %[[LR]] clip(%[[LR]], %[[LR]] : tensor<f32>, tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>{{$}}
  hpc.sgd_update %p, %g, %lr clip(%lr, %lr : tensor<f32>, tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>
  return
}

// CHECK-LABEL: func.func @adamw
// CHECK-SAME: (%[[P:.+]]: tensor<3xf32>, %[[G:.+]]: tensor<3xf32>, %[[M:.+]]: tensor<3xf32>, %[[V:.+]]: tensor<3xf32>, %[[LR:.+]]: tensor<f32>, %[[STEP:.+]]: tensor<i64>)
func.func @adamw(%p: tensor<3xf32>, %g: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // CHECK: hpc.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]] : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>{{$}}
  hpc.adamw_update %p, %g, %m, %v, %lr, %step : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  // CHECK: hpc.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]] {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64} :
  hpc.adamw_update %p, %g, %m, %v, %lr, %step {beta1 = 0.8, beta2 = 0.99, eps = 1.0e-6, weight_decay = 0.0} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  // CHECK: hpc.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]] unless_nonfinite(%[[LR]] : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>{{$}}
  hpc.adamw_update %p, %g, %m, %v, %lr, %step unless_nonfinite(%lr : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  // CHECK: hpc.adamw_update %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]] unless_nonfinite(%[[LR]] : tensor<f32>) clip(%[[LR]], %[[LR]] : tensor<f32>, tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>{{$}}
  hpc.adamw_update %p, %g, %m, %v, %lr, %step unless_nonfinite(%lr : tensor<f32>) clip(%lr, %lr : tensor<f32>, tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>
  return
}

// CHECK-LABEL: func.func @backward
func.func @backward(%x: tensor<2x4x6x6xf32>, %dy: tensor<2x6x3x3xf32>, %p: tensor<1x3x5x5xf32>, %dp: tensor<1x3x3x3xf32>) {
  // CHECK: hpc.conv_weight_grad %{{.+}}, %{{.+}} {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x6x6xf32>, tensor<2x6x3x3xf32>) -> tensor<6x2x3x3xf32>
  %0 = hpc.conv_weight_grad %x, %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<2x6x3x3xf32>) -> tensor<6x2x3x3xf32>
  // CHECK: hpc.max_pool_grad %{{.+}}, %{{.+}} {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x5x5xf32>, tensor<1x3x3x3xf32>) -> tensor<1x3x5x5xf32>
  %1 = hpc.max_pool_grad %p, %dp {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x3x5x5xf32>, tensor<1x3x3x3xf32>) -> tensor<1x3x5x5xf32>
  // CHECK: hpc.avg_pool_grad %{{.+}}, %{{.+}} {count_include_pad = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x5x5xf32>, tensor<1x3x3x3xf32>) -> tensor<1x3x5x5xf32>
  %2 = hpc.avg_pool_grad %p, %dp {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = true} : (tensor<1x3x5x5xf32>, tensor<1x3x3x3xf32>) -> tensor<1x3x5x5xf32>
  return
}

// The resource blob of the variable survives the round trip.
// CHECK: dialect_resources
// CHECK: emb_blob: "0x02000000803F0040404080C0"
{-#
  dialect_resources: {
    builtin: {
      emb_blob: "0x02000000803F0040404080C0"
    }
  }
#-}
