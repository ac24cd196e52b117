//===- hpc-calibrate.cpp - measure a machine into a cluster file ----------===//
//
// `hpc-calibrate -o host.json` measures the machine the cost model plans
// for, through libhpcrt's own kernels (KernelBench.cpp) and communicators
// (CommBench.cpp), and writes a cluster file in the JSON format of
// docs/cost-model.md: the summary the cost model reads (peak rates = the
// best measured GEMM rates, memory bandwidth = the largest add's, links =
// the measured send/recv alpha and beta of each level, efficiency factors
// 1 because the rates are achieved ones) plus the raw tables in
// "calibration". With `--ranks N` outside mpirun it starts itself again
// under `mpirun -n N`; under mpirun rank 0 writes the file (atomically: a
// temporary file renamed over it). Bad flags end in one line and exit 1.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "common/ProcFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <tuple>
#include <vector>

using namespace hpc;
using namespace hpc::calibrate;

namespace {

constexpr const char *kUsage =
    "usage: hpc-calibrate -o FILE [--quick] [--ranks N] [--threads T] [--name NAME]\n"
    "\n"
    "Measures this machine (or, under mpirun, every rank's) through the runtime's\n"
    "kernels and communicators and writes a cluster file for --cluster=FILE.\n"
    "\n"
    "  -o FILE       the cluster file to write (required; replaced atomically)\n"
    "  --quick       few sizes and repetitions (seconds; for tests)\n"
    "  --ranks N     run N ranks: outside mpirun, start itself under `mpirun -n N`;\n"
    "                under mpirun, N must be the world size\n"
    "  --threads T   kernel threads per rank (default 1)\n"
    "  --name NAME   the cluster's name (default: the host name)\n"
    "  --help        this text\n";

/// The command line.
struct Options {
  std::string output;
  bool quick = false;
  int ranks = 0; ///< 0: not given
  int threads = 1;
  std::string name;
  bool help = false;
};

/// A positive integer flag value no larger than `max`.
bool parseCount(llvm::StringRef flag, llvm::StringRef value, int max, int &out,
                std::string &error) {
  int64_t n = 0;
  if (value.getAsInteger(10, n) || n < 1 || n > max) {
    error = flag.str() + ": expected an integer from 1 to " + std::to_string(max) +
            ", got '" + value.str() + "'";
    return false;
  }
  out = static_cast<int>(n);
  return true;
}

/// Reads the flags; false and a one-line reason for a bad one.
bool parseOptions(int argc, char **argv, Options &o, std::string &error) {
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i], flag = arg, value;
    bool inlineValue = arg.starts_with("--") && arg.contains('=');
    if (inlineValue)
      std::tie(flag, value) = arg.split('=');
    bool takesValue = flag == "-o" || flag == "--ranks" || flag == "--threads" ||
                      flag == "--name";
    if (takesValue && !inlineValue) {
      if (i + 1 >= argc) {
        error = flag.str() + " needs a value";
        return false;
      }
      value = argv[++i];
    } else if (!takesValue && inlineValue) {
      bool known = flag == "--quick" || flag == "--help";
      error = known ? flag.str() + " takes no value"
                    : "unknown flag '" + arg.str() + "' (see --help)";
      return false;
    }
    if (flag == "-o") {
      if (value.empty()) {
        error = "-o needs a file name";
        return false;
      }
      o.output = value.str();
    } else if (flag == "--ranks") {
      if (!parseCount(flag, value, 4096, o.ranks, error))
        return false;
    } else if (flag == "--threads") {
      if (!parseCount(flag, value, 1024, o.threads, error))
        return false;
    } else if (flag == "--name") {
      if (value.empty()) {
        error = "--name needs a non-empty name";
        return false;
      }
      o.name = value.str();
    } else if (flag == "--quick") {
      o.quick = true;
    } else if (flag == "--help" || flag == "-h") {
      o.help = true;
    } else {
      error = (arg.starts_with("-") ? "unknown flag '" : "unexpected argument '") +
              arg.str() + "' (see --help)";
      return false;
    }
  }
  if (!o.help && o.output.empty()) {
    error = "-o FILE is required (the cluster file to write)";
    return false;
  }
  return true;
}

int reportError(bool print, const std::string &message) {
  if (print)
    fprintf(stderr, "hpc-calibrate: error: %s\n", message.c_str());
  return 1;
}

/// Starts this executable again under `mpirun -n N` with the same flags
/// (--oversubscribe: more ranks than cores is fine for a measurement of
/// the machine's ranks; --allow-run-as-root as root). Returns only when
/// that fails.
int reexecUnderMpirun(int argc, char **argv, int ranks) {
  llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun)
    return reportError(true, "--ranks " + std::to_string(ranks) +
                                 " needs OpenMPI's mpirun, which is not on PATH");
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&reexecUnderMpirun));
  std::vector<std::string> args = {*mpirun, "-n", std::to_string(ranks), "--oversubscribe"};
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.push_back(self.empty() ? argv[0] : self);
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  fflush(stdout);
  execv(mpirun->c_str(), cargs.data());
  return reportError(true, "cannot run " + *mpirun + ": " + strerror(errno));
}

/// Whether `path` can be written: its directory exists and is writable.
bool checkOutput(const std::string &path, std::string &error) {
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  if (llvm::sys::fs::is_directory(path))
    error = "cannot write '" + path + "': it is a directory";
  else if (!llvm::sys::fs::is_directory(dir))
    error = "cannot write '" + path + "': no directory '" + dir.str().str() + "'";
  else if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
    error = "cannot write '" + path + "': directory '" + dir.str().str() +
            "' is not writable";
  return error.empty();
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// Each rank's fraction of a core when all compute at once: 1 unless the
/// ranks x threads of a node outnumber its cores.
double coreShare(const World &w, const Options &o) {
  unsigned cores = std::thread::hardware_concurrency();
  double wanted = double(w.ranksOnNode) * double(std::max(o.threads, 1));
  return cores > 0 && wanted > cores ? double(cores) / wanted : 1.0;
}

/// The best rate of the GEMM rows of one dtype (0 without any).
double bestGemm(const cost::Calibration &cal, cost::DType dtype) {
  double best = 0;
  for (const cost::KernelTiming &k : cal.gemm)
    if (k.dtype == dtype)
      best = std::max(best, k.flopRate);
  return best;
}

/// The link of a level from its send/recv row; false when not measured.
bool measuredLink(const cost::Calibration &cal, const char *level, cost::LinkSpec &link) {
  for (const cost::CollectiveTiming &c : cal.collectives)
    if (c.level == level && c.kind == "send_recv") {
      link = {"hpcrt-mpi", c.beta, c.alpha};
      return true;
    }
  return false;
}

/// The cluster file's summary, from the measurements.
cost::ClusterSpec buildCluster(const World &w, const Options &o, cost::Calibration cal,
                               const CoreLending &lending) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  cost::ClusterSpec c;
  c.name = o.name.empty() ? w.host : o.name;
  c.nodes = w.nodes;
  c.devicesPerNode = w.ranksOnNode;
  c.device.kind = hpc::proc::cpuName();
  if (c.device.kind.empty())
    c.device.kind = "cpu";
  double memKiB = std::atof(hpc::proc::field("/proc/meminfo", "MemTotal").c_str());
  c.device.memoryBytes = std::max(memKiB * 1024.0, kGiB) / w.ranksOnNode;
  c.device.reservedBytes = std::min(kGiB, 0.1 * c.device.memoryBytes);
  c.device.memoryBandwidth = cal.memory.empty() ? 0 : cal.memory.back().bandwidth;
  // Ranks that outnumber the cores measured the kernels at their share of
  // them (measureAndWrite's `shared`); the cost model lends an idle
  // stage's share to the others.
  c.device.coreShare = coreShare(w, o);
  if (c.device.coreShare < 1)
    c.device.coreLending = lending.fraction;
  c.device.peakFlops[int(cost::DType::FP32)] = bestGemm(cal, cost::DType::FP32);
  c.device.peakFlops[int(cost::DType::BF16)] = bestGemm(cal, cost::DType::BF16);
  c.hasIntraNode = w.ranksOnNode > 1 && measuredLink(cal, "intra-node", c.intraNode);
  c.hasInterNode = w.nodes > 1 && measuredLink(cal, "inter-node", c.interNode);
  // A level the machine lacks takes the other's figures, as a file without
  // it reads (clusterFromJSON).
  if (!c.hasIntraNode)
    c.intraNode = c.hasInterNode ? c.interNode : cost::LinkSpec{"none", 1e12, 0};
  if (!c.hasInterNode)
    c.interNode = c.intraNode;
  // The rates are achieved ones: nothing to scale. The measured overlap
  // stays in the calibration section: applied alone it makes the model's
  // errors smaller but its choices worse on a machine whose ranks fill the
  // cores (docs/benchmarks.md, "Predicted vs measured on this machine"),
  // until tensor parallelism's waits are measured too.
  c.efficiency = cost::calibratedEfficiency();
  c.efficiency.matmul = c.efficiency.memory = 1;
  c.efficiency.network = c.efficiency.networkInter = 1;
  c.efficiency.kernelOverhead = cal.kernelOverhead;
  // The collective overhead is applied: with ZeRO's gathers counted as the
  // compiled step buckets them and a recalibration that no longer scales it
  // with the network, it lowered every grid's error on this machine
  // (docs/benchmarks.md, "The collective overhead, applied").
  if (cal.collectiveOverhead > 0)
    c.efficiency.collectiveOverhead = cal.collectiveOverhead;
  cal.present = true;
  cal.date = utcNow();
  cal.ranks = w.size;
  cal.threads = o.threads;
  cal.quick = o.quick;
  c.calibration = std::move(cal);
  return c;
}

void printSummary(const cost::ClusterSpec &c, const std::string &path,
                  const CoreLending &lending) {
  const cost::Calibration &cal = c.calibration;
  printf("hpc-calibrate: %lld node(s) x %lld rank(s) of %s, %lld thread(s) per rank%s\n",
         static_cast<long long>(c.nodes), static_cast<long long>(c.devicesPerNode),
         c.device.kind.c_str(), static_cast<long long>(cal.threads),
         cal.quick ? " (quick)" : "");
  bool shared = c.device.coreShare < 1;
  if (shared)
    printf("  the ranks share the cores (%.2f of a core each): each kernel case starts at a "
           "barrier, the median round counts\n",
           c.device.coreShare);
  if (shared && lending.allS > 0)
    printf("  core lending: %.2f (half the ranks' GEMMs %.2f ms with every rank computing, "
           "%.2f ms beside ranks asleep, %.2f ms beside ranks waiting for them)\n",
           lending.fraction, lending.allS * 1e3, lending.sleepS * 1e3, lending.waitS * 1e3);
  printf("  gemm: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (best); memory %.2f GB/s; "
         "kernel call %.2f us\n",
         c.device.peakFlops[int(cost::DType::FP32)] * 1e-9,
         c.device.peakFlops[int(cost::DType::BF16)] * 1e-9, c.device.memoryBandwidth * 1e-9,
         cal.kernelOverhead * 1e6);
  for (const cost::CollectiveTiming &t : cal.collectives)
    printf("  %s %s (%lld ranks): alpha %.2f us, beta %.3f GB/s\n", t.level.c_str(),
           t.kind.c_str(), static_cast<long long>(t.groupSize), t.alpha * 1e6, t.beta * 1e-9);
  if (cal.overlap.present)
    printf("  overlap: %.2f (GEMMs %.2f ms, all-reduce of %lld bytes %.2f ms, both at once "
           "%.2f ms)\n",
           cal.overlap.fraction, cal.overlap.computeS * 1e3,
           static_cast<long long>(cal.overlap.bytes), cal.overlap.commS * 1e3,
           cal.overlap.bothS * 1e3);
  if (cal.collectiveOverhead >= 0)
    printf("  collective overhead: %.1f us (a small all-reduce through the communication "
           "thread between kernels, beyond the direct call)\n",
           cal.collectiveOverhead * 1e6);
  printf("wrote %s\n", path.c_str());
}

/// Writes the cluster file through a temporary file renamed over `path`.
bool writeCluster(const cost::ClusterSpec &c, const std::string &path, std::string &error) {
  std::string text = cost::clusterToJSON(c) + "\n";
  llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << text;
    return llvm::Error::success();
  });
  if (!e)
    return true;
  error = "cannot write '" + path + "': " + llvm::toString(std::move(e));
  return false;
}

/// Measures and writes, on every rank of `w` (rank 0 writes).
int measureAndWrite(const World &w, const Options &o) {
  std::string error;
  bool ok = w.rank != 0 || checkOutput(o.output, error);
  if (firstFailure(w, !ok) >= 0)
    return reportError(w.rank == 0, error);
  if (w.rank == 0 && !w.uniform)
    fprintf(stderr, "hpc-calibrate: warning: the nodes hold different numbers of ranks; "
                    "devices_per_node is rank 0's node's (%d)\n", w.ranksOnNode);
  cost::Calibration cal;
  RunOptions run{o.quick, o.threads};
  run.shared = coreShare(w, o) < 1;
  if (w.mpi && run.shared) {
    run.sync = [&w] { barrier(w); };
    run.abortJob = [&w](const std::string &message) { abortWorld(w, message); };
  }
  ok = measureKernels(run, cal, error);
  int failed = firstFailure(w, !ok);
  // The failing rank prints its line, the others exit quietly.
  auto reportFailed = [&] {
    return reportError(w.rank == failed,
                       (failed ? "rank " + std::to_string(failed) + ": " : "") + error);
  };
  if (failed >= 0)
    return reportFailed();
  measureCollectives(w, run, cal.collectives);
  CoreLending lending;
  if (w.mpi && w.size > 1) {
    // GEMMs of about a millisecond each (256^3 x 2 FLOPs at the rates
    // measured above).
    std::function<void()> gemm;
    auto workload = [&](int64_t size) {
      ok = gemmWorkload(size, gemm, error);
      failed = firstFailure(w, !ok);
      return failed < 0;
    };
    if (!workload(o.quick ? 128 : 256))
      return reportFailed();
    measureOverlap(w, run, gemm, cal.overlap);
    if (run.shared)
      lending = measureCoreLending(w, run, coreShare(w, o), gemm);
    // Kernels of tens of microseconds between the collectives, as a small
    // model's step has.
    if (!workload(128))
      return reportFailed();
    cal.collectiveOverhead = measureCollectiveOverhead(w, run, gemm);
  }
  if (w.rank == 0) {
    cost::ClusterSpec c = buildCluster(w, o, std::move(cal), lending);
    ok = writeCluster(c, o.output, error);
    if (ok)
      printSummary(c, o.output, lending);
  }
  if (firstFailure(w, !ok) >= 0)
    return reportError(w.rank == 0, error);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int worldSize = 1, worldRank = 0;
  bool mpirun = underMpirun(worldSize, worldRank);
  bool printer = worldRank == 0;
  Options o;
  std::string error;
  if (!parseOptions(argc, argv, o, error))
    return reportError(printer, error);
  if (o.help) {
    if (printer)
      fputs(kUsage, stdout);
    return 0;
  }
  if (!mpirun && o.ranks > 1)
    return reexecUnderMpirun(argc, argv, o.ranks);
  if (mpirun && o.ranks > 0 && o.ranks != worldSize)
    return reportError(printer, "--ranks " + std::to_string(o.ranks) + " but mpirun started " +
                                    std::to_string(worldSize) + " rank(s)");
  World w;
  if (!startWorld(w, error))
    return reportError(printer, error);
  int rc = measureAndWrite(w, o);
  finishWorld(w);
  return rc;
}
