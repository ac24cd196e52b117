//===- Main.cpp - the model executable's command line ----------------------===//
//
// main() of every compiled model: `./model run ...` binds inputs from .npy or
// .pb files, maps the weights next to the executable, runs the compiled
// program (hpc_program_run) --iters times, writes the outputs as .npy and
// prints a summary; `./model info` describes the model. Every error a user
// can cause ends in one line `<prog>: error: ...` and exit status 1.
//
// A partitioned program (its manifest has a "mesh") runs as one process per
// rank under mpirun: main() starts MPI, checks the world size against the
// mesh, and every rank reads the whole inputs and runs the program; rank 0
// alone writes the outputs and prints. After each phase (setup, every run,
// the outputs) the ranks agree on whether any failed; the lowest failing
// rank prints its one line and every rank exits 1. Without a mesh, no MPI
// call is made.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"
#include "../comm/CommQueue.h"
#include "../comm/MpiComm.h"
#include "../io/TensorIO.h"

#include <cblas.h>
#include <omp.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <thread>

using namespace hpcrt;

namespace {

/// The executable's name, for `<prog>: error: ...` lines.
std::string progName = "model";

/// Ends the process with `code` after the message (if any) was printed.
struct QuietExit {
  int code;
};

/// The rank the launcher gave this process, read before MPI_Init (0 when
/// not launched by mpirun), so that an error every rank meets before MPI
/// starts is printed once.
int launcherRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *v = getenv(var))
      return atoi(v);
  return 0;
}

/// The number of processes the launcher started (1 when not launched by
/// mpirun), read without MPI.
int launcherSize() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *v = getenv(var))
      return std::max(1, atoi(v));
  return 1;
}

/// MPI for the run of a program with a mesh: started by start(), finished
/// (buffered sends completed, communicators freed, MPI_Finalize) when it
/// goes out of scope.
struct MpiRun {
  bool active = false;
  int rank = 0, size = 1;
  std::unique_ptr<comm::MpiComm> comm;
  /// The asynchronous ops' communication thread (threaded when MPI allows
  /// calls from one thread at a time, whichever it is).
  std::unique_ptr<comm::CommQueue> queue;

  ~MpiRun() {
    if (!active)
      return;
    queue.reset();
    comm.reset();
    MPI_Finalize();
  }

  void start(Context &ctx) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      fail("MPI_Init failed");
    queue = std::make_unique<comm::CommQueue>(provided >= MPI_THREAD_SERIALIZED);
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
                progName.c_str(), static_cast<long long>(want),
                comm::meshString(mesh).c_str(), size, static_cast<long long>(want));
      throw QuietExit{1};
    }
    step([&] { comm = std::make_unique<comm::MpiComm>(mesh, MPI_COMM_WORLD); });
    ctx.setComm(comm.get());
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &localRanks);
    MPI_Comm_free(&node);
  }

  /// Runs f on every rank; if it threw on any rank, the lowest failing rank
  /// prints its error and every rank exits 1. Without MPI, f runs as is.
  /// f must not call collectives (a rank that failed early skips them).
  template <typename F> void step(F &&f) {
    if (!active) {
      f();
      return;
    }
    std::string error;
    try {
      f();
    } catch (const std::bad_alloc &) {
      error = "out of memory";
    } catch (const std::exception &e) {
      error = e.what();
    }
    agree(error);
  }

  /// Every rank passes its error ("" when none); see step().
  void agree(const std::string &error) {
    if (!active) {
      if (!error.empty())
        fail(error);
      return;
    }
    int mine = error.empty() ? INT_MAX : rank, first = INT_MAX;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
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

  /// Threads per rank when neither --threads nor OMP_NUM_THREADS says:
  /// the cores divided among the ranks on this node.
  int threadsPerRank() const {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, cores / std::max(1, localRanks));
  }

  int localRanks = 1; ///< ranks on this node
};

const char *usageText =
    "usage: %s run --input NAME=FILE.npy|FILE.pb ... --output-dir DIR\n"
    "              [--iters N] [--threads T] [--trace FILE.json] [--weights FILE]\n"
    "              [--verbose]\n"
    "       %s info\n"
    "A program compiled for a mesh runs one process per rank: mpirun -n N %s run ...\n";

void makeDirs(const std::string &dir) {
  std::string cur;
  size_t i = 0;
  while (i <= dir.size()) {
    size_t j = dir.find('/', i);
    if (j == std::string::npos)
      j = dir.size();
    cur = dir.substr(0, j);
    if (!cur.empty() && mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST)
      fail(dir + ": cannot create output directory: " + strerror(errno));
    i = j + 1;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + ": not a directory");
}

int64_t parsePositive(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  long long n = strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || n < 1 || n > 1000000000)
    fail(flag + " needs a positive integer, got '" + v + "'");
  return n;
}

std::string fileNameFor(const std::string &name) {
  std::string s;
  for (char ch : name)
    s += (isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_') ? ch : '_';
  return s;
}

std::string inputList(const Context &ctx) {
  std::string s;
  for (const NamedTensor &in : ctx.inputList())
    s += (s.empty() ? "'" : ", '") + in.name + "'";
  return s.empty() ? "none" : s;
}

void printSummary(const std::string &name, const Tensor &t) {
  double sum = 0, mn = INFINITY, mx = -INFINITY;
  bool nan = false;
  for (int64_t i = 0; i < t.numel; ++i) {
    double v = 0;
    switch (t.dtype) {
    case HPCRT_F32: v = t.as<float>()[i]; break;
    case HPCRT_F64: v = t.as<double>()[i]; break;
    case HPCRT_F16: v = halfToFloat(t.as<uint16_t>()[i]); break;
    case HPCRT_BF16: v = bf16ToFloat(t.as<uint16_t>()[i]); break;
    case HPCRT_I8: v = t.as<int8_t>()[i]; break;
    case HPCRT_U8: v = t.as<uint8_t>()[i]; break;
    case HPCRT_BOOL: v = t.as<uint8_t>()[i] != 0; break;
    case HPCRT_I16: v = t.as<int16_t>()[i]; break;
    case HPCRT_U16: v = t.as<uint16_t>()[i]; break;
    case HPCRT_I32: v = t.as<int32_t>()[i]; break;
    case HPCRT_U32: v = t.as<uint32_t>()[i]; break;
    case HPCRT_I64: v = static_cast<double>(t.as<int64_t>()[i]); break;
    case HPCRT_U64: v = static_cast<double>(t.as<uint64_t>()[i]); break;
    }
    if (std::isnan(v)) {
      nan = true;
      continue;
    }
    sum += v;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  printf("%s: %s %s", name.c_str(), dtypeName(t.dtype).c_str(), shapeString(t.shape).c_str());
  if (t.numel > 0)
    printf(" mean=%.6g min=%.6g max=%.6g", sum / static_cast<double>(t.numel), mn, mx);
  if (nan)
    printf(" (contains NaN)");
  printf("\n");
}

struct Options {
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir, trace, weights;
  int64_t iters = 1, threads = 0;
  bool verbose = false;
};

Options parseRun(int argc, char **argv) {
  Options o;
  bool haveOut = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i], flag = a, value;
    bool inlineValue = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      flag = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
      inlineValue = true;
    }
    auto next = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        fail(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--input" || flag == "-i") {
      std::string v = next();
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        fail("--input needs NAME=FILE, got '" + v + "'");
      o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
    } else if (flag == "--output-dir" || flag == "-o") {
      o.outputDir = next();
      haveOut = true;
    } else if (flag == "--iters") {
      o.iters = parsePositive(flag, next());
    } else if (flag == "--threads") {
      o.threads = parsePositive(flag, next());
    } else if (flag == "--trace") {
      o.trace = next();
    } else if (flag == "--weights") {
      o.weights = next();
    } else if (flag == "--verbose" || flag == "-v") {
      if (inlineValue)
        fail("--verbose takes no value");
      o.verbose = true;
    } else {
      fail("unknown option '" + a + "' (see --help)");
    }
  }
  if (!haveOut || o.outputDir.empty())
    fail("missing --output-dir DIR");
  return o;
}

void loadWeights(Context &ctx, const std::string &override, bool verbose) {
  if (!ctx.hasWeights()) {
    if (!override.empty())
      fail("--weights given, but the model has no weights");
    return;
  }
  std::string path = override;
  if (path.empty()) {
    path = ctx.weightsFile();
    if (path.empty() || path[0] != '/')
      path = executableDir() + "/" + path;
  }
  if (verbose)
    fprintf(stderr, "weights: %s (%llu bytes, hash %s)\n", path.c_str(),
            static_cast<unsigned long long>(ctx.weightsBytes()),
            hashString(ctx.weightsHash()).c_str());
  ctx.loadWeightsFile(path);
}

/// Rank 0 collects every rank's trace events (start times relative to the
/// barrier before the first run, pid = rank); other ranks get none.
std::vector<TraceEvent> gatherTrace(Context &ctx, MpiRun &mpi, double t0Us) {
  std::vector<double> mine;
  for (const TraceEvent &e : ctx.trace()) {
    mine.push_back(e.op);
    mine.push_back(e.run);
    mine.push_back(e.startUs - t0Us);
    mine.push_back(e.durationUs);
  }
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(mpi.size), displs(mpi.size);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < mpi.size; ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<double> all(mpi.rank == 0 ? std::max(total, 1) : 1);
  MPI_Gatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
              MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<TraceEvent> events;
  if (mpi.rank != 0)
    return events;
  for (int r = 0; r < mpi.size; ++r)
    for (int k = displs[r]; k + 3 < displs[r] + counts[r]; k += 4) {
      TraceEvent e{static_cast<int32_t>(all[k]), static_cast<int32_t>(all[k + 1]), all[k + 2],
                   all[k + 3]};
      e.rank = r;
      events.push_back(e);
    }
  return events;
}

int runCommand(int argc, char **argv) {
  Options o = parseRun(argc, argv);
  Context ctx(hpc_manifest);
  MpiRun mpi;
  if (ctx.hasMesh())
    mpi.start(ctx);
  else if (launcherSize() > 1)
    fail("compiled for 1 rank (no mesh) but started with " + std::to_string(launcherSize()) +
         "; run it without mpirun, or compile it with --mesh");
  const bool root = mpi.rank == 0;

  // Setup: every rank reads the whole inputs and maps the weights.
  mpi.step([&] {
    std::vector<bool> bound(ctx.inputList().size(), false);
    for (const auto &[name, file] : o.inputs) {
      size_t k = 0;
      while (k < ctx.inputList().size() && ctx.inputList()[k].name != name)
        ++k;
      if (k == ctx.inputList().size())
        fail("unknown input '" + name + "' (the model's inputs: " + inputList(ctx) + ")");
      if (bound[k])
        fail("input '" + name + "' given twice");
      HostTensor t = readTensorFile(file);
      ctx.bindInput(k, t.dtype, t.shape, t.data.data(), t.data.size());
      bound[k] = true;
    }
    for (size_t k = 0; k < bound.size(); ++k)
      if (!bound[k]) {
        const Tensor &t = ctx.tensor(ctx.inputList()[k].tensor);
        fail("missing input '" + ctx.inputList()[k].name + "' (" + dtypeName(t.dtype) + " " +
             shapeString(t.shape) + "): pass --input " + ctx.inputList()[k].name +
             "=FILE.npy");
      }
    if (root)
      makeDirs(o.outputDir);
    loadWeights(ctx, o.weights, o.verbose && root);
    int threads = static_cast<int>(o.threads);
    if (threads == 0 && mpi.active && !getenv("OMP_NUM_THREADS"))
      threads = mpi.threadsPerRank();
    if (threads > 0) {
      omp_set_num_threads(threads);
      openblas_set_num_threads(threads);
    }
    ctx.prepare();
    ctx.setTracing(!o.trace.empty());
  });

  double t0Us = ctx.nowUs();
  if (mpi.active) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0Us = ctx.nowUs();
  }
  double totalMs = 0, minMs = INFINITY;
  for (int64_t it = 0; it < o.iters; ++it) {
    if (mpi.active)
      MPI_Barrier(MPI_COMM_WORLD);
    ctx.beginRun();
    auto t0 = std::chrono::steady_clock::now();
    hpc_program_run(&ctx);
    if (mpi.queue) {
      std::string error = mpi.queue->finishRun();
      if (!error.empty() && !ctx.failed())
        ctx.setError(error);
    }
    auto t1 = std::chrono::steady_clock::now();
    if (mpi.comm)
      mpi.comm->completeSends();
    mpi.agree(ctx.failed() ? ctx.error() : std::string());
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    totalMs += ms;
    minMs = std::min(minMs, ms);
  }

  // Outputs: rank 0 writes whole tensors (the program gathered them).
  mpi.step([&] {
    if (!root)
      return;
    std::set<std::string> used;
    for (size_t k = 0; k < ctx.outputList().size(); ++k) {
      const NamedTensor &out = ctx.outputList()[k];
      const Tensor &t = ctx.tensor(out.tensor);
      std::string base = fileNameFor(out.name);
      if (base.empty())
        base = "output_" + std::to_string(k);
      std::string file = base;
      for (int n = 1; used.count(file); ++n)
        file = base + "_" + std::to_string(n);
      used.insert(file);
      writeNpy(o.outputDir + "/" + file + ".npy", t.dtype, t.shape, t.data);
      printSummary(out.name, t);
    }
    printf("time: %.3f ms/run (mean of %lld run%s, min %.3f ms)\n", totalMs / o.iters,
           static_cast<long long>(o.iters), o.iters == 1 ? "" : "s", minMs);
    if (o.verbose) {
      printf("arena: planned %llu bytes, high-water %llu bytes%s\n",
             static_cast<unsigned long long>(ctx.arenaBytes()),
             static_cast<unsigned long long>(ctx.highWater()),
             ctx.arenaBytes() == ctx.highWater() ? "" : " (differ)");
      printf("threads: %d\n", omp_get_max_threads());
    }
    fflush(stdout);
  });

  // Per-rank communication, per run (every run sends the same).
  if (mpi.active && o.verbose) {
    unsigned long long mine[2] = {mpi.comm->stats().bytesSent / o.iters,
                                  mpi.comm->stats().operations / o.iters};
    std::vector<unsigned long long> all(2 * mpi.size);
    MPI_Gather(mine, 2, MPI_UNSIGNED_LONG_LONG, all.data(), 2, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);
    if (root) {
      std::vector<comm::MeshAxis> mesh = mpi.comm->mesh();
      printf("ranks: %d (mesh %s)\n", mpi.size, comm::meshString(mesh).c_str());
      for (int r = 0; r < mpi.size; ++r)
        printf("comm: rank %d sent %llu bytes in %llu collectives per run\n", r, all[2 * r],
               all[2 * r + 1]);
      if (ctx.plannedBytesPerRank() >= 0)
        printf("comm: the compiler planned %lld bytes per rank per run%s\n",
               static_cast<long long>(ctx.plannedBytesPerRank()),
               static_cast<unsigned long long>(ctx.plannedBytesPerRank()) == all[0]
                   ? ""
                   : " (differs from rank 0's)");
      fflush(stdout);
    }
  }

  if (!o.trace.empty()) {
    std::vector<TraceEvent> events;
    if (mpi.active)
      events = gatherTrace(ctx, mpi, t0Us);
    mpi.step([&] {
      if (!mpi.active)
        ctx.writeTrace(o.trace);
      else if (root)
        ctx.writeTrace(o.trace, events);
      if (o.verbose && root) {
        printf("trace: %s (%zu events%s)\n", o.trace.c_str(), ctx.trace().size(),
               mpi.active ? " on rank 0" : "");
        fflush(stdout);
      }
    });
  }
  return 0;
}

int infoCommand(int argc, char **argv) {
  if (argc > 2)
    fail("info takes no arguments, got '" + std::string(argv[2]) + "'");
  Context ctx(hpc_manifest);
  printf("model: %s\n", ctx.model().empty() ? "(unnamed)" : ctx.model().c_str());
  printf("arena: %llu bytes\n", static_cast<unsigned long long>(ctx.arenaBytes()));
  if (ctx.hasWeights())
    printf("weights: %s (%llu bytes, hash %s)\n", ctx.weightsFile().c_str(),
           static_cast<unsigned long long>(ctx.weightsBytes()),
           hashString(ctx.weightsHash()).c_str());
  else
    printf("weights: none\n");
  if (ctx.hasMesh()) {
    std::string axes;
    for (const MeshAxisInfo &a : ctx.mesh())
      axes += (axes.empty() ? "" : ", ") + a.name + "=" + std::to_string(a.size) +
              (a.level.empty() ? "" : " (" + a.level + ")");
    printf("mesh: %s; %lld ranks (run with mpirun -n %lld)\n", axes.c_str(),
           static_cast<long long>(ctx.meshRanks()), static_cast<long long>(ctx.meshRanks()));
    if (ctx.plannedBytesPerRank() >= 0)
      printf("comm: %lld bytes sent per rank per run (planned)\n",
             static_cast<long long>(ctx.plannedBytesPerRank()));
  }
  printf("ops: %zu\n", ctx.ops().size());
  for (const NamedTensor &in : ctx.inputList()) {
    const Tensor &t = ctx.tensor(in.tensor);
    printf("input  %s: %s %s\n", in.name.c_str(), dtypeName(t.dtype).c_str(),
           shapeString(t.shape).c_str());
  }
  for (const NamedTensor &out : ctx.outputList()) {
    const Tensor &t = ctx.tensor(out.tensor);
    printf("output %s: %s %s\n", out.name.c_str(), dtypeName(t.dtype).c_str(),
           shapeString(t.shape).c_str());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string prog = argc > 0 ? argv[0] : "model";
  size_t slash = prog.rfind('/');
  if (slash != std::string::npos)
    prog = prog.substr(slash + 1);
  progName = prog;
  // Errors met before MPI starts are the same on every rank: print once.
  const bool quiet = launcherRank() != 0;
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      printf(usageText, prog.c_str(), prog.c_str(), prog.c_str());
      return 0;
    }
    if (cmd == "run")
      return runCommand(argc, argv);
    if (cmd == "info")
      return infoCommand(argc, argv);
    if (cmd.empty())
      fail("missing command: run or info (see --help)");
    fail("unknown command '" + cmd + "': run or info (see --help)");
  } catch (const QuietExit &e) {
    return e.code;
  } catch (const std::bad_alloc &) {
    if (!quiet)
      fprintf(stderr, "%s: error: out of memory\n", prog.c_str());
  } catch (const std::exception &e) {
    if (!quiet)
      fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
  }
  return 1;
}
