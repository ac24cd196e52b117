//===- Train.cpp - the train command: a loop around the compiled step -----===//
//
// Trainer runs one `./model train`: setup (weights, the state region, the
// data, a checkpoint to resume from or --init-weights, the metrics file),
// then per step: the batch and the step inputs, the program, the loss and
// gradient norm, --dump-outputs, evaluation, the metrics line, progress and
// checkpoints; at the end --save, --save-onnx and the summary. Under mpirun
// every rank runs the loop (the program's collectives keep them in step);
// rank 0 prints and writes metrics, every rank writes its checkpoint shard.
// The source model of --save-onnx is rewritten once at setup too (and the
// result dropped), so that a model it cannot rewrite fails before training.
//
// Evaluation runs the same step program on an evaluation batch: the program
// always updates the state, so the state buffer is copied before and copied
// back after, which makes evaluation exact (the next training step sees the
// bytes it would have seen without it).
//
//===----------------------------------------------------------------------===//

#include "Train.h"

#include "Checkpoint.h"
#include "Data.h"
#include "Files.h"
#include "Metrics.h"
#include "TrainOptions.h"
#include "../io/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/resource.h>
#include <unistd.h>

namespace hpcrt::driver {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// This rank's place on the mesh axis named "dp" (none: one data rank).
DataRank dataRankOf(const Context &ctx, const MpiRun &mpi) {
  DataRank r;
  for (size_t a = 0; a < ctx.mesh().size(); ++a)
    if (ctx.mesh()[a].name == "dp") {
      r.size = ctx.mesh()[a].size;
      r.index = mpi.comm ? mpi.comm->coords()[a] : 0;
    }
  return r;
}

uint64_t inputBytes(const Context &ctx) {
  uint64_t n = 0;
  for (const NamedTensor &in : ctx.inputList())
    n += ctx.tensor(in.tensor).bytes;
  return n;
}

/// What the compiler planned each rank to hold: the state, the arena (the
/// activations and gradients, the buckets among them), the weights and the
/// inputs. The kernels' own allocations come on top once they are set up.
uint64_t compiledBytes(const Context &ctx) {
  return ctx.stateBytes() + ctx.arenaBytes() + ctx.residentWeightsBytes() + inputBytes(ctx);
}

/// The most resident memory this process had (the kernel's count, which
/// also sees what the runtime does not: libraries, MPI's buffers, the heap).
uint64_t peakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024; // Linux: KiB
}

std::string withoutTrailingSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

class Trainer {
public:
  Trainer(const TrainOptions &o, Context &ctx, MpiRun &mpi)
      : o_(o), ctx_(ctx), mpi_(mpi), root_(mpi.rank == 0),
        batch_(ctx.train().batch) {
    plan_.planHash = planHash(compiledPlanText().c_str());
    plan_.model = ctx.model();
    plan_.worldSize = mpi.size;
    plan_.layout = planLayout(ctx);
  }
  int run();

private:
  const TrainOptions &o_;
  Context &ctx_;
  MpiRun &mpi_;
  double traceStartUs_ = 0; ///< the trace's time 0: the first step's start
  const bool root_;
  const int64_t batch_;
  CheckpointPlan plan_;
  LrSchedule schedule_;
  int64_t killStep_ = 0;
  std::unique_ptr<BatchLoader> data_, eval_;
  std::unique_ptr<CheckpointWriter> writer_;
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<Progress> progress_;
  MemoryAccount memory_;
  Buffer evalSnapshot_;
  int64_t doneStep_ = 0;   ///< the step the state is at (0, or the checkpoint's)
  /// Steps up to doneStep_ (then up to the current one) whose updates the
  /// program skipped (a non-finite gradient norm): the optimizer's step
  /// count is the run's less these.
  int64_t skippedSteps_ = 0;
  int64_t skippedThisRun_ = 0;
  int64_t baseSample_ = 0; ///< the data position after doneStep_
  std::string resumedFrom_;
  std::string onnxSource_; ///< the model --save-onnx rewrites
  double trainMs_ = 0;
  int64_t stepsRun_ = 0;
  comm::CommStats stepComm_; ///< what the train steps' collectives sent (not eval)
  float lastLoss_ = NAN;

  bool resuming() const { return o_.resume || !o_.resumeFrom.empty(); }
  /// The first global sample of step `step`.
  int64_t firstSample(int64_t step) const {
    return baseSample_ + (step - doneStep_ - 1) * batch_;
  }
  int64_t tokensPerStep() const {
    int64_t t = data_->tokensPerSample();
    return t ? batch_ * t : batch_;
  }

  void setup();
  void setupProgram();
  void setupData();
  void setupSchedule();
  void resume();
  void checkOnnxSource();
  void openOutputs();
  void printHeader() const;

  StepReport trainStep(int64_t step);
  void feedStepInputs(int64_t step, double lr);
  float outputScalar(int output) const;
  double evaluate(int64_t step);
  void report(const StepReport &r, Clock::time_point loopStart);
  void dumpOutputs(int64_t step);
  void checkpoint(int64_t step);
  void finish(double wallS);
};

int Trainer::run() {
  setup();
  if (doneStep_ >= o_.steps) {
    if (root_)
      printf("train: nothing to do: the state is at step %lld, --steps is %lld\n",
             static_cast<long long>(doneStep_), static_cast<long long>(o_.steps));
    return 0;
  }
  if (root_)
    printHeader();
  auto loopStart = Clock::now();
  traceStartUs_ = ctx_.nowUs();
  for (int64_t s = doneStep_ + 1; s <= o_.steps; ++s) {
    StepReport r = trainStep(s);
    report(r, loopStart);
    checkpoint(s);
  }
  if (root_)
    progress_->finish();
  finish(msSince(loopStart) / 1000.0);
  if (!o_.trace.empty())
    writeTrace(ctx_, mpi_, o_.trace, traceStartUs_, o_.verbose);
  return 0;
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

void Trainer::setup() {
  mpi_.step([&] {
    killStep_ = faultKillStep();
    // Each rank holds only its rows of a ZeRO-3 parameter: files of whole
    // parameters would need a gather first.
    if (ctx_.zeroStage() == 3 &&
        (!o_.save.empty() || !o_.saveOnnx.empty() || !o_.initWeights.empty()))
      fail("--save, --save-onnx and --init-weights need whole parameters; under ZeRO-3 each "
           "rank holds its rows (checkpoints with --ckpt-dir work)");
    // Each pipeline stage holds its own layers' parameters.
    if (compiledProgram().stages > 1 &&
        (!o_.save.empty() || !o_.saveOnnx.empty() || !o_.initWeights.empty()))
      fail("--save, --save-onnx and --init-weights need every parameter on one rank; with "
           "pipeline stages each stage's ranks hold their layers' (checkpoints with "
           "--ckpt-dir work)");
    setupProgram();
    setupData();
    setupSchedule();
    // An output that cannot be replaced is refused before the steps.
    for (const std::string *out : {&o_.save, &o_.saveOnnx})
      if (root_ && !out->empty())
        replaceableTarget(*out);
    if (!o_.ckptDir.empty()) {
      if (root_ && !resuming())
        checkFreshDirectory(o_.ckptDir);
      writer_ = std::make_unique<CheckpointWriter>(ctx_, mpi_, o_.ckptDir, o_.ckptKeep, plan_);
    }
  });
  if (resuming())
    resume();
  else if (!o_.initWeights.empty())
    mpi_.step([&] { memory_.transient(initParams(ctx_, o_.initWeights)); });
  if (!o_.saveOnnx.empty())
    mpi_.step([&] { checkOnnxSource(); });
  openOutputs();
}

void Trainer::setupProgram() {
  uint64_t loading = loadWeights(ctx_, o_.weights, o_.verbose && root_);
  int threads = static_cast<int>(o_.threads);
  if (threads == 0 && mpi_.active && !getenv("OMP_NUM_THREADS"))
    threads = mpi_.threadsPerRank();
  if (threads > 0)
    ctx_.backend().setThreads(threads);
  ctx_.prepare();
  setupKernels(ctx_);
  ctx_.setTracing(!o_.trace.empty());
  memory_.hold(ctx_.residentBytes());
  memory_.transient(loading);
}

void Trainer::setupData() {
  DataRank rank = dataRankOf(ctx_, mpi_);
  data_ = std::make_unique<BatchLoader>(ctx_, o_.data, rank);
  memory_.hold(data_->heldBytes());
  if (o_.eval.empty())
    return;
  eval_ = std::make_unique<BatchLoader>(ctx_, o_.eval, rank);
  memory_.hold(eval_->heldBytes());
  evalSnapshot_ = Buffer(ctx_.stateBytes());
  memory_.hold(ctx_.stateBytes());
}

void Trainer::setupSchedule() {
  const TrainInfo &t = ctx_.train();
  if (o_.haveSchedule) {
    schedule_ = o_.schedule;
  } else {
    schedule_.kind = t.scheduleKind;
    schedule_.warmup = t.warmup;
    schedule_.total = t.total;
  }
  if (!o_.haveLr && !t.hasLr)
    fail("the program's optimizer has no lr (manifest train.optimizer.lr): pass --lr F");
  schedule_.lr = o_.haveLr ? o_.lr : t.lr;
}

void Trainer::resume() {
  std::string chosen;
  std::vector<std::string> warnings;
  mpi_.step([&] {
    if (!root_)
      return;
    CheckpointInfo c = o_.resume ? findResumable(o_.ckptDir, plan_, warnings)
                                 : readCheckpoint(withoutTrailingSlash(o_.resumeFrom), plan_, true);
    chosen = c.dir;
  });
  for (const std::string &w : warnings)
    fprintf(stderr, "%s: warning: %s\n", progName.c_str(), w.c_str());
  fflush(stderr);
  chosen = mpi_.broadcast(chosen);
  mpi_.step([&] {
    CheckpointInfo c = readCheckpoint(chosen, plan_, false);
    memory_.transient(loadShard(ctx_, c, plan_, mpi_.rank));
    doneStep_ = c.step;
    baseSample_ = c.nextSample;
    skippedSteps_ = c.skippedSteps;
    resumedFrom_ = chosen;
  });
}

void Trainer::checkOnnxSource() {
  if (!root_)
    return;
  onnxSource_ = o_.onnx.empty() ? ctx_.modelPath() : o_.onnx;
  if (onnxSource_.empty())
    fail("--save-onnx: the program records no source model (manifest model_path; compiled "
         "from MLIR or by an older hpc-opt): pass --onnx MODEL.onnx");
  std::vector<uint8_t> model = onnxWithParams(ctx_, onnxSource_);
  memory_.transient(2 * model.size());
}

void Trainer::openOutputs() {
  mpi_.step([&] {
    if (!root_)
      return;
    if (!o_.metrics.empty())
      metrics_ = std::make_unique<MetricsFile>(o_.metrics, resuming());
    progress_ = std::make_unique<Progress>(isatty(fileno(stdout)) != 0, o_.logEvery, o_.steps,
                                           doneStep_ + 1,
                                           data_->tokensPerSample() ? "tokens" : "samples");
  });
}

void Trainer::printHeader() const {
  const TrainInfo &t = ctx_.train();
  printf("train: %s, steps %lld..%lld, batch %lld, optimizer %s, lr %s (base %g), plan %s\n",
         ctx_.model().empty() ? "(unnamed)" : ctx_.model().c_str(),
         static_cast<long long>(doneStep_ + 1), static_cast<long long>(o_.steps),
         static_cast<long long>(batch_), t.optimizer.c_str(), schedule_.describe().c_str(),
         schedule_.lr, plan_.planHash.c_str());
  printf("data: %s\n", data_->describe().c_str());
  if (eval_)
    printf("eval: %s (every %lld steps, %lld batch%s)\n", eval_->describe().c_str(),
           static_cast<long long>(o_.evalEvery), static_cast<long long>(o_.evalBatches),
           o_.evalBatches == 1 ? "" : "es");
  if (o_.verbose)
    printf("threads: %d\n", ctx_.backend().threads());
  if (!resumedFrom_.empty())
    printf("resumed from %s (step %lld, next sample %lld)%s\n", resumedFrom_.c_str(),
           static_cast<long long>(doneStep_), static_cast<long long>(baseSample_),
           o_.initWeights.empty() ? "" : "; --init-weights is not applied on a resume");
  fflush(stdout);
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

void Trainer::feedStepInputs(int64_t step, double lr) {
  const TrainInfo &t = ctx_.train();
  // GradScaler's semantics: a skipped step does not advance the
  // optimizer's count (AdamW's bias correction; dropout masks are keyed by
  // it too, so the step after a skip draws the skipped one's again).
  if (t.skipNonfinite)
    step -= skippedSteps_;
  float lrf = static_cast<float>(lr);
  memcpy(ctx_.inputData(static_cast<size_t>(t.lrInput)), &lrf, sizeof(lrf));
  memcpy(ctx_.inputData(static_cast<size_t>(t.stepInput)), &step, sizeof(step));
}

float Trainer::outputScalar(int output) const {
  return ctx_.tensor(ctx_.outputList()[output].tensor).as<float>()[0];
}

StepReport Trainer::trainStep(int64_t step) {
  const TrainInfo &t = ctx_.train();
  StepReport r;
  r.step = step;
  r.lr = schedule_.at(step);
  auto t0 = Clock::now();
  comm::CommStats before = mpi_.comm ? mpi_.comm->stats() : comm::CommStats();
  data_->fill(ctx_, firstSample(step));
  feedStepInputs(step, r.lr);
  runProgram(ctx_, mpi_);
  finishRun(ctx_, mpi_);
  r.stepMs = msSince(t0);
  if (mpi_.comm) {
    const comm::CommStats &after = mpi_.comm->stats();
    stepComm_.bytesSent += after.bytesSent - before.bytesSent;
    stepComm_.bytesInterNode += after.bytesInterNode - before.bytesInterNode;
    stepComm_.operations += after.operations - before.operations;
  }
  if (step == killStep_) {
    fflush(stdout);
    raise(SIGKILL);
  }
  r.loss = outputScalar(t.lossOutput);
  if (t.gradNormOutput >= 0) {
    r.hasGradNorm = true;
    r.gradNorm = outputScalar(t.gradNormOutput);
    // The norm is global, so every rank sees it alike and skipped alike.
    if (t.skipNonfinite && !std::isfinite(r.gradNorm)) {
      r.skipped = true;
      ++skippedSteps_;
      ++skippedThisRun_;
    }
  }
  r.tokensPerS = r.stepMs > 0 ? static_cast<double>(tokensPerStep()) / (r.stepMs / 1000.0) : 0;
  dumpOutputs(step);
  if (eval_ && step % o_.evalEvery == 0) {
    r.hasEval = true;
    r.evalLoss = evaluate(step);
  }
  trainMs_ += r.stepMs;
  ++stepsRun_;
  lastLoss_ = r.loss;
  return r;
}

double Trainer::evaluate(int64_t step) {
  size_t bytes = ctx_.stateBytes();
  if (bytes)
    memcpy(evalSnapshot_.data(), ctx_.stateData(), bytes);
  double sum = 0;
  for (int64_t b = 0; b < o_.evalBatches; ++b) {
    eval_->fill(ctx_, b * batch_);
    feedStepInputs(step, schedule_.at(step));
    runProgram(ctx_, mpi_);
    finishRun(ctx_, mpi_);
    sum += outputScalar(ctx_.train().lossOutput);
    // Every batch sees the state of the training step (and so does the
    // next training step).
    if (bytes)
      memcpy(ctx_.stateData(), evalSnapshot_.data(), bytes);
  }
  return sum / static_cast<double>(o_.evalBatches);
}

void Trainer::report(const StepReport &r, Clock::time_point loopStart) {
  mpi_.step([&] {
    if (!root_)
      return;
    if (metrics_)
      metrics_->step(r);
    if (r.skipped)
      progress_->message("step " + std::to_string(r.step) + ": update skipped (gradient norm " +
                         (std::isnan(r.gradNorm) ? "nan" : "inf") +
                         "); parameters and optimizer state kept");
    progress_->step(r, msSince(loopStart) / 1000.0);
  });
}

void Trainer::dumpOutputs(int64_t step) {
  if (std::find(o_.dumpSteps.begin(), o_.dumpSteps.end(), step) == o_.dumpSteps.end())
    return;
  mpi_.step([&] {
    if (!root_)
      return;
    std::string dir = o_.dumpDir + "/step-" + std::to_string(step);
    makeDirs(dir, "dump directory");
    std::vector<std::string> names = outputFileNames(ctx_);
    for (size_t k = 0; k < names.size(); ++k) {
      const Tensor &t = ctx_.tensor(ctx_.outputList()[k].tensor);
      writeNpy(dir + "/" + names[k] + ".npy", t.dtype, t.shape, t.data);
    }
  });
}

void Trainer::checkpoint(int64_t step) {
  if (!writer_ || !((o_.ckptEvery && step % o_.ckptEvery == 0) || step == o_.steps))
    return;
  memory_.transient(writer_->write(step, firstSample(step) + batch_, skippedSteps_));
  if (root_)
    progress_->message("checkpoint: " + o_.ckptDir + "/step-" + std::to_string(step));
}

//===----------------------------------------------------------------------===//
// The end
//===----------------------------------------------------------------------===//

void Trainer::finish(double wallS) {
  if (!o_.save.empty())
    mpi_.step([&] {
      if (root_)
        saveParams(ctx_, o_.save, plan_, o_.steps);
    });
  if (!o_.saveOnnx.empty())
    mpi_.step([&] {
      if (!root_)
        return;
      std::vector<uint8_t> model = onnxWithParams(ctx_, onnxSource_);
      memory_.transient(2 * model.size());
      writeAtomically(o_.saveOnnx, {{model.data(), model.size()}});
    });
  // The collectives' staging buffers live from their first use to the
  // end: counted on top of the peak (at most that much above the truth).
  uint64_t commBuffers = mpi_.comm ? mpi_.comm->bufferBytes() : 0;
  uint64_t peak = mpi_.maxOver(memory_.peak + commBuffers);
  commBuffers = mpi_.maxOver(commBuffers);
  uint64_t peakRss = mpi_.maxOver(peakRssBytes());
  // Every rank's communication per step (collective).
  std::vector<uint64_t> comm;
  if (mpi_.comm)
    comm = gatherCommPer(mpi_, stepComm_, static_cast<uint64_t>(stepsRun_));
  uint64_t acrossNodes = 0;
  for (size_t r = 0; 3 * r + 2 < comm.size(); ++r)
    acrossNodes += comm[3 * r + 2];
  uint64_t dataBytes = data_->heldBytes() + (eval_ ? eval_->heldBytes() : 0);
  // The compiler's plan plus what the kernels' setup run allocated on this
  // CPU (oneDNN scratchpad, reordered weights), known since the start.
  uint64_t kernelBytes = ctx_.scratchpadBytes() + ctx_.kernelStateBytes();
  uint64_t planned = compiledBytes(ctx_) + kernelBytes;
  double meanMs = stepsRun_ ? trainMs_ / static_cast<double>(stepsRun_) : 0;
  double tokensPerS = trainMs_ > 0 ? static_cast<double>(tokensPerStep() * stepsRun_) /
                                         (trainMs_ / 1000.0)
                                   : 0;
  mpi_.step([&] {
    if (!root_)
      return;
    if (metrics_) {
      JsonLine j;
      j.add("summary", std::string("true"))
          .add("steps", o_.steps)
          .add("first_step", doneStep_ + 1)
          .add("steps_run", stepsRun_)
          .add("skipped_steps", skippedThisRun_)
          .add("final_loss", jsonFloat(lastLoss_))
          .add("wall_s", jsonDouble(wallS))
          .add("mean_step_ms", jsonDouble(meanMs))
          .add("tokens_per_s", jsonDouble(tokensPerS))
          .add("planned_bytes_per_rank", planned)
          .add("peak_bytes_per_rank", peak)
          .add("peak_rss_bytes_per_rank", peakRss)
          .add("comm_buffer_bytes_per_rank", commBuffers)
          .add("state_bytes", ctx_.stateBytes())
          .add("arena_bytes", ctx_.arenaBytes())
          .add("weights_bytes", ctx_.weightsBytes())
          .add("weights_resident_bytes", ctx_.residentWeightsBytes())
          .add("kernel_bytes", kernelBytes)
          .add("input_bytes", inputBytes(ctx_))
          .add("data_bytes", dataBytes)
          .add("ranks", static_cast<int64_t>(mpi_.size))
          .add("plan_hash", "\"" + plan_.planHash + "\"");
      if (!comm.empty())
        j.add("bytes_sent_per_step", comm[0]).add("bytes_across_nodes_per_step", acrossNodes);
      metrics_->line(j.text());
    }
    printf("trained steps %lld..%lld in %.3f s (%.3f ms/step, %.1f %s/s); final loss %.9g\n",
           static_cast<long long>(doneStep_ + 1), static_cast<long long>(o_.steps), wallS, meanMs,
           tokensPerS, data_->tokensPerSample() ? "tokens" : "samples",
           static_cast<double>(lastLoss_));
    if (skippedThisRun_)
      printf("skipped updates: %lld (non-finite gradient norm)\n",
             static_cast<long long>(skippedThisRun_));
    printf("memory: peak %llu bytes per rank (planned %llu: state %llu, arena %llu, weights "
           "%llu, inputs %llu, kernels %llu; peak RSS %llu)\n",
           static_cast<unsigned long long>(peak), static_cast<unsigned long long>(planned),
           static_cast<unsigned long long>(ctx_.stateBytes()),
           static_cast<unsigned long long>(ctx_.arenaBytes()),
           static_cast<unsigned long long>(ctx_.residentWeightsBytes()),
           static_cast<unsigned long long>(inputBytes(ctx_)),
           static_cast<unsigned long long>(kernelBytes),
           static_cast<unsigned long long>(peakRss));
    if (o_.verbose && !comm.empty())
      printCommPer(ctx_, comm, "step");
    if (!o_.save.empty())
      printf("saved: %s\n", o_.save.c_str());
    if (!o_.saveOnnx.empty())
      printf("saved: %s (%s with the trained parameters)\n", o_.saveOnnx.c_str(),
             onnxSource_.c_str());
    fflush(stdout);
  });
}

} // namespace

int trainCommand(int argc, char **argv) {
  Context ctx(compiledProgram().manifest);
  if (!ctx.isTrainStep())
    fail("this program has no train step (its manifest has no \"train\"): compile the model "
         "with hpc-opt --train to train it");
  TrainOptions o = parseTrainOptions(argc, argv);
  MpiRun mpi;
  mpi.peerTimeout = o.peerTimeout;
  if (ctx.hasMesh())
    mpi.start(ctx);
  else if (launcherSize() > 1)
    fail("compiled for 1 rank (no mesh) but started with " + std::to_string(launcherSize()) +
         "; run it without mpirun, or compile it with --mesh");
  Trainer trainer(o, ctx, mpi);
  return trainer.run();
}

void printTrainInfo(const Context &ctx) {
  const TrainInfo &t = ctx.train();
  printf("memory plan: %llu bytes per rank (state %llu, arena %llu, weights %llu, inputs "
         "%llu; the kernels' own allocations come on top; the %llu bytes of weights that "
         "only initialize the state are released once they have)\n",
         static_cast<unsigned long long>(compiledBytes(ctx)),
         static_cast<unsigned long long>(ctx.stateBytes()),
         static_cast<unsigned long long>(ctx.arenaBytes()),
         static_cast<unsigned long long>(ctx.residentWeightsBytes()),
         static_cast<unsigned long long>(inputBytes(ctx)),
         static_cast<unsigned long long>(ctx.initOnlyWeightsBytes()));
  printf("state: %llu bytes, %zu tensors\n", static_cast<unsigned long long>(ctx.stateBytes()),
         ctx.stateList().size());
  for (const StateEntry &e : ctx.stateList()) {
    const Tensor &x = ctx.tensor(e.tensor);
    std::string init = e.init == StateInit::Weights
                           ? "weights at " + std::to_string(e.weightsOffset)
                           : std::string("zeros");
    printf("state  %s: %s %s %s (init %s)\n", e.name.c_str(), dtypeName(x.dtype).c_str(),
           shapeString(x.shape).c_str(), e.role.c_str(), init.c_str());
  }
  printf("train: loss %s%s, batch %lld%s\n", t.loss.c_str(),
         t.labels.empty() ? "" : (" (labels '" + t.labels + "')").c_str(),
         static_cast<long long>(t.batch),
         t.microBatches > 1 ? (" in " + std::to_string(t.microBatches) +
                               " micro-batches of " + std::to_string(t.batch / t.microBatches))
                                  .c_str()
                            : "");
  printf("optimizer: %s %s\n", t.optimizer.c_str(), t.optimizerJson.c_str());
  LrSchedule s;
  s.kind = t.scheduleKind;
  s.warmup = t.warmup;
  s.total = t.total;
  printf("lr schedule: %s\n", s.describe().c_str());
  printf("step inputs: lr '%s', step '%s'; outputs: loss '%s'%s\n", t.lrInputName.c_str(),
         t.stepInputName.c_str(), t.lossOutputName.c_str(),
         t.gradNormOutput >= 0 ? (", grad norm '" + t.gradNormOutputName + "'").c_str() : "");
}

} // namespace hpcrt::driver
