// RUN: hpc-opt %s -split-input-file --dist-bucket | FileCheck %s
// RUN: hpc-opt %s -split-input-file --dist-bucket=bucket-bytes=1048576 | FileCheck %s
// RUN: hpc-opt %s -split-input-file --dist-bucket | FileCheck %s --check-prefix=BYTES
// RUN: hpc-opt %s -split-input-file --dist-bucket | FileCheck %s --check-prefix=CHAIN
// RUN: hpc-opt %s -split-input-file --dist-bucket=bucket-bytes=160 | FileCheck %s --check-prefix=FITS
// RUN: hpc-opt %s -split-input-file --dist-bucket=bucket-bytes=150 | FileCheck %s --check-prefix=OFF
// RUN: hpc-opt %s -split-input-file --dist-bucket=bucket-bytes=0 | FileCheck %s --check-prefix=OFF
// RUN: hpc-opt %s -split-input-file --dist-bucket | FileCheck %s --check-prefix=SCATTER

// Gradient all-reduces whose results are needed only at the end fuse into
// one, in the order their operands are ready, right after the last one; the
// reshape that re-lays out a result for its use follows the bucket. The
// all-reduce the next op consumes at once stays alone, and so do other axes
// and element types. Bytes per rank are recounted (ring of 2: the bucket's
// bytes: 40 floats in the bucket, 4 alone, and the bf16 one's 16 bytes: 192).
// BYTES: dist.bytes_per_rank = 192 : i64

// CHECK-LABEL: func.func @main
// CHECK: %[[A:.+]] = hpc.relu %arg0 : tensor<4x8xf32>
// CHECK: %[[L:.+]] = dist.all_reduce %{{.+}} over ["dp"] sum : tensor<4xf32>
// CHECK-NEXT: hpc.neg %[[L]]
// CHECK: %[[B:.+]] = hpc.relu %arg1 : tensor<8xf32>
// CHECK-NEXT: %[[FA:.+]] = hpc.reshape %[[A]] {shape = array<i64: 32>}
// CHECK-NEXT: %[[C:.+]] = hpc.concat %[[FA]], %[[B]] {axis = 0 : i64} : (tensor<32xf32>, tensor<8xf32>) -> tensor<40xf32>
// CHECK-NEXT: %[[R:.+]] = dist.all_reduce %[[C]] over ["dp"] sum : tensor<40xf32> -> tensor<40xf32>
// CHECK-NEXT: %[[S:.+]]:2 = hpc.split %[[R]] {axis = 0 : i64, sizes = array<i64: 32, 8>}
// CHECK-NEXT: %[[RA:.+]] = hpc.reshape %[[S]]#0 {shape = array<i64: 4, 8>}
// CHECK-NEXT: hpc.transpose %[[RA]]
// CHECK: dist.all_reduce %{{.+}} over ["dp"] sum : tensor<8xbf16>
// CHECK-NOT: dist.all_reduce
// CHECK: return

// At most 160 bytes a bucket: the 128-byte gradient and the 32-byte one fit
// together exactly; at 150 (or 0: off) nothing fits with another.
// FITS: dist.all_reduce %{{.+}} : tensor<40xf32>
// OFF-NOT: hpc.concat

module attributes {dist.bytes_per_rank = 0 : i64, dist.mesh = #dist.mesh<dp = 2 : intra_node>} {
  func.func @main(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %z: tensor<4xf32>, %h: tensor<8xbf16>)
      -> (tensor<8x4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xbf16>) {
    %ga = hpc.relu %x : tensor<4x8xf32>
    %ra = dist.all_reduce %ga over ["dp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %ta = hpc.transpose %ra {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %gl = hpc.relu %z : tensor<4xf32>
    %rl = dist.all_reduce %gl over ["dp"] sum : tensor<4xf32> -> tensor<4xf32>
    %nl = hpc.neg %rl : tensor<4xf32>
    %gb = hpc.relu %y : tensor<8xf32>
    %rb = dist.all_reduce %gb over ["dp"] sum : tensor<8xf32> -> tensor<8xf32>
    %gh = hpc.relu %h : tensor<8xbf16>
    %rh = dist.all_reduce %gh over ["dp"] sum : tensor<8xbf16> -> tensor<8xbf16>
    %sum = hpc.add %ta, %ta : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %sum, %rb, %nl, %rh : tensor<8x4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xbf16>
  }
}

// -----

// A reduction of a reduction (over another axis) stays as it is.
// CHAIN-LABEL: func.func @chain
// CHAIN: %[[A:.+]] = dist.all_reduce %arg0 over ["dp"] sum : tensor<8xf32>
// CHAIN-NEXT: dist.all_reduce %[[A]] over ["tp"] sum : tensor<8xf32>
// CHAIN-NOT: hpc.concat
module attributes {dist.mesh = #dist.mesh<dp = 2 : intra_node, tp = 2 : intra_node>} {
  func.func @chain(%g: tensor<8xf32>, %h: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %a = dist.all_reduce %g over ["dp"] sum : tensor<8xf32> -> tensor<8xf32>
    %b = dist.all_reduce %a over ["tp"] sum : tensor<8xf32> -> tensor<8xf32>
    %c = dist.all_reduce %h over ["dp"] sum : tensor<8xf32> -> tensor<8xf32>
    return %b, %c : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// ZeRO-2's reduce-scatters into gradient rows bucket too: each member laid
// out as [2, n/2] (row r: rank r's rows), concatenated along dim 1, one
// reduce_scatter, and this rank's row split back into its rows of each.
// CHAIN: func.func @rows
// SCATTER-LABEL: func.func @rows
// SCATTER: %[[A:.+]] = hpc.reshape %{{.+}} {shape = array<i64: 2, 16>} : (tensor<4x8xf32>) -> tensor<2x16xf32>
// SCATTER: %[[B:.+]] = hpc.reshape %{{.+}} {shape = array<i64: 2, 4>} : (tensor<8xf32>) -> tensor<2x4xf32>
// SCATTER: %[[C:.+]] = hpc.concat %[[A]], %[[B]] {axis = 1 : i64} : (tensor<2x16xf32>, tensor<2x4xf32>) -> tensor<2x20xf32>
// SCATTER: %[[R:.+]] = dist.reduce_scatter %[[C]] over ["dp"] sum dim 0 : tensor<2x20xf32> -> tensor<1x20xf32>
// SCATTER: %[[F:.+]] = hpc.reshape %[[R]] {shape = array<i64: 20>}
// SCATTER: %[[S:.+]]:2 = hpc.split %[[F]] {axis = 0 : i64, sizes = array<i64: 16, 4>}
// SCATTER: hpc.reshape %[[S]]#0 {shape = array<i64: 2, 8>} : (tensor<16xf32>) -> tensor<2x8xf32>
// SCATTER: hpc.neg %[[S]]#1 : tensor<4xf32>
// SCATTER-NOT: dist.reduce_scatter
module attributes {dist.bytes_per_rank = 0 : i64, dist.mesh = #dist.mesh<dp = 2 : intra_node>} {
  func.func @rows(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>) {
    %ga = hpc.relu %x : tensor<4x8xf32>
    %ra = dist.reduce_scatter %ga over ["dp"] sum dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
    %gb = hpc.relu %y : tensor<8xf32>
    %rb = dist.reduce_scatter %gb over ["dp"] sum dim 0 : tensor<8xf32> -> tensor<4xf32>
    %na = hpc.neg %ra : tensor<2x8xf32>
    %nb = hpc.neg %rb : tensor<4xf32>
    return %na, %nb : tensor<2x8xf32>, tensor<4xf32>
  }
}
