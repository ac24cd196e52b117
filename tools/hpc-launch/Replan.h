//===- Replan.h - re-planning a running job (--replan-every) ----*- C++ -*-===//
//
// `hpc-launch --replan-every K` has the job write a profile line every K
// steps to its --metrics file and hands each profile to the compiler
// (`--replan-compile CMD --auto-parallel --recalibrate=METRICS@STEP ...`).
// When the compiler writes a plan it predicts faster, the job is switched to
// it at a checkpoint: hpc-launch stops the job and resumes it on the new
// binary, which reshards the checkpoint of the old plan. The Replanner
// follows the metrics file, runs the compiles (hpc-launch's children, one at
// a time, never outliving the attempt that started them) and says when to
// switch; hpc-launch.cpp's attempt loop stops and restarts the job.
// docs/launch.md, "Re-planning".
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TOOLS_HPC_LAUNCH_REPLAN_H
#define HPC_TOOLS_HPC_LAUNCH_REPLAN_H

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpc::launch {

/// The highest N of a `step-N` directory in `dir`; -1 when there is none.
int64_t highestStepDirectory(const std::string &dir);

/// The step of the newest checkpoint in a --ckpt-dir: the one `DIR/latest`
/// names (the runtime replaces it after each checkpoint is complete), else
/// the highest `step-N` directory's; -1 when there is none.
int64_t newestCheckpoint(const std::string &dir);

/// The number that is the value of `"key"` in the JSON text `text` (the
/// first occurrence of the key; no nesting is followed); false when the key
/// is absent or its value is not a finite number.
bool findJsonNumber(const std::string &text, const std::string &key, double &out);

/// The text of the object that is the value of `"key"` in `text`, braces
/// included; empty when the key is absent or its value is not an object.
std::string findJsonObject(const std::string &text, const std::string &key);

/// What re-planning needs of the command line.
struct ReplanOptions {
  std::vector<std::string> compile; ///< --replan-compile CMD, split
  double threshold = 0.1;           ///< --replan-threshold
  std::string metrics;              ///< the job's --metrics FILE
  std::string ckptDir;              ///< the job's --ckpt-dir DIR
  int64_t lastStep = -1;            ///< the job's --steps N; -1: not given
};

/// One compile, for the messages and the report.
struct Replan {
  int64_t step = 0;   ///< the profile's step
  std::string status; ///< "compiling", "ready" (a plan waits for a
                      ///< checkpoint), then "switched", "kept", "failed"
                      ///< or "cancelled" (the attempt ended first)
  std::string binary; ///< the plan written; empty: none
  bool hasMeasured = false;
  double measuredS = 0; ///< the compiler's report: the step it measured ...
  bool hasPredicted = false;
  double predictedS = 0;   ///< ... and the step it predicts for its plan
  bool hasRunning = false;
  double runningS = 0;     ///< ... and for the running plan, on the same model
  bool hasGain = false;
  double gain = 0;         ///< the fraction of the step it predicts saved
  int64_t switchedAt = -1; ///< the checkpoint the job switched at; -1: none
  double compileS = 0;
  bool tooLate = false; ///< said that the steps left do not pay a switch

  /// "predicted X ms a step against Y ms measured"; empty when the
  /// compiler's report did not say both.
  std::string prediction() const;
};

/// Follows the job's profiles, runs the compiler on them and says when to
/// switch. Lives as long as the session; `beginAttempt` and `endAttempt` or
/// `switched` bracket each attempt.
class Replanner {
public:
  explicit Replanner(ReplanOptions o) : o_(std::move(o)) {}
  ~Replanner() { stopCompile(); }
  Replanner(const Replanner &) = delete;
  Replanner &operator=(const Replanner &) = delete;

  /// An attempt starts. `resumes`: it continues the job, which appends to
  /// its metrics file (only the bytes after the current end are this
  /// attempt's); otherwise the job starts over and truncates the file, and
  /// hpc-launch truncates it first, so that no profile of an earlier run
  /// is taken for this one's.
  void beginAttempt(bool resumes);
  /// Reads the job's new profiles, starts a compile on the newest (when
  /// none runs, no plan waits and the job is not at its last step), takes
  /// a finished compile's verdict;
  /// true when the job is to switch now. `saves`: each rank's checkpoints
  /// written in this attempt; `ending`: some rank finished training.
  bool poll(const std::vector<int64_t> &saves, bool ending);
  /// Takes the status of a child hpc-launch reaped (waitpid(-1) reaps the
  /// compiler too); true when it was the compiler.
  bool reaped(pid_t pid, int status);
  /// Kills and reaps a running compile (SIGKILL to its process group:
  /// "cancelled"); one that already ended gets its verdict.
  void stopCompile();
  /// The attempt ended without a switch: stops the compile; a compile or a
  /// plan that did not get to switch is "cancelled".
  void endAttempt();
  /// The job was stopped to switch: the plan it switches to, with the
  /// checkpoint it resumes from (the newest) as switchedAt.
  const Replan &switched();

  /// The job is being stopped (at `now`) to switch; the next attempt's
  /// first step on every rank (switchTimed) ends the switch's cost.
  void switchStarting(double now) { switchStop_ = now; }
  bool timingSwitch() const { return timing_; }
  void switchTimed(double firstStep);

  const std::vector<Replan> &replans() const { return replans_; }
  /// How many times the job switched.
  int switches() const;
  /// DIR/replan: where the plans and the compiler's reports go.
  std::string planDir() const { return o_.ckptDir + "/replan"; }

private:
  /// Reads what was appended to the metrics file; `newest` gets the step
  /// of the newest complete profile line (unchanged when none).
  void readProfiles(int64_t &newest);
  void startCompile(int64_t step);
  /// Says what came of the compile that ended (status_).
  void compileEnded();
  /// Reads the compiler's report's measured and predicted step times.
  void readVerdict(Replan &r) const;
  bool switchReady(const std::vector<int64_t> &saves, bool ending);

  ReplanOptions o_;
  std::vector<Replan> replans_;
  std::string running_; ///< the plan the job runs, once it switched
  off_t offset_ = 0;    ///< the metrics file's bytes read
  std::string partial_; ///< an incomplete last line
  pid_t pid_ = -1;      ///< the running compile (of replans_.back())
  bool ended_ = false;  ///< it ended (status_), its verdict not taken yet
  int status_ = 0;
  double startTime_ = 0, endTime_ = 0;
  bool pending_ = false; ///< replans_.back() waits for a checkpoint
  std::vector<int64_t> lastSaves_, savesAtReady_;
  bool checkpointed_ = false; ///< a checkpoint at or past its step existed
                              ///< when the plan was ready
  /// What a switch costs (stop, restart and load, the first step): the
  /// last one's, measured, else an assumption of this machine's order
  /// (docs/launch.md: about 1 s to stop under mpirun, 1-2 s to start).
  double switchCostS_ = 3.0;
  double switchStop_ = 0;
  bool timing_ = false; ///< a switch's cost is being measured
};

} // namespace hpc::launch

#endif // HPC_TOOLS_HPC_LAUNCH_REPLAN_H
