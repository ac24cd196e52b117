//===- Checkpoint.cpp - sharded checkpoints of the state region -----------===//
//
// Writing (CheckpointWriter: rank 0 makes the temporary directory and names
// it to the others, every rank writes and fsyncs its shard, rank 0 gathers
// the sizes and checksums, writes manifest.json, publishes and prunes),
// verifying and choosing a checkpoint to resume from, loading a shard into
// the state, the params-only safetensors files of --save and --init-weights,
// and the ONNX model of --save-onnx. See Checkpoint.h for the layout.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Faults.h"
#include "Files.h"
#include "../io/OnnxInitializers.h"
#include "../io/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include <sys/stat.h>

using json = nlohmann::json;

namespace hpcrt::driver {

std::string planHash(const char *manifestText) {
  // Where the model file was at compile time is not part of the plan: a
  // binary compiled from a moved copy of the model resumes the checkpoint.
  json m = json::parse(manifestText, nullptr, /*allow_exceptions=*/false);
  if (m.is_object() && m.contains("model_path")) {
    m.erase("model_path");
    std::string text = m.dump();
    return hashString(hpcrt_hash64(text.data(), text.size()));
  }
  return hashString(hpcrt_hash64(manifestText, strlen(manifestText)));
}

std::string planLayout(const Context &ctx) {
  std::string mesh;
  for (const MeshAxisInfo &a : ctx.mesh())
    mesh += (mesh.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return (mesh.empty() ? std::string("one rank") : "mesh " + mesh) +
         (ctx.zeroStage() ? ", ZeRO-" + std::to_string(ctx.zeroStage()) : std::string(", no ZeRO"));
}

namespace {

std::string shardName(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

/// The step number of a directory entry named "step-N" (-1 otherwise).
int64_t stepOfName(const std::string &name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 15)
    return -1;
  int64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return std::to_string(n) == name.substr(5) ? n : -1;
}

/// The step directories of `dir`, newest first.
std::vector<int64_t> stepDirectories(const std::string &dir) {
  std::vector<int64_t> steps;
  for (const std::string &n : listDirectory(dir)) {
    int64_t s = stepOfName(n);
    if (s >= 0 && isDirectory(dir + "/" + n))
      steps.push_back(s);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

std::string stepDirName(int64_t step) { return "step-" + std::to_string(step); }

/// The records of a shard: the state tensors in the manifest's order.
/// The state tensors (params only: `paramsOnly`) as safetensors entries and
/// their data: this rank's, or the whole tensor `whole` has of that name.
std::vector<SafetensorsEntry> stateEntries(const Context &ctx, bool paramsOnly,
                                           const WholeParams &whole = {}) {
  std::vector<SafetensorsEntry> entries;
  for (const StateEntry &e : ctx.stateList()) {
    if (paramsOnly && !e.isParam())
      continue;
    const Tensor &t = ctx.tensor(e.tensor);
    if (auto w = whole.find(e.name); w != whole.end())
      entries.push_back({e.name, t.dtype, w->second.shape, w->second.data.size()});
    else
      entries.push_back({e.name, t.dtype, t.shape, t.bytes});
  }
  return entries;
}

std::vector<Piece> statePieces(const Context &ctx, bool paramsOnly,
                               const WholeParams &whole = {}) {
  std::vector<Piece> pieces;
  for (const StateEntry &e : ctx.stateList()) {
    if (paramsOnly && !e.isParam())
      continue;
    if (auto w = whole.find(e.name); w != whole.end())
      pieces.push_back({w->second.data.data(), w->second.data.size()});
    else
      pieces.push_back({ctx.tensor(e.tensor).data, ctx.tensor(e.tensor).bytes});
  }
  return pieces;
}

/// Copies the elements where the box of `from` (at fromStart, extent
/// fromShape) and that of `to` overlap, both row-major in their own
/// extents; returns how many.
int64_t copyOverlap(const uint8_t *from, const std::vector<int64_t> &fromStart,
                    const std::vector<int64_t> &fromShape, uint8_t *to,
                    const std::vector<int64_t> &toStart, const std::vector<int64_t> &toShape,
                    size_t elem) {
  size_t rank = toShape.size();
  if (rank == 0) {
    memcpy(to, from, elem);
    return 1;
  }
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(fromStart[d], toStart[d]);
    hi[d] = std::min(fromStart[d] + fromShape[d], toStart[d] + toShape[d]);
    if (hi[d] <= lo[d])
      return 0;
  }
  std::vector<int64_t> fromStride(rank, 1), toStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    fromStride[d] = fromStride[d + 1] * fromShape[d + 1];
    toStride[d] = toStride[d + 1] * toShape[d + 1];
  }
  int64_t run = hi[rank - 1] - lo[rank - 1];
  std::vector<int64_t> at = lo; // the outer dimensions' index, odometer-style
  int64_t copied = 0;
  while (true) {
    int64_t f = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      f += (at[d] - fromStart[d]) * fromStride[d];
      t += (at[d] - toStart[d]) * toStride[d];
    }
    memcpy(to + t * elem, from + f * elem, static_cast<size_t>(run) * elem);
    copied += run;
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++at[d] < hi[d])
        break;
      at[d] = lo[d];
    }
    if (d == static_cast<size_t>(-1))
      return copied;
  }
}


std::string recordText(const std::string &dtype, const std::vector<int64_t> &shape) {
  return dtype + " " + shapeString(shape);
}

/// Checks the size and checksum of a mapped shard against the manifest.
void checkShardBytes(const MappedFile &f, const ShardInfo &s) {
  if (f.size() != s.bytes)
    fail(f.path() + ": " + std::to_string(f.size()) +
         " bytes, the checkpoint's manifest.json says " + std::to_string(s.bytes) +
         " (truncated or corrupted)");
  uint64_t h = hpcrt_hash64(f.data(), f.size());
  if (h != s.hash)
    fail(f.path() + ": checksum " + hashString(h) + " does not match the manifest's " +
         hashString(s.hash) + " (corrupted)");
}

/// A checkpoint's manifest.json lists a few fields per shard: far below this.
constexpr size_t kMaxCheckpointManifestBytes = size_t(64) << 20;

json readJsonFile(const std::string &path) {
  MappedFile f(path);
  if (f.size() > kMaxCheckpointManifestBytes)
    fail(path + ": " + std::to_string(f.size()) + " bytes, more than a checkpoint manifest's " +
         std::to_string(kMaxCheckpointManifestBytes) + " (corrupted?)");
  try {
    return json::parse(f.data(), f.data() + f.size());
  } catch (const json::exception &) {
    fail(path + ": not valid JSON (truncated or corrupted)");
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Reading and choosing checkpoints
//===----------------------------------------------------------------------===//

CheckpointInfo readCheckpoint(const std::string &stepDir, const CheckpointPlan &plan,
                              bool checkShards) {
  std::string mpath = stepDir + "/manifest.json";
  if (!isDirectory(stepDir))
    fail(stepDir + ": not a checkpoint directory");
  json m = readJsonFile(mpath);
  auto bad = [&](const std::string &what) { fail(mpath + ": " + what); };
  if (!m.is_object() || !m.contains("format_version") || !m["format_version"].is_number_integer())
    bad("not a checkpoint manifest (no format_version)");
  int64_t version = m["format_version"].get<int64_t>();
  if (version != 1 && version != kCheckpointFormatVersion)
    bad("format version " + std::to_string(version) +
        " is not supported (this runtime reads versions 1 and " +
        std::to_string(kCheckpointFormatVersion) + ")");
  if (!m.contains("plan_hash") || !m["plan_hash"].is_string())
    bad("no plan_hash");
  std::string hash = m["plan_hash"].get<std::string>();
  CheckpointInfo c;
  c.dir = stepDir;
  c.planHash = hash;
  if (m.contains("layout") && m["layout"].is_string())
    c.layout = m["layout"].get<std::string>();
  if (hash != plan.planHash) {
    std::string modelName =
        m.contains("model") && m["model"].is_string() ? m["model"].get<std::string>() : "";
    std::string model = modelName.empty() ? "" : " of model '" + modelName + "'";
    if (modelName.empty() || modelName != plan.model)
      throw PlanMismatch(stepDir + ": a checkpoint" + model +
                         " of another model or plan (plan hash " + hash +
                         ", this program's is " + plan.planHash + ")");
    if (version < 2)
      throw PlanMismatch(stepDir + ": a checkpoint" + model + " of another plan" +
                         (c.layout.empty() ? "" : " (state split as " + c.layout + ")") +
                         " written in format version 1, whose shards do not record their "
                         "slices: it resumes only on the plan that wrote it");
    c.reshard = true;
  }
  if (!m.contains("step") || !m["step"].is_number_integer() || m["step"].get<int64_t>() < 1)
    bad("no positive step");
  c.step = m["step"].get<int64_t>();
  const json &pos = m.contains("data_position") ? m["data_position"] : json();
  if (!pos.is_object() || !pos.contains("next_sample") || !pos["next_sample"].is_number_integer() ||
      pos["next_sample"].get<int64_t>() < 0)
    bad("no data_position.next_sample");
  c.nextSample = pos["next_sample"].get<int64_t>();
  // Older checkpoints have no optimizer record: nothing was skipped.
  if (m.contains("optimizer") && m["optimizer"].is_object() &&
      m["optimizer"].contains("skipped_steps")) {
    const json &k = m["optimizer"]["skipped_steps"];
    if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() >= c.step)
      bad("optimizer.skipped_steps is not a count below the step");
    c.skippedSteps = k.get<int64_t>();
  }
  if (m.contains("optimizer") && m["optimizer"].is_object() &&
      m["optimizer"].contains("clip_norm_auto")) {
    const json &k = m["optimizer"]["clip_norm_auto"];
    if (!k.is_object() || !k.contains("mean") || !k["mean"].is_number() || !k.contains("var") ||
        !k["var"].is_number() || !k.contains("count") || !k["count"].is_number_integer() ||
        k["count"].get<int64_t>() < 0)
      bad("optimizer.clip_norm_auto is not {mean, var, count}");
    c.clip.mean = k["mean"].get<double>();
    c.clip.var = k["var"].get<double>();
    c.clip.count = k["count"].get<int64_t>();
  }
  if (m.contains("rng") && m["rng"].is_object() && m["rng"].contains("seed_counter") &&
      m["rng"]["seed_counter"].is_number_unsigned())
    c.rngCounter = m["rng"]["seed_counter"].get<uint64_t>();
  if (!m.contains("shards") || !m["shards"].is_array())
    bad("no shards");
  const json &shards = m["shards"];
  if (shards.empty())
    bad("no shards");
  if (!c.reshard && static_cast<int>(shards.size()) != plan.worldSize)
    bad("written by " + std::to_string(shards.size()) + " ranks, this run has " +
        std::to_string(plan.worldSize));
  for (size_t r = 0; r < shards.size(); ++r) {
    const json &s = shards[r];
    if (!s.is_object() || !s.contains("file") || !s["file"].is_string() || !s.contains("bytes") ||
        !s["bytes"].is_number_unsigned() || !s.contains("hash") || !s["hash"].is_string())
      bad("shards[" + std::to_string(r) + "] needs file, bytes and hash");
    ShardInfo info;
    info.file = s["file"].get<std::string>();
    if (info.file != shardName(static_cast<int>(r)))
      bad("shards[" + std::to_string(r) + "] is '" + info.file + "', expected '" +
          shardName(static_cast<int>(r)) + "'");
    info.bytes = s["bytes"].get<uint64_t>();
    info.hash = parseHash(s["hash"].get<std::string>(), mpath);
    c.shards.push_back(info);
  }
  if (checkShards)
    for (const ShardInfo &s : c.shards)
      checkShardBytes(MappedFile(stepDir + "/" + s.file), s);
  return c;
}

CheckpointInfo findResumable(const std::string &dir, const CheckpointPlan &plan,
                             std::vector<std::string> &warnings) {
  if (!isDirectory(dir))
    fail(dir + ": no checkpoint directory to resume from");
  std::vector<int64_t> steps = stepDirectories(dir);
  if (steps.empty())
    fail(dir + ": no checkpoint to resume from (no step-N directory)");
  std::vector<std::string> skipped;
  for (int64_t s : steps) {
    try {
      CheckpointInfo c = readCheckpoint(dir + "/" + stepDirName(s), plan, true);
      for (const std::string &why : skipped)
        warnings.push_back("skipping a checkpoint that does not verify: " + why);
      return c;
    } catch (const PlanMismatch &) {
      throw;
    } catch (const Error &e) {
      skipped.push_back(e.what());
    }
  }
  fail(dir + ": no checkpoint verifies (newest: " + skipped.front() + ")" +
       (skipped.size() > 1 ? " and " + std::to_string(skipped.size() - 1) + " older fail too"
                           : ""));
}

void checkFreshDirectory(const std::string &dir) {
  std::vector<int64_t> steps = stepDirectories(dir);
  if (!steps.empty())
    fail(dir + ": already holds checkpoints (newest " + stepDirName(steps.front()) +
         "); pass --resume to continue them, or use another --ckpt-dir");
}

namespace {
/// Copies records of a parsed safetensors file into state tensors: every
/// one of `entries` must be there with its dtype and shape, and nothing
/// else.
void copyRecords(Context &ctx, const MappedFile &f, const SafetensorsFile &st,
                 bool paramsOnly, const char *kind) {
  std::map<std::string, const StateEntry *> wanted;
  for (const StateEntry &e : ctx.stateList())
    if (!paramsOnly || e.isParam())
      wanted[e.name] = &e;
  // A shard's records are this rank's tensors; a params file's (paramsOnly)
  // the whole ones, of which this rank takes its piece.
  auto shapes = [&](const StateEntry &e, std::vector<int64_t> &global,
                    std::vector<int64_t> &start) {
    const Tensor &t = ctx.tensor(e.tensor);
    if (paramsOnly) {
      ctx.stateSlice(e, global, start);
    } else {
      global = t.shape;
      start.assign(t.shape.size(), 0);
    }
  };
  for (const auto &[name, e] : wanted) {
    const Tensor &t = ctx.tensor(e->tensor);
    std::vector<int64_t> global, start;
    shapes(*e, global, start);
    std::string mine = recordText(safetensorsDtype(t.dtype), global);
    const SafetensorsRecord *r = st.find(name);
    if (!r)
      fail(f.path() + ": no tensor '" + name + "' (the program's " + kind + " " + mine + ")");
    if (r->dtype != t.dtype || r->shape != global)
      fail(f.path() + ": tensor '" + name + "' is " + recordText(r->dtypeName, r->shape) +
           ", the program's " + kind + " is " + mine);
  }
  for (const SafetensorsRecord &r : st.records)
    if (!wanted.count(r.name))
      fail(f.path() + ": tensor '" + r.name + "' is not a " + kind + " of the program");
  for (const auto &[name, e] : wanted) {
    const Tensor &t = ctx.tensor(e->tensor);
    const SafetensorsRecord *r = st.find(name);
    if (!t.bytes)
      continue;
    const uint8_t *data = f.data() + st.dataOffset + r->begin;
    std::vector<int64_t> global, start;
    shapes(*e, global, start);
    if (global == t.shape)
      memcpy(t.data, data, t.bytes);
    else
      copyOverlap(data, std::vector<int64_t>(global.size(), 0), global,
                  static_cast<uint8_t *>(t.data), start, t.shape, dtypeSize(t.dtype));
  }
}
} // namespace

uint64_t loadShard(Context &ctx, const CheckpointInfo &ckpt, const CheckpointPlan &plan,
                   int rank) {
  const ShardInfo &s = ckpt.shards.at(static_cast<size_t>(rank));
  MappedFile f(ckpt.dir + "/" + s.file);
  checkShardBytes(f, s);
  SafetensorsFile st = parseSafetensors(f.data(), f.size(), f.path());
  auto it = st.metadata.find("hpc_plan_hash");
  if (it == st.metadata.end() || it->second != plan.planHash)
    fail(f.path() + ": shard of another plan (hpc_plan_hash " +
         (it == st.metadata.end() ? std::string("missing") : it->second) + ", this program's is " +
         plan.planHash + ")");
  copyRecords(ctx, f, st, false, "state tensor");
  return f.size();
}

namespace {

/// A piece of a whole tensor held by one shard: its record, and where the
/// record lies in the whole tensor (its extent is the record's shape).
struct SlicePiece {
  const MappedFile *file = nullptr;
  uint64_t dataOffset = 0;
  const SafetensorsRecord *record = nullptr;
  std::vector<int64_t> global, start;
};

/// hpc_slice.<name> of a shard: {"global_shape": [...], "slice": [[a, b], ...]},
/// checked against the record's shape.
SlicePiece parseSlice(const std::string &text, const SafetensorsRecord &r,
                      const std::string &where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&] {
    fail(where + ": hpc_slice." + r.name + " is not {global_shape, slice} of its " +
         shapeString(r.shape) + " record (corrupted?)");
  };
  if (!j.is_object() || !j.contains("global_shape") || !j.contains("slice") ||
      !j["global_shape"].is_array() || !j["slice"].is_array() ||
      j["global_shape"].size() != r.shape.size() || j["slice"].size() != r.shape.size())
    bad();
  SlicePiece p;
  p.record = &r;
  for (size_t d = 0; d < r.shape.size(); ++d) {
    const json &g = j["global_shape"][d], &sl = j["slice"][d];
    if (!g.is_number_integer() || !sl.is_array() || sl.size() != 2 ||
        !sl[0].is_number_integer() || !sl[1].is_number_integer())
      bad();
    int64_t whole = g.get<int64_t>(), a = sl[0].get<int64_t>(), b = sl[1].get<int64_t>();
    if (a < 0 || b - a != r.shape[d] || b > whole)
      bad();
    p.global.push_back(whole);
    p.start.push_back(a);
  }
  return p;
}

} // namespace

ReshardReport reshardState(Context &ctx, const CheckpointInfo &ckpt) {
  // Every shard's records by name: the pieces each holds (mapped, so only
  // the pages of the overlaps are read).
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<SafetensorsFile> parsed;
  parsed.reserve(ckpt.shards.size());
  std::map<std::string, std::vector<SlicePiece>> pieces;
  for (const ShardInfo &s : ckpt.shards) {
    files.push_back(std::make_unique<MappedFile>(ckpt.dir + "/" + s.file));
    const MappedFile &f = *files.back();
    if (f.size() != s.bytes)
      fail(f.path() + ": " + std::to_string(f.size()) +
           " bytes, the checkpoint's manifest.json says " + std::to_string(s.bytes) +
           " (truncated or corrupted)");
    parsed.push_back(parseSafetensors(f.data(), f.size(), f.path()));
    const SafetensorsFile &st = parsed.back();
    auto hash = st.metadata.find("hpc_plan_hash");
    if (hash == st.metadata.end() || hash->second != ckpt.planHash)
      fail(f.path() + ": shard of another checkpoint (hpc_plan_hash " +
           (hash == st.metadata.end() ? std::string("missing") : hash->second) +
           ", the manifest's is " + ckpt.planHash + ")");
    for (const SafetensorsRecord &r : st.records) {
      auto it = st.metadata.find("hpc_slice." + r.name);
      if (it == st.metadata.end())
        fail(f.path() + ": no hpc_slice." + r.name + " record (corrupted?)");
      SlicePiece p = parseSlice(it->second, r, f.path());
      p.file = &f;
      p.dataOffset = st.dataOffset;
      std::vector<SlicePiece> &list = pieces[r.name];
      // Replicas of one piece (data parallelism): the first one serves.
      bool seen = false;
      for (const SlicePiece &q : list)
        seen |= q.start == p.start;
      if (!seen)
        list.push_back(std::move(p));
    }
  }
  ReshardReport report;
  // Error feedback (dist-compress names it dist.error_feedback.N and
  // dist.powersgd_state.N) is each rank's own: a plan need not read it.
  std::map<std::string, size_t> index;
  for (const auto &[name, list] : pieces)
    if (name.rfind("dist.error_feedback.", 0) != 0 && name.rfind("dist.powersgd_state.", 0) != 0) {
      index[name] = report.names.size();
      report.names.push_back(name);
    }
  report.used.assign((report.names.size() + 63) / 64, 0);
  for (const StateEntry &e : ctx.stateList()) {
    Tensor &t = ctx.tensor(e.tensor);
    if (e.role == "error_feedback") {
      // A rank's own compression residual: no other plan has its meaning.
      if (t.bytes)
        memset(t.data, 0, t.bytes);
      ++report.reset;
      continue;
    }
    std::vector<int64_t> global, start;
    ctx.stateSlice(e, global, start);
    std::string mine = recordText(safetensorsDtype(t.dtype), global);
    auto it = pieces.find(e.name);
    if (it == pieces.end())
      fail(ckpt.dir + ": no state tensor '" + e.name + "' (this program's " + e.role + " " +
           mine + "): a checkpoint of another model or optimizer cannot be resharded to it");
    if (auto i = index.find(e.name); i != index.end())
      report.used[i->second / 64] |= uint64_t(1) << (i->second % 64);
    if (t.blocked)
      fail("state '" + e.name + "' is stored in a blocked layout: it cannot be resharded");
    int64_t covered = 0;
    for (const SlicePiece &p : it->second) {
      if (p.record->dtype != t.dtype || p.global != global)
        fail(ckpt.dir + ": state tensor '" + e.name + "' is " +
             recordText(p.record->dtypeName, p.global) + " in the checkpoint, this program's is " +
             mine + " (whole tensors must match to reshard)");
      covered += copyOverlap(p.file->data() + p.dataOffset + p.record->begin, p.start,
                             p.record->shape, static_cast<uint8_t *>(t.data), start, t.shape,
                             dtypeSize(t.dtype));
    }
    if (covered != numElements(t.shape))
      fail(ckpt.dir + ": the shards hold " + std::to_string(covered) + " of the " +
           std::to_string(numElements(t.shape)) + " elements of this rank's slice of '" + e.name +
           "' (corrupted?)");
    report.copiedBytes += t.bytes;
  }
  return report;
}

std::string unusedStateTensor(const std::vector<std::string> &names,
                              const std::vector<uint64_t> &used, size_t &count) {
  size_t words = (names.size() + 63) / 64;
  std::string first;
  count = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    bool read = false;
    for (size_t r = 0; words && r < used.size() / words; ++r)
      read |= (used[r * words + i / 64] >> (i % 64)) & 1;
    if (!read && count++ == 0)
      first = names[i];
  }
  return first;
}

uint64_t loadState(Context &ctx, const CheckpointInfo &ckpt, const CheckpointPlan &plan,
                   int rank) {
  if (!ckpt.reshard)
    return loadShard(ctx, ckpt, plan, rank);
  return reshardState(ctx, ckpt).copiedBytes;
}

//===----------------------------------------------------------------------===//
// Writing checkpoints
//===----------------------------------------------------------------------===//

CheckpointWriter::CheckpointWriter(Context &ctx, MpiRun &mpi, std::string dir, int64_t keep,
                                   CheckpointPlan plan)
    : ctx_(ctx), mpi_(mpi), dir_(std::move(dir)), keep_(keep), plan_(std::move(plan)) {}

uint64_t CheckpointWriter::write(int64_t step, int64_t nextSample, int64_t skippedSteps,
                                 const ClipStats &clip, bool crash) {
  const bool root = mpi_.rank == 0;
  std::string tmp;
  mpi_.step([&] {
    if (!root)
      return;
    makeDirs(dir_, "checkpoint directory");
    tmp = makeTempDirectory(dir_ + "/.tmp-" + stepDirName(step) + "-");
    chmod(tmp.c_str(), 0755); // mkdtemp makes it 0700
  });
  tmp = mpi_.broadcast(tmp);
  auto cleanup = [&] {
    if (root)
      removeTree(tmp);
  };
  uint64_t mapped = 0;
  ShardInfo mine;
  mpi_.step([&] { mine = writeShard(tmp, step, mapped, crash); }, cleanup);
  std::vector<uint64_t> all = mpi_.allGather({mine.bytes, mine.hash});
  mpi_.step(
      [&] {
        if (!root)
          return;
        std::vector<ShardInfo> shards;
        for (int r = 0; r < mpi_.size; ++r)
          shards.push_back({shardName(r), all[2 * r], all[2 * r + 1]});
        writeManifest(tmp, step, nextSample, skippedSteps, clip, shards);
        syncPath(tmp);
        publish(tmp, step);
        prune(step);
      },
      cleanup);
  return mapped;
}

ShardInfo CheckpointWriter::writeShard(const std::string &tmp, int64_t step, uint64_t &mapped,
                                      bool crash) {
  std::map<std::string, std::string> meta = {
      {"hpc_plan_hash", plan_.planHash},
      {"hpc_step", std::to_string(step)},
      {"hpc_rank", std::to_string(mpi_.rank)},
      {"hpc_format_version", std::to_string(kCheckpointFormatVersion)}};
  for (const StateEntry &e : ctx_.stateList()) {
    const Tensor &t = ctx_.tensor(e.tensor);
    std::vector<int64_t> global, start;
    ctx_.stateSlice(e, global, start);
    json slice = json::array();
    for (size_t d = 0; d < t.shape.size(); ++d)
      slice.push_back({start[d], start[d] + t.shape[d]});
    meta["hpc_slice." + e.name] = json{{"global_shape", global}, {"slice", slice}}.dump();
  }
  std::vector<uint8_t> header = safetensorsHeader(stateEntries(ctx_, false), meta);
  std::vector<Piece> pieces = {{header.data(), header.size()}};
  for (const Piece &p : statePieces(ctx_, false))
    pieces.push_back(p);
  std::string path = tmp + "/" + shardName(mpi_.rank);
  if (crash) {
    // The fault crash-in-checkpoint: the first half of the shard's pieces
    // reach the file, then the process dies.
    pieces.resize((pieces.size() + 1) / 2);
    writeDurably(path, pieces);
    Faults::killSelf();
  }
  writeDurably(path, pieces);
  MappedFile f(path);
  mapped = f.size();
  return {shardName(mpi_.rank), f.size(), hpcrt_hash64(f.data(), f.size())};
}

void CheckpointWriter::writeManifest(const std::string &tmp, int64_t step, int64_t nextSample,
                                     int64_t skippedSteps, const ClipStats &clip,
                                     const std::vector<ShardInfo> &shards) {
  json m;
  m["format"] = "hpc-opt checkpoint";
  m["format_version"] = kCheckpointFormatVersion;
  m["plan_hash"] = plan_.planHash;
  m["model"] = plan_.model;
  m["step"] = step;
  m["data_position"] = {{"next_sample", nextSample}, {"step", step}};
  m["optimizer"] = {{"skipped_steps", skippedSteps}};
  if (clip.count)
    m["optimizer"]["clip_norm_auto"] = {
        {"mean", clip.mean}, {"var", clip.var}, {"count", clip.count}};
  m["rng"] = {{"seed_counter", 0}};
  m["world_size"] = plan_.worldSize;
  m["layout"] = plan_.layout;
  m["state_bytes"] = ctx_.stateBytes();
  json list = json::array();
  for (const ShardInfo &s : shards)
    list.push_back({{"file", s.file}, {"bytes", s.bytes}, {"hash", hashString(s.hash)}});
  m["shards"] = list;
  std::string text = m.dump(2) + "\n";
  writeDurably(tmp + "/manifest.json", {{text.data(), text.size()}});
}

void CheckpointWriter::publish(const std::string &tmp, int64_t step) {
  std::string final = dir_ + "/" + stepDirName(step);
  if (pathExists(final)) {
    // An older checkpoint of this step (a run resumed before it): move it
    // aside (rename onto an empty directory replaces it), then drop it.
    std::string old = makeTempDirectory(dir_ + "/.old-" + stepDirName(step) + "-");
    if (rename(final.c_str(), old.c_str()) != 0)
      fail(final + ": cannot move the older checkpoint aside: " + strerror(errno));
    if (rename(tmp.c_str(), final.c_str()) != 0)
      fail(final + ": cannot rename " + tmp + " to it: " + strerror(errno));
    removeTree(old);
  } else if (rename(tmp.c_str(), final.c_str()) != 0) {
    fail(final + ": cannot rename " + tmp + " to it: " + strerror(errno));
  }
  syncPath(dir_);
  std::string latest = stepDirName(step);
  writeAtomically(dir_ + "/latest", {{latest.data(), latest.size()}});
}

void CheckpointWriter::prune(int64_t step) {
  int64_t kept = 0;
  for (int64_t s : stepDirectories(dir_)) {
    if (s > step)
      continue;
    if (++kept > keep_)
      removeTree(dir_ + "/" + stepDirName(s));
  }
}

//===----------------------------------------------------------------------===//
// --save, --init-weights
//===----------------------------------------------------------------------===//

WholeParams wholeSplitParams(const Context &ctx, comm::MpiComm *comm, bool shapesOnly) {
  WholeParams whole;
  for (const StateEntry &e : ctx.stateList()) {
    const Tensor &t = ctx.tensor(e.tensor);
    if (!e.isParam() || e.split.empty())
      continue;
    std::vector<int64_t> global, start;
    ctx.stateSlice(e, global, start);
    if (global == t.shape)
      continue;
    WholeTensor &w = whole[e.name];
    w.shape = global;
    size_t elem = dtypeSize(t.dtype);
    w.data.assign(static_cast<size_t>(numElements(global)) * elem, 0);
    if (shapesOnly)
      continue;
    if (!comm)
      fail("state '" + e.name + "' is split over ranks: run under mpirun");
    // Each member's piece and where it starts, gathered over the axes that
    // split it; then put in place.
    std::vector<int64_t> axes;
    for (const std::vector<int64_t> &dim : e.split)
      axes.insert(axes.end(), dim.begin(), dim.end());
    comm::Communicator &group = comm->communicator(axes);
    size_t n = static_cast<size_t>(group.size());
    std::vector<uint8_t> pieces(n * t.bytes);
    std::vector<int64_t> starts(n * start.size());
    group.allGather(t.data, pieces.data(), t.bytes, HPCRT_U8);
    group.allGather(start.data(), starts.data(), start.size(), HPCRT_I64);
    for (size_t i = 0; i < n; ++i)
      copyOverlap(pieces.data() + i * t.bytes,
                  std::vector<int64_t>(starts.begin() + i * start.size(),
                                       starts.begin() + (i + 1) * start.size()),
                  t.shape, w.data.data(), std::vector<int64_t>(global.size(), 0), global, elem);
  }
  return whole;
}

void saveParams(const Context &ctx, const std::string &path, const CheckpointPlan &plan,
                int64_t step, const WholeParams &whole) {
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"hpc_plan_hash", plan.planHash}, {"hpc_step", std::to_string(step)}};
  std::vector<uint8_t> header = safetensorsHeader(stateEntries(ctx, true, whole), meta);
  std::vector<Piece> pieces = {{header.data(), header.size()}};
  for (const Piece &p : statePieces(ctx, true, whole))
    pieces.push_back(p);
  writeAtomically(path, pieces);
}

std::vector<uint8_t> onnxWithParams(const Context &ctx, const std::string &source,
                                    const WholeParams &whole, size_t *replaced, size_t *inlined) {
  std::map<std::string, InitializerData> values;
  for (const StateEntry &e : ctx.stateList()) {
    if (!e.isParam())
      continue;
    const Tensor &t = ctx.tensor(e.tensor);
    if (auto w = whole.find(e.name); w != whole.end())
      values[e.name] = {t.dtype, w->second.shape, w->second.data.data(), w->second.data.size()};
    else
      values[e.name] = {t.dtype, t.shape, t.data, t.bytes};
  }
  MappedFile f(source);
  size_t slash = source.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : source.substr(0, slash));
  InitializerRewrite r = replaceInitializers(f.data(), f.size(), values, dir, source);
  if (replaced)
    *replaced = r.replaced;
  if (inlined)
    *inlined = r.inlined;
  return std::move(r.model);
}

uint64_t initParams(Context &ctx, const std::string &path) {
  MappedFile f(path);
  SafetensorsFile st = parseSafetensors(f.data(), f.size(), path);
  copyRecords(ctx, f, st, true, "param");
  return f.size();
}

} // namespace hpcrt::driver
