//===- Metrics.h - metrics, progress, memory of a train run -----*- C++ -*-===//
//
// The metrics file (--metrics FILE.jsonl: one JSON object per step, then a
// summary object; appended to by a resumed run), the progress display (a
// line rewritten in place on a terminal, plain lines every --log-every steps
// otherwise), and the runtime's own count of the bytes it holds (its peak is
// the summary's peak_bytes_per_rank).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_METRICS_H
#define HPCRT_DRIVER_METRICS_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace hpcrt::driver {

/// What one step reports.
/// Something the guard did at a step: {"event": name, "step": N, "reason":
/// reason} in the metrics (and a line on the terminal), with a rollback's
/// state step and skipped batches.
struct GuardEvent {
  std::string name, reason;
  int64_t toStep = -1;         ///< rollback: the step of the state restored
  int64_t skippedBatches = -1; ///< rollback: the batches skipped
};

struct StepReport {
  int64_t step = 0;
  float loss = 0;
  double lr = 0;
  bool hasGradNorm = false;
  float gradNorm = 0;
  double stepMs = 0;
  double tokensPerS = 0;
  bool hasEval = false;
  double evalLoss = 0;
  bool skipped = false; ///< the updates were skipped (a non-finite gradient norm)
  bool rolledBack = false; ///< the loss monitor rolled the state back
  /// Per routed mixture-of-experts layer: the choices of each expert, and
  /// the rows its buffer holds (choices past them were dropped).
  std::vector<std::vector<int64_t>> moeLoad;
  std::vector<int64_t> moeCapacity;
  bool hasBalanceLoss = false;
  double balanceLoss = 0; ///< the auxiliary balancing loss (in `loss` too)
  std::vector<GuardEvent> events;
};

/// A string as JSON (quoted, escaped).
std::string jsonString(const std::string &s);
/// A float as JSON: the shortest %g text that reads back as the same float
/// (at most 9 digits); null when not finite.
std::string jsonFloat(float v);
/// A double as JSON: the shortest %g text that reads back as the same
/// double (at most 17 digits); null when not finite.
std::string jsonDouble(double v);

/// Builds one JSON object of numbers and literals, in insertion order.
class JsonLine {
public:
  JsonLine &add(const std::string &key, const std::string &jsonValue);
  JsonLine &add(const std::string &key, int64_t v);
  JsonLine &add(const std::string &key, uint64_t v);
  std::string text() const;

private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// The metrics file, written by rank 0.
class MetricsFile {
public:
  MetricsFile() = default;
  /// Opens `path` (truncated, or appended to when `append`).
  MetricsFile(const std::string &path, bool append);
  ~MetricsFile();
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;
  bool open() const { return f_ != nullptr; }
  /// The step's line: step, loss, lr, grad_norm, step_ms, tokens_per_s
  /// (and eval_loss), flushed at once; for a skipped step also "skipped":
  /// true, for a rolled-back one "rolled_back": true; then a line for each
  /// of its events.
  void step(const StepReport &r);
  void event(int64_t step, const GuardEvent &e);
  void line(const std::string &text);

private:
  std::string path_;
  FILE *f_ = nullptr;
};

/// The progress display on stdout (rank 0).
class Progress {
public:
  /// `unit` names what tokens_per_s counts ("tokens" or "samples").
  Progress(bool terminal, int64_t logEvery, int64_t lastStep, int64_t firstStep,
           std::string unit);
  /// Shows a step; `elapsedS` is the time since the first step of this run.
  void step(const StepReport &r, double elapsedS);
  /// Prints a line of its own (clearing the progress line first).
  void message(const std::string &text);
  /// Ends the progress line.
  void finish();

private:
  bool terminal_;
  int64_t logEvery_, lastStep_, firstStep_;
  std::string unit_;
  bool lineOpen_ = false;
};

/// The bytes the runtime holds by its own accounting, and their peak.
struct MemoryAccount {
  uint64_t held = 0, peak = 0;
  void hold(uint64_t bytes) {
    held += bytes;
    peak = held > peak ? held : peak;
  }
  void release(uint64_t bytes) { held -= bytes < held ? bytes : held; }
  /// Something held only for a moment on top of the rest.
  void transient(uint64_t bytes) {
    peak = held + bytes > peak ? held + bytes : peak;
  }
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_METRICS_H
