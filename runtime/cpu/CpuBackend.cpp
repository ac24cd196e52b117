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

#include "Kernel.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>

// Each kernel translation unit defines hpcrt_cpu_<Id> (Kernel.h's macros).
#define HPCRT_OP(Id, cname, mnemonic) extern const ::hpcrt::KernelEntry hpcrt_cpu_##Id;
#include "../core/Ops.def"

/// oneDNN runs on OpenMP, the other kernels on the runtime's own pool
/// (Parallel.h), one after the other: one of them owns the cores at a time.
/// libgomp's idle threads would spin for a while after every oneDNN call and
/// take the cores from the pool's next kernel, so they sleep at once unless
/// the user chose a wait policy or a spin count. libgomp reads its
/// environment in its constructor, before main(); an executable's
/// preinit_array runs before any shared library's constructor (this object
/// is linked into every executable that makes a context: it defines
/// defaultBackend()).
static void passiveOpenmp(int, char **, char **) {
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
}
__attribute__((section(".preinit_array"), used)) static void (*const hpcrtPreinit)(
    int, char **, char **) = passiveOpenmp;

namespace hpcrt {
namespace {

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
  std::string describeKernels(const hpcrt_ctx &ctx) const override {
    return std::to_string(ctx.kernelStateCount()) + " oneDNN primitives, scratchpad " +
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
