// RUN: hpc-opt %s --hpc-lower-to-runtime --split-input-file --verify-diagnostics | FileCheck %s

// Tensors: 0 input, 1 weight, 2 add (arena), 3 relu (arena), 4 the reshape
// view of 3, 5 clip. add is dead once relu has read it, so clip reuses its
// bytes; relu's storage lives until clip (through the view).
// CHECK-LABEL: module
// CHECK: llvm.mlir.global external constant @hpc_manifest(
// CHECK-SAME: \22arena_bytes\22:88
// CHECK-SAME: \22inputs\22:[{\22name\22:\22x\22,\22tensor\22:0}]
// CHECK-SAME: \22outputs\22:[{\22name\22:\22y\22,\22tensor\22:5}]
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22input\22,\22shape\22:[2,3]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22weights\22,\22shape\22:[3]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[2,3]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:64,\22region\22:\22arena\22,\22shape\22:[2,3]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:64,\22region\22:\22arena\22,\22shape\22:[3,2]}
// CHECK-SAME: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[3,2]}
// CHECK-SAME: \22weights\22:{\22bytes\22:12,\22entries\22:[{\22name\22:\22w\22,\22offset\22:0}],\22file\22:\22weights.safetensors\22
// CHECK: llvm.func @hpcrt_add(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK: llvm.func @hpc_program_run(%[[CTX:.+]]: !llvm.ptr)
// CHECK: %[[IDS0:.+]] = llvm.mlir.addressof @[[G0:ids[0-9]+]]
// CHECK: %[[OP0:.+]] = llvm.mlir.constant(0 : i32)
// CHECK: llvm.call @hpcrt_add(%[[CTX]], %[[OP0]], %[[IDS0]],
// CHECK: llvm.call @hpcrt_relu(
// CHECK-NOT: hpcrt_reshape
// CHECK: llvm.call @hpcrt_clip(
// CHECK: llvm.return
// [n_results, results..., n_operands, operands...]
// CHECK: llvm.mlir.global internal constant @[[G0]](dense<[1, 2, 2, 0, 1]> : tensor<5xi32>)
// clip: max present (flag 1, value in fattrs), min absent (flag 0).
// CHECK: llvm.mlir.global internal constant @{{iattrs[0-9]+}}(dense<[1, 0]> : tensor<2xi64>)
// CHECK: llvm.mlir.global internal constant @{{fattrs[0-9]+}}(dense<6.000000e+00> : tensor<1xf64>)
// CHECK-NOT: func.func
module {
  func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<3x2xf32> {hpc.name = "y"}) {
    %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
    %0 = hpc.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %1 = hpc.relu %0 : tensor<2x3xf32>
    %2 = hpc.reshape %1 {shape = array<i64: 3, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %3 = hpc.clip %2 {max = 6.0 : f64} : tensor<3x2xf32>
    return %3 : tensor<3x2xf32>
  }
}

// -----

// Attributes in alphabetical order with defaults filled in: conv has
// dilations, group, pads, strides (operandSegmentSizes is not encoded); the
// absent bias and residual are operand ids -1.
// CHECK-LABEL: module
// CHECK: llvm.call @hpcrt_conv(
// CHECK: dense<[1, 2, 4, 0, 1, -1, -1]> : tensor<7xi32>
// CHECK: dense<[2, 1, 1, 1, 4, 0, 0, 0, 0, 2, 1, 1]> : tensor<12xi64>
module {
  func.func @main(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> {
    %w = hpc.weight "w" : tensor<4x2x1x1xf32> = dense<1.0>
    %0 = hpc.conv %x, %w {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x5x5xf32>
    return %0 : tensor<1x4x5x5xf32>
  }
}

// -----

// A residual without a bias keeps both places: ids [1, y, 4, x, w, -1, r]
// (tensors: 0 x, 1 r, 2 w, 3 y).
// CHECK-LABEL: module
// CHECK: llvm.call @hpcrt_conv(
// CHECK: dense<[1, 3, 4, 0, 2, -1, 1]> : tensor<7xi32>
module {
  func.func @main(%x: tensor<1x2x5x5xf32>, %r: tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32> {
    %w = hpc.weight "w" : tensor<4x2x1x1xf32> = dense<1.0>
    %0 = hpc.conv %x, %w residual(%r) {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x1x1xf32>, tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
    return %0 : tensor<1x4x5x5xf32>
  }
}

// -----

// activation is gemm's and conv's one string attribute (sattrs); the
// default "none" is filled in.
// CHECK-LABEL: module
// CHECK: llvm.call @hpcrt_gemm(
// CHECK: llvm.call @hpcrt_conv(
// CHECK: @{{str[0-9]+}}("gelu_tanh\00")
// CHECK: @{{str[0-9]+}}("none\00")
module {
  func.func @main(%x: tensor<2x3xf32>, %img: tensor<1x2x5x5xf32>) -> (tensor<2x4xf32>, tensor<1x4x5x5xf32>) {
    %w = hpc.weight "w" : tensor<3x4xf32> = dense<1.0>
    %b = hpc.weight "b" : tensor<4xf32> = dense<1.0>
    %0 = hpc.gemm %x, %w, %b {activation = "gelu_tanh"} : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %k = hpc.weight "k" : tensor<4x2x1x1xf32> = dense<1.0>
    %1 = hpc.conv %img, %k {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x5x5xf32>
    return %0, %1 : tensor<2x4xf32>, tensor<1x4x5x5xf32>
  }
}

// -----

// A result that is also read later keeps its bytes; two results of one op
// never overlap; unused results still get space (kernels write them).
// CHECK-LABEL: module
// CHECK: @hpc_manifest("{\22arena_bytes\22:192,
module {
  func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %v, %i = hpc.top_k %x {k = 4 : i64} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xi64>)
    %e = hpc.exp %v : tensor<4x4xf32>
    return %e : tensor<4x4xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'hpc.weight' op weight 'w' has no data (was the model imported with --shapes-only?)}}
    %w = hpc.weight "w" : tensor<4xf32>
    %0 = hpc.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'math.exp' op cannot be compiled (only hpc and dist ops are)}}
    %0 = math.exp %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{no func.func @main to compile}}
module {
  func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// A sharding annotation is gone after dist-partition; one left over has no
// kernel.
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.annotate' op has no runtime kernel (run dist-partition first)}}
    %y = dist.annotate %x : tensor<4xf32> to #dist.sharding<[[tp]]>
    return %y : tensor<4xf32>
  }
}

// -----

// A collective's axes become mesh indices: [count, indices...,
// ranks_per_node (0: flat), reduction].
// CHECK-LABEL: module attributes {dist.mesh
// CHECK: llvm.call @hpcrt_all_reduce(
// CHECK: llvm.mlir.global internal constant @{{iattrs[0-9]+}}(dense<[1, 1, 0, 0]> : tensor<4xi64>)
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = dist.all_reduce %x over ["tp"] sum : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// In two levels over nodes of 2 ranks (dist-hierarchical): the node size
// in its place; reduce_scatter's after its dim.
// CHECK-LABEL: module attributes {dist.mesh
// CHECK: llvm.mlir.global internal constant @{{iattrs[0-9]+}}(dense<[1, 0, 2, 4]> : tensor<4xi64>)
// CHECK: llvm.mlir.global internal constant @{{iattrs[0-9]+}}(dense<[1, 0, 0, 2, 0]> : tensor<5xi64>)
module attributes {dist.mesh = #dist.mesh<dp = 4 : inter_node>} {
  func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<1xf32>) {
    %y = dist.all_reduce %x over ["dp"] avg {ranks_per_node = 2 : i64} : tensor<4xf32> -> tensor<4xf32>
    %z = dist.reduce_scatter %x over ["dp"] sum dim 0 {ranks_per_node = 2 : i64} : tensor<4xf32> -> tensor<1xf32>
    return %y, %z : tensor<4xf32>, tensor<1xf32>
  }
}

// -----

// Asynchronous forms: start and wait are kernels; the token is the
// collective's buffer and the wait's result a view of it. The start reads
// its operand until the wait, so neg (between them) cannot take relu's
// bytes. Tensors: 0 input, 1 relu @0, 2 token @64, 3 neg @128, 4 the
// wait's view @64, 5 add @0 (relu is dead by then).
// CHECK-LABEL: module attributes {dist.mesh
// CHECK: \22tensors\22:[{\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22input\22,\22shape\22:[4]},{\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[4]},{\22dtype\22:1,\22index\22:0,\22offset\22:64,\22region\22:\22arena\22,\22shape\22:[4]},{\22dtype\22:1,\22index\22:0,\22offset\22:128,\22region\22:\22arena\22,\22shape\22:[4]},{\22dtype\22:1,\22index\22:0,\22offset\22:64,\22region\22:\22arena\22,\22shape\22:[4]},{\22dtype\22:1,\22index\22:0,\22offset\22:0,\22region\22:\22arena\22,\22shape\22:[4]}]
// CHECK: llvm.call @hpcrt_relu(
// CHECK: llvm.call @hpcrt_all_reduce_start(
// CHECK: llvm.call @hpcrt_neg(
// CHECK: llvm.call @hpcrt_wait(
// CHECK: llvm.call @hpcrt_add(
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = hpc.relu %x : tensor<4xf32>
    %t = dist.all_reduce_start %a over ["tp"] sum : tensor<4xf32> -> !dist.token<tensor<4xf32>>
    %b = hpc.neg %x : tensor<4xf32>
    %y = dist.wait %t : !dist.token<tensor<4xf32>> -> tensor<4xf32>
    %c = hpc.add %y, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// -----

// A weight's piece along its outermost dimension is a view at a
// rank-dependent offset (tensor 3: rank_axes [tp], 64 bytes per tp index),
// with no kernel; a piece of an inner dimension is not contiguous and is
// still copied by hpcrt_all_slice.
// CHECK-LABEL: module attributes {dist.mesh
// CHECK: {\22dtype\22:1,\22index\22:0,\22offset\22:0,\22rank_axes\22:[1],\22rank_stride\22:64,\22region\22:\22weights\22,\22shape\22:[2,8]}
// CHECK: llvm.call @hpcrt_all_slice(
// CHECK-NOT: llvm.call @hpcrt_all_slice(
// CHECK: llvm.call @hpcrt_add(
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 2 : intra_node>} {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x2xf32> {
    %w = hpc.weight "w" : tensor<4x8xf32> = dense<1.0>
    %v = hpc.weight "v" : tensor<8x4xf32> = dense<2.0>
    %ws = dist.all_slice %w over ["tp"] dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
    %vs = dist.all_slice %v over ["tp"] dim 1 : tensor<8x4xf32> -> tensor<8x2xf32>
    %a = hpc.add %x, %ws : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %b = hpc.matmul %a, %vs : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
    return %b : tensor<2x2xf32>
  }
}
