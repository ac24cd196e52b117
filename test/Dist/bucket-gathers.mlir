// RUN: hpc-opt %s --dist-bucket | FileCheck %s

// ZeRO-1/2's gathers of updated rows (dimension 0 pieces) share a gather:
// the pieces flattened and concatenated, one gather, the [G, n] result
// split by columns (row r is rank r's piece of every member) and laid out
// as each member's result. It sits after the last write of a member's rows
// (an update in place, here hpc.assign), never before it; a gather whose
// rows are written after it stays where it is, as does a ZeRO-3 prefetch.

// CHECK-LABEL: func.func @main
// CHECK: hpc.assign %arg0, %arg3
// CHECK: hpc.assign %arg1, %{{.+}}
// CHECK-NEXT: %[[FA:.+]] = hpc.reshape %arg0 {shape = array<i64: 8>} : (tensor<2x4xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[C:.+]] = hpc.concat %[[FA]], %{{.+}} {axis = 0 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[G:.+]] = dist.all_gather %[[C]] over ["dp"] dim 0 : tensor<16xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[R:.+]] = hpc.reshape %[[G]] {shape = array<i64: 2, 16>} : (tensor<32xf32>) -> tensor<2x16xf32>
// CHECK-NEXT: %[[S:.+]]:2 = hpc.split %[[R]] {axis = 1 : i64, sizes = array<i64: 8, 8>}
// CHECK-NEXT: hpc.reshape %[[S]]#0 {shape = array<i64: 4, 4>} : (tensor<2x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: hpc.reshape %[[S]]#1 {shape = array<i64: 16>} : (tensor<2x8xf32>) -> tensor<16xf32>
// The gather whose rows are written after it, and the prefetch: alone.
// CHECK: dist.all_gather %arg2 over ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: hpc.assign %arg2, %arg4
// CHECK: dist.all_gather %arg5 over ["dp"] dim 0 {dist.prefetch} : tensor<4xf32> -> tensor<8xf32>
// CHECK-NOT: dist.all_gather
// CHECK: return
module attributes {dist.bytes_per_rank = 0 : i64, dist.mesh = #dist.mesh<dp = 2 : intra_node>} {
  func.func @main(%a: tensor<2x4xf32>, %b: tensor<8xf32>, %c: tensor<4xf32>, %new: tensor<2x4xf32>,
                  %newc: tensor<4xf32>, %d: tensor<4xf32>)
      -> (tensor<4x4xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>) {
    hpc.assign %a, %new : tensor<2x4xf32>, tensor<2x4xf32>
    %ga = dist.all_gather %a over ["dp"] dim 0 : tensor<2x4xf32> -> tensor<4x4xf32>
    %nb = hpc.reshape %new {shape = array<i64: 8>} : (tensor<2x4xf32>) -> tensor<8xf32>
    hpc.assign %b, %nb : tensor<8xf32>, tensor<8xf32>
    %gb = dist.all_gather %b over ["dp"] dim 0 : tensor<8xf32> -> tensor<16xf32>
    %gc = dist.all_gather %c over ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
    hpc.assign %c, %newc : tensor<4xf32>, tensor<4xf32>
    %gd = dist.all_gather %d over ["dp"] dim 0 {dist.prefetch} : tensor<4xf32> -> tensor<8xf32>
    return %ga, %gb, %gc, %gd : tensor<4x4xf32>, tensor<16xf32>, tensor<8xf32>, tensor<8xf32>
  }
}
