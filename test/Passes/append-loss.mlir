// RUN: hpc-opt %s --hpc-append-loss="loss=cross-entropy:logits,labels" | FileCheck %s --check-prefix=CE
// RUN: hpc-opt %s --hpc-append-loss="loss=mse:pred,target" | FileCheck %s --check-prefix=MSE
// RUN: hpc-opt %s --hpc-append-loss="loss=output:total" | FileCheck %s --check-prefix=OUT

// hpc-append-loss: @main returns the loss alone, named "loss"; labels and
// targets become new inputs; the module records the loss in hpc.loss.

func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"})
    -> (tensor<2x3xf32> {hpc.name = "logits"}, tensor<2xf32> {hpc.name = "pred"},
        tensor<1xf32> {hpc.name = "total"}) {
  %w = hpc.weight "w" : tensor<3xf32> = dense<[1.0, 2.0, 3.0]>
  %y = hpc.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %p = hpc.reduce_sum %y {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  %t = hpc.reduce_sum %p {axes = array<i64: 0>, keepdims = true} : (tensor<2xf32>) -> tensor<1xf32>
  return %y, %p, %t : tensor<2x3xf32>, tensor<2xf32>, tensor<1xf32>
}

// Cross entropy: i64 labels of the logits' shape without the class dim;
// -mean of log_softmax(logits)[label] over the labels that are not -100.
// CE: module attributes {hpc.loss = {input = "labels", kind = "cross-entropy", of = "logits"}}
// CE-LABEL: func.func @main
// CE-SAME: (%[[X:.+]]: tensor<2x3xf32> {hpc.name = "x"}, %[[LABELS:.+]]: tensor<2xi64> {hpc.name = "labels"})
// CE-SAME: -> (tensor<f32> {hpc.name = "loss"})
// CE: %[[Y:.+]] = hpc.mul %[[X]]
// CE: %[[LS:.+]] = hpc.log_softmax %[[Y]] {axis = 1 : i64} : tensor<2x3xf32>
// CE: %[[IGNORE:.+]] = hpc.constant dense<-100> : tensor<i64>
// CE: %[[IS_IGNORED:.+]] = hpc.equal %[[LABELS]], %[[IGNORE]]
// CE: %[[VALID:.+]] = hpc.not %[[IS_IGNORED]] : tensor<2xi1>
// CE: %[[SAFE:.+]] = hpc.where %[[VALID]], %[[LABELS]], %{{.+}} : (tensor<2xi1>, tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CE: %[[IDX:.+]] = hpc.reshape %[[SAFE]] {shape = array<i64: 2, 1>}
// CE: %[[PICKED:.+]] = hpc.gather_elements %[[LS]], %[[IDX]] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
// CE: %[[WEIGHTS:.+]] = hpc.cast %[[VALID]] {to = f32} : tensor<2xi1> to tensor<2xf32>
// CE: %[[FLAT:.+]] = hpc.reshape %[[PICKED]] {shape = array<i64: 2>}
// CE: %[[MASKED:.+]] = hpc.mul %[[FLAT]], %[[WEIGHTS]]
// CE: %[[TOTAL:.+]] = hpc.reduce_sum %[[MASKED]] {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
// CE: %[[COUNT:.+]] = hpc.reduce_sum %[[WEIGHTS]] {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
// CE: %[[MEAN:.+]] = hpc.div %[[TOTAL]], %[[COUNT]]
// CE: %[[LOSS:.+]] = hpc.neg %[[MEAN]] : tensor<f32>
// CE: return %[[LOSS]] : tensor<f32>

// Mean squared error: a target input of the output's type;
// mean((pred - target)^2).
// MSE: module attributes {hpc.loss = {input = "target", kind = "mse", of = "pred"}}
// MSE-LABEL: func.func @main
// MSE-SAME: %[[TARGET:[^:]+]]: tensor<2xf32> {hpc.name = "target"})
// MSE-SAME: -> (tensor<f32> {hpc.name = "loss"})
// MSE: %[[PRED:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
// MSE: %[[D:.+]] = hpc.sub %[[PRED]], %[[TARGET]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// MSE: %[[SQ:.+]] = hpc.mul %[[D]], %[[D]]
// MSE: %[[LOSS:.+]] = hpc.reduce_mean %[[SQ]] {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
// MSE: return %[[LOSS]] : tensor<f32>

// An output that already is the loss: a one-element tensor becomes 0-d; no
// input is added.
// OUT: module attributes {hpc.loss = {kind = "output", of = "total"}}
// OUT-LABEL: func.func @main
// OUT-SAME: (%{{[^:]+}}: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<f32> {hpc.name = "loss"})
// OUT: %[[T:.+]] = hpc.reduce_sum %{{.+}} {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<1xf32>
// OUT: %[[LOSS:.+]] = hpc.reshape %[[T]] {shape = array<i64>} : (tensor<1xf32>) -> tensor<f32>
// OUT: return %[[LOSS]] : tensor<f32>
