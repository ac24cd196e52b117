//===- CommunicatorChecks.h - every call of a comm::Communicator -*- C++ -*-===//
//
// The checks CommunicatorTest.cpp (MPI, host memory) and NcclTest.cpp (NCCL,
// device memory) run through the Communicator interface, so both
// implementations are held to the same values: in place and apart, counts
// that do not divide by the group, several dtypes, and a ring of sends and
// receives. `Memory` moves test data to where the transport reads it:
// put(vector) -> pointer, get(pointer, n) -> vector, release(pointer).
// Every rank of MPI_COMM_WORLD makes the same calls in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_TEST_COMMUNICATORCHECKS_H
#define HPCRT_TEST_COMMUNICATORCHECKS_H

#include "comm/Communicator.h"
#include "core/Context.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace hpcrt {
namespace test {

using comm::Communicator;

inline int &checkFailures() {
  static int failures = 0;
  return failures;
}

inline int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++checkFailures();
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank(), what.c_str());
  }
}

/// Member r's value at element i: small integers, exact in every type.
inline double value(int r, size_t i) {
  return static_cast<double>((r + 1) * ((i % 5) + 1) % 7) - 3.0;
}

/// Host memory: the vectors' own storage.
struct HostMemory {
  template <typename T> T *put(std::vector<T> &v) { return v.data(); }
  template <typename T> std::vector<T> get(const T *p, size_t n) {
    return std::vector<T>(p, p + n);
  }
  template <typename T> void release(T *) {}
};

/// Runs `call(in, out)` on copies of `in` and `out` in `mem`; returns what
/// `out` (or, with inPlace, `in`) holds after it.
template <typename Memory, typename T, typename Call>
std::vector<T> through(Memory &mem, std::vector<T> in, std::vector<T> out, bool inPlace,
                       Call &&call) {
  T *din = mem.put(in), *dout = mem.put(out);
  T *result = inPlace ? din : dout;
  call(din, result);
  std::vector<T> got = mem.get(result, inPlace ? in.size() : out.size());
  mem.release(din);
  mem.release(dout);
  return got;
}

template <typename Memory>
void checkCommunicator(Communicator &c, const std::string &transport, const std::string &name,
                       Memory &mem) {
  const int r = c.rank(), g = c.size();
  std::string on = " (" + name + ", group " + std::to_string(r) + "/" + std::to_string(g) + ")";
  expect(c.transport() == transport, "transport" + on);

  // all_reduce f32 sum, max and avg, apart and in place; 1001 does not
  // divide by 2 or 4.
  for (size_t n : {size_t(1), size_t(1001)}) {
    for (int64_t kind : {0, 1, 4}) {
      for (bool inPlace : {false, true}) {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i)
          x[i] = static_cast<float>(value(r, i));
        std::vector<float> out =
            through(mem, x, std::vector<float>(n, -99.0f), inPlace, [&](float *in, float *o) {
              c.allReduce(in, o, n, HPCRT_F32, kind);
            });
        bool ok = true;
        for (size_t i = 0; i < n && ok; ++i) {
          double want = kind == 1 ? -1e30 : 0.0;
          for (int m = 0; m < g; ++m)
            want = kind == 1 ? std::max(want, value(m, i)) : want + value(m, i);
          if (kind == 4)
            want /= g;
          ok = std::abs(out[i] - want) < 1e-5;
        }
        expect(ok, "all_reduce f32 kind " + std::to_string(kind) + " n " + std::to_string(n) +
                       (inPlace ? " in place" : " apart") + on);
      }
    }
  }
  // all_reduce i64 sum, in place.
  {
    std::vector<int64_t> y = through(mem, std::vector<int64_t>(37, r + 1),
                                     std::vector<int64_t>(), true, [&](int64_t *in, int64_t *o) {
                                       c.allReduce(in, o, 37, HPCRT_I64, 0);
                                     });
    bool ok = true;
    for (int64_t v : y)
      ok = ok && v == int64_t(g) * (g + 1) / 2;
    expect(ok, "all_reduce i64 sum" + on);
  }
  // reduce_scatter f32: block j of member m holds value(m, j * n + i).
  {
    const size_t n = 333;
    std::vector<float> x(n * g);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(value(r, i));
    std::vector<float> y = through(mem, x, std::vector<float>(n, -99.0f), false,
                                   [&](float *in, float *o) {
                                     c.reduceScatter(in, o, n, HPCRT_F32, 0);
                                   });
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int m = 0; m < g; ++m)
        want += value(m, r * n + i);
      ok = std::abs(y[i] - want) < 1e-5;
    }
    expect(ok, "reduce_scatter f32" + on);
  }
  // all_gather i32: piece j from member j.
  {
    const size_t n = 101;
    std::vector<int32_t> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = static_cast<int32_t>(r * 1000 + i);
    std::vector<int32_t> y = through(mem, x, std::vector<int32_t>(n * g, -1), false,
                                     [&](int32_t *in, int32_t *o) {
                                       c.allGather(in, o, n, HPCRT_I32);
                                     });
    bool ok = true;
    for (int j = 0; j < g; ++j)
      for (size_t i = 0; i < n; ++i)
        ok = ok && y[j * n + i] == static_cast<int32_t>(j * 1000 + i);
    expect(ok, "all_gather i32" + on);
  }
  // all_to_all i64: piece j of member m is m * 100 + j.
  {
    const size_t n = 7;
    std::vector<int64_t> x(n * g);
    for (int j = 0; j < g; ++j)
      for (size_t i = 0; i < n; ++i)
        x[j * n + i] = r * 100 + j;
    std::vector<int64_t> y = through(mem, x, std::vector<int64_t>(n * g, -1), false,
                                     [&](int64_t *in, int64_t *o) {
                                       c.allToAll(in, o, n, HPCRT_I64);
                                     });
    bool ok = true;
    for (int j = 0; j < g; ++j)
      for (size_t i = 0; i < n; ++i)
        ok = ok && y[j * n + i] == j * 100 + r;
    expect(ok, "all_to_all i64" + on);
  }
  // broadcast f32 from the last member, apart and in place.
  for (bool inPlace : {false, true}) {
    const size_t n = 555;
    const int root = g - 1;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(value(r, i));
    std::vector<float> out =
        through(mem, x, std::vector<float>(n, -99.0f), inPlace, [&](float *in, float *o) {
          c.broadcast(in, o, n, HPCRT_F32, root);
        });
    bool ok = true;
    for (size_t i = 0; i < n; ++i)
      ok = ok && out[i] == static_cast<float>(value(root, i));
    expect(ok, std::string("broadcast f32") + (inPlace ? " in place" : " apart") + on);
  }
  // send to the next member, receive from the previous: even members send
  // first, odd ones receive first, so that neither transport waits on a
  // cycle.
  if (g > 1 && g % 2 == 0) {
    const size_t n = 777;
    int next = (r + 1) % g, prev = (r + g - 1) % g;
    std::vector<int32_t> y = through(mem, std::vector<int32_t>(n, r + 1),
                                     std::vector<int32_t>(n, -1), false,
                                     [&](int32_t *in, int32_t *o) {
                                       if (r % 2 == 0) {
                                         c.send(in, n, HPCRT_I32, next);
                                         c.recv(o, n, HPCRT_I32, prev);
                                       } else {
                                         c.recv(o, n, HPCRT_I32, prev);
                                         c.send(in, n, HPCRT_I32, next);
                                       }
                                     });
    bool ok = true;
    for (int32_t v : y)
      ok = ok && v == prev + 1;
    expect(ok, "send/recv ring i32" + on);
  }
  c.synchronize();
}

/// Sums every rank's failures; rank 0 prints one line. The exit status:
/// 0 when every check passed.
inline int reportChecks(const char *what, int size) {
  int mine = checkFailures(), total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank() == 0)
    printf("%s: %s on %d rank(s)\n", what, total ? "FAILED" : "all checks passed", size);
  return total ? 1 : 0;
}

} // namespace test
} // namespace hpcrt

#endif // HPCRT_TEST_COMMUNICATORCHECKS_H
