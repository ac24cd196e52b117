//===- PeerWait.cpp - every wait on a peer, bounded and idle ---------------===//
//
// The polling loop, the ping service that lets a timed-out rank tell which
// ranks stopped answering, and the timeout's one line (see PeerWait.h).
// MPI is called from one thread at a time (MPI_THREAD_SERIALIZED), so the
// service's state needs no lock: whichever thread waits answers the pings.
//
//===----------------------------------------------------------------------===//

#include "PeerWait.h"

#include "MpiComm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

namespace hpcrt::comm {

namespace {

constexpr double kSpinS = 200e-6;
constexpr double kMinSleepS = 50e-6, kMaxSleepS = 1e-3;
/// The ping goes out this long before the timeout (at most a fifth of it):
/// a waiting rank answers within one sleep (1 ms), a stopped one never.
constexpr double kCensusS = 2.0;
constexpr int kPingTag = 1, kPongTag = 2;
/// The bytes of every ping and answer (nothing is read from them).
const int kPayload = 0;

double timeoutS = kDefaultPeerTimeoutS;

/// The ping service: a duplicate of the world, so that pings never match
/// the program's own messages.
struct Service {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::string prog = "model";
};
Service service;

/// Receives one message of `tag` that has arrived on the service's
/// communicator, if any; returns its source (-1 when none).
int takeArrived(int tag) {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, tag, service.comm, &flag, &st) != MPI_SUCCESS || !flag)
    return -1;
  int sink = 0;
  MPI_Recv(&sink, 1, MPI_INT, st.MPI_SOURCE, tag, service.comm, MPI_STATUS_IGNORE);
  return st.MPI_SOURCE;
}

/// Answers every ping that has arrived.
void answerPings() {
  if (service.comm == MPI_COMM_NULL)
    return;
  for (int from; (from = takeArrived(kPingTag)) >= 0;) {
    MPI_Request r;
    if (MPI_Isend(&kPayload, 1, MPI_INT, from, kPongTag, service.comm, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
  }
}

/// The world rank of rank `peer` of `comm` (-1 when unknown).
int worldRank(MPI_Comm comm, int peer) {
  if (peer < 0 || comm == MPI_COMM_NULL)
    return -1;
  MPI_Group g, w;
  int out = -1;
  if (MPI_Comm_group(comm, &g) != MPI_SUCCESS)
    return -1;
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  if (MPI_Group_translate_ranks(g, 1, &peer, w, &out) != MPI_SUCCESS || out == MPI_UNDEFINED)
    out = -1;
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  return out;
}

std::string rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t k = 0; k < ranks.size(); ++k)
    s += (k ? ", " : "") + std::to_string(ranks[k]);
  return s;
}

std::string seconds(double s) {
  char b[32];
  snprintf(b, sizeof b, "%g s", s);
  return b;
}

[[noreturn]] void endJob(const std::string &message) {
  fprintf(stderr, "%s: error: %s\n", service.prog.c_str(), message.c_str());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

} // namespace

Census::Census() : answers_(service.size), pending_(service.size, MPI_REQUEST_NULL) {
  if (service.comm == MPI_COMM_NULL)
    return;
  asked_ = true;
  // Answers to an earlier round that came after it ended (its receives
  // were cancelled) are taken out of the way first.
  while (takeArrived(kPongTag) >= 0) {
  }
  for (int r = 0; r < service.size; ++r) {
    if (r == service.rank)
      continue;
    MPI_Irecv(&answers_[r], 1, MPI_INT, r, kPongTag, service.comm, &pending_[r]);
    MPI_Request ping;
    if (MPI_Isend(&kPayload, 1, MPI_INT, r, kPingTag, service.comm, &ping) == MPI_SUCCESS)
      MPI_Request_free(&ping);
  }
}

Census::~Census() {
  // A receive left posted would take a late answer into answers_ after it
  // is freed: cancelled, and completed (a receive's cancel is local).
  for (MPI_Request &p : pending_)
    if (p != MPI_REQUEST_NULL) {
      MPI_Cancel(&p);
      MPI_Wait(&p, MPI_STATUS_IGNORE);
    }
}

void Census::collect() {
  for (MPI_Request &p : pending_) {
    int flag = 0;
    if (p != MPI_REQUEST_NULL)
      MPI_Test(&p, &flag, MPI_STATUS_IGNORE);
  }
}

std::vector<int> Census::silent() {
  collect();
  std::vector<int> s;
  for (int r = 0; r < service.size; ++r)
    if (pending_[r] != MPI_REQUEST_NULL)
      s.push_back(r);
  return s;
}

void setPeerTimeout(double seconds) { timeoutS = seconds; }
double peerTimeout() { return timeoutS; }

double Backoff::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double Backoff::sleepFor(double waitedS) {
  if (waitedS < kSpinS)
    return 0;
  return std::clamp(waitedS / 10, kMinSleepS, kMaxSleepS);
}

bool Backoff::pause() {
  double s = sleepFor(elapsed());
  if (s == 0) {
    // A spin that yields: a rank (or the kernel's network processing for a
    // TCP peer) sharing this core gets it. Measured on the 2-core VM
    // (hpcrt-collective-bench, 2 ranks on one core, across the two-node
    // cluster): a 1 KiB reduce_scatter 360 -> 80 us; with a core per rank
    // the same either way (8-15 us), as is a node's 16 KiB all_reduce.
    std::this_thread::yield();
    return false;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
  return true;
}

bool pollFor(double seconds, const std::function<bool()> &done,
             const std::function<void()> &idle) {
  Backoff b;
  for (;;) {
    if (done())
      return true;
    if (b.elapsed() >= seconds)
      return false;
    if (b.pause() && idle)
      idle();
  }
}

std::string timeoutMessage(int rank, int worldSize, const std::vector<int> &silent, bool asked,
                           int peer, double s, const std::string &op) {
  std::string head = "rank " + std::to_string(rank) + ": ";
  std::string tail = " for " + seconds(s) + " (in " + op + ")";
  if (!silent.empty() && asked)
    return head + "no answer from " + rankList(silent) + tail;
  if (asked)
    return head + (peer >= 0 ? "no data from rank " + std::to_string(peer) : "no progress") +
           tail + "; every rank answers, so the ranks wait on each other";
  if (peer >= 0)
    return head + "no answer from rank " + std::to_string(peer) + tail;
  return head + "no answer from one of ranks 0.." + std::to_string(worldSize - 1) + tail;
}

void startPeerWait(MPI_Comm world, const std::string &prog) {
  service.prog = prog;
  MPI_Comm_rank(world, &service.rank);
  MPI_Comm_size(world, &service.size);
  MPI_Comm dup;
  MPI_Request r;
  checkMpi(MPI_Comm_idup(world, &dup, &r), "MPI_Comm_idup");
  waitCollective(r, "MPI start", world);
  service.comm = dup;
}

void finishPeerWait() {
  if (service.comm == MPI_COMM_NULL)
    return;
  MPI_Request r;
  checkMpi(MPI_Ibarrier(service.comm, &r), "MPI_Ibarrier");
  waitCollective(r, "the barrier before MPI_Finalize", service.comm);
  // Answers in flight to a rank that timed out meanwhile are dropped.
  MPI_Comm_free(&service.comm);
  service.comm = MPI_COMM_NULL;
}

namespace {
std::function<void()> waitHook;
std::atomic<int64_t> lastHookMs{0};

/// What a waiting rank does after each sleep: answer pings, and run the
/// wait hook once a second.
void whileWaiting() {
  answerPings();
  if (!waitHook)
    return;
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  int64_t last = lastHookMs.load(std::memory_order_relaxed);
  if (now - last >= 1000 && lastHookMs.compare_exchange_strong(last, now))
    waitHook();
}
} // namespace

void setWaitHook(std::function<void()> hook) { waitHook = std::move(hook); }

void waitAll(MPI_Request *requests, int n, MPI_Status *statuses, const char *op, MPI_Comm comm,
             int peer) {
  auto complete = [&] {
    int flag = 0;
    checkMpi(MPI_Testall(n, requests, &flag, statuses), "MPI_Testall");
    return flag != 0;
  };
  // The spin inline, without std::function or a clock per poll: most
  // exchanges of a collective end within it.
  for (int k = 0; k < 64; ++k)
    if (complete())
      return;
  const double t = timeoutS, census = std::min(kCensusS, t / 5);
  if (pollFor(t - census, complete, whileWaiting))
    return;
  Census c;
  if (pollFor(census, complete, [&] {
        whileWaiting();
        c.collect();
      }))
    return;
  endJob(timeoutMessage(service.rank, service.size, c.silent(), c.asked(),
                        worldRank(comm, peer), t, op));
}

void waitCollective(MPI_Request &request, const char *op, MPI_Comm comm) {
  waitAll(&request, 1, MPI_STATUSES_IGNORE, op, comm, -1);
}

} // namespace hpcrt::comm
