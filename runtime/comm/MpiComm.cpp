//===- MpiComm.cpp - ring collectives over MPI point-to-point --------------===//
//
// Every collective is a fixed sequence of MPI_Isend/MPI_Irecv pairs between
// group neighbours, so the bytes a rank sends are known in advance (the
// compiler counts the same) and every reduction runs in one fixed order
// (each chunk is finished by one rank and copied to the others, so all ranks
// hold bitwise-identical results). Every wait goes through PeerWait.h
// (bounded by --peer-timeout, idle while it waits).
//
//===----------------------------------------------------------------------===//

#include "MpiComm.h"

#include "PeerWait.h"
#include "Reduce.h"

#include "../core/Context.h"
#include "../core/Float16.h"
#include "common/Codecs.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace hpcrt {
namespace comm {

namespace {
/// The largest piece one MPI call moves (MPI counts are int).
constexpr size_t kMaxPiece = size_t(1) << 30;
/// Broadcast segment: the chain forwards a segment while the next arrives.
constexpr size_t kBroadcastSegment = size_t(64) << 10;

int mod(int64_t a, int64_t m) { return static_cast<int>(((a % m) + m) % m); }
} // namespace

void checkMpi(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

std::string meshString(const std::vector<MeshAxis> &mesh) {
  std::string s;
  for (const MeshAxis &a : mesh)
    s += (s.empty() ? "" : ", ") + a.name + "=" + std::to_string(a.size);
  return s;
}

int64_t meshRanks(const std::vector<MeshAxis> &mesh) {
  int64_t n = 1;
  for (const MeshAxis &a : mesh)
    n *= a.size;
  return n;
}

std::string placementError(int64_t perNode, const std::vector<uint64_t> &nodeOf) {
  if (perNode <= 0)
    return "";
  auto p = static_cast<size_t>(perNode);
  for (size_t r = 0; r < nodeOf.size(); ++r) {
    size_t first = r / p * p;
    if (nodeOf[r] == nodeOf[first])
      continue;
    std::string n = std::to_string(perNode);
    return "compiled for " + n + " ranks per node, node-major (ranks " +
           std::to_string(first) + "-" + std::to_string(std::min(first + p, nodeOf.size()) - 1) +
           " on node " + std::to_string(first / p) + "), but ranks " + std::to_string(first) +
           " and " + std::to_string(r) + " run on different nodes; start " + n +
           " ranks per node in rank order (mpirun --map-by ppr:" + n + ":node)";
  }
  return "";
}

MpiComm::MpiComm(std::vector<MeshAxis> mesh, MPI_Comm world)
    : mesh_(std::move(mesh)), world_(world) {
  checkMpi(MPI_Comm_rank(world_, &rank_), "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(world_, &size_), "MPI_Comm_size");
  if (mesh_.size() > 16)
    fail("a mesh of " + std::to_string(mesh_.size()) + " axes (at most 16)");
  if (meshRanks(mesh_) != size_)
    fail("the mesh (" + meshString(mesh_) + ") has " + std::to_string(meshRanks(mesh_)) +
         " ranks, the communicator " + std::to_string(size_));
  coords_.assign(mesh_.size(), 0);
  int64_t rem = rank_;
  for (size_t a = mesh_.size(); a-- > 0;) {
    coords_[a] = rem % mesh_[a].size;
    rem /= mesh_[a].size;
  }
  MPI_Request dup;
  checkMpi(MPI_Comm_idup(world_, &p2p_, &dup), "MPI_Comm_idup");
  waitCollective(dup, "the mesh's communicators", world_);
  // One communicator per non-empty subset of the axes, created here, in the
  // same order on every rank, so that no later collective needs every rank
  // of the world to reach it (pipeline stages run different code). Members
  // are ordered by their row-major index over the subset in mesh order.
  unsigned subsets = 1u << mesh_.size();
  for (unsigned mask = 1; mask < subsets && mesh_.size() <= 6; ++mask)
    subsetComms_[mask] = splitSubset(mask);
}

MPI_Comm MpiComm::splitSubset(unsigned mask) {
  // Ranks agreeing on the other axes share a communicator (the color); the
  // key orders them row-major over the subset's axes.
  int64_t color = 0, key = 0;
  for (size_t a = 0; a < mesh_.size(); ++a) {
    if (mask & (1u << a))
      key = key * mesh_[a].size + coords_[a];
    else
      color = color * mesh_[a].size + coords_[a];
  }
  MPI_Comm c;
  checkMpi(MPI_Comm_split(world_, static_cast<int>(color), static_cast<int>(key), &c),
           "MPI_Comm_split");
  return c;
}

MpiComm::~MpiComm() {
  completeSends();
  for (auto &[mask, c] : subsetComms_)
    MPI_Comm_free(&c);
  if (p2p_ != MPI_COMM_NULL)
    MPI_Comm_free(&p2p_);
}

const Group &MpiComm::group(const std::vector<int64_t> &axes) {
  auto it = groups_.find(axes);
  if (it != groups_.end())
    return it->second;
  unsigned mask = 0;
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(mesh_.size()))
      fail("mesh axis index " + std::to_string(a) + " is out of range for the mesh (" +
           meshString(mesh_) + ")");
    if (mask & (1u << a))
      fail("mesh axis '" + mesh_[a].name + "' is listed twice");
    mask |= 1u << a;
  }
  Group g;
  if (mask == 0) {
    g.comm = MPI_COMM_SELF;
    g.commRank = {0};
    g.worldRank = {rank_};
    return groups_[axes] = g;
  }
  auto cit = subsetComms_.find(mask);
  if (cit == subsetComms_.end()) {
    // Meshes of more than 6 axes: split on first use (every rank of the
    // world must reach this collective).
    cit = subsetComms_.emplace(mask, splitSubset(mask)).first;
  }
  g.comm = cit->second;
  g.size = 1;
  for (int64_t a : axes)
    g.size *= static_cast<int>(mesh_[a].size);
  g.index = 0;
  for (int64_t a : axes)
    g.index = g.index * static_cast<int>(mesh_[a].size) + static_cast<int>(coords_[a]);
  // Group index (listed order) -> comm rank (mesh order).
  g.commRank.resize(g.size);
  g.worldRank.resize(g.size);
  std::vector<int64_t> c = coords_;
  for (int j = 0; j < g.size; ++j) {
    int64_t rem = j;
    for (size_t k = axes.size(); k-- > 0;) {
      c[axes[k]] = rem % mesh_[axes[k]].size;
      rem /= mesh_[axes[k]].size;
    }
    int64_t r = 0, w = 0;
    for (size_t a = 0; a < mesh_.size(); ++a) {
      if (mask & (1u << a))
        r = r * mesh_[a].size + c[a];
      w = w * mesh_[a].size + c[a];
    }
    g.commRank[j] = static_cast<int>(r);
    g.worldRank[j] = static_cast<int>(w);
  }
  return groups_[axes] = g;
}

Communicator &MpiComm::communicator(const std::vector<int64_t> &axes, int64_t ranksPerNode) {
  auto key = std::make_pair(axes, std::max<int64_t>(ranksPerNode, 0));
  std::unique_ptr<MpiGroupComm> &c = communicators_[key];
  if (!c) {
    const Group &g = group(axes);
    const TwoLevel *levels = nullptr;
    if (key.second > 0) {
      std::unique_ptr<TwoLevel> &t = twoLevels_[key];
      t = std::make_unique<TwoLevel>(twoLevel(g, key.second));
      levels = t.get();
    }
    c = std::make_unique<MpiGroupComm>(*this, g, levels);
  }
  return *c;
}

TwoLevel MpiComm::twoLevel(const Group &g, int64_t ranksPerNode) const {
  // Nodes in the order of their first member; members in group order.
  std::vector<int64_t> nodes;
  std::map<int64_t, std::vector<int>> on;
  for (int j = 0; j < g.size; ++j) {
    int64_t node = g.worldRank[j] / ranksPerNode;
    std::vector<int> &members = on[node];
    if (members.empty())
      nodes.push_back(node);
    members.push_back(j);
  }
  const int n = static_cast<int>(nodes.size()), l = static_cast<int>(on[nodes[0]].size());
  bool uniform = n > 1 && l > 1;
  for (int64_t node : nodes)
    uniform = uniform && static_cast<int>(on[node].size()) == l;
  if (!uniform)
    fail("a two-level reduction over " + std::to_string(g.size) +
         " ranks that do not lie on several nodes of " + std::to_string(ranksPerNode) +
         " ranks with the same number (more than one) on each");
  TwoLevel t;
  t.size = g.size;
  int64_t mine = g.worldRank[g.index] / ranksPerNode;
  const std::vector<int> &here = on[mine];
  int place = static_cast<int>(std::find(here.begin(), here.end(), g.index) - here.begin());
  for (int k = 0; k < n; ++k) {
    const std::vector<int> &members = on[nodes[k]];
    t.member.insert(t.member.end(), members.begin(), members.end());
    if (nodes[k] == mine)
      t.cross.index = k;
    t.cross.commRank.push_back(g.commRank[members[place]]);
    t.cross.worldRank.push_back(g.worldRank[members[place]]);
  }
  for (int j : here) {
    t.local.commRank.push_back(g.commRank[j]);
    t.local.worldRank.push_back(g.worldRank[j]);
  }
  t.local.comm = t.cross.comm = g.comm;
  t.local.size = l;
  t.local.index = place;
  t.cross.size = n;
  return t;
}

void MpiComm::sendTo(const void *data, size_t bytes, int peer, const Group &g) {
  if (peer < 0 || peer >= g.size)
    fail("send to group index " + std::to_string(peer) + " of a group of " +
         std::to_string(g.size));
  ++stats_.operations;
  exchange("a send", data, bytes, g.commRank[peer], nullptr, 0, MPI_PROC_NULL, g.comm);
}

void MpiComm::recvFrom(void *data, size_t bytes, int peer, const Group &g) {
  if (peer < 0 || peer >= g.size)
    fail("receive from group index " + std::to_string(peer) + " of a group of " +
         std::to_string(g.size));
  ++stats_.operations;
  exchange("a receive", nullptr, 0, MPI_PROC_NULL, data, bytes, g.commRank[peer], g.comm);
}

void MpiGroupComm::allReduce(const void *send, void *recv, size_t count, int dtype,
                             int64_t kind) {
  Reducer red = makeReducer(dtype, kind);
  if (send != recv && count)
    memmove(recv, send, payloadBytes(count, dtype));
  if (twoLevel_)
    mesh_.allReduce(recv, count, red, *twoLevel_);
  else
    mesh_.allReduce(recv, count, red, group_);
}

void MpiGroupComm::reduceScatter(const void *send, void *recv, size_t count, int dtype,
                                 int64_t kind) {
  if (twoLevel_)
    mesh_.reduceScatter(send, recv, count, makeReducer(dtype, kind), *twoLevel_);
  else
    mesh_.reduceScatter(send, recv, count, makeReducer(dtype, kind), group_);
}

/// A compressed reduction's dtype and kind: f32 sums (avg: a finished sum).
static void checkCompressible(int dtype, int64_t kind) {
  if (dtype != HPCRT_F32 && dtype != HPCRT_BF16)
    fail("a compressed reduction needs f32 or bf16 values, not dtype " + std::to_string(dtype));
  if (kind != 0 && kind != 4)
    fail("a compressed reduction is a sum or an average, not reduction " + std::to_string(kind));
}

Compression MpiComm::widenState(const Compression &c) {
  if (!c.feedbackBf16)
    return c;
  Compression wide = c;
  stateWide_.resize(c.feedbackCount);
  for (size_t i = 0; i < c.feedbackCount; ++i)
    stateWide_[i] = bf16ToFloat(c.feedbackBf16[i]);
  wide.feedback = stateWide_.data();
  wide.feedbackBf16 = nullptr;
  return wide;
}

void MpiComm::narrowState(const Compression &wide, const Compression &c) {
  if (c.feedbackBf16)
    for (size_t i = 0; i < c.feedbackCount; ++i)
      c.feedbackBf16[i] = floatToBf16(wide.feedback[i]);
}

void MpiGroupComm::allReduceCompressed(const void *send, void *recv, size_t count, int dtype,
                                       int64_t kind, const Compression &c) {
  checkCompressible(dtype, kind);
  if (send != recv && count)
    memmove(recv, send, payloadBytes(count, dtype));
  Reducer red = makeReducer(dtype, kind), f32 = makeReducer(HPCRT_F32, kind);
  Compression wide = mesh_.widenState(c);
  if (twoLevel_)
    mesh_.allReduceCompressed(recv, count, red, f32, *twoLevel_, wide);
  else
    mesh_.allReduceCompressed(recv, count, red, f32, group_, wide);
  mesh_.narrowState(wide, c);
}

void MpiGroupComm::reduceScatterCompressed(const void *send, void *recv, size_t count,
                                           int dtype, int64_t kind, const Compression &c) {
  checkCompressible(dtype, kind);
  if (c.codec == Codec::PowerSgd)
    fail("PowerSGD compresses all-reduces only, not a reduce-scatter");
  if (dtype != HPCRT_F32)
    fail("a compressed reduce-scatter needs f32 values, not dtype " + std::to_string(dtype));
  Reducer red = makeReducer(dtype, kind);
  auto *in = static_cast<const float *>(send);
  auto *out = static_cast<float *>(recv);
  Compression wide = mesh_.widenState(c);
  if (twoLevel_)
    mesh_.reduceScatterCompressed(in, out, count, red, *twoLevel_, wide);
  else
    mesh_.reduceScatterCompressed(in, out, count, red, group_, wide);
  mesh_.narrowState(wide, c);
}

void MpiGroupComm::allGather(const void *send, void *recv, size_t count, int dtype) {
  mesh_.allGather(send, recv, payloadBytes(count, dtype), group_);
}

void MpiGroupComm::allToAll(const void *send, void *recv, size_t count, int dtype) {
  mesh_.allToAll(send, recv, payloadBytes(count, dtype), group_);
}

void MpiGroupComm::broadcast(const void *send, void *recv, size_t count, int dtype, int root) {
  if (root < 0 || root >= group_.size)
    fail("broadcast root " + std::to_string(root) + " is not in the group of " +
         std::to_string(group_.size));
  size_t bytes = payloadBytes(count, dtype);
  if (send != recv && group_.index == root && bytes)
    memmove(recv, send, bytes);
  mesh_.broadcast(recv, bytes, root, group_);
}

void MpiGroupComm::send(const void *data, size_t count, int dtype, int peer) {
  mesh_.sendTo(data, payloadBytes(count, dtype), peer, group_);
}

void MpiGroupComm::recv(void *data, size_t count, int dtype, int peer) {
  mesh_.recvFrom(data, payloadBytes(count, dtype), peer, group_);
}

void *MpiComm::scratch(size_t bytes) {
  if (scratch_.size() < bytes)
    scratch_.resize(bytes);
  return scratch_.data();
}

void MpiComm::exchange(const char *op, const void *sendBuf, size_t sendBytes, int dest,
                       void *recvBuf, size_t recvBytes, int source, MPI_Comm comm) {
  std::vector<MPI_Request> reqs;
  char *r = static_cast<char *>(recvBuf);
  const char *s = static_cast<const char *>(sendBuf);
  size_t off = 0;
  do {
    int n = static_cast<int>(std::min(kMaxPiece, recvBytes - off));
    reqs.emplace_back();
    checkMpi(MPI_Irecv(r + off, n, MPI_BYTE, source, 0, comm, &reqs.back()), "MPI_Irecv");
    off += static_cast<size_t>(n);
  } while (off < recvBytes);
  off = 0;
  do {
    int n = static_cast<int>(std::min(kMaxPiece, sendBytes - off));
    reqs.emplace_back();
    checkMpi(MPI_Isend(s + off, n, MPI_BYTE, dest, 0, comm, &reqs.back()), "MPI_Isend");
    off += static_cast<size_t>(n);
  } while (off < sendBytes);
  waitAll(reqs, MPI_STATUSES_IGNORE, op, comm, source);
  countSent(sendBytes, dest, comm);
}

uint64_t MpiComm::bufferBytes() const {
  return scratch_.capacity() + packed_.capacity() + partial_.capacity() +
         codecSend_.capacity() + codecRecv_.capacity() +
         (codecValues_.capacity() + stateWide_.capacity() + bucketWide_.capacity()) *
             sizeof(float);
}

void MpiComm::setNodes(std::vector<uint64_t> nodeOf) {
  if (static_cast<int>(nodeOf.size()) != size_)
    fail("the node table has " + std::to_string(nodeOf.size()) + " ranks, the world " +
         std::to_string(size_));
  nodeOf_ = std::move(nodeOf);
}

void MpiComm::countSent(size_t bytes, int dest, MPI_Comm comm) {
  stats_.bytesSent += bytes;
  if (bytes && acrossNodes(dest, comm))
    stats_.bytesInterNode += bytes;
}

bool MpiComm::acrossNodes(int peer, MPI_Comm comm) {
  if (nodeOf_.empty() || peer < 0)
    return false;
  auto it = worldRanks_.find(comm);
  if (it == worldRanks_.end()) {
    // The world rank of every rank of `comm`, translated once.
    int n = 0;
    MPI_Comm_size(comm, &n);
    std::vector<int> mine(static_cast<size_t>(n)), world(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      mine[static_cast<size_t>(i)] = i;
    MPI_Group from, to;
    MPI_Comm_group(comm, &from);
    MPI_Comm_group(world_, &to);
    checkMpi(MPI_Group_translate_ranks(from, n, mine.data(), to, world.data()),
             "MPI_Group_translate_ranks");
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    it = worldRanks_.emplace(comm, std::move(world)).first;
  }
  int w = it->second.at(static_cast<size_t>(peer));
  return nodeOf_.at(static_cast<size_t>(w)) != nodeOf_.at(static_cast<size_t>(rank_));
}

namespace {
/// Chunk i of `count` elements split over g members: count/g elements, one
/// more when i < count%g (the compiler's ringAllReduceBytes counts the same).
size_t chunkSize(size_t count, int g, int i) {
  return count / g + (static_cast<size_t>(i) < count % g ? 1 : 0);
}
size_t chunkStart(size_t count, int g, int i) {
  return static_cast<size_t>(i) * (count / g) + std::min<size_t>(i, count % g);
}
} // namespace

Chunks Chunks::even(size_t count, int g) {
  Chunks c;
  for (int i = 0; i <= g; ++i)
    c.at.push_back(i < g ? chunkStart(count, g, i) : count);
  return c;
}

size_t Chunks::largest() const {
  size_t most = 0;
  for (size_t i = 0; i + 1 < at.size(); ++i)
    most = std::max(most, at[i + 1] - at[i]);
  return most;
}

void MpiComm::ringReduceScatterPass(char *d, const Chunks &c, const Reducer &red,
                                    const Group &grp) {
  const int g = grp.size, r = grp.index;
  const size_t e = red.elementSize;
  const int next = grp.commRank[mod(r + 1, g)], prev = grp.commRank[mod(r - 1, g)];
  char *tmp = static_cast<char *>(scratch(c.largest() * e));
  // At step s send chunk r-s, receive chunk r-s-1 and combine it into
  // ours; this member ends with chunk r+1 complete.
  for (int s = 0; s < g - 1; ++s) {
    int sc = mod(r - s, g), rc = mod(r - s - 1, g);
    exchange("all_reduce", d + c.start(sc) * e, c.size(sc) * e, next, tmp, c.size(rc) * e, prev,
             grp.comm);
    red.combine(d + c.start(rc) * e, tmp, c.size(rc));
  }
}

void MpiComm::ringAllGatherPass(char *d, const Chunks &c, size_t e, const Group &grp) {
  const int g = grp.size, r = grp.index;
  const int next = grp.commRank[mod(r + 1, g)], prev = grp.commRank[mod(r - 1, g)];
  // At step s send chunk r-s+1, receive chunk r-s in place.
  for (int s = 0; s < g - 1; ++s) {
    int sc = mod(r - s + 1, g), rc = mod(r - s, g);
    exchange("all_reduce", d + c.start(sc) * e, c.size(sc) * e, next, d + c.start(rc) * e,
             c.size(rc) * e, prev, grp.comm);
  }
}

void MpiComm::ringAllReduce(char *d, size_t count, const Reducer &red, const Group &grp,
                            int finishOver) {
  const int g = grp.size;
  if (g == 1) {
    if (red.finish)
      red.finish(d, count, finishOver);
    return;
  }
  const Chunks chunks = Chunks::even(count, g);
  ringReduceScatterPass(d, chunks, red, grp);
  int own = mod(grp.index + 1, g);
  if (red.finish)
    red.finish(d + chunks.start(own) * red.elementSize, chunks.size(own), finishOver);
  ringAllGatherPass(d, chunks, red.elementSize, grp);
}

void MpiComm::allReduce(void *data, size_t count, const Reducer &red, const Group &grp) {
  ++stats_.operations;
  ringAllReduce(static_cast<char *>(data), count, red, grp, grp.size);
}

void MpiComm::allReduce(void *data, size_t count, const Reducer &red, const TwoLevel &t) {
  ++stats_.operations;
  char *d = static_cast<char *>(data);
  const Group &local = t.local;
  const size_t e = red.elementSize;
  const Chunks chunks = Chunks::even(count, local.size);
  ringReduceScatterPass(d, chunks, red, local);
  // This member's chunk of the node's sum, reduced across the nodes and
  // finished over the whole group.
  int own = mod(local.index + 1, local.size);
  ringAllReduce(d + chunks.start(own) * e, chunks.size(own), red, t.cross, t.size);
  ringAllGatherPass(d, chunks, e, local);
}

void MpiComm::reduceScatter(const void *in, void *out, size_t count, const Reducer &red,
                            const Group &grp) {
  ++stats_.operations;
  ringReduceScatter(in, out, count, red, grp, grp.size);
}

void MpiComm::reduceScatter(const void *in, void *out, size_t count, const Reducer &red,
                            const TwoLevel &t) {
  ++stats_.operations;
  packByPlace(in, count, red.elementSize, t);
  ringReduceScatter(packed_.data(), partial_.data(), count * t.cross.size, red, t.local, 0);
  ringReduceScatter(partial_.data(), out, count, red, t.cross, t.size);
}

void MpiComm::packByPlace(const void *in, size_t count, size_t e, const TwoLevel &t) {
  const int n = t.cross.size, l = t.local.size;
  const size_t bytes = count * e;
  // Pack the blocks by place on the node: place p's N blocks (one per node,
  // in node order) together, so that the node's reduce-scatter gives its
  // p-th member the node's sum of exactly the blocks of the members at
  // place p, which the cross-node reduce-scatter then hands out.
  if (packed_.size() < bytes * t.size)
    packed_.resize(bytes * t.size);
  if (partial_.size() < bytes * n)
    partial_.resize(bytes * n);
  const char *src = static_cast<const char *>(in);
  for (int p = 0; p < l; ++p)
    for (int k = 0; k < n; ++k)
      if (bytes)
        memcpy(packed_.data() + (static_cast<size_t>(p) * n + k) * bytes,
               src + static_cast<size_t>(t.member[k * l + p]) * bytes, bytes);
}

void MpiComm::ringReduceScatter(const void *in, void *out, size_t count, const Reducer &red,
                                const Group &grp, int finishOver) {
  const int g = grp.size, r = grp.index;
  const size_t e = red.elementSize, bytes = count * e;
  const char *src = static_cast<const char *>(in);
  if (g == 1) {
    if (bytes)
      memmove(out, src, bytes);
    if (red.finish && finishOver)
      red.finish(out, count, finishOver);
    return;
  }
  const int next = grp.commRank[mod(r + 1, g)], prev = grp.commRank[mod(r - 1, g)];
  // Block b starts at member b+1 and travels the ring, each member adding
  // its own block b, until it reaches member b after g-1 steps.
  char *acc = static_cast<char *>(scratch(2 * bytes));
  char *tmp = acc + bytes;
  for (int s = 0; s < g - 1; ++s) {
    int sb = mod(r - s - 1, g), rb = mod(r - s - 2, g);
    const char *sendBuf = s == 0 ? src + sb * bytes : acc;
    exchange("reduce_scatter", sendBuf, bytes, next, tmp, bytes, prev, grp.comm);
    char *dst = s == g - 2 ? static_cast<char *>(out) : acc;
    if (bytes)
      memcpy(dst, src + rb * bytes, bytes);
    red.combine(dst, tmp, count);
  }
  if (red.finish && finishOver)
    red.finish(out, count, finishOver);
}

void MpiComm::compressedAllReduceHop(float *v, size_t m, const Reducer &red, const Group &hop,
                                     int finishOver, const Compression &c) {
  if (c.codec == Codec::TopK)
    return topkAllReduceHop(v, m, red, hop, finishOver, c);
  const int G = hop.size, k = hop.index;
  const int64_t B = c.block;
  const size_t mine = chunkSize(m, G, k), mineAt = chunkStart(m, G, k);
  float *sent = nullptr, *gathered = nullptr; // the two residuals
  if (c.feedback) {
    if (c.feedbackCount < m + mine)
      fail("error-feedback state of " + std::to_string(c.feedbackCount) +
           " values, the compressed all-reduce needs " + std::to_string(m + mine));
    sent = c.feedback;
    gathered = c.feedback + m;
    for (size_t i = 0; i < m; ++i)
      v[i] += sent[i];
  }
  if (G == 1) {
    if (red.finish)
      red.finish(v, m, finishOver);
    if (sent)
      std::fill(sent, sent + m, 0.0f);
    return;
  }
  auto pieceBytes = [&](int j) {
    return static_cast<size_t>(
        hpc::codecs::int8BlockBytes(static_cast<int64_t>(chunkSize(m, G, j)), B));
  };
  // Every piece but this member's own, encoded; its own stays exact.
  std::vector<size_t> at(static_cast<size_t>(G) + 1, 0);
  for (int j = 0; j < G; ++j)
    at[j + 1] = at[j] + (j == k ? 0 : pieceBytes(j));
  codecSend_.resize(std::max(at[G], pieceBytes(k)));
  for (int j = 0; j < G; ++j)
    if (j != k)
      int8BlockEncode(v + chunkStart(m, G, j), chunkSize(m, G, j), B, codecSend_.data() + at[j],
                      sent ? sent + chunkStart(m, G, j) : nullptr);
  if (sent)
    std::fill(sent + mineAt, sent + mineAt + mine, 0.0f);
  const size_t myBytes = pieceBytes(k);
  codecRecv_.resize(std::max(myBytes * G, pieceBytes(0)));
  for (int s = 1; s < G; ++s) {
    int to = mod(k + s, G), from = mod(k - s, G);
    exchange("all_reduce", codecSend_.data() + at[to], pieceBytes(to), hop.commRank[to],
             codecRecv_.data() + static_cast<size_t>(from) * myBytes, myBytes,
             hop.commRank[from], hop.comm);
  }
  // This member's piece summed in group order, the same order on every
  // rank whatever arrived first.
  codecValues_.assign(mine, 0.0f);
  float *acc = codecValues_.data();
  for (int j = 0; j < G; ++j) {
    if (j == k) {
      for (size_t i = 0; i < mine; ++i)
        acc[i] += v[mineAt + i];
    } else {
      int8BlockDecodeAdd(codecRecv_.data() + static_cast<size_t>(j) * myBytes, mine, B, acc);
    }
  }
  if (red.finish)
    red.finish(acc, mine, finishOver);
  // The sum goes round quantized; its owner keeps the quantized value too.
  if (gathered)
    for (size_t i = 0; i < mine; ++i)
      acc[i] += gathered[i];
  char *q = codecSend_.data();
  int8BlockEncode(acc, mine, B, q, gathered);
  int8BlockDecode(q, mine, B, v + mineAt);
  for (int s = 1; s < G; ++s) {
    int to = mod(k + s, G), from = mod(k - s, G);
    exchange("all_reduce", q, myBytes, hop.commRank[to], codecRecv_.data(), pieceBytes(from),
             hop.commRank[from], hop.comm);
    int8BlockDecode(codecRecv_.data(), chunkSize(m, G, from), B, v + chunkStart(m, G, from));
  }
}

void MpiComm::topkAllReduceHop(float *v, size_t m, const Reducer &red, const Group &hop,
                               int finishOver, const Compression &c) {
  const int G = hop.size, k = hop.index;
  if (m >= static_cast<size_t>(hpc::codecs::kTopkMaxValues))
    fail("a top-k all-reduce of " + std::to_string(m) + " values (at most 2^32 - 1)");
  if (c.feedback) {
    if (c.feedbackCount < m)
      fail("error-feedback state of " + std::to_string(c.feedbackCount) +
           " values, the top-k all-reduce needs " + std::to_string(m));
    for (size_t i = 0; i < m; ++i)
      v[i] += c.feedback[i];
  }
  if (G == 1) {
    if (red.finish)
      red.finish(v, m, finishOver);
    if (c.feedback)
      std::fill(c.feedback, c.feedback + m, 0.0f);
    return;
  }
  // Every member's pairs to every other (an all-gather), then the sum of
  // all of them in group order: bitwise the same on every member.
  const size_t bytes = pieceBytes(c, m), pairs = bytes / hpc::codecs::kTopkPairBytes;
  codecRecv_.resize(bytes * G);
  char *mine = codecRecv_.data() + static_cast<size_t>(k) * bytes;
  topkEncode(v, m, pairs, mine, c.feedback);
  for (int s = 1; s < G; ++s) {
    int to = mod(k + s, G), from = mod(k - s, G);
    exchange("all_reduce", mine, bytes, hop.commRank[to],
             codecRecv_.data() + static_cast<size_t>(from) * bytes, bytes, hop.commRank[from],
             hop.comm);
  }
  std::fill(v, v + m, 0.0f);
  for (int j = 0; j < G; ++j)
    topkDecodeAdd(codecRecv_.data() + static_cast<size_t>(j) * bytes, pairs, m, v);
  if (red.finish)
    red.finish(v, m, finishOver);
}

void MpiComm::powerSgdHop(float *v, int64_t first, int64_t end, const Reducer &red,
                          const Group &hop, int finishOver, const Compression &c) {
  const int G = hop.size;
  const int64_t R = c.rank;
  // The pieces' places in v, the Q's and residuals in the state.
  size_t values = 0, qs = 0, residuals = 0, firstSum = 0, secondSum = 0;
  for (int64_t p = first; p < end; ++p) {
    const bool matrix = c.cols[p] > 0;
    const size_t size = static_cast<size_t>(matrix ? c.rows[p] * c.cols[p] : c.rows[p]);
    values += size;
    if (matrix) {
      qs += static_cast<size_t>(c.cols[p] * R);
      residuals += size;
      firstSum += static_cast<size_t>(c.rows[p] * R);
      secondSum += static_cast<size_t>(c.cols[p] * R);
    } else {
      firstSum += size;
    }
  }
  if (!c.powerSgdFeedback)
    residuals = 0;
  if (!c.feedback || c.feedbackCount < qs + residuals)
    fail("PowerSGD state of " + std::to_string(c.feedbackCount) + " values, its matrices need " +
         std::to_string(qs + residuals));
  float *Q = c.feedback, *residual = residuals ? c.feedback + qs : nullptr;
  // M: the values plus last call's residual.
  if (residual) {
    size_t at = 0, e = 0;
    for (int64_t p = first; p < end; ++p) {
      const size_t size = static_cast<size_t>(c.cols[p] ? c.rows[p] * c.cols[p] : c.rows[p]);
      if (c.cols[p])
        for (size_t i = 0; i < size; ++i)
          v[at + i] += residual[e + i];
      e += c.cols[p] ? size : 0;
      at += size;
    }
  }
  // The first sum: each matrix's P = M Q (Q started where it is zero), and
  // the values reduced exactly.
  const Reducer sum = makeReducer(HPCRT_F32, 0);
  codecValues_.resize(firstSum + secondSum);
  float *P = codecValues_.data(), *nextQ = P + firstSum;
  {
    size_t at = 0, q = 0, out = 0;
    for (int64_t p = first; p < end; ++p) {
      const int64_t rows = c.rows[p], cols = c.cols[p];
      if (cols) {
        if (isZero(Q + q, static_cast<size_t>(cols * R)))
          powerSgdStartQ(Q + q, static_cast<size_t>(cols * R), static_cast<uint64_t>(p));
        powerSgdProject(v + at, rows, cols, Q + q, R, P + out);
        q += static_cast<size_t>(cols * R);
        out += static_cast<size_t>(rows * R);
        at += static_cast<size_t>(rows * cols);
      } else {
        memcpy(P + out, v + at, static_cast<size_t>(rows) * sizeof(float));
        out += static_cast<size_t>(rows);
        at += static_cast<size_t>(rows);
      }
    }
  }
  if (G > 1 && firstSum)
    ringAllReduce(reinterpret_cast<char *>(P), firstSum, sum, hop, 0);
  // The exact values are done; each P is orthonormalized and gives the
  // second sum, Q = M^T P.
  {
    size_t at = 0, out = 0, q = 0;
    for (int64_t p = first; p < end; ++p) {
      const int64_t rows = c.rows[p], cols = c.cols[p];
      if (cols) {
        orthonormalize(P + out, R, rows);
        powerSgdBack(v + at, rows, cols, P + out, R, nextQ + q);
        q += static_cast<size_t>(cols * R);
        out += static_cast<size_t>(rows * R);
        at += static_cast<size_t>(rows * cols);
      } else {
        memcpy(v + at, P + out, static_cast<size_t>(rows) * sizeof(float));
        out += static_cast<size_t>(rows);
        at += static_cast<size_t>(rows);
      }
    }
  }
  if (G > 1 && secondSum)
    ringAllReduce(reinterpret_cast<char *>(nextQ), secondSum, sum, hop, 0);
  // Each matrix's result P Q^T (the hop's sum), its share of it subtracted
  // from what it held for the residual, and Q kept for the next call.
  {
    size_t at = 0, out = 0, q = 0, e = 0;
    for (int64_t p = first; p < end; ++p) {
      const int64_t rows = c.rows[p], cols = c.cols[p];
      if (cols) {
        const size_t size = static_cast<size_t>(rows * cols);
        powerSgdExpand(P + out, nextQ + q, rows, cols, R, v + at,
                       residual ? residual + e : nullptr, 1.0f / static_cast<float>(G));
        memcpy(Q + q, nextQ + q, static_cast<size_t>(cols * R) * sizeof(float));
        q += static_cast<size_t>(cols * R);
        out += static_cast<size_t>(rows * R);
        e += size;
        at += size;
      } else {
        out += static_cast<size_t>(rows);
        at += static_cast<size_t>(rows);
      }
    }
  }
  if (red.finish)
    red.finish(v, values, finishOver);
}

/// The element bounds of PowerSGD's chunks (c.chunks, piece bounds), after
/// checking them against `members` chunks and `count` values.
static Chunks powerSgdElementChunks(const Compression &c, int members, size_t count) {
  const size_t P = c.rows.size();
  if (c.cols.size() != P || c.chunks.size() != static_cast<size_t>(members) + 1 ||
      c.chunks.front() != 0 || static_cast<size_t>(c.chunks.back()) != P)
    fail("PowerSGD's chunk bounds (" + std::to_string(c.chunks.size()) + ") do not split its " +
         std::to_string(P) + " pieces among " + std::to_string(members) + " members");
  std::vector<size_t> prefix{0};
  for (size_t p = 0; p < P; ++p) {
    if (c.rows[p] < 1 || c.cols[p] < 0 || (c.cols[p] && c.rank > std::min(c.rows[p], c.cols[p])))
      fail("PowerSGD piece " + std::to_string(p) + " is not a run of values or a matrix of "
           "rank " + std::to_string(c.rank) + " or more");
    prefix.push_back(prefix.back() +
                     static_cast<size_t>(c.cols[p] ? c.rows[p] * c.cols[p] : c.rows[p]));
  }
  if (prefix.back() != count)
    fail("PowerSGD's pieces hold " + std::to_string(prefix.back()) + " values, the reduction " +
         std::to_string(count));
  Chunks chunks;
  for (size_t j = 0; j < c.chunks.size(); ++j) {
    if (j && c.chunks[j] < c.chunks[j - 1])
      fail("PowerSGD's chunk bounds decrease");
    chunks.at.push_back(prefix[static_cast<size_t>(c.chunks[j])]);
  }
  return chunks;
}

void MpiComm::compressedReduceScatterHop(const float *in, float *out, size_t count,
                                         const Reducer &red, const Group &hop, int finishOver,
                                         const Compression &c) {
  const int G = hop.size, k = hop.index;
  const size_t all = count * static_cast<size_t>(G);
  if (c.codec == Codec::TopK && count >= static_cast<size_t>(hpc::codecs::kTopkMaxValues))
    fail("a top-k reduce-scatter of blocks of " + std::to_string(count) +
         " values (at most 2^32 - 1)");
  const float *v = in;
  if (c.feedback) {
    if (c.feedbackCount < all)
      fail("error-feedback state of " + std::to_string(c.feedbackCount) +
           " values, the compressed reduce-scatter needs " + std::to_string(all));
    codecValues_.resize(all);
    for (size_t i = 0; i < all; ++i)
      codecValues_[i] = in[i] + c.feedback[i];
    v = codecValues_.data();
  }
  // Each other member's block encoded for it; this member's own stays exact.
  const size_t bytes = pieceBytes(c, count);
  codecSend_.resize(bytes * G);
  codecRecv_.resize(bytes * G);
  for (int j = 0; j < G; ++j)
    if (j != k)
      encodePiece(c, v + j * count, count, codecSend_.data() + j * bytes,
                  c.feedback ? c.feedback + j * count : nullptr);
  if (c.feedback)
    std::fill(c.feedback + k * count, c.feedback + (k + 1) * count, 0.0f);
  for (int s = 1; s < G; ++s) {
    int to = mod(k + s, G), from = mod(k - s, G);
    exchange("reduce_scatter", codecSend_.data() + to * bytes, bytes, hop.commRank[to],
             codecRecv_.data() + from * bytes, bytes, hop.commRank[from], hop.comm);
  }
  std::fill(out, out + count, 0.0f);
  for (int j = 0; j < G; ++j) {
    if (j == k) {
      for (size_t i = 0; i < count; ++i)
        out[i] += v[k * count + i];
    } else {
      decodeAddPiece(c, codecRecv_.data() + j * bytes, count, out);
    }
  }
  if (red.finish)
    red.finish(out, count, finishOver);
}

float *MpiComm::hopValues(void *data, size_t start, size_t n, size_t e) {
  if (e == sizeof(float))
    return static_cast<float *>(data) + start;
  // A bf16 bucket's values cross (and are encoded) from f32: only the hop's
  // part is widened, 1/node-size of the bucket in two levels.
  bucketWide_.resize(n);
  const uint16_t *b = static_cast<const uint16_t *>(data) + start;
  for (size_t i = 0; i < n; ++i)
    bucketWide_[i] = bf16ToFloat(b[i]);
  return bucketWide_.data();
}

void MpiComm::roundBack(void *data, size_t start, size_t e) {
  if (e == sizeof(float))
    return;
  uint16_t *b = static_cast<uint16_t *>(data) + start;
  for (size_t i = 0; i < bucketWide_.size(); ++i)
    b[i] = floatToBf16(bucketWide_[i]);
}

void MpiComm::allReduceCompressed(void *data, size_t count, const Reducer &red,
                                  const Reducer &hopRed, const Group &grp,
                                  const Compression &c) {
  ++stats_.operations;
  float *v = hopValues(data, 0, count, red.elementSize);
  if (c.codec == Codec::PowerSgd) {
    powerSgdElementChunks(c, 1, count);
    powerSgdHop(v, 0, static_cast<int64_t>(c.rows.size()), hopRed, grp, grp.size, c);
  } else {
    compressedAllReduceHop(v, count, hopRed, grp, grp.size, c);
  }
  roundBack(data, 0, red.elementSize);
}

void MpiComm::allReduceCompressed(void *data, size_t count, const Reducer &red,
                                  const Reducer &hopRed, const TwoLevel &t,
                                  const Compression &c) {
  ++stats_.operations;
  char *d = static_cast<char *>(data);
  const Group &local = t.local;
  const size_t e = red.elementSize;
  // PowerSGD's members take whole pieces; the other codecs even chunks.
  const Chunks chunks = c.codec == Codec::PowerSgd
                            ? powerSgdElementChunks(c, local.size, count)
                            : Chunks::even(count, local.size);
  ringReduceScatterPass(d, chunks, red, local);
  int own = mod(local.index + 1, local.size);
  float *v = hopValues(d, chunks.start(own), chunks.size(own), e);
  if (c.codec == Codec::PowerSgd)
    powerSgdHop(v, c.chunks[own], c.chunks[own + 1], hopRed, t.cross, t.size, c);
  else
    compressedAllReduceHop(v, chunks.size(own), hopRed, t.cross, t.size, c);
  roundBack(d, chunks.start(own), e);
  ringAllGatherPass(d, chunks, e, local);
}

void MpiComm::reduceScatterCompressed(const float *in, float *out, size_t count,
                                      const Reducer &red, const Group &grp,
                                      const Compression &c) {
  ++stats_.operations;
  compressedReduceScatterHop(in, out, count, red, grp, grp.size, c);
}

void MpiComm::reduceScatterCompressed(const float *in, float *out, size_t count,
                                      const Reducer &red, const TwoLevel &t,
                                      const Compression &c) {
  ++stats_.operations;
  packByPlace(in, count, red.elementSize, t);
  ringReduceScatter(packed_.data(), partial_.data(), count * t.cross.size, red, t.local, 0);
  compressedReduceScatterHop(reinterpret_cast<const float *>(partial_.data()), out, count, red,
                             t.cross, t.size, c);
}

void MpiComm::allGather(const void *in, void *out, size_t bytes, const Group &grp) {
  ++stats_.operations;
  const int g = grp.size, r = grp.index;
  char *o = static_cast<char *>(out);
  if (bytes)
    memmove(o + r * bytes, in, bytes);
  if (g == 1)
    return;
  const int next = grp.commRank[mod(r + 1, g)], prev = grp.commRank[mod(r - 1, g)];
  for (int s = 0; s < g - 1; ++s) {
    int sp = mod(r - s, g), rp = mod(r - s - 1, g);
    exchange("all_gather", o + sp * bytes, bytes, next, o + rp * bytes, bytes, prev, grp.comm);
  }
}

void MpiComm::allToAll(const void *in, void *out, size_t bytes, const Group &grp) {
  ++stats_.operations;
  const int g = grp.size, r = grp.index;
  const char *i = static_cast<const char *>(in);
  char *o = static_cast<char *>(out);
  if (bytes)
    memcpy(o + r * bytes, i + r * bytes, bytes);
  for (int s = 1; s < g; ++s) {
    int to = mod(r + s, g), from = mod(r - s, g);
    exchange("all_to_all", i + to * bytes, bytes, grp.commRank[to], o + from * bytes, bytes,
             grp.commRank[from], grp.comm);
  }
}

void MpiComm::broadcast(void *data, size_t bytes, int root, const Group &grp) {
  ++stats_.operations;
  const int g = grp.size, r = grp.index;
  if (root < 0 || root >= g)
    fail("broadcast root " + std::to_string(root) + " is not in the group of " +
         std::to_string(g));
  if (g == 1)
    return;
  const int pos = mod(r - root, g);
  const bool hasPrev = pos > 0, hasNext = pos < g - 1;
  const int next = grp.commRank[mod(r + 1, g)], prev = grp.commRank[mod(r - 1, g)];
  char *d = static_cast<char *>(data);
  // Segments: every receive is posted first, then each segment is
  // forwarded as soon as it has arrived.
  std::vector<size_t> offsets;
  for (size_t off = 0; off < bytes || offsets.empty(); off += kBroadcastSegment)
    offsets.push_back(off);
  auto length = [&](size_t k) {
    return static_cast<int>(std::min(kBroadcastSegment, bytes - offsets[k]));
  };
  std::vector<MPI_Request> recvs(hasPrev ? offsets.size() : 0), sends;
  for (size_t k = 0; k < recvs.size(); ++k)
    checkMpi(MPI_Irecv(d + offsets[k], length(k), MPI_BYTE, prev, 0, grp.comm, &recvs[k]),
             "MPI_Irecv");
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (hasPrev)
      waitAll(&recvs[k], 1, MPI_STATUSES_IGNORE, "broadcast", grp.comm, prev);
    if (hasNext) {
      sends.emplace_back();
      checkMpi(MPI_Isend(d + offsets[k], length(k), MPI_BYTE, next, 0, grp.comm, &sends.back()),
               "MPI_Isend");
    }
  }
  waitAll(sends, MPI_STATUSES_IGNORE, "broadcast", grp.comm, next);
  if (hasNext)
    countSent(bytes, next, grp.comm);
}

int MpiComm::peer(int axis, int64_t offset) const {
  if (axis < 0 || axis >= static_cast<int>(mesh_.size()))
    fail("mesh axis index " + std::to_string(axis) + " is out of range for the mesh (" +
         meshString(mesh_) + ")");
  int64_t c = coords_[axis] + offset;
  if (c < 0 || c >= mesh_[axis].size)
    return -1;
  int64_t stride = 1;
  for (size_t a = axis + 1; a < mesh_.size(); ++a)
    stride *= mesh_[a].size;
  return static_cast<int>(rank_ + offset * stride);
}

void MpiComm::send(const void *data, size_t bytes, int axis, int64_t offset) {
  int dest = peer(axis, offset);
  if (dest < 0)
    return;
  ++stats_.operations;
  // Buffered: the data is copied and the send completes in the background,
  // so two ranks that send to each other before receiving do not deadlock.
  std::unique_ptr<char[]> copy(new char[std::max<size_t>(bytes, 1)]);
  if (bytes)
    memcpy(copy.get(), data, bytes);
  size_t off = 0;
  do {
    int n = static_cast<int>(std::min(kMaxPiece, bytes - off));
    sendRequests_.emplace_back();
    checkMpi(MPI_Isend(copy.get() + off, n, MPI_BYTE, dest, 1, p2p_, &sendRequests_.back()),
             "MPI_Isend");
    off += static_cast<size_t>(n);
  } while (off < bytes);
  sendBuffers_.push_back(std::move(copy));
  remoteSends_ |= acrossNodes(dest, p2p_);
  countSent(bytes, dest, p2p_);
  progress(); // releases the buffers of sends that have completed meanwhile
}

MpiComm::PendingRecv MpiComm::postRecv(void *data, size_t bytes, int axis, int64_t offset) {
  PendingRecv p;
  p.source = peer(axis, offset);
  if (p.source < 0)
    return p;
  ++stats_.operations;
  char *d = static_cast<char *>(data);
  size_t off = 0;
  do {
    int n = static_cast<int>(std::min(kMaxPiece, bytes - off));
    p.requests.emplace_back();
    p.sizes.push_back(n);
    checkMpi(MPI_Irecv(d + off, n, MPI_BYTE, p.source, 1, p2p_, &p.requests.back()),
             "MPI_Irecv");
    off += static_cast<size_t>(n);
  } while (off < bytes);
  p.remote = acrossNodes(p.source, p2p_);
  remoteRecvs_ += p.remote;
  return p;
}

bool MpiComm::finishRecv(PendingRecv &p) {
  if (p.source < 0)
    return false;
  std::vector<MPI_Status> st(p.requests.size());
  remoteRecvs_ -= p.remote;
  p.remote = false;
  waitAll(p.requests, st.data(), "recv", p2p_, p.source);
  for (size_t k = 0; k < st.size(); ++k) {
    int got = 0;
    MPI_Get_count(&st[k], MPI_BYTE, &got);
    if (got != p.sizes[k])
      fail("received " + std::to_string(got) + " bytes from rank " + std::to_string(p.source) +
           ", expected " + std::to_string(p.sizes[k]) + " (the sender's tensor differs)");
  }
  p.requests.clear();
  return true;
}

bool MpiComm::progress() {
  if (!sendRequests_.empty()) {
    int done = 0;
    checkMpi(MPI_Testall(static_cast<int>(sendRequests_.size()), sendRequests_.data(), &done,
                         MPI_STATUSES_IGNORE),
             "MPI_Testall");
    if (done) {
      sendRequests_.clear();
      sendBuffers_.clear();
      remoteSends_ = false;
    }
  } else if (remoteRecvs_ > 0) {
    // Any call runs the progress engine: a receive's rendezvous is answered.
    int flag = 0;
    checkMpi(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, p2p_, &flag, MPI_STATUS_IGNORE),
             "MPI_Iprobe");
  }
  return remoteSends_ || remoteRecvs_ > 0;
}

void MpiComm::completeSends() {
  if (!sendRequests_.empty())
    waitAll(sendRequests_, MPI_STATUSES_IGNORE, "send", p2p_, -1);
  sendRequests_.clear();
  sendBuffers_.clear();
  remoteSends_ = false;
}

} // namespace comm
} // namespace hpcrt
