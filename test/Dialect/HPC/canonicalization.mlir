// RUN: hpc-opt %s -canonicalize -split-input-file | FileCheck %s

// Folding of hpc ops under -canonicalize: shape arithmetic on small constants
// collapses to hpc.constant, identity ops fold to their operand, and ops on
// unknown values stay.

// CHECK-LABEL: func.func @add_i64
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[4, 60]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @add_i64() -> tensor<2xi64> {
  %a = hpc.constant dense<[1, 64]> : tensor<2xi64>
  %b = hpc.constant dense<[3, -4]> : tensor<2xi64>
  %0 = hpc.add %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @mul_broadcast
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<{{\[\[}}2, 20], [3, 30]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @mul_broadcast() -> tensor<2x2xi64> {
  %a = hpc.constant dense<[[2], [3]]> : tensor<2x1xi64>
  %b = hpc.constant dense<[1, 10]> : tensor<2xi64>
  %0 = hpc.mul %a, %b : (tensor<2x1xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// Integer division truncates toward zero.
// CHECK-LABEL: func.func @div_i64
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[3, -3, 8]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @div_i64() -> tensor<3xi64> {
  %a = hpc.constant dense<[7, -7, 64]> : tensor<3xi64>
  %b = hpc.constant dense<[2, 2, 8]> : tensor<3xi64>
  %0 = hpc.div %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// Division by zero is left for the runtime.
// CHECK-LABEL: func.func @div_by_zero
// CHECK: hpc.div
func.func @div_by_zero() -> tensor<2xi64> {
  %a = hpc.constant dense<[7, 1]> : tensor<2xi64>
  %b = hpc.constant dense<[2, 0]> : tensor<2xi64>
  %0 = hpc.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Float arithmetic folds too.
// CHECK-LABEL: func.func @sub_sqrt_f32
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[2.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @sub_sqrt_f32() -> tensor<2xf32> {
  %a = hpc.constant dense<[5.0, 10.0]> : tensor<2xf32>
  %b = hpc.constant dense<[1.0, 1.0]> : tensor<2xf32>
  %0 = hpc.sub %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = hpc.sqrt %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// The exporter pattern Shape -> Gather -> Unsqueeze -> Concat -> Reshape: once
// the shape is a constant, the whole chain folds into the reshape's target.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1, 16, 4, 16]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<4xi64> {
  %shape = hpc.constant dense<[1, 16, 64]> : tensor<3xi64>
  %i0 = hpc.constant dense<0> : tensor<i64>
  %i1 = hpc.constant dense<1> : tensor<i64>
  %heads = hpc.constant dense<[4]> : tensor<1xi64>
  %d0 = hpc.gather %shape, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = hpc.gather %shape, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u0 = hpc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = hpc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %last = hpc.slice %shape {starts = array<i64: 2>, ends = array<i64: 3>, steps = array<i64: 1>} : (tensor<3xi64>) -> tensor<1xi64>
  %hd = hpc.div %last, %heads : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %0 = hpc.concat %u0, %u1, %heads, %hd {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @gather_negative_index
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[64, 1]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @gather_negative_index() -> tensor<2xi64> {
  %shape = hpc.constant dense<[1, 16, 64]> : tensor<3xi64>
  %idx = hpc.constant dense<[-1, 0]> : tensor<2xi64>
  %0 = hpc.gather %shape, %idx {axis = 0 : i64} : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @slice_negative_step
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[8, 5, 2]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @slice_negative_step() -> tensor<3xi64> {
  %x = hpc.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]> : tensor<10xi64>
  %0 = hpc.slice %x {starts = array<i64: 8>, ends = array<i64: 1>, steps = array<i64: -3>} : (tensor<10xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// CHECK-LABEL: func.func @squeeze_cast
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1.000000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @squeeze_cast() -> tensor<2xf32> {
  %x = hpc.constant dense<[[1, -2]]> : tensor<1x2xi64>
  %0 = hpc.squeeze %x {axes = array<i64: 0>} : (tensor<1x2xi64>) -> tensor<2xi64>
  %1 = hpc.cast %0 {to = f32} : tensor<2xi64> to tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// Float to integer casts truncate toward zero.
// CHECK-LABEL: func.func @cast_truncates
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1, -1]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @cast_truncates() -> tensor<2xi64> {
  %x = hpc.constant dense<[1.7, -1.7]> : tensor<2xf32>
  %0 = hpc.cast %x {to = i64} : tensor<2xf32> to tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// The "-1 means infer" pattern of exported Reshape: where(equal(s, -1), n, s).
// CHECK-LABEL: func.func @equal_where
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1, 16, 64]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @equal_where() -> tensor<3xi64> {
  %s = hpc.constant dense<[1, -1, 64]> : tensor<3xi64>
  %m = hpc.constant dense<-1> : tensor<i64>
  %n = hpc.constant dense<16> : tensor<i64>
  %c = hpc.equal %s, %m : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %0 = hpc.where %c, %n, %s : (tensor<3xi1>, tensor<i64>, tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// CHECK-LABEL: func.func @reduce_prod
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<1024> : tensor<i64>
// CHECK-NEXT: return %[[C]]
func.func @reduce_prod() -> tensor<i64> {
  %s = hpc.constant dense<[1, 16, 64]> : tensor<3xi64>
  %0 = hpc.reduce_prod %s {axes = array<i64: 0>, keepdims = false} : (tensor<3xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// CHECK-LABEL: func.func @reduce_sum_square
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1.000000e+01, 1.600000e+01]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @reduce_sum_square() -> tensor<2xf32> {
  %s = hpc.constant dense<[[1.0, -3.0], [0.0, 4.0]]> : tensor<2x2xf32>
  %0 = hpc.reduce_sum_square %s {axes = array<i64: 1>, keepdims = false} : (tensor<2x2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_constant
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @transpose_constant() -> tensor<3x2xi64> {
  %x = hpc.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = hpc.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>
}

// -----

// CHECK-LABEL: func.func @expand_reshape_constant
// CHECK-NEXT: %[[C:.+]] = hpc.constant dense<[1, 1, 2, 2]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @expand_reshape_constant() -> tensor<4xi64> {
  %x = hpc.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %0 = hpc.expand %x {shape = array<i64: 2, 2>} : (tensor<2x1xi64>) -> tensor<2x2xi64>
  %1 = hpc.reshape %0 {shape = array<i64: 4>} : (tensor<2x2xi64>) -> tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// Identity ops fold to their operand, whatever the operand is.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NOT: hpc.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = hpc.reshape %x {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = hpc.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = hpc.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = hpc.expand %x {shape = array<i64: 1, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = hpc.cast %x {to = f32} : tensor<2x3xf32> to tensor<2x3xf32>
  %5 = hpc.concat %x {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Ops on unknown values stay, and so do non-identity data movements of them.
// CHECK-LABEL: func.func @no_fold_of_arguments
// CHECK: hpc.add
// CHECK: hpc.transpose
// CHECK: hpc.reshape
// CHECK: hpc.slice
func.func @no_fold_of_arguments(%x: tensor<2xi64>, %y: tensor<2x3xf32>) -> (tensor<2xi64>, tensor<3x2xf32>, tensor<6xf32>, tensor<1x3xf32>) {
  %c = hpc.constant dense<[1, 2]> : tensor<2xi64>
  %0 = hpc.add %x, %c : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %1 = hpc.transpose %y {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = hpc.reshape %y {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  %3 = hpc.slice %y {starts = array<i64: 1, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return %0, %1, %2, %3 : tensor<2xi64>, tensor<3x2xf32>, tensor<6xf32>, tensor<1x3xf32>
}

// -----

// Weights are not constants: math on them stays.
// CHECK-LABEL: func.func @no_fold_of_weights
// CHECK: hpc.weight
// CHECK: hpc.mul
func.func @no_fold_of_weights() -> tensor<2xf32> {
  %w = hpc.weight "w" : tensor<2xf32> = dense<[1.0, 2.0]>
  %0 = hpc.mul %w, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Constants above the fold limit (65536 elements) are not evaluated.
// CHECK-LABEL: func.func @no_fold_above_limit
// CHECK: hpc.add
func.func @no_fold_above_limit() -> tensor<65537xi64> {
  %a = hpc.constant dense<1> : tensor<65537xi64>
  %0 = hpc.add %a, %a : (tensor<65537xi64>, tensor<65537xi64>) -> tensor<65537xi64>
  return %0 : tensor<65537xi64>
}

// -----

// Dead pure ops disappear.
// CHECK-LABEL: func.func @dead_code
// CHECK-NEXT: return
func.func @dead_code(%x: tensor<2x3xf32>) {
  %0 = hpc.exp %x : tensor<2x3xf32>
  %1 = hpc.softmax %0 {axis = -1 : i64} : tensor<2x3xf32>
  return
}
