// RUN: hpc-opt %s --split-input-file --hpc-route-experts | FileCheck %s
// RUN: hpc-opt %s --split-input-file --hpc-route-experts=capacity-factor=1.0 | FileCheck %s --check-prefix=CAP1
// RUN: hpc-opt %s --split-input-file --hpc-route-experts=capacity-factor=0.3 | FileCheck %s --check-prefix=CAPMIN
// RUN: not hpc-opt %s --split-input-file --hpc-route-experts=capacity-factor=-1 2>&1 | FileCheck %s --check-prefix=NEG

// A mixture of 4 experts, top-2 of 6 tokens, as exporters write it: the
// gate matrix [tokens, experts] built from top_k's indices, every expert on
// every token, the sum over experts weighted by the matrix. Routed: the
// experts' chain (bias add, GELU, both products) runs on the [4, C, .]
// buffers, and the dense dispatch is gone.
// CHECK-LABEL: func @dense_dispatch
// CHECK: %[[W:.+]], %[[I:.+]] = hpc.top_k
// CHECK: %[[G:.+]] = hpc.div %[[W]]
// CHECK: %[[S:.+]], %{{.+}} = hpc.moe_route %[[I]] {capacity = 6 : i64, num_experts = 4 : i64} : (tensor<6x2xi64>) -> (tensor<6x2xi64>, tensor<4xi64>)
// CHECK: %[[B:.+]] = hpc.moe_dispatch %arg0, %[[S]] {capacity = 6 : i64, num_experts = 4 : i64} : (tensor<6x4xf32>, tensor<6x2xi64>) -> tensor<4x6x4xf32>
// CHECK: %[[H:.+]] = hpc.matmul %[[B]], %{{.+}} : (tensor<4x6x4xf32>, tensor<4x4x8xf32>) -> tensor<4x6x8xf32>
// CHECK: hpc.add %[[H]], %{{.+}} : (tensor<4x6x8xf32>, tensor<4x1x8xf32>) -> tensor<4x6x8xf32>
// CHECK: hpc.gelu
// CHECK: %[[Y:.+]] = hpc.matmul %{{.+}}, %{{.+}} : (tensor<4x6x8xf32>, tensor<4x8x4xf32>) -> tensor<4x6x4xf32>
// CHECK: %[[R:.+]] = hpc.moe_gather %[[Y]], %[[S]] : (tensor<4x6x4xf32>, tensor<6x2xi64>) -> tensor<6x2x4xf32>
// CHECK: %[[G3:.+]] = hpc.unsqueeze %[[G]] {axes = array<i64: 2>} : (tensor<6x2xf32>) -> tensor<6x2x1xf32>
// CHECK: %[[M:.+]] = hpc.mul %[[R]], %[[G3]]
// CHECK: %[[O:.+]] = hpc.reduce_sum %[[M]] {axes = array<i64: 1>, keepdims = false} : (tensor<6x2x4xf32>) -> tensor<6x4xf32>
// CHECK: return %[[O]]
// CHECK-NOT: hpc.equal
// CAP1-LABEL: func @dense_dispatch
// CAP1: hpc.moe_route %{{.+}} {capacity = 3 : i64, num_experts = 4 : i64}
// CAP1: hpc.matmul %{{.+}}, %{{.+}} : (tensor<4x3x4xf32>, tensor<4x4x8xf32>) -> tensor<4x3x8xf32>
// CAPMIN-LABEL: func @dense_dispatch
// CAPMIN: hpc.moe_route %{{.+}} {capacity = 1 : i64, num_experts = 4 : i64}
// NEG: moe-capacity-factor must be >= 0 (0: no token is dropped), not -1
func.func @dense_dispatch(%x: tensor<6x4xf32>, %router: tensor<4x4xf32>,
                          %w1: tensor<4x4x8xf32>, %b1: tensor<4x1x8xf32>,
                          %w2: tensor<4x8x4xf32>) -> tensor<6x4xf32> {
  %logits = hpc.matmul %x, %router : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %probs = hpc.softmax %logits {axis = -1 : i64} : tensor<6x4xf32>
  %w, %i = hpc.top_k %probs {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
  %wsum = hpc.reduce_sum %w {axes = array<i64: 1>} : (tensor<6x2xf32>) -> tensor<6x1xf32>
  %gates = hpc.div %w, %wsum : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
  %i3 = hpc.unsqueeze %i {axes = array<i64: 2>} : (tensor<6x2xi64>) -> tensor<6x2x1xi64>
  %ids = hpc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %hit = hpc.equal %i3, %ids : (tensor<6x2x1xi64>, tensor<4xi64>) -> tensor<6x2x4xi1>
  %hitf = hpc.cast %hit {to = f32} : tensor<6x2x4xi1> to tensor<6x2x4xf32>
  %g3 = hpc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<6x2xf32>) -> tensor<6x2x1xf32>
  %hw = hpc.mul %hitf, %g3 : (tensor<6x2x4xf32>, tensor<6x2x1xf32>) -> tensor<6x2x4xf32>
  %matrix = hpc.reduce_sum %hw {axes = array<i64: 1>, keepdims = false} : (tensor<6x2x4xf32>) -> tensor<6x4xf32>
  %x3 = hpc.unsqueeze %x {axes = array<i64: 0>} : (tensor<6x4xf32>) -> tensor<1x6x4xf32>
  %h = hpc.matmul %x3, %w1 : (tensor<1x6x4xf32>, tensor<4x4x8xf32>) -> tensor<4x6x8xf32>
  %hb = hpc.add %h, %b1 : (tensor<4x6x8xf32>, tensor<4x1x8xf32>) -> tensor<4x6x8xf32>
  %a = hpc.gelu %hb : tensor<4x6x8xf32>
  %y = hpc.matmul %a, %w2 : (tensor<4x6x8xf32>, tensor<4x8x4xf32>) -> tensor<4x6x4xf32>
  %mt = hpc.transpose %matrix {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %m3 = hpc.unsqueeze %mt {axes = array<i64: 2>} : (tensor<4x6xf32>) -> tensor<4x6x1xf32>
  %yw = hpc.mul %y, %m3 : (tensor<4x6x4xf32>, tensor<4x6x1xf32>) -> tensor<4x6x4xf32>
  %out = hpc.reduce_sum %yw {axes = array<i64: 0>, keepdims = false} : (tensor<4x6x4xf32>) -> tensor<6x4xf32>
  return %out : tensor<6x4xf32>
}

// -----

// The experts mix tokens (a softmax along them): routing would change the
// result, so the layer stays dense.
// CHECK-LABEL: func @experts_mix_tokens
// CHECK-NOT: hpc.moe_route
// CHECK: hpc.equal
func.func @experts_mix_tokens(%x: tensor<6x4xf32>, %probs: tensor<6x4xf32>,
                              %w1: tensor<4x4x4xf32>) -> tensor<6x4xf32> {
  %w, %i = hpc.top_k %probs {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
  %i3 = hpc.unsqueeze %i {axes = array<i64: 2>} : (tensor<6x2xi64>) -> tensor<6x2x1xi64>
  %ids = hpc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %hit = hpc.equal %i3, %ids : (tensor<6x2x1xi64>, tensor<4xi64>) -> tensor<6x2x4xi1>
  %hitf = hpc.cast %hit {to = f32} : tensor<6x2x4xi1> to tensor<6x2x4xf32>
  %g3 = hpc.unsqueeze %w {axes = array<i64: 2>} : (tensor<6x2xf32>) -> tensor<6x2x1xf32>
  %hw = hpc.mul %hitf, %g3 : (tensor<6x2x4xf32>, tensor<6x2x1xf32>) -> tensor<6x2x4xf32>
  %matrix = hpc.reduce_sum %hw {axes = array<i64: 1>, keepdims = false} : (tensor<6x2x4xf32>) -> tensor<6x4xf32>
  %x3 = hpc.unsqueeze %x {axes = array<i64: 0>} : (tensor<6x4xf32>) -> tensor<1x6x4xf32>
  %h = hpc.matmul %x3, %w1 : (tensor<1x6x4xf32>, tensor<4x4x4xf32>) -> tensor<4x6x4xf32>
  %y = hpc.softmax %h {axis = 1 : i64} : tensor<4x6x4xf32>
  %mt = hpc.transpose %matrix {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %m3 = hpc.unsqueeze %mt {axes = array<i64: 2>} : (tensor<4x6xf32>) -> tensor<4x6x1xf32>
  %yw = hpc.mul %y, %m3 : (tensor<4x6x4xf32>, tensor<4x6x1xf32>) -> tensor<4x6x4xf32>
  %out = hpc.reduce_sum %yw {axes = array<i64: 0>, keepdims = false} : (tensor<4x6x4xf32>) -> tensor<6x4xf32>
  return %out : tensor<6x4xf32>
}

// -----

// A top_k that is no router (its indices returned, its values unused):
// nothing to route.
// CHECK-LABEL: func @not_a_router
// CHECK-NOT: hpc.moe_route
// CHECK: return
func.func @not_a_router(%p: tensor<6x4xf32>) -> tensor<6x2xi64> {
  %w, %i = hpc.top_k %p {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
  return %i : tensor<6x2xi64>
}

// -----

// The experts' chain mixes the experts (a softmax across them): a buffer's
// row c holds another token in each expert, so the layer stays dense.
// CHECK-LABEL: func @experts_mix_experts
// CHECK-NOT: hpc.moe_route
// CHECK: hpc.equal
func.func @experts_mix_experts(%x: tensor<6x4xf32>, %probs: tensor<6x4xf32>,
                               %w1: tensor<4x4x4xf32>) -> tensor<6x4xf32> {
  %w, %i = hpc.top_k %probs {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
  %i3 = hpc.unsqueeze %i {axes = array<i64: 2>} : (tensor<6x2xi64>) -> tensor<6x2x1xi64>
  %ids = hpc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %hit = hpc.equal %i3, %ids : (tensor<6x2x1xi64>, tensor<4xi64>) -> tensor<6x2x4xi1>
  %hitf = hpc.cast %hit {to = f32} : tensor<6x2x4xi1> to tensor<6x2x4xf32>
  %g3 = hpc.unsqueeze %w {axes = array<i64: 2>} : (tensor<6x2xf32>) -> tensor<6x2x1xf32>
  %hw = hpc.mul %hitf, %g3 : (tensor<6x2x4xf32>, tensor<6x2x1xf32>) -> tensor<6x2x4xf32>
  %matrix = hpc.reduce_sum %hw {axes = array<i64: 1>, keepdims = false} : (tensor<6x2x4xf32>) -> tensor<6x4xf32>
  %x3 = hpc.unsqueeze %x {axes = array<i64: 0>} : (tensor<6x4xf32>) -> tensor<1x6x4xf32>
  %h = hpc.matmul %x3, %w1 : (tensor<1x6x4xf32>, tensor<4x4x4xf32>) -> tensor<4x6x4xf32>
  %y = hpc.softmax %h {axis = 0 : i64} : tensor<4x6x4xf32>
  %mt = hpc.transpose %matrix {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %m3 = hpc.unsqueeze %mt {axes = array<i64: 2>} : (tensor<4x6xf32>) -> tensor<4x6x1xf32>
  %yw = hpc.mul %y, %m3 : (tensor<4x6x4xf32>, tensor<4x6x1xf32>) -> tensor<4x6x4xf32>
  %out = hpc.reduce_sum %yw {axes = array<i64: 0>, keepdims = false} : (tensor<4x6x4xf32>) -> tensor<6x4xf32>
  return %out : tensor<6x4xf32>
}
