//===- CommQueue.h - the asynchronous dist ops' communication thread -*- C++ -*-===//
//
// `<op>_start` hands its communication to one thread that runs the jobs in
// the order they were started (the same order on every rank, as collectives
// must be), and `dist.wait` blocks until the job of its token has run, so
// the kernels between a start and its wait run while the data moves.
//
// MPI is called from one thread at a time (MPI_THREAD_SERIALIZED): jobs on
// the queue's thread; everything else on the main thread only after
// drain() and until the next submit(). Without a thread (an MPI without
// SERIALIZED), submit() runs the job at once and wait() only reports its
// outcome.
//
// Between jobs, while the progress hook says messages are still in flight,
// the thread calls it every kProgressInterval: an MPI without an
// asynchronous progress thread moves a large buffered send (or answers a
// posted receive's rendezvous) only inside an MPI call, so without the hook
// a pipeline stage's activations would wait for its next MPI call, after
// the kernels that follow the send.
//
// With a context that traces, every job (and finish step) is an event of
// the communication thread's track (TraceEvent::kTraceComm).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_COMMQUEUE_H
#define HPCRT_COMM_COMMQUEUE_H

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

struct hpcrt_ctx;

namespace hpcrt::comm {

class CommQueue {
public:
  /// How often the thread calls the progress hook while messages are in
  /// flight: a 131 KB activation takes about 1 ms at 1 Gbit/s. On the
  /// two-node cluster a pipeline's bubble is the same at 0.5, 1 and 2 ms,
  /// while every call costs the kernels on the core (0.05 ms: +26 ms of
  /// compute a step, 0.2: +12, 1: +3; docs/benchmarks.md).
  static constexpr std::chrono::microseconds kProgressInterval{1000};

  /// `traceTo`: the context whose trace records the jobs (when it traces).
  explicit CommQueue(bool threaded, hpcrt_ctx *traceTo = nullptr);
  ~CommQueue();
  CommQueue(const CommQueue &) = delete;
  CommQueue &operator=(const CommQueue &) = delete;

  /// Queues `job` under `key` (the token it completes) for op `op` (its
  /// index in the program, for the trace). `what` names the op in an error
  /// message. A `finish` step (a receive's completion) is
  /// queued by wait(), so that a job that only posts a receive leaves the
  /// thread free for the operations after it until the data is needed.
  void submit(const void *key, int op, std::string what, std::function<void()> job,
              std::function<void()> finish = {});
  /// Blocks until the job of `key` (and its finish step) has run; throws
  /// the first error.
  void wait(const void *key);
  /// Blocks until every queued job has run.
  void drain();
  /// drain(), then forgets finished jobs; returns the first error of a job
  /// that nobody waited for ("" when none).
  std::string finishRun();
  /// The idle-time progress hook: returns whether messages are still in
  /// flight (call it again later). Called on the queue's thread only, after
  /// a job has run and never between a drain() and the next submit().
  void setProgress(std::function<bool()> progress);

private:
  struct Job {
    const void *key;
    int op;
    std::string what;
    std::function<void()> fn, finish;
  };
  struct Outcome {
    std::string error; ///< "" when it succeeded
    int op = -1;
    std::string what;
    std::function<void()> finish;
  };
  /// Blocks until `key` is not pending; returns and forgets its outcome.
  Outcome await(std::unique_lock<std::mutex> &lock, const void *key);
  /// Runs a job and records its outcome (called without the lock held).
  void run(Job &job);
  void loop();
  /// One progress call, between jobs (called and returns with the lock held).
  void progressOnce(std::unique_lock<std::mutex> &lock);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  std::function<bool()> progress_;
  /// progress_ has messages in flight (as of its last call or job); held_:
  /// the main thread may be calling MPI (from drain() to the next submit()).
  bool inFlight_ = false, held_ = false;
  /// Finished jobs by key; `pending_` counts those queued or running.
  std::map<const void *, Outcome> done_;
  std::map<const void *, int> pending_;
  std::thread thread_;
  hpcrt_ctx *traceTo_;
};

} // namespace hpcrt::comm

#endif // HPCRT_COMM_COMMQUEUE_H
