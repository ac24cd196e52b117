// RUN: hpc-opt %s --dist-propagate=mesh=dp=2 --dist-partition 2>&1 | FileCheck %s

// A tied token embedding's gradient: the rows of dY and their token ids
// (split by dp along the batch) scattered into a zero table, added to the
// LM head's weight gradient (a partial sum over dp). Each rank scatters
// its own rows, a partial sum too, and the two are added before one
// all-reduce of the table, which the LM head's part needs anyway: no rows
// or ids are gathered. A table that is bigger than its rows and reduced
// for nothing else is not made a partial sum (more bytes than the rows).

// CHECK-LABEL: func.func @main
// CHECK: %[[LM:.+]] = hpc.matmul %{{.+}}, %{{.+}} : (tensor<32x4xf32>, tensor<4x16xf32>) -> tensor<32x16xf32>
// CHECK-DAG: %[[IDS:.+]] = dist.all_slice %arg1 over ["dp"] dim 0 : tensor<8x16xi64> -> tensor<4x16xi64>
// CHECK-DAG: %[[DY:.+]] = dist.all_slice %arg0 over ["dp"] dim 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[S:.+]] = hpc.scatter_elements %{{.+}}, %[[IDS]], %[[DY]] {axis = 0 : i64, reduction = "add"} : (tensor<32x16xf32>, tensor<4x16xi64>, tensor<4x16xf32>) -> tensor<32x16xf32>
// CHECK: %[[SUM:.+]] = hpc.add %[[LM]], %[[S]]
// CHECK: %[[ALONE:.+]] = hpc.scatter_elements %{{.+}}, %arg1, %arg3 {{.*}} : (tensor<32x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<32x16xf32>
// CHECK: %[[R:.+]] = dist.all_reduce %[[SUM]] over ["dp"] sum : tensor<32x16xf32> -> tensor<32x16xf32>
// CHECK-NOT: dist.all_gather
// CHECK: return %[[R]], %[[ALONE]]
func.func @main(%dy: tensor<8x16xf32> {hpc.name = "dy"}, %ids: tensor<8x16xi64> {hpc.name = "ids"},
                %h: tensor<8x32xf32> {hpc.name = "h"}, %g: tensor<8x16xf32> {hpc.name = "g"})
    -> (tensor<32x16xf32> {hpc.name = "tied"}, tensor<32x16xf32> {hpc.name = "alone"}) {
  %zeros = hpc.constant dense<0.0> : tensor<32x16xf32>
  %ht = hpc.transpose %h {perm = array<i64: 1, 0>} : (tensor<8x32xf32>) -> tensor<32x8xf32>
  %lm = hpc.matmul %ht, %g : (tensor<32x8xf32>, tensor<8x16xf32>) -> tensor<32x16xf32>
  %s = hpc.scatter_elements %zeros, %ids, %dy {axis = 0 : i64, reduction = "add"} : (tensor<32x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<32x16xf32>
  %sum = hpc.add %lm, %s : (tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  %t = hpc.scatter_elements %zeros, %ids, %g {axis = 0 : i64, reduction = "add"} : (tensor<32x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<32x16xf32>
  return %sum, %t : tensor<32x16xf32>, tensor<32x16xf32>
}
