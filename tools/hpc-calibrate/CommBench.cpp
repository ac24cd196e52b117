//===- CommBench.cpp - the runtime collectives per level, timed -----------===//
//
// The communication half of hpc-calibrate. The MPI world is grouped into
// nodes by host name (MPI_Get_processor_name); a level is measured on the
// communicator of its ranks: intra-node on a node's ranks (where a node
// holds more than one), inter-node on the ranks that have the same local
// index on different nodes (where there are several nodes). Every node (or
// local index) measures at once, as a training step's collectives run. On
// each level's communicator the runtime's own MPI communicator
// (hpcrt::comm::MpiComm over that communicator, a one-axis mesh; its
// MpiGroupComm behind the Communicator interface) runs every collective
// and a send/recv ping-pong at message sizes from 4 KiB up; a size's time
// is the mean per call of the slowest member, the median of 3 rounds over
// the whole table (1 with --quick).
//
// Sizes are nccl-tests' (test/runtime/CollectiveBench.cpp): the buffer of
// all_reduce and broadcast, the whole output of all_gather, the whole input
// of reduce_scatter, the send buffer of all_to_all, one message of
// send_recv (whose time is half a round trip between members 2k and 2k+1).
// So beta is the algorithm bandwidth, size / time, not a bus bandwidth.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "comm/CommQueue.h"
#include "comm/MpiComm.h"
#include "hpcrt.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <thread>

using namespace hpc;
using namespace hpc::calibrate;
using hpcrt::comm::Communicator;

bool hpc::calibrate::underMpirun(int &worldSize, int &worldRank) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  worldSize = size ? atoi(size) : 1;
  worldRank = rank ? atoi(rank) : 0;
  return size != nullptr;
}

namespace {

/// Groups the ranks of the world by host name (collective).
void findNodes(World &w) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  hpcrt::comm::checkMpi(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  std::vector<char> all(static_cast<size_t>(w.size) * MPI_MAX_PROCESSOR_NAME);
  hpcrt::comm::checkMpi(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                                      MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD),
                        "MPI_Allgather");
  std::map<std::string, int> nodeOf;
  std::vector<int> ranksPerNode, nodeOfRank(w.size);
  for (int r = 0; r < w.size; ++r) {
    const char *p = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    std::string host(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
    auto [it, added] = nodeOf.emplace(host, static_cast<int>(ranksPerNode.size()));
    if (added)
      ranksPerNode.push_back(0);
    if (r == w.rank) {
      w.node = it->second;
      w.localRank = ranksPerNode[it->second];
    }
    if (r == 0)
      w.host = host;
    ++ranksPerNode[it->second];
  }
  w.nodes = static_cast<int>(ranksPerNode.size());
  w.ranksOnNode = ranksPerNode[0];
  w.uniform = std::all_of(ranksPerNode.begin(), ranksPerNode.end(),
                          [&](int n) { return n == w.ranksOnNode; });
}

} // namespace

bool hpc::calibrate::startWorld(World &w, std::string &error) {
  w = World();
  int size = 1, rank = 0;
  if (!underMpirun(size, rank)) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    w.host = host[0] ? host : "host";
    return true;
  }
  try {
    // Serialized, as the runtime's: the overlap measurement runs its
    // all-reduce on the communication thread while the main thread computes.
    hpcrt::comm::checkMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &w.threadLevel),
                          "MPI_Init_thread");
    w.mpi = true;
    hpcrt::comm::checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
    hpcrt::comm::checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
    findNodes(w);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

void hpc::calibrate::barrier(const World &w) {
  if (w.mpi)
    MPI_Barrier(MPI_COMM_WORLD);
}

void hpc::calibrate::abortWorld(const World &w, const std::string &message) {
  fprintf(stderr, "hpc-calibrate: error: rank %d: %s\n", w.rank, message.c_str());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort(); // MPI_Abort does not return
}

void hpc::calibrate::finishWorld(const World &w) {
  if (w.mpi)
    MPI_Finalize();
}

int hpc::calibrate::firstFailure(const World &w, bool failed) {
  if (!w.mpi)
    return failed ? 0 : -1;
  int mine = failed ? w.rank : w.size, first = w.size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return first < w.size ? first : -1;
}

namespace {

/// Mean seconds per call of `f` on the slowest member of `comm`: two
/// warm-up calls, a barrier, `iters` timed calls.
template <typename F> double slowestPerCall(MPI_Comm comm, int iters, F &&f) {
  f();
  f();
  MPI_Barrier(comm);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    f();
  double t = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

/// The median of `v` (the upper one of an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Buffers of the largest size, for every kind and size of one level.
struct Buffers {
  std::vector<float> send, recv;
};

/// One call of `kind` moving `bytes` (nccl-tests' size; a multiple of 4 x
/// the group size) on `c`.
void runOnce(const std::string &kind, Communicator &c, size_t bytes, Buffers &b) {
  size_t count = bytes / 4, piece = count / static_cast<size_t>(c.size());
  const int f32 = HPCRT_F32, sum = 0;
  if (kind == "all_reduce") {
    c.allReduce(b.send.data(), b.recv.data(), count, f32, sum);
  } else if (kind == "reduce_scatter") {
    c.reduceScatter(b.send.data(), b.recv.data(), piece, f32, sum);
  } else if (kind == "all_gather") {
    c.allGather(b.send.data(), b.recv.data(), piece, f32);
  } else if (kind == "all_to_all") {
    c.allToAll(b.send.data(), b.recv.data(), piece, f32);
  } else if (kind == "broadcast") {
    c.broadcast(b.recv.data(), b.recv.data(), count, f32, 0);
  } else { // send_recv: a ping-pong between members 2k and 2k+1
    int me = c.rank(), peer = me ^ 1;
    if (peer >= c.size())
      return;
    if (me % 2 == 0) {
      c.send(b.send.data(), count, f32, peer);
      c.recv(b.recv.data(), count, f32, peer);
    } else {
      c.recv(b.recv.data(), count, f32, peer);
      c.send(b.send.data(), count, f32, peer);
    }
  }
}

/// Fits t(n) = alpha + n / beta with beta from the two ends of the range
/// (the largest and the smallest size: the slope between them) and alpha
/// from the smallest size (its time less its bytes at beta, at least 0), so
/// that both stay positive where noise would make a least-squares line's
/// intercept negative. A flat range takes beta from the largest size alone.
void fitAlphaBeta(cost::CollectiveTiming &row) {
  size_t last = row.sizes.size() - 1;
  double n0 = static_cast<double>(row.sizes[0]), n1 = static_cast<double>(row.sizes[last]);
  double t0 = row.seconds[0], t1 = row.seconds[last];
  row.beta = (t1 > t0 && n1 > n0) ? (n1 - n0) / (t1 - t0) : n1 / t1;
  row.alpha = std::max(0.0, t0 - n0 / row.beta);
}

/// Every kind on one level's communicator (collective over `comm`).
std::vector<cost::CollectiveTiming> measureLevel(const char *level, MPI_Comm comm,
                                                 const RunOptions &o) {
  int g = 0;
  MPI_Comm_size(comm, &g);
  bool intra = std::string(level) == "intra-node";
  hpcrt::comm::MpiComm mesh({{"ranks", g, intra ? "intra_node" : "inter_node"}}, comm);
  Communicator &c = mesh.communicator({0});
  std::vector<size_t> sizes;
  size_t maxBytes = o.quick ? size_t(1) << 20 : size_t(64) << 20;
  for (size_t s = 4 << 10; s <= maxBytes; s *= o.quick ? 16 : 4)
    sizes.push_back(std::max<size_t>(s / (4 * g) * (4 * g), 4 * g));
  Buffers b;
  b.send.assign(sizes.back() / 4, 1.0f);
  b.recv.assign(sizes.back() / 4, 0.0f);
  // The whole table in rounds, each size's time the median of its rounds:
  // one loop may take a stall the next does not (between the two test
  // nodes, whose shaped link drops packets when its queue fills, a TCP
  // retransmission timeout: one calibration's 16 MiB all-reduce took 187
  // ms, another's 269, and a 16 MiB reduce-scatter 134 ms beside an
  // all-gather of the same bytes at 71).
  const std::vector<std::string> &kinds = cost::calibrationCollectiveKinds();
  const int rounds = o.quick ? 1 : 3;
  std::vector<std::vector<std::vector<double>>> times(
      kinds.size(), std::vector<std::vector<double>>(sizes.size()));
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < kinds.size(); ++k)
      for (size_t i = 0; i < sizes.size(); ++i) {
        size_t bytes = sizes[i];
        size_t budget = o.quick ? size_t(8) << 20 : size_t(32) << 20;
        int iters = static_cast<int>(std::clamp<size_t>(budget / bytes, o.quick ? 3 : 5,
                                                        o.quick ? 20 : 200));
        double t = slowestPerCall(comm, iters, [&] { runOnce(kinds[k], c, bytes, b); });
        if (kinds[k] == "send_recv")
          t /= 2; // one message of the round trip
        times[k][i].push_back(t);
      }
  std::vector<cost::CollectiveTiming> rows;
  for (size_t k = 0; k < kinds.size(); ++k) {
    cost::CollectiveTiming row;
    row.level = level;
    row.kind = kinds[k];
    row.groupSize = g;
    for (size_t i = 0; i < sizes.size(); ++i) {
      row.sizes.push_back(static_cast<int64_t>(sizes[i]));
      row.seconds.push_back(std::max(median(times[k][i]), 1e-9));
    }
    fitAlphaBeta(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Splits the world by `color` and measures `level` on this rank's part
/// when it has more than one member; the rows of rank 0's part go to `out`.
void measureSplit(const World &w, const char *level, int color, const RunOptions &o,
                  std::vector<cost::CollectiveTiming> &out) {
  MPI_Comm comm;
  hpcrt::comm::checkMpi(MPI_Comm_split(MPI_COMM_WORLD, color, w.rank, &comm),
                        "MPI_Comm_split");
  int g = 0;
  MPI_Comm_size(comm, &g);
  if (g > 1) {
    std::vector<cost::CollectiveTiming> rows = measureLevel(level, comm, o);
    if (w.rank == 0)
      out.insert(out.end(), rows.begin(), rows.end());
  }
  MPI_Comm_free(&comm);
  MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace

void hpc::calibrate::measureCollectives(const World &w, const RunOptions &o,
                                        std::vector<cost::CollectiveTiming> &out) {
  out.clear();
  if (!w.mpi || w.size < 2)
    return;
  try {
    measureSplit(w, "intra-node", w.node, o, out);
    measureSplit(w, "inter-node", w.localRank, o, out);
  } catch (const std::exception &e) {
    fprintf(stderr, "hpc-calibrate: error: rank %d: %s\n", w.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void hpc::calibrate::measureOverlap(const World &w, const RunOptions &o,
                                    const std::function<void()> &compute,
                                    cost::OverlapTiming &out) {
  out = cost::OverlapTiming();
  if (!w.mpi || w.size < 2)
    return;
  try {
    hpcrt::comm::MpiComm mesh({{"ranks", w.size, w.nodes > 1 ? "inter_node" : "intra_node"}},
                              MPI_COMM_WORLD);
    Communicator &c = mesh.communicator({0});
    const int gemms = o.quick ? 2 : 8, iters = o.quick ? 2 : 3;
    auto computeAll = [&] {
      for (int i = 0; i < gemms; ++i)
        compute();
    };
    double tc = slowestPerCall(MPI_COMM_WORLD, iters, computeAll);
    // The buffer grows until the all-reduce alone takes at least as long
    // as the GEMMs: then the measured overlap is not capped by the
    // collective being short.
    const size_t unit = 4 * static_cast<size_t>(w.size), cap = size_t(256) << 20;
    size_t bytes = size_t(1) << 20;
    Buffers b;
    double tm = 0;
    while (true) {
      bytes = std::max(unit, bytes / unit * unit);
      b.send.assign(bytes / 4, 1.0f);
      b.recv.assign(bytes / 4, 0.0f);
      tm = slowestPerCall(MPI_COMM_WORLD, iters, [&] { runOnce("all_reduce", c, bytes, b); });
      if (tm >= tc || bytes >= cap)
        break;
      double grow = std::clamp(tc / std::max(tm, 1e-9) * 1.2, 2.0, 64.0);
      bytes = std::min(cap, static_cast<size_t>(static_cast<double>(bytes) * grow));
    }
    hpcrt::comm::CommQueue queue(w.threadLevel >= MPI_THREAD_SERIALIZED);
    // The three timings interleaved, several times over, and each one's
    // median: a shared machine's drift then hits all three alike.
    std::vector<double> cs, ms, bs;
    for (int k = 0; k < (o.quick ? 1 : 7); ++k) {
      cs.push_back(slowestPerCall(MPI_COMM_WORLD, iters, computeAll));
      ms.push_back(
          slowestPerCall(MPI_COMM_WORLD, iters, [&] { runOnce("all_reduce", c, bytes, b); }));
      bs.push_back(slowestPerCall(MPI_COMM_WORLD, iters, [&] {
        queue.submit(&b, 0, "all_reduce", [&] { runOnce("all_reduce", c, bytes, b); });
        computeAll();
        queue.wait(&b);
      }));
    }
    tc = median(cs);
    tm = median(ms);
    double tb = median(bs);
    std::string error = queue.finishRun();
    if (!error.empty())
      throw std::runtime_error(error);
    out.present = true;
    out.bytes = static_cast<int64_t>(bytes);
    out.computeS = tc;
    out.commS = tm;
    out.bothS = tb;
    out.fraction = std::clamp((tc + tm - tb) / tc, 0.0, 1.0);
  } catch (const std::exception &e) {
    fprintf(stderr, "hpc-calibrate: error: rank %d: %s\n", w.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

double hpc::calibrate::measureCollectiveOverhead(const World &w, const RunOptions &o,
                                                 const std::function<void()> &kernel) {
  if (!w.mpi || w.size < 2)
    return -1;
  try {
    hpcrt::comm::MpiComm mesh({{"ranks", w.size, w.nodes > 1 ? "inter_node" : "intra_node"}},
                              MPI_COMM_WORLD);
    Communicator &c = mesh.communicator({0});
    // The smallest size the collectives' table has: the transfer is the
    // least part of the time, as it is for the step's many small ones.
    const size_t bytes = 4096;
    Buffers b;
    b.send.assign(bytes / 4, 1.0f);
    b.recv.assign(bytes / 4, 0.0f);
    hpcrt::comm::CommQueue queue(w.threadLevel >= MPI_THREAD_SERIALIZED);
    const int iters = o.quick ? 10 : 50;
    // Interleaved rounds and each timing's median, as measureOverlap.
    std::vector<double> ks, ds, qs;
    for (int k = 0; k < (o.quick ? 1 : 7); ++k) {
      ks.push_back(slowestPerCall(MPI_COMM_WORLD, iters, kernel));
      ds.push_back(slowestPerCall(MPI_COMM_WORLD, iters,
                                  [&] { runOnce("all_reduce", c, bytes, b); }));
      qs.push_back(slowestPerCall(MPI_COMM_WORLD, iters, [&] {
        queue.submit(&b, 0, "all_reduce", [&] { runOnce("all_reduce", c, bytes, b); });
        queue.wait(&b);
        kernel();
      }));
    }
    std::string error = queue.finishRun();
    if (!error.empty())
      throw std::runtime_error(error);
    return std::max(0.0, median(qs) - median(ks) - median(ds));
  } catch (const std::exception &e) {
    fprintf(stderr, "hpc-calibrate: error: rank %d: %s\n", w.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return -1;
}

hpc::calibrate::CoreLending
hpc::calibrate::measureCoreLending(const World &w, const RunOptions &o, double coreShare,
                                   const std::function<void()> &compute) {
  CoreLending out;
  if (!w.mpi || w.size < 2)
    return out;
  try {
    hpcrt::comm::MpiComm mesh({{"ranks", w.size, w.nodes > 1 ? "inter_node" : "intra_node"}},
                              MPI_COMM_WORLD);
    Communicator &c = mesh.communicator({0});
    hpcrt::comm::CommQueue queue(w.threadLevel >= MPI_THREAD_SERIALIZED);
    // An odd world's last rank has no partner: it computes every time and
    // is not timed.
    const int partner = w.rank ^ 1;
    const bool paired = partner < w.size, computes = w.rank % 2 == 0;
    // Several of the scheduler's time slices long (20 ms, 10 with --quick),
    // whatever `compute` takes: shorter loops of ranks started at one
    // barrier may run one after the other, unshared.
    double one = slowestPerCall(MPI_COMM_WORLD, 3, compute);
    const int gemms = std::max(4, static_cast<int>(std::ceil((o.quick ? 0.01 : 0.02) / one)));
    float token = 0;
    // The computing ranks' slowest time of one round; `idle` is what their
    // partners do meanwhile.
    auto round = [&](const std::function<void()> &idle, bool answer) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = 0;
      if (computes || !paired) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < gemms; ++i)
          compute();
        t = MPI_Wtime() - t0;
        if (answer && paired)
          c.send(&token, 1, HPCRT_F32, partner);
      } else {
        idle();
      }
      if (!paired)
        t = 0;
      double slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return slowest;
    };
    auto all = [&] {
      for (int i = 0; i < gemms; ++i)
        compute();
    };
    round(all, false); // warm-up
    std::vector<double> as, ss, ws;
    for (int k = 0; k < (o.quick ? 1 : 5); ++k) {
      double ta = round(all, false);
      as.push_back(ta);
      auto asleep = [&] { std::this_thread::sleep_for(std::chrono::duration<double>(2 * ta)); };
      auto waiting = [&] {
        queue.submit(&token, 0, "recv", [&] { c.recv(&token, 1, HPCRT_F32, partner); });
        queue.wait(&token);
      };
      ss.push_back(round(asleep, false));
      ws.push_back(round(waiting, true));
    }
    std::string error = queue.finishRun();
    if (!error.empty())
      throw std::runtime_error(error);
    out.allS = median(as);
    out.sleepS = median(ss);
    out.waitS = median(ws);
    // Of the gain the cost model assumes when the partners lend their
    // whole share (the loop at whole cores: coreShare x allS), what
    // waiting partners leave: the cores' own gain beside sleeping ones
    // falls short of it too (caches, memory bandwidth).
    double gain = (1 - coreShare) * out.allS;
    out.fraction = gain > 0 ? std::clamp((out.allS - out.waitS) / gain, 0.0, 1.0) : 1.0;
  } catch (const std::exception &e) {
    fprintf(stderr, "hpc-calibrate: error: rank %d: %s\n", w.rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return out;
}
