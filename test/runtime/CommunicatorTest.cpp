//===- CommunicatorTest.cpp - MPI's Communicator under mpirun ------------===//
//
// CommunicatorChecks.h's checks on MPI's implementation of the interface
// (MpiGroupComm, host memory): over a 1-D mesh, over no axes, and over one
// and both axes (in either order) of a 2-D mesh. NcclTest.cpp runs the same
// checks on NCCL's. Then the peer wait's pings (PeerWait.h): a census that
// ends before the answers come leaves no receive behind for them (the late
// answers would land in freed memory: ASan's report in the sanitizer
// subset, which runs this under mpirun -n 2). And the compressed
// reductions (int8 blocks, top-k, PowerSGD; error feedback), flat and in
// two levels. Run by ctest under mpirun -n 2 and -n 4.
//
//===----------------------------------------------------------------------===//

#include "CommunicatorChecks.h"

#include "comm/Codec.h"
#include "comm/MpiComm.h"
#include "comm/PeerWait.h"
#include "common/Codecs.h"
#include "core/Float16.h"

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

/// A compressed all-reduce of `mine` as a bf16 bucket (a compiled step's
/// --gradient-buffers=bf16): `mine` rounded to bf16 going in, the result
/// widened back for the caller.
std::vector<float> bf16Bucket(Communicator &c, const std::vector<float> &mine,
                              const Compression &z) {
  std::vector<uint16_t> in(mine.size()), out(mine.size());
  for (size_t i = 0; i < mine.size(); ++i)
    in[i] = floatToBf16(mine[i]);
  c.allReduceCompressed(in.data(), out.data(), mine.size(), HPCRT_BF16, 0, z);
  std::vector<float> wide(mine.size());
  for (size_t i = 0; i < mine.size(); ++i)
    wide[i] = bf16ToFloat(out[i]);
  return wide;
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
  z.codec = Codec::Int8Block;
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
        want += hpc::codecs::int8BlockBytes(chunk(j), block) +
                hpc::codecs::int8BlockBytes(chunk(k), block);
    expect(sent == want, what + ": compressed all-reduce sent " + std::to_string(sent) +
                             " bytes, expected " + std::to_string(want));
  }
  // A bf16 bucket: the same codec on the values widened, within the
  // quantization plus bf16's roundings (the inputs, the node's sum, the
  // result: each half a unit in the last place, 2^-9 of the g x 7 bound).
  {
    std::vector<float> narrow = bf16Bucket(c, mine, z);
    const float bf16Tol = tol + 3.0f * g * 7.0f / 512.0f;
    expect(worst(narrow) <= bf16Tol, what + ": a bf16 bucket within " + std::to_string(bf16Tol) +
                                         " of the exact sum (worst " +
                                         std::to_string(worst(narrow)) + ")");
    expect(sameOnEveryRank(narrow), what + ": a bf16 bucket bitwise the same on every rank");
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
  plain.codec = Codec::Int8Block;
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
  expect(error.find("needs f32 or bf16 values") != std::string::npos,
         what + ": a compressed f64 reduction fails: '" + error + "'");
  error.clear();
  try {
    std::vector<uint16_t> rows(count * g), mineRows(count);
    c.reduceScatterCompressed(rows.data(), mineRows.data(), count, HPCRT_BF16, 0, plain);
  } catch (const Error &e) {
    error = e.what();
  }
  expect(error.find("compressed reduce-scatter needs f32 values") != std::string::npos,
         what + ": a compressed bf16 reduce-scatter fails: '" + error + "'");
}

/// Rank r's top-k pairs of v as an independent reference: every index
/// sorted by (magnitude descending, index ascending), the first k.
std::vector<size_t> topkReference(const std::vector<float> &v, size_t k) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

/// Top-k reductions (flat: against the reference selection, bitwise;
/// two levels: bitwise the same on every rank), the bytes, and error
/// feedback's conservation: over many calls the results plus every rank's
/// residual add up to the exact sums.
void checkTopk(MpiComm &mesh, Communicator &c, const std::string &what, bool flat) {
  const int g = c.size(), k = c.rank();
  const size_t n = 1000;
  Compression z;
  z.codec = Codec::TopK;
  z.ratio = 0.1;
  std::vector<float> mine(n), got(n), want(n, 0.0f), exact(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = lossy(k, i);
    for (int r = 0; r < g; ++r)
      exact[i] += lossy(r, i);
  }
  uint64_t before = mesh.stats().bytesSent;
  c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
  uint64_t sent = mesh.stats().bytesSent - before;
  expect(sameOnEveryRank(got), what + ": top-k all-reduce bitwise the same on every rank");
  if (flat) {
    // Every member's 100 pairs, summed in group order.
    for (int r = 0; r < g; ++r) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i)
        v[i] = lossy(r, i);
      for (size_t i : topkReference(v, 100))
        want[i] += v[i];
    }
    expect(memcmp(want.data(), got.data(), n * sizeof(float)) == 0,
           what + ": top-k all-reduce is the sum of every member's 100 largest values");
    expect(sent == uint64_t(g - 1) * 100 * 8,
           what + ": top-k all-reduce sent " + std::to_string(sent) + " bytes, expected " +
               std::to_string((g - 1) * 800));
  }
  // Error feedback conserves: sum of T results + the residuals = T x exact.
  std::vector<float> state(n, 0.0f), total(n, 0.0f);
  z.feedback = state.data();
  z.feedbackCount = n;
  const int calls = 12;
  for (int t = 0; t < calls; ++t) {
    c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
    for (size_t i = 0; i < n; ++i)
      total[i] += got[i];
  }
  // In two levels (nodes of 2) a member's residuals are its chunk's, the
  // half (local index + 1) mod 2 of the node's sum.
  std::vector<float> placed(n, 0.0f), residual(n);
  const size_t at = flat ? 0 : size_t((k % 2 + 1) % 2) * (n / 2);
  for (size_t i = 0; i < (flat ? n : n / 2); ++i)
    placed[at + i] = state[i];
  MPI_Allreduce(placed.data(), residual.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  float worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(total[i] + residual[i] - calls * exact[i]));
    scale = std::max(scale, std::fabs(calls * exact[i]));
  }
  expect(worst <= 1e-5f * scale, what + ": top-k results plus residuals add up to the exact "
                                        "sums (worst " + std::to_string(worst) + ")");
  // Reduce-scatter (avg): this member's block exact, the others' 10 largest.
  const size_t count = 100;
  std::vector<float> in(count * g), out(count), blockWant(count, 0.0f);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = lossy(k, i);
  for (int r = 0; r < g; ++r) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i)
      v[i] = lossy(r, k * count + i);
    if (r == k)
      for (size_t i = 0; i < count; ++i)
        blockWant[i] += v[i];
    else
      for (size_t i : topkReference(v, 10))
        blockWant[i] += v[i];
  }
  Compression plain;
  plain.codec = Codec::TopK;
  plain.ratio = 0.1;
  c.reduceScatterCompressed(in.data(), out.data(), count, HPCRT_F32, 0, plain);
  if (flat) {
    bool same = true;
    for (size_t i = 0; i < count; ++i)
      same = same && std::fabs(out[i] - blockWant[i]) <= 1e-5f * (1 + std::fabs(blockWant[i]));
    expect(same, what + ": top-k reduce-scatter: own block exact, the others' 10 largest");
  }
}

/// PowerSGD (Codec.h) on pieces 30x20, 17 exact values, 12x40 at rank 2:
/// sums of rank-2 matrices come back exactly (up to rounding), exact pieces
/// exactly, bitwise the same on every rank, the bytes of its two rings
/// (flat), and error feedback's conservation on full-rank values.
void checkPowerSgd(MpiComm &mesh, Communicator &c, const std::string &what, bool flat,
                   std::vector<int64_t> chunks) {
  const int g = c.size(), k = c.rank();
  Compression z;
  z.codec = Codec::PowerSgd;
  z.rank = 2;
  z.rows = {30, 17, 12};
  z.cols = {20, 0, 40};
  z.chunks = std::move(chunks);
  const size_t n = 30 * 20 + 17 + 12 * 40;
  // A rank-2 matrix from rank r: a(i) b(j) + c(i) d(j) with factors that
  // differ by rank, so the sum is rank 2 too only when b, d are shared.
  auto lowRank = [&](int r, int64_t i, int64_t j, int64_t salt) {
    return float(std::sin(0.3 * i + r + salt) * std::cos(0.11 * j + salt) +
                 0.5 * std::cos(0.7 * i - r) * std::sin(0.05 * j * j + salt));
  };
  auto fill = [&](int r, bool full, std::vector<float> &v) {
    size_t at = 0;
    for (int64_t i = 0; i < 30; ++i)
      for (int64_t j = 0; j < 20; ++j, ++at)
        v[at] = full ? lossy(r, at) : lowRank(r, i, j, 1);
    for (int64_t i = 0; i < 17; ++i, ++at)
      v[at] = lossy(r, at);
    for (int64_t i = 0; i < 12; ++i)
      for (int64_t j = 0; j < 40; ++j, ++at)
        v[at] = full ? lossy(r, at) : lowRank(r, i, j, 2);
  };
  std::vector<float> mine(n), got(n), exact(n, 0.0f), v(n);
  fill(k, false, mine);
  for (int r = 0; r < g; ++r) {
    fill(r, false, v);
    for (size_t i = 0; i < n; ++i)
      exact[i] += v[i];
  }
  std::vector<float> state(20 * 2 + 40 * 2 + n, 0.0f);
  z.feedback = state.data();
  z.feedbackCount = state.size();
  uint64_t before = mesh.stats().bytesSent;
  c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
  uint64_t sent = mesh.stats().bytesSent - before;
  float worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(got[i] - exact[i]));
    scale = std::max(scale, std::fabs(exact[i]));
  }
  expect(worst <= 1e-4f * scale, what + ": PowerSGD rank 2 gives sums of rank-2 matrices "
                                        "back (worst " + std::to_string(worst) + ")");
  expect(sameOnEveryRank(got), what + ": PowerSGD bitwise the same on every rank");
  expect(!isZero(state.data(), 40), what + ": PowerSGD keeps its Q");
  {
    // A bf16 bucket from the same start: the sums near the f32 bucket's.
    // bf16's roundings (inputs, the node's sum, the result) make the
    // matrices full rank, and one power iteration passes some of that noise
    // on amplified (measured: 0.6% of the largest sum flat, 1.0% in two
    // levels); a misplaced chunk or piece would be off by the sums.
    std::vector<float> saved = state;
    std::fill(state.begin(), state.end(), 0.0f);
    std::vector<float> narrow = bf16Bucket(c, mine, z);
    float off = 0;
    for (size_t i = 0; i < n; ++i)
      off = std::max(off, std::fabs(narrow[i] - got[i]));
    expect(off <= 3e-2f * scale, what + ": PowerSGD on a bf16 bucket within bf16's rounding "
                                        "of the f32 bucket (worst " + std::to_string(off) + ")");
    expect(sameOnEveryRank(narrow), what + ": PowerSGD on a bf16 bucket bitwise the same on "
                                           "every rank");
    state = saved;
  }
  if (flat) {
    // Two f32 rings: 30*2 + 17 + 12*2 = 101 values, then 20*2 + 40*2 = 120.
    auto ring = [&](size_t m) {
      auto chunk = [&](int j) { return m / g + (size_t(j) < m % g ? 1 : 0); };
      uint64_t values = 0;
      for (int s = 0; s < g - 1; ++s)
        values += chunk(((k - s) % g + g) % g) + chunk(((k - s + 1) % g + g) % g);
      return 4 * values;
    };
    expect(sent == ring(101) + ring(120),
           what + ": PowerSGD sent " + std::to_string(sent) + " bytes, expected " +
               std::to_string(ring(101) + ring(120)));
    // Full-rank values: results plus residuals add up to the exact sums.
    fill(k, true, mine);
    std::fill(exact.begin(), exact.end(), 0.0f);
    for (int r = 0; r < g; ++r) {
      fill(r, true, v);
      for (size_t i = 0; i < n; ++i)
        exact[i] += v[i];
    }
    std::fill(state.begin(), state.end(), 0.0f);
    std::vector<float> total(n, 0.0f), residual(n, 0.0f), sums(n, 0.0f);
    const int calls = 10;
    for (int t = 0; t < calls; ++t) {
      c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, z);
      for (size_t i = 0; i < n; ++i)
        total[i] += got[i];
    }
    // The residuals follow the Q's, matrices only: place them.
    const float *e = state.data() + 120;
    for (size_t i = 0; i < 600; ++i)
      residual[i] = e[i];
    for (size_t i = 0; i < 480; ++i)
      residual[617 + i] = e[600 + i];
    MPI_Allreduce(residual.data(), sums.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    worst = 0, scale = 0;
    float lossyWorst = 0;
    for (size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(total[i] + sums[i] - calls * exact[i]));
      lossyWorst = std::max(lossyWorst, std::fabs(total[i] - calls * exact[i]));
      scale = std::max(scale, std::fabs(calls * exact[i]));
    }
    expect(worst <= 1e-4f * scale, what + ": PowerSGD results plus residuals add up to the "
                                          "exact sums (worst " + std::to_string(worst) + ")");
    expect(lossyWorst > 1e-2f * scale, what + ": PowerSGD rank 2 is lossy on full-rank values");
    // Too small a state, a bad split: one error on every rank.
    std::string error;
    try {
      Compression small = z;
      small.feedbackCount = 100;
      c.allReduceCompressed(mine.data(), got.data(), n, HPCRT_F32, 0, small);
    } catch (const Error &e) {
      error = e.what();
    }
    expect(error.find("PowerSGD state of 100 values") != std::string::npos,
           what + ": a too-small PowerSGD state fails: '" + error + "'");
  }
}

void run(int size) {
  HostMemory host;
  {
    MpiComm mpi({{"x", size, "intra_node"}}, MPI_COMM_WORLD);
    checkCommunicator(mpi.communicator({0}), "mpi", "mesh x", host);
    checkCommunicator(mpi.communicator({}), "mpi", "no axes", host);
    expect(&mpi.communicator({0}) == &mpi.communicator({0}), "one communicator per group");
    checkCompressed(mpi, mpi.communicator({0}), "mesh x", true);
    checkTopk(mpi, mpi.communicator({0}), "mesh x", true);
    checkPowerSgd(mpi, mpi.communicator({0}), "mesh x", true, {0, 3});
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
    checkTopk(line, line.communicator({0}, 2), "mesh x, two levels", false);
    checkPowerSgd(line, line.communicator({0}, 2), "mesh x, two levels", false, {0, 1, 3});
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
