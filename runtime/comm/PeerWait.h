//===- PeerWait.h - every wait on a peer, bounded and idle ------*- C++ -*-===//
//
// Every MPI call of the runtime that waits for another rank is started in
// its nonblocking form and completed here: MPI_Testall is polled, first in
// a short spin that yields (a fast collective pays no latency), then with
// sleeps that grow with the time waited, so a rank whose peer is slow or
// stopped uses no core. A wait that lasts --peer-timeout seconds ends the job: the rank
// prints one line naming the ranks that stopped answering and calls
// MPI_Abort, so mpirun ends every rank.
//
// To name the peer truthfully, a waiting rank answers the "are you there"
// pings of the others (on a communicator of its own). Shortly before its
// timeout a rank pings every rank; the ones whose answer has not come when
// the timeout ends are the ones named. When every rank answers, the ranks
// are alive and wait on each other, and the line says so.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_PEERWAIT_H
#define HPCRT_COMM_PEERWAIT_H

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace hpcrt::comm {

/// --peer-timeout's default: long enough for the longest phase one rank
/// runs while the others wait for it (setting up the kernels of a large
/// model, reading its weights and data, writing a checkpoint).
constexpr double kDefaultPeerTimeoutS = 300;

/// The seconds a wait on a peer may last (default kDefaultPeerTimeoutS).
void setPeerTimeout(double seconds);
double peerTimeout();

/// The pause between two polls of a wait: a yield (a spin) during the first
/// 200 us, then a sleep of a tenth of the time waited so far, from 50 us up
/// to 1 ms, so that a wait ends at most ~10% after its data came and an
/// idle wait wakes up at most 1000 times a second.
class Backoff {
public:
  Backoff() : start_(std::chrono::steady_clock::now()) {}
  /// Seconds since construction.
  double elapsed() const;
  /// Pauses; returns whether it slept (past the spin).
  bool pause();
  /// The sleep after `waitedS` seconds of waiting (0: spin).
  static double sleepFor(double waitedS);

private:
  std::chrono::steady_clock::time_point start_;
};

/// Polls `done` until it returns true (then true) or `seconds` have passed
/// (then false), pausing with a Backoff; `idle` runs after every sleep.
bool pollFor(double seconds, const std::function<bool()> &done,
             const std::function<void()> &idle = {});

/// `hook` runs (on whichever thread waits) at most once a second while a
/// wait on a peer lasts: the train loop's heartbeat (hpc-launch reads a
/// rank that waits on a peer as alive, the peer that stopped as hung).
void setWaitHook(std::function<void()> hook);

/// Starts answering the other ranks' pings (collective over `world`, right
/// after MPI_Init); `prog` starts the timeout's error line.
void startPeerWait(MPI_Comm world, const std::string &prog);
/// A barrier that waits like every other (so that a stopped rank is found
/// before MPI_Finalize, which would wait for it forever), then stops
/// answering pings. Collective; before MPI_Finalize.
void finishPeerWait();

/// Completes `n` requests (statuses may be MPI_STATUSES_IGNORE) of the
/// operation `op` ("all_reduce"); `peer` is the rank of `comm` whose data
/// it waits for (-1 for MPI's own collectives). On timeout: the one line
/// and MPI_Abort; never returns then.
void waitAll(MPI_Request *requests, int n, MPI_Status *statuses, const char *op,
             MPI_Comm comm, int peer);
inline void waitAll(std::vector<MPI_Request> &requests, MPI_Status *statuses, const char *op,
                    MPI_Comm comm, int peer) {
  waitAll(requests.data(), static_cast<int>(requests.size()), statuses, op, comm, peer);
}
/// One request of one of MPI's own collectives over `comm`.
void waitCollective(MPI_Request &request, const char *op, MPI_Comm comm);

/// One round of "are you there" pings to every other rank (asks nobody
/// before startPeerWait). Destroying it cancels the receives of the answers
/// that have not come, so a late answer never lands in freed memory.
class Census {
public:
  Census();
  ~Census();
  Census(const Census &) = delete;
  Census &operator=(const Census &) = delete;
  bool asked() const { return asked_; }
  /// Notes the answers that have come.
  void collect();
  /// The ranks that have not answered.
  std::vector<int> silent();

private:
  std::vector<int> answers_;
  std::vector<MPI_Request> pending_;
  bool asked_ = false;
};

/// The timeout's message (after "<prog>: error: "). `silent`: the world
/// ranks that did not answer the ping; `asked`: whether the ping went out
/// (false before startPeerWait); `peer`: the world rank waited for (-1
/// when unknown); `worldSize` for "one of ranks 0..N-1".
std::string timeoutMessage(int rank, int worldSize, const std::vector<int> &silent, bool asked,
                           int peer, double seconds, const std::string &op);

} // namespace hpcrt::comm

#endif // HPCRT_COMM_PEERWAIT_H
