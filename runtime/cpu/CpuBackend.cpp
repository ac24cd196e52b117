//===- CpuBackend.cpp - the CPU backend: its kernel table and threads ------===//
//
// The one implementation of Backend.h that libhpcrt has today: every op of
// Ops.def has a kernel here (oneDNN's primitives behind the products,
// convolutions and blocked-layout pooling, the runtime's own kernels for the
// rest; a missing one is a link error), host memory for the regions, and
// the threads of OpenMP (oneDNN's) and of OpenBLAS, which the runtime's own
// pool (Parallel.h) follows.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>

// Each kernel translation unit defines hpcrt_cpu_<Id> (Kernel.h's macros).
#define HPCRT_OP(Id, cname, mnemonic) extern const ::hpcrt::KernelEntry hpcrt_cpu_##Id;
#include "../core/Ops.def"

namespace hpcrt {
namespace {

/// libgomp's spin count for idle OpenMP threads in model executables
/// (Backend::setProcessEnvironment; the user's OMP_WAIT_POLICY or
/// GOMP_SPINCOUNT wins). oneDNN runs on OpenMP and the other kernels on the
/// runtime's pool, one after the other. libgomp's default, 300000 spins
/// (~6.7 ms here), keeps its threads spinning into the pool's kernels and,
/// on a busy machine, on cores another process needs; 0 (PASSIVE) makes
/// many oneDNN calls wait for sleeping threads to wake. 30000 spins is
/// ~0.85 ms. Measured on the 2-core AMX VM at 2 threads
/// (docs/benchmarks.md, "OpenMP's idle threads"), for the default, 30000,
/// 10000 and 0: ResNet-18 13.4-13.5, 13.4-13.5, 14.1 and 15.9 ms per run;
/// beside a process spinning on one core 49-56, 38-40, 33 and 27 ms
/// (onnxruntime 29.7); the fp32 train step of the 6-layer GPT 621-645,
/// 613-620, 601-611 and 586 ms.
constexpr const char *kOpenmpSpinCount = "30000";

class CpuBackend final : public Backend {
public:
  CpuBackend() {
#define HPCRT_OP(Id, cname, mnemonic) table_[static_cast<int>(OpId::Id)] = hpcrt_cpu_##Id;
#include "../core/Ops.def"
    // The kernels that read and write the blocked channel layout
    // (Tensor::blocked): the oneDNN convolutions and pooling, and relu, add
    // and cast over equal layouts. The compiler's hpc-plan-layouts blocks
    // nothing else.
    for (OpId id : {OpId::conv, OpId::relu, OpId::add, OpId::max_pool, OpId::global_avg_pool,
                    OpId::cast})
      table_[static_cast<int>(id)].readsBlocked = true;
  }

  const char *name() const override { return "cpu"; }
  const KernelEntry &kernel(OpId id) const override {
    return table_[static_cast<int>(id)];
  }
  Buffer allocate(size_t bytes) const override { return Buffer(bytes); }
  void setThreads(int threads) const override {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
  int threads() const override { return omp_get_max_threads(); }
  bool setProcessEnvironment() const override {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
      return false;
    setenv("GOMP_SPINCOUNT", kOpenmpSpinCount, 0);
    return true;
  }
  std::string describeThreads() const override {
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    std::string line = "OpenMP (oneDNN) and the runtime's pool, one kernel at a time; idle "
                       "OpenMP threads wait with ";
    if (policy)
      line += std::string("OMP_WAIT_POLICY=") + policy + (spin ? ", " : "");
    if (spin)
      line += std::string("GOMP_SPINCOUNT=") + spin;
    if (!policy && !spin)
      line += "libgomp's default spin count";
    return line;
  }
  std::string describeKernels(const hpcrt_ctx &ctx) const override {
    // Which convolutions run Winograd (an f32 program's 3x3 stride-1 ones
    // with AVX-512, KernelsLinalg.cpp) is decided on this CPU.
    size_t winograd = 0;
    for (size_t op = 0; op < ctx.ops().size(); ++op)
      if (auto *p = dynamic_cast<const onednn::Primitive *>(ctx.kernelState(op)))
        winograd += p->impl.find("wino") != std::string::npos;
    return std::to_string(ctx.kernelStateCount()) + " oneDNN primitives" +
           (winograd ? " (" + std::to_string(winograd) + " Winograd convolutions)" : "") +
           ", scratchpad " +
           std::to_string(ctx.scratchpadBytes()) + " bytes, reordered weights " +
           std::to_string(ctx.kernelStateBytes()) + " bytes";
  }

private:
  KernelEntry table_[kNumOps];
};

} // namespace

const Backend &defaultBackend() {
  static const CpuBackend cpu;
  return cpu;
}

} // namespace hpcrt
