// RUN: hpc-opt %s --hpc-optimizer | FileCheck %s --check-prefix=SGD
// RUN: hpc-opt %s --hpc-optimizer="momentum=0.9 lr=0.1" | FileCheck %s --check-prefix=MOM
// RUN: hpc-opt %s --hpc-optimizer="momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=NEST
// RUN: hpc-opt %s --hpc-optimizer="optimizer=adamw lr=3e-4 beta1=0.8 eps=1e-6" | FileCheck %s --check-prefix=ADAMW
// RUN: hpc-opt %s --hpc-optimizer="clip-norm=2.5" | FileCheck %s --check-prefix=CLIP
// RUN: hpc-opt %s --hpc-optimizer="optimizer=adamw weight-decay=0.1 weight-decay-exclude=bias,norm" | FileCheck %s --check-prefix=WDX
// RUN: hpc-opt %s --hpc-optimizer="keep-gradients=true clip-norm=1.0" | FileCheck %s --check-prefix=KEEP
// RUN: hpc-opt %s --hpc-optimizer="lr-schedule=linear:5,50" | FileCheck %s --check-prefix=SCHED
// RUN: hpc-opt %s --hpc-optimizer="skip-nonfinite=false" | FileCheck %s --check-prefix=NOSKIP

// hpc-optimizer on the loss and gradients hpc-autodiff returns (written out
// here: grad.fc.weight = exp(w), grad.fc.bias = -b).

module attributes {hpc.loss = {input = "labels", kind = "cross-entropy", of = "logits"}} {
func.func @main(%x: tensor<4x3xf32> {hpc.name = "x"}, %labels: tensor<4xi64> {hpc.name = "labels"})
    -> (tensor<f32> {hpc.name = "loss"},
        tensor<3xf32> {hpc.gradient_of = "fc.weight", hpc.name = "grad.fc.weight"},
        tensor<2xf32> {hpc.gradient_of = "fc.bias", hpc.name = "grad.fc.bias"}) {
  %w = hpc.variable "fc.weight" : tensor<3xf32> = dense<1.0>
  %b = hpc.variable "fc.bias" : tensor<2xf32> = dense<0.0>
  %y = hpc.mul %x, %w : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = hpc.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  %gw = hpc.exp %w : tensor<3xf32>
  %gb = hpc.neg %b : tensor<2xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<3xf32>, tensor<2xf32>
}
}

// Plain SGD has no state; lr and step become inputs; @main returns the loss and
// the global gradient norm sqrt(sum of squares); hpc.train says how to drive
// the step (the batch is the first input's first dim). Every update is
// skipped when the norm is not finite (unless_nonfinite: GradScaler's
// skipped step, which the runtime counts).
// SGD: module attributes {hpc.loss = {{.+}}, hpc.train = {batch = 4 : i64, labels = "labels", loss = "cross-entropy", lr_schedule = {kind = "constant", total = 0 : i64, warmup = 0 : i64}, optimizer = {lr = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64, name = "sgd", nesterov = false, skip_nonfinite = true, weight_decay = 0.000000e+00 : f64}}}
// SGD-LABEL: func.func @main
// SGD-SAME: %[[LR:[^:]+]]: tensor<f32> {hpc.name = "hpc.lr"}, %{{[^:]+}}: tensor<i64> {hpc.name = "hpc.step"})
// SGD-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<f32> {hpc.name = "grad_norm"})
// SGD-NOT: role = "optimizer"
// SGD: %[[W:.+]] = hpc.variable "fc.weight" {role = "param"}
// SGD: %[[B:.+]] = hpc.variable "fc.bias" {role = "param"}
// SGD: %[[LOSS:.+]] = hpc.reduce_sum
// SGD: %[[GW:.+]] = hpc.exp %[[W]]
// SGD: %[[GB:.+]] = hpc.neg %[[B]]
// The norm: one pass over each gradient (a sum of squares).
// SGD: %[[SW:.+]] = hpc.reduce_sum_square %[[GW]] {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
// SGD: %[[SB:.+]] = hpc.reduce_sum_square %[[GB]]
// SGD: %[[SUM:.+]] = hpc.add %[[SW]], %[[SB]]
// SGD: %[[NORM:.+]] = hpc.sqrt %[[SUM]] : tensor<f32>
// SGD: hpc.sgd_update %[[W]], %[[GW]], %[[LR]] unless_nonfinite(%[[NORM]] : tensor<f32>) : tensor<3xf32>, tensor<3xf32>, tensor<f32>{{$}}
// SGD: hpc.sgd_update %[[B]], %[[GB]], %[[LR]] unless_nonfinite(%[[NORM]] : tensor<f32>) : tensor<2xf32>, tensor<2xf32>, tensor<f32>{{$}}
// SGD: return %[[LOSS]], %[[NORM]] : tensor<f32>, tensor<f32>

// Momentum: one zero-initialized buffer per parameter.
// MOM: optimizer = {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, name = "sgd", nesterov = false, skip_nonfinite = true, weight_decay = 0.000000e+00 : f64}
// MOM-LABEL: func.func @main
// MOM-DAG: %[[BUFB:.+]] = hpc.variable "fc.bias.momentum_buffer" {role = "optimizer"} : tensor<2xf32>{{$}}
// MOM-DAG: %[[BUFW:.+]] = hpc.variable "fc.weight.momentum_buffer" {role = "optimizer"} : tensor<3xf32>{{$}}
// MOM-DAG: %[[W:.+]] = hpc.variable "fc.weight" {role = "param"}
// MOM-DAG: %[[B:.+]] = hpc.variable "fc.bias" {role = "param"}
// MOM: hpc.sgd_update %[[W]], %{{.+}}, %{{.+}}, %[[BUFW]] unless_nonfinite(%{{.+}} : tensor<f32>) {momentum = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>{{$}}
// MOM: hpc.sgd_update %[[B]], %{{.+}}, %{{.+}}, %[[BUFB]] unless_nonfinite(%{{.+}} : tensor<f32>) {momentum = 9.000000e-01 : f64} : tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<2xf32>{{$}}

// NEST: optimizer = {lr = 1.000000e-03 : f64, momentum = 9.000000e-01 : f64, name = "sgd", nesterov = true,
// NEST: hpc.sgd_update %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} unless_nonfinite(%{{.+}} : tensor<f32>) {momentum = 9.000000e-01 : f64, nesterov = true} : tensor<3xf32>
// NEST: hpc.sgd_update %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} unless_nonfinite(%{{.+}} : tensor<f32>) {momentum = 9.000000e-01 : f64, nesterov = true} : tensor<2xf32>

// AdamW: exp_avg and exp_avg_sq per parameter, lr and step operands;
// weight decay 0.01 by default (PyTorch's), equal to the op's default.
// ADAMW: optimizer = {beta1 = 8.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 9.9999999999999995E-7 : f64, lr = 3.000000e-04 : f64, name = "adamw", skip_nonfinite = true, weight_decay = 1.000000e-02 : f64}
// ADAMW-LABEL: func.func @main
// ADAMW-SAME: %[[LR:[^:]+]]: tensor<f32> {hpc.name = "hpc.lr"}, %[[STEP:[^:]+]]: tensor<i64> {hpc.name = "hpc.step"})
// ADAMW-DAG: %[[MB:.+]] = hpc.variable "fc.bias.exp_avg" {role = "optimizer"} : tensor<2xf32>{{$}}
// ADAMW-DAG: %[[VB:.+]] = hpc.variable "fc.bias.exp_avg_sq" {role = "optimizer"} : tensor<2xf32>{{$}}
// ADAMW-DAG: %[[MW:.+]] = hpc.variable "fc.weight.exp_avg" {role = "optimizer"} : tensor<3xf32>{{$}}
// ADAMW-DAG: %[[VW:.+]] = hpc.variable "fc.weight.exp_avg_sq" {role = "optimizer"} : tensor<3xf32>{{$}}
// ADAMW-DAG: %[[W:.+]] = hpc.variable "fc.weight" {role = "param"}
// ADAMW-DAG: %[[B:.+]] = hpc.variable "fc.bias" {role = "param"}
// ADAMW: %[[GW:.+]] = hpc.exp %[[W]]
// ADAMW: %[[GB:.+]] = hpc.neg %[[B]]
// ADAMW: %[[NORM:.+]] = hpc.sqrt
// ADAMW: hpc.adamw_update %[[W]], %[[GW]], %[[MW]], %[[VW]], %[[LR]], %[[STEP]] unless_nonfinite(%[[NORM]] : tensor<f32>) {beta1 = 8.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>{{$}}
// ADAMW: hpc.adamw_update %[[B]], %[[GB]], %[[MB]], %[[VB]], %[[LR]], %[[STEP]] unless_nonfinite(%[[NORM]] : tensor<f32>) {beta1 = 8.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64} : tensor<2xf32>
// ADAMW-NOT: sgd_update

// Clipping: g *= min(1, max_norm / (norm + 1e-6)), fused into the updates
// (their clip operands: the norm and the input hpc.clip_norm, which the
// runtime feeds); the norm returned is the one before clipping.
// CLIP: clip_norm = 2.500000e+00 : f64
// CLIP-LABEL: func.func @main
// CLIP-SAME: %[[MAX:[^:]+]]: tensor<f32> {hpc.name = "hpc.clip_norm"}
// CLIP: %[[GW:.+]] = hpc.exp
// CLIP: %[[GB:.+]] = hpc.neg
// CLIP: %[[NORM:.+]] = hpc.sqrt
// CLIP-NOT: hpc.mul
// CLIP: hpc.sgd_update %{{.+}}, %[[GW]], %{{.+}} unless_nonfinite(%[[NORM]] : tensor<f32>) clip(%[[NORM]], %[[MAX]] : tensor<f32>, tensor<f32>) :
// CLIP: hpc.sgd_update %{{.+}}, %[[GB]], %{{.+}} unless_nonfinite(%[[NORM]] : tensor<f32>) clip(%[[NORM]], %[[MAX]] : tensor<f32>, tensor<f32>) :
// CLIP: return %{{.+}}, %[[NORM]] : tensor<f32>, tensor<f32>

// weight-decay-exclude: parameters whose name contains a listed part get no
// decay; hpc.train records the decay of the others.
// WDX: weight_decay = 1.000000e-01 : f64}
// WDX: hpc.adamw_update %{{.+}} {weight_decay = 1.000000e-01 : f64} : tensor<3xf32>
// WDX: hpc.adamw_update %{{.+}} {weight_decay = 0.000000e+00 : f64} : tensor<2xf32>

// keep-gradients: the gradients (as hpc-autodiff returned them, before
// clipping) follow the loss and the norm.
// KEEP-LABEL: func.func @main
// KEEP-SAME: -> (tensor<f32> {hpc.name = "loss"}, tensor<f32> {hpc.name = "grad_norm"}, tensor<3xf32> {hpc.name = "grad.fc.weight"}, tensor<2xf32> {hpc.name = "grad.fc.bias"})
// KEEP: %[[GW:.+]] = hpc.exp
// KEEP: %[[GB:.+]] = hpc.neg
// KEEP: %[[NORM:.+]] = hpc.sqrt
// KEEP: return %{{.+}}, %[[NORM]], %[[GW]], %[[GB]] : tensor<f32>, tensor<f32>, tensor<3xf32>, tensor<2xf32>

// SCHED: lr_schedule = {kind = "linear", total = 50 : i64, warmup = 5 : i64}

// skip-nonfinite=false: the updates apply whatever the norm.
// NOSKIP: skip_nonfinite = false
// NOSKIP: hpc.sgd_update %{{.+}}, %{{.+}}, %{{[^ ]+}} : tensor<3xf32>, tensor<3xf32>, tensor<f32>{{$}}
// NOSKIP-NOT: unless_nonfinite
