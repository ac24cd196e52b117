//===- Main.cpp - the model executable's command line ----------------------===//
//
// main() of every compiled model: `./model run ...` binds inputs from .npy or
// .pb files, maps the weights next to the executable, runs the compiled
// program (hpc_program_run) --iters times, writes the outputs as .npy and
// prints a summary; `./model train ...` (a program compiled with --train)
// is the driver's (runtime/driver/Train.h); `./model info` describes the
// model. Backend-neutral: the kernels, their threads and their memory are
// the context's backend's (Backend.h). Every error a user can cause ends in
// one line `<prog>: error: ...` and exit status 1.
//
// A partitioned program (its manifest has a "mesh") runs as one process per
// rank under mpirun: main() starts MPI, checks the world size against the
// mesh, and every rank reads the whole inputs and runs the program; rank 0
// alone writes the outputs and prints. After each phase (setup, every run,
// the outputs) the ranks agree on whether any failed; the lowest failing
// rank prints its one line and every rank exits 1. Without a mesh, no MPI
// call is made. The process model (MpiRun, the error agreement, the
// weights file's resolution) is runtime/driver/Process.h's, shared with
// `train`.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Float16.h"
#include "../driver/Args.h"
#include "../driver/Checkpoint.h"
#include "../driver/Files.h"
#include "../driver/Process.h"
#include "../driver/Train.h"
#include "../io/TensorIO.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <sys/auxv.h>
#include <unistd.h>

using namespace hpcrt;

namespace {

using driver::loadWeights;
using driver::makeDirs;
using driver::MpiRun;
using driver::parsePositive;
using driver::progName;
using driver::QuietExit;

/// The backend's process environment (Backend::setProcessEnvironment):
/// when it sets variables that libraries loaded before main() read once,
/// the program runs itself again, same arguments, same process id (a
/// launcher or mpirun keeps tracking it), so that they read them. The file
/// is /proc/self/exe's target, so the process keeps its name (ps, top).
/// Not when the dynamic loader was run as the program (`ld.so ./model ...`:
/// AT_BASE is 0 and /proc/self/exe is the loader) or the file is gone; if
/// execv fails the program goes on with the libraries' defaults.
void applyBackendEnvironment(char **argv) {
  if (!defaultBackend().setProcessEnvironment() || getauxval(AT_BASE) == 0)
    return;
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || static_cast<size_t>(len) >= sizeof self - 1)
    return;
  self[len] = '\0';
  if (access(self, X_OK) != 0)
    return;
  execv(self, argv);
}

const char *usageText =
    "usage: %s run --input NAME=FILE.npy|FILE.pb ... --output-dir DIR\n"
    "              [--iters N] [--warmup N] [--threads T] [--trace FILE.json]\n"
    "              [--weights FILE] [--verbose] [--peer-timeout S] [--check-inputs]\n"
    "       %s train --data NAME=FILE.npy ... | --tokens FILE  --steps N\n"
    "              [--metrics FILE.jsonl [--profile-every K]] [--log-every K] [--threads T]\n"
    "              [--ckpt-dir DIR [--ckpt-every K] [--ckpt-keep K]]\n"
    "              [--resume | --resume-from DIR/step-N]\n"
    "              [--lr F] [--lr-schedule constant|cosine:WARMUP,TOTAL|linear:WARMUP,TOTAL]\n"
    "              [--eval-data NAME=FILE ... | --eval-tokens FILE] [--eval-every K]\n"
    "              [--eval-batches K] [--init-weights FILE.safetensors]\n"
    "              [--save FILE.safetensors] [--dump-outputs DIR --dump-steps S,...]\n"
    "              [--weights FILE] [--trace FILE.json] [--verbose] [--peer-timeout S]\n"
    "              [--check-inputs] [--on-divergence rollback|stop|ignore]\n"
    "              [--spike-window N] [--spike-sigma K] [--snapshot-every K]\n"
    "              [--max-rollbacks R] [--rollback-window W] [--conservative-plan]\n"
    "              (a program compiled with --train; HPC_FAULT=kill@STEP,... injects\n"
    "              faults, for tests; see docs/training.md)\n"
    "       %s info\n"
    "A program compiled for a mesh runs one process per rank: mpirun -n N %s run|train ...\n"
    "--peer-timeout S: a rank that waits S seconds for another ends the job, naming\n"
    "the rank that stopped answering (default 300, or HPCRT_PEER_TIMEOUT)\n"
    "--check-inputs: refuse a float input (`run`) or --data file (`train`) holding\n"
    "NaN or Inf, naming the element (off by default: NaN is a legitimate input of\n"
    "some models)\n";

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
  int64_t warmup = 0; ///< untimed runs before the --iters timed ones
  double peerTimeout = 0; ///< 0: HPCRT_PEER_TIMEOUT or the default
  bool verbose = false;
  bool checkInputs = false; ///< refuse NaN and Inf in float inputs
};

Options parseRun(int argc, char **argv) {
  Options o;
  driver::ArgCursor a(argc, argv, 2);
  while (a.next()) {
    const std::string &flag = a.flag();
    if (flag == "--input" || flag == "-i") {
      o.inputs.push_back(driver::parseNameValue("--input", a.value()));
    } else if (flag == "--output-dir" || flag == "-o") {
      o.outputDir = a.path();
    } else if (flag == "--iters") {
      o.iters = parsePositive(flag, a.value());
    } else if (flag == "--warmup") {
      o.warmup = driver::parseCount(flag, a.value());
    } else if (flag == "--threads") {
      o.threads = driver::parseThreads(flag, a.value());
    } else if (flag == "--trace") {
      o.trace = a.path();
    } else if (flag == "--weights") {
      o.weights = a.path();
    } else if (flag == "--peer-timeout") {
      o.peerTimeout = driver::parsePeerTimeout(flag, a.value());
    } else if (flag == "--verbose" || flag == "-v") {
      a.noValue();
      o.verbose = true;
    } else if (flag == "--check-inputs") {
      a.noValue();
      o.checkInputs = true;
    } else {
      fail("unknown option '" + a.arg() + "' (see --help)");
    }
  }
  if (o.outputDir.empty())
    fail("missing --output-dir DIR");
  return o;
}

int runCommand(int argc, char **argv) {
  Options o = parseRun(argc, argv);
  Context ctx(driver::compiledProgram().manifest);
  if (ctx.isTrainStep())
    fail("this is a train-step program (compiled with --train): run it with `train`, not "
         "`run`");
  MpiRun mpi;
  mpi.peerTimeout = o.peerTimeout;
  if (ctx.hasMesh())
    mpi.start(ctx);
  else if (driver::launcherSize() > 1)
    fail("compiled for 1 rank (no mesh) but started with " +
         std::to_string(driver::launcherSize()) +
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
      const Tensor &want = ctx.tensor(ctx.inputList()[k].tensor);
      HostTensor t = readTensorFile(
          file, tensorFileLimit(want.bytes, static_cast<uint64_t>(want.numel)));
      ctx.bindInput(k, t.dtype, t.shape, t.data.data(), t.data.size());
      if (o.checkInputs)
        checkFinite(t, "input '" + name + "'", "--check-inputs");
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
    if (threads > 0)
      ctx.backend().setThreads(threads);
    ctx.prepare();
    driver::setupKernels(ctx);
    ctx.setTracing(!o.trace.empty());
  });

  double t0Us = ctx.nowUs();
  if (mpi.active) {
    mpi.barrier();
    t0Us = ctx.nowUs();
  }
  // Warm-up runs first (the first run faults in the mapped weights and the
  // arena: GPT-2 small's takes ~40 ms more than the next ones), untimed.
  double totalMs = 0, minMs = INFINITY;
  for (int64_t it = 0; it < o.warmup + o.iters; ++it) {
    mpi.barrier();
    auto t0 = std::chrono::steady_clock::now();
    driver::runProgram(ctx, mpi);
    auto t1 = std::chrono::steady_clock::now();
    driver::finishRun(ctx, mpi);
    if (it < o.warmup)
      continue;
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    totalMs += ms;
    minMs = std::min(minMs, ms);
  }

  // Outputs: rank 0 writes whole tensors (the program gathered them).
  mpi.step([&] {
    if (!root)
      return;
    std::vector<std::string> files = driver::outputFileNames(ctx);
    for (size_t k = 0; k < ctx.outputList().size(); ++k) {
      const NamedTensor &out = ctx.outputList()[k];
      const Tensor &t = ctx.tensor(out.tensor);
      writeNpy(o.outputDir + "/" + files[k] + ".npy", t.dtype, t.shape, t.data);
      printSummary(out.name, t);
    }
    printf("time: %.3f ms/run (mean of %lld run%s, min %.3f ms)\n", totalMs / o.iters,
           static_cast<long long>(o.iters), o.iters == 1 ? "" : "s", minMs);
    if (o.verbose) {
      printf("arena: planned %llu bytes, high-water %llu bytes%s\n",
             static_cast<unsigned long long>(ctx.arenaBytes()),
             static_cast<unsigned long long>(ctx.highWater()),
             ctx.arenaBytes() == ctx.highWater() ? "" : " (differ)");
      printf("threads: %d\n", ctx.backend().threads());
      printf("kernels: %s\n", ctx.backend().describeKernels(ctx).c_str());
    }
    fflush(stdout);
  });

  // Per-rank communication, per run (every run sends the same).
  if (mpi.active && o.verbose) {
    auto runs = static_cast<uint64_t>(o.warmup + o.iters);
    std::vector<uint64_t> all = driver::gatherCommPer(mpi, mpi.comm->stats(), runs);
    if (root) {
      std::vector<comm::MeshAxis> mesh = mpi.comm->mesh();
      printf("ranks: %d (mesh %s)\n", mpi.size, comm::meshString(mesh).c_str());
      driver::printCommPer(ctx, all, "run");
      fflush(stdout);
    }
  }

  if (!o.trace.empty())
    driver::writeTrace(ctx, mpi, o.trace, t0Us, o.verbose);
  return 0;
}

/// The kernels' own memory, which is known only once their primitives are
/// made on this CPU: a setup run on the real weights (single-rank programs;
/// a mesh program's ranks report it with `run --verbose`).
void printKernelMemory(Context &ctx) {
  if (ctx.hasMesh()) {
    printf("kernels: measured per rank by `run --verbose`\n");
    return;
  }
  try {
    loadWeights(ctx, "", false);
    ctx.prepare();
    driver::setupKernels(ctx);
    if (ctx.failed())
      fail(ctx.error());
    printf("kernels: %s (made on this CPU)\n", ctx.backend().describeKernels(ctx).c_str());
  } catch (const Error &e) {
    printf("kernels: not measured (%s)\n", e.what());
  }
}

int infoCommand(int argc, char **argv) {
  if (argc > 2)
    fail("info takes no arguments, got '" + std::string(argv[2]) + "'");
  const driver::CompiledProgram &program = driver::compiledProgram();
  Context ctx(program.manifest);
  printf("model: %s\n", ctx.model().empty() ? "(unnamed)" : ctx.model().c_str());
  if (program.stages > 1)
    printf("pipeline: %d stages, one program each; this is stage %d's (a rank runs its pp "
           "coordinate's)\n",
           program.stages, program.stage);
  printf("arena: %llu bytes\n", static_cast<unsigned long long>(ctx.arenaBytes()));
  printf("precision: %s\n", ctx.precision().c_str());
  if (!ctx.recompute().empty())
    printf("recompute: %s (the backward reads activations computed again)\n",
           ctx.recompute().c_str());
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
  if (int64_t zero = ctx.zeroStage())
    printf("state layout: %s (each dp rank holds its rows of the optimizer state%s)\n",
           driver::planLayout(ctx).c_str(),
           zero == 3 ? ", gradients and parameters" : zero == 2 ? " and gradients" : "");
  if (ctx.isTrainStep())
    driver::printTrainInfo(ctx);
  printf("ops: %zu\n", ctx.ops().size());
  printKernelMemory(ctx);
  std::string threads = ctx.backend().describeThreads();
  if (!threads.empty())
    printf("threads: %s\n", threads.c_str());
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
  applyBackendEnvironment(argv);
  std::string prog = argc > 0 ? argv[0] : "model";
  size_t slash = prog.rfind('/');
  if (slash != std::string::npos)
    prog = prog.substr(slash + 1);
  progName = prog;
  // Errors met before MPI starts are the same on every rank: print once.
  const bool quiet = driver::launcherRank() != 0;
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      printf(usageText, prog.c_str(), prog.c_str(), prog.c_str(), prog.c_str());
      return 0;
    }
    if (cmd == "run")
      return runCommand(argc, argv);
    if (cmd == "train")
      return driver::trainCommand(argc, argv);
    if (cmd == "info")
      return infoCommand(argc, argv);
    if (cmd.empty())
      fail("missing command: run, train or info (see --help)");
    fail("unknown command '" + cmd + "': run, train or info (see --help)");
  } catch (const QuietExit &e) {
    return e.code;
  } catch (const std::bad_alloc &) {
    if (!quiet)
      fprintf(stderr, "%s: error: out of memory\n", prog.c_str());
  } catch (const std::exception &e) {
    if (!quiet)
      fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
  }
  // The launcher ends the job at the first rank that fails: a quiet rank
  // leaves rank 0 the time to print the error they share first.
  if (quiet)
    std::this_thread::sleep_for(std::chrono::seconds(2));
  return 1;
}
