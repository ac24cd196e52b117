// RUN: hpc-opt %s --hpc-autodiff=recompute=full 2>%t.full | FileCheck %s --check-prefix=FULL
// RUN: FileCheck %s --check-prefix=FULL-STATS < %t.full
// RUN: hpc-opt %s --hpc-autodiff=recompute=selective 2>%t.sel | FileCheck %s --check-prefix=SEL
// RUN: FileCheck %s --check-prefix=SEL-STATS < %t.sel
// RUN: hpc-opt %s --hpc-autodiff | FileCheck %s --check-prefix=NONE
// RUN: not hpc-opt %s --hpc-autodiff=recompute=some 2>&1 | FileCheck %s --check-prefix=BAD

// hpc-autodiff's recompute option on four residual layers
// h' = h + softmax(h @ w). The backward of layer i reads h_i (the matmul's
// input) and softmax_i (its output). Numerics: test/Train/recompute.test.

// full: the residual stream is the only value live between layers; one
// checkpoint (h2) splits the needed activations in about sqrt halves. The
// last segment (layers 2 and 3), whose backward runs first, keeps its
// values; layers 0 and 1 are computed again from the checkpoint's side
// (x, a block argument, and their weights) right before their backward,
// marked hpc.recomputed, and the backward reads the copies.
// FULL-STATS: hpc-autodiff: recompute=full: 1 checkpoints, 1 segments recomputed (5 forward ops computed again), 1536 bytes of activations not kept for the backward
// FULL: module attributes {hpc.recompute = "full"}
// FULL: %[[S0:.+]] = hpc.softmax
// FULL: %[[H1:.+]] = hpc.add %arg0, %[[S0]]
// FULL: %[[S1:.+]] = hpc.softmax
// FULL: %[[H2:.+]] = hpc.add %[[H1]], %[[S1]]
// FULL: %[[S2:.+]] = hpc.softmax
// FULL: %[[H3:.+]] = hpc.add %[[H2]], %[[S2]]
// FULL: %[[S3:.+]] = hpc.softmax
// FULL: hpc.reduce_sum
// FULL-NOT: hpc.recomputed
// The last segment's backward reads the forward's own values.
// FULL: hpc.mul %{{.+}}, %[[S3]]
// FULL: hpc.transpose %[[H3]]
// FULL: hpc.mul %{{.+}}, %[[S2]]
// FULL: hpc.transpose %[[H2]]
// FULL: %[[M0:.+]] = hpc.matmul %arg0, %{{.+}} {hpc.recomputed}
// FULL-NEXT: %[[R0:.+]] = hpc.softmax %[[M0]] {axis = 1 : i64, hpc.recomputed}
// FULL-NEXT: %[[RH1:.+]] = hpc.add %arg0, %[[R0]] {hpc.recomputed}
// FULL-NEXT: %[[M1:.+]] = hpc.matmul %[[RH1]], %{{.+}} {hpc.recomputed}
// FULL-NEXT: %[[R1:.+]] = hpc.softmax %[[M1]] {axis = 1 : i64, hpc.recomputed}
// FULL-NOT: hpc.recomputed
// FULL: hpc.mul %{{.+}}, %[[R1]]
// FULL: hpc.transpose %[[RH1]]
// FULL: hpc.mul %{{.+}}, %[[R0]]
// FULL-NOT: %[[S0]]{{[^0-9]}}
// FULL-NOT: %[[S1]]{{[^0-9]}}
// FULL: return

// selective: the weight products (the matmuls) are kept; each softmax the
// backward reads is computed again from its kept input before that layer's
// backward, except the last layer's (its backward comes first) and layer
// 0's, which is a cut value here (x is a block argument, so softmax_0 alone
// is live after it).
// SEL-STATS: hpc-autodiff: recompute=selective: 2 segments recomputed (2 forward ops computed again), 1024 bytes of activations not kept for the backward
// SEL: module attributes {hpc.recompute = "selective"}
// SEL: %[[P1:.+]] = hpc.matmul %{{.+}}, %1
// SEL: %[[P2:.+]] = hpc.matmul %{{.+}}, %2
// SEL: %[[P3:.+]] = hpc.matmul %{{.+}}, %3
// SEL: %[[S3:.+]] = hpc.softmax %[[P3]]
// SEL-NOT: hpc.recomputed
// SEL: hpc.mul %{{.+}}, %[[S3]]
// SEL: %[[R2:.+]] = hpc.softmax %[[P2]] {axis = 1 : i64, hpc.recomputed}
// SEL: hpc.mul %{{.+}}, %[[R2]]
// SEL: %[[R1:.+]] = hpc.softmax %[[P1]] {axis = 1 : i64, hpc.recomputed}
// SEL: hpc.mul %{{.+}}, %[[R1]]
// SEL-NOT: hpc.recomputed

// NONE-NOT: hpc.recompute

// BAD: error: recompute must be none, full or selective, got 'some'

func.func @main(%x: tensor<8x16xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}) {
  %w0 = hpc.weight "w0" : tensor<16x16xf32> = dense<0.1>
  %w1 = hpc.weight "w1" : tensor<16x16xf32> = dense<0.2>
  %w2 = hpc.weight "w2" : tensor<16x16xf32> = dense<0.3>
  %w3 = hpc.weight "w3" : tensor<16x16xf32> = dense<0.4>
  %p0 = hpc.matmul %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = hpc.softmax %p0 {axis = 1 : i64} : tensor<8x16xf32>
  %h1 = hpc.add %x, %a0 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %p1 = hpc.matmul %h1, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = hpc.softmax %p1 {axis = 1 : i64} : tensor<8x16xf32>
  %h2 = hpc.add %h1, %a1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %p2 = hpc.matmul %h2, %w2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a2 = hpc.softmax %p2 {axis = 1 : i64} : tensor<8x16xf32>
  %h3 = hpc.add %h2, %a2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %p3 = hpc.matmul %h3, %w3 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a3 = hpc.softmax %p3 {axis = 1 : i64} : tensor<8x16xf32>
  %h4 = hpc.add %h3, %a3 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %l = hpc.reduce_sum %h4 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
