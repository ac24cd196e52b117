//===- Pipelines.cpp - HPC-Opt pass pipelines -----------------------------===//

#include "hpc/Pipeline.h"
#include "hpc/Passes.h"
#include "hpc/PipelineSchedule.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void hpc::buildCompilePipeline(mlir::OpPassManager &pm,
                               const CompileOptions &options) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (options.fuse)
    pm.addPass(createHPCFuseComposites());
  // Before the train step: the backward pass is built from the routed layers.
  if (options.moeDispatch == "routed") {
    HPCRouteExpertsOptions route;
    route.capacityFactor = options.moeCapacityFactor;
    route.mesh = routingMesh(options.mesh, options.microBatches);
    pm.addPass(createHPCRouteExperts(route));
  }
  if (options.train) {
    buildTrainPipeline(pm, options);
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
  }
  // A pipelined step is one nested module per stage (dist-pipeline): the
  // rest compiles each of them.
  PipelineMesh pipeline = splitPipelineAxis(options.mesh);
  mlir::OpPassManager &stage = pipeline.stages > 1 ? pm.nest<mlir::ModuleOp>() : pm;
  // A stage's program runs on its pp coordinate's ranks: partitioned over
  // the other axes of the whole mesh (pp first, the runtime's rank layout).
  std::string stageMesh = options.mesh;
  if (pipeline.stages > 1)
    stageMesh = pipeline.rest.empty()
                    ? ""
                    : "pp=" + std::to_string(pipeline.stages) + "," + pipeline.rest;
  buildStagePipeline(stage, options, stageMesh);
}

void hpc::buildStagePipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                             llvm::StringRef mesh) {
  if (!mesh.empty()) {
    if (mesh == options.mesh.getValue()) {
      buildPartitionPipeline(pm, options);
    } else {
      CompileOptions within;
      within.copyOptionValuesFrom(options);
      within.mesh = mesh.str();
      buildPartitionPipeline(pm, within);
    }
  }
  // After the train step, whose backward products are cast too, and after
  // partitioning: the partitioner then unfuses QKV projections as in fp32 and
  // reduces partial sums (gradients among them) in f32, as PyTorch does.
  // Before dist-weight-pieces, which stores the pieces of the bf16 weights.
  if (options.precision != Precision::FP32) {
    HPCAutocastOptions autocast;
    autocast.precision = options.precision;
    pm.addPass(createHPCAutocast(autocast));
  }
  // Weight pieces a per-rank program reads (and slices of weights in any
  // program) become stored data.
  if (options.weightPieces)
    pm.addPass(createDistWeightPieces());
  // Last, on the per-rank program: the backward pass is built from unfused
  // ops, and an activated gemm/conv cannot split its reduction (row
  // parallelism), so fusion waits until the partitioner has decided.
  if (options.fuse)
    pm.addPass(createHPCFuseEpilogues());
  // On the fused per-rank program: an activation fused into its conv is no
  // longer a reader, and collectives are (plain ones) already in place.
  if (options.blockedLayouts)
    pm.addPass(createHPCPlanLayouts());
  HPCLowerToRuntimeOptions lower;
  lower.weightsFile = options.weightsFile;
  lower.weightsName = options.weightsName;
  lower.modelName = options.modelName;
  lower.modelPath = options.modelPath;
  pm.addPass(createHPCLowerToRuntime(lower));
}

void hpc::buildTrainPipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  HPCAppendLossOptions loss;
  loss.loss = options.loss;
  pm.addPass(createHPCAppendLoss(loss));
  if (options.trainMode) {
    HPCTrainModeOptions mode;
    mode.seed = options.seed;
    pm.addPass(createHPCTrainMode(mode));
  }
  // Load balancing of routed experts changes the routing and the loss the
  // backward pass is built from.
  if (double rate = parseMoEBalance(options.moeBalance).value_or(0);
      rate > 0 || options.moeAuxLoss > 0) {
    HPCMoEBalanceOptions balance;
    balance.biasRate = rate;
    balance.auxLoss = options.moeAuxLoss;
    pm.addPass(createHPCMoEBalance(balance));
  }
  // Before the backward pass is built from them (and before the stages are
  // cut, so the pieces' products get their stage): a fused QKV projection
  // split three ways is split by heads under tensor parallelism.
  if (meshAxisSize(options.mesh, "tp") > 1)
    pm.addPass(createHPCUnfuseSplitProjections());
  if (PipelineMesh pipeline = splitPipelineAxis(options.mesh); pipeline.stages > 1) {
    // On the forward program with its loss: hpc-autodiff puts each op's
    // gradient ops on its stage.
    DistPipelineStagesOptions stages;
    PipelineSchedule schedule;
    std::string error;
    // A bad schedule goes on with one chunk; dist-pipeline refuses it.
    if (parsePipelineSchedule(options.pipelineSchedule, schedule, error))
      stages.chunks = schedule.chunks;
    stages.stages = pipeline.stages * stages.chunks;
    stages.boundaries = llvm::to_vector(options.stageBoundaries);
    pm.addPass(createDistPipelineStages(stages));
  }
  HPCAutodiffOptions autodiff;
  autodiff.freeze = llvm::to_vector(options.freeze);
  autodiff.printTrainable = options.printTrainable;
  autodiff.recompute = options.recompute;
  autodiff.fusedGradients = options.fusedGradients;
  autodiff.lossScaleInput = true;
  pm.addPass(createHPCAutodiff(autodiff));
  if (options.microBatches != 1) {
    // Before the optimizer, which then updates once from the accumulated
    // gradients; with the mesh the step is partitioned over, so that each
    // micro-batch stays spread over the dp ranks.
    HPCMicroBatchesOptions micro;
    micro.count = options.microBatches;
    micro.mesh = options.mesh;
    pm.addPass(createHPCMicroBatches(micro));
  }
  PipelineMesh pipeline = splitPipelineAxis(options.mesh);
  HPCOptimizerOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.momentum = options.momentum;
  opt.nesterov = options.nesterov;
  opt.weightDecay = options.weightDecay;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.eps = options.eps;
  opt.clipNorm = options.clipNorm;
  opt.clipNormAuto = options.clipNormAuto;
  opt.weightDecayExclude = llvm::to_vector(options.weightDecayExclude);
  opt.lrSchedule = options.lrSchedule;
  opt.keepGradients = options.keepGradients;
  pm.addPass(createHPCOptimizer(opt));
  if (pipeline.stages > 1) {
    DistPipelineOptions split;
    split.stages = pipeline.stages;
    split.schedule = options.pipelineSchedule;
    split.mesh = options.mesh;
    pm.addPass(createDistPipeline(split));
  }
}

void hpc::buildPartitionPipeline(mlir::OpPassManager &pm, llvm::StringRef mesh,
                                 llvm::ArrayRef<std::string> shard,
                                 bool asyncCollectives, int64_t bucketBytes,
                                 int64_t zeroStage, llvm::StringRef bucketCluster,
                                 int64_t ranksPerNode, llvm::StringRef hierarchical,
                                 llvm::StringRef compress,
                                 const GradientCodecOptions &codecOptions,
                                 bool sequenceParallel) {
  // Equal ops become one before they are partitioned: an activation that
  // two products' weight gradients transpose alike (the unfused Q, K and
  // V projections') is then transposed, and under sequence parallelism
  // gathered, once instead of once per product.
  pm.addPass(mlir::createCSEPass());
  if (zeroStage != 0) {
    DistZeroOptions zero;
    zero.stage = zeroStage;
    zero.mesh = mesh.str();
    pm.addPass(createDistZero(zero));
  }
  DistPropagateOptions propagate;
  propagate.mesh = mesh.str();
  propagate.shard = llvm::to_vector(shard);
  propagate.ranksPerNode = ranksPerNode;
  propagate.sequenceParallel = sequenceParallel;
  pm.addPass(createDistPropagate(propagate));
  pm.addPass(createDistPartition());
  // Collectives that undo each other (slice then gather) fold away.
  pm.addPass(mlir::createCanonicalizerPass());
  if (bucketBytes != 0) {
    DistBucketOptions bucket;
    bucket.bucketBytes = bucketBytes;
    bucket.cluster = bucketCluster.str();
    pm.addPass(createDistBucket(bucket));
  }
  // On the buckets (their sizes were chosen for the flat ring or the two
  // levels alike), before their starts are placed.
  if (ranksPerNode > 0 || hierarchical == "on") {
    DistHierarchicalOptions levels;
    levels.mode = hierarchical.str();
    levels.cluster = bucketCluster.str();
    pm.addPass(createDistHierarchical(levels));
  }
  // On the final reductions (buckets, levels), before their starts.
  if (compress != "none" || codecOptions.buffersBf16) {
    DistCompressOptions codec;
    CompressSpec spec;
    std::string error;
    // A bad value goes on as the mode, which dist-compress refuses.
    spec.mode = compress.str();
    parseCompressSpec(compress, spec, error);
    codec.mode = spec.mode;
    codec.rank = spec.rank;
    codec.ratio = spec.ratio;
    codec.errorFeedback = codecOptions.errorFeedback;
    codec.stateBf16 = codecOptions.stateBf16;
    codec.buffersBf16 = codecOptions.buffersBf16;
    codec.cluster = bucketCluster.str();
    pm.addPass(createDistCompress(codec));
  }
  if (asyncCollectives)
    pm.addPass(createDistAsyncCollectives());
}

void hpc::buildPartitionPipeline(mlir::OpPassManager &pm, const CompileOptions &options) {
  // Buckets and overlap for a train step's gradients; an inference
  // program's collectives feed the op after them.
  int64_t bucketBytes = !options.train        ? 0
                        : options.bucketMb < 0 ? -1
                                               : static_cast<int64_t>(options.bucketMb * 1024 * 1024);
  bool async = options.asyncCollectives || (options.train && options.overlap);
  buildPartitionPipeline(pm, options.mesh, options.shard, async, bucketBytes,
                         options.train ? int64_t(options.zero) : 0, options.cluster,
                         options.ranksPerNode, options.hierarchical,
                         options.train ? llvm::StringRef(options.compress) : "none",
                         {options.errorFeedback, options.codecStateBf16,
                          options.train && options.gradientBuffersBf16},
                         options.sequenceParallel);
}

bool hpc::parseCompressSpec(llvm::StringRef text, CompressSpec &out, std::string &error) {
  auto [mode, parameter] = text.split(':');
  bool hasParameter = text.contains(':');
  if (mode == "auto" || mode == "none" || mode == "int8") {
    if (hasParameter) {
      error = "--compress=" + mode.str() + " takes no parameter, not '" + parameter.str() + "'";
      return false;
    }
    out.mode = mode.str();
    return true;
  }
  if (mode == "powersgd") {
    int64_t rank = 4;
    if (hasParameter && (parameter.getAsInteger(10, rank) || rank < 1)) {
      error = "--compress=powersgd:R needs a rank R of 1 or more, not '" + parameter.str() + "'";
      return false;
    }
    out.mode = "powersgd";
    out.rank = rank;
    return true;
  }
  if (mode == "topk") {
    double ratio = 0.01;
    if (hasParameter && (parameter.getAsDouble(ratio) || !(ratio > 0 && ratio <= 1))) {
      error = "--compress=topk:F needs a ratio F in (0, 1], not '" + parameter.str() + "'";
      return false;
    }
    out.mode = "topk";
    out.ratio = ratio;
    return true;
  }
  error = "--compress must be auto, none, int8, powersgd[:R] or topk[:F], not '" + text.str() +
          "'";
  return false;
}

double hpc::makeConservative(CompileOptions &options) {
  options.compress = "none";
  options.overlap = false;
  options.asyncCollectives = false;
  options.clipNorm = options.clipNorm > 0 && !options.clipNormAuto ? options.clipNorm / 2 : 1.0;
  options.clipNormAuto = false;
  return 0.5;
}

void hpc::registerPipelines() {
  mlir::PassPipelineRegistration<CompileOptions>(
      "hpc-compile",
      "Compile an hpc module to LLVM dialect calls of libhpcrt",
      buildCompilePipeline);
}
