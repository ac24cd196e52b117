// RUN: hpc-opt %s --split-input-file --hpc-autocast=precision=bf16 | FileCheck %s
// precision=fp32, the default, changes nothing:
// RUN: hpc-opt %s --split-input-file > %t.none
// RUN: hpc-opt %s --split-input-file --hpc-autocast > %t.default
// RUN: hpc-opt %s --split-input-file --hpc-autocast=precision=fp32 > %t.fp32
// RUN: diff %t.none %t.default
// RUN: diff %t.none %t.fp32

// The product reads bf16 and its result is cast back to f32 at once, so the
// softmax stays f32; the weight is stored in bf16 under its name, rounded to
// nearest even: ties go to the even neighbour (1 + 2^-8 -> 1, 1 + 3 * 2^-8 ->
// 1 + 2^-6), above a tie up (1 + 2^-8 + 2^-10 -> 1 + 2^-7), the largest f32
// overflows to inf, a NaN stays a quiet NaN, the smallest denormal becomes 0.
// CHECK: module attributes {hpc.precision = "bf16"}
// CHECK-LABEL: func @matmul
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[W:.+]] = hpc.weight "w" : tensor<8x1xbf16> = dense<{{\[}}[1.000000e+00], [1.000000e+00], [1.015630e+00], [1.007810e+00], [-1.000000e+00], [0x7F80], [0x7FC0], [0.000000e+00]]>
// CHECK-NEXT: %[[XB:.+]] = hpc.cast %[[X]] {to = bf16} : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NEXT: %[[P:.+]] = hpc.matmul %[[XB]], %[[W]] : (tensor<2x8xbf16>, tensor<8x1xbf16>) -> tensor<2x1xbf16>
// CHECK-NEXT: %[[Y:.+]] = hpc.cast %[[P]] {to = f32} : tensor<2x1xbf16> to tensor<2x1xf32>
// CHECK-NEXT: %[[S:.+]] = hpc.softmax %[[Y]] {axis = 0 : i64} : tensor<2x1xf32>
// CHECK-NEXT: return %[[S]]
func.func @matmul(%x: tensor<2x8xf32>) -> tensor<2x1xf32> {
  %w = hpc.weight "w" : tensor<8x1xf32> = dense<[[1.0], [1.00390625], [1.01171875], [1.0048828125], [-1.00390625], [0x7F7FFFFF], [0x7FC00000], [0x00000001]]>
  %y = hpc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x1xf32>) -> tensor<2x1xf32>
  %s = hpc.softmax %y {axis = 0 : i64} : tensor<2x1xf32>
  return %s : tensor<2x1xf32>
}

// gemm and conv cast every float operand, the bias too; weights without data
// (a --shapes-only import) become bf16 weights without data; a splat stays a
// splat; the weight both convolutions read is stored once.
// CHECK-LABEL: func @gemm_conv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4xf32>, %[[IMG:[^:]+]]: tensor<1x2x5x5xf32>, %[[B:[^:]+]]: tensor<3xf32>)
// CHECK-NEXT: %[[W:.+]] = hpc.weight "w" : tensor<3x4xbf16> = dense<1.000980e-01>
// CHECK-NEXT: %[[XB:.+]] = hpc.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[BB:.+]] = hpc.cast %[[B]] {to = bf16} : tensor<3xf32> to tensor<3xbf16>
// CHECK-NEXT: %[[G:.+]] = hpc.gemm %[[XB]], %[[W]], %[[BB]] {trans_b = true} : (tensor<2x4xbf16>, tensor<3x4xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[G32:.+]] = hpc.cast %[[G]] {to = f32} : tensor<2x3xbf16> to tensor<2x3xf32>
// CHECK-NEXT: %[[K:.+]] = hpc.weight "k" : tensor<3x2x3x3xbf16>{{$}}
// CHECK-NEXT: %[[KB:.+]] = hpc.weight "kb" : tensor<3xbf16>{{$}}
// CHECK-NEXT: %[[IB:.+]] = hpc.cast %[[IMG]] {to = bf16}
// CHECK-NEXT: %[[C:.+]] = hpc.conv %[[IB]], %[[K]], %[[KB]] {{.*}} : (tensor<1x2x5x5xbf16>, tensor<3x2x3x3xbf16>, tensor<3xbf16>) -> tensor<1x3x5x5xbf16>
// CHECK-NEXT: %[[C32:.+]] = hpc.cast %[[C]] {to = f32}
// CHECK-NEXT: %[[R:.+]] = hpc.relu %[[C32]] : tensor<1x3x5x5xf32>
// CHECK-NEXT: %[[RB:.+]] = hpc.cast %[[R]] {to = bf16}
// CHECK-NEXT: %[[T:.+]] = hpc.conv_transpose %[[RB]], %[[K]] {{.*}} -> tensor<1x2x7x7xbf16>
// CHECK-NEXT: %[[T32:.+]] = hpc.cast %[[T]] {to = f32}
// CHECK-NEXT: return %[[G32]], %[[R]], %[[T32]]
func.func @gemm_conv(%x: tensor<2x4xf32>, %img: tensor<1x2x5x5xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<1x3x5x5xf32>, tensor<1x2x7x7xf32>) {
  %w = hpc.weight "w" : tensor<3x4xf32> = dense<0.1>
  %g = hpc.gemm %x, %w, %b {trans_b = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %k = hpc.weight "k" : tensor<3x2x3x3xf32>
  %kb = hpc.weight "kb" : tensor<3xf32>
  %c = hpc.conv %img, %k, %kb {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x5x5xf32>
  %r = hpc.relu %c : tensor<1x3x5x5xf32>
  %t = hpc.conv_transpose %r, %k {dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  return %g, %r, %t : tensor<2x3xf32>, tensor<1x3x5x5xf32>, tensor<1x2x7x7xf32>
}

// One cast per value, before its first product; a product that reads
// another's result reads its bf16 value (the cast back nobody else reads
// goes away).
// CHECK-LABEL: func @cast_once
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4xf32>, %[[A:[^:]+]]: tensor<4x4xf32>, %[[B:[^:]+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[XB:.+]] = hpc.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[AB:.+]] = hpc.cast %[[A]] {to = bf16}
// CHECK-NEXT: %[[Y:.+]] = hpc.matmul %[[XB]], %[[AB]]
// CHECK-NEXT: %[[BB:.+]] = hpc.cast %[[B]] {to = bf16}
// CHECK-NEXT: %[[Z:.+]] = hpc.matmul %[[XB]], %[[BB]]
// CHECK-NEXT: %[[Z32:.+]] = hpc.cast %[[Z]] {to = f32}
// CHECK-NEXT: %[[U:.+]] = hpc.matmul %[[Y]], %[[BB]]
// CHECK-NEXT: %[[U32:.+]] = hpc.cast %[[U]] {to = f32}
// CHECK-NEXT: return %[[Z32]], %[[U32]]
func.func @cast_once(%x: tensor<2x4xf32>, %a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %y = hpc.matmul %x, %a : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = hpc.matmul %x, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %u = hpc.matmul %y, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %z, %u : tensor<2x4xf32>, tensor<2x4xf32>
}

// A tied embedding: the gather keeps reading the f32 weight, the output head
// a bf16 copy of the same name, transposed in bf16.
// CHECK-LABEL: func @tied
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<2xi64>, %[[H:[^:]+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[E:.+]] = hpc.weight "wte" : tensor<8x4xf32> = dense<1.000000e+00>
// CHECK-NEXT: %[[EB:.+]] = hpc.weight "wte" : tensor<8x4xbf16> = dense<1.000000e+00>
// CHECK-NEXT: %[[G:.+]] = hpc.gather %[[E]], %[[IDS]] {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[HB:.+]] = hpc.cast %[[H]] {to = bf16}
// CHECK-NEXT: %[[T:.+]] = hpc.transpose %[[EB]] {perm = array<i64: 1, 0>} : (tensor<8x4xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[L:.+]] = hpc.matmul %[[HB]], %[[T]] : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[L32:.+]] = hpc.cast %[[L]] {to = f32}
// CHECK-NEXT: return %[[G]], %[[L32]]
func.func @tied(%ids: tensor<2xi64>, %h: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
  %e = hpc.weight "wte" : tensor<8x4xf32> = dense<1.0>
  %x = hpc.gather %e, %ids {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %t = hpc.transpose %e {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %l = hpc.matmul %h, %t : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %x, %l : tensor<2x4xf32>, tensor<2x8xf32>
}

// Weight data in a resource blob and constants are converted at compile time
// too.
// CHECK-LABEL: func @stored_data
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[W:.+]] = hpc.weight "r" : tensor<3x1xbf16> = dense<{{\[}}[1.000000e+00], [1.000000e+00], [1.015630e+00]]>
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<{{\[}}[2.000000e+00, 1.000000e+00, 1.015630e+00]]> : tensor<1x3xbf16>
// CHECK-NEXT: %[[XB:.+]] = hpc.cast %[[X]] {to = bf16}
// CHECK-NEXT: hpc.matmul %[[XB]], %[[W]]
// CHECK-NEXT: hpc.cast
// CHECK-NEXT: %[[T:.+]] = hpc.transpose %[[C]] {perm = array<i64: 1, 0>} : (tensor<1x3xbf16>) -> tensor<3x1xbf16>
// CHECK-NEXT: hpc.matmul %[[XB]], %[[T]]
func.func @stored_data(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %w = hpc.weight "r" : tensor<3x1xf32> = dense_resource<r_blob>
  %c = hpc.constant dense<[[2.0, 1.00390625, 1.01171875]]> : tensor<1x3xf32>
  %t = hpc.transpose %c {perm = array<i64: 1, 0>} : (tensor<1x3xf32>) -> tensor<3x1xf32>
  %y = hpc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x1xf32>) -> tensor<2x1xf32>
  %z = hpc.matmul %x, %t : (tensor<2x3xf32>, tensor<3x1xf32>) -> tensor<2x1xf32>
  %s = hpc.add %y, %z : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  return %s : tensor<2x1xf32>
}

// Integer products, and float products that are not f32, are left alone.
// CHECK-LABEL: func @untouched
// CHECK-NOT: hpc.cast
// CHECK: hpc.matmul %{{.+}}, %{{.+}} : (tensor<2x4xi64>, tensor<4x3xi64>) -> tensor<2x3xi64>
// CHECK-NEXT: hpc.matmul %{{.+}}, %{{.+}} : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
// CHECK-NOT: hpc.cast
// CHECK: return
func.func @untouched(%i: tensor<2x4xi64>, %j: tensor<4x3xi64>, %h: tensor<2x4xf16>, %k: tensor<4x3xf16>) -> (tensor<2x3xi64>, tensor<2x3xf16>) {
  %a = hpc.matmul %i, %j : (tensor<2x4xi64>, tensor<4x3xi64>) -> tensor<2x3xi64>
  %b = hpc.matmul %h, %k : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
  return %a, %b : tensor<2x3xi64>, tensor<2x3xf16>
}

{-#
  dialect_resources: {
    builtin: {
      r_blob: "0x040000000000803F0080803F0080813F"
    }
  }
#-}

// -----

// A train step: the parameter (an hpc.variable, the fp32 master weight)
// keeps its type and is cast once per step; the backward products read that
// cast (transposed in bf16) and the cast input; the update reads the f32
// gradient.
// CHECK: module attributes {hpc.precision = "bf16", hpc.train = {{.+}}}
// CHECK-LABEL: func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4xf32> {hpc.name = "x"}, %[[DY:[^:]+]]: tensor<2x3xf32> {hpc.name = "dy"}, %[[LR:[^:]+]]: tensor<f32> {hpc.name = "hpc.lr"})
// CHECK-NEXT: %[[W:.+]] = hpc.variable "fc.weight" {role = "param"} : tensor<4x3xf32> = dense<5.000000e-01>
// CHECK-NEXT: %[[XB:.+]] = hpc.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[WB:.+]] = hpc.cast %[[W]] {to = bf16} : tensor<4x3xf32> to tensor<4x3xbf16>
// CHECK-NEXT: %[[Y:.+]] = hpc.matmul %[[XB]], %[[WB]] : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[Y32:.+]] = hpc.cast %[[Y]] {to = f32}
// CHECK-NEXT: %[[DYB:.+]] = hpc.cast %[[DY]] {to = bf16}
// CHECK-NEXT: %[[WT:.+]] = hpc.transpose %[[WB]] {perm = array<i64: 1, 0>} : (tensor<4x3xbf16>) -> tensor<3x4xbf16>
// CHECK-NEXT: %[[DX:.+]] = hpc.matmul %[[DYB]], %[[WT]] : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[DX32:.+]] = hpc.cast %[[DX]] {to = f32}
// CHECK-NEXT: %[[GW:.+]] = hpc.gemm %[[XB]], %[[DYB]] {trans_a = true} : (tensor<2x4xbf16>, tensor<2x3xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT: %[[GW32:.+]] = hpc.cast %[[GW]] {to = f32} : tensor<4x3xbf16> to tensor<4x3xf32>
// CHECK-NEXT: hpc.sgd_update %[[W]], %[[GW32]], %[[LR]] : tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>
// CHECK-NEXT: return %[[Y32]], %[[DX32]]
module attributes {hpc.train = {batch = 2 : i64, loss = "mse"}} {
func.func @main(%x: tensor<2x4xf32> {hpc.name = "x"}, %dy: tensor<2x3xf32> {hpc.name = "dy"}, %lr: tensor<f32> {hpc.name = "hpc.lr"}) -> (tensor<2x3xf32>, tensor<2x4xf32>) {
  %w = hpc.variable "fc.weight" {role = "param"} : tensor<4x3xf32> = dense<0.5>
  %y = hpc.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %wt = hpc.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %dx = hpc.matmul %dy, %wt : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %gw = hpc.gemm %x, %dy {trans_a = true} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  hpc.sgd_update %w, %gw, %lr : tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>
  return %y, %dx : tensor<2x3xf32>, tensor<2x4xf32>
}
}

// -----

// A convolution's filter gradient (the backward of a train step) too.
// CHECK-LABEL: func @filter_gradient
// CHECK: hpc.conv_weight_grad %{{.+}}, %{{.+}} {{.*}} : (tensor<1x2x5x5xbf16>, tensor<1x3x5x5xbf16>) -> tensor<3x2x3x3xbf16>
// CHECK-NEXT: hpc.cast %{{.+}} {to = f32} : tensor<3x2x3x3xbf16> to tensor<3x2x3x3xf32>
func.func @filter_gradient(%x: tensor<1x2x5x5xf32>, %dy: tensor<1x3x5x5xf32>) -> tensor<3x2x3x3xf32> {
  %g = hpc.conv_weight_grad %x, %dy {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<1x3x5x5xf32>) -> tensor<3x2x3x3xf32>
  return %g : tensor<3x2x3x3xf32>
}

// -----

// A per-rank program: a rank's piece of a weight is taken from the bf16
// weight (dist-weight-pieces then stores the pieces in bf16).
// CHECK-LABEL: func @main
// CHECK-NEXT: %[[W:.+]] = hpc.weight "w" : tensor<2x6xbf16>
// CHECK-NEXT: %[[XB:.+]] = hpc.cast
// CHECK-NEXT: %[[P:.+]] = dist.all_slice %[[W]] over ["tp"] dim 1 : tensor<2x6xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT: hpc.matmul %[[XB]], %[[P]] : (tensor<3x2xbf16>, tensor<2x3xbf16>) -> tensor<3x3xbf16>
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<3x2xf32> {hpc.name = "x"}) -> (tensor<3x3xf32> {hpc.name = "y"}) {
    %w = hpc.weight "w" : tensor<2x6xf32> = dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]>
    %p = dist.all_slice %w over ["tp"] dim 1 : tensor<2x6xf32> -> tensor<2x3xf32>
    %y = hpc.matmul %x, %p : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    return %y : tensor<3x3xf32>
  }
}
