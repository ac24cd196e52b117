//===- Parallel.cpp - the kernels' thread pool -----------------------------===//
//
// One job at a time (kernels run one after another). A job is published in
// `state_`: the job number in the high 32 bits, the next unclaimed chunk in
// the low 32. A thread claims a chunk with a compare-and-swap on the whole
// word, so a worker that read the job late can never claim a chunk of a
// newer job with the older job's function: the job number would differ.
// The caller counts finished chunks and returns when all are done.
//
// Idle workers poll for a new job number for ~30 us, then sleep on a futex
// over the low 32 bits of the job number; the caller wakes them only when
// some sleep.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <linux/futex.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace hpcrt {

namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futexWait(std::atomic<uint32_t> *word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected,
          nullptr, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t> *word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, INT_MAX,
          nullptr, nullptr, 0);
}

thread_local bool tlsInParallel = false;

class Pool {
public:
  static Pool &get() {
    // Never destroyed: workers may still be asleep at exit.
    static Pool *pool = new Pool;
    return *pool;
  }

  void run(int64_t n, int64_t chunks, RangeFn fn, void *ctx, int threads) {
    std::lock_guard<std::mutex> lock(runMutex_); // one job at a time
    threads = 1 + ensureWorkers(threads - 1);
    // Close the previous job (no chunk left to claim) before its fields are
    // overwritten. Otherwise a worker that read this job's fields and then
    // still the previous job's state word (descheduled in between) claims a
    // chunk past that job's end, counts it into this job's done_, and the
    // wait below never ends: seen once, a train step hung in a transpose.
    // The fields are stored with release and read with acquire, so a
    // worker that reads a new field also reads the closed word (or a newer).
    uint64_t previous = state_.load(std::memory_order_relaxed) >> 32;
    state_.store((previous << 32) | kClosed, std::memory_order_seq_cst);
    // Job fields first, then the state word that publishes them.
    fn_.store(fn, std::memory_order_release);
    ctx_.store(ctx, std::memory_order_release);
    n_.store(n, std::memory_order_release);
    chunks_.store(chunks, std::memory_order_release);
    active_.store(threads - 1, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    uint64_t job = previous + 1;
    state_.store(job << 32, std::memory_order_seq_cst);
    seq_.store(static_cast<uint32_t>(job), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0)
      futexWakeAll(&seq_);

    tlsInParallel = true;
    int64_t mine = work(job);
    tlsInParallel = false;
    // Wait for the chunks that workers claimed.
    int64_t target = chunks - mine;
    for (unsigned spins = 0;
         done_.load(std::memory_order_acquire) != target; ++spins) {
      if (spins < 4096)
        cpuRelax();
      else
        std::this_thread::yield();
    }
    // The first exception of any chunk (the others were skipped), here.
    if (failed_.load(std::memory_order_acquire)) {
      std::exception_ptr e;
      std::swap(e, error_);
      failed_.store(false, std::memory_order_relaxed);
      std::rethrow_exception(e);
    }
  }

private:
  Pool() = default;

  /// Claims and runs chunks of `job` until none is left; returns how many
  /// this thread ran.
  int64_t work(uint64_t job) {
    RangeFn fn = fn_.load(std::memory_order_acquire);
    void *ctx = ctx_.load(std::memory_order_acquire);
    int64_t n = n_.load(std::memory_order_acquire);
    int64_t chunks = chunks_.load(std::memory_order_acquire);
    int64_t ran = 0;
    uint64_t s = state_.load(std::memory_order_acquire);
    while ((s >> 32) == job) {
      int64_t c = static_cast<int64_t>(s & 0xffffffffu);
      if (c >= chunks)
        break;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          fn(ctx, c * n / chunks, (c + 1) * n / chunks);
        } catch (...) {
          std::lock_guard<std::mutex> lock(errorMutex_);
          if (!failed_.load(std::memory_order_relaxed)) {
            error_ = std::current_exception();
            failed_.store(true, std::memory_order_release);
          }
        }
      }
      ++ran;
      s = state_.load(std::memory_order_acquire);
    }
    return ran;
  }

  /// Starts workers up to `wanted`; returns how many there are (fewer if
  /// the system refuses threads).
  int ensureWorkers(int wanted) {
    while (static_cast<int>(workers_.size()) < wanted) {
      int index = static_cast<int>(workers_.size());
      try {
        std::thread t([this, index] { workerLoop(index); });
        t.detach();
      } catch (const std::system_error &) {
        break;
      }
      workers_.push_back(index);
    }
    return std::min(wanted, static_cast<int>(workers_.size()));
  }

  void workerLoop(int index) {
    tlsInParallel = true;
    uint64_t seen = state_.load(std::memory_order_acquire) >> 32;
    for (;;) {
      uint64_t job = waitForJob(seen);
      seen = job;
      // Workers beyond this job's thread count stay out of it.
      if (index >= active_.load(std::memory_order_relaxed))
        continue;
      int64_t ran = work(job);
      if (ran)
        done_.fetch_add(ran, std::memory_order_acq_rel);
    }
  }

  /// The number of the first job after `seen`: polled for a while, then
  /// slept for.
  uint64_t waitForJob(uint64_t seen) {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::microseconds(kSpinUs);
    for (unsigned i = 1;; ++i) {
      uint64_t job = state_.load(std::memory_order_acquire) >> 32;
      if (job != seen)
        return job;
      cpuRelax();
      if ((i & 63) == 0 && Clock::now() > deadline)
        break;
    }
    for (;;) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      uint32_t seq = seq_.load(std::memory_order_seq_cst);
      uint64_t job = state_.load(std::memory_order_seq_cst) >> 32;
      if (job == seen)
        futexWait(&seq_, seq);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      job = state_.load(std::memory_order_acquire) >> 32;
      if (job != seen)
        return job;
    }
  }

  static constexpr int kSpinUs = 30;
  /// The low 32 bits of a closed job's state word: above any chunk count
  /// (parallelRun caps them at INT32_MAX).
  static constexpr uint64_t kClosed = 0xffffffffu;

  std::mutex runMutex_;
  std::vector<int> workers_;
  std::mutex errorMutex_;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
  alignas(64) std::atomic<uint64_t> state_{0};
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<uint32_t> seq_{0};
  std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<RangeFn> fn_{nullptr};
  std::atomic<void *> ctx_{nullptr};
  std::atomic<int64_t> n_{0}, chunks_{0};
  std::atomic<int> active_{0};
};

} // namespace

int maxThreads() { return omp_get_max_threads(); }

bool inParallel() { return tlsInParallel; }

void markSerialThread() { tlsInParallel = true; }

void parallelRun(int64_t n, int64_t chunks, RangeFn fn, void *ctx) {
  int threads = maxThreads();
  chunks = std::min<int64_t>(chunks, n);
  if (threads <= 1 || chunks <= 1 || tlsInParallel) {
    fn(ctx, 0, n);
    return;
  }
  if (chunks > INT32_MAX)
    chunks = INT32_MAX;
  Pool::get().run(n, chunks, fn, ctx, threads);
}

} // namespace hpcrt
