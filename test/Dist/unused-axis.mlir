// RUN: hpc-opt %s --dist-propagate=mesh=dp=2,tp=2 --dist-partition -o /dev/null 2>&1 | FileCheck %s

// A batch of one under dp splits nothing: the program is still correct, but
// the dp ranks repeat each other's work, and the report says so. tp splits
// the weights, so it gets no note.

// CHECK: dist-partition: each rank sends {{[0-9]+}} bytes per step
// CHECK-NEXT: dist-partition: note: mesh axis 'dp' splits no tensor; its 2 ranks compute the same values
// CHECK-NOT: note: mesh axis 'tp'
func.func @main(%x: tensor<1x16xf32> {hpc.name = "x"}) -> (tensor<1x8xf32> {hpc.name = "y"}) {
  %w1 = hpc.weight "w1" : tensor<16x32xf32> = dense<0.5>
  %w2 = hpc.weight "w2" : tensor<32x8xf32> = dense<0.25>
  %0 = hpc.matmul %x, %w1 : (tensor<1x16xf32>, tensor<16x32xf32>) -> tensor<1x32xf32>
  %1 = hpc.relu %0 : tensor<1x32xf32>
  %2 = hpc.matmul %1, %w2 : (tensor<1x32xf32>, tensor<32x8xf32>) -> tensor<1x8xf32>
  return %2 : tensor<1x8xf32>
}
