//===- PeerWaitTest.cpp - the bounded, idle wait on a peer ----------------===//
//
// comm/PeerWait without MPI: the pause between polls (a spin first, then
// sleeps of a tenth of the time waited, 50 us to 1 ms), pollFor ending when
// its condition holds or at its deadline, an idle wait using almost no CPU,
// and the timeout's line for each case (silent ranks, every rank answering,
// no ping service yet).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"
#include "comm/PeerWait.h"

#include <chrono>
#include <sys/resource.h>

using namespace hpcrt::comm;

namespace {
double threadCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
} // namespace

TEST(PeerWait, BackoffSpinsFirstThenSleepsATenthUpTo1ms) {
  EXPECT_EQ(Backoff::sleepFor(0), 0);
  EXPECT_EQ(Backoff::sleepFor(150e-6), 0);
  EXPECT_DOUBLE_EQ(Backoff::sleepFor(300e-6), 50e-6);
  EXPECT_DOUBLE_EQ(Backoff::sleepFor(2e-3), 200e-6);
  EXPECT_DOUBLE_EQ(Backoff::sleepFor(0.5), 1e-3);
  EXPECT_DOUBLE_EQ(Backoff::sleepFor(1e4), 1e-3);
}

TEST(PeerWait, PollForEndsWhenDone) {
  int calls = 0, idles = 0;
  double firstIdleS = -1;
  auto t0 = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  EXPECT_TRUE(pollFor(10, [&] { return ++calls == 5; }, [&] {
    if (idles++ == 0)
      firstIdleS = since();
  }));
  EXPECT_EQ(calls, 5);
  // An idle step only follows a sleep, and sleeps only come after the
  // 200 us spin: on an idle machine the 5 polls fit in the spin, on a
  // loaded one (yields that take long) idle steps may follow, but none
  // before the spin is over. Not a timing test: only the order is checked.
  EXPECT_LT(idles, calls);
  if (idles > 0) {
    EXPECT_GE(firstIdleS, 200e-6);
  }
  EXPECT_LT(since(), 1.0);
}

TEST(PeerWait, PollForTimesOutWithoutBurningACore) {
  int idles = 0;
  double cpu0 = threadCpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(pollFor(0.5, [] { return false; }, [&] { ++idles; }));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = threadCpuSeconds() - cpu0;
  EXPECT_GE(wall, 0.5);
  EXPECT_LT(wall, 1.5);
  EXPECT_LT(cpu, 0.1 * wall) << "cpu " << cpu << " s over " << wall << " s";
  // At most one wake-up per 50 us, and ~1 per ms once the sleeps are long.
  EXPECT_GT(idles, 100);
  EXPECT_LT(idles, 2000);
}

TEST(PeerWait, TimeoutMessages) {
  EXPECT_EQ(timeoutMessage(0, 2, {1}, true, 1, 3, "all_reduce"),
            "rank 0: no answer from rank 1 for 3 s (in all_reduce)");
  // The silent ranks are named, not the peer the wait was for.
  EXPECT_EQ(timeoutMessage(3, 4, {1, 2}, true, 2, 300, "the agreement on errors"),
            "rank 3: no answer from ranks 1, 2 for 300 s (in the agreement on errors)");
  EXPECT_EQ(timeoutMessage(0, 4, {}, true, 3, 2.5, "recv"),
            "rank 0: no data from rank 3 for 2.5 s (in recv); every rank answers, so the "
            "ranks wait on each other");
  EXPECT_EQ(timeoutMessage(1, 4, {}, true, -1, 3, "a barrier"),
            "rank 1: no progress for 3 s (in a barrier); every rank answers, so the ranks "
            "wait on each other");
  EXPECT_EQ(timeoutMessage(1, 4, {}, false, 0, 3, "MPI start"),
            "rank 1: no answer from rank 0 for 3 s (in MPI start)");
  EXPECT_EQ(timeoutMessage(1, 4, {}, false, -1, 3, "MPI start"),
            "rank 1: no answer from one of ranks 0..3 for 3 s (in MPI start)");
}

TEST(PeerWait, TimeoutSetting) {
  double old = peerTimeout();
  EXPECT_EQ(kDefaultPeerTimeoutS, 300);
  setPeerTimeout(7.5);
  EXPECT_EQ(peerTimeout(), 7.5);
  setPeerTimeout(old);
}
