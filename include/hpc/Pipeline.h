//===- Pipeline.h - HPC-Opt pass pipelines -----------------------*- C++ -*-===//
//
// Pipelines as plain functions, so other compilers can build them into their
// own pass managers, and under a command-line name for hpc-opt.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PIPELINE_H
#define HPC_PIPELINE_H

#include "hpc/Precision.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace hpc {

struct CompileOptions : mlir::PassPipelineOptions<CompileOptions> {
  Option<std::string> weightsFile{
      *this, "weights-file",
      llvm::cl::desc("Write the weights (safetensors) to this path")};
  Option<std::string> weightsName{
      *this, "weights-name",
      llvm::cl::desc("Weights file name recorded for the runtime")};
  Option<std::string> modelName{*this, "model-name",
                                llvm::cl::desc("Model name for the manifest")};
  Option<std::string> modelPath{
      *this, "model-path",
      llvm::cl::desc("Absolute path of the source model for the manifest (model_path)")};
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Partition over this mesh (dp=2,tp=2); empty: one rank")};
  ListOption<std::string> shard{
      *this, "shard", llvm::cl::desc("NAME=SPEC sharding seeds (with mesh)")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("With a tp axis in mesh: Megatron-LM sequence parallelism (what tp "
                     "runs whole on every rank is split along the sequence over tp; "
                     "dist-propagate)"),
      llvm::cl::init(false)};
  Option<bool> asyncCollectives{
      *this, "async-collectives",
      llvm::cl::desc("With mesh: start collectives early, wait at first use"),
      llvm::cl::init(false)};
  Option<bool> overlap{
      *this, "overlap",
      llvm::cl::desc("With train and mesh: start every (bucketed) gradient collective as "
                     "soon as its operand is ready and wait at its first real use "
                     "(dist-async-collectives); false: blocking collectives"),
      llvm::cl::init(true)};
  Option<double> bucketMb{
      *this, "bucket-mb",
      llvm::cl::desc("With train and mesh: fuse gradient all-reduces into buckets of at "
                     "most this many MiB (dist-bucket; -1: auto, about 16 buckets of 1 "
                     "to 25 MiB, or from the cost model of `cluster`; 0: one all-reduce "
                     "per gradient)"),
      llvm::cl::init(-1.0)};
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("With train and mesh: the cluster (PRESET:NODES or a cluster file, "
                     "e.g. hpc-calibrate's) whose cost model sizes the automatic gradient "
                     "buckets (dist-bucket); empty: the fixed rule")};
  // --- the compile flow (hpc::compileToExecutable, include/hpc/Compile.h); the
  // hpc-compile pass pipeline itself ignores these ----------------------------
  Option<bool> autoParallel{
      *this, "auto-parallel",
      llvm::cl::desc("Compile the plan the strategy search chooses for `cluster` (the "
                     "compile flow only)"),
      llvm::cl::init(false)};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("With cluster: write the plan and its prediction as JSON here (the "
                     "compile flow only)")};
  Option<std::string> recalibrate{
      *this, "recalibrate",
      llvm::cl::desc("With cluster: a train --metrics file of a run of this model "
                     "(METRICS.jsonl, or METRICS.jsonl@STEP for the profile line of STEP); "
                     "the cost model's compute and communication times are scaled so that "
                     "the plan that ran predicts what it measured, then the plan is made "
                     "(the compile flow only)")};
  Option<double> replanThreshold{
      *this, "replan-threshold",
      llvm::cl::desc("With recalibrate: compile only when the plan is predicted at least "
                     "this fraction faster than the measured step; otherwise write nothing "
                     "(the compile flow only; 0: always compile)"),
      llvm::cl::init(0.0)};
  Option<bool> conservativePlan{
      *this, "conservative-plan",
      llvm::cl::desc("With train: also emit the stability guard's conservative plan into "
                     "the executable (the compile flow only; default on)"),
      llvm::cl::init(true)};
  Option<int64_t> ranksPerNode{
      *this, "ranks-per-node",
      llvm::cl::desc("With mesh: ranks per node of the cluster, laid node-major; the "
                     "runtime checks at start that it was launched so (0: not known)"),
      llvm::cl::init(0)};
  Option<std::string> hierarchical{
      *this, "hierarchical",
      llvm::cl::desc("With mesh and ranks-per-node: run the reductions that span nodes in two "
                     "levels, within each node and then across (dist-hierarchical): auto "
                     "(where the cost model of `cluster` predicts it faster), on, off"),
      llvm::cl::init("auto")};
  Option<std::string> compress{
      *this, "compress",
      llvm::cl::desc("With train and mesh: compress the gradient reductions' hop across "
                     "nodes (dist-compress): none (default), int8, powersgd:R, topk:F (every "
                     "one each can), auto "
                     "(where the cost model of `cluster` predicts it faster)"),
      llvm::cl::init("none")};
  Option<bool> errorFeedback{
      *this, "error-feedback",
      llvm::cl::desc("With compress: keep each compressed reduction's rounding error and "
                     "add it to the next step's (default on)"),
      llvm::cl::init(true)};
  Option<bool> codecStateBf16{
      *this, "codec-state-bf16",
      llvm::cl::desc("With compress: keep the codec state (error-feedback residuals, "
                     "PowerSGD's Q's) in bf16, half the bytes of f32"),
      llvm::cl::init(false)};
  Option<bool> gradientBuffersBf16{
      *this, "gradient-buffers-bf16",
      llvm::cl::desc("With train and mesh: the gradients that cross nodes wait for their "
                     "reduction, and their sums for the optimizer, in bf16 (half the "
                     "bytes); a codec's hop still runs on f32"),
      llvm::cl::init(false)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("With train and a dp axis in mesh: ZeRO stage (0: off; 1: optimizer "
                     "state in dp shards; 2: also the gradients; 3: also the parameters; dist-zero)"),
      llvm::cl::init(0)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse GELU/SiLU/RMSNorm decompositions, and bias adds "
                                   "and activations into gemm/conv epilogues"),
                    llvm::cl::init(true)};
  Option<std::string> moeDispatch{
      *this, "moe-dispatch",
      llvm::cl::desc("routed (default): mixture-of-experts layers exported with a dense "
                     "dispatch compute only the chosen experts (hpc-route-experts); dense: "
                     "as exported, every expert on every token"),
      llvm::cl::init("routed")};
  Option<double> moeCapacityFactor{
      *this, "moe-capacity-factor",
      llvm::cl::desc("With moe-dispatch=routed: rows of each expert's buffer as a multiple "
                     "of k*tokens/experts, choices past them dropped; 0 (default): every "
                     "token, nothing dropped"),
      llvm::cl::init(0.0)};
  Option<std::string> moeBalance{
      *this, "moe-balance",
      llvm::cl::desc("With train: none (default) or bias:RATE, DeepSeek-V3's per-expert "
                     "routing bias moved by RATE toward equal loads each step "
                     "(hpc-moe-balance)"),
      llvm::cl::init("none")};
  Option<double> moeAuxLoss{
      *this, "moe-aux-loss",
      llvm::cl::desc("With train: the weight of Switch Transformer's load-balancing loss "
                     "added to the loss (0: none; hpc-moe-balance)"),
      llvm::cl::init(0.0)};
  Option<bool> weightPieces{
      *this, "weight-pieces",
      llvm::cl::desc("Store the weight pieces a rank reads (dist-weight-pieces) "
                     "instead of copying them on every run"),
      llvm::cl::init(true)};
  Option<bool> blockedLayouts{
      *this, "blocked-layouts",
      llvm::cl::desc("Keep convolution activations in the CPU's blocked channel "
                     "layout where the plan allows (hpc-plan-layouts)"),
      llvm::cl::init(true)};
  Option<Precision> precision{
      *this, "precision",
      llvm::cl::desc("What the products compute in: fp32, or bf16 with the rest "
                     "in f32 (hpc-autocast)"),
      llvm::cl::init(Precision::FP32),
      llvm::cl::values(clEnumValN(Precision::FP32, "fp32", "As the model says"),
                       clEnumValN(Precision::BF16, "bf16",
                                  "Products in bf16, everything else in f32"))};

  // --- training (docs/training.md): a train step instead of a forward run --
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Compile a train step (loss, backward, optimizer)"),
                     llvm::cl::init(false)};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("cross-entropy:LOGITS,LABELS | mse:OUT,TARGET | output:NAME")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("sgd")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate (the train command may override)"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (default: 0 for sgd, 0.01 for adamw)"), llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(1e-8)};
  Option<double> clipNorm{*this, "clip-norm",
                          llvm::cl::desc("Clip the global gradient norm (0: off)"),
                          llvm::cl::init(0.0)};
  Option<bool> clipNormAuto{
      *this, "clip-norm-auto",
      llvm::cl::desc("Clip the global gradient norm to the runtime's running statistic of "
                     "the norms (hpc-opt --clip-norm=auto)"),
      llvm::cl::init(false)};
  ListOption<std::string> weightDecayExclude{
      *this, "weight-decay-exclude",
      llvm::cl::desc("No weight decay for parameters whose name contains one of these")};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("constant | cosine:WARMUP,TOTAL | linear:WARMUP,TOTAL"),
      llvm::cl::init("constant")};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("none | full | selective: activations the backward reads are kept, "
                     "or recomputed from checkpoints (hpc-autodiff)"),
      llvm::cl::init("none")};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Run a step's batch (a data-parallel rank's rows) as this many "
                     "micro-batches, one after the other, accumulating their gradients "
                     "(hpc-micro-batches; the imported batch is one micro-batch's)"),
      llvm::cl::init(1)};
  ListOption<std::string> stageBoundaries{
      *this, "stage-boundaries",
      llvm::cl::desc("With train and a pp axis in mesh: the node that ends each pipeline "
                     "stage but the last (default: stages balanced by the cost model)")};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule",
      llvm::cl::desc("With train and a pp axis in mesh: auto, gpipe, 1f1b, interleaved:V or "
                     "zb-h1 (dist-pipeline)"),
      llvm::cl::init("auto")};
  Option<bool> fusedGradients{
      *this, "fused-gradients",
      llvm::cl::desc("GELU's and layer normalization's input gradients as one op each; "
                     "false: chains of forward ops (hpc-autodiff, for comparison)"),
      llvm::cl::init(true)};
  ListOption<std::string> freeze{*this, "freeze",
                                 llvm::cl::desc("Weights not to train (initializer names)")};
  Option<bool> trainMode{
      *this, "train-mode",
      llvm::cl::desc("Batch norm on batch statistics, running statistics as state"),
      llvm::cl::init(false)};
  Option<int64_t> seed{*this, "seed",
                       llvm::cl::desc("Seed of train-mode dropout (state, checkpointed)"),
                       llvm::cl::init(0)};
  Option<bool> keepGradients{
      *this, "keep-gradients",
      llvm::cl::desc("Also return every gradient (grad.<name>), for numerical tests"),
      llvm::cl::init(false)};
  Option<bool> printTrainable{*this, "print-trainable",
                              llvm::cl::desc("Print the trainable weights"),
                              llvm::cl::init(false)};
};

/// The passes that turn a forward @main into a train step: hpc-append-loss,
/// hpc-autodiff, hpc-optimizer (the training options of `options`).
void buildTrainPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// hpc module -> LLVM dialect calling libhpcrt: simplify, fuse composite
/// ops, build the train step (with `train`), partition over the mesh (when
/// one is given), cast the products to bf16 (with `precision`), fuse
/// epilogues, choose blocked activation layouts (with `blockedLayouts`),
/// plan memory and lower (hpc-compile).
void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// The stability guard's conservative plan of a train step: the settings
/// the runtime falls back to after repeated loss spikes, as a second
/// program in the same binary (its state laid out alike). From `options`:
/// no gradient compression, blocking collectives (no overlap), clipping at
/// half the global norm clip (1 without one, or with the automatic one);
/// the learning rate is scaled by the returned factor (0.5) at run time.
double makeConservative(CompileOptions &options);

/// What hpc-compile runs on each stage's program once the step is built
/// (the whole step without pipeline stages): partitioning over `mesh` (the
/// axes other than pp), autocast, weight pieces, epilogues, layouts and
/// the lowering.
void buildStagePipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                        llvm::StringRef mesh);

/// The distributed part alone: dist-propagate over `mesh` with the seeds,
/// then dist-partition, dist-bucket unless `bucketBytes` is 0 (-1: its
/// automatic size, from the cost model of `bucketCluster` where given), and
/// dist-async-collectives when `asyncCollectives`; `ranksPerNode` (0: not
/// known) is the node size the program is placed on (dist-propagate), and
/// with it dist-hierarchical runs in `hierarchical` mode (auto|on|off, the
/// cost model of `bucketCluster` deciding auto); dist-compress runs as
/// `compress` says (parseCompressSpec) with `codec`'s settings.
struct GradientCodecOptions {
  bool errorFeedback = true; ///< keep each compressed reduction's error
  bool stateBf16 = false;    ///< the codec state in bf16
  bool buffersBf16 = false;  ///< gradients crossing nodes wait in bf16
};
void buildPartitionPipeline(mlir::OpPassManager &pm, llvm::StringRef mesh,
                            llvm::ArrayRef<std::string> shard,
                            bool asyncCollectives = false, int64_t bucketBytes = 0,
                            int64_t zeroStage = 0, llvm::StringRef bucketCluster = "",
                            int64_t ranksPerNode = 0, llvm::StringRef hierarchical = "auto",
                            llvm::StringRef compress = "none",
                            const GradientCodecOptions &codec = {},
                            bool sequenceParallel = false);

/// The distributed part of a compile with `options`: its mesh and seeds, and
/// for a train step the gradient buckets (`bucketMb`) and their overlap
/// (`overlap`), or asynchronous collectives for any program
/// (`asyncCollectives`).
void buildPartitionPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// A --compress value: dist-compress's mode and its codec's parameter.
struct CompressSpec {
  std::string mode = "none"; ///< auto, none, int8, powersgd or topk
  int64_t rank = 4;          ///< powersgd:R
  double ratio = 0.01;       ///< topk:F
};

/// Parses auto | none | int8 | powersgd[:R] | topk[:F] (R >= 1, F in
/// (0, 1]); false with the reason in `error` for anything else.
bool parseCompressSpec(llvm::StringRef text, CompressSpec &out, std::string &error);

/// Registers the pipelines under their command-line names.
void registerPipelines();

} // namespace hpc

#endif // HPC_PIPELINE_H
