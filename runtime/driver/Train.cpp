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
#include "Faults.h"
#include "Files.h"
#include "Guard.h"
#include "Launch.h"
#include "Metrics.h"
#include "TrainOptions.h"
#include "../comm/PeerWait.h"
#include "../common/Json.h"
#include "../common/ProcFiles.h"
#include "../io/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include <sys/resource.h>
#include <unistd.h>

namespace hpcrt::driver {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// This rank's place among the ranks the batch is split over: the mesh
/// axes "dp" and "ep", dp major (none: one data rank). The compiler splits
/// a train step's inputs alike (dist-partition's splitBatchInputs).
DataRank dataRankOf(const Context &ctx, const MpiRun &mpi) {
  DataRank r;
  for (const char *axis : {"dp", "ep"})
    for (size_t a = 0; a < ctx.mesh().size(); ++a)
      if (ctx.mesh()[a].name == axis) {
        int64_t size = ctx.mesh()[a].size;
        r.index = r.index * size + (mpi.comm ? mpi.comm->coords()[a] : 0);
        r.size *= size;
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

/// The steady steps' time spread: the first tenth of the steps (at least
/// one, when there are four or more) warms caches and is left out.
struct Jitter {
  double medianMs = 0, p95Ms = 0, jitter = 0, cv = 0;
  size_t steps = 0;
};
Jitter stepJitter(std::vector<double> ms) {
  Jitter j;
  if (ms.size() >= 4)
    ms.erase(ms.begin(), ms.begin() + static_cast<long>(std::max<size_t>(1, ms.size() / 10)));
  j.steps = ms.size();
  if (ms.empty())
    return j;
  double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  double var = 0;
  for (double m : ms)
    var += (m - mean) * (m - mean);
  std::sort(ms.begin(), ms.end());
  auto rank = [&](double q) { // nearest rank
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(ms.size())));
    return ms[std::min(ms.size() - 1, k ? k - 1 : 0)];
  };
  j.medianMs = rank(0.5);
  j.p95Ms = rank(0.95);
  j.jitter = j.medianMs > 0 ? j.p95Ms / j.medianMs - 1 : 0;
  j.cv = mean > 0 && ms.size() > 1 ? std::sqrt(var / static_cast<double>(ms.size() - 1)) / mean : 0;
  return j;
}

std::string withoutTrailingSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

class Trainer {
public:
  Trainer(const TrainOptions &o, Context &ctx, MpiRun &mpi)
      : o_(o), ctx_(&ctx), mpi_(mpi), root_(mpi.rank == 0),
        batch_(ctx.train().batch) {
    plan_.planHash = planHash(compiledPlanText().c_str());
    plan_.model = ctx.model();
    plan_.worldSize = mpi.size;
    plan_.layout = planLayout(ctx);
    parameters_ = compiledParameterCount();
    host_ = hpc::proc::cpuName();
  }
  ~Trainer() { comm::setWaitHook(nullptr); } // the hook refers to this
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;
  int run();

private:
  const TrainOptions &o_;
  Context *ctx_; ///< the program running the steps (the conservative plan after a switch)
  MpiRun &mpi_;
  double traceStartUs_ = 0; ///< the trace's time 0: the first step's start
  Clock::time_point loopStart_;
  const bool root_;
  const int64_t batch_;
  CheckpointPlan plan_;
  int64_t parameters_ = 0; ///< the model's (metrics "parameters")
  std::string host_;       ///< this machine's CPU (metrics "host")
  LrSchedule schedule_;
  Faults faults_;
  Heartbeat heartbeat_;
  LossMonitor monitor_{o_.guard};
  RollbackCounter rollbacks_{o_.guard};
  /// The newest in-memory snapshot of the state (--snapshot-every).
  struct Snapshot {
    Buffer state;
    int64_t step = -1, skippedSteps = 0;
  } snapshot_;
  int64_t lastCheckpoint_ = -1; ///< the newest checkpoint's step (-1: none)
  int64_t rollbacksThisRun_ = 0, rolledBackSteps_ = 0;
  std::vector<double> stepMs_;
  /// Each step's exposed communication and pipeline bubble (ms), beside
  /// stepMs_ (hpcrt_ctx::RunProfile).
  std::vector<double> exposedCommMs_, bubbleMs_;
  double ckptSaveS_ = 0, loadS_ = 0;
  uint64_t ckptSaveBytes_ = 0, loadBytes_ = 0;
  int64_t ckptSaves_ = 0;
  ClipStats clip_; ///< --clip-norm=auto's statistic
  /// The conservative plan once the guard switched to it (ctx_ then points
  /// to it; it runs on the first program's state buffer).
  std::unique_ptr<Context> conservative_;
  ProgramRun program_ = nullptr; ///< null: the compiled program
  double lrScale_ = 1;           ///< the conservative plan's lr_scale
  std::unique_ptr<BatchLoader> data_, eval_;
  std::unique_ptr<CheckpointWriter> writer_;
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<Progress> progress_;
  MemoryAccount memory_;
  Buffer evalSnapshot_;
  int64_t attempt_ = 0;    ///< HPC_ATTEMPT (hpc-launch's restarts)
  int64_t doneStep_ = 0;   ///< the step the state is at (0, or the checkpoint's)
  /// Steps up to doneStep_ (then up to the current one) whose updates the
  /// program skipped (a non-finite gradient norm): the optimizer's step
  /// count is the run's less these.
  int64_t skippedSteps_ = 0;
  int64_t skippedThisRun_ = 0;
  int64_t baseSample_ = 0; ///< the data position after doneStep_
  std::string resumedFrom_;
  /// The layout a resumed checkpoint was resharded from ("" when its own).
  std::string resharded_;
  size_t reshardReset_ = 0; ///< error-feedback tensors a reshard started from zero
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
  void report(const StepReport &r);
  void injectFaults(int64_t step, bool afterProgram);
  void scaleParameters(float factor);
  /// The loss monitor's verdict on the step; true when the state was
  /// rolled back (the step is not checkpointed or snapshotted).
  bool guard(StepReport &r);
  void rollBack(StepReport &r, const std::string &why);
  void takeSnapshot(int64_t step);
  /// Runs the next steps on the conservative plan; returns what it changes.
  std::string switchToConservative(int64_t fromStep);
  /// Ends the run on every rank with one line (the guard's decisions).
  [[noreturn]] void stopRun(const std::string &message);
  void dumpOutputs(int64_t step);
  void checkpoint(int64_t step);
  void finish(double wallS);
  /// The measured step and its parts over the steps of this run from index
  /// `first` on (medians; the parts mean over the ranks; collective).
  struct MeasuredProfile {
    double stepS = 0, computeS = 0, exposedCommS = 0, bubbleS = 0;
    size_t steps = 0;
  };
  MeasuredProfile measureProfile(size_t first);
  /// --profile-every K: the profile of the last K steps as a metrics line.
  void profileLine(int64_t step);
};

int Trainer::run() {
  setup();
  if (doneStep_ >= o_.steps) {
    if (root_)
      printf("train: nothing to do: the state is at step %lld, --steps is %lld\n",
             static_cast<long long>(doneStep_), static_cast<long long>(o_.steps));
    return 0;
  }
  std::string conservative;
  if (o_.conservativePlan) {
    if (!compiledProgram().conservativeRun)
      stopRun("--conservative-plan: this program has no conservative plan (compiled with "
              "--no-conservative-plan, or pipeline stages)");
    conservative = switchToConservative(doneStep_ + 1);
  }
  if (root_)
    printHeader();
  if (root_ && !conservative.empty()) {
    printf("plan: %s (--conservative-plan)\n", conservative.c_str());
    fflush(stdout);
  }
  if (root_ && !resharded_.empty() && metrics_) {
    GuardEvent e{"reshard", "from " + resharded_ + " to " + plan_.layout};
    e.toStep = doneStep_;
    metrics_->event(doneStep_, e);
  }
  if (root_ && attempt_ > 0) {
    GuardEvent e{"restart", restartReason().empty() ? "restarted" : restartReason()};
    e.toStep = doneStep_;
    if (metrics_)
      metrics_->event(doneStep_, e);
    printf("restart: attempt %lld, at step %lld%s%s\n", static_cast<long long>(attempt_),
           static_cast<long long>(doneStep_), restartReason().empty() ? "" : " after: ",
           restartReason().c_str());
    fflush(stdout);
  }
  heartbeat_.ready(doneStep_, loadS_);
  if (heartbeat_.enabled())
    comm::setWaitHook([this] { heartbeat_.alive(); });
  if (o_.guard.snapshotEvery)
    takeSnapshot(doneStep_);
  loopStart_ = Clock::now();
  traceStartUs_ = ctx_->nowUs();
  for (int64_t s = doneStep_ + 1; s <= o_.steps; ++s) {
    StepReport r = trainStep(s);
    bool rolledBack = guard(r);
    report(r);
    if (!rolledBack) {
      if (o_.guard.snapshotEvery && s % o_.guard.snapshotEvery == 0)
        takeSnapshot(s);
      checkpoint(s);
    }
    if (o_.profileEvery && s % o_.profileEvery == 0)
      profileLine(s);
    heartbeat_.step(s);
  }
  heartbeat_.done(o_.steps);
  if (root_)
    progress_->finish();
  finish(msSince(loopStart_) / 1000.0);
  if (!o_.trace.empty())
    writeTrace(*ctx_, mpi_, o_.trace, traceStartUs_, o_.verbose);
  return 0;
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

void Trainer::setup() {
  mpi_.step([&] {
    faults_ = Faults::fromEnvironment();
    attempt_ = attemptFromEnvironment();
    if (faults_.lists(FaultKind::NanGrad) && ctx_->train().lossScaleInput < 0)
      fail("HPC_FAULT: nan-grad needs a program whose backward starts from the input "
           "hpc.loss_scale (manifest train.loss_scale_input): compile it again");
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
      writer_ = std::make_unique<CheckpointWriter>(*ctx_, mpi_, o_.ckptDir, o_.ckptKeep, plan_);
    }
  });
  if (resuming())
    resume();
  else if (!o_.initWeights.empty())
    mpi_.step([&] { memory_.transient(initParams(*ctx_, o_.initWeights)); });
  if (!o_.saveOnnx.empty())
    mpi_.step([&] { checkOnnxSource(); });
  openOutputs();
}

void Trainer::setupProgram() {
  uint64_t loading = loadWeights(*ctx_, o_.weights, o_.verbose && root_);
  int threads = static_cast<int>(o_.threads);
  if (threads == 0 && mpi_.active && !getenv("OMP_NUM_THREADS"))
    threads = mpi_.threadsPerRank();
  if (threads > 0)
    ctx_->backend().setThreads(threads);
  ctx_->prepare();
  setupKernels(*ctx_);
  ctx_->setTracing(!o_.trace.empty());
  memory_.hold(ctx_->residentBytes());
  memory_.transient(loading);
}

void Trainer::setupData() {
  DataRank rank = dataRankOf(*ctx_, mpi_);
  data_ = std::make_unique<BatchLoader>(*ctx_, o_.data, rank);
  memory_.hold(data_->heldBytes());
  if (o_.eval.empty())
    return;
  eval_ = std::make_unique<BatchLoader>(*ctx_, o_.eval, rank);
  memory_.hold(eval_->heldBytes());
  evalSnapshot_ = Buffer(ctx_->stateBytes());
  memory_.hold(ctx_->stateBytes());
}

void Trainer::takeSnapshot(int64_t step) {
  size_t bytes = ctx_->stateBytes();
  if (snapshot_.state.size() != bytes) {
    snapshot_.state = Buffer(bytes);
    memory_.hold(bytes);
  }
  if (bytes)
    memcpy(snapshot_.state.data(), ctx_->stateData(), bytes);
  snapshot_.step = step;
  snapshot_.skippedSteps = skippedSteps_;
}

void Trainer::setupSchedule() {
  const TrainInfo &t = ctx_->train();
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
  ReshardReport r;
  mpi_.step([&] {
    auto t0 = Clock::now();
    CheckpointInfo c = readCheckpoint(chosen, plan_, false);
    uint64_t bytes = 0;
    if (c.reshard) {
      r = reshardState(*ctx_, c);
      bytes = r.copiedBytes;
      resharded_ = c.layout.empty() ? "another plan" : c.layout;
      reshardReset_ = r.reset;
    } else {
      bytes = loadShard(*ctx_, c, plan_, mpi_.rank);
    }
    memory_.transient(bytes);
    loadS_ = msSince(t0) / 1000.0;
    loadBytes_ = bytes;
    lastCheckpoint_ = c.step;
    doneStep_ = c.step;
    baseSample_ = c.nextSample;
    skippedSteps_ = c.skippedSteps;
    clip_ = c.clip;
    resumedFrom_ = chosen;
  });
  if (resharded_.empty())
    return;
  // Every tensor of the checkpoint must have gone somewhere (pipeline
  // stages each read their own): a leftover means another model or
  // optimizer, whose state this run would silently drop.
  std::vector<uint64_t> used = mpi_.allGather(r.used);
  mpi_.step([&] {
    size_t count = 0;
    std::string first = unusedStateTensor(r.names, used, count);
    if (count)
      fail(chosen + ": the checkpoint's state tensor '" + first + "'" +
           (count > 1 ? " (and " + std::to_string(count - 1) + " more)" : "") +
           " is not in this program: a checkpoint of another model or optimizer cannot be "
           "resharded to it");
  });
}

void Trainer::checkOnnxSource() {
  if (!root_)
    return;
  onnxSource_ = o_.onnx.empty() ? ctx_->modelPath() : o_.onnx;
  if (onnxSource_.empty())
    fail("--save-onnx: the program records no source model (manifest model_path; compiled "
         "from MLIR or by an older hpc-opt): pass --onnx MODEL.onnx");
  // Split parameters (tensor parallelism, ZeRO-3) are written whole: their
  // whole shapes are what the source model must have.
  std::vector<uint8_t> model =
      onnxWithParams(*ctx_, onnxSource_, wholeSplitParams(*ctx_, nullptr, /*shapesOnly=*/true));
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
  const TrainInfo &t = ctx_->train();
  printf("train: %s, steps %lld..%lld, batch %lld, optimizer %s, lr %s (base %g), plan %s\n",
         ctx_->model().empty() ? "(unnamed)" : ctx_->model().c_str(),
         static_cast<long long>(doneStep_ + 1), static_cast<long long>(o_.steps),
         static_cast<long long>(batch_), t.optimizer.c_str(), schedule_.describe().c_str(),
         schedule_.lr, plan_.planHash.c_str());
  printf("data: %s\n", data_->describe().c_str());
  if (eval_)
    printf("eval: %s (every %lld steps, %lld batch%s)\n", eval_->describe().c_str(),
           static_cast<long long>(o_.evalEvery), static_cast<long long>(o_.evalBatches),
           o_.evalBatches == 1 ? "" : "es");
  if (o_.verbose)
    printf("threads: %d\n", ctx_->backend().threads());
  if (!resumedFrom_.empty())
    printf("resumed from %s (step %lld, next sample %lld)%s\n", resumedFrom_.c_str(),
           static_cast<long long>(doneStep_), static_cast<long long>(baseSample_),
           o_.initWeights.empty() ? "" : "; --init-weights is not applied on a resume");
  if (!resharded_.empty())
    printf("resharded: the checkpoint's state split as %s, this program's as %s%s\n",
           resharded_.c_str(), plan_.layout.c_str(),
           reshardReset_ ? (" (" + std::to_string(reshardReset_) + " error-feedback tensor" +
                            (reshardReset_ == 1 ? " starts" : "s start") + " from zero)")
                               .c_str()
                         : "");
  fflush(stdout);
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

void Trainer::feedStepInputs(int64_t step, double lr) {
  const TrainInfo &t = ctx_->train();
  // GradScaler's semantics: a skipped step does not advance the
  // optimizer's count (AdamW's bias correction; dropout masks are keyed by
  // it too, so the step after a skip draws the skipped one's again).
  if (t.skipNonfinite)
    step -= skippedSteps_;
  float lrf = static_cast<float>(lr);
  memcpy(ctx_->inputData(static_cast<size_t>(t.lrInput)), &lrf, sizeof(lrf));
  memcpy(ctx_->inputData(static_cast<size_t>(t.stepInput)), &step, sizeof(step));
  if (t.lossScaleInput >= 0) {
    float one = 1.0f;
    memcpy(ctx_->inputData(static_cast<size_t>(t.lossScaleInput)), &one, sizeof(one));
  }
  if (t.clipNormInput >= 0) {
    float maxNorm = static_cast<float>(t.clipNormAuto ? clip_.threshold() : t.clipNorm);
    memcpy(ctx_->inputData(static_cast<size_t>(t.clipNormInput)), &maxNorm, sizeof(maxNorm));
  }
}

void Trainer::injectFaults(int64_t step, bool afterProgram) {
  if (!faults_.any())
    return;
  const TrainInfo &t = ctx_->train();
  if (!afterProgram) {
    // The backward starts from a NaN: every gradient is NaN, the loss not.
    if (faults_.fires(FaultKind::NanGrad, step)) {
      float nan = NAN;
      memcpy(ctx_->inputData(static_cast<size_t>(t.lossScaleInput)), &nan, sizeof(nan));
    }
    if (faults_.fires(FaultKind::LossSpike, step))
      scaleParameters(-4.0f);
    return;
  }
  if (faults_.fires(FaultKind::Kill, step) || faults_.fires(FaultKind::KillRank, step, mpi_.rank) ||
      faults_.fires(FaultKind::KillNode, step, mpi_.rank, mpi_.node))
    Faults::killSelf();
  if (faults_.fires(FaultKind::HangRank, step, mpi_.rank))
    Faults::hang();
}

void Trainer::scaleParameters(float factor) {
  for (const StateEntry &e : ctx_->stateList()) {
    Tensor &x = ctx_->tensor(e.tensor);
    if (e.role != "param" || x.dtype != HPCRT_F32)
      continue;
    float *p = static_cast<float *>(x.data);
    for (int64_t i = 0, n = x.numel; i < n; ++i)
      p[i] *= factor;
  }
}

void Trainer::stopRun(const std::string &message) {
  // Every rank decides alike; rank 0 prints, every rank exits 1.
  mpi_.step([&] { fail(message); });
  fail(message);
}

bool Trainer::guard(StepReport &r) {
  // A skipped update left the state as it was: nothing to undo.
  if (r.skipped)
    return false;
  std::string why = monitor_.diverges(r.loss);
  if (why.empty()) {
    monitor_.accept(r.loss);
    return false;
  }
  switch (o_.guard.onDivergence) {
  case OnDivergence::Ignore:
    r.events.push_back({"divergence", why + "; ignored (--on-divergence=ignore)"});
    return false;
  case OnDivergence::Stop:
    r.events.push_back({"stop", why + " (--on-divergence=stop)"});
    report(r);
    stopRun("step " + std::to_string(r.step) + ": " + why +
            "; stopped (--on-divergence=stop; --on-divergence=rollback restores the newest good "
         "state)");
  case OnDivergence::Rollback:
    rollBack(r, why);
    return true;
  }
  return false;
}

void Trainer::rollBack(StepReport &r, const std::string &why) {
  // The newest good state: the snapshot or the newest checkpoint, whichever
  // is newer (the snapshot, a copy in memory, when they tie).
  int64_t from = std::max(snapshot_.step, lastCheckpoint_);
  if (from < 0)
    stopRun("step " + std::to_string(r.step) + ": " + why +
            "; nothing to roll back to (no --snapshot-every and no checkpoint yet)");
  if (snapshot_.step == from) {
    if (ctx_->stateBytes())
      memcpy(ctx_->stateData(), snapshot_.state.data(), ctx_->stateBytes());
    skippedSteps_ = snapshot_.skippedSteps;
  } else {
    mpi_.step([&] {
      CheckpointInfo c = readCheckpoint(o_.ckptDir + "/step-" + std::to_string(from), plan_, false);
      memory_.transient(loadState(*ctx_, c, plan_, mpi_.rank));
      skippedSteps_ = c.skippedSteps;
    });
  }
  // PaLM's rollback-and-skip: the state goes back to step `from`, the
  // batches of steps from+1..r.step are skipped (the data position goes
  // on), and the optimizer's count goes on from `from`'s.
  int64_t skipped = r.step - from;
  skippedSteps_ += skipped;
  rolledBackSteps_ += skipped;
  ++rollbacksThisRun_;
  r.rolledBack = true;
  GuardEvent e{"rollback", why + "; rolled back to step " + std::to_string(from) +
                               (snapshot_.step == from ? " (snapshot)" : " (checkpoint)") +
                               ", skipping " + std::to_string(skipped) + " batch" +
                               (skipped == 1 ? "" : "es")};
  e.toStep = from;
  e.skippedBatches = skipped;
  r.events.push_back(e);
  if (!rollbacks_.add(r.step))
    return;
  std::string many = std::to_string(o_.guard.maxRollbacks) + " rollbacks within " +
                     std::to_string(o_.guard.rollbackWindow) +
                     " steps (--max-rollbacks, --rollback-window)";
  if (conservative_ || !compiledProgram().conservativeRun) {
    report(r);
    stopRun("step " + std::to_string(r.step) + ": " + many +
         (conservative_ ? " on the conservative plan; stopped"
                        : ", and this program has no conservative plan to switch to (compiled "
                          "with --no-conservative-plan, or pipeline stages); stopped"));
  }
  r.events.push_back({"plan-switch", many + "; " + switchToConservative(r.step + 1)});
}

std::string Trainer::switchToConservative(int64_t fromStep) {
  const CompiledProgram &program = compiledProgram();
  mpi_.step([&] {
    auto c = std::make_unique<Context>(program.conservativeManifest);
    if (mpi_.comm) {
      c->setComm(mpi_.comm.get());
      c->setCommQueue(mpi_.queue.get());
    }
    memory_.transient(loadWeights(*c, o_.weights, false));
    c->shareState(*ctx_);
    c->prepare();
    setupKernels(*c, program.conservativeRun);
    c->setTracing(!o_.trace.empty());
    memory_.hold(c->arenaBytes());
    conservative_ = std::move(c);
  });
  ctx_ = conservative_.get();
  program_ = program.conservativeRun;
  lrScale_ = ctx_->train().conservativeLrScale;
  rollbacks_.clear();
  const TrainInfo &t = ctx_->train();
  std::string compress = t.conservativeCompress == "none"
                             ? "no compression"
                             : "compression " + t.conservativeCompress + " kept";
  char settings[200];
  snprintf(settings, sizeof settings,
           "the conservative plan from step %lld: blocking collectives, %s, clip-norm %g, "
           "lr x %g",
           static_cast<long long>(fromStep), compress.c_str(), t.clipNorm, lrScale_);
  return settings;
}

float Trainer::outputScalar(int output) const {
  return ctx_->tensor(ctx_->outputList()[output].tensor).as<float>()[0];
}

StepReport Trainer::trainStep(int64_t step) {
  const TrainInfo &t = ctx_->train();
  StepReport r;
  r.step = step;
  r.lr = schedule_.at(step) * lrScale_;
  // The step's profile only (an evaluation run in between adds to it).
  ctx_->setProfiling(true);
  ctx_->takeProfile();
  auto t0 = Clock::now();
  comm::CommStats before = mpi_.comm ? mpi_.comm->stats() : comm::CommStats();
  data_->fill(*ctx_, firstSample(step));
  feedStepInputs(step, r.lr);
  injectFaults(step, false);
  runProgram(*ctx_, mpi_, program_);
  finishRun(*ctx_, mpi_);
  r.stepMs = msSince(t0);
  Context::RunProfile profile = ctx_->takeProfile();
  exposedCommMs_.push_back(profile.exposedCommUs / 1000.0);
  bubbleMs_.push_back(profile.bubbleUs / 1000.0);
  if (mpi_.comm) {
    const comm::CommStats &after = mpi_.comm->stats();
    stepComm_.bytesSent += after.bytesSent - before.bytesSent;
    stepComm_.bytesInterNode += after.bytesInterNode - before.bytesInterNode;
    stepComm_.operations += after.operations - before.operations;
  }
  injectFaults(step, true);
  r.loss = outputScalar(t.lossOutput);
  if (t.gradNormOutput >= 0) {
    r.hasGradNorm = true;
    r.gradNorm = outputScalar(t.gradNormOutput);
    // The norm is global, so every rank sees it alike and skipped alike.
    if (t.skipNonfinite && !std::isfinite(r.gradNorm)) {
      r.skipped = true;
      r.events.push_back({"skip", "non-finite gradient norm"});
      ++skippedSteps_;
      ++skippedThisRun_;
    } else if (t.clipNormAuto) {
      clip_.observe(r.gradNorm);
    }
  }
  r.tokensPerS = r.stepMs > 0 ? static_cast<double>(tokensPerStep()) / (r.stepMs / 1000.0) : 0;
  for (const TrainInfo::MoELoad &m : t.moeLoads) {
    const Tensor &load = ctx_->tensor(ctx_->outputList()[m.output].tensor);
    const int64_t *n = load.as<int64_t>();
    r.moeLoad.emplace_back(n, n + load.numel);
    r.moeCapacity.push_back(m.capacity);
  }
  if (t.moeBalanceLossOutput >= 0) {
    r.hasBalanceLoss = true;
    r.balanceLoss = outputScalar(t.moeBalanceLossOutput);
  }
  dumpOutputs(step);
  if (eval_ && step % o_.evalEvery == 0) {
    r.hasEval = true;
    r.evalLoss = evaluate(step);
  }
  trainMs_ += r.stepMs;
  stepMs_.push_back(r.stepMs);
  ++stepsRun_;
  lastLoss_ = r.loss;
  return r;
}

double Trainer::evaluate(int64_t step) {
  size_t bytes = ctx_->stateBytes();
  if (bytes)
    memcpy(evalSnapshot_.data(), ctx_->stateData(), bytes);
  double sum = 0;
  for (int64_t b = 0; b < o_.evalBatches; ++b) {
    eval_->fill(*ctx_, b * batch_);
    feedStepInputs(step, schedule_.at(step) * lrScale_);
    runProgram(*ctx_, mpi_, program_);
    finishRun(*ctx_, mpi_);
    sum += outputScalar(ctx_->train().lossOutput);
    // Every batch sees the state of the training step (and so does the
    // next training step).
    if (bytes)
      memcpy(ctx_->stateData(), evalSnapshot_.data(), bytes);
  }
  return sum / static_cast<double>(o_.evalBatches);
}

void Trainer::report(const StepReport &r) {
  mpi_.step([&] {
    if (!root_)
      return;
    if (metrics_)
      metrics_->step(r);
    for (const GuardEvent &e : r.events)
      progress_->message(
          e.name == "skip"
              ? "step " + std::to_string(r.step) + ": update skipped (gradient norm " +
                    (std::isnan(r.gradNorm) ? "nan" : "inf") +
                    "); parameters and optimizer state kept"
              : "step " + std::to_string(r.step) + ": " + e.name + ": " + e.reason);
    progress_->step(r, msSince(loopStart_) / 1000.0);
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
    std::vector<std::string> names = outputFileNames(*ctx_);
    for (size_t k = 0; k < names.size(); ++k) {
      const Tensor &t = ctx_->tensor(ctx_->outputList()[k].tensor);
      writeNpy(dir + "/" + names[k] + ".npy", t.dtype, t.shape, t.data);
    }
  });
}

void Trainer::checkpoint(int64_t step) {
  if (!writer_ || !((o_.ckptEvery && step % o_.ckptEvery == 0) || step == o_.steps))
    return;
  heartbeat_.checkpoint(step);
  auto t0 = Clock::now();
  uint64_t bytes = writer_->write(step, firstSample(step) + batch_, skippedSteps_, clip_,
                                  faults_.fires(FaultKind::CrashInCheckpoint, step));
  memory_.transient(bytes);
  ckptSaveS_ += msSince(t0) / 1000.0;
  ckptSaveBytes_ += bytes;
  ++ckptSaves_;
  heartbeat_.saved(ckptSaves_, ckptSaveS_, ckptSaveBytes_);
  lastCheckpoint_ = step;
  if (root_)
    progress_->message("checkpoint: " + o_.ckptDir + "/step-" + std::to_string(step));
}

//===----------------------------------------------------------------------===//
// The end
//===----------------------------------------------------------------------===//

Trainer::MeasuredProfile Trainer::measureProfile(size_t first) {
  auto from = [&](const std::vector<double> &v) {
    return std::vector<double>(v.begin() + static_cast<long>(std::min(first, v.size())), v.end());
  };
  std::vector<uint64_t> parts = mpi_.allGather(
      {static_cast<uint64_t>(1000.0 * stepJitter(from(exposedCommMs_)).medianMs),
       static_cast<uint64_t>(1000.0 * stepJitter(from(bubbleMs_)).medianMs)});
  MeasuredProfile p;
  for (size_t r = 0; 2 * r + 1 < parts.size(); ++r) {
    p.exposedCommS += static_cast<double>(parts[2 * r]) / 1e6;
    p.bubbleS += static_cast<double>(parts[2 * r + 1]) / 1e6;
  }
  p.exposedCommS /= static_cast<double>(mpi_.size);
  p.bubbleS /= static_cast<double>(mpi_.size);
  Jitter steps = stepJitter(from(stepMs_));
  p.steps = steps.steps;
  p.stepS = steps.medianMs / 1000.0;
  p.computeS = std::max(0.0, p.stepS - p.exposedCommS - p.bubbleS);
  return p;
}

void Trainer::profileLine(int64_t step) {
  // The steps since the last profile line (collective: every rank gets here
  // at the same step).
  size_t window = static_cast<size_t>(o_.profileEvery);
  MeasuredProfile p = measureProfile(stepMs_.size() > window ? stepMs_.size() - window : 0);
  mpi_.step([&] {
    if (!root_ || !metrics_)
      return;
    JsonLine j;
    j.add("profile", std::string("true"))
        .add("step", step)
        .add("steps", static_cast<int64_t>(p.steps))
        .add("step_time_s", jsonDouble(p.stepS))
        .add("compute_s", jsonDouble(p.computeS))
        .add("exposed_comm_s", jsonDouble(p.exposedCommS))
        .add("bubble_s", jsonDouble(p.bubbleS))
        .add("ranks", static_cast<int64_t>(mpi_.size))
        .add("layout", hpc::json::quoted(plan_.layout))
        .add("plan_hash", "\"" + plan_.planHash + "\"")
        .add("parameters", parameters_)
        .add("host", hpc::json::quoted(host_));
    if (!ctx_->prediction().empty())
      j.add("predicted", ctx_->prediction());
    metrics_->line(j.text());
  });
}

void Trainer::finish(double wallS) {
  // The parameters a plan splits over ranks, gathered whole (every rank
  // takes part) for the files of whole parameters rank 0 writes.
  WholeParams whole;
  if (!o_.save.empty() || !o_.saveOnnx.empty()) {
    whole = wholeSplitParams(*ctx_, mpi_.comm.get());
    uint64_t bytes = 0;
    for (const auto &[name, w] : whole)
      bytes += w.data.size();
    memory_.transient(bytes);
  }
  if (!o_.save.empty())
    mpi_.step([&] {
      if (root_)
        saveParams(*ctx_, o_.save, plan_, o_.steps, whole);
    });
  if (!o_.saveOnnx.empty())
    mpi_.step([&] {
      if (!root_)
        return;
      std::vector<uint8_t> model = onnxWithParams(*ctx_, onnxSource_, whole);
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
  uint64_t kernelBytes = ctx_->scratchpadBytes() + ctx_->kernelStateBytes();
  uint64_t planned = compiledBytes(*ctx_) + kernelBytes;
  double meanMs = stepsRun_ ? trainMs_ / static_cast<double>(stepsRun_) : 0;
  Jitter jitter = stepJitter(stepMs_);
  // The whole checkpoint's bytes (every rank's shard) per second of rank
  // 0's wall time: the ranks write at once.
  uint64_t ckptBytes = 0, loadBytes = 0;
  std::vector<uint64_t> perRank = mpi_.allGather({ckptSaveBytes_, loadBytes_});
  for (size_t r = 0; 2 * r + 1 < perRank.size(); ++r) {
    ckptBytes += perRank[2 * r];
    loadBytes += perRank[2 * r + 1];
  }
  // The measured profile, under the names of hpc-opt's prediction
  // (plan.prediction in --report): the steady steps' median step time and
  // the medians of its parts, mean over the ranks (a pipeline's stages wait
  // unlike each other); compute is what the waits leave.
  MeasuredProfile measured = measureProfile(0);
  double stepS = measured.stepS, computeS = measured.computeS;
  double exposedCommS = measured.exposedCommS, bubbleS = measured.bubbleS;
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
          .add("rollbacks", rollbacksThisRun_)
          .add("rolled_back_steps", rolledBackSteps_)
          .add("final_loss", jsonFloat(lastLoss_))
          .add("wall_s", jsonDouble(wallS))
          .add("mean_step_ms", jsonDouble(meanMs))
          .add("tokens_per_s", jsonDouble(tokensPerS))
          .add("median_step_ms", jsonDouble(jitter.medianMs))
          .add("p95_step_ms", jsonDouble(jitter.p95Ms))
          .add("step_time_jitter", jsonDouble(jitter.jitter))
          .add("step_time_cv", jsonDouble(jitter.cv))
          .add("step_time_s", jsonDouble(stepS))
          .add("compute_s", jsonDouble(computeS))
          .add("exposed_comm_s", jsonDouble(exposedCommS))
          .add("bubble_s", jsonDouble(bubbleS))
          .add("checkpoints_written", ckptSaves_)
          .add("checkpoint_save_s", jsonDouble(ckptSaveS_))
          .add("checkpoint_save_mb_per_s",
               jsonDouble(ckptSaveS_ > 0 ? static_cast<double>(ckptBytes) / 1e6 / ckptSaveS_ : 0))
          .add("checkpoint_load_s", jsonDouble(loadS_))
          .add("checkpoint_load_mb_per_s",
               jsonDouble(loadS_ > 0 ? static_cast<double>(loadBytes) / 1e6 / loadS_ : 0))
          .add("planned_bytes_per_rank", planned)
          .add("peak_bytes_per_rank", peak)
          .add("peak_rss_bytes_per_rank", peakRss)
          .add("comm_buffer_bytes_per_rank", commBuffers)
          .add("state_bytes", ctx_->stateBytes())
          .add("arena_bytes", ctx_->arenaBytes())
          .add("weights_bytes", ctx_->weightsBytes())
          .add("weights_resident_bytes", ctx_->residentWeightsBytes())
          .add("kernel_bytes", kernelBytes)
          .add("input_bytes", inputBytes(*ctx_))
          .add("data_bytes", dataBytes)
          .add("ranks", static_cast<int64_t>(mpi_.size))
          .add("plan_hash", "\"" + plan_.planHash + "\"")
          .add("parameters", parameters_)
          .add("host", hpc::json::quoted(host_));
      if (!ctx_->prediction().empty())
        j.add("predicted", ctx_->prediction());
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
    if (rollbacksThisRun_)
      printf("rollbacks: %lld (%lld batches skipped)\n", static_cast<long long>(rollbacksThisRun_),
             static_cast<long long>(rolledBackSteps_));
    if (jitter.steps > 1)
      printf("timing: median %.3f ms a step, p95 %.3f ms (jitter %.1f%%, cv %.1f%% over %zu "
             "steady steps)\n",
             jitter.medianMs, jitter.p95Ms, 100 * jitter.jitter, 100 * jitter.cv, jitter.steps);
    if (jitter.steps > 1)
      printf("profile: median step %.3f ms = compute %.3f + exposed communication %.3f + "
             "bubble %.3f ms (mean over ranks)\n",
             1000 * stepS, 1000 * computeS, 1000 * exposedCommS, 1000 * bubbleS);
    if (ckptSaves_)
      printf("checkpoints: %lld written in %.3f s (%.1f MB/s)%s\n",
             static_cast<long long>(ckptSaves_), ckptSaveS_,
             ckptSaveS_ > 0 ? static_cast<double>(ckptBytes) / 1e6 / ckptSaveS_ : 0.0,
             loadS_ > 0 ? (", loaded in " + std::to_string(loadS_) + " s").c_str() : "");
    printf("memory: peak %llu bytes per rank (planned %llu: state %llu, arena %llu, weights "
           "%llu, inputs %llu, kernels %llu; peak RSS %llu)\n",
           static_cast<unsigned long long>(peak), static_cast<unsigned long long>(planned),
           static_cast<unsigned long long>(ctx_->stateBytes()),
           static_cast<unsigned long long>(ctx_->arenaBytes()),
           static_cast<unsigned long long>(ctx_->residentWeightsBytes()),
           static_cast<unsigned long long>(inputBytes(*ctx_)),
           static_cast<unsigned long long>(kernelBytes),
           static_cast<unsigned long long>(peakRss));
    if (o_.verbose && !comm.empty())
      printCommPer(*ctx_, comm, "step");
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
    // A split tensor (tensor parallelism's pieces, ZeRO's rows): the whole
    // shape and the axes that split it.
    std::vector<int64_t> whole = x.shape;
    std::string axes;
    for (size_t d = 0; d < e.split.size(); ++d)
      for (int64_t a : e.split[d]) {
        whole[d] *= ctx.mesh()[a].size;
        axes += (axes.empty() ? "" : ", ") + ("dim " + std::to_string(d) + " over ") +
                ctx.mesh()[a].name;
      }
    std::string piece = axes.empty() ? "" : ", a piece of " + shapeString(whole) + ": " + axes;
    printf("state  %s: %s %s %s (init %s%s)\n", e.name.c_str(), dtypeName(x.dtype).c_str(),
           shapeString(x.shape).c_str(), e.role.c_str(), init.c_str(), piece.c_str());
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
