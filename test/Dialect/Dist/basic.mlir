// RUN: hpc-opt %s | hpc-opt | FileCheck %s
// RUN: hpc-opt %s --mlir-print-op-generic | hpc-opt | FileCheck %s

// CHECK: module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 4 : intra_node>}
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 4 : intra_node>} {
  // CHECK-LABEL: func @annotations
  func.func @annotations(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
    // CHECK: dist.annotate %{{.+}} : tensor<8x16xf32> to #dist.sharding<{{\[\[}}dp], [tp]]>
    %0 = dist.annotate %x : tensor<8x16xf32> to #dist.sharding<[[dp], [tp]]>
    // CHECK: dist.annotate %{{.+}} : tensor<8x16xf32> to #dist.sharding<{{\[\[}}dp, tp], []]>
    %1 = dist.annotate %0 : tensor<8x16xf32> to #dist.sharding<[[dp, tp], []]>
    // CHECK: dist.annotate %{{.+}} : tensor<8x16xf32> to #dist.sharding<{{\[\[}}dp], []], partial = sum[tp]>
    %2 = dist.annotate %1 : tensor<8x16xf32> to #dist.sharding<[[dp], []], partial = sum[tp]>
    // CHECK: dist.reshard %{{.+}} : tensor<8x16xf32> from #dist.sharding<{{\[\[}}dp], []], partial = sum[tp]> to #dist.sharding<{{\[\[}}dp], [tp]]>
    %3 = dist.reshard %2 : tensor<8x16xf32> from #dist.sharding<[[dp], []], partial = sum[tp]> to #dist.sharding<[[dp], [tp]]>
    // CHECK: dist.annotate %{{.+}} : tensor<8x16xf32> to #dist.sharding<{{\[\[}}], []]>
    %4 = dist.annotate %3 : tensor<8x16xf32> to #dist.sharding<[[], []]>
    return %4 : tensor<8x16xf32>
  }

  // CHECK-LABEL: func @collectives
  func.func @collectives(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x32xf32>, tensor<16x2xf32>, tensor<4x8xf32>) {
    // CHECK: dist.all_reduce %{{.+}} over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %0 = dist.all_reduce %x over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    // CHECK: dist.reduce_scatter %{{.+}} over ["tp"] max dim 0 : tensor<4x8xf32> -> tensor<1x8xf32>
    %1 = dist.reduce_scatter %x over ["tp"] max dim 0 : tensor<4x8xf32> -> tensor<1x8xf32>
    // CHECK: dist.all_gather %{{.+}} over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x32xf32>
    %2 = dist.all_gather %x over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x32xf32>
    // CHECK: dist.all_to_all %{{.+}} over ["dp", "tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<32x1xf32>
    %3 = dist.all_to_all %x over ["dp", "tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<32x1xf32>
    // CHECK: dist.all_to_all %{{.+}} over ["dp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    %4 = dist.all_to_all %x over ["dp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    // CHECK: dist.all_to_all %{{.+}} over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
    %5 = dist.all_to_all %x over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
    // CHECK: dist.all_slice %{{.+}} over ["dp", "tp"] dim 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %7 = dist.all_slice %x over ["dp", "tp"] dim 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    // CHECK: dist.all_reduce %{{.+}} over ["dp"] sum {compression = #dist.int8_block<block = 256>} : tensor<4x8xf32> -> tensor<4x8xf32>
    %6 = dist.all_reduce %x over ["dp"] sum {compression = #dist.int8_block} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %0, %1, %2, %5, %6 : tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x32xf32>, tensor<16x2xf32>, tensor<4x8xf32>
  }

  // Codecs: PowerSGD (its state: Q 8x2, then the 4x8 residual; without
  // error feedback the Q alone), top-k (its residual).
  // CHECK-LABEL: func @codecs
  func.func @codecs(%x: tensor<4x8xf32>, %v: tensor<36xf32>, %q: tensor<48xf32>, %q2: tensor<16xf32>, %e: tensor<32xf32>) -> (tensor<4x8xf32>, tensor<36xf32>, tensor<4x8xf32>) {
    // CHECK: dist.all_reduce %{{.+}} over ["dp"] avg feedback %{{.+}} : tensor<48xf32> {compression = #dist.powersgd<rank = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
    %0 = dist.all_reduce %x over ["dp"] avg feedback %q : tensor<48xf32> {compression = #dist.powersgd<rank = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
    // CHECK: {compression = #dist.powersgd<rank = 2, pieces = [4x8, 4], error_feedback = false>}
    %1 = dist.all_reduce %v over ["dp"] sum feedback %q2 : tensor<16xf32> {compression = #dist.powersgd<rank = 2, pieces = [4x8, 4], error_feedback = false>} : tensor<36xf32> -> tensor<36xf32>
    // CHECK: {compression = #dist.topk<ratio = 1.000000e-01>}
    %2 = dist.all_reduce %x over ["dp"] sum feedback %e : tensor<32xf32> {compression = #dist.topk<ratio = 0.1>} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %0, %1, %2 : tensor<4x8xf32>, tensor<36xf32>, tensor<4x8xf32>
  }

  // CHECK-LABEL: func @async
  func.func @async(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // CHECK: %[[T:.+]] = dist.all_reduce_start %{{.+}} over ["tp"] avg : tensor<4x8xf32> -> !dist.token<tensor<4x8xf32>>
    %t = dist.all_reduce_start %x over ["tp"] avg : tensor<4x8xf32> -> !dist.token<tensor<4x8xf32>>
    // CHECK: %[[G:.+]] = dist.all_gather_start %{{.+}} over ["dp"] dim 0 : tensor<4x8xf32> -> !dist.token<tensor<8x8xf32>>
    %g = dist.all_gather_start %x over ["dp"] dim 0 : tensor<4x8xf32> -> !dist.token<tensor<8x8xf32>>
    // CHECK: dist.reduce_scatter_start %{{.+}} over ["tp"] sum dim 1 : tensor<4x8xf32> -> !dist.token<tensor<4x2xf32>>
    %r = dist.reduce_scatter_start %x over ["tp"] sum dim 1 : tensor<4x8xf32> -> !dist.token<tensor<4x2xf32>>
    // CHECK: dist.all_to_all_start
    %a = dist.all_to_all_start %x over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> !dist.token<tensor<16x2xf32>>
    // CHECK: dist.broadcast_start
    %b = dist.broadcast_start %x over ["tp"] root 3 : tensor<4x8xf32> -> !dist.token<tensor<4x8xf32>>
    // CHECK: dist.wait %[[T]] : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
    %y = dist.wait %t : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
    %y2 = dist.wait %g : !dist.token<tensor<8x8xf32>> -> tensor<8x8xf32>
    %y3 = dist.wait %r : !dist.token<tensor<4x2xf32>> -> tensor<4x2xf32>
    %y4 = dist.wait %a : !dist.token<tensor<16x2xf32>> -> tensor<16x2xf32>
    %y5 = dist.wait %b : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }

  // CHECK-LABEL: func @point_to_point
  func.func @point_to_point(%x: tensor<4xf32>) -> tensor<4xf32> {
    // CHECK: dist.send %{{.+}} along "dp" offset 1 : tensor<4xf32>
    dist.send %x along "dp" offset 1 : tensor<4xf32>
    // CHECK: %[[S:.+]] = dist.send_start %{{.+}} along "dp" offset -1 : tensor<4xf32> -> !dist.token
    %s = dist.send_start %x along "dp" offset -1 : tensor<4xf32> -> !dist.token
    // CHECK: dist.wait %[[S]] : !dist.token
    dist.wait %s : !dist.token
    // CHECK: dist.recv along "tp" offset 3 : tensor<4xf32>
    %r = dist.recv along "tp" offset 3 : tensor<4xf32>
    // CHECK: dist.recv_start along "dp" offset 1 : !dist.token<tensor<4xf32>>
    %t = dist.recv_start along "dp" offset 1 : !dist.token<tensor<4xf32>>
    %y = dist.wait %t : !dist.token<tensor<4xf32>> -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
