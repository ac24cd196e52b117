// RUN: hpc-opt %s --hpc-train-mode | FileCheck %s

// hpc-train-mode: batch norm on the batch's statistics (sums over N and the
// spatial dims scaled by 1/count, so data-parallel ranks sum them), running
// statistics as state updated at the end with ONNX's momentum, the
// variance unbiased (count 2 * 2 * 2 = 8: 8/7).

// CHECK-LABEL: func.func @main
// CHECK-NOT: hpc.batch_norm
// CHECK: %[[MEAN:.+]] = hpc.variable "bn.mean" {role = "buffer"} : tensor<3xf32> = dense<0.000000e+00>
// CHECK: %[[VAR:.+]] = hpc.variable "bn.var" {role = "buffer"} : tensor<3xf32> = dense<1.000000e+00>
// CHECK: %[[SUM:.+]] = hpc.reduce_sum %arg0 {axes = array<i64: 0, 2, 3>}
// CHECK: %[[INV:.+]] = hpc.constant dense<1.250000e-01> : tensor<f32>
// CHECK: %[[BMEAN:.+]] = hpc.mul %[[SUM]], %[[INV]]
// CHECK: %[[XC:.+]] = hpc.sub %arg0, %[[BMEAN]]
// CHECK: %[[SQ:.+]] = hpc.mul %[[XC]], %[[XC]]
// CHECK: %[[SQSUM:.+]] = hpc.reduce_sum %[[SQ]] {axes = array<i64: 0, 2, 3>}
// CHECK: %[[BVAR:.+]] = hpc.mul %[[SQSUM]]
// CHECK: hpc.sqrt
// CHECK: hpc.reciprocal
// Running mean: 0.8 * running + 0.2 * batch mean.
// CHECK: %[[BMEAN3:.+]] = hpc.reshape %[[BMEAN]] {shape = array<i64: 3>}
// CHECK: %[[M:.+]] = hpc.constant dense<8.000000e-01> : tensor<f32>
// CHECK: %[[KEPT:.+]] = hpc.mul %[[MEAN]], %[[M]]
// CHECK: %[[W:.+]] = hpc.constant dense<2.000000e-01> : tensor<f32>
// CHECK: %[[NEW:.+]] = hpc.mul %[[BMEAN3]], %[[W]]
// CHECK: %[[NEWMEAN:.+]] = hpc.add %[[KEPT]], %[[NEW]]
// CHECK: hpc.assign %[[MEAN]], %[[NEWMEAN]] : tensor<3xf32>, tensor<3xf32>
// Running variance: the batch variance unbiased, 0.2 * 8/7.
// CHECK: %[[BVAR3:.+]] = hpc.reshape %[[BVAR]] {shape = array<i64: 3>}
// CHECK: hpc.mul %[[VAR]]
// CHECK: %[[WV:.+]] = hpc.constant dense<0.228571{{[0-9]+}}> : tensor<f32>
// CHECK: hpc.mul %[[BVAR3]], %[[WV]]
// CHECK: %[[NEWVAR:.+]] = hpc.add
// CHECK: hpc.assign %[[VAR]], %[[NEWVAR]] : tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT: return
func.func @main(%x: tensor<2x3x2x2xf32> {hpc.name = "x"}) -> (tensor<2x3x2x2xf32> {hpc.name = "y"}) {
  %s = hpc.weight "bn.scale" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %b = hpc.weight "bn.bias" : tensor<3xf32> = dense<[0.5, 0.5, 0.5]>
  %m = hpc.weight "bn.mean" : tensor<3xf32> = dense<0.0>
  %v = hpc.weight "bn.var" : tensor<3xf32> = dense<1.0>
  %y = hpc.batch_norm %x, %s, %b, %m, %v {momentum = 0.8 : f64} : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2x2xf32>
  return %y : tensor<2x3x2x2xf32>
}
