//===- CommQueueTest.cpp - the asynchronous ops' communication thread -----===//
//
// comm/CommQueue without MPI: jobs run in start order on one thread, wait
// blocks for its token's job and then runs its finish step, errors come
// back at the wait (or from finishRun when nothing waited), and without a
// thread every job runs at submit.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"
#include "comm/CommQueue.h"
#include "core/Context.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using hpcrt::comm::CommQueue;
using hpcrt::test::errorOf;

TEST(CommQueue, RunsJobsInStartOrderOffTheCallingThread) {
  for (bool threaded : {true, false}) {
    CommQueue q(threaded);
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread::id> threads;
    int keys[3];
    for (int i = 0; i < 3; ++i)
      q.submit(&keys[i], i, "job " + std::to_string(i), [&, i] {
        // The first job is the slowest: a later one must not overtake it.
        if (i == 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    q.wait(&keys[2]);
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2})) << "threaded " << threaded;
    q.wait(&keys[0]);
    q.wait(&keys[1]);
    for (std::thread::id t : threads)
      EXPECT_EQ(t == std::this_thread::get_id(), !threaded);
  }
}

TEST(CommQueue, WaitRunsTheFinishStepAfterLaterJobsWereQueued) {
  CommQueue q(true);
  std::atomic<int> step{0};
  int a, b;
  std::vector<int> seen;
  q.submit(&a, 1, "post", [&] { seen.push_back(step++); }, [&] { seen.push_back(10 + step++); });
  q.submit(&b, 2, "later", [&] { seen.push_back(step++); });
  q.wait(&b);
  q.wait(&a); // the finish step runs now, after "later"
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 12}));
}

TEST(CommQueue, ErrorsComeBackAtTheWaitOrFromFinishRun) {
  CommQueue q(true);
  int a, b, c;
  q.submit(&a, 3, "op 3 (dist.all_reduce_start)", [] { throw std::runtime_error("boom"); },
           [] { FAIL() << "no finish step after a failed job"; });
  q.submit(&b, 4, "op 4 (dist.recv_start)", [] {});
  EXPECT_EQ(errorOf([&] { q.wait(&a); }), "op 3 (dist.all_reduce_start): boom");
  q.wait(&b);
  EXPECT_NE(errorOf([&] { q.wait(&a); }).find("no started op produced"), std::string::npos);
  q.submit(&c, 5, "op 5 (dist.send_start)", [] { throw std::runtime_error("lost"); });
  EXPECT_EQ(q.finishRun(), "op 5 (dist.send_start): lost");
  EXPECT_EQ(q.finishRun(), "");
}

TEST(CommQueue, DrainWaitsForEverythingQueued) {
  CommQueue q(true);
  std::atomic<int> done{0};
  int keys[4];
  for (int &k : keys)
    q.submit(&k, 0, "job", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ++done;
    });
  q.drain();
  EXPECT_EQ(done.load(), 4);
}

// With a tracing context, every job (and a finish step) is an event of the
// communication thread's track, named by its op, timed around the job.
TEST(CommQueue, TracesJobsOnTheCommunicationTrack) {
  nlohmann::json m = {{"version", 1},   {"model", "test"},  {"arena_bytes", 0},
                      {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()},
                      {"tensors", nlohmann::json::array()}};
  hpcrt::Context ctx(m.dump());
  ctx.setTracing(true);
  ctx.beginRun();
  CommQueue q(true, &ctx);
  int a, b;
  q.submit(&a, 7, "post", [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); },
           [] {});
  q.submit(&b, 9, "later", [] {});
  q.wait(&a);
  q.drain();
  ASSERT_EQ(ctx.trace().size(), 3u);
  std::vector<int> ops;
  for (const hpcrt::TraceEvent &e : ctx.trace()) {
    EXPECT_EQ(e.tid, hpcrt::TraceEvent::kTraceComm);
    EXPECT_EQ(e.run, 1);
    ops.push_back(e.op);
  }
  EXPECT_EQ(ops, (std::vector<int>{7, 9, 7}));
  EXPECT_GE(ctx.trace()[0].durationUs, 2000.0);
  // Not tracing: nothing recorded.
  ctx.setTracing(false);
  q.submit(&a, 7, "again", [] {});
  q.drain();
  EXPECT_EQ(ctx.trace().size(), 3u);
}

// Between jobs the thread calls the progress hook while it reports
// messages in flight, never before a job has run, never from drain() to
// the next submit (the main thread may call MPI then), and not after it
// reports none.
TEST(CommQueue, CallsTheProgressHookBetweenJobsWhileMessagesAreInFlight) {
  CommQueue q(true);
  std::atomic<int> calls{0}, left{3};
  std::atomic<bool> mainHasMpi{false}, overlapped{false};
  q.setProgress([&] {
    if (mainHasMpi)
      overlapped = true;
    ++calls;
    return --left > 0;
  });
  auto waitFor = [&](int n) {
    for (int i = 0; i < 5000 && calls < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  std::this_thread::sleep_for(5 * CommQueue::kProgressInterval);
  EXPECT_EQ(calls, 0) << "no job has run: nothing can be in flight";
  int a;
  q.submit(&a, 1, "send", [] {});
  q.wait(&a);
  waitFor(3);
  EXPECT_EQ(calls, 3);
  std::this_thread::sleep_for(5 * CommQueue::kProgressInterval);
  EXPECT_EQ(calls, 3) << "the hook reported nothing in flight";

  // A job puts messages in flight again; drain() hands MPI to this thread.
  left = 1000000;
  q.submit(&a, 2, "send", [] {});
  q.wait(&a);
  waitFor(4);
  q.drain();
  mainHasMpi = true;
  int held = calls;
  std::this_thread::sleep_for(5 * CommQueue::kProgressInterval);
  EXPECT_EQ(calls, held) << "a progress call after drain()";
  mainHasMpi = false;
  q.submit(&a, 3, "recv", [] {});
  q.wait(&a);
  waitFor(held + 2);
  EXPECT_GE(calls, held + 2);
  EXPECT_FALSE(overlapped);
}
