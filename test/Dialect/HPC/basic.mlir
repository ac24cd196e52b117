// RUN: hpc-opt %s | hpc-opt | FileCheck %s
// RUN: hpc-opt %s --mlir-print-op-generic | hpc-opt | FileCheck %s

// Round trip of every hpc op through its custom assembly format (and, in the
// second RUN line, through the generic form).

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<2xi64>, tensor<2x2xf32>, tensor<4xf32>, tensor<3xf32>, tensor<2x2xf32>) {
  // CHECK: hpc.constant dense<[1, 64]> : tensor<2xi64>
  %0 = hpc.constant dense<[1, 64]> : tensor<2xi64>
  // CHECK: hpc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  %1 = hpc.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  // CHECK: hpc.constant dense_resource<blob1> : tensor<4xf32>
  %2 = hpc.constant dense_resource<blob1> : tensor<4xf32>
  // CHECK: hpc.weight "h.0.attn.bias" : tensor<3xf32>
  %3 = hpc.weight "h.0.attn.bias" : tensor<3xf32>
  // CHECK: hpc.weight "wte" : tensor<2x2xf32> = dense<5.000000e-01>{{$}}
  %4 = hpc.weight "wte" : tensor<2x2xf32> = dense<0.5>
  return %0, %1, %2, %3, %4 : tensor<2xi64>, tensor<2x2xf32>, tensor<4xf32>, tensor<3xf32>, tensor<2x2xf32>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<4xi64>, %[[B:.+]]: tensor<4xi1>)
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi64>, %b: tensor<4xi1>) {
  // CHECK: hpc.neg %[[I]] : tensor<4xi64>
  %0 = hpc.neg %i : tensor<4xi64>
  // CHECK: hpc.abs %[[I]] : tensor<4xi64>
  %1 = hpc.abs %i : tensor<4xi64>
  // CHECK: hpc.sign %[[X]] : tensor<2x3xf32>
  %2 = hpc.sign %x : tensor<2x3xf32>
  // CHECK: hpc.not %[[B]] : tensor<4xi1>
  %3 = hpc.not %b : tensor<4xi1>
  // CHECK: hpc.exp %[[X]] : tensor<2x3xf32>
  %4 = hpc.exp %x : tensor<2x3xf32>
  // CHECK: hpc.log %[[X]] : tensor<2x3xf32>
  %5 = hpc.log %x : tensor<2x3xf32>
  // CHECK: hpc.sqrt %[[X]] : tensor<2x3xf32>
  %6 = hpc.sqrt %x : tensor<2x3xf32>
  // CHECK: hpc.reciprocal %[[X]] : tensor<2x3xf32>
  %7 = hpc.reciprocal %x : tensor<2x3xf32>
  // CHECK: hpc.relu %[[X]] : tensor<2x3xf32>
  %8 = hpc.relu %x : tensor<2x3xf32>
  // CHECK: hpc.sigmoid %[[X]] : tensor<2x3xf32>
  %9 = hpc.sigmoid %x : tensor<2x3xf32>
  // CHECK: hpc.tanh %[[X]] : tensor<2x3xf32>
  %10 = hpc.tanh %x : tensor<2x3xf32>
  // CHECK: hpc.erf %[[X]] : tensor<2x3xf32>
  %11 = hpc.erf %x : tensor<2x3xf32>
  // CHECK: hpc.sin %[[X]] : tensor<2x3xf32>
  %12 = hpc.sin %x : tensor<2x3xf32>
  // CHECK: hpc.cos %[[X]] : tensor<2x3xf32>
  %13 = hpc.cos %x : tensor<2x3xf32>
  // CHECK: hpc.floor %[[X]] : tensor<2x3xf32>
  %14 = hpc.floor %x : tensor<2x3xf32>
  // CHECK: hpc.ceil %[[X]] : tensor<2x3xf32>
  %15 = hpc.ceil %x : tensor<2x3xf32>
  // CHECK: hpc.round %[[X]] : tensor<2x3xf32>
  %16 = hpc.round %x : tensor<2x3xf32>
  // CHECK: hpc.silu %[[X]] : tensor<2x3xf32>
  %17 = hpc.silu %x : tensor<2x3xf32>
  // CHECK: hpc.softplus %[[X]] : tensor<2x3xf32>
  %18 = hpc.softplus %x : tensor<2x3xf32>
  // CHECK: hpc.hard_swish %[[X]] : tensor<2x3xf32>
  %19 = hpc.hard_swish %x : tensor<2x3xf32>
  // CHECK: hpc.gelu %[[X]] : tensor<2x3xf32>
  %20 = hpc.gelu %x : tensor<2x3xf32>
  // CHECK: hpc.gelu %[[X]] {approximate = "tanh"} : tensor<2x3xf32>
  %21 = hpc.gelu %x {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK: hpc.gelu_grad %[[X]], %[[X]] {approximate = "tanh"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %gg = hpc.gelu_grad %x, %x {approximate = "tanh"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.leaky_relu %[[X]] {alpha = 1.000000e-01 : f64} : tensor<2x3xf32>
  %22 = hpc.leaky_relu %x {alpha = 0.1 : f64} : tensor<2x3xf32>
  // CHECK: hpc.elu %[[X]] {alpha = 2.000000e+00 : f64} : tensor<2x3xf32>
  %23 = hpc.elu %x {alpha = 2.0 : f64} : tensor<2x3xf32>
  // CHECK: hpc.hard_sigmoid %[[X]] {alpha = 1.000000e-01 : f64, beta = 2.500000e-01 : f64} : tensor<2x3xf32>
  %24 = hpc.hard_sigmoid %x {alpha = 0.1 : f64, beta = 0.25 : f64} : tensor<2x3xf32>
  // CHECK: hpc.clip %[[X]] {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<2x3xf32>
  %25 = hpc.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3xf32>
  // CHECK: hpc.clip %[[I]] {max = 1.000000e+01 : f64} : tensor<4xi64>
  %26 = hpc.clip %i {max = 10.0 : f64} : tensor<4xi64>
  // CHECK: hpc.cast %[[X]] {to = i64} : tensor<2x3xf32> to tensor<2x3xi64>
  %27 = hpc.cast %x {to = i64} : tensor<2x3xf32> to tensor<2x3xi64>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[R:.+]]: tensor<3xf32>, %[[P:.+]]: tensor<4xi1>, %[[Q:.+]]: tensor<4xi1>, %[[C:.+]]: tensor<2x1xi1>)
func.func @binary(%a: tensor<2x3xf32>, %r: tensor<3xf32>, %p: tensor<4xi1>, %q: tensor<4xi1>, %c: tensor<2x1xi1>) {
  // CHECK: hpc.add %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = hpc.add %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.sub %[[R]], %[[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = hpc.sub %r, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.mul %[[A]], %[[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = hpc.mul %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.div %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = hpc.div %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.pow %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = hpc.pow %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.max %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = hpc.max %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.min %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = hpc.min %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.mod %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %7 = hpc.mod %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.fmod %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %8 = hpc.fmod %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: hpc.and %[[P]], %[[Q]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %9 = hpc.and %p, %q : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: hpc.or %[[P]], %[[Q]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %10 = hpc.or %p, %q : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: hpc.xor %[[P]], %[[Q]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %11 = hpc.xor %p, %q : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: hpc.equal %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %12 = hpc.equal %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: hpc.less %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %13 = hpc.less %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: hpc.less_equal %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %14 = hpc.less_equal %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: hpc.greater %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %15 = hpc.greater %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: hpc.greater_equal %[[A]], %[[R]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %16 = hpc.greater_equal %a, %r : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: hpc.where %[[C]], %[[A]], %[[R]] : (tensor<2x1xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %17 = hpc.where %c, %a, %r : (tensor<2x1xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<2x1x4x8xf32>, %b: tensor<3x8x5xf32>, %v: tensor<8xf32>,
                        %g: tensor<8x4xf32>, %h: tensor<5x8xf32>, %bias: tensor<5xf32>,
                        %k: tensor<5x4xf32>) {
  // CHECK: hpc.matmul %{{.+}}, %{{.+}} : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>
  %0 = hpc.matmul %a, %b : (tensor<2x1x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x3x4x5xf32>
  // CHECK: hpc.matmul %{{.+}}, %{{.+}} : (tensor<8xf32>, tensor<3x8x5xf32>) -> tensor<3x5xf32>
  %1 = hpc.matmul %v, %b : (tensor<8xf32>, tensor<3x8x5xf32>) -> tensor<3x5xf32>
  // CHECK: hpc.gemm %{{.+}}, %{{.+}} {trans_a = true, trans_b = true} : (tensor<8x4xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  %2 = hpc.gemm %g, %h {trans_a = true, trans_b = true} : (tensor<8x4xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  // CHECK: hpc.gemm %{{.+}}, %{{.+}}, %{{.+}} {alpha = 5.000000e-01 : f64, beta = 2.000000e+00 : f64, trans_a = true, trans_b = true} : (tensor<8x4xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %3 = hpc.gemm %g, %h, %bias {alpha = 0.5 : f64, beta = 2.0 : f64, trans_a = true, trans_b = true} : (tensor<8x4xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: hpc.gemm %{{.+}}, %{{.+}}, %{{.+}} {activation = "gelu_tanh", trans_b = true} : (tensor<8x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %4 = hpc.gemm %g, %k, %bias {activation = "gelu_tanh", trans_b = true} : (tensor<8x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  // The default activation is not printed.
  // CHECK: hpc.gemm %{{.+}}, %{{.+}} {trans_b = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
  %5 = hpc.gemm %g, %g {activation = "none", trans_b = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
  return
}

// CHECK-LABEL: func.func @convolutions
func.func @convolutions(%x: tensor<2x8x10x10xf32>, %w: tensor<16x2x3x3xf32>, %b: tensor<16xf32>,
                        %y: tensor<1x4x5x5xf32>, %tw: tensor<4x2x3x3xf32>) {
  // CHECK: hpc.conv %{{.+}}, %{{.+}}, %{{.+}} {dilations = array<i64: 1, 1>, group = 4 : i64, pads = array<i64: 0, 1, 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x10x12xf32>
  %0 = hpc.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 1, 2, 3>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x10x12xf32>
  // CHECK: hpc.conv %{{.+}}, %{{.+}} {dilations = array<i64: 2, 2>, group = 4 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>) -> tensor<2x16x3x3xf32>
  %1 = hpc.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>, group = 4 : i64} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>) -> tensor<2x16x3x3xf32>
  // CHECK: hpc.conv %{{.+}}, %{{.+}}, %{{.+}} {activation = "silu", dilations = array<i64: 1, 1>, group = 4 : i64, pads = array<i64: 0, 1, 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x10x12xf32>
  %3 = hpc.conv %x, %w, %b {activation = "silu", strides = array<i64: 1, 1>, pads = array<i64: 0, 1, 2, 3>, dilations = array<i64: 1, 1>, group = 4 : i64} : (tensor<2x8x10x10xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x10x12xf32>
  // CHECK: hpc.conv_transpose %{{.+}}, %{{.+}} {dilations = array<i64: 1, 1>, group = 2 : i64, output_padding = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x12x12xf32>
  %2 = hpc.conv_transpose %y, %tw {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x12x12xf32>
  return
}

// CHECK-LABEL: func.func @normalization
func.func @normalization(%x: tensor<2x7x64xf32>, %s: tensor<64xf32>, %img: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) {
  // CHECK: hpc.softmax %{{.+}} {axis = -1 : i64} : tensor<2x7x64xf32>
  %0 = hpc.softmax %x {axis = -1 : i64} : tensor<2x7x64xf32>
  // CHECK: hpc.log_softmax %{{.+}} {axis = 1 : i64} : tensor<2x7x64xf32>
  %1 = hpc.log_softmax %x {axis = 1 : i64} : tensor<2x7x64xf32>
  // CHECK: hpc.layer_norm %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x7x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  %2 = hpc.layer_norm %x, %s, %s : (tensor<2x7x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  // CHECK: hpc.layer_norm_grad %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 1.000000e-03 : f64} : (tensor<2x7x64xf32>, tensor<64xf32>, tensor<2x7x64xf32>) -> tensor<2x7x64xf32>
  %lng = hpc.layer_norm_grad %x, %s, %x {epsilon = 1.0e-3 : f64} : (tensor<2x7x64xf32>, tensor<64xf32>, tensor<2x7x64xf32>) -> tensor<2x7x64xf32>
  // CHECK: hpc.layer_norm %{{.+}}, %{{.+}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x7x64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  %3 = hpc.layer_norm %x, %s {epsilon = 1.0e-6 : f64} : (tensor<2x7x64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  // CHECK: hpc.rms_norm %{{.+}}, %{{.+}} {axis = 2 : i64} : (tensor<2x7x64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  %4 = hpc.rms_norm %x, %s {axis = 2 : i64} : (tensor<2x7x64xf32>, tensor<64xf32>) -> tensor<2x7x64xf32>
  // CHECK: hpc.batch_norm %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %5 = hpc.batch_norm %img, %c, %c, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) {
  // CHECK: hpc.reduce_sum %{{.+}} {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %0 = hpc.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  // CHECK: hpc.reduce_mean %{{.+}} {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  %1 = hpc.reduce_mean %x {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  // CHECK: hpc.reduce_max %{{.+}} {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %2 = hpc.reduce_max %x {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  // CHECK: hpc.reduce_min %{{.+}} {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
  %3 = hpc.reduce_min %x {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
  // CHECK: hpc.reduce_prod %{{.+}} {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  %4 = hpc.reduce_prod %x {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK: hpc.reduce_sum_square %{{.+}} {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %rss = hpc.reduce_sum_square %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // CHECK: hpc.argmax %{{.+}} {axis = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x1xi64>
  %5 = hpc.argmax %x {axis = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x1xi64>
  // CHECK: hpc.argmin %{{.+}} {axis = 1 : i64, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  %6 = hpc.argmin %x {axis = 1 : i64, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  return
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%table: tensor<10x4xf32>, %ids: tensor<2x3xi64>, %idx: tensor<10x2xi64>,
                    %upd: tensor<10x2xf32>, %labels: tensor<5xi64>, %onoff: tensor<2xf32>) {
  // CHECK: hpc.gather %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %0 = hpc.gather %table, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: hpc.gather_elements %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<10x4xf32>, tensor<10x2xi64>) -> tensor<10x2xf32>
  %1 = hpc.gather_elements %table, %idx {axis = 1 : i64} : (tensor<10x4xf32>, tensor<10x2xi64>) -> tensor<10x2xf32>
  // CHECK: hpc.scatter_elements %{{.+}}, %{{.+}}, %{{.+}} {axis = 1 : i64, reduction = "add"} : (tensor<10x4xf32>, tensor<10x2xi64>, tensor<10x2xf32>) -> tensor<10x4xf32>
  %2 = hpc.scatter_elements %table, %idx, %upd {axis = 1 : i64, reduction = "add"} : (tensor<10x4xf32>, tensor<10x2xi64>, tensor<10x2xf32>) -> tensor<10x4xf32>
  // CHECK: hpc.one_hot %{{.+}}, %{{.+}} {depth = 8 : i64} : (tensor<5xi64>, tensor<2xf32>) -> tensor<5x8xf32>
  %3 = hpc.one_hot %labels, %onoff {depth = 8 : i64} : (tensor<5xi64>, tensor<2xf32>) -> tensor<5x8xf32>
  // CHECK: hpc.top_k %{{.+}} {axis = 0 : i64, k = 3 : i64, largest = false} : (tensor<10x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xi64>)
  %4:2 = hpc.top_k %table {k = 3 : i64, axis = 0 : i64, largest = false} : (tensor<10x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xi64>)
  return
}

// CHECK-LABEL: func.func @mixture_of_experts
func.func @mixture_of_experts(%x: tensor<6x4xf32>, %choices: tensor<6x2xi64>, %rows: tensor<6x2x4xf32>) {
  // CHECK: hpc.moe_route %{{.+}} {capacity = 3 : i64, num_experts = 4 : i64} : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<4xi64>)
  %slots, %load = hpc.moe_route %choices {num_experts = 4 : i64, capacity = 3 : i64} : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<4xi64>)
  // CHECK: hpc.moe_dispatch %{{.+}}, %{{.+}} {capacity = 3 : i64, num_experts = 4 : i64} : (tensor<6x4xf32>, tensor<6x2xi64>) -> tensor<4x3x4xf32>
  %buffer = hpc.moe_dispatch %x, %slots {num_experts = 4 : i64, capacity = 3 : i64} : (tensor<6x4xf32>, tensor<6x2xi64>) -> tensor<4x3x4xf32>
  // CHECK: hpc.moe_dispatch %{{.+}}, %{{.+}} {capacity = 3 : i64, num_experts = 4 : i64} : (tensor<6x2x4xf32>, tensor<6x2xi64>) -> tensor<4x3x4xf32>
  %per_choice = hpc.moe_dispatch %rows, %slots {num_experts = 4 : i64, capacity = 3 : i64} : (tensor<6x2x4xf32>, tensor<6x2xi64>) -> tensor<4x3x4xf32>
  // CHECK: hpc.moe_gather %{{.+}}, %{{.+}} : (tensor<4x3x4xf32>, tensor<6x2xi64>) -> tensor<6x2x4xf32>
  %back = hpc.moe_gather %buffer, %slots : (tensor<4x3x4xf32>, tensor<6x2xi64>) -> tensor<6x2x4xf32>
  return
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %z: tensor<1x3x1xf32>) {
  // CHECK: hpc.reshape %{{.+}} {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %0 = hpc.reshape %x {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: hpc.transpose %{{.+}} {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = hpc.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: hpc.slice %{{.+}} {ends = array<i64: 2, -1, 4>, starts = array<i64: 0, 2, 1>, steps = array<i64: 1, -1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  %2 = hpc.slice %x {starts = array<i64: 0, 2, 1>, ends = array<i64: 2, -1, 4>, steps = array<i64: 1, -1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  // CHECK: hpc.concat %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  %3 = hpc.concat %x, %y {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: hpc.split %{{.+}} {axis = 1 : i64, sizes = array<i64: 1, 4>} : (tensor<2x5x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x4x4xf32>)
  %4:2 = hpc.split %y {axis = 1 : i64, sizes = array<i64: 1, 4>} : (tensor<2x5x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x4x4xf32>)
  // CHECK: hpc.expand %{{.+}} {shape = array<i64: 2, 1, 5>} : (tensor<1x3x1xf32>) -> tensor<2x3x5xf32>
  %5 = hpc.expand %z {shape = array<i64: 2, 1, 5>} : (tensor<1x3x1xf32>) -> tensor<2x3x5xf32>
  // CHECK: hpc.squeeze %{{.+}} {axes = array<i64: 0, 2>} : (tensor<1x3x1xf32>) -> tensor<3xf32>
  %6 = hpc.squeeze %z {axes = array<i64: 0, 2>} : (tensor<1x3x1xf32>) -> tensor<3xf32>
  // CHECK: hpc.unsqueeze %{{.+}} {axes = array<i64: 0, 4>} : (tensor<2x3x4xf32>) -> tensor<1x2x3x4x1xf32>
  %7 = hpc.unsqueeze %x {axes = array<i64: 0, 4>} : (tensor<2x3x4xf32>) -> tensor<1x2x3x4x1xf32>
  // CHECK: hpc.pad %{{.+}} {mode = "reflect", pads = array<i64: 0, 1, 1, 0, 1, -1>} : (tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
  %8 = hpc.pad %x {pads = array<i64: 0, 1, 1, 0, 1, -1>, mode = "reflect"} : (tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
  // CHECK: hpc.pad %{{.+}} {pads = array<i64: 1, 0, 0, 1, 0, 0>, value = 1.500000e+00 : f64} : (tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  %9 = hpc.pad %x {pads = array<i64: 1, 0, 0, 1, 0, 0>, value = 1.5 : f64} : (tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  // CHECK: hpc.tile %{{.+}} {repeats = array<i64: 1, 2, 3>} : (tensor<2x3x4xf32>) -> tensor<2x6x12xf32>
  %10 = hpc.tile %x {repeats = array<i64: 1, 2, 3>} : (tensor<2x3x4xf32>) -> tensor<2x6x12xf32>
  return
}

// CHECK-LABEL: func.func @pooling
func.func @pooling(%x: tensor<1x3x4x4xf32>) {
  // CHECK: hpc.max_pool %{{.+}} {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x3x3xf32>
  %0 = hpc.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x3x4x4xf32>) -> tensor<1x3x3x3xf32>
  // CHECK: hpc.avg_pool %{{.+}} {count_include_pad = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  %1 = hpc.avg_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = true} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  // CHECK: hpc.global_avg_pool %{{.+}} : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  %2 = hpc.global_avg_pool %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  // CHECK: hpc.global_max_pool %{{.+}} : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  %3 = hpc.global_max_pool %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  // CHECK: hpc.resize %{{.+}} {coordinate_transformation_mode = "align_corners", mode = "linear", scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>, sizes = array<i64: 1, 3, 8, 8>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  %4 = hpc.resize %x {sizes = array<i64: 1, 3, 8, 8>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>, mode = "linear", coordinate_transformation_mode = "align_corners"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  // CHECK: hpc.resize %{{.+}} {nearest_mode = "floor", scales = array<f64: 1.000000e+00, 1.000000e+00, 5.000000e-01, 5.000000e-01>, sizes = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  %5 = hpc.resize %x {sizes = array<i64: 1, 3, 2, 2>, scales = array<f64: 1.0, 1.0, 0.5, 0.5>, nearest_mode = "floor"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x2x2xf32>
  return
}

// The resource blob survives the round trip.
// CHECK: dialect_resources
// CHECK: blob1: "0x040000000000803F0000004000004040000080C0"
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F0000004000004040000080C0"
    }
  }
#-}
