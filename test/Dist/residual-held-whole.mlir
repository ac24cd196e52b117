// RUN: hpc-opt %s --dist-propagate=mesh=tp=2 --dist-partition 2>&1 | FileCheck %s

// A residual stream that starts split (a column-parallel projection) meets
// a row-parallel sublayer's all-reduced output (with its bias): the add
// stays whole, so the stream is gathered once (for the first layer norm;
// the add reuses that gather) instead of being sliced for each add and
// gathered again by the next layer norm.

// CHECK: dist-partition: each rank sends 320 bytes per step in 3 collectives
// CHECK-LABEL: func.func @main
// CHECK: %[[E:.+]] = hpc.matmul %arg0, %{{.+}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[R0:.+]] = dist.all_gather %[[E]] over ["tp"] dim 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: hpc.layer_norm %[[R0]]
// CHECK: %[[S1:.+]] = dist.all_reduce %{{.+}} over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[P1:.+]] = hpc.add %[[S1]], %{{.+}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[R1:.+]] = hpc.add %[[P1]], %[[R0]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: hpc.layer_norm %[[R1]]
// CHECK: %[[S2:.+]] = dist.all_reduce %{{.+}} over ["tp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[P2:.+]] = hpc.add %[[S2]], %{{.+}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: hpc.add %[[P2]], %[[R1]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: dist.all_gather
func.func @main(%x: tensor<4x8xf32> {hpc.name = "x"}) -> (tensor<4x8xf32> {hpc.name = "y"}) {
  %we = hpc.weight "embed" : tensor<8x8xf32> = dense<0.125>
  %g = hpc.weight "g" : tensor<8xf32> = dense<1.0>
  %w1 = hpc.weight "w1" : tensor<8x16xf32> = dense<0.5>
  %w2 = hpc.weight "w2" : tensor<16x8xf32> = dense<0.25>
  %w3 = hpc.weight "w3" : tensor<8x16xf32> = dense<0.5>
  %w4 = hpc.weight "w4" : tensor<16x8xf32> = dense<0.25>
  %b = hpc.weight "b" : tensor<8xf32> = dense<0.5>
  %r0 = hpc.matmul %x, %we : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %n1 = hpc.layer_norm %r0, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h1 = hpc.matmul %n1, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %o1 = hpc.matmul %h1, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %p1 = hpc.add %o1, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r1 = hpc.add %p1, %r0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n2 = hpc.layer_norm %r1, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h2 = hpc.matmul %n2, %w3 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %o2 = hpc.matmul %h2, %w4 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %p2 = hpc.add %o2, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r2 = hpc.add %p2, %r1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r2 : tensor<4x8xf32>
}
