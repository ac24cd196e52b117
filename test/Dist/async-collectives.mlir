// RUN: hpc-opt %s --dist-async-collectives | FileCheck %s

// Each collective starts as early as its operand allows and is waited for
// right before its first use, so the relu runs while the all_reduce moves
// data; a result only returned is waited for before the return. Starts
// keep program order.

// CHECK-LABEL: func.func @main
// CHECK: %[[T:.+]] = dist.all_reduce_start %arg0 over ["tp"] sum : tensor<4x8xf32> -> !dist.token<tensor<4x8xf32>>
// CHECK: %[[G:.+]] = dist.all_gather_start %arg0 over ["tp"] dim 0 : tensor<4x8xf32> -> !dist.token<tensor<8x8xf32>>
// CHECK: %[[R:.+]] = hpc.relu %arg0
// CHECK: %[[S:.+]] = dist.wait %[[T]] : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
// CHECK: %[[A:.+]] = hpc.add %[[S]], %[[R]]
// CHECK: %[[GW:.+]] = dist.wait %[[G]] : !dist.token<tensor<8x8xf32>> -> tensor<8x8xf32>
// CHECK: return %[[A]], %[[GW]]
// CHECK-NOT: dist.all_reduce %
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
    %s = dist.all_reduce %x over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %g = dist.all_gather %x over ["tp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
    %r = hpc.relu %x : tensor<4x8xf32>
    %a = hpc.add %s, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %a, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }

  // A collective placed just before its user starts right after its
  // operand is computed, ahead of the unrelated neg.
  // CHECK-LABEL: func.func @late
  // CHECK: %[[R:.+]] = hpc.relu %arg0
  // CHECK-NEXT: %[[T:.+]] = dist.all_reduce_start %[[R]]
  // CHECK-NEXT: %[[N:.+]] = hpc.neg %arg0
  // CHECK-NEXT: %[[S:.+]] = dist.wait %[[T]]
  // CHECK-NEXT: hpc.add %[[S]], %[[N]]
  func.func @late(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %r = hpc.relu %x : tensor<4x8xf32>
    %n = hpc.neg %x : tensor<4x8xf32>
    %s = dist.all_reduce %r over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %a = hpc.add %s, %n : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %a : tensor<4x8xf32>
  }

  // An all_to_all (expert parallelism's exchange) also goes ahead of the
  // kernels before it that it does not need: the exp and the matmul on
  // another input (a weight gradient) run while it moves; the relu it
  // needs stays before it.
  // CHECK-LABEL: func.func @exchange
  // CHECK: %[[R:.+]] = hpc.relu %arg0
  // CHECK-NEXT: %[[T:.+]] = dist.all_to_all_start %[[R]] over ["tp"] split 1 concat 0
  // CHECK-NEXT: %[[E:.+]] = hpc.exp %arg1
  // CHECK-NEXT: %[[M:.+]] = hpc.matmul %[[E]], %arg1
  // CHECK-NEXT: %[[W:.+]] = dist.wait %[[T]]
  func.func @exchange(%x: tensor<4x8xf32>, %y: tensor<8x8xf32>) -> (tensor<8x4xf32>, tensor<8x8xf32>) {
    %e = hpc.exp %y : tensor<8x8xf32>
    %r = hpc.relu %x : tensor<4x8xf32>
    %m = hpc.matmul %e, %y : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %t = dist.all_to_all %r over ["tp"] split 1 concat 0 : tensor<4x8xf32> -> tensor<8x4xf32>
    %n = hpc.neg %t : tensor<8x4xf32>
    return %n, %m : tensor<8x4xf32>, tensor<8x8xf32>
  }

  // The reshape and transpose that only re-lay out a reduced gradient for
  // its real user follow the wait there, so the all_reduce runs under the
  // matmul before it.
  // CHECK-LABEL: func.func @relayouts
  // CHECK: %[[T:.+]] = dist.all_reduce_start %arg0
  // CHECK-NEXT: %[[M:.+]] = hpc.matmul %arg1, %arg2
  // CHECK-NEXT: %[[S:.+]] = dist.wait %[[T]]
  // CHECK-NEXT: %[[RS:.+]] = hpc.reshape %[[S]]
  // CHECK-NEXT: %[[TR:.+]] = hpc.transpose %[[RS]]
  // CHECK-NEXT: hpc.add %[[TR]], %[[M]]
  func.func @relayouts(%g: tensor<1x4x8xf32>, %x: tensor<8x8xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %s = dist.all_reduce %g over ["tp"] sum : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
    %r = hpc.reshape %s {shape = array<i64: 4, 8>} : (tensor<1x4x8xf32>) -> tensor<4x8xf32>
    %t = hpc.transpose %r {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %m = hpc.matmul %x, %y : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %a = hpc.add %t, %m : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %a : tensor<8x4xf32>
  }
}
