//===- hpc-opt.cpp - the HPC-Opt driver -----------------------------------===//
//
// mlir-opt with every upstream dialect and pass plus HPC-Opt's own. An input
// ending in .onnx or .onnxtxt is imported first (--input-shape fixes dynamic
// dimensions, --shapes-only skips weight data); passes and printing then work
// on the imported module exactly as on a .mlir file.
//
// --emit=llvm|obj|exe compiles instead (the hpc-compile pipeline): LLVM IR,
// an object file, or an executable linked with libhpcrt, with the weights in
// OUT.safetensors beside an object or executable. Without --emit, an ONNX
// input written to a file (-o FILE, not .mlir/.mlirbc) is compiled to an
// executable; anything written to stdout, /dev/null (a check only) or a .mlir
// file is MLIR.
//
//===----------------------------------------------------------------------===//

#include "hpc/Compile.h"
#include "hpc/CostModel/Cluster.h"
#include "hpc/Import/ONNXImporter.h"
#include "hpc/InitAll.h"
#include "hpc/Passes.h"
#include "hpc/Pipeline.h"
#include "hpc/PipelineSchedule.h"
#include "hpc/Recompute.h"
#include "hpc/Target/Emit.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

using namespace mlir;

static llvm::cl::OptionCategory importCategory("ONNX import options");

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Fix the dimensions of a graph input: NAME=D0,D1,... "
                   "(repeatable)"),
    llvm::cl::cat(importCategory));

static llvm::cl::opt<bool> shapesOnly(
    "shapes-only",
    llvm::cl::desc("Read no weight data (plan a model without its weights)"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

static llvm::cl::opt<std::string> bindInputs(
    "bind-inputs",
    llvm::cl::desc("Directory of input_K.pb files binding graph inputs that "
                   "an op needs as constants (ONNX backend test layout)"),
    llvm::cl::init(""), llvm::cl::cat(importCategory));

static llvm::cl::OptionCategory compileCategory("Compilation options");

static llvm::cl::opt<std::string> emitKind(
    "emit",
    llvm::cl::desc("What to write: mlir, llvm (LLVM IR), obj (object file), "
                   "exe (executable linked with libhpcrt). Default: exe for "
                   "an ONNX input written to a file (not .mlir, not "
                   "/dev/null), else mlir"),
    llvm::cl::init(""), llvm::cl::cat(compileCategory));

static llvm::cl::opt<std::string> meshSpec(
    "mesh",
    llvm::cl::desc("Partition the model over a device mesh, e.g. "
                   "--mesh=dp=2,tp=2 (dp splits the batch, tp is Megatron "
                   "tensor parallelism); the binary then runs under mpirun "
                   "with that many ranks"),
    llvm::cl::init(""), llvm::cl::cat(compileCategory));

static llvm::cl::opt<bool> sequenceParallelFlag(
    "sequence-parallel",
    llvm::cl::desc("With a tp axis in --mesh: Megatron-LM sequence parallelism: norms, "
                   "residual adds and the other ops tensor parallelism runs whole on every "
                   "tp rank are split along the sequence (dimension 1 of [batch, sequence, "
                   "...] activations) over tp; a row-parallel product's partial sum becomes "
                   "a reduce_scatter and the next product's input an all_gather. A searched "
                   "plan (--auto-parallel) sets it where the search chose it"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::list<std::string> shardSpecs(
    "shard",
    llvm::cl::desc("With --mesh: split a graph input or weight, NAME=SPEC "
                   "with one entry per dimension (mesh axes joined by '+', "
                   "'-' for none), e.g. --shard=input_ids=dp,-"),
    llvm::cl::cat(compileCategory));

static llvm::cl::OptionCategory searchCategory("Strategy search options");

static llvm::cl::opt<std::string> clusterSpec(
    "cluster",
    llvm::cl::desc("Plan for this cluster: PRESET:NODES (dgx-a100-40g, "
                   "dgx-a100-80g, dgx-h100, h200, ascend-910) or a cluster "
                   "JSON file; with --mesh, evaluates that plan instead"),
    llvm::cl::init(""), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> hierarchicalFlag(
    "hierarchical",
    llvm::cl::desc("With --cluster and a mesh: run the reductions whose ranks span nodes "
                   "in two levels, a reduce-scatter within each node, the reduction of "
                   "each rank's part across the nodes, an all-gather within the node. "
                   "auto (default): where the cluster's cost model predicts it faster; "
                   "on; off (flat rings)"),
    llvm::cl::init("auto"), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> compressFlag(
    "compress",
    llvm::cl::desc("With --train and a mesh: compress the gradient reductions' hop across "
                   "nodes (the cross-node part of a two-level reduction; the whole group "
                   "without --cluster). none (default); int8 (int8 blocks of 256 values "
                   "with one f32 scale, 0.254x of the bytes); powersgd:R (PowerSGD's rank-R "
                   "factors of the gradient matrices, R = 4 by default); topk:F (the share F "
                   "of the values of largest magnitude, 0.01 by default); auto (per bucket "
                   "the fastest of none, int8 and powersgd:4 the cost model of --cluster "
                   "predicts)"),
    llvm::cl::init("none"), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> errorFeedbackFlag(
    "error-feedback",
    llvm::cl::desc("With --compress: on (default) keeps each compressed reduction's "
                   "compression error in the training state and adds it to the next step's; "
                   "bf16: the same with that state (and PowerSGD's Q's) in bf16, half the "
                   "bytes; off"),
    llvm::cl::init("on"), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> gradientBuffersFlag(
    "gradient-buffers",
    llvm::cl::desc("With --train and a mesh across nodes: f32 (default) or bf16, the "
                   "gradients that cross nodes waiting for their reduction, and their sums "
                   "for the optimizer, in bf16 (half the bytes; compressed or not)"),
    llvm::cl::init("f32"), llvm::cl::cat(searchCategory));

static llvm::cl::opt<bool> autoParallel(
    "auto-parallel",
    llvm::cl::desc("Search the hybrid-parallel strategy for --cluster"),
    llvm::cl::init(false), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> reportFile(
    "report", llvm::cl::desc("Write the plan and its prediction as JSON here"),
    llvm::cl::init(""), llvm::cl::cat(searchCategory));

static llvm::cl::opt<std::string> recalibrateFlag(
    "recalibrate",
    llvm::cl::desc("With --train, --cluster and -o: a `train --metrics` file of a run of this "
                   "model (METRICS.jsonl, or METRICS.jsonl@STEP for the --profile-every line "
                   "of STEP); the cost model is scaled so that the plan that ran predicts "
                   "what it measured, then the plan is searched (--auto-parallel) or "
                   "evaluated (--mesh) on it"),
    llvm::cl::init(""), llvm::cl::cat(searchCategory));

static llvm::cl::opt<double> replanThresholdFlag(
    "replan-threshold",
    llvm::cl::desc("With --recalibrate: write the binary only when the plan is predicted at "
                   "least this fraction faster than the measured step (0.1: 10%); otherwise "
                   "say so and write nothing"),
    llvm::cl::init(0.0), llvm::cl::cat(searchCategory));

static llvm::cl::opt<int64_t> globalBatch(
    "global-batch", llvm::cl::desc("Samples per optimizer step for the plan"),
    llvm::cl::init(0), llvm::cl::cat(searchCategory));

static llvm::cl::opt<bool> asyncCollectives(
    "async-collectives",
    llvm::cl::desc("With --mesh: start each collective as soon as its operand "
                   "is computed and wait for it right before its first use, so "
                   "kernels in between overlap with the communication"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::opt<bool> noOverlap(
    "no-overlap",
    llvm::cl::desc("With --train and --mesh: blocking collectives (by default each "
                   "gradient bucket's all-reduce starts as soon as its last gradient "
                   "is computed and is waited for at its first use)"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::opt<std::string> bucketMbFlag(
    "bucket-mb",
    llvm::cl::desc("With --train and --mesh: fuse the gradient all-reduces into buckets "
                   "of at most this many MiB, in the order the backward pass finishes "
                   "them (auto: with --cluster, the size its cost model predicts leaves "
                   "the least communication exposed, else about 16 buckets of 1 to 25 "
                   "MiB; 0: one all-reduce per gradient)"),
    llvm::cl::init("auto"), llvm::cl::cat(compileCategory));

static llvm::cl::opt<std::string> zeroFlag(
    "zero",
    llvm::cl::desc("With --train and a dp axis: ZeRO stage. 1: the optimizer state is "
                   "split over the dp ranks (each updates its rows of every parameter, "
                   "then they are all-gathered); 2: also the gradients (reduce-scattered "
                   "as the backward pass produces them); 3: also the parameters "
                   "(gathered before each use). Default 0 (off)"),
    llvm::cl::init(""), llvm::cl::cat(compileCategory));

/// --bucket-mb as MiB (-1 for auto); false for anything but auto or a
/// number from 0 to 1e6.
static bool parseBucketMb(double &mb) {
  if (bucketMbFlag == "auto") {
    mb = -1;
    return true;
  }
  return !StringRef(bucketMbFlag).getAsDouble(mb) && mb >= 0 && mb <= 1e6;
}

/// The partitioning flags (--mesh, --shard, --async-collectives,
/// --bucket-mb, --no-overlap; checked in main) into `options`.
static void partitionOptions(hpc::CompileOptions &options) {
  options.mesh = meshSpec;
  options.shard = llvm::to_vector(shardSpecs);
  options.sequenceParallel = sequenceParallelFlag;
  options.asyncCollectives = asyncCollectives;
  double bucketMb = -1;
  parseBucketMb(bucketMb);
  options.bucketMb = bucketMb;
  options.overlap = !noOverlap;
  if (!zeroFlag.empty()) // unset: the search plans without ZeRO
    options.zero = std::stoll(zeroFlag);
  // The cluster planned for also sizes the automatic gradient buckets.
  options.cluster = clusterSpec;
  options.hierarchical = hierarchicalFlag;
  options.compress = compressFlag;
  options.errorFeedback = errorFeedbackFlag != "off";
  options.codecStateBf16 = errorFeedbackFlag == "bf16";
  options.gradientBuffersBf16 = gradientBuffersFlag == "bf16";
}

static llvm::cl::opt<bool> noFuse(
    "no-fuse", llvm::cl::desc("With --emit: keep GELU/SiLU/RMSNorm chains, and "
                              "bias adds and activations out of gemm/conv epilogues"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::opt<std::string> precisionFlag(
    "precision",
    llvm::cl::desc("fp32 (default) or bf16: matmul, gemm and convolutions, forward "
                   "and backward, in bf16, everything else in f32 (PyTorch's CPU "
                   "autocast); weights stored in bf16, a train step's master "
                   "weights in fp32. Also the dtype a --cluster search plans with"),
    llvm::cl::init("fp32"), llvm::cl::cat(compileCategory));

static llvm::cl::opt<bool> noWeightPieces(
    "no-weight-pieces",
    llvm::cl::desc("With --emit: copy the pieces of weights a rank reads on "
                   "every run instead of storing them (for comparison)"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::opt<bool> noBlockedLayouts(
    "no-blocked-layouts",
    llvm::cl::desc("With --emit: keep every activation in its plain layout "
                   "instead of oneDNN's blocked channel layout (hpc-plan-layouts)"),
    llvm::cl::init(false), llvm::cl::cat(compileCategory));

static llvm::cl::OptionCategory trainCategory("Training (a train step instead of a forward run)");

static llvm::cl::opt<bool> trainFlag(
    "train", llvm::cl::desc("Compile a train step: the loss, its gradients and the "
                            "optimizer update (needs --loss)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> lossSpec(
    "loss", llvm::cl::desc("cross-entropy:LOGITS,LABELS | mse:OUT,TARGET | output:NAME"),
    llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> optimizerName(
    "optimizer", llvm::cl::desc("sgd (default) or adamw"), llvm::cl::init("sgd"),
    llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> lrFlag("lr", llvm::cl::desc("Learning rate (default 1e-3)"),
                                    llvm::cl::init(1e-3), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> momentumFlag("momentum", llvm::cl::desc("SGD momentum"),
                                          llvm::cl::init(0.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> nesterovFlag("nesterov", llvm::cl::desc("SGD Nesterov momentum"),
                                        llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> weightDecayFlag(
    "weight-decay", llvm::cl::desc("Weight decay (default 0 for sgd, 0.01 for adamw)"),
    llvm::cl::init(-1.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta1Flag("beta1", llvm::cl::desc("AdamW beta1 (0.9)"),
                                       llvm::cl::init(0.9), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta2Flag("beta2", llvm::cl::desc("AdamW beta2 (0.999)"),
                                       llvm::cl::init(0.999), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> epsFlag("eps", llvm::cl::desc("AdamW epsilon (1e-8)"),
                                     llvm::cl::init(1e-8), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> clipNormFlag(
    "clip-norm",
    llvm::cl::desc("Clip the global gradient norm to this (0: off), or auto: to a running "
                   "statistic of the norms the train command keeps (docs/training.md)"),
    llvm::cl::init("0"), llvm::cl::cat(trainCategory));

/// --clip-norm's number (0 for auto and for a value main refuses).
static double clipNormValue() {
  double v = 0;
  if (clipNormFlag != "auto" && llvm::to_float(clipNormFlag, v) && v >= 0)
    return v;
  return 0;
}
static llvm::cl::list<std::string> weightDecayExcludeFlag(
    "weight-decay-exclude", llvm::cl::CommaSeparated,
    llvm::cl::desc("No weight decay for parameters whose name contains one of these"),
    llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> lrScheduleFlag(
    "lr-schedule", llvm::cl::desc("constant | cosine:WARMUP,TOTAL | linear:WARMUP,TOTAL"),
    llvm::cl::init("constant"), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string> freezeFlag(
    "freeze", llvm::cl::CommaSeparated, llvm::cl::desc("Weights not to train"),
    llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> keepGradientsFlag(
    "keep-gradients",
    llvm::cl::desc("Also return every gradient (grad.<name>), for numerical tests"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> noConservativePlanFlag(
    "no-conservative-plan",
    llvm::cl::desc("With --train: emit no conservative plan (by default the binary also "
                   "holds the step compiled with the stability guard's conservative "
                   "settings, which the train command switches to after repeated loss "
                   "spikes; docs/training.md)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> printTrainableFlag(
    "print-trainable", llvm::cl::desc("List the trainable weights (with --train)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> seedFlag(
    "seed", llvm::cl::desc("With --train-mode: the seed of the dropout masks (default 0)"),
    llvm::cl::init(0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> trainModeFlag(
    "train-mode",
    llvm::cl::desc("With --train: batch norm on batch statistics (running statistics "
                   "updated as state) and dropout with a seeded random mask (PyTorch's "
                   "train mode)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));

static llvm::cl::opt<std::string> recomputeFlag(
    "recompute",
    llvm::cl::desc("With --train: none (default: the backward reads the activations the "
                   "forward kept), full (only the residual stream at about sqrt(layers) "
                   "checkpoints is kept, the rest recomputed segment by segment before "
                   "the backward needs it) or selective (the weight products are kept, the "
                   "cheap rest recomputed: attention scores and softmax, norms, "
                   "activation functions)"),
    llvm::cl::init("none"), llvm::cl::cat(trainCategory));

static llvm::cl::opt<bool> noFusedGradientsFlag(
    "no-fused-gradients",
    llvm::cl::desc("With --train: build GELU's and layer normalization's input gradients "
                   "from elementwise ops and reductions instead of one hpc.gelu_grad / "
                   "hpc.layer_norm_grad kernel each (for comparison)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));

static llvm::cl::opt<int64_t> microBatchesFlag(
    "micro-batches",
    llvm::cl::desc("With --train: run each step's batch (--input-shape's first dimension; "
                   "with a dp mesh each rank's share of it) as this many micro-batches, "
                   "one after the other, accumulating the gradients before one optimizer "
                   "update: the same step as the whole batch at once with the activations "
                   "of one micro-batch alive at a time (default 1)"),
    llvm::cl::init(1), llvm::cl::cat(trainCategory));

static llvm::cl::list<std::string> stageBoundariesFlag(
    "stage-boundaries",
    llvm::cl::desc("With --train and --mesh=pp=P: the node that ends each pipeline stage but "
                   "the last, P-1 ONNX node names in order (default: stages balanced by the "
                   "cost model, cut where one activation crosses)"),
    llvm::cl::CommaSeparated, llvm::cl::cat(trainCategory));

static llvm::cl::opt<std::string> pipelineScheduleFlag(
    "pipeline-schedule",
    llvm::cl::desc("With --train and --mesh=pp=P: the order of each stage's micro-batches: "
                   "auto (default: the fastest of gpipe, 1f1b and zb-h1 in the cost model's "
                   "replay), gpipe (all forwards, then all backwards), 1f1b (one forward, "
                   "one backward in turn after a warm-up; fewer activations alive), "
                   "interleaved:V (V model chunks a rank, Megatron-LM's interleaved 1F1B) or "
                   "zb-h1 (1F1B with the weight gradients delayed into the bubble). With "
                   "--cluster the search costs the plan under it (auto: the fastest of "
                   "1f1b, zb-h1 and gpipe that fits) and a searched plan runs its choice"),
    llvm::cl::init("auto"), llvm::cl::cat(trainCategory));

static llvm::cl::opt<std::string> moeBalanceFlag(
    "moe-balance",
    llvm::cl::desc("With --train: none (default) or bias:RATE, DeepSeek-V3's "
                   "auxiliary-loss-free balancing of routed experts: each layer's top-k is "
                   "chosen on the router's logits plus a per-expert bias (state, "
                   "checkpointed), which moves by RATE toward equal loads after every step"),
    llvm::cl::init("none"), llvm::cl::cat(trainCategory));

static llvm::cl::opt<double> moeAuxLossFlag(
    "moe-aux-loss",
    llvm::cl::desc("With --train: add Switch Transformer's load-balancing loss, ALPHA * "
                   "experts * sum_i (fraction of the choices expert i got) * (its mean "
                   "router probability), per routed layer (0, default: none)"),
    llvm::cl::init(0.0), llvm::cl::cat(trainCategory));

/// The training fields of the compile options, from the command line.
static void trainOptions(hpc::CompileOptions &options) {
  options.train = trainFlag;
  options.loss = lossSpec;
  options.optimizer = optimizerName;
  options.lr = lrFlag;
  options.momentum = momentumFlag;
  options.nesterov = nesterovFlag;
  options.weightDecay = weightDecayFlag;
  options.beta1 = beta1Flag;
  options.beta2 = beta2Flag;
  options.eps = epsFlag;
  options.clipNorm = clipNormValue();
  options.clipNormAuto = clipNormFlag == "auto";
  options.weightDecayExclude = llvm::to_vector(weightDecayExcludeFlag);
  options.lrSchedule = lrScheduleFlag;
  options.freeze = llvm::to_vector(freezeFlag);
  options.keepGradients = keepGradientsFlag;
  options.printTrainable = printTrainableFlag;
  options.trainMode = trainModeFlag;
  options.seed = seedFlag;
  if (recomputeFlag.getNumOccurrences()) // unset: a searched plan may choose
    options.recompute = recomputeFlag;
  options.fusedGradients = !noFusedGradientsFlag;
  options.microBatches = microBatchesFlag;
  options.moeBalance = moeBalanceFlag;
  options.moeAuxLoss = moeAuxLossFlag;
  options.stageBoundaries = llvm::to_vector(stageBoundariesFlag);
  options.pipelineSchedule = pipelineScheduleFlag;
}

static llvm::cl::opt<std::string> moeDispatchFlag(
    "moe-dispatch",
    llvm::cl::desc("routed (default): a mixture-of-experts layer exported with a dense "
                   "dispatch (every expert on every token, a gate matrix zero for the "
                   "unchosen experts) computes only each token's top-k experts, routed "
                   "into per-expert buffers; dense: as exported (for comparison)"),
    llvm::cl::init("routed"), llvm::cl::cat(compileCategory));

static llvm::cl::opt<double> moeCapacityFactorFlag(
    "moe-capacity-factor",
    llvm::cl::desc("With --moe-dispatch=routed: each expert's buffer holds "
                   "ceil(F * k * tokens / experts) rows, and a token's choices past them "
                   "are dropped (counted in the metrics); 0 (default): every token, "
                   "nothing dropped, the dense dispatch's results"),
    llvm::cl::init(0.0), llvm::cl::cat(compileCategory));

/// The --precision of the command line (checked in main).
static hpc::Precision precision() {
  return hpc::parsePrecision(precisionFlag).value_or(hpc::Precision::FP32);
}

/// The compile options of the command line (the flags checked in main).
static void commandLineOptions(hpc::CompileOptions &options) {
  options.fuse = !noFuse;
  options.weightPieces = !noWeightPieces;
  options.blockedLayouts = !noBlockedLayouts;
  options.moeDispatch = moeDispatchFlag;
  options.moeCapacityFactor = moeCapacityFactorFlag;
  if (precisionFlag.getNumOccurrences()) // unset: a search plans its default dtype
    options.precision = precision();
  partitionOptions(options);
  trainOptions(options);
  options.autoParallel = autoParallel;
  options.report = reportFile;
  options.recalibrate = recalibrateFlag;
  options.replanThreshold = replanThresholdFlag;
  options.conservativePlan = !noConservativePlanFlag;
}

/// The tensor a --loss reads first (LOGITS, OUT or NAME), which the importer
/// must return even when it is not a graph output.
static std::string lossTensor() {
  StringRef rest = StringRef(lossSpec).split(':').second;
  return rest.split(',').first.trim().str();
}

/// Prints one line and returns the exit status for a user error.
static int userError(const llvm::Twine &message) {
  llvm::errs() << "hpc-opt: error: " << message << "\n";
  return 1;
}

/// Reads the ONNX import options from the command line.
static bool importOptions(hpc::ImportOptions &options, std::string &error,
                          int64_t microBatches = microBatchesFlag) {
  for (const std::string &s : inputShapes)
    if (!hpc::parseInputShape(s, options, error))
      return false;
  // A train step of M micro-batches imports the model for one of them;
  // hpc-micro-batches gives the step the whole batch back.
  if (microBatches > 1) {
    if (options.inputShapes.empty()) {
      error = "--micro-batches splits the batch that --input-shape sets: give the batch "
              "inputs' shapes";
      return false;
    }
    for (auto &[name, shape] : options.inputShapes) {
      if (shape.empty() || shape[0] % microBatches != 0) {
        error = "--micro-batches=" + std::to_string(microBatches) +
                " does not divide the batch of input " + name + " (" +
                (shape.empty() ? std::string("a scalar") : std::to_string(shape[0]) + " rows") +
                ")";
        return false;
      }
      shape[0] /= microBatches;
    }
  }
  options.shapesOnly = shapesOnly;
  options.bindInputsDir = bindInputs;
  if (trainFlag && !lossTensor().empty())
    options.extraOutputs.push_back(lossTensor());
  return true;
}

/// A location as a user reads it: FILE:LINE:COL (FILE alone for an ONNX
/// model, whose ops have no line), then the ONNX node or initializer name;
/// empty when unknown.
static std::string describeLocation(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    std::string s = file.getFilename().str();
    if (file.getLine())
      s += ":" + std::to_string(file.getLine()) + ":" + std::to_string(file.getColumn());
    return s;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string where = describeLocation(name.getChildLoc());
    std::string quoted = "'" + name.getName().str() + "'";
    return where.empty() ? quoted : where + ": " + quoted;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations())
      if (std::string s = describeLocation(part); !s.empty())
        return s;
    return "";
  }
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(call.getCallee());
  return "";
}

/// --emit=llvm|obj|exe: import or parse, then hpc::compileToExecutable.
static int compile(const std::string &inputFile, const std::string &outputFile,
                   StringRef emit, DialectRegistry &registry) {
  MLIRContext context(registry);
  context.disableMultithreading();
  // Diagnostics become one line each: "hpc-opt: error: <loc>: message".
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string where = describeLocation(diag.getLocation());
    llvm::errs() << "hpc-opt: error: " << (where.empty() ? "" : where + ": ") << diag.str()
                 << "\n";
    return success();
  });

  // A train step of --micro-batches is imported for one micro-batch; with
  // --cluster the search plans the whole batch first and the flow asks for
  // the model of one micro-batch once their count is known.
  int64_t microBatches = trainFlag ? int64_t(microBatchesFlag) : 1;
  bool searchFirst = !clusterSpec.empty();
  auto import = [&](int64_t micro) -> OwningOpRef<ModuleOp> {
    hpc::ImportOptions options;
    std::string error;
    if (!importOptions(options, error, micro)) {
      userError(error);
      return nullptr;
    }
    auto imported = hpc::importONNXFile(context, inputFile, options, error);
    if (!imported)
      userError(error);
    return imported;
  };
  OwningOpRef<ModuleOp> module;
  if (hpc::isONNXPath(inputFile)) {
    // Before a search of the whole batch, micro-batches that do not divide
    // it are refused at once, not after the search.
    hpc::ImportOptions check;
    std::string error;
    if (searchFirst && microBatches > 1 && !importOptions(check, error, microBatches))
      return userError(error);
    module = import(searchFirst ? 1 : microBatches);
    if (!module)
      return 1;
  } else {
    module = parseSourceFile<ModuleOp>(inputFile, &context);
    if (!module)
      return 1; // the parser reported the error
  }

  bool writesFile = emit == "obj" || emit == "exe";
  if (writesFile && outputFile == "-")
    return userError("--emit=" + emit + " needs an output file (-o FILE)");
  hpc::CompileOptions options;
  commandLineOptions(options);
  options.modelName = llvm::sys::path::filename(inputFile).str();
  if (hpc::isONNXPath(inputFile)) {
    SmallString<256> modelPath(inputFile);
    if (!llvm::sys::fs::make_absolute(modelPath)) {
      llvm::sys::path::remove_dots(modelPath, /*remove_dot_dot=*/true);
      options.modelPath = modelPath.str().str();
    }
  }
  hpc::FlowOptions flow;
  flow.emit = emit == "llvm" ? hpc::EmitKind::LLVMIR
              : emit == "obj" ? hpc::EmitKind::Object
                              : hpc::EmitKind::Executable;
  if (hpc::isONNXPath(inputFile))
    flow.reimport = import;
  flow.log = [](StringRef line) { llvm::errs() << "hpc-opt: " << line << "\n"; };
  return failed(hpc::compileToExecutable(*module, options, outputFile, flow)) ? 1 : 0;
}

/// Appends the train step (loss, backward, optimizer) to an imported module,
/// with one-line diagnostics; false on failure.
static bool buildTrainStep(MLIRContext &context, ModuleOp module) {
  hpc::CompileOptions train;
  trainOptions(train);
  train.mesh = meshSpec; // the dp ranks each micro-batch is spread over
  PassManager pm(&context);
  hpc::buildTrainPipeline(pm, train);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      llvm::errs() << "hpc-opt: error: " << diag.str() << "\n";
    return success();
  });
  return succeeded(pm.run(module));
}

/// With --precision=bf16, casts the products of an imported module (after
/// its train step), with one-line diagnostics; false on failure.
static bool castProducts(MLIRContext &context, ModuleOp module) {
  if (precision() == hpc::Precision::FP32)
    return true;
  hpc::HPCAutocastOptions autocast;
  autocast.precision = precision();
  PassManager pm(&context);
  pm.addPass(hpc::createHPCAutocast(autocast));
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      llvm::errs() << "hpc-opt: error: " << diag.str() << "\n";
    return success();
  });
  return succeeded(pm.run(module));
}

/// Imports an ONNX file and hands it to MlirOptMain as an in-memory buffer,
/// so every mlir-opt flag (passes, printing) applies unchanged.
static int runOnONNX(const std::string &inputFile, const std::string &outputFile,
                     DialectRegistry &registry) {
  hpc::ImportOptions options;
  std::string error;
  if (!importOptions(options, error))
    return userError(error);

  MLIRContext context(registry);
  context.disableMultithreading(); // the import is sequential; skip the pool
  auto module = hpc::importONNXFile(context, inputFile, options, error);
  if (!module)
    return userError(error);
  // Mixture-of-experts layers are routed before the train step and
  // partitioning, and after a search (which plans the imported model), as
  // hpc-compile does.
  auto routeExperts = [&] {
    if (moeDispatchFlag != "routed")
      return true;
    PassManager route(&context);
    hpc::HPCRouteExpertsOptions routeOptions;
    routeOptions.capacityFactor = moeCapacityFactorFlag;
    // Expert parallelism: the mesh given, or the one the search planned.
    std::string mesh = meshSpec;
    int64_t microBatches = microBatchesFlag;
    if (mesh.empty())
      if (FailureOr<std::string> planned = hpc::planMesh(*module); succeeded(planned)) {
        mesh = *planned;
        microBatches = std::max(microBatches, hpc::planMicroBatches(*module));
      }
    routeOptions.mesh = hpc::routingMesh(mesh, microBatches);
    route.addPass(hpc::createHPCRouteExperts(routeOptions));
    return succeeded(route.run(*module));
  };
  // The train step is built before partitioning, and after a search, which
  // plans the forward model with the train step's optimizer and precision.
  bool search = !clusterSpec.empty() || autoParallel;
  if (!search && !routeExperts())
    return 1;
  if (trainFlag && !search && !buildTrainStep(context, *module))
    return 1;
  if (search || !meshSpec.empty()) {
    // With a cluster: search (or evaluate --mesh) and report the plan;
    // else show the partitioned per-rank program.
    PassManager pm(&context);
    if (search) {
      hpc::DistSearchOptions options;
      options.cluster = clusterSpec;
      options.mesh = meshSpec;
      options.report = reportFile;
      options.globalBatch = globalBatch;
      // A train step's plan is costed as it would compile (-o: the
      // schedule given, or auto); a forward model's as Megatron-LM runs
      // it, 1F1B, unless a schedule is given.
      if (trainFlag || pipelineScheduleFlag.getNumOccurrences())
        options.schedule = pipelineScheduleFlag;
      hpc::CompileOptions step;
      commandLineOptions(step);
      hpc::matchSearchToStep(options, step);
      pm.addPass(hpc::createDistSearch(options));
    } else {
      // As hpc-compile partitions (a train step's gradients in buckets,
      // overlapped).
      hpc::CompileOptions partition;
      partitionOptions(partition);
      partition.train = trainFlag;
      // A pipelined step's stages (dist-pipeline's nested modules) are each
      // partitioned over the other axes.
      hpc::PipelineMesh pipeline = hpc::splitPipelineAxis(meshSpec);
      if (pipeline.stages == 1) {
        hpc::buildPartitionPipeline(pm, partition);
      } else if (!pipeline.rest.empty()) {
        partition.mesh = "pp=" + std::to_string(pipeline.stages) + "," + pipeline.rest;
        hpc::buildPartitionPipeline(pm.nest<ModuleOp>(), partition);
      }
    }
    ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        llvm::errs() << "hpc-opt: error: " << diag.str() << "\n";
      return success();
    });
    if (failed(pm.run(*module)))
      return 1;
  }
  if (search && !routeExperts())
    return 1;
  if (trainFlag && search && !buildTrainStep(context, *module))
    return 1;
  // Last, as hpc-compile does: after the train step and partitioning.
  if (!castProducts(context, *module))
    return 1;
  std::string bytecode;
  llvm::raw_string_ostream os(bytecode);
  if (failed(writeBytecodeToFile(*module, os))) {
    llvm::errs() << "hpc-opt: error: cannot serialize the imported module\n";
    return 1;
  }
  module = nullptr;

  auto output = openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "hpc-opt: error: " << error << "\n";
    return 1;
  }
  auto config = MlirOptMainConfig::createFromCLOptions();
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(bytecode, inputFile);
  if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
    return 1;
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  hpc::registerAllDialects(registry);
  hpc::registerAllPasses();
  hpc::registerTargetTranslations(registry);

  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "HPC-Opt version " << hpc::version() << "\n"; });
  auto [inputFile, outputFile] = registerAndParseCLIOptions(
      argc, argv, "HPC-Opt: hybrid-parallel compiler driver\n", registry);
  std::string emit = emitKind;
  if (emit.empty())
    emit = hpc::isONNXPath(inputFile) && outputFile != "-" &&
                   outputFile != "/dev/null" &&
                   !StringRef(outputFile).ends_with(".mlir") &&
                   !StringRef(outputFile).ends_with(".mlirbc")
               ? "exe"
               : "mlir";
  if (emit != "mlir" && emit != "llvm" && emit != "obj" && emit != "exe")
    return userError("--emit must be mlir, llvm, obj or exe, not '" + emit + "'");
  if (!hpc::parsePrecision(precisionFlag))
    return userError("--precision: '" + precisionFlag + "' is not fp32 or bf16");
  if (double v = 0; clipNormFlag != "auto" && !(llvm::to_float(clipNormFlag, v) && v >= 0))
    return userError("--clip-norm: expected a non-negative number or auto, got '" +
                     clipNormFlag + "'");
  if (moeDispatchFlag != "routed" && moeDispatchFlag != "dense")
    return userError("--moe-dispatch must be routed or dense, not '" + moeDispatchFlag + "'");
  if (!(moeCapacityFactorFlag >= 0))
    return userError("--moe-capacity-factor must be >= 0 (0: no token is dropped), not " +
                     hpc::shortNumber(moeCapacityFactorFlag));
  if (!hpc::parseMoEBalance(moeBalanceFlag))
    return userError("--moe-balance must be none or bias:RATE with RATE > 0, not '" +
                     moeBalanceFlag + "'");
  if (!(moeAuxLossFlag >= 0))
    return userError("--moe-aux-loss must be >= 0, not " + hpc::shortNumber(moeAuxLossFlag));
  if ((moeBalanceFlag != "none" || moeAuxLossFlag > 0) && !trainFlag)
    return userError("--moe-balance and --moe-aux-loss balance a train step: they need --train");
  if (!shardSpecs.empty() && meshSpec.empty())
    return userError("--shard needs --mesh");
  if (asyncCollectives && meshSpec.empty())
    return userError("--async-collectives needs --mesh");
  if (asyncCollectives && noOverlap)
    return userError("--async-collectives and --no-overlap contradict each other");
  if (double mb; !parseBucketMb(mb))
    return userError("--bucket-mb must be auto or a number of MiB from 0 to 1e6, not '" +
                     bucketMbFlag + "'");
  if (!zeroFlag.empty() && meshSpec.empty() && !autoParallel)
    return userError("--zero shards the training state over data parallelism: it needs "
                     "--mesh with a dp axis (dp=N)");
  if (!zeroFlag.empty()) {
    if (zeroFlag != "1" && zeroFlag != "2" && zeroFlag != "3")
      return userError("--zero must be 1, 2 or 3, not '" + zeroFlag + "'");
    if (!trainFlag)
      return userError("--zero needs --train (it shards a train step's state)");
    if (autoParallel)
      return userError("--zero fixes the ZeRO stage; --auto-parallel compiles the one its "
                       "search chooses: use one of them");
  }
  if (hierarchicalFlag != "auto" && hierarchicalFlag != "on" && hierarchicalFlag != "off")
    return userError("--hierarchical must be auto, on or off, not '" + hierarchicalFlag + "'");
  if (hierarchicalFlag == "on" && (clusterSpec.empty() || (meshSpec.empty() && !autoParallel)))
    return userError("--hierarchical=on needs --cluster (the nodes the ranks are laid on) "
                     "and a mesh (--mesh or --auto-parallel)");
  {
    hpc::CompressSpec spec;
    std::string error;
    if (!hpc::parseCompressSpec(compressFlag, spec, error))
      return userError(error);
  }
  if (errorFeedbackFlag != "on" && errorFeedbackFlag != "off" && errorFeedbackFlag != "bf16")
    return userError("--error-feedback must be on, bf16 or off, not '" + errorFeedbackFlag +
                     "'");
  if (gradientBuffersFlag != "f32" && gradientBuffersFlag != "bf16")
    return userError("--gradient-buffers must be f32 or bf16, not '" + gradientBuffersFlag +
                     "'");
  if (gradientBuffersFlag == "bf16" && (!trainFlag || (meshSpec.empty() && !autoParallel)))
    return userError("--gradient-buffers=bf16 keeps a train step's gradient reductions in "
                     "bf16: it needs --train and a mesh with a dp axis (--mesh or "
                     "--auto-parallel)");
  if (compressFlag != "none" && (!trainFlag || (meshSpec.empty() && !autoParallel)))
    return userError("--compress=" + compressFlag + " compresses a train step's gradient "
                     "reductions: it needs --train and a mesh with a dp axis (--mesh or "
                     "--auto-parallel)");
  if (autoParallel && clusterSpec.empty())
    return userError("--auto-parallel needs --cluster=PRESET:NODES or a cluster file");
  if (autoParallel && !meshSpec.empty())
    return userError("--auto-parallel searches the plan; --mesh gives one: use one of them");
  if ((!reportFile.empty() || globalBatch) && clusterSpec.empty())
    return userError("--report and --global-batch need --cluster");
  if (!recalibrateFlag.empty() && (!trainFlag || clusterSpec.empty() || emit == "mlir"))
    return userError("--recalibrate plans a train step again from a measured run: it needs "
                     "--train, --cluster (the one the run's binary was compiled for) and -o");
  if (!(replanThresholdFlag >= 0 && replanThresholdFlag < 1))
    return userError("--replan-threshold must be a fraction from 0 to below 1 (0.1: 10% "
                     "faster), not " + std::to_string(replanThresholdFlag));
  if (replanThresholdFlag > 0 && recalibrateFlag.empty())
    return userError("--replan-threshold needs --recalibrate (the measured step it compares "
                     "with)");
  if (!clusterSpec.empty() && emit != "mlir" && globalBatch)
    return userError("--global-batch applies to a reported plan; a compiled one runs the "
                     "input's batch (set it with --input-shape)");
  if (!clusterSpec.empty() && !hpc::isONNXPath(inputFile))
    return userError("--cluster applies to ONNX inputs; for MLIR use --dist-search=cluster=...");
  if (trainFlag && lossSpec.empty())
    return userError("--train needs --loss=cross-entropy:LOGITS,LABELS, mse:OUT,TARGET or "
                     "output:NAME");
  if (!trainFlag && (!lossSpec.empty() || printTrainableFlag || keepGradientsFlag))
    return userError("--loss, --print-trainable and --keep-gradients need --train");
  if (trainModeFlag && !trainFlag)
    return userError("--train-mode needs --train");
  if (!hpc::parseRecomputeMode(recomputeFlag))
    return userError("--recompute must be none, full or selective, not '" + recomputeFlag +
                     "'");
  if (recomputeFlag.getNumOccurrences() && !trainFlag)
    return userError("--recompute needs --train (it trades a train step's compute for "
                     "activation memory)");
  hpc::PipelineMesh pipeline = hpc::splitPipelineAxis(meshSpec);
  if (pipeline.stages > 1 && !trainFlag)
    return userError("--mesh=pp=" + std::to_string(pipeline.stages) +
                     ": pipeline stages split a train step; add --train (a forward program "
                     "runs on one stage)");
  if (pipeline.stages > 1)
    for (StringRef axis : llvm::split(StringRef(pipeline.rest), ',')) {
      StringRef name = axis.split('=').first.trim();
      if (!name.empty() && name != "dp" && name != "tp")
        return userError("--mesh=" + meshSpec + ": pipeline stages compose with dp and tp; '" +
                         name.str() + "' with pp is not compiled yet");
    }
  if (pipeline.stages > 1 && !zeroFlag.empty() && zeroFlag != "0" &&
      !StringRef(pipeline.rest).contains("dp="))
    return userError("--zero shards the state over a dp axis: give --mesh=pp=" +
                     std::to_string(pipeline.stages) + ",dp=N");
  if (sequenceParallelFlag && !autoParallel && hpc::meshAxisSize(meshSpec, "tp") < 2)
    return userError("--sequence-parallel splits the sequence over the tp ranks: give "
                     "--mesh=...,tp=N with N >= 2");
  if (stageBoundariesFlag.getNumOccurrences() && pipeline.stages == 1)
    return userError("--stage-boundaries needs pipeline stages (--mesh=pp=P with P >= 2)");
  if (pipelineScheduleFlag.getNumOccurrences() && pipeline.stages == 1 && clusterSpec.empty())
    return userError("--pipeline-schedule needs pipeline stages (--mesh=pp=P with P >= 2, "
                     "or a plan: --cluster)");
  {
    hpc::PipelineSchedule schedule;
    std::string error;
    if (!hpc::parsePipelineSchedule(pipelineScheduleFlag, schedule, error))
      return userError(error);
  }
  if (microBatchesFlag < 1)
    return userError("--micro-batches must be at least 1, not " +
                     std::to_string(microBatchesFlag));
  if (microBatchesFlag > 1 && !trainFlag)
    return userError("--micro-batches needs --train (it accumulates a train step's "
                     "gradients)");
  if (microBatchesFlag > 1 && !clusterSpec.empty() && emit == "mlir")
    return userError("--micro-batches with --cluster applies to a compiled step (-o FILE); "
                     "a reported plan takes its micro-batch as --mesh=...,mbs=N");
  if (trainFlag && !hpc::isONNXPath(inputFile))
    return userError("--train applies to ONNX inputs; for MLIR use --hpc-append-loss, "
                     "--hpc-autodiff and --hpc-optimizer");
  if (emit != "mlir")
    return compile(inputFile, outputFile, emit, registry);
  if ((!meshSpec.empty() || !shardSpecs.empty()) && !hpc::isONNXPath(inputFile))
    return userError("--mesh and --shard apply to ONNX inputs or --emit; for "
                     "MLIR use --dist-propagate=mesh=... --dist-partition");
  if (precision() != hpc::Precision::FP32 && !hpc::isONNXPath(inputFile))
    return userError("--precision applies to ONNX inputs or --emit; for MLIR use "
                     "--hpc-autocast=precision=bf16");

  if (hpc::isONNXPath(inputFile))
    return runOnONNX(inputFile, outputFile, registry);
  return asMainReturnCode(MlirOptMain(argc, argv, inputFile, outputFile, registry));
}
