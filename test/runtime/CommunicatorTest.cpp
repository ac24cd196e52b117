//===- CommunicatorTest.cpp - MPI's Communicator under mpirun ------------===//
//
// CommunicatorChecks.h's checks on MPI's implementation of the interface
// (MpiGroupComm, host memory): over a 1-D mesh, over no axes, and over one
// and both axes (in either order) of a 2-D mesh. NcclTest.cpp runs the same
// checks on NCCL's. Then the peer wait's pings (PeerWait.h): a census that
// ends before the answers come leaves no receive behind for them (the late
// answers would land in freed memory: ASan's report in the sanitizer
// subset, which runs this under mpirun -n 2). And the compressed
// reductions (int8 blocks, error feedback), flat and in two levels. Run by
// ctest under mpirun -n 2 and -n 4.
//
//===----------------------------------------------------------------------===//

#include "CommunicatorChecks.h"

#include "comm/Codec.h"
#include "comm/MpiComm.h"
#include "comm/PeerWait.h"

#include <cstring>

using namespace hpcrt;
using namespace hpcrt::comm;
using namespace hpcrt::test;

namespace {

/// Rank r's f32 value at i for the compressed reductions: not small
/// integers, so that the int8 blocks round.
float lossy(int r, size_t i) {
  return static_cast<float>(std::sin(0.37 * double(i) + r) * double(1 + i % 7));
}

/// Whether `v` is bitwise rank 0's.
bool sameOnEveryRank(std::vector<float> v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// The compressed reductions (Codec.h) of a group over the whole world:
/// within the quantization of the exact sums, bitwise the same on every
/// rank, the bytes MpiComm's header gives (flat: `flatBytes`), and with
/// error feedback the mean over many calls converging on the exact sum.
void checkCompressed(MpiComm &mesh, Communicator &c, const std::string &what, bool flat) {
  const int g = c.size(), k = c.rank();
  const size_t n = 1000;
  const int64_t block = 16;
  std::vector<float> exact(n, 0.0f), mine(n);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = lossy(k, i);
    for (int r = 0; r < g; ++r)
      exact[i] += lossy(r, i);
  }
  // Each quantization is off by at most half a step of its block (7 / 254
  // for one rank's values, g times that for a sum): g sent pieces and the
  // gathered sum.
  const float tol = 2.0f * g * 7.0f / 254.0f;
  auto worst = [&](const std::vector<float> &got) {
    float w = 0;
    for (size_t i = 0; i < n; ++i)
      w = std::max(w, std::fabs(got[i] - exact[i]));
    return w;
  };
  Compression z;
  z.block = block;
  std::vector<float> got(n);
  uint64_t before = mesh.stats().bytesSent;
  c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
  uint64_t sent = mesh.stats().bytesSent - before;
  expect(worst(got) <= tol, what + ": compressed all-reduce within " + std::to_string(tol) +
                                " of the exact sum (worst " + std::to_string(worst(got)) + ")");
  expect(worst(got) > 0, what + ": the int8 blocks round");
  expect(sameOnEveryRank(got), what + ": compressed all-reduce bitwise the same on every rank");
  if (flat) {
    auto chunk = [&](int j) { return n / g + (size_t(j) < n % g ? 1 : 0); };
    uint64_t want = 0;
    for (int j = 0; j < g; ++j)
      if (j != k)
        want += int8BlockBytes(chunk(j), block) + int8BlockBytes(chunk(k), block);
    expect(sent == want, what + ": compressed all-reduce sent " + std::to_string(sent) +
                             " bytes, expected " + std::to_string(want));
  }
  // Error feedback: the same gradient 40 times; the mean of the results
  // is the exact sum up to the residual left over (one step's error / 40).
  std::vector<float> state(n + n, 0.0f), mean(n, 0.0f);
  z.feedback = state.data();
  z.feedbackCount = state.size();
  const int calls = 40;
  for (int t = 0; t < calls; ++t) {
    c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
    for (size_t i = 0; i < n; ++i)
      mean[i] += got[i] / calls;
  }
  expect(worst(mean) <= tol / 8, what + ": with error feedback the mean of " +
                                     std::to_string(calls) + " results is within " +
                                     std::to_string(tol / 8) + " of the exact sum (worst " +
                                     std::to_string(worst(mean)) + ")");
  expect(std::any_of(state.begin(), state.end(), [](float e) { return e != 0; }),
         what + ": the error-feedback state holds the rounding error");
  // Reduce-scatter: block j of every rank's input to member j.
  const size_t count = 100;
  std::vector<float> in(count * g), out(count), want(count, 0.0f);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = lossy(k, i);
  for (int r = 0; r < g; ++r)
    for (size_t i = 0; i < count; ++i)
      want[i] += lossy(r, k * count + i);
  Compression plain;
  plain.block = block;
  c.reduceScatterCompressed(in.data(), out.data(), count, HPCRT_F32, 4, plain);
  float w = 0;
  for (size_t i = 0; i < count; ++i)
    w = std::max(w, std::fabs(out[i] - want[i] / g));
  expect(w <= tol, what + ": compressed reduce-scatter (avg) within the quantization (worst " +
                       std::to_string(w) + ")");
  // A NaN stays a NaN (the loss monitor must see it) and leaves the
  // error-feedback state finite.
  std::vector<float> poisoned = mine;
  if (k == g - 1)
    poisoned[0] = std::nanf("");
  std::fill(state.begin(), state.end(), 0.0f);
  c.allReduceCompressed(poisoned.data(), got.data(), n, HPCRT_F32, 0, z);
  expect(std::isnan(got[0]), what + ": a NaN in the input is a NaN in the result");
  expect(std::all_of(state.begin(), state.end(), [](float e) { return std::isfinite(e); }),
         what + ": a NaN leaves the error-feedback state finite");
  // Bad calls fail on every rank alike, before any message.
  std::string error;
  try {
    Compression small = z;
    small.feedbackCount = 10;
    c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, small);
  } catch (const Error &e) {
    error = e.what();
  }
  expect(error.find("error-feedback state of 10 values") != std::string::npos,
         what + ": a too-small error-feedback state fails: '" + error + "'");
  error.clear();
  try {
    c.allReduceCompressed(mine.data(), got.data(), n / 2, HPCRT_F64, 0, plain);
  } catch (const Error &e) {
    error = e.what();
  }
  expect(error.find("needs f32 values") != std::string::npos,
         what + ": a compressed f64 reduction fails: '" + error + "'");
}

void run(int size) {
  HostMemory host;
  {
    MpiComm mpi({{"x", size, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(mpi.communicator({0}), "mpi", "mesh x", host);
    checkCommunicator(mpi.communicator({}), "mpi", "no axes", host);
    expect(&mpi.communicator({0}) == &mpi.communicator({0}), "one communicator per group");
    checkCompressed(mpi, mpi.communicator({0}), "mesh x", true);
  }
  if (size % 2 == 0 && size > 2) {
    MpiComm mpi({{"a", 2, "inter_node"}, {"b", size / 2, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(mpi.communicator({1}), "mpi", "mesh a x b, over b", host);
    checkCommunicator(mpi.communicator({0, 1}), "mpi", "mesh a x b, over a, b", host);
    checkCommunicator(mpi.communicator({1, 0}), "mpi", "mesh a x b, over b, a", host);
  }
  if (size == 4) {
    // Two levels on nodes of 2 ranks: over a 1-D mesh (each node's members
    // consecutive), and over b, a of a 2 x 2 mesh, where group indices 0
    // and 2 are node 0's (the blocks of a node are not consecutive).
    MpiComm line({{"x", 4, "inter_node"}}, MPI_COMM_WORLD);
    checkCommunicator(line.communicator({0}, 2), "mpi", "mesh x, two levels", host);
    expect(&line.communicator({0}, 2) != &line.communicator({0}),
           "the two-level communicator is not the flat one");
    checkCompressed(line, line.communicator({0}, 2), "mesh x, two levels", false);
    MpiComm grid({{"a", 2, "inter_node"}, {"b", 2, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(grid.communicator({1, 0}, 2), "mpi", "mesh a x b, over b, a, two levels",
                      host);
    // b's members share a node: no second level to run over.
    bool refused = false;
    try {
      grid.communicator({1}, 2);
    } catch (const Error &e) {
      refused = std::string(e.what()).find("do not lie on several nodes") != std::string::npos;
    }
    expect(refused, "a group on one node has no two levels");
  }
}

void barrier(const char *what) {
  MPI_Request r;
  checkMpi(MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
  waitCollective(r, what, MPI_COMM_WORLD);
}

/// Rank 0 asks and gives up at once; the others answer while they wait in
/// the barriers, after rank 0 has destroyed that census. A second census
/// then waits for every answer (the late ones of the first come meanwhile).
void checkCensus() {
  startPeerWait(MPI_COMM_WORLD, "hpcrt-communicator-test");
  if (worldRank() == 0) {
    Census early;
    expect(early.asked(), "a census after startPeerWait asks");
  }
  barrier("the barrier after the early census");
  if (worldRank() == 0) {
    Census c;
    bool answered = pollFor(60, [&] { return c.silent().empty(); });
    expect(answered, "every rank answers the second census");
  }
  barrier("the barrier after the second census");
  finishPeerWait();
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    run(size);
    checkCensus();
  } catch (const std::exception &e) {
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc = reportChecks("communicator", size);
  MPI_Finalize();
  return rc;
}
