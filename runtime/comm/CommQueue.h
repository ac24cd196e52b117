//===- CommQueue.h - the asynchronous dist ops' communication thread -*- C++ -*-===//
//
// `<op>_start` hands its communication to one thread that runs the jobs in
// the order they were started (the same order on every rank, as collectives
// must be), and `dist.wait` blocks until the job of its token has run, so
// the kernels between a start and its wait run while the data moves.
//
// MPI is called from one thread at a time (MPI_THREAD_SERIALIZED): jobs on
// the queue's thread; everything else on the main thread only after
// drain(). Without a thread (an MPI without SERIALIZED), submit() runs the
// job at once and wait() only reports its outcome.
//
// With a context that traces, every job (and finish step) is an event of
// the communication thread's track (TraceEvent::kTraceComm).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_COMMQUEUE_H
#define HPCRT_COMM_COMMQUEUE_H

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

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  /// Finished jobs by key; `pending_` counts those queued or running.
  std::map<const void *, Outcome> done_;
  std::map<const void *, int> pending_;
  std::thread thread_;
  hpcrt_ctx *traceTo_;
};

} // namespace hpcrt::comm

#endif // HPCRT_COMM_COMMQUEUE_H
