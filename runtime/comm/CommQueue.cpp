//===- CommQueue.cpp - the asynchronous dist ops' communication thread ----===//

#include "CommQueue.h"

#include "../core/Context.h"
#include "../cpu/Parallel.h"

namespace hpcrt::comm {

CommQueue::CommQueue(bool threaded, hpcrt_ctx *traceTo) : traceTo_(traceTo) {
  if (threaded)
    thread_ = std::thread([this] { loop(); });
}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void CommQueue::run(Job &job) {
  std::string error;
  bool tracing = traceTo_ && traceTo_->tracing();
  double t0 = tracing ? traceTo_->nowUs() : 0.0;
  try {
    job.fn();
  } catch (const std::bad_alloc &) {
    error = "out of memory";
  } catch (const std::exception &e) {
    error = e.what();
  }
  if (tracing)
    traceTo_->addTrace(job.op, t0, traceTo_->nowUs() - t0, hpcrt::TraceEvent::kTraceComm);
  if (!error.empty())
    error = job.what + ": " + error;
  std::lock_guard<std::mutex> lock(mu_);
  done_[job.key] = {error, job.op, job.what, error.empty() ? std::move(job.finish) : nullptr};
  if (--pending_[job.key] == 0)
    pending_.erase(job.key);
}

void CommQueue::setProgress(std::function<bool()> progress) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_ = std::move(progress);
}

void CommQueue::progressOnce(std::unique_lock<std::mutex> &lock) {
  busy_ = true;
  lock.unlock();
  bool more = false;
  try {
    more = progress_();
  } catch (const std::exception &) {
    // The send or receive fails again where it is completed and reported.
  }
  lock.lock();
  busy_ = false;
  inFlight_ = more;
  cv_.notify_all();
}

void CommQueue::loop() {
  // Packing pieces on this thread must not share the kernels' pool.
  markSerialThread();
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [&] { return queue_.empty() && !stop_; };
  auto polling = [&] { return progress_ && inFlight_ && !held_; };
  for (;;) {
    if (idle() && polling()) {
      cv_.wait_for(lock, kProgressInterval, [&] { return !idle() || !polling(); });
      if (idle() && polling())
        progressOnce(lock);
      continue;
    }
    cv_.wait(lock, [&] { return !idle() || polling(); });
    if (queue_.empty()) {
      if (stop_)
        return;
      continue; // messages in flight: poll them
    }
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    run(job);
    lock.lock();
    busy_ = false;
    inFlight_ = true; // the job may have left a send or receive in flight
    cv_.notify_all();
  }
}

void CommQueue::submit(const void *key, int op, std::string what, std::function<void()> job,
                       std::function<void()> finish) {
  Job j{key, op, std::move(what), std::move(job), std::move(finish)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false; // MPI is the queue's again
    ++pending_[key];
    done_.erase(key);
    if (thread_.joinable()) {
      queue_.push_back(std::move(j));
      cv_.notify_all();
      return;
    }
  }
  run(j);
}

CommQueue::Outcome CommQueue::await(std::unique_lock<std::mutex> &lock, const void *key) {
  cv_.wait(lock, [&] { return !pending_.count(key); });
  auto it = done_.find(key);
  if (it == done_.end())
    fail("waits for a token that no started op produced");
  Outcome outcome = std::move(it->second);
  done_.erase(it);
  return outcome;
}

void CommQueue::wait(const void *key) {
  Outcome outcome;
  {
    std::unique_lock<std::mutex> lock(mu_);
    outcome = await(lock, key);
  }
  if (outcome.error.empty() && outcome.finish) {
    submit(key, outcome.op, outcome.what, std::move(outcome.finish));
    std::unique_lock<std::mutex> lock(mu_);
    outcome = await(lock, key);
  }
  if (!outcome.error.empty())
    fail(outcome.error);
}

void CommQueue::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  held_ = true; // no progress call from here: the main thread may call MPI
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

std::string CommQueue::finishRun() {
  drain();
  std::lock_guard<std::mutex> lock(mu_);
  std::string first;
  for (auto &[key, outcome] : done_)
    if (first.empty() && !outcome.error.empty())
      first = outcome.error;
  done_.clear();
  return first;
}

} // namespace hpcrt::comm
