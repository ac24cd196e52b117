//===- Backend.h - the seam between the runtime's core and its kernels -*- C++ -*-===//
//
// The core of libhpcrt (runtime/core: the manifest, the context and its
// regions, the trace, the ABI's entry points, the commands of the model
// executable; runtime/driver: train, data, checkpoints) knows kernels only
// through this interface, as IREE's core knows devices through
// hal/driver.h. A backend is one implementation: a table with one kernel per
// op of Ops.def, the memory the context's regions live in, and its threads.
// runtime/cpu is the one backend today (oneDNN and the runtime's own
// kernels); a CUDA backend is one more implementation, chosen when the
// context is made, not a fork of the core.
//
// The compiled program calls hpcrt_<op> (hpcrt.h); the core's entry point
// decodes the call (OpCall) and calls the kernel that the context's
// backend lists for that op.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CORE_BACKEND_H
#define HPCRT_CORE_BACKEND_H

#include "Buffer.h"

#include <cstddef>
#include <string>

struct hpcrt_ctx;

namespace hpcrt {

struct OpCall;

/// Every op with a kernel (Ops.def), in its order.
enum class OpId : int {
#define HPCRT_OP(Id, cname, mnemonic) Id,
#include "Ops.def"
  Count
};
constexpr int kNumOps = static_cast<int>(OpId::Count);

/// The op's mnemonic as messages name it: "matmul", "dist.all_reduce".
const char *opMnemonic(OpId id);
/// Whether the op communicates (a dist op): it runs even after an earlier
/// kernel failed, so that the other ranks are not left waiting for this one
/// (the first error stays the one reported).
bool isCommunicating(OpId id);

using KernelFn = void (*)(OpCall &);

/// A backend's kernel of one op.
struct KernelEntry {
  KernelFn fn = nullptr; ///< null: the backend has no kernel for the op
  /// Keeps a state between calls (a oneDNN primitive made for the op's
  /// shapes): runs in the setup run as well, with OpCall::setup set, and
  /// only makes its state there.
  bool stateful = false;
  /// Reads and writes tensors in the backend's blocked layout
  /// (Tensor::blocked); the core refuses blocked tensors to other kernels.
  bool readsBlocked = false;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu".
  virtual const char *name() const = 0;
  /// The kernel of `id` (fn null when the backend has none).
  virtual const KernelEntry &kernel(OpId id) const = 0;
  /// Memory for the context's regions (arena, state, inputs, weights copy,
  /// scratchpad), 64-byte aligned, where the kernels read and write it.
  /// Throws Error when out of memory.
  virtual Buffer allocate(size_t bytes) const = 0;
  /// Sets the threads the kernels use (a positive count).
  virtual void setThreads(int threads) const = 0;
  /// The threads the kernels will use.
  virtual int threads() const = 0;
  /// Sets the environment variables that the backend's libraries read once,
  /// when they are loaded before main() (libgomp's spin count), to the
  /// backend's defaults where the user set none. True when it set any: the
  /// model executable then runs itself again (execv of the file
  /// /proc/self/exe names, the same arguments and process) so that those
  /// libraries read them. Nothing earlier can: glibc's own initialization,
  /// after an executable's preinit_array, restores the environment the
  /// process started with.
  virtual bool setProcessEnvironment() const { return false; }
  /// One line on how the kernels' threads wait between kernels, for `info`
  /// (empty: nothing to say).
  virtual std::string describeThreads() const { return ""; }
  /// One line on the kernels' own memory after the setup run ("12 oneDNN
  /// primitives, scratchpad X bytes, reordered weights Y bytes"), for
  /// `run --verbose` and `info`.
  virtual std::string describeKernels(const hpcrt_ctx &ctx) const = 0;
};

/// The backend a context runs on unless it is given another: the one
/// libhpcrt is built with (runtime/cpu defines it).
const Backend &defaultBackend();

} // namespace hpcrt

#endif // HPCRT_CORE_BACKEND_H
