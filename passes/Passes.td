//===- Passes.td - HPC-Opt pass declarations ---------------*- tablegen -*-===//
//
// Every pass of the project, declared once; GEN_PASS_DEF_<NAME> in each
// pass's own .cpp.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_TD
#define HPC_PASSES_TD

include "mlir/Pass/PassBase.td"

def HPCPrintSummary : Pass<"hpc-print-summary", "mlir::ModuleOp"> {
  let summary = "Print a one-screen summary of a model: ops, parameters, FLOPs";
  let description = [{
    Analysis only; the IR is unchanged. For each function it prints to
    stderr the number of ops of each kind, the parameter count and bytes (the
    `hpc.weight` ops), and the forward FLOPs in total and per token (the
    elements of the first integer input, the token ids) or per sample (the
    leading dimension of the first input).

    ```
    hpc-opt model.onnx --input-shape input_ids=1,16 --hpc-print-summary
    ```
  }];
  let dependentDialects = ["hpc::HPCDialect"];
}

def HPCFuseComposites : Pass<"hpc-fuse-composites", "mlir::ModuleOp"> {
  let summary = "Replace exporter decompositions of GELU, SiLU and RMSNorm by single ops";
  let description = [{
    Exporters spell several model-level ops as chains of elementwise math.
    This pass recognizes them, whatever the operand order, and replaces each
    chain by the one hpc op that kernels, the cost model and sharding rules
    understand:

    - `0.5 * x * (1 + erf(x / sqrt(2)))`            -> `hpc.gelu` (none)
    - `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`
                                                     -> `hpc.gelu` (tanh)
    - `x * sigmoid(x)`                               -> `hpc.silu`
    - `w * (x / sqrt(mean(x^2, trailing axes) + eps))` (also with
      `x * (1 / sqrt(..))`, `reciprocal`, `x * x`)    -> `hpc.rms_norm`

    Before:
    ```mlir
    %s = hpc.sigmoid %x : tensor<4x8xf32>
    %y = hpc.mul %x, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
    After:
    ```mlir
    %y = hpc.silu %x : tensor<4x8xf32>
    ```
    Constants must match to 1e-4 relative; intermediate values used
    elsewhere keep the chain as it is.
  }];
  let dependentDialects = ["hpc::HPCDialect"];
}

def HPCFuseEpilogues : Pass<"hpc-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Fuse bias adds and activations into hpc.gemm and hpc.conv";
  let description = [{
    The contraction kernels apply a bias and an elementwise activation to
    their result before writing it (oneDNN post-ops); this pass decides
    where they do. On every function, in this order:

    - `hpc.add(hpc.matmul(A, W), b)` (either operand order), W 2-D, A at
      least 2-D, b of shape [N] or [1, ..., 1, N] for W's N columns, the add's
      result type the matmul's, float and static types -> `hpc.gemm` of A
      reshaped to [prod(leading dims), K], W and b reshaped to [N], reshaped
      back to the matmul's shape (reshapes are views; none when A is 2-D).
    - `hpc.add(hpc.conv(x, w, b), r)` (either operand order), both operands
      and the result of one type (no broadcast), the conv's `activation`
      "none" and no residual yet -> `hpc.conv(x, w, b) residual(r)`, moved
      to where the add was (r may be computed after the conv, as a ResNet
      block's downsampling convolution is): oneDNN adds r in the
      convolution's epilogue (a binary post-op), so the residual add of a
      ResNet block, and with the next rule its relu, cost no pass over
      memory of their own.
    - `hpc.transpose(hpc.gemm(A, B))` with perm [1, 0], the gemm without
      `c`, alpha 1 and no activation, read only by the transpose (through
      reshapes) -> `hpc.gemm(B, A)` with `trans_a` = !trans_b and `trans_b`
      = !trans_a: a tied LM head's weight gradient without a transposed copy.
    - `hpc.add(s, hpc.gemm(A, B))` (either operand order, through reshapes),
      the gemm as above and read only by the add, s of the add's type and
      the operands' element type and made before the gemm -> `hpc.gemm(A, B,
      s)` where the gemm was: oneDNN adds s in the product's epilogue (a
      binary post-op), so hpc-micro-batches' running sums of weight
      gradients cost no pass of their own. Before it: `hpc.add(s,
      scatter_elements(zeros, i, u) {reduction = "add"})` ->
      `scatter_elements(s, i, u)`, and `hpc.add(s, scatter_elements(x, i,
      u))` with x read only by the scatter -> `scatter_elements(hpc.add(s,
      x), i, u)` (an embedding's gradient rows go into the running sum; a
      tied embedding's sum plus the head's part then fuses as above).
    - `act(hpc.gemm)` or `act(hpc.conv)`, also `act(hpc.reshape(hpc.gemm))`
      and `act(hpc.reshape(hpc.conv))`, where act is `hpc.relu`,
      `hpc.gelu` (-> "gelu", or "gelu_tanh" for approximate "tanh"),
      `hpc.sigmoid`, `hpc.tanh` or `hpc.silu` and the product's `activation`
      is "none" -> the product with `activation` set; act's users read the
      product (or the reshape).

    Both look through the `hpc.cast` to f32 that hpc-autocast puts after a
    bf16 product: `add(cast_f32(matmul_bf16(A, W)), b)` becomes
    `cast_f32(gemm_bf16(A, W, b_bf16))` (b an f32 weight or constant is
    stored in bf16, any other b is cast once), and `act(cast_f32(p))`,
    also with one reshape before or after the cast, becomes
    `cast_f32(p {activation})`: the kernel adds the bias and applies the
    activation in f32 and rounds to bf16 once. Casts of the fused result to
    bf16 again (the next product's operand) read `p`'s result instead.

    Before:
    ```mlir
    %y = hpc.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
    %z = hpc.add %y, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %r = hpc.relu %z : tensor<2x8x32xf32>
    ```
    After:
    ```mlir
    %0 = hpc.reshape %x {shape = array<i64: 16, 64>} : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
    %1 = hpc.gemm %0, %w, %b {activation = "relu"}
        : (tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    %r = hpc.reshape %1 {shape = array<i64: 2, 8, 32>} : (tensor<16x32xf32>) -> tensor<2x8x32xf32>
    ```
    First, `hpc.matmul(A, hpc.transpose(W) {perm = [1, 0]})` with W 2-D (a
    tied LM head) becomes `hpc.gemm(A, W) {trans_b = true}` between the
    same reshapes: the transposed copy of W is never made. And the weight
    gradient of a linear layer as the autodiff writes it,
    `hpc.reduce_sum(hpc.matmul(hpc.transpose(A), D))` with A [B..., M, K]
    transposed in its last two dimensions, D [B..., M, N] and the sum over
    exactly the batch dimensions B... (also through a cast back from bf16
    between the matmul and the sum), becomes one
    `hpc.gemm(A', D') {trans_a = true}` of A and D reshaped to
    [prod(B...) * M, K] and [prod(B...) * M, N], reshaped to the sum's
    shape: no transposed copy of A and no batch of [K, N] partial products
    to add up.

    Every fused intermediate (the matmul's result, the sum, the
    pre-activation, a cast back, the transposed weight) must have the
    fusing op as its only use: a value that
    another op reads, as the backward pass of a train step reads
    pre-activations, keeps the ops as they are. The fused op's location is
    the fused location of the ops it replaces.

    Last, a cast back to f32 whose value only moves (reshape, transpose,
    split, ...) on its way to casts to bf16 moves the bf16 value instead
    (both casts go), and a bf16 `hpc.gemm` or `hpc.matmul` (hpc-autocast's)
    whose result only its cast back to f32 reads, directly or through
    reshapes, gets an f32 result: the kernel writes its f32 sum, unrounded,
    and the cast goes. A result that another bf16 product reads stays bf16.
  }];
  let dependentDialects = ["hpc::HPCDialect"];
  let statistics = [
    Statistic<"numMovedBf16", "moved-bf16",
              "Casts back to f32 whose moves to casts to bf16 move bf16 data">,
    Statistic<"numWidened", "widened",
              "bf16 products that write their f32 sum instead of a cast back">,
    Statistic<"numTransposes", "transposes",
              "Matmuls of a transposed 2-D weight made gemms with trans_b">,
    Statistic<"numWeightGradients", "weight-gradients",
              "Batch-summed matmuls of a transposed activation made gemms with trans_a">,
    Statistic<"numBiases", "biases", "Bias adds of a matmul fused into a gemm">,
    Statistic<"numResiduals", "residuals", "Residual adds fused into a conv">,
    Statistic<"numActivations", "activations", "Activations fused into a gemm or conv">,
    Statistic<"numTransposedProducts", "transposed-products",
              "Transposes of a gemm's result made by the gemm (operands swapped)">,
    Statistic<"numScatterAdds", "scatter-adds",
              "Adds of a tensor to a scatter-add's result made by the scatter">,
    Statistic<"numAccumulations", "accumulations",
              "Adds of a tensor to a gemm's result made by the gemm (its c)">
  ];
}

def HPCPrintShardingRules : Pass<"hpc-print-sharding-rules", "mlir::ModuleOp"> {
  let summary = "Print every hpc op's sharding rule (for tests and debugging)";
  let description = [{
    For each hpc op, prints `<op name>: <rule>` to stderr, where the rule is
    einsum-like: operand dimension lists `->` result dimension lists, each
    dimension a factor `fN` or `-`, then the reduction and replicated
    factors.

    ```
    hpc.matmul: [f0, f2], [f2, f1] -> [f0, f1] reduction{f2}
    ```
  }];
}

def HPCUnfuseSplitProjections : Pass<"hpc-unfuse-split-projections", "mlir::ModuleOp"> {
  let summary = "One projection per piece of a split fused projection (QKV)";
  let description = [{
    `split(x @ W + b)` along the output features (attention's fused QKV
    projection) becomes one product per piece, on the pieces of W and b
    that one hpc.split of each gives:

    ```mlir
    %y = hpc.matmul %x, %w : (tensor<8x256xf32>, tensor<256x768xf32>) -> tensor<8x768xf32>
    %q, %k, %v = hpc.split %y {axis = 1, sizes = [256, 256, 256]}
    ```
    becomes three products by `hpc.split %w`'s pieces. A train step with a
    tp axis runs it before hpc-autodiff, so tensor parallelism splits each of
    Q, K and V by heads (Megatron-LM's layout) in the forward and backward
    passes alike; the weight stays one tensor (one state variable, one
    checkpoint record), its gradient one concat of the pieces'.
    dist-propagate unfuses an inference program's projections itself (by
    slices, which dist-weight-pieces stores apart).
  }];
}

def HPCRouteExperts : Pass<"hpc-route-experts", "mlir::ModuleOp"> {
  let summary = "Routed mixture-of-experts layers instead of the exporters' dense dispatch";
  let description = [{
    A mixture-of-experts layer exported with a dense dispatch (every expert
    on every token, weighted by a [tokens, experts] gate matrix that is zero
    for the unchosen experts: scripts/export_transformers.py's Mixtral)
    becomes a routed one: hpc.moe_route gives each token's top-k choices a
    row of the chosen expert's buffer, hpc.moe_dispatch fills the
    [experts, capacity, hidden] buffers, the experts' products run on them,
    and hpc.moe_gather brings each token's rows back, weighted by its gates.
    The capacity is `ceil(capacity-factor * k * tokens / experts)` rows
    (choices past it are dropped: they add nothing to the token's output),
    or every token with capacity-factor 0, which equals the dense dispatch.
    A layer whose experts do anything but per-token work stays dense.

    With a `mesh` of more than one data-parallel rank (its `dp` and `ep`
    axes split the tokens into dp*ep groups, each `ep` consecutive groups
    one slice; the module gets the mesh): the routing is still the whole
    batch's, but each group dispatches its own tokens into buffers of its
    own (hpc.moe_exchange_slots gives the rows); with ep > 1 (expert
    parallelism) a dist.annotate pair moves them from the group's rank to
    the experts' ranks along ep (one all_to_all once partitioned); each rank
    compacts what it has into its experts' rows of the whole batch's
    buffers and runs the experts' chain on those, and the results travel
    back the same way. The chain runs on `[experts, slices * min(capacity,
    ep * group rows), hidden]`, the experts split over ep and the rows over
    dp. (hpc-compile gives the mesh where it has an ep axis, or a dp axis
    in a step of one stage and one micro-batch: hpc::routingMesh.)
  }];
  let options = [
    Option<"capacityFactor", "capacity-factor", "double", /*default=*/"0.0",
           "Rows of an expert's buffer as a multiple of its share k*tokens/experts; "
           "0: every token (no choice dropped)">,
    Option<"mesh", "mesh", "std::string", /*default=*/"",
           "The mesh the program will be partitioned over (dp=2,ep=2): an ep axis "
           "splits the experts">,
  ];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def HPCMoEBalance : Pass<"hpc-moe-balance", "mlir::ModuleOp"> {
  let summary = "Load balancing of routed mixture-of-experts layers in a train step";
  let description = [{
    On a train step (after hpc-append-loss, before hpc-autodiff) whose
    mixture-of-experts layers hpc-route-experts routed:

    - `bias-rate` r > 0 (DeepSeek-V3's auxiliary-loss-free balancing): each
      layer's top-k is taken on `logits + b` (`probs + b` when the router
      is no softmax), b a per-expert bias kept as
      state (`hpc.variable "moe.bias.N" {role = "buffer"}`, zeros at first);
      the gates stay the chosen experts' probabilities; at the end of the
      step `b += r * sign(mean(load) - load)`.
    - `aux-loss` a > 0 (Switch Transformer): the loss gains, per layer,
      `a * E * sum_i f_i * P_i`, f_i the fraction of the step's choices that
      went to expert i and P_i the mean router probability of expert i.
  }];
  let options = [
    Option<"biasRate", "bias-rate", "double", /*default=*/"0.0",
           "The bias update's step (0: off)">,
    Option<"auxLoss", "aux-loss", "double", /*default=*/"0.0",
           "The auxiliary loss's weight alpha (0: off)">,
  ];
}

def HPCAppendLoss : Pass<"hpc-append-loss", "mlir::ModuleOp"> {
  let summary = "Make @main return one scalar loss of its outputs";
  let description = [{
    `loss` is `cross-entropy:LOGITS,LABELS`, `mse:OUT,TARGET` or
    `output:NAME`, naming results of @main by their `hpc.name` (the importer
    returns any graph tensor named by the loss). Cross entropy takes logits
    `[..., C]` and adds an i64 input LABELS of the logits' shape without the
    class dim; it is the mean of `-log_softmax(logits)[label]` over the
    labels that are not -100 (PyTorch's `F.cross_entropy`). MSE adds an
    input TARGET of OUT's type and is `mean((OUT - TARGET)^2)`. Afterwards
    @main returns only the loss, named "loss".

    ```mlir
    func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}) -> (tensor<2x3xf32> {hpc.name = "logits"})
    ```
    with `loss=cross-entropy:logits,labels` becomes
    ```mlir
    func.func @main(%x: tensor<2x3xf32> {hpc.name = "x"}, %labels: tensor<2xi64> {hpc.name = "labels"})
        -> (tensor<f32> {hpc.name = "loss"})
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "cross-entropy:LOGITS,LABELS | mse:OUT,TARGET | output:NAME">
  ];
}

def HPCTrainMode : Pass<"hpc-train-mode", "mlir::ModuleOp"> {
  let summary = "Batch norm on batch statistics, with running statistics as state";
  let description = [{
    For a train step in PyTorch's train mode (`--train-mode`): every
    `hpc.batch_norm` normalizes with the statistics of its batch (mean and
    biased variance over every dim but the channels), built from reductions
    so that hpc-autodiff differentiates through them and partitioning sums
    them over data-parallel ranks. Running statistics that are weights
    become state (`hpc.variable`, role "buffer") and are updated at the end
    of the step with ONNX's momentum m: running = m * running + (1 - m) *
    batch, the variance unbiased (n / (n - 1)), as PyTorch does.

    ```mlir
    %y = hpc.batch_norm %x, %scale, %bias, %mean, %var : ...
    ```
    becomes
    ```mlir
    %mean = hpc.variable "bn.mean" {role = "buffer"} : ...
    %s = hpc.reduce_sum %x {axes = array<i64: 0, 2, 3>} ...   // batch mean, variance
    ... normalized %y ...
    hpc.assign %mean, %new_mean : tensor<16xf32>
    ```
    Every `hpc.dropout` of ratio p > 0 becomes `input * mask`, the mask an
    `hpc.dropout_mask` (0 with probability p, else 1 / (1 - p)) keyed by the
    state tensor "hpc.rng_seed" (role "rng", initialized to `seed`), the step
    input "hpc.step" and the dropout's index, so a resumed run draws the
    same masks. Its gradient is the same mask (the backward multiplies by
    it).
  }];
  let options = [
    Option<"seed", "seed", "int64_t", /*default=*/"0", "Seed of the dropout masks">
  ];
}

def HPCAutodiff : Pass<"hpc-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode gradients of @main's loss with respect to its trainable weights";
  let description = [{
    @main must return a 0-d float named "loss" (hpc-append-loss). The
    trainable weights are the float `hpc.weight`s that reach the loss
    through a differentiable path, except buffers recognised by their use
    (batch-norm running statistics) and the names in `freeze`; they become
    `hpc.variable`s (role "param"). Every op on a path from a trainable
    weight to the loss builds its operands' gradients through
    GradientInterface (HPCGradients.cpp); ops without one are all reported,
    one diagnostic each. @main then returns the loss and one gradient per
    trainable weight, named `grad.<name>` with `hpc.gradient_of = <name>`.
    With `wrt-inputs`, the float inputs are differentiated too (gradient
    checks).

    ```mlir
    %w = hpc.weight "w" : tensor<3xf32> = dense<...>
    %y = hpc.mul %w, %x ...
    ```
    becomes
    ```mlir
    %w = hpc.variable "w" : tensor<3xf32> = dense<...>
    ... forward ...
    %gw = hpc.mul %dy, %x ...
    return %loss, %gw
    ```
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "Weights not to train (by initializer name)">,
    Option<"printTrainable", "print-trainable", "bool", /*default=*/"false",
           "Print the trainable weights (name, shape, elements) to stdout">,
    Option<"wrtInputs", "wrt-inputs", "bool", /*default=*/"false",
           "Also differentiate with respect to the float inputs of @main">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activations the backward reads: none (kept), full (recomputed from "
           "checkpoints of the residual stream), selective (recomputed where cheap: "
           "attention scores, softmax, norms, activation functions)">,
    Option<"fusedGradients", "fused-gradients", "bool", /*default=*/"true",
           "GELU's and layer normalization's input gradients as one op each "
           "(hpc.gelu_grad, hpc.layer_norm_grad); false: as chains of forward "
           "ops (for comparison)">,
    Option<"lossScaleInput", "loss-scale-input", "bool", /*default=*/"false",
           "Start the backward from a 0-d f32 input named hpc.loss_scale (the "
           "loss's gradient; the train command feeds 1, and NaN for the fault "
           "nan-grad) instead of the constant 1">
  ];
  let statistics = [
    Statistic<"numTrainable", "trainable", "Trainable weights">,
    Statistic<"numGradientOps", "gradient-ops", "Ops built for the backward pass">
  ];
}

def HPCMicroBatches : Pass<"hpc-micro-batches", "mlir::ModuleOp"> {
  let summary = "Run a train step's batch as micro-batches, accumulating the gradients";
  let description = [{
    Runs between hpc-autodiff and hpc-optimizer on @main built for one
    micro-batch of b rows (every input of rank >= 1 has b rows; its results
    are the loss and the gradients, floats). @main then takes `count` x b
    rows and runs its forward and backward ops `count` times, one
    micro-batch after the other, each result the mean over the
    micro-batches: the whole batch's mean loss and its gradients, as
    gradient accumulation in PyTorch gives them, with only one
    micro-batch's activations alive at a time. Ops that do not read the
    batch (weights and what is computed from them alone) run once. Each
    micro-batch's dropout masks are drawn on their own streams; state that
    the step assigns (train mode's running statistics) is carried from one
    micro-batch to the next and written once, after the last.

    A cross entropy (hpc-append-loss's -(sum) / (count of labels)) weighs
    each micro-batch by its count, so the results are the whole batch's
    mean even where ignored labels make the counts unequal; other losses
    take equal weights.

    With a `mesh` whose dp axis has G ranks (the mesh the step is then
    partitioned over), micro-batch m is rows [m b/G, (m+1) b/G) of each of
    the G blocks of the batch, the block a data-parallel rank holds, so
    partitioning moves no rows: a rank's micro-batches are consecutive
    pieces of its own rows. b must be a multiple of G.

    ```mlir
    func.func @main(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<8x2xf32>)
    ```
    with count = 2 becomes
    ```mlir
    func.func @main(%x: tensor<8x8xf32>) -> (tensor<f32>, tensor<8x2xf32>)
      // x rows 0-3: forward, backward; rows 4-7: forward, backward
      // loss = (c0 l0 + c1 l1) / (c0 + c1), gradient likewise (c: counts)
    ```
  }];
  let options = [
    Option<"count", "count", "int64_t", /*default=*/"1", "Micro-batches a step">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The mesh the step is partitioned over (as dist-propagate's option); its dp "
           "ranks each hold a piece of every micro-batch">,
  ];
  let dependentDialects = ["hpc::dist::DistDialect", "hpc::HPCDialect"];
}

def HPCOptimizer : Pass<"hpc-optimizer", "mlir::ModuleOp"> {
  let summary = "Append the optimizer step: a train-step program";
  let description = [{
    Consumes the gradients hpc-autodiff returns: computes their global L2
    norm (returned as "grad_norm"), scales them by
    min(1, c / (norm + 1e-6)) when `clip-norm` > 0 or `clip-norm-auto`
    (PyTorch's clip_grad_norm_; c is the input "hpc.clip_norm", 0-d f32,
    which the runtime feeds each step: the compiled clip-norm, the running
    statistic of --clip-norm=auto, or the conservative plan's), and updates each parameter in place with
    `hpc.sgd_update` or `hpc.adamw_update`, creating the optimizer's state
    as zero-initialized `hpc.variable`s (role "optimizer"). The learning
    rate and the step number become inputs "hpc.lr" (0-d f32) and
    "hpc.step" (0-d i64), so schedules need no recompile. The module gets
    `hpc.train`, the dictionary the runtime's train command reads (loss,
    labels input, batch, optimizer hyperparameters, schedule).

    ```mlir
    return %loss, %gw        // %gw {hpc.gradient_of = "w"}
    ```
    becomes (sgd, momentum 0.9)
    ```mlir
    %buf = hpc.variable "w.momentum_buffer" {role = "optimizer"} : tensor<3xf32>
    hpc.sgd_update %w, %gw, %lr, %buf {momentum = 9.0e-01 : f64} : ...
    return %loss, %norm
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw">,
    Option<"lr", "lr", "double", /*default=*/"0.001", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (default: 0 for sgd, 0.01 for adamw, as PyTorch)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0",
           "Clip the global gradient norm to this (0: no clipping)">,
    Option<"clipNormAuto", "clip-norm-auto", "bool", /*default=*/"false",
           "Clip the global gradient norm to a running statistic of the norms "
           "the runtime keeps (docs/training.md)">,
    Option<"skipNonfinite", "skip-nonfinite", "bool", /*default=*/"true",
           "Skip every update of a step whose global gradient norm is not finite "
           "(PyTorch GradScaler's semantics: the parameters and optimizer state "
           "stay as they were; the runtime counts the skip and does not advance "
           "the optimizer's step count)">,
    ListOption<"weightDecayExclude", "weight-decay-exclude", "std::string",
               "Parameters whose name contains one of these get no weight decay">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"\"constant\"",
           "constant | cosine:WARMUP,TOTAL | linear:WARMUP,TOTAL">,
    Option<"keepGradients", "keep-gradients", "bool", /*default=*/"false",
           "Also return the gradients (grad.<name>), for numerical tests">
  ];
}

def HPCAutocast : Pass<"hpc-autocast", "mlir::ModuleOp"> {
  let summary = "Compute the products in bf16 and everything else in f32 (autocast)";
  let description = [{
    PyTorch's CPU autocast to bf16, decided at compile time. With
    `precision=bf16`, every `hpc.matmul`, `hpc.gemm`, `hpc.conv`,
    `hpc.conv_transpose` and `hpc.conv_weight_grad` whose float operands
    are all f32 reads them as bf16 (the kernels accumulate in f32 and write
    bf16) and its result is cast back to f32 right after, so every other op
    (norms, softmax, reductions, elementwise ops, losses, optimizer updates)
    stays f32. Each value is cast once, however many products read it:

    - an `hpc.weight` or `hpc.constant` becomes one of bf16 data (rounded to
      nearest even at compile time; a weight keeps its name, and a weight
      that f32 ops also read is stored in both types);
    - an `hpc.variable` (a train step's f32 master weight) keeps its type and
      is cast on every step;
    - a product's f32 result cast back is read as its bf16 value (exact);
    - reshape, transpose, squeeze, unsqueeze, slice, expand and
      `dist.all_slice` of a value that is cast anyway (a weight, a variable,
      an operand cast already) move their data in bf16;
    - anything else gets an `hpc.cast` before its first product.

    hpc-compile runs it after the train step is built (the backward products
    are cast too; nothing is differentiated afterwards) and after
    partitioning (collectives stay f32). The module gets
    `hpc.precision = "bf16"` (the manifest's "precision"). `precision=fp32`
    changes nothing.

    Before:
    ```mlir
    %w = hpc.weight "fc.weight" : tensor<64x32xf32> = dense<...>
    %y = hpc.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
    %z = hpc.softmax %y {axis = 1 : i64} : tensor<8x32xf32>
    ```
    After (`precision=bf16`):
    ```mlir
    %w = hpc.weight "fc.weight" : tensor<64x32xbf16> = dense<...>
    %0 = hpc.cast %x {to = bf16} : tensor<8x64xf32> to tensor<8x64xbf16>
    %1 = hpc.matmul %0, %w : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
    %y = hpc.cast %1 {to = f32} : tensor<8x32xbf16> to tensor<8x32xf32>
    %z = hpc.softmax %y {axis = 1 : i64} : tensor<8x32xf32>
    ```
  }];
  let options = [
    Option<"precision", "precision", "hpc::Precision",
           /*default=*/"hpc::Precision::FP32",
           "fp32 (no change) or bf16 (products in bf16, the rest in f32)",
           [{::llvm::cl::values(
             clEnumValN(hpc::Precision::FP32, "fp32", "Leave the module as it is"),
             clEnumValN(hpc::Precision::BF16, "bf16",
                        "Products in bf16, everything else in f32"))}]>
  ];
  let dependentDialects = ["hpc::HPCDialect"];
  let statistics = [
    Statistic<"numProducts", "products", "Products computed in bf16">,
    Statistic<"numStored", "stored", "Weights and constants stored in bf16">,
    Statistic<"numCasts", "casts", "Casts to bf16 left for run time">
  ];
}

def HPCPlanLayouts : Pass<"hpc-plan-layouts", "mlir::ModuleOp"> {
  let summary = "Decide which activations are stored in oneDNN's blocked channel layout";
  let description = [{
    oneDNN's direct convolutions on this CPU read and write activations in
    the blocked layout (nChw8c on AVX2, nChw16c on AVX-512: channels in
    blocks of 8 or 16, innermost); on plain NCHW data it picks a slower
    im2col gemm. Activations are plain unless the plan says otherwise: this
    pass marks each op whose result 0 is stored blocked with the unit
    attribute `hpc.blocked`, which the lowering writes into the manifest
    ("layout": "blocked"). Only static rank-4 [N, C, H, W] f32 values with
    C % 16 == 0 qualify (so every block size has the plain bytes and the
    arena plan does not change).

    - Writers: `hpc.conv`; `hpc.relu`, `hpc.add` of two operands of the
      result's shape and `hpc.max_pool` with all dilations 1, each when its
      operands are blocked (an add of a blocked and a plain value: neither).
    - Readers: `hpc.conv`'s input (not its weight or bias), `hpc.relu`,
      `hpc.add` and `hpc.max_pool` as above, `hpc.global_avg_pool` (its
      [N, C, 1, 1] result stays plain).

    A value is blocked iff its producer may write it blocked and every user
    reads it blocked; the pass computes the greatest such set (all
    candidates, then remove violators until none is left). Function
    arguments and results, weights, views, collectives and every other op
    see plain tensors. A train step (module attribute `hpc.train`) is left
    unmarked: the backward kernels read plain tensors.

    Before:
    ```mlir
    %0 = hpc.conv %x, %w1 {...} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x8x8xf32>
    %1 = hpc.relu %0 : tensor<1x16x8x8xf32>
    %2 = hpc.conv %1, %w2 {...} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x8x8xf32>
    return %2 : tensor<1x16x8x8xf32>
    ```
    After (%2 is returned: plain):
    ```mlir
    %0 = hpc.conv %x, %w1 {..., hpc.blocked} : ...
    %1 = hpc.relu %0 {hpc.blocked} : tensor<1x16x8x8xf32>
    %2 = hpc.conv %1, %w2 {...} : ...
    ```
  }];
  let dependentDialects = ["hpc::HPCDialect"];
  let statistics = [
    Statistic<"numBlocked", "blocked", "Results stored in the blocked layout">
  ];
}

def HPCLowerToRuntime : Pass<"hpc-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower func @main of hpc ops to LLVM dialect calls of libhpcrt";
  let description = [{
    Plans the program (tensor slots, one arena with liveness-based reuse,
    weights data) and replaces `func.func @main` by:

    - `llvm.func @hpc_program_run(%ctx: !llvm.ptr)`: one call of
      `hpcrt_<op>(ctx, op index, ids, iattrs, fattrs, sattrs)` per op that
      needs a kernel, in program order, with its operand ids and attributes
      in constant globals (runtime/include/hpcrt.h defines the encoding);
    - `llvm.mlir.global @hpc_manifest`: the JSON manifest (tensor table,
      inputs, outputs, arena size, weights file and hash, ops).

    With `weights-file`, the weights are written there as safetensors.

    ```mlir
    %y = hpc.relu %x : tensor<4xf32>
    ```
    becomes
    ```mlir
    llvm.call @hpcrt_relu(%ctx, %c0, %ids, %null, %null, %null) : ...
    ```
  }];
  let options = [
    Option<"weightsFile", "weights-file", "std::string", /*default=*/"\"\"",
           "Write the weights (safetensors) to this path">,
    Option<"weightsName", "weights-name", "std::string", /*default=*/"\"\"",
           "File name of the weights recorded in the manifest (default: the "
           "base name of weights-file)">,
    Option<"modelName", "model-name", "std::string", /*default=*/"\"\"",
           "Model name recorded in the manifest">,
    Option<"modelPath", "model-path", "std::string", /*default=*/"\"\"",
           "Absolute path of the source model, recorded in the manifest as "
           "\"model_path\" (`train --save-onnx` rewrites it; empty: not recorded)">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def DistPropagate : Pass<"dist-propagate", "mlir::ModuleOp"> {
  let summary = "Complete the shardings of a program from seeds and presets";
  let description = [{
    Decides how every tensor of `func.func @main` is split over the mesh.
    Seeds come from `dist.annotate` ops, from `shard=NAME=SPEC` (a graph
    input or weight by name; SPEC gives each dimension's mesh axes, `-` for
    none, `+` joining several: `input_ids=dp,-`), and from presets on a
    mesh given as `mesh=dp=2,tp=2`: a `dp` axis splits dimension 0 of every
    graph input (the batch); a `tp` axis makes contractions with a weight
    (matmul, gemm, conv) alternate column and row parallelism as in
    Megatron-LM, and with reshapes this splits attention by heads.

    Shardings flow forward through each op's ShardingRuleInterface; a
    factor that needs replication takes no axis. Weights and values
    computed only from weights are held whole by every rank and may take
    any sharding for free. Each op gets `dist.operand_shardings` and
    `dist.result_shardings` (a result of a split reduction is partial);
    `dist-partition` turns them into local shapes and collectives.

    A fused QKV projection split on its output features (split of
    matmul(+bias) of a weight) is first rewritten into one projection per
    piece, so column parallelism needs no gather before the split.

    With `sequence-parallel` (and a `tp` axis), an op that tensor
    parallelism would run whole on every tp rank (its operands bring no
    `tp` split: a norm, a residual add, the sum a row-parallel product
    leaves partial) splits the sequence instead, dimension 1 of its
    [batch, sequence, ...] result, over `tp`; ops after it follow. A
    contraction takes such a sequence-split operand gathered over `tp` (and
    then splits as Megatron-LM's tensor parallelism does), so the partial
    sum after a row-parallel product becomes one reduce_scatter and the
    input of the next column-parallel one one all_gather, where tensor
    parallelism alone all-reduces.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh axes NAME=SIZE[:intra|:inter],... (tp, sp and ep default to "
           "intra-node, others to inter-node); replaces the module's mesh">,
    ListOption<"shard", "shard", "std::string",
               "NAME=SPEC sharding seeds for graph inputs and weights">,
    Option<"presets", "presets", "bool", /*default=*/"true",
           "Apply the dp/tp presets of the mesh axes">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "With a tp axis and presets: Megatron-LM sequence parallelism; what "
           "tensor parallelism runs whole on every tp rank (norms, residual "
           "adds, dropout) is split along the sequence (dimension 1 of a "
           "[batch, sequence, ...] activation) over tp, a row-parallel "
           "product's partial sum reduce-scattered into it, gathered before "
           "the next product">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "Ranks per node of the cluster the program runs on, laid node-major "
           "(ranks 0..P-1 on the first node); recorded as the module's "
           "dist.ranks_per_node, which the runtime checks at start (0: not known)">
  ];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def DistPartition : Pass<"dist-partition", "mlir::ModuleOp"> {
  let summary = "Turn a sharded global program into the per-rank SPMD program";
  let description = [{
    Rewrites `func.func @main` (after dist-propagate) into the program every
    rank runs: local shapes, and before each op the collectives that bring
    its operands from their current sharding to the one the op needs:
    partial -> all_reduce (or reduce_scatter when the same axes then split a
    dimension), split -> whole with all_gather, whole -> split with
    all_slice (no communication). Graph inputs arrive whole on every rank;
    graph outputs leave whole.

    It reports the bytes each rank sends per step (ring algorithms:
    all_reduce 2(g-1)/g of the tensor, all_gather and reduce_scatter (g-1)
    pieces), as the module attribute `dist.bytes_per_rank` and on stderr.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"true",
           "Print the communication volume per rank to stderr">
  ];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def DistCommReport : Pass<"dist-comm-report", "mlir::ModuleOp"> {
  let summary = "Report the bytes each rank sends per step in a per-rank program";
  let description = [{
    Sums the traffic of every dist collective in the module as the runtime
    sends it (the same accounting as dist-partition's report and the
    runtime's byte counters) and prints one line to stderr; the total is
    also set as the module attribute `dist.bytes_per_rank`. Use it on
    programs partitioned elsewhere, e.g. by upstream `--shard-partition`
    after `--convert-shard-to-dist`.
  }];
}

def DistBucket : Pass<"dist-bucket", "mlir::ModuleOp"> {
  let summary = "Fuse the all-reduces (and ZeRO-2/3 reduce-scatters into rows) of a per-rank program into buckets";
  let description = [{
    Fuses the gradient all-reduces of a partitioned train step (any
    all-reduces whose results are not used before the others are ready) into
    buckets of at most `bucket-bytes` (by default about a sixteenth of all the
    bytes reduced, from 1 MiB to 25 MiB: small enough that the first buckets
    start early in the backward pass, large enough that the link's latency
    does not count; with `cluster`, the size the cost model predicts leaves
    the least communication exposed, see below), in the order their operands are ready:
    the members are flattened and concatenated, reduced by one all_reduce
    right after the last member's operand, and split back. Same axes,
    reduction and element type; compressed collectives stay alone.
    `dist.bytes_per_rank` is recounted. Before:

    ```mlir
    %ga = ... : tensor<4x8xf32>
    %ra = dist.all_reduce %ga over ["dp"] sum : tensor<4x8xf32> -> tensor<4x8xf32>
    %gb = ... : tensor<8xf32>
    %rb = dist.all_reduce %gb over ["dp"] sum : tensor<8xf32> -> tensor<8xf32>
    hpc.sgd_update %wa, %ra, ...
    hpc.sgd_update %wb, %rb, ...
    ```

    After:

    ```mlir
    %fa = hpc.reshape %ga {shape = array<i64: 32>} : (tensor<4x8xf32>) -> tensor<32xf32>
    %fb = hpc.reshape %gb {shape = array<i64: 8>} : (tensor<8xf32>) -> tensor<8xf32>
    %c = hpc.concat %fa, %fb {axis = 0 : i64} : (tensor<32xf32>, tensor<8xf32>) -> tensor<40xf32>
    %r = dist.all_reduce %c over ["dp"] sum : tensor<40xf32> -> tensor<40xf32>
    %pa, %pb = hpc.split %r {axis = 0 : i64, sizes = array<i64: 32, 8>} : ...
    %ra = hpc.reshape %pa {shape = array<i64: 4, 8>} : (tensor<32xf32>) -> tensor<4x8xf32>
    ```

    With `cluster` (a preset or a cluster file, as dist-search takes; an
    `hpc-calibrate` file is the machine's own) and the automatic size, the
    cost model picks it: every op's time on the cluster's device
    (roofline, hpc::estimateSeconds) places each gradient's readiness in the
    step and the optimizer's first use of them, and
    hpc::cost::chooseBucketBytes plays the buckets of each size from 256 KiB
    to 25 MiB through the link (the collective's alpha-beta time on the
    level its group spans), keeping the size that leaves the least exposed.
    It prints `dist-bucket: buckets of at most X MiB from the cost model of
    CLUSTER: ...` with the prediction.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"-1",
           "Most bytes of one bucket's all_reduce (-1: auto, the reductions in "
           "about 16 buckets of 1 to 25 MiB, or from the cost model with "
           "`cluster`; 0: no buckets)">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "With the automatic size: choose it with the cost model of this "
           "cluster (PRESET:NODES or a cluster JSON file)">
  ];
  let statistics = [
    Statistic<"buckets", "buckets", "All-reduces that several were fused into">,
    Statistic<"fused", "fused", "All-reduces fused into a bucket">
  ];
  let dependentDialects = ["hpc::dist::DistDialect", "hpc::HPCDialect"];
}

def DistHierarchical : Pass<"dist-hierarchical", "mlir::ModuleOp"> {
  let summary = "Run the reductions that span nodes in two levels: within each node, then across";
  let description = [{
    With the ranks laid node-major on nodes of P ranks (the module's
    `dist.ranks_per_node`, set by dist-propagate from `--cluster`), a
    reduction whose groups span several nodes with L > 1 of their members on
    each (every group alike, hpc::dist::twoLevels) can run in two levels:
    a ring reduce-scatter among the L members of each node, a ring
    all-reduce (or reduce-scatter) of each member's 1/L part among the
    members at the same place on each node, and (all_reduce) a ring
    all-gather on the node. The pass marks such a reduction with
    `ranks_per_node = P`; the runtime (MpiComm) then runs it so. The result
    is the flat collective's (the sum's rounding order differs); the bytes
    on the network drop from about 2 (g-1)/g S per node to 2 (N-1)/N S for a
    ring all-reduce of S bytes over g = N L ranks.

    `mode=on` marks every such reduction; `auto` (default) those the cost
    model of `cluster` predicts faster in two levels (alpha-beta per level,
    hpc::cost::allReduceRingTime against the flat ring on the slowest link;
    without a cluster, all of them); `off` none. It prints
    `dist-hierarchical: K of M reductions across nodes in two levels (nodes
    of P ranks); per step the ranks send X bytes within nodes and Y across
    nodes (flat: Y0 across)`, summed over every rank of the mesh
    (hpc::dist::bytesSentByRank, the runtime's own count), sets the module's
    `dist.bytes_within_nodes` and `dist.bytes_across_nodes` (the manifest's
    `bytes_within_nodes` and `bytes_across_nodes`) and recounts
    `dist.bytes_per_rank`.

    ```mlir
    module attributes {dist.mesh = #dist.mesh<dp = 4>, dist.ranks_per_node = 2 : i64} {
      %r = dist.all_reduce %g over ["dp"] sum : tensor<1024xf32> -> tensor<1024xf32>
    ```

    becomes

    ```mlir
      %r = dist.all_reduce %g over ["dp"] sum {ranks_per_node = 2 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "auto (the cost model decides), on (every reduction across nodes) or off">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "The cluster (PRESET:NODES or a cluster JSON file) whose cost model decides "
           "in auto mode; empty: two levels wherever they apply">
  ];
  let statistics = [
    Statistic<"twoLevelReductions", "two-level-reductions",
              "Reductions that run in two levels">
  ];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def DistCompress : Pass<"dist-compress", "mlir::ModuleOp"> {
  let summary = "Compress the gradient reductions' hop across nodes (int8 blocks, PowerSGD, "
                "top-k; error feedback)";
  let description = [{
    Runs after dist-hierarchical, before dist-async-collectives. A gradient
    reduction (an f32 sum or avg all_reduce or reduce_scatter whose result
    reaches an optimizer update's gradient through data movement) is
    compressible when its hop across nodes is its own: the cross-node
    reduction of a two-level one (`ranks_per_node`), or a flat one whose
    members all lie on different nodes; with no nodes known (no module
    `dist.ranks_per_node`) the whole group counts as the hop.

    `mode` picks the codec of every compressible reduction it applies to:
    `int8` `#dist.int8_block<block = B>` (`block`, default 256: 0.254x of
    the hop's f32 bytes; at least one block of values); `powersgd`
    `#dist.powersgd<rank = R>` (`rank`, default 4; all_reduces only) with
    the pieces of a dist-bucket bucket read from its concat: each gradient
    of two or more dimensions whose rank-R factors are smaller than it a
    matrix, the rest exact; `topk` `#dist.topk<ratio = F>` (`ratio`,
    default 0.01). `auto` (default) picks per reduction the fastest of none,
    int8 and PowerSGD at `rank` that the cost model of `cluster` predicts
    (rank 0's bytes across on the link, the messages' latency, the codec's
    memory passes and products; without a cluster, none); `none` none.

    Every compressed reduction gets its state, an `hpc.variable {role =
    "error_feedback"}` of hpc::dist::codecStateElements f32 values, zero at
    start, checkpointed with the rest of the state: with `error-feedback`
    (default) the int8 and top-k residuals ("dist.error_feedback.K"), and
    always PowerSGD's Q's with, under error feedback, its residuals
    ("dist.powersgd_state.K"); f32, or bf16 with `state-bf16` (half the
    bytes; the runtime widens a reduction's state for the call and rounds
    it back to nearest even).

    With `buffers-bf16` every gradient all_reduce across nodes (compressed
    or not) takes and gives bf16: each gradient of its bucket is cast to
    bf16 right after its definition (the bucket's reshapes and concat
    retyped), and the result, its split and reshapes stay bf16 up to a cast
    back to f32 right before each first other user (the optimizer update),
    so the gradients wait for their reduction and for the optimizer in half
    the bytes. The runtime runs the node's ring in bf16 and a codec's hop on
    the chunk widened to f32.

    ```mlir
    // before (a bucket of a 64x256 weight gradient and its bias)
    %b = hpc.concat %w, %bias {axis = 0} : ... -> tensor<16640xf32>
    %r = dist.all_reduce %b over ["dp"] avg {ranks_per_node = 2 : i64} : ...
    // after, mode=powersgd rank=4
    %s = hpc.variable "dist.powersgd_state.0" {role = "error_feedback"} : tensor<...xf32>
    %r = dist.all_reduce %b over ["dp"] avg feedback %s : tensor<...xf32>
        {compression = #dist.powersgd<rank = 4, pieces = [64x256, 256]>,
         ranks_per_node = 2 : i64} : ...
    ```

    It prints `dist-compress: K of M reductions across nodes compressed
    (CODECS, error feedback on|off); per step the ranks send X bytes across
    nodes (uncompressed: X0), codec state E bytes a rank; predicted hop time
    C s compressed vs U s`, CODECS naming each codec used (PowerSGD with its
    matrices and the share of their values its factors carry), with the
    reason when none is, and in auto mode a line per reduction with each
    codec's predicted hop time and the choice; recounts `dist.bytes_across_nodes`,
    `dist.bytes_within_nodes` and `dist.bytes_per_rank`, and sets
    `dist.error_feedback_bytes` (the codec state). A fixed mode with nothing
    to compress is an error.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "auto (the cost model picks none, int8 or powersgd), none, int8, powersgd or "
           "topk (every compressible reduction)">,
    Option<"block", "block", "int64_t", /*default=*/"256",
           "Values per f32 scale of the int8 blocks">,
    Option<"rank", "rank", "int64_t", /*default=*/"4",
           "PowerSGD's rank (also the one auto weighs)">,
    Option<"ratio", "ratio", "double", /*default=*/"0.01",
           "The share of values top-k keeps, in (0, 1]">,
    Option<"errorFeedback", "error-feedback", "bool", /*default=*/"true",
           "Keep each compressed reduction's compression error and add it to the next step's">,
    Option<"stateBf16", "state-bf16", "bool", /*default=*/"false",
           "Keep the codec state (residuals, PowerSGD's Q's) in bf16">,
    Option<"buffersBf16", "buffers-bf16", "bool", /*default=*/"false",
           "Gradient all_reduces across nodes (compressed or not) take and give bf16: "
           "each gradient is rounded as it is made and widened where it is used">,
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "The cluster (PRESET:NODES or a cluster JSON file) whose cost model decides "
           "in auto mode">
  ];
  let statistics = [
    Statistic<"compressedReductions", "compressed-reductions",
              "Reductions whose cross-node hop is compressed">
  ];
  let dependentDialects = ["hpc::dist::DistDialect", "hpc::HPCDialect"];
}

def DistPipelineStages : Pass<"dist-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Assign a train step's forward ops to pipeline stages";
  let description = [{
    Runs on the forward program with its loss appended (after
    hpc-append-loss, before hpc-autodiff). Each op on a path from a
    floating-point weight to the loss gets `hpc.stage` = its pipeline stage
    (0 .. stages-1): the largest stage of its operands, one more after each
    boundary op. Ops that no weight reaches (masks, positions, the count of
    labels) get none: every stage that reads them computes them itself.
    hpc-autodiff gives each op's gradient ops the op's stage, and
    hpc-micro-batches tags each copy with its `hpc.micro_batch`; dist-pipeline
    then splits the step.

    `boundaries` names the last node of every stage but the last (ONNX node
    names: the ops' locations); without them the stages are balanced by the
    ops' estimated cost (FLOPs plus elements moved), cut only where a single
    activation crosses. More stages than such places, a name that is no
    node, or boundaries out of order are errors.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "Pipeline stages (virtual stages: pp x chunks)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "Model chunks a pp rank holds (interleaved:V), for messages">,
    ListOption<"boundaries", "boundaries", "std::string",
               "The node that ends each stage but the last">
  ];
}

def DistPipeline : Pass<"dist-pipeline", "mlir::ModuleOp"> {
  let summary = "Split a train step into pipeline stages, scheduled, with send/recv";
  let description = [{
    Runs on the whole train step (after hpc-optimizer) whose ops
    dist-pipeline-stages, hpc-autodiff and hpc-micro-batches tagged. The
    module's @main becomes one nested module per stage, `module @stageK`
    with `hpc.stage = K`, the step's attributes and `dist.mesh` = the pp
    axis: its @main takes every input and returns every result of the step
    and runs that stage's ops in the order of `schedule`:

    - auto (the default): the fastest of gpipe, 1f1b and zb-h1 when the
      cost model replays each with its estimate of every block (within 1%,
      the one with fewer activations alive: 1f1b, zb-h1, gpipe);
    - gpipe: every micro-batch's forward, then every backward;
    - 1f1b: stages-1-K forwards, then one forward and one backward in turn,
      then the remaining backwards (Megatron-LM's PipeDream-flush);
    - interleaved:V: each rank holds V model chunks (virtual stage v on rank
      v % stages; dist-pipeline-stages then made stages x V of them) and
      runs Megatron-LM's interleaved 1F1B over them;
    - zb-h1: 1F1B with each backward split into the part that makes the
      input gradient another rank waits for (B) and the weight gradients
      (W), rank K's W's each delayed by K B's (Qi et al.'s ZB-H1);

    each in micro-batch order, so the gradients accumulate in the single
    rank's order. Ops without a stage (the optimizer's, the micro-batches'
    sums) run on the stage of their largest operand; what no weight reaches
    runs on every stage that reads it; an update of a weight that several
    stages read (tied embeddings) runs on each of them. A value one stage
    makes and another reads is sent by `dist.send_start` right after it is
    made and received by `dist.recv_start` posted as early as the order of
    the peer's sends allows, waited right before its first use; results are
    sent to every stage, so each returns the step's loss. A replay of the
    programs' sends and waits refuses an order that would deadlock; a
    replay of the schedule with each block's estimated cost prints the
    predicted bubble of each stage (`hpc.predicted_bubble`). Each op gets
    `hpc.block` ("F3", "B3", "W3", "pre", "step") and each wait on another
    stage `hpc.recv`, for the manifest and the trace.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1", "Pipeline stages">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"auto\"",
           "auto, gpipe, 1f1b, interleaved:V or zb-h1">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The whole mesh (pp=P,dp=D,...; default pp alone): the stages' dist.mesh, pp "
           "first; with a dp axis what crosses stages is annotated split as the batch is">
  ];
  let dependentDialects = ["hpc::dist::DistDialect", "hpc::HPCDialect"];
}

def DistZero : Pass<"dist-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO: shard a train step's optimizer state (and gradients) over dp";
  let description = [{
    Runs on the global train step, before dist-propagate, and says with
    sharding annotations what each ZeRO stage keeps in pieces; the
    partitioner derives the collectives. For every optimizer update whose
    parameter's first dimension the dp axis divides:

    - stage 1: the optimizer state variables are split over dp along their
      first dimension (`dist.sharding`); the gradient is all-reduced as in
      plain data parallelism, each rank updates its rows of the parameter
      (`dist.updates_shard`: a copy of them), and the new rows are
      all-gathered into the parameter (`hpc.assign` at the end of the step);
    - stage 2: also the gradient, right where the backward pass finishes it:
      it is reduce-scattered instead of all-reduced, and its global norm is
      summed from the shards;
    - stage 3: also the parameters and their initial values: each use in
      the forward and backward passes gathers the parameter whole right
      before it (`dist.regather`; dist-partition marks the gather
      `dist.prefetch` and dist-async-collectives starts it a few gathers
      ahead), and the update writes this rank's rows of the state.

    A parameter whose first dimension dp does not divide keeps replicated
    state under stages 1 and 2 (statistic `replicated`); stage 3 refuses it.
    The module gets `dist.zero = N`.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"0", "ZeRO stage (0: off, 1, 2, 3)">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The mesh (as dist-propagate's option), when the module has no dist.mesh">
  ];
  let statistics = [
    Statistic<"sharded", "sharded", "Updates on a dp shard of their parameter">,
    Statistic<"replicated", "replicated", "Updates whose parameter dp does not divide">
  ];
  let dependentDialects = ["hpc::dist::DistDialect", "hpc::HPCDialect"];
}

def DistAsyncCollectives : Pass<"dist-async-collectives", "mlir::ModuleOp"> {
  let summary = "Start collectives as early as possible and wait right before the first use";
  let description = [{
    Rewrites every synchronous collective (all_reduce, reduce_scatter,
    all_gather, all_to_all, broadcast) of a per-rank program into its
    `_start` form as early as its operand allows (right after the operand's
    definition; starts keep program order) and a `dist.wait` just before the
    first op that uses the result, so the kernels in between overlap with the
    communication (the runtime moves the data on its communication thread).
    What is sent does not change.
  }];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def DistWeightPieces : Pass<"dist-weight-pieces", "mlir::ModuleOp"> {
  let summary = "Store the pieces of weights a per-rank program reads, so it copies none";
  let description = [{
    Moves to compile time what a per-rank program would copy out of its
    weights on every run. A weight read only through static `hpc.slice` ops
    (QKV unfusing) becomes one weight per slice, named after the weight and
    the box (`w[0:64,0:64]`). A weight read only through `dist.all_slice` ops
    of one split that is not along its outermost dimension (a
    column-parallel piece) is stored piece-major, `tensor<G x piece>` with
    a `dist.pieces_of` attribute giving the original shape and split dim, and
    each all_slice takes its row along dim 0, reshaped to the piece: the
    runtime plans that as a view at a rank-dependent offset. The weights data
    keeps its size (for slices, when they partition the weight, as QKV's
    do). Runs in `hpc-compile` before lowering.
  }];
  let dependentDialects = ["hpc::HPCDialect", "hpc::dist::DistDialect"];
}

def ConvertDistToShard : Pass<"convert-dist-to-shard", "mlir::ModuleOp"> {
  let summary = "Translate dist meshes, shardings and collectives to upstream shard";
  let description = [{
    Writes the module's `#dist.mesh` as `shard.grid @mesh` (the axis names
    and levels are kept in the grid's `dist.mesh` attribute, so the way back
    restores them), turns dist collectives into their shard counterparts,
    and turns shardings into `shard.shard` annotations in the form upstream
    `--sharding-propagation` and `--shard-partition` expect: every graph
    input is annotated whole (inputs arrive whole), every output is
    annotated whole for its use by `return` (outputs leave whole).

    `annotations=all` (after dist-propagate) translates every op's
    shardings: each value gets one annotation after its definition and each
    use the sharding its op needs, so `--shard-partition` alone produces the
    per-rank program. `annotations=inputs` keeps only the shardings of the
    values that enter the computation (graph inputs and weights, at each
    use), leaving the rest to upstream propagation.

    Partial sums have no counterpart in shard (its shardings carry none): a
    partial result is written as the sharding of its dimensions, and the
    op's split reduction makes upstream partitioning all-reduce it.
    Asynchronous collectives and send/recv (relative peers) have no shard
    counterpart and are errors.
  }];
  let options = [
    Option<"annotations", "annotations", "std::string", /*default=*/"\"all\"",
           "Which shardings to write: all (every op) or inputs (graph inputs "
           "and weights)">
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def ConvertShardToDist : Pass<"convert-shard-to-dist", "mlir::ModuleOp"> {
  let summary = "Translate an upstream shard program to the dist dialect";
  let description = [{
    The inverse of convert-dist-to-shard: the one `shard.grid` becomes the
    module's `#dist.mesh` (names and levels from its `dist.mesh` attribute
    when present, else axes `a0`, `a1`, ... between nodes), `shard.shard`
    becomes `dist.annotate`, and collectives (all_reduce, reduce_scatter,
    all_gather, all_to_all, broadcast, all_slice) become dist collectives,
    so a program partitioned by upstream `--shard-partition` compiles and
    runs with the HPC-Opt runtime. Casts between equal types that upstream
    resharding leaves are removed. Shardings with halos or explicit shard
    offsets, and shard ops without a dist counterpart, are errors.
  }];
  let dependentDialects = ["hpc::dist::DistDialect"];
}

def DistSearch : Pass<"dist-search", "mlir::ModuleOp"> {
  let summary = "Choose a hybrid-parallel training plan with the cost model";
  let description = [{
    Extracts the layer sequence of `func.func @main` (repeated blocks,
    embeddings, heads, mixture-of-experts layers), then searches the plan
    with the least predicted 1F1B step time on `cluster`: pipeline stages
    (dynamic program over the layer sequence and equal device sub-meshes),
    and per stage the data, tensor and sequence parallel degrees, expert
    parallelism, the ZeRO stage and recomputation; globally the
    micro-batch. With `mesh`, evaluates a given plan instead. Works on
    `--shapes-only` imports. docs/search.md and docs/cost-model.md explain
    the model; the report is a readable table on stderr and, with
    `report`, a JSON file.

    The plan is attached for dist-partition as discardable attributes: a
    dictionary `hpc.plan` on the function and `hpc.stage` / `hpc.layer` on
    every op of it (weights and constants: the stage of their first user).

    ```
    hpc-opt gpt.onnx --shapes-only \
      --dist-search="cluster=dgx-a100-80g:128 global-batch=1536 report=plan.json"
    ```
    Before:
    ```mlir
    func.func @main(%ids: tensor<1x2048xi64>) -> tensor<1x2048x50257xf32> {
      %w = hpc.weight "wte" : tensor<50257x12288xf32>
      %x = hpc.gather %w, %ids {axis = 0 : i64} : ...
    ```
    After:
    ```mlir
    func.func @main(%ids: tensor<1x2048xi64>) -> tensor<1x2048x50257xf32>
        attributes {hpc.plan = {devices = 1024 : i64, micro_batch = 8 : i64,
                    stages = [{dp = 16 : i64, tp = 8 : i64, first_layer = 0,
                    end_layer = 14, ...}, ...], ...}} {
      %w = hpc.weight "wte" {hpc.layer = 0 : i64, hpc.stage = 0 : i64} : ...
    ```
    Errors (one line, exit status 1): a model that fits no plan (the least
    memory per device any plan needs), a malformed cluster file (the field
    path and the reason), a mesh that does not match the cluster.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"dgx-a100-80g:1\"",
           "PRESET:NODES (dgx-a100-40g, dgx-a100-80g, dgx-h100, h200, "
           "ascend-910), a cluster JSON file, or FILE.json:NODES">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Evaluate this plan instead of searching: dp=N,tp=N,pp=N[,ep=N]"
           "[,mbs=N][,zero=N][,sp=0|1][,recompute=0|1]">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write the plan and its prediction as JSON to this file">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "Samples per optimizer step (default: the IR's batch)">,
    Option<"microBatch", "micro-batch", "int64_t", /*default=*/"0",
           "Samples per micro-batch, all DP ranks of a stage together "
           "(default: searched)">,
    Option<"memoryLimit", "memory-limit", "std::string", /*default=*/"\"\"",
           "Usable memory per device, e.g. 40GiB or 38e9 (default: the "
           "device's capacity less its reserved memory)">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"\"",
           "Training dtype: bf16, fp16, fp32, tf32, fp8 (default: bf16, or "
           "fp16 on devices without bf16)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adam\"",
           "adam or sgd (optimizer state memory and update time)">,
    Option<"zeroStages", "zero", "std::string", /*default=*/"\"0,1,2,3\"",
           "ZeRO stages the search may use, comma-separated">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"auto\"",
           "auto, on or off">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"true",
           "Allow Megatron sequence parallelism">,
    Option<"expertParallel", "expert-parallel", "bool", /*default=*/"true",
           "Allow expert parallelism for mixture-of-experts layers">,
    Option<"maxTP", "max-tp", "int64_t", /*default=*/"0",
           "Largest tensor-parallel degree (0: no limit)">,
    Option<"maxStages", "max-stages", "int64_t", /*default=*/"0",
           "Most pipeline stages (0: no limit)">,
    Option<"uniformStages", "uniform-stages", "bool", /*default=*/"false",
           "Every pipeline stage runs the same configuration (dp, tp, sp, ep, "
           "ZeRO, recomputation), as hpc-opt compiles plans">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Pipeline schedule the plan's stages run: 1f1b, gpipe, "
           "interleaved:V, zb-h1, or auto (the fastest of 1f1b, zb-h1 and "
           "gpipe that fits, as hpc-opt --pipeline-schedule=auto)">,
    Option<"method", "method", "std::string", /*default=*/"\"dp\"",
           "dp (dynamic program), exhaustive (every stage partition), "
           "brute-force (every plan; tiny models), grid (Megatron-style)">,
    Option<"compareGrid", "compare-grid", "bool", /*default=*/"false",
           "Also run the Megatron-style grid search and report the ratio">,
    Option<"table", "table", "bool", /*default=*/"true",
           "Print the plan table on stderr">,
    Option<"computeScale", "compute-scale", "double", /*default=*/"1.0",
           "Multiply every compute time the cost model predicts on the "
           "cluster (a recalibration from a measured run: hpc-opt "
           "--recalibrate)">,
    Option<"networkScale", "network-scale", "double", /*default=*/"1.0",
           "Multiply the time every byte of communication takes on the "
           "cluster (the links' bandwidths divided, measured collectives' "
           "times multiplied; a recalibration from a measured run)">,
    Option<"latencyScale", "latency-scale", "double", /*default=*/"1.0",
           "Multiply the cluster's link latencies (a recalibration from a "
           "measured run)">,
    Option<"overlap", "overlap", "double", /*default=*/"-1.0",
           "The fraction of the gradient synchronization that may hide under "
           "the backward pass, in [0, 1], instead of the cluster's "
           "efficiency.overlap (a recalibration from a measured run; < 0: "
           "the cluster's)">,
    Option<"layout", "layout", "std::string", /*default=*/"\"megatron\"",
           "Whose tensor-parallel step to price: megatron (Megatron-LM's: "
           "vocabulary-parallel embedding and loss, a fused QKV weight held "
           "in pieces; its published runs) or compiled (this compiler's: "
           "the logits gathered for the loss, the embedding and a fused QKV "
           "weight held whole, their gradients gathered; hpc-opt --train)">
  ];
  let dependentDialects = ["hpc::HPCDialect"];
}

#endif // HPC_PASSES_TD
