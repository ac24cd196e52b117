//===- Parallel.h - the kernels' thread pool -------------------*- C++ -*-===//
//
// parallelFor splits [0, n) into chunks that the calling thread and the
// pool's workers claim from one atomic counter. The caller always works as
// well, and waits only for chunks a worker has already claimed, so a worker
// that the OS has not scheduled yet (a busy machine) delays nothing: the
// caller takes its share. Idle workers spin briefly (the next kernel usually
// follows within microseconds) and then sleep on a futex, so nothing spins
// between runs and no environment variable (OMP_WAIT_POLICY, GOMP_SPINCOUNT)
// is needed. The thread count is OpenMP's (--threads, OMP_NUM_THREADS).
//
// A parallelFor inside a chunk runs serially in that thread.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CPU_PARALLEL_H
#define HPCRT_CPU_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace hpcrt {

/// Threads the kernels may use: omp_get_max_threads() (--threads sets it).
int maxThreads();

/// Whether this thread is running a parallelFor chunk (nested calls run
/// serially).
bool inParallel();

/// From now on every parallelFor on this thread runs serially (the
/// communication thread packs pieces without taking the kernels' pool).
void markSerialThread();

using RangeFn = void (*)(void *ctx, int64_t begin, int64_t end);

/// [0, n) in `chunks` equal contiguous chunks, run as fn(ctx, begin, end).
void parallelRun(int64_t n, int64_t chunks, RangeFn fn, void *ctx);

/// Runs f(begin, end) over [0, n), in parallel when there is enough work:
/// `cost` is the time of one index in nanoseconds, roughly. Below ~64 us in
/// all, or with one thread, f runs once over the whole range in this thread.
template <typename F> void parallelFor(int64_t n, double cost, F &&f) {
  if (n <= 0)
    return;
  // At least ~32 us per chunk: a region costs ~1 us when the workers are
  // awake and a futex wake-up when they sleep, and a second core is often
  // not free on a busy machine; small kernels are fastest in one thread.
  constexpr double kMinWork = 32768;
  double work = static_cast<double>(n) * cost;
  int threads = work < 2 * kMinWork || n < 2 || inParallel() ? 1 : maxThreads();
  if (threads <= 1) {
    f(int64_t(0), n);
    return;
  }
  // Up to 4 chunks per thread (balance if a thread starts late), none
  // smaller than kMinWork.
  int64_t chunks = std::min<int64_t>(
      {n, static_cast<int64_t>(4) * threads, static_cast<int64_t>(work / kMinWork)});
  if (chunks < 2) {
    f(int64_t(0), n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  parallelRun(
      n, chunks,
      [](void *ctx, int64_t b, int64_t e) { (*static_cast<Fn *>(ctx))(b, e); },
      const_cast<void *>(static_cast<const void *>(&f)));
}

} // namespace hpcrt

#endif // HPCRT_CPU_PARALLEL_H
