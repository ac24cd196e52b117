//===- Process.cpp - MPI start, error agreement, the program's runs -------===//
//
// MpiRun (see Process.h): MPI_Init with thread level SERIALIZED, the
// world-size check against the manifest's mesh, one communicator per subset
// of the mesh axes, the agreement on errors after each phase, and the few
// collectives the driver itself needs (a barrier, broadcasting a name,
// gathering counts). loadWeights (the binary's own weights file, or a by-name
// file laid out for the plan: WeightsByName.h), runProgram and finishRun are
// the setup and one run of the compiled program as `run` and `train` both
// do them.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "WeightsByName.h"

#include "../comm/PeerWait.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

namespace hpcrt::driver {

std::string progName = "model";

int launcherRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *v = getenv(var))
      return atoi(v);
  return 0;
}

int launcherSize() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *v = getenv(var))
      return std::max(1, atoi(v));
  return 1;
}

// A binary holds either the one program or the stage table (hpcrt.h): the
// other's symbols are absent, so both are referenced weakly.
#pragma weak hpc_manifest
#pragma weak hpc_program_run
#pragma weak hpc_stage_count
#pragma weak hpc_stage_manifests
#pragma weak hpc_stage_programs
#pragma weak hpc_conservative_manifest
#pragma weak hpc_conservative_run

const CompiledProgram &compiledProgram() {
  static const CompiledProgram program = [] {
    CompiledProgram p;
    if (&hpc_stage_count == nullptr) {
      p.manifest = hpc_manifest;
      p.run = hpc_program_run;
      if (&hpc_conservative_run != nullptr) {
        p.conservativeManifest = hpc_conservative_manifest;
        p.conservativeRun = hpc_conservative_run;
      }
      return p;
    }
    p.stages = hpc_stage_count;
    int size = launcherSize(), rank = launcherRank();
    // One process (`info`, or a run the mesh check then refuses) shows stage 0.
    if (size > 1 && size % p.stages != 0)
      fail("compiled for " + std::to_string(p.stages) + " pipeline stages (pp=" +
           std::to_string(p.stages) + ") but started with " + std::to_string(size) +
           " rank" + (size == 1 ? "" : "s") + ", not a multiple of " +
           std::to_string(p.stages) + " (run `info` for the mesh)");
    p.stage = size % p.stages ? 0 : rank / (size / p.stages);
    p.manifest = hpc_stage_manifests[p.stage];
    p.manifests.assign(hpc_stage_manifests, hpc_stage_manifests + p.stages);
    p.run = hpc_stage_programs[p.stage];
    return p;
  }();
  return program;
}

std::string compiledPlanText() {
  if (&hpc_stage_count == nullptr)
    return hpc_manifest;
  std::string text;
  for (int k = 0; k < hpc_stage_count; ++k)
    text += hpc_stage_manifests[k];
  return text;
}

int64_t compiledParameterCount() {
  std::vector<const char *> manifests = compiledProgram().manifests;
  if (manifests.empty())
    manifests = {compiledProgram().manifest};
  std::set<std::string> seen;
  int64_t count = 0;
  for (const char *text : manifests) {
    nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !m.contains("state") || !m["state"].is_array() ||
        !m.contains("tensors") || !m["tensors"].is_array())
      continue;
    std::vector<int64_t> axisSizes;
    // The manifest was checked when the context read it (mesh.axes[].size).
    if (m.contains("mesh") && m["mesh"].is_object() && m["mesh"].contains("axes"))
      for (const auto &a : m["mesh"]["axes"])
        axisSizes.push_back(a.value("size", int64_t(1)));
    for (const auto &e : m["state"]) {
      if (e.value("role", "") != "param" || !seen.insert(e.value("name", "")).second)
        continue;
      const auto &shape = m["tensors"].at(e["tensor"].get<size_t>())["shape"];
      int64_t n = 1;
      for (size_t d = 0; d < shape.size(); ++d) {
        n *= shape[d].get<int64_t>();
        // A split dimension holds 1/pieces of the whole on each rank.
        if (e.contains("split") && d < e["split"].size())
          for (const auto &a : e["split"][d])
            n *= a.get<size_t>() < axisSizes.size() ? axisSizes[a.get<size_t>()] : 1;
      }
      count += n;
    }
  }
  return count;
}

double parsePeerTimeout(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  double s = strtod(v.c_str(), &end);
  if (v.empty() || *end || errno || !(s > 0 && s <= 1e6))
    fail(flag + " needs a positive number of seconds (at most 1e6), got '" + v + "'");
  return s;
}

double peerTimeoutFromEnv() {
  const char *v = getenv("HPCRT_PEER_TIMEOUT");
  return v && *v ? parsePeerTimeout("HPCRT_PEER_TIMEOUT", v) : comm::kDefaultPeerTimeoutS;
}

MpiRun::~MpiRun() {
  if (!active)
    return;
  queue.reset();
  comm.reset();
  comm::finishPeerWait();
  MPI_Finalize();
}

void MpiRun::start(Context &ctx) {
  double timeout = peerTimeout;
  try {
    if (timeout <= 0)
      timeout = peerTimeoutFromEnv();
  } catch (const Error &e) {
    // Every rank meets it: the launcher's rank 0 alone prints it.
    if (launcherRank() == 0)
      fprintf(stderr, "%s: error: %s\n", progName.c_str(), e.what());
    throw QuietExit{1};
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    fail("MPI_Init failed");
  comm::setPeerTimeout(timeout);
  comm::startPeerWait(MPI_COMM_WORLD, progName);
  queue = std::make_unique<comm::CommQueue>(provided >= MPI_THREAD_SERIALIZED, &ctx);
  ctx.setCommQueue(queue.get());
  active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<comm::MeshAxis> mesh;
  for (const MeshAxisInfo &a : ctx.mesh())
    mesh.push_back({a.name, a.size, a.level});
  int64_t want = ctx.meshRanks();
  if (size != want) {
    if (rank == 0)
      fprintf(stderr,
              "%s: error: compiled for %lld ranks (mesh %s) but started with %d; "
              "run it with mpirun -n %lld\n",
              progName.c_str(), static_cast<long long>(want), comm::meshString(mesh).c_str(),
              size, static_cast<long long>(want));
    throw QuietExit{1};
  }
  step([&] { comm = std::make_unique<comm::MpiComm>(mesh, MPI_COMM_WORLD); });
  ctx.setComm(comm.get());
  queue->setProgress([c = comm.get()] { return c->progress(); });
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &localRanks);
  // This node's name: the lowest world rank on it.
  int leader = rank;
  MPI_Request r;
  comm::checkMpi(MPI_Iallreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node, &r),
                 "MPI_Iallreduce");
  comm::waitCollective(r, "the node census", node);
  MPI_Comm_free(&node);
  std::vector<uint64_t> nodeOf = allGather({static_cast<uint64_t>(leader)});
  checkPlacement(ctx.ranksPerNode(), nodeOf);
  std::vector<uint64_t> leaders = nodeOf;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  auto mine = std::lower_bound(leaders.begin(), leaders.end(), static_cast<uint64_t>(leader));
  this->node = static_cast<int>(mine - leaders.begin());
  comm->setNodes(std::move(nodeOf));
}

void MpiRun::checkPlacement(int64_t perNode, const std::vector<uint64_t> &nodeOf) {
  // Every rank has the same table, so every rank finds the same error.
  std::string error = comm::placementError(perNode, nodeOf);
  if (error.empty())
    return;
  if (rank == 0)
    fprintf(stderr, "%s: error: %s\n", progName.c_str(), error.c_str());
  throw QuietExit{1};
}

bool MpiRun::anyFailed(bool mine) {
  if (!active)
    return false;
  int v = mine ? 1 : 0, any = 0;
  MPI_Request r;
  comm::checkMpi(MPI_Iallreduce(&v, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r),
                 "MPI_Iallreduce");
  comm::waitCollective(r, "the agreement on errors", MPI_COMM_WORLD);
  return any != 0;
}

void MpiRun::agree(const std::string &error) {
  if (!active) {
    if (!error.empty())
      fail(error);
    return;
  }
  int mine = error.empty() ? INT_MAX : rank, first = INT_MAX;
  MPI_Request r;
  comm::checkMpi(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &r),
                 "MPI_Iallreduce");
  comm::waitCollective(r, "the agreement on errors", MPI_COMM_WORLD);
  if (first == INT_MAX)
    return;
  if (first == rank) {
    if (rank == 0)
      fprintf(stderr, "%s: error: %s\n", progName.c_str(), error.c_str());
    else
      fprintf(stderr, "%s: error: rank %d: %s\n", progName.c_str(), rank, error.c_str());
    fflush(stderr);
  }
  throw QuietExit{1};
}

int MpiRun::threadsPerRank() const {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, localRanks));
}

void MpiRun::barrier() {
  if (!active)
    return;
  MPI_Request r;
  comm::checkMpi(MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
  comm::waitCollective(r, "a barrier", MPI_COMM_WORLD);
}

std::string MpiRun::broadcast(const std::string &text) {
  if (!active)
    return text;
  unsigned long long n = text.size();
  MPI_Request r;
  comm::checkMpi(MPI_Ibcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD, &r), "MPI_Ibcast");
  comm::waitCollective(r, "a broadcast", MPI_COMM_WORLD);
  std::string out = rank == 0 ? text : std::string(n, '\0');
  if (n) {
    comm::checkMpi(MPI_Ibcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD, &r),
                   "MPI_Ibcast");
    comm::waitCollective(r, "a broadcast", MPI_COMM_WORLD);
  }
  return out;
}

std::vector<uint64_t> MpiRun::allGather(const std::vector<uint64_t> &values) {
  if (!active)
    return values;
  std::vector<unsigned long long> mine(values.begin(), values.end());
  std::vector<unsigned long long> all(mine.size() * static_cast<size_t>(size));
  MPI_Request r;
  comm::checkMpi(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()),
                                MPI_UNSIGNED_LONG_LONG, all.data(),
                                static_cast<int>(mine.size()), MPI_UNSIGNED_LONG_LONG,
                                MPI_COMM_WORLD, &r),
                 "MPI_Iallgather");
  comm::waitCollective(r, "an all_gather", MPI_COMM_WORLD);
  return std::vector<uint64_t>(all.begin(), all.end());
}

uint64_t MpiRun::maxOver(uint64_t value) {
  if (!active)
    return value;
  unsigned long long v = value, m = 0;
  MPI_Request r;
  comm::checkMpi(MPI_Iallreduce(&v, &m, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &r),
                 "MPI_Iallreduce");
  comm::waitCollective(r, "an all_reduce", MPI_COMM_WORLD);
  return m;
}

uint64_t loadWeights(Context &ctx, const std::string &override, bool verbose) {
  if (!ctx.hasWeights()) {
    if (!override.empty())
      fail("--weights given, but the model has no weights");
    return 0;
  }
  std::string own = ctx.weightsFile();
  if (own.empty() || own[0] != '/')
    own = executableDir() + "/" + own;
  if (!override.empty() && isByNameWeights(override)) {
    ByNameReport r = loadWeightsByName(ctx, own, override);
    if (verbose)
      fprintf(stderr,
              "weights: %s by name, laid out for this plan (%zu entries from it, %zu from "
              "%s; %llu bytes%s)\n",
              override.c_str(), r.fromFile, r.fromOwn, own.c_str(),
              static_cast<unsigned long long>(ctx.weightsBytes()),
              r.narrowed ? ("; " + std::to_string(r.narrowed) + " rounded from f32").c_str()
                         : "");
    if (!r.unused.empty() && launcherRank() == 0) {
      fprintf(stderr, "%s: warning: %s: %zu tensor%s the program does not use ('%s'%s)\n",
              progName.c_str(), override.c_str(), r.unused.size(),
              r.unused.size() == 1 ? "" : "s", r.unused[0].c_str(),
              r.unused.size() == 1 ? "" : ", ...");
      fflush(stderr);
    }
    return r.mappedBytes;
  }
  std::string path = override.empty() ? own : override;
  if (verbose)
    fprintf(stderr, "weights: %s (%llu bytes, hash %s)\n", path.c_str(),
            static_cast<unsigned long long>(ctx.weightsBytes()),
            hashString(ctx.weightsHash()).c_str());
  ctx.loadWeightsFile(path);
  return 0;
}

void setupKernels(Context &ctx, ProgramRun run) {
  ctx.beginSetup();
  (run ? run : compiledProgram().run)(&ctx);
  ctx.endSetup();
  if (!ctx.kernelNote().empty() && launcherRank() == 0) {
    fprintf(stderr, "%s: note: %s\n", progName.c_str(), ctx.kernelNote().c_str());
    fflush(stderr);
  }
}

void runProgram(Context &ctx, MpiRun &mpi, ProgramRun run) {
  ctx.beginRun();
  (run ? run : compiledProgram().run)(&ctx);
  if (mpi.queue) {
    std::string error = mpi.queue->finishRun();
    if (!error.empty() && !ctx.failed())
      ctx.setError(error);
  }
}

void finishRun(Context &ctx, MpiRun &mpi) {
  if (mpi.comm)
    mpi.comm->completeSends();
  mpi.agree(ctx.failed() ? ctx.error() : std::string());
}

namespace {

/// Rank 0 collects every rank's trace events (start times relative to the
/// barrier before the first run, pid = rank); other ranks get none.
std::vector<TraceEvent> gatherTrace(Context &ctx, MpiRun &mpi, double t0Us) {
  constexpr int kFields = 5; // op, run, start, duration, tid
  std::vector<double> mine;
  for (const TraceEvent &e : ctx.trace()) {
    mine.push_back(e.op);
    mine.push_back(e.run);
    mine.push_back(e.startUs - t0Us);
    mine.push_back(e.durationUs);
    mine.push_back(e.tid);
  }
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(mpi.size), displs(mpi.size);
  MPI_Request r;
  comm::checkMpi(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &r),
                 "MPI_Igather");
  comm::waitCollective(r, "the trace's gather", MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < mpi.size; ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<double> all(mpi.rank == 0 ? std::max(total, 1) : 1);
  comm::checkMpi(MPI_Igatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(),
                              displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD, &r),
                 "MPI_Igatherv");
  comm::waitCollective(r, "the trace's gather", MPI_COMM_WORLD);
  std::vector<TraceEvent> events;
  if (mpi.rank != 0)
    return events;
  for (int r = 0; r < mpi.size; ++r)
    for (int k = displs[r]; k + kFields <= displs[r] + counts[r]; k += kFields) {
      TraceEvent e{static_cast<int32_t>(all[k]), static_cast<int32_t>(all[k + 1]), all[k + 2],
                   all[k + 3], r, static_cast<int32_t>(all[k + 4])};
      events.push_back(e);
    }
  return events;
}

} // namespace

std::vector<uint64_t> gatherCommPer(MpiRun &mpi, const comm::CommStats &stats, uint64_t units) {
  units = std::max<uint64_t>(units, 1);
  return mpi.allGather(
      {stats.bytesSent / units, stats.operations / units, stats.bytesInterNode / units});
}

void printCommPer(const Context &ctx, const std::vector<uint64_t> &all, const char *unit) {
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  uint64_t across = 0;
  for (size_t r = 0; 3 * r + 2 < all.size(); ++r) {
    printf("comm: rank %zu sent %llu bytes in %llu collectives per %s (%llu across nodes)\n", r,
           u(all[3 * r]), u(all[3 * r + 1]), unit, u(all[3 * r + 2]));
    across += all[3 * r + 2];
  }
  if (ctx.plannedBytesPerRank() >= 0 && !all.empty())
    printf("comm: the compiler planned %lld bytes per rank per %s%s\n",
           static_cast<long long>(ctx.plannedBytesPerRank()), unit,
           static_cast<uint64_t>(ctx.plannedBytesPerRank()) == all[0] ? ""
                                                                      : " (differs from rank 0's)");
  if (ctx.plannedBytesAcrossNodes() >= 0)
    printf("comm: the compiler planned %lld bytes across nodes per %s (all ranks), the ranks "
           "sent %llu\n",
           static_cast<long long>(ctx.plannedBytesAcrossNodes()), unit, u(across));
}

void writeTrace(Context &ctx, MpiRun &mpi, const std::string &path, double t0Us,
                bool verbose) {
  std::vector<TraceEvent> events;
  if (mpi.active)
    events = gatherTrace(ctx, mpi, t0Us);
  mpi.step([&] {
    if (!mpi.active)
      ctx.writeTrace(path);
    else if (mpi.rank == 0) {
      const CompiledProgram &program = compiledProgram();
      std::vector<std::vector<OpInfo>> stageOps;
      for (const char *manifest : program.manifests)
        stageOps.push_back(Context::manifestOps(manifest));
      ctx.writeTrace(path, events, program.stages > 1 ? stageOps : decltype(stageOps){},
                     mpi.size / program.stages);
    }
    if (verbose && mpi.rank == 0) {
      printf("trace: %s (%zu events%s)\n", path.c_str(), ctx.trace().size(),
             mpi.active ? " on rank 0" : "");
      fflush(stdout);
    }
  });
}

} // namespace hpcrt::driver
