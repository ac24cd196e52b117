//===- Checkpoint.h - sharded checkpoints of the state region ---*- C++ -*-===//
//
// A checkpoint is one directory DIR/step-N:
//   rank-R.safetensors  one shard per rank: a record per state tensor (named
//                       by its state name, this rank's dtype and shape);
//                       __metadata__ has "hpc_plan_hash", "hpc_step",
//                       "hpc_rank" and, per record, "hpc_slice.<name>" =
//                       {"global_shape": [...], "slice": [[start, end], ...]}:
//                       the part of the whole tensor this rank holds (a
//                       ZeRO rank's rows; whole when it holds all of it);
//   manifest.json       format version, plan hash, model, step, the data
//                       position, the RNG state, and each shard's size and
//                       hpcrt_hash64 checksum.
// It is written into DIR/.tmp-step-N-XXXXXX (files and directory fsync-ed),
// renamed to DIR/step-N (DIR fsync-ed), and then DIR/latest ("step-N") is
// replaced atomically; the newest --ckpt-keep step directories up to N are
// kept. Nothing else in DIR is touched. The plan hash (hpcrt_hash64 of the
// program's manifest text) names the layout. A checkpoint of another plan of
// the same model is resharded: each rank assembles its slice of every state
// tensor from the pieces the shards' hpc_slice records name (any world size,
// mesh, pipeline split or ZeRO stage; tensor names, dtypes and whole shapes
// must match); error-feedback state, which is each rank's own residual,
// starts again from zero. Also here: `train --save` (params as a plain safetensors file),
// `train --save-onnx` (params in place of the source model's initializers)
// and `train --init-weights` (params from a safetensors file).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_CHECKPOINT_H
#define HPCRT_DRIVER_CHECKPOINT_H

#include "Guard.h"
#include "Process.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpcrt::driver {

/// The checkpoint format version this runtime writes. Version 1 (no true
/// hpc_slice records) is still read, but only by its own plan.
constexpr int kCheckpointFormatVersion = 2;

/// hpcrt_hash64 of the manifest text, as 16 hex digits.
std::string planHash(const char *manifestText);

/// A checkpoint of another model or plan (its plan hash differs).
struct PlanMismatch : Error {
  using Error::Error;
};

/// One shard listed in a checkpoint's manifest.json.
struct ShardInfo {
  std::string file; ///< "rank-R.safetensors"
  uint64_t bytes = 0;
  uint64_t hash = 0;
};

/// What a verified checkpoint's manifest.json says.
struct CheckpointInfo {
  std::string dir; ///< DIR/step-N
  int64_t step = 0;
  int64_t nextSample = 0; ///< the data position: the next global sample
  int64_t skippedSteps = 0; ///< steps whose updates were skipped (not in the optimizer's count)
  ClipStats clip;           ///< --clip-norm=auto's statistic (optimizer.clip_norm_auto)
  uint64_t rngCounter = 0;
  std::vector<ShardInfo> shards;
  /// Written by another plan of the same model: loadState reshards it.
  bool reshard = false;
  std::string layout;   ///< how its state was split ("mesh dp=4, ZeRO-1")
  std::string planHash; ///< the plan that wrote it (every shard names it too)
};

/// What the checkpoints of a run must match.
struct CheckpointPlan {
  std::string planHash;
  std::string model;
  int worldSize = 1;
  /// How the state is split over ranks ("mesh dp=4, ZeRO-2"), to name a
  /// mismatch that resharding would fix.
  std::string layout;
};

/// How the program's state is split over ranks: its mesh and ZeRO stage
/// ("mesh dp=4, ZeRO-2", "one rank, no ZeRO").
std::string planLayout(const Context &ctx);

/// Reads DIR/step-N/manifest.json and checks the plan hash and the world
/// size; with `checkShards`, also every shard's size and checksum. A
/// checkpoint of another plan of the same model (manifest "model") comes
/// back with `reshard` set (any world size); one of another model, or of an
/// older format that records no slices, is a PlanMismatch. Throws
/// hpcrt::Error naming the file.
CheckpointInfo readCheckpoint(const std::string &stepDir, const CheckpointPlan &plan,
                              bool checkShards);

/// --resume: the newest step directory of `dir` that verifies. A checkpoint
/// of another plan is an error at once; corrupt newer ones are skipped, and
/// `warnings` gets one line for each skipped one. No valid one is an error.
CheckpointInfo findResumable(const std::string &dir, const CheckpointPlan &plan,
                             std::vector<std::string> &warnings);

/// Fails when `dir` already holds step directories (a fresh run must not
/// mix its checkpoints with another run's).
void checkFreshDirectory(const std::string &dir);

/// Copies this rank's shard of `ckpt` into the state tensors (size,
/// checksum, plan hash, names, dtypes and shapes checked). Returns the bytes
/// it mapped while doing so.
uint64_t loadShard(Context &ctx, const CheckpointInfo &ckpt, const CheckpointPlan &plan,
                   int rank);

/// What resharding a checkpoint did on this rank.
struct ReshardReport {
  uint64_t copiedBytes = 0; ///< state bytes assembled from the shards
  size_t reset = 0;         ///< error-feedback tensors started from zero
  /// The checkpoint's state tensor names (error feedback aside), sorted:
  /// the same list on every rank.
  std::vector<std::string> names;
  /// Bit i of word i/64: this rank read names[i].
  std::vector<uint64_t> used;
};

/// The first of `names` that no rank read (`used`: every rank's
/// ReshardReport::used, concatenated), and how many there are ("" and 0
/// when every one was read).
std::string unusedStateTensor(const std::vector<std::string> &names,
                              const std::vector<uint64_t> &used, size_t &count);

/// Assembles this rank's slice of every state tensor from the pieces of
/// all of `ckpt`'s shards (their hpc_slice records). A tensor the
/// checkpoint lacks, or holds with another dtype or whole shape, or whose
/// pieces do not cover this rank's slice, is an error naming it.
ReshardReport reshardState(Context &ctx, const CheckpointInfo &ckpt);

/// loadShard for a checkpoint of this plan, reshardState for one of
/// another; returns the bytes read.
uint64_t loadState(Context &ctx, const CheckpointInfo &ckpt, const CheckpointPlan &plan,
                   int rank);

/// Writes checkpoints of a run (collective under MPI).
class CheckpointWriter {
public:
  CheckpointWriter(Context &ctx, MpiRun &mpi, std::string dir, int64_t keep,
                   CheckpointPlan plan);
  /// Writes DIR/step-`step` (see the file comment); returns the bytes this
  /// rank mapped transiently (to checksum its shard). `crash` (the fault
  /// crash-in-checkpoint) kills this process with its shard half written.
  uint64_t write(int64_t step, int64_t nextSample, int64_t skippedSteps = 0,
                 const ClipStats &clip = {}, bool crash = false);
  const std::string &dir() const { return dir_; }

private:
  Context &ctx_;
  MpiRun &mpi_;
  std::string dir_;
  int64_t keep_;
  CheckpointPlan plan_;

  /// Writes this rank's shard; returns its size and checksum.
  ShardInfo writeShard(const std::string &tmp, int64_t step, uint64_t &mapped, bool crash);
  void writeManifest(const std::string &tmp, int64_t step, int64_t nextSample, int64_t skippedSteps,
                     const ClipStats &clip,
                     const std::vector<ShardInfo> &shards);
  /// Renames tmp to DIR/step-N (replacing an older one), updates latest.
  void publish(const std::string &tmp, int64_t step);
  /// Removes the step directories up to `step` beyond the newest keep_.
  void prune(int64_t step);
};

/// Whole copies of the param state tensors a plan splits over ranks
/// (tensor parallelism's pieces, ZeRO-3's rows), by name: the shape and
/// row-major bytes of the whole tensor.
struct WholeTensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
using WholeParams = std::map<std::string, WholeTensor>;

/// Every split param, gathered whole onto every rank of its split's group
/// (a collective: every rank calls it); with `shapesOnly` no collective and
/// zeros (a setup check of the shapes). Empty when no param is split.
WholeParams wholeSplitParams(const Context &ctx, comm::MpiComm *comm, bool shapesOnly = false);

/// `train --save`: every param state tensor, whole, under its name, in a
/// plain safetensors file (replaced atomically); a split one from `whole`.
void saveParams(const Context &ctx, const std::string &path, const CheckpointPlan &plan,
                int64_t step, const WholeParams &whole = {});
/// `train --save-onnx`: the ONNX model at `source` with the initializer of
/// every param state tensor replaced by its value (as inline raw_data;
/// external initializers are inlined too; runtime/io/OnnxInitializers.h).
/// Fails, naming the file, when `source` cannot be read, is not a model, or
/// lacks an initializer of a param's name, dtype and shape. `replaced`
/// (optional) gets the number of initializers replaced and inlined.
std::vector<uint8_t> onnxWithParams(const Context &ctx, const std::string &source,
                                    const WholeParams &whole = {}, size_t *replaced = nullptr,
                                    size_t *inlined = nullptr);
/// `train --init-weights`: overwrites the param state tensors from a
/// safetensors file by name (names, dtypes and whole shapes must match
/// exactly; a split param takes this rank's piece of its record).
/// Returns the bytes it mapped.
uint64_t initParams(Context &ctx, const std::string &path);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_CHECKPOINT_H
