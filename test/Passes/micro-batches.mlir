// RUN: split-file %s %t
// RUN: hpc-opt %t/ce.mlir --hpc-micro-batches=count=2 | FileCheck %s --check-prefix=CE
// RUN: hpc-opt %t/ce.mlir --hpc-micro-batches="count=2 mesh=dp=2" | FileCheck %s --check-prefix=DP
// RUN: hpc-opt %t/ce.mlir --hpc-micro-batches=count=1 | FileCheck %s --check-prefix=ONE
// RUN: hpc-opt %t/seed.mlir --hpc-micro-batches=count=2 | FileCheck %s --check-prefix=SEED
// RUN: hpc-opt %t/mean.mlir --hpc-micro-batches=count=4 | FileCheck %s --check-prefix=MEAN
// RUN: hpc-opt %t/errors.mlir --split-input-file --hpc-micro-batches="count=2 mesh=dp=8" -verify-diagnostics
// RUN: not hpc-opt %t/ce.mlir --hpc-micro-batches=count=0 2>&1 | FileCheck %s --check-prefix=ZERO

// hpc-micro-batches on the loss and gradients hpc-autodiff returns (written
// out here). Numerics: test/Train/micro-batches.test.

//--- ce.mlir
// A cross entropy's shape, -(sum) / (count of labels), with a running
// statistic assigned in the forward pass (train mode's batch norm).
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}, %labels: tensor<4xf32> {hpc.name = "labels"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.name = "grad.w"}) {
  %w = hpc.variable "w" {role = "param"} : tensor<3xf32> = dense<1.0>
  %rs = hpc.variable "rs" {role = "buffer"} : tensor<3xf32> = dense<0.0>
  %e = hpc.exp %w : tensor<3xf32>
  %xw = hpc.mul %x, %e : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %tot = hpc.reduce_sum %xw {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  %cnt = hpc.reduce_sum %labels {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %q = hpc.div %tot, %cnt : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = hpc.neg %q : tensor<f32>
  %bm = hpc.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  %nrs = hpc.add %rs, %bm : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  hpc.assign %rs, %nrs : tensor<3xf32>, tensor<3xf32>
  %g = hpc.mul %bm, %e : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}

// The step takes 2 x 4 rows; what reads only the weights runs once.
// CE: module attributes {hpc.micro_batches = 2 : i64}
// CE: func.func @main(%arg0: tensor<8x3xf32> {hpc.name = "x"}, %arg1: tensor<8xf32> {hpc.name = "labels"})
// CE: %[[W:.+]] = hpc.variable "w"
// CE: %[[RS:.+]] = hpc.variable "rs"
// CE: %[[E:.+]] = hpc.exp %[[W]]
// CE-NOT: hpc.exp
// Micro-batch 0: rows 0-3.
// CE: %[[X0B:.+]] = hpc.reshape %arg0 {shape = array<i64: 1, 2, 4, 3>}
// CE: %[[X0S:.+]] = hpc.slice %[[X0B]] {ends = array<i64: 1, 1, 4, 3>, starts = array<i64: 0, 0, 0, 0>
// CE: %[[X0:.+]] = hpc.reshape %[[X0S]] {shape = array<i64: 4, 3>}
// CE: %[[C0:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// Each result joins its sum where it is made, weighted by its micro-batch's
// count of labels.
// CE: %[[L0:.+]] = hpc.neg
// CE-NEXT: %[[WL0:.+]] = hpc.mul %[[L0]], %[[C0]]
// CE: %[[BM0:.+]] = hpc.reduce_sum %[[X0]] {axes = array<i64: 0>
// The running statistic after micro-batch 0 is not written, but read by 1.
// CE: %[[RS0:.+]] = hpc.add %[[RS]], %[[BM0]]
// CE-NOT: hpc.assign
// CE: %[[G0:.+]] = hpc.mul %[[BM0]], %[[E]]
// CE-NEXT: %[[WG0:.+]] = hpc.mul %[[G0]], %[[C0]]
// Micro-batch 1: rows 4-7; the means right after their last terms.
// CE: hpc.slice %{{.+}} {ends = array<i64: 1, 2, 4, 3>, starts = array<i64: 0, 1, 0, 0>
// CE: %[[C1:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// CE-NEXT: %[[C:.+]] = hpc.add %[[C0]], %[[C1]]
// CE: %[[L1:.+]] = hpc.neg
// CE-NEXT: %[[WL1:.+]] = hpc.mul %[[L1]], %[[C1]]
// CE-NEXT: %[[SL:.+]] = hpc.add %[[WL0]], %[[WL1]]
// CE-NEXT: %[[LOSS:.+]] = hpc.div %[[SL]], %[[C]]
// CE: %[[BM1:.+]] = hpc.reduce_sum
// CE: %[[RS1:.+]] = hpc.add %[[RS0]], %[[BM1]]
// CE: hpc.assign %[[RS]], %[[RS1]]
// CE: %[[G1:.+]] = hpc.mul %[[BM1]], %[[E]]
// CE-NEXT: %[[WG1:.+]] = hpc.mul %[[G1]], %[[C1]]
// CE-NEXT: %[[SG:.+]] = hpc.add %[[WG0]], %[[WG1]]
// CE-NEXT: %[[GRAD:.+]] = hpc.div %[[SG]], %[[C]]
// CE: return %[[LOSS]], %[[GRAD]]
// CE-NOT: hpc.assign

// Over dp=2: micro-batch m is rows [2m, 2m+2) of each rank's block of 4.
// DP: %[[B:.+]] = hpc.reshape %arg0 {shape = array<i64: 2, 2, 2, 3>}
// DP: hpc.slice %[[B]] {ends = array<i64: 2, 1, 2, 3>, starts = array<i64: 0, 0, 0, 0>
// DP: hpc.slice %{{.+}} {ends = array<i64: 2, 2, 2, 3>, starts = array<i64: 0, 1, 0, 0>

// ONE: func.func @main(%arg0: tensor<4x3xf32> {hpc.name = "x"}
// ONE-NOT: hpc.slice

//--- seed.mlir
// The same shape with hpc-autodiff's seed, its hpc.loss_scale input (the
// backward pass written out: d tot = -seed / count). Each micro-batch's
// backward starts from the seed times its count of labels, so its
// gradients come out weighted: no pass over a gradient to weigh it, only
// the sum and the mean.
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}, %labels: tensor<4xf32> {hpc.name = "labels"}, %seed: tensor<f32> {hpc.name = "hpc.loss_scale"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.name = "grad.w"}) {
  %w = hpc.variable "w" {role = "param"} : tensor<3xf32> = dense<1.0>
  %e = hpc.exp %w : tensor<3xf32>
  %xw = hpc.mul %x, %e : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %tot = hpc.reduce_sum %xw {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  %cnt = hpc.reduce_sum %labels {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %q = hpc.div %tot, %cnt : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = hpc.neg %q : tensor<f32>
  %nd = hpc.neg %seed : tensor<f32>
  %dt = hpc.div %nd, %cnt : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %bx = hpc.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  %g0 = hpc.mul %bx, %e : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = hpc.mul %g0, %dt : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}
// SEED: func.func @main(%arg0: tensor<8x3xf32> {hpc.name = "x"}, %arg1: tensor<8xf32> {hpc.name = "labels"}, %[[SEED:.+]]: tensor<f32> {hpc.name = "hpc.loss_scale"})
// SEED: %[[C0:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// SEED-NEXT: %[[S0:.+]] = hpc.mul %[[SEED]], %[[C0]]
// The loss is still weighted; the gradient is made weighted.
// SEED: %[[L0:.+]] = hpc.neg
// SEED-NEXT: hpc.mul %[[L0]], %[[C0]]
// SEED: %[[N0:.+]] = hpc.neg %[[S0]]
// SEED-NEXT: %[[D0:.+]] = hpc.div %[[N0]], %[[C0]]
// SEED: %[[G0:.+]] = hpc.mul %{{.+}}, %[[D0]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// SEED-NOT: hpc.mul %[[G0]]
// SEED: %[[C1:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// SEED-NEXT: %[[C:.+]] = hpc.add %[[C0]], %[[C1]]
// SEED-NEXT: %[[S1:.+]] = hpc.mul %[[SEED]], %[[C1]]
// SEED: %[[N1:.+]] = hpc.neg %[[S1]]
// SEED-NEXT: %[[D1:.+]] = hpc.div %[[N1]], %[[C1]]
// SEED: %[[G1:.+]] = hpc.mul %{{.+}}, %[[D1]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// SEED-NEXT: %[[SG:.+]] = hpc.add %[[G0]], %[[G1]]
// SEED-NEXT: %[[GRAD:.+]] = hpc.div %[[SG]], %[[C]]
// SEED: return %{{.+}}, %[[GRAD]]

//--- mean.mlir
// A loss without a count (a mean squared error): equal weights.
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"}, tensor<3xf32> {hpc.name = "grad.w"}) {
  %w = hpc.variable "w" {role = "param"} : tensor<3xf32> = dense<1.0>
  %xw = hpc.mul %x, %w : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %loss = hpc.reduce_mean %xw {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  %g = hpc.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}
// MEAN: func.func @main(%arg0: tensor<16x3xf32> {hpc.name = "x"}
// MEAN-COUNT-4: hpc.reduce_mean %{{.+}} {axes = array<i64: 0, 1>
// MEAN: %[[Q:.+]] = hpc.constant dense<2.500000e-01> : tensor<f32>
// MEAN: %[[LOSS:.+]] = hpc.mul %{{.+}}, %[[Q]]
// MEAN: %[[GRAD:.+]] = hpc.mul %{{.+}}, %{{.+}}
// MEAN: return %[[LOSS]], %[[GRAD]]

//--- errors.mlir
// expected-error @+1 {{hpc-micro-batches: a micro-batch of 4 rows does not split over 8 data-parallel ranks (the batch must be a multiple of 16)}}
func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32> {hpc.name = "loss"}) {
  %loss = hpc.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{hpc-micro-batches: the inputs disagree on the batch: 4 and 2 rows (input 1)}}
func.func @main(%x: tensor<4x3xf32>, %y: tensor<2x3xf32>) -> (tensor<f32> {hpc.name = "loss"}) {
  %loss = hpc.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{hpc-micro-batches: result 1 is not a float tensor (run it after hpc-autodiff)}}
func.func @main(%x: tensor<16x3xf32>) -> (tensor<f32> {hpc.name = "loss"}, tensor<16xi64>) {
  %loss = hpc.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x3xf32>) -> tensor<f32>
  %i = hpc.argmax %x {axis = 1 : i64, keepdims = false} : (tensor<16x3xf32>) -> tensor<16xi64>
  return %loss, %i : tensor<f32>, tensor<16xi64>
}

// ZERO: error: hpc-micro-batches: count must be at least 1, not 0
