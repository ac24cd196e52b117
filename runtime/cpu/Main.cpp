//===- Main.cpp - the model executable's command line ----------------------===//
//
// main() of every compiled model: `./model run ...` binds inputs from .npy or
// .pb files, maps the weights next to the executable, runs the compiled
// program (hpc_program_run) --iters times, writes the outputs as .npy and
// prints a summary; `./model info` describes the model. Every error a user
// can cause ends in one line `<prog>: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"
#include "../io/TensorIO.h"

#include <cblas.h>
#include <omp.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>

using namespace hpcrt;

namespace {

const char *usageText =
    "usage: %s run --input NAME=FILE.npy|FILE.pb ... --output-dir DIR\n"
    "              [--iters N] [--threads T] [--trace FILE.json] [--weights FILE]\n"
    "              [--verbose]\n"
    "       %s info\n";

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

int runCommand(int argc, char **argv) {
  Options o = parseRun(argc, argv);
  Context ctx(hpc_manifest);
  // Inputs.
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
           shapeString(t.shape) + "): pass --input " + ctx.inputList()[k].name + "=FILE.npy");
    }
  makeDirs(o.outputDir);
  loadWeights(ctx, o.weights, o.verbose);
  if (o.threads > 0) {
    omp_set_num_threads(static_cast<int>(o.threads));
    openblas_set_num_threads(static_cast<int>(o.threads));
  }
  ctx.prepare();
  ctx.setTracing(!o.trace.empty());

  double totalMs = 0, minMs = INFINITY;
  for (int64_t it = 0; it < o.iters; ++it) {
    ctx.beginRun();
    auto t0 = std::chrono::steady_clock::now();
    hpc_program_run(&ctx);
    auto t1 = std::chrono::steady_clock::now();
    if (ctx.failed())
      fail(ctx.error());
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    totalMs += ms;
    minMs = std::min(minMs, ms);
  }

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
  if (!o.trace.empty()) {
    ctx.writeTrace(o.trace);
    if (o.verbose)
      printf("trace: %s (%zu events)\n", o.trace.c_str(), ctx.trace().size());
  }
  fflush(stdout);
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
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      printf(usageText, prog.c_str(), prog.c_str());
      return 0;
    }
    if (cmd == "run")
      return runCommand(argc, argv);
    if (cmd == "info")
      return infoCommand(argc, argv);
    if (cmd.empty())
      fail("missing command: run or info (see --help)");
    fail("unknown command '" + cmd + "': run or info (see --help)");
  } catch (const std::bad_alloc &) {
    fprintf(stderr, "%s: error: out of memory\n", prog.c_str());
  } catch (const std::exception &e) {
    fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
  }
  return 1;
}
