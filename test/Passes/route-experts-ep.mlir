// RUN: hpc-opt %s --hpc-route-experts=mesh=ep=2 | FileCheck %s
// RUN: hpc-opt %s --hpc-route-experts="capacity-factor=1.0 mesh=dp=2,ep=2" | FileCheck %s --check-prefix=DPEP
// RUN: not hpc-opt %s --hpc-route-experts=mesh=ep=3 2>&1 | FileCheck %s --check-prefix=NODIV
// RUN: not hpc-opt %s --hpc-route-experts=mesh=dp=3,ep=2 2>&1 | FileCheck %s --check-prefix=TOKENS

// Expert parallelism: the whole batch's routing, then each of the groups
// (ep ranks) dispatches its 4 tokens into its own [4, 4] buffers; the
// annotations move them from the groups to the experts' ranks and back
// (one all_to_all each once partitioned); hpc.moe_exchange_slots' rows
// compact what arrives into the whole batch's 8 rows an expert, where the
// experts' chain runs.
// CHECK: module attributes {dist.mesh = #dist.mesh<ep = 2 : intra_node>}
// CHECK: %[[S:.+]], %{{.+}} = hpc.moe_route %{{.+}} {capacity = 8 : i64, num_experts = 4 : i64}
// CHECK: %[[L:.+]], %[[R:.+]] = hpc.moe_exchange_slots %[[S]] {capacity = 8 : i64, ep = 2 : i64, group_capacity = 4 : i64, groups = 2 : i64, num_experts = 4 : i64} : (tensor<8x2xi64>) -> (tensor<8x2xi64>, tensor<1x4x8xi64>)
// CHECK: %[[L3:.+]] = dist.annotate %{{.+}} : tensor<2x4x2xi64> to #dist.sharding<{{\[}}[ep], [], []]>
// CHECK: %[[R4:.+]] = dist.annotate %{{.+}} : tensor<1x4x8x1xi64> to #dist.sharding<{{\[}}[], [ep], [], []]>
// CHECK: %[[P:.+]] = hpc.moe_dispatch %{{.+}}, %[[L3]] {capacity = 4 : i64, num_experts = 4 : i64} : (tensor<2x4x4xf32>, tensor<2x4x2xi64>) -> tensor<2x4x4x4xf32>
// CHECK: %[[SRC:.+]] = dist.annotate %[[P]] : tensor<2x4x4x4xf32> to #dist.sharding<{{\[}}[ep], [], [], []]>
// CHECK: dist.annotate %[[SRC]] : tensor<2x4x4x4xf32> to #dist.sharding<{{\[}}[], [ep], [], []]>
// CHECK: hpc.moe_gather %{{.+}}, %[[R4]] : (tensor<1x4x1x8x4xf32>, tensor<1x4x8x1xi64>) -> tensor<1x4x8x1x4xf32>
// CHECK: hpc.matmul %{{.+}}, %{{.+}} : (tensor<4x8x4xf32>, tensor<4x4x8xf32>) -> tensor<4x8x8xf32>
// CHECK: hpc.moe_dispatch %{{.+}}, %[[R4]] {capacity = 8 : i64, num_experts = 1 : i64} : (tensor<1x4x8x1x4xf32>, tensor<1x4x8x1xi64>) -> tensor<1x4x1x8x4xf32>
// CHECK: %[[BACK:.+]] = dist.annotate %{{.+}} : tensor<2x4x4x4xf32> to #dist.sharding<{{\[}}[], [ep], [], []]>
// CHECK: %[[HOME:.+]] = dist.annotate %[[BACK]] : tensor<2x4x4x4xf32> to #dist.sharding<{{\[}}[ep], [], [], []]>
// CHECK: hpc.moe_gather %[[HOME]], %[[L3]] : (tensor<2x4x4x4xf32>, tensor<2x4x2xi64>) -> tensor<2x4x2x4xf32>

// dp=2 x ep=2, capacity factor 1.0 (4 rows an expert): 4 groups of 2
// tokens, 2 rows each of an expert's; each dp slice compacts its 2 groups'
// rows into min(4, 2 * 2) = 4, the chain on [4, 2 * 4] rows.
// DPEP: hpc.moe_exchange_slots %{{.+}} {capacity = 4 : i64, ep = 2 : i64, group_capacity = 2 : i64, groups = 4 : i64, num_experts = 4 : i64} : (tensor<8x2xi64>) -> (tensor<8x2xi64>, tensor<2x4x4xi64>)
// DPEP: dist.annotate %{{.+}} : tensor<4x2x2xi64> to #dist.sharding<{{\[}}[dp, ep], [], []]>
// DPEP: dist.annotate %{{.+}} : tensor<2x4x4x1xi64> to #dist.sharding<{{\[}}[dp], [ep], [], []]>
// DPEP: hpc.matmul %{{.+}}, %{{.+}} : (tensor<4x8x4xf32>, tensor<4x4x8xf32>) -> tensor<4x8x8xf32>

// NODIV: error: ep=3 does not divide the 4 experts
// TOKENS: error: the 8 tokens of a mixture-of-experts layer do not split over dp*ep = 6 ranks
func.func @dense_dispatch(%x: tensor<8x4xf32>, %router: tensor<4x4xf32>,
                          %w1: tensor<4x4x8xf32>, %b1: tensor<4x1x8xf32>,
                          %w2: tensor<4x8x4xf32>) -> tensor<8x4xf32> {
  %logits = hpc.matmul %x, %router : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %probs = hpc.softmax %logits {axis = -1 : i64} : tensor<8x4xf32>
  %w, %i = hpc.top_k %probs {k = 2 : i64} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
  %wsum = hpc.reduce_sum %w {axes = array<i64: 1>} : (tensor<8x2xf32>) -> tensor<8x1xf32>
  %gates = hpc.div %w, %wsum : (tensor<8x2xf32>, tensor<8x1xf32>) -> tensor<8x2xf32>
  %i3 = hpc.unsqueeze %i {axes = array<i64: 2>} : (tensor<8x2xi64>) -> tensor<8x2x1xi64>
  %ids = hpc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %hit = hpc.equal %i3, %ids : (tensor<8x2x1xi64>, tensor<4xi64>) -> tensor<8x2x4xi1>
  %hitf = hpc.cast %hit {to = f32} : tensor<8x2x4xi1> to tensor<8x2x4xf32>
  %g3 = hpc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<8x2xf32>) -> tensor<8x2x1xf32>
  %hw = hpc.mul %hitf, %g3 : (tensor<8x2x4xf32>, tensor<8x2x1xf32>) -> tensor<8x2x4xf32>
  %matrix = hpc.reduce_sum %hw {axes = array<i64: 1>, keepdims = false} : (tensor<8x2x4xf32>) -> tensor<8x4xf32>
  %x3 = hpc.unsqueeze %x {axes = array<i64: 0>} : (tensor<8x4xf32>) -> tensor<1x8x4xf32>
  %h = hpc.matmul %x3, %w1 : (tensor<1x8x4xf32>, tensor<4x4x8xf32>) -> tensor<4x8x8xf32>
  %hb = hpc.add %h, %b1 : (tensor<4x8x8xf32>, tensor<4x1x8xf32>) -> tensor<4x8x8xf32>
  %a = hpc.gelu %hb : tensor<4x8x8xf32>
  %y = hpc.matmul %a, %w2 : (tensor<4x8x8xf32>, tensor<4x8x4xf32>) -> tensor<4x8x4xf32>
  %mt = hpc.transpose %matrix {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %m3 = hpc.unsqueeze %mt {axes = array<i64: 2>} : (tensor<4x8xf32>) -> tensor<4x8x1xf32>
  %yw = hpc.mul %y, %m3 : (tensor<4x8x4xf32>, tensor<4x8x1xf32>) -> tensor<4x8x4xf32>
  %out = hpc.reduce_sum %yw {axes = array<i64: 0>, keepdims = false} : (tensor<4x8x4xf32>) -> tensor<8x4xf32>
  return %out : tensor<8x4xf32>
}
