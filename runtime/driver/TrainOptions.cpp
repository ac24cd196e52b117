//===- TrainOptions.cpp - the flags of `./model train` --------------------===//
//
// One pass over the flags, then the checks between them: --steps is
// required; --ckpt-every, --ckpt-keep and --resume need --ckpt-dir; --resume
// and --resume-from exclude each other; --dump-outputs and --dump-steps come
// together; --onnx needs --save-onnx; evaluation needs both its data and
// --eval-every.
//
//===----------------------------------------------------------------------===//

#include "TrainOptions.h"

#include "Args.h"
#include "Process.h"


namespace hpcrt::driver {

namespace {
void setOnce(std::string &slot, const std::string &flag, const std::string &v) {
  if (!slot.empty())
    fail(flag + " given twice");
  slot = requirePath(flag, v);
}

void checkCombinations(const TrainOptions &o, bool haveSteps, bool haveKeep) {
  if (!haveSteps)
    fail("missing --steps N");
  if (o.data.empty())
    fail("missing --data NAME=FILE.npy (or --tokens FILE)");
  if (o.ckptDir.empty()) {
    if (o.ckptEvery)
      fail("--ckpt-every needs --ckpt-dir DIR");
    if (haveKeep)
      fail("--ckpt-keep needs --ckpt-dir DIR");
    if (o.resume)
      fail("--resume needs --ckpt-dir DIR (the checkpoints to continue)");
  }
  if (o.resume && !o.resumeFrom.empty())
    fail("--resume and --resume-from exclude each other");
  if (!o.onnx.empty() && o.saveOnnx.empty())
    fail("--onnx MODEL.onnx (the model --save-onnx rewrites) needs --save-onnx FILE.onnx");
  if (o.dumpDir.empty() != o.dumpSteps.empty())
    fail("--dump-outputs DIR and --dump-steps S,... come together");
  if (!o.eval.empty() && !o.eval.files.empty() && !o.eval.tokens.empty())
    fail("--eval-data and --eval-tokens exclude each other");
  if (o.profileEvery && o.metrics.empty())
    fail("--profile-every needs --metrics FILE.jsonl (its profile lines go there)");
  if (o.eval.empty() && o.evalEvery)
    fail("--eval-every needs --eval-data NAME=FILE or --eval-tokens FILE");
  if (!o.eval.empty() && !o.evalEvery)
    fail("evaluation data needs --eval-every K");
}
} // namespace

TrainOptions parseTrainOptions(int argc, char **argv) {
  TrainOptions o;
  o.eval.filesFlag = "--eval-data";
  o.eval.tokensFlag = "--eval-tokens";
  bool haveSteps = false, haveKeep = false;
  ArgCursor a(argc, argv, 2);
  while (a.next()) {
    const std::string &f = a.flag();
    if (f == "--data") {
      o.data.files.push_back(parseNameValue(f, a.value()));
    } else if (f == "--tokens") {
      setOnce(o.data.tokens, f, a.value());
    } else if (f == "--eval-data") {
      o.eval.files.push_back(parseNameValue(f, a.value()));
    } else if (f == "--eval-tokens") {
      setOnce(o.eval.tokens, f, a.value());
    } else if (f == "--steps") {
      o.steps = parsePositive(f, a.value());
      haveSteps = true;
    } else if (f == "--metrics") {
      setOnce(o.metrics, f, a.value());
    } else if (f == "--ckpt-dir") {
      setOnce(o.ckptDir, f, a.value());
    } else if (f == "--ckpt-every") {
      o.ckptEvery = parsePositive(f, a.value());
    } else if (f == "--ckpt-keep") {
      o.ckptKeep = parsePositive(f, a.value());
      haveKeep = true;
    } else if (f == "--resume") {
      a.noValue();
      o.resume = true;
    } else if (f == "--resume-from") {
      setOnce(o.resumeFrom, f, a.value());
    } else if (f == "--save") {
      setOnce(o.save, f, a.value());
    } else if (f == "--save-onnx") {
      setOnce(o.saveOnnx, f, a.value());
    } else if (f == "--onnx") {
      setOnce(o.onnx, f, a.value());
    } else if (f == "--log-every") {
      o.logEvery = parsePositive(f, a.value());
    } else if (f == "--threads") {
      o.threads = parseThreads(f, a.value());
    } else if (f == "--lr") {
      o.lr = parseNonNegative(f, a.value());
      o.haveLr = true;
    } else if (f == "--lr-schedule") {
      o.schedule = parseLrSchedule(a.value());
      o.haveSchedule = true;
    } else if (f == "--eval-every") {
      o.evalEvery = parsePositive(f, a.value());
    } else if (f == "--profile-every") {
      o.profileEvery = parsePositive(f, a.value());
    } else if (f == "--eval-batches") {
      o.evalBatches = parsePositive(f, a.value());
    } else if (f == "--init-weights") {
      setOnce(o.initWeights, f, a.value());
    } else if (f == "--dump-outputs") {
      setOnce(o.dumpDir, f, a.value());
    } else if (f == "--dump-steps") {
      o.dumpSteps = parsePositiveList(f, a.value());
    } else if (f == "--weights") {
      setOnce(o.weights, f, a.value());
    } else if (f == "--trace") {
      setOnce(o.trace, f, a.value());
    } else if (f == "--peer-timeout") {
      o.peerTimeout = parsePeerTimeout(f, a.value());
    } else if (f == "--on-divergence") {
      o.guard.onDivergence = parseOnDivergence(f, a.value());
    } else if (f == "--spike-window") {
      o.guard.spikeWindow = parsePositive(f, a.value());
      if (o.guard.spikeWindow < 2)
        fail("--spike-window must be at least 2 (a spread needs two losses)");
    } else if (f == "--spike-sigma") {
      o.guard.spikeSigma = parseNonNegative(f, a.value());
      if (o.guard.spikeSigma <= 0)
        fail("--spike-sigma must be positive");
    } else if (f == "--snapshot-every") {
      o.guard.snapshotEvery = parsePositive(f, a.value());
    } else if (f == "--max-rollbacks") {
      o.guard.maxRollbacks = parsePositive(f, a.value());
    } else if (f == "--rollback-window") {
      o.guard.rollbackWindow = parsePositive(f, a.value());
    } else if (f == "--conservative-plan") {
      a.noValue();
      o.conservativePlan = true;
    } else if (f == "--verbose" || f == "-v") {
      a.noValue();
      o.verbose = true;
    } else if (f == "--check-inputs") {
      a.noValue();
      o.data.checkInputs = o.eval.checkInputs = true;
    } else {
      fail("unknown option '" + a.arg() + "' (see --help)");
    }
  }
  checkCombinations(o, haveSteps, haveKeep);
  return o;
}

} // namespace hpcrt::driver
