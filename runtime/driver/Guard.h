//===- Guard.h - the loss monitor of the stability guard ---------*- C++ -*-===//
//
// The one decision the runtime makes itself: whether training diverges. A
// step's loss diverges when it is not finite, or, with --spike-sigma K, when
// it lies more than K standard deviations above the mean of the last
// --spike-window accepted losses (once half the window is there; the
// deviation counts as at least 1% of the mean, so a flat curve's noise is
// no spike). The spike rule is asked for, not assumed: small batches of
// varied data have natural spikes far beyond 6 deviations (the quickstart's
// GPT on its license text reaches 11 on hard batches and recovers alone). What follows is --on-divergence's: rollback (restore the
// newest good state, skip the batches from it to the spike, go on), stop
// (end the run, exit 1) or ignore (say so, go on). The loss is the global
// batch's on every rank (the program's collectives give each the same
// bytes), so every rank decides alike without a message.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_GUARD_H
#define HPCRT_DRIVER_GUARD_H

#include <cstdint>
#include <deque>
#include <string>

namespace hpcrt::driver {

enum class OnDivergence { Rollback, Stop, Ignore };

/// --on-divergence's value (fails naming the flag on anything else).
OnDivergence parseOnDivergence(const std::string &flag, const std::string &v);
const char *onDivergenceName(OnDivergence d);

struct GuardOptions {
  OnDivergence onDivergence = OnDivergence::Rollback; ///< --on-divergence
  int64_t spikeWindow = 20;   ///< --spike-window N
  double spikeSigma = 0;      ///< --spike-sigma K (0: no spike rule)
  int64_t snapshotEvery = 0;  ///< --snapshot-every K (0: checkpoints only)
  int64_t maxRollbacks = 3;   ///< --max-rollbacks R
  int64_t rollbackWindow = 100; ///< --rollback-window W (steps)
};

/// --clip-norm=auto's running statistic of the gradient norms (ZClip's
/// rule): an exponential moving average (weight 0.97) of the norms and of
/// their squared deviation; from the 25th norm on, the step clips to
/// mean + 3 deviations, and a norm above that enters the statistic as the
/// threshold, so a spike does not raise it. Checkpoints keep it (a resumed
/// run clips alike).
struct ClipStats {
  double mean = 0, var = 0;
  int64_t count = 0;
  static constexpr double kWeight = 0.97, kSigmas = 3;
  static constexpr int64_t kWarmup = 25;
  /// The threshold the next step clips to (infinity during the warm-up).
  double threshold() const;
  /// Adds an applied step's (finite) norm.
  void observe(double norm);
};

/// The running statistic of the accepted losses.
class LossMonitor {
public:
  explicit LossMonitor(const GuardOptions &o) : o_(o) {}
  /// Why `loss` diverges ("" when it does not).
  std::string diverges(float loss) const;
  /// Adds an accepted step's loss to the window.
  void accept(float loss);

private:
  const GuardOptions &o_;
  std::deque<double> window_;
};

/// The rollbacks of the last --rollback-window steps.
class RollbackCounter {
public:
  explicit RollbackCounter(const GuardOptions &o) : o_(o) {}
  /// Counts a rollback at `step`; true when it makes --max-rollbacks
  /// within the window.
  bool add(int64_t step);
  void clear() { steps_.clear(); }

private:
  const GuardOptions &o_;
  std::deque<int64_t> steps_;
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_GUARD_H
