//===- Launch.h - the job's side of hpc-launch ------------------*- C++ -*-===//
//
// hpc-launch (tools/hpc-launch, docs/launch.md) starts every rank with
// HPC_ATTEMPT (0 first), HPC_HEARTBEAT (a file of this rank's) and, on a
// restart, HPC_RESTART_REASON. The train loop beats: it replaces the file
// (atomically) with one line after its setup, before and after each
// checkpoint and after every step, and hpc-launch reads a rank whose file
// grows older than its --heartbeat-timeout as hung:
//
//   ready STEP LOAD_S   set up, the state at STEP (LOAD_S: seconds spent
//                       loading the checkpoint it resumed, 0 when none)
//   step STEP SAVES SAVE_S BYTES   STEP done
//   ckpt STEP SAVES SAVE_S BYTES   writing STEP's checkpoint
//   done STEP SAVES SAVE_S BYTES   the run finished
//
// SAVES SAVE_S BYTES: the checkpoints this rank has written since it
// started, the seconds they took and their bytes (hpc-launch's report).
//
// Unset, none of this does anything.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_LAUNCH_H
#define HPCRT_DRIVER_LAUNCH_H

#include <cstdint>
#include <string>

namespace hpcrt::driver {

/// HPC_ATTEMPT: the attempt number hpc-launch gives the job (0 when unset;
/// anything but a count is an error).
int64_t attemptFromEnvironment();

/// HPC_RESTART_REASON: why hpc-launch restarted the job ("" when unset).
std::string restartReason();

/// This rank's heartbeat file (HPC_HEARTBEAT), or nothing.
class Heartbeat {
public:
  Heartbeat();
  void ready(int64_t step, double loadS) { beat("ready " + std::to_string(step) + " " + seconds(loadS)); }
  void step(int64_t step) { beat("step " + std::to_string(step) + saves_); }
  void checkpoint(int64_t step) { beat("ckpt " + std::to_string(step) + saves_); }
  void done(int64_t step) { beat("done " + std::to_string(step) + saves_); }
  /// The checkpoints written so far, carried by every later beat.
  void saved(int64_t count, double seconds, uint64_t bytes) {
    saves_ = " " + std::to_string(count) + " " + Heartbeat::seconds(seconds) + " " +
             std::to_string(bytes);
  }
  /// While this rank waits on a peer: the last line again, newly dated.
  void alive() const;
  bool enabled() const { return !path_.empty(); }

private:
  std::string path_, tmp_;
  std::string saves_ = " 0 0.000 0";
  void beat(const std::string &line);
  static std::string seconds(double s);
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_LAUNCH_H
