//===- MpiComm.h - the MPI communicator of a mesh --------------*- C++ -*-===//
//
// The CPU side of runtime/comm: one object per process that knows the mesh
// (named axes with sizes), this rank's coordinates on it, one MPI
// communicator per subset of the mesh axes, and the collectives the dist ops
// need, written over MPI point-to-point with ring algorithms so that the
// bytes each rank sends are exactly the ones the compiler predicts (see
// hpcrt.h, "Collectives"). It knows nothing about dtypes: reductions come in
// as a Reducer (Reduce.h builds one for a dtype and a reduction kind).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_MPICOMM_H
#define HPCRT_COMM_MPICOMM_H

#include "Codec.h"
#include "Communicator.h"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hpcrt {
namespace comm {

/// One axis of the mesh, as the manifest's "mesh" lists it.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  std::string level; ///< "intra_node" / "inter_node" (informative)
};

/// "dp=2, tp=2".
std::string meshString(const std::vector<MeshAxis> &mesh);
/// The product of the axis sizes.
int64_t meshRanks(const std::vector<MeshAxis> &mesh);

/// The ranks the compiler laid on one node (node-major, `perNode` a node;
/// 0: not compiled for a cluster) must share one: "" when they do, else the
/// error line naming the first two that do not. `nodeOf` is every rank's
/// node (any name, equal on one node). Ranks compiled for different nodes
/// may share one.
std::string placementError(int64_t perNode, const std::vector<uint64_t> &nodeOf);

/// An elementwise reduction over `elementSize`-byte elements:
/// combine(acc, in, n) sets acc[i] = acc[i] (op) in[i]; finish(acc, n, g),
/// when set, finishes a reduced chunk over g ranks (avg divides by g).
struct Reducer {
  size_t elementSize = 0;
  std::function<void(void *acc, const void *in, size_t n)> combine;
  std::function<void(void *acc, size_t n, int g)> finish;
};

/// The ranks a collective over some mesh axes runs among: every rank whose
/// coordinates on the other axes equal this rank's. Members are numbered by
/// the row-major index of their coordinates over the axes in the listed
/// order (the "group index").
struct Group {
  MPI_Comm comm = MPI_COMM_NULL; ///< the communicator of the axis subset
  int size = 1;                  ///< g
  int index = 0;                 ///< this rank's group index
  std::vector<int> commRank;     ///< comm rank of each group index
  std::vector<int> worldRank;    ///< world rank of each group index
};

/// A group laid on nodes of P consecutive world ranks, N nodes of L of its
/// members each, for the two-level reductions (a dist reduction with
/// ranks_per_node): `local` is this member's node (members in group-index
/// order), `cross` the members at its place on every node (nodes in the
/// order of their first member's group index); member[k * L + l] is the
/// group index of the l-th member of the k-th node. The compiler counts
/// the same placement (hpc::dist::twoLevels).
struct TwoLevel {
  Group local, cross;
  std::vector<int> member;
  int size = 1; ///< N * L, the whole group
};

/// Communication statistics since the last reset.
struct CommStats {
  uint64_t bytesSent = 0; ///< bytes handed to MPI sends
  /// Of those, the bytes sent to a rank on another node (MpiComm::setNodes;
  /// 0 until the nodes are known).
  uint64_t bytesInterNode = 0;
  uint64_t operations = 0; ///< collectives, sends and receives with a peer
};

/// How a ring splits a buffer among g members: chunk i is elements
/// [at[i], at[i+1]). Even chunks (Chunks::even) everywhere but PowerSGD's
/// two-level reductions, whose members take whole pieces.
struct Chunks {
  std::vector<size_t> at;
  /// count/g elements each, one more for i < count%g (the compiler's ring
  /// byte counts split the same).
  static Chunks even(size_t count, int g);
  size_t start(int i) const { return at[static_cast<size_t>(i)]; }
  size_t size(int i) const { return at[static_cast<size_t>(i) + 1] - at[static_cast<size_t>(i)]; }
  size_t largest() const;
};

class MpiComm;

/// The Communicator of one group over MPI: host buffers, the mesh's ring
/// collectives (MpiComm's), reductions by Reduce.h's reducers. Made and
/// owned by MpiComm::communicator().
class MpiGroupComm final : public Communicator {
public:
  /// With `twoLevel`, the reductions (allReduce, reduceScatter) run in two
  /// levels over it; the other collectives are the group's flat ones.
  MpiGroupComm(MpiComm &mesh, const Group &group, const TwoLevel *twoLevel = nullptr)
      : mesh_(mesh), group_(group), twoLevel_(twoLevel) {}

  const char *transport() const override { return "mpi"; }
  int rank() const override { return group_.index; }
  int size() const override { return group_.size; }

  void allReduce(const void *send, void *recv, size_t count, int dtype, int64_t kind) override;
  void reduceScatter(const void *send, void *recv, size_t count, int dtype,
                     int64_t kind) override;
  void allReduceCompressed(const void *send, void *recv, size_t count, int dtype, int64_t kind,
                           const Compression &c) override;
  void reduceScatterCompressed(const void *send, void *recv, size_t count, int dtype,
                               int64_t kind, const Compression &c) override;
  void allGather(const void *send, void *recv, size_t count, int dtype) override;
  void allToAll(const void *send, void *recv, size_t count, int dtype) override;
  void broadcast(const void *send, void *recv, size_t count, int dtype, int root) override;
  void send(const void *data, size_t count, int dtype, int peer) override;
  void recv(void *data, size_t count, int dtype, int peer) override;
  void synchronize() override {}

private:
  MpiComm &mesh_;
  const Group &group_;
  const TwoLevel *twoLevel_;
};

class MpiComm {
public:
  /// Builds the communicators of a mesh over `world` (collective over
  /// `world`, whose size must be meshRanks(mesh)). World rank r has the
  /// row-major coordinates of r over the mesh (last axis fastest).
  MpiComm(std::vector<MeshAxis> mesh, MPI_Comm world);
  ~MpiComm();
  MpiComm(const MpiComm &) = delete;
  MpiComm &operator=(const MpiComm &) = delete;

  const std::vector<MeshAxis> &mesh() const { return mesh_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int64_t> &coords() const { return coords_; }
  MPI_Comm world() const { return world_; }

  /// The group of a collective over `axes` (mesh axis indices, in the
  /// listed order; no repeats). Throws hpcrt::Error for a bad list.
  const Group &group(const std::vector<int64_t> &axes);
  /// The Communicator of that group (made once, owned here); with
  /// `ranksPerNode` > 0 its reductions run in two levels over nodes of that
  /// many consecutive world ranks (twoLevel).
  Communicator &communicator(const std::vector<int64_t> &axes, int64_t ranksPerNode = 0);
  /// `g` laid on nodes of `ranksPerNode` consecutive world ranks; fails
  /// (hpcrt::Error) unless it spans several nodes with the same number,
  /// more than one, of its members on each.
  TwoLevel twoLevel(const Group &g, int64_t ranksPerNode) const;

  /// In-place ring all-reduce of `count` elements: a ring reduce-scatter
  /// then a ring all-gather over g chunks of the flattened data (chunk i
  /// has count/g elements, one more when i < count%g).
  void allReduce(void *data, size_t count, const Reducer &r, const Group &g);
  /// Ring reduce-scatter: `in` holds g blocks of `count` elements (block j
  /// is group member j's); `out` receives this member's reduced block.
  void reduceScatter(const void *in, void *out, size_t count, const Reducer &r,
                     const Group &g);
  /// The same reductions in two levels: a ring reduce-scatter among the
  /// node's members, the ring all-reduce (reduce-scatter) of this member's
  /// part among the members at its place on the other nodes, and (all-reduce)
  /// a ring all-gather on the node. Results equal the flat ones up to the
  /// order of the sum, and are bitwise the same on every member.
  void allReduce(void *data, size_t count, const Reducer &r, const TwoLevel &t);
  void reduceScatter(const void *in, void *out, size_t count, const Reducer &r,
                     const TwoLevel &t);
  /// The compressed forms (Codec.h; f32 sums, `r` finishes) compress the
  /// hop across nodes (`t.cross`, or the whole group `g` when flat); every
  /// member ends with bitwise the same result. With c.feedback (int8,
  /// top-k) the error of what this rank sent is kept and added to what it
  /// sends next.
  /// - int8 all-reduce: an all-to-all of the int8 pieces of the hop's
  ///   values, each member summing its piece in group order (its own at
  ///   full precision), then an all-gather of the quantized sums, which the
  ///   owner takes too. Residuals: [0, m) for the m values of the hop, then
  ///   [m, m + its piece) for its gathered sum.
  /// - top-k all-reduce: an all-gather of every member's pairs, summed in
  ///   group order. Residuals: the m values.
  /// - reduce-scatter (int8, top-k): each other member's block encoded for
  ///   it, each member summing its block in group order; one residual per
  ///   block.
  /// - PowerSGD all-reduce (Codec.h): in two levels the node's ring runs on
  ///   c.chunks (whole pieces), then each member's chunk crosses as two
  ///   plain f32 ring all-reduces, of its P's and exact values and of its
  ///   Q's; the state holds the Q's, then the residuals.
  /// `r` is the values' reducer (f32, or bf16 for a bf16 bucket), `hopRed`
  /// the f32 one of the hop: a bf16 bucket's hop runs on its values widened
  /// (hopValues) and rounded back (roundBack).
  void allReduceCompressed(void *data, size_t count, const Reducer &r, const Reducer &hopRed,
                           const Group &g, const Compression &c);
  /// `c` with a bf16 state widened into f32 (itself otherwise), and the
  /// rounding back after the call (Compression::feedbackBf16).
  Compression widenState(const Compression &c);
  void narrowState(const Compression &wide, const Compression &c);
  /// In two levels `r` reduces the node's ring, `hopRed` the hop across.
  void allReduceCompressed(void *data, size_t count, const Reducer &r, const Reducer &hopRed,
                           const TwoLevel &t, const Compression &c);
  void reduceScatterCompressed(const float *in, float *out, size_t count, const Reducer &r,
                               const Group &g, const Compression &c);
  void reduceScatterCompressed(const float *in, float *out, size_t count, const Reducer &r,
                               const TwoLevel &t, const Compression &c);
  /// Ring all-gather: `out` receives g pieces of `bytes` bytes, piece j
  /// from group member j (this member's own piece is `in`).
  void allGather(const void *in, void *out, size_t bytes, const Group &g);
  /// Pairwise all-to-all: piece j of `in` (g pieces of `bytes`) goes to
  /// member j; piece j of `out` comes from member j.
  void allToAll(const void *in, void *out, size_t bytes, const Group &g);
  /// Pipelined chain broadcast from group index `root`: every member but
  /// the last of the chain root, root+1, ... (mod g) forwards all `bytes`.
  void broadcast(void *data, size_t bytes, int root, const Group &g);
  /// Point-to-point along one mesh axis: the peer's coordinate on `axis` is
  /// this rank's + offset (no peer outside [0, size): send does nothing,
  /// finishRecv returns false). Sends are buffered (never block). A receive
  /// comes in two halves, so that recv_start can post it and return:
  /// postRecv returns at once, finishRecv blocks until the data is in (at
  /// most the peer timeout: PeerWait.h).
  void send(const void *data, size_t bytes, int axis, int64_t offset);
  struct PendingRecv {
    std::vector<MPI_Request> requests;
    std::vector<int> sizes;
    int source = -1;
    bool remote = false; ///< the source is on another node
  };
  PendingRecv postRecv(void *data, size_t bytes, int axis, int64_t offset);
  bool finishRecv(PendingRecv &pending);
  /// Waits for every buffered send (call before MPI_Finalize).
  void completeSends();
  /// Lets MPI move the buffered sends and posted receives (one test, never
  /// blocks); returns whether one to or from another node is still in
  /// flight (CommQueue's hook: within a node the shared-memory transport
  /// needs no calls between, and measured slower with them).
  bool progress();
  /// Point-to-point with group index `peer` of `g` (MpiGroupComm's send
  /// and recv): returns when the bytes are sent / in.
  void sendTo(const void *data, size_t bytes, int peer, const Group &g);
  void recvFrom(void *data, size_t bytes, int peer, const Group &g);

  const CommStats &stats() const { return stats_; }
  /// Bytes of the staging buffers the collectives keep between calls (the
  /// ring's scratch, the two-level reduce-scatter's packing, the codecs'
  /// encoded pieces and sums): runtime memory the compiler does not plan.
  uint64_t bufferBytes() const;
  void resetStats() { stats_ = CommStats(); }
  /// Every world rank's node (equal values: one node), so that the bytes
  /// sent across nodes are counted apart (CommStats::bytesInterNode).
  void setNodes(std::vector<uint64_t> nodeOf);

private:
  std::vector<MeshAxis> mesh_;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm p2p_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<int64_t> coords_;
  /// Communicator of each non-empty subset of the axes (bit mask).
  std::map<unsigned, MPI_Comm> subsetComms_;
  std::map<std::vector<int64_t>, Group> groups_;
  std::map<std::pair<std::vector<int64_t>, int64_t>, std::unique_ptr<MpiGroupComm>>
      communicators_;
  std::map<std::pair<std::vector<int64_t>, int64_t>, std::unique_ptr<TwoLevel>> twoLevels_;
  std::vector<std::unique_ptr<char[]>> sendBuffers_;
  std::vector<MPI_Request> sendRequests_;
  bool remoteSends_ = false; ///< a buffered send in flight goes to another node
  int remoteRecvs_ = 0;       ///< posted receives from another node, not yet finished
  std::vector<char> scratch_;
  std::vector<char> packed_, partial_; ///< the two-level reduce-scatter's buffers
  CommStats stats_;
  std::vector<uint64_t> nodeOf_; ///< by world rank (setNodes; empty: unknown)
  /// World rank of each rank of a communicator the sends name peers in.
  std::map<MPI_Comm, std::vector<int>> worldRanks_;

  /// Counts `bytes` sent to rank `dest` of `comm`.
  void countSent(size_t bytes, int dest, MPI_Comm comm);
  /// Whether rank `peer` of `comm` is on another node (false when the
  /// nodes are not known).
  bool acrossNodes(int peer, MPI_Comm comm);

  void *scratch(size_t bytes);
  /// The ring all-reduce's two passes over g chunks of `count` elements of
  /// `e` bytes: the reduce-scatter leaves member r with chunk r+1 (mod g)
  /// reduced, not finished; the all-gather sends each member's chunk round.
  void ringReduceScatterPass(char *data, const Chunks &chunks, const Reducer &r, const Group &g);
  void ringAllGatherPass(char *data, const Chunks &chunks, size_t e, const Group &g);
  /// Ring all-reduce; the reduced chunks are finished over `finishOver`
  /// ranks (the whole group of a two-level reduction).
  void ringAllReduce(char *data, size_t count, const Reducer &r, const Group &g, int finishOver);
  /// Ring reduce-scatter; finished over `finishOver` ranks (0: not).
  void ringReduceScatter(const void *in, void *out, size_t count, const Reducer &r,
                         const Group &g, int finishOver);
  /// The compressed hop of an all-reduce over `hop` of m values (finished
  /// over `finishOver`) and of a reduce-scatter of hop.size blocks of
  /// `count` into `out`.
  void compressedAllReduceHop(float *v, size_t m, const Reducer &r, const Group &hop,
                              int finishOver, const Compression &c);
  void compressedReduceScatterHop(const float *in, float *out, size_t count, const Reducer &r,
                                  const Group &hop, int finishOver, const Compression &c);
  /// Top-k's hop of an all-reduce over `hop` of m values.
  void topkAllReduceHop(float *v, size_t m, const Reducer &r, const Group &hop, int finishOver,
                        const Compression &c);
  /// PowerSGD's hop of an all-reduce over `hop` of pieces [first, end) of
  /// c's, laid out from v (finished over `finishOver`).
  void powerSgdHop(float *v, int64_t first, int64_t end, const Reducer &r, const Group &hop,
                   int finishOver, const Compression &c);
  /// Packs a two-level reduce-scatter's blocks by place into packed_
  /// (partial_ sized for the node's result).
  void packByPlace(const void *in, size_t count, size_t elementSize, const TwoLevel &t);
  /// The f32 values of [start, start + n) of a bucket of e-byte elements:
  /// in place for f32, widened into bucketWide_ for bf16.
  float *hopValues(void *data, size_t start, size_t n, size_t e);
  /// Rounds bucketWide_ back into a bf16 bucket at `start` (f32: nothing).
  void roundBack(void *data, size_t start, size_t e);
  std::vector<char> codecSend_, codecRecv_;
  std::vector<float> codecValues_;
  std::vector<float> stateWide_; ///< a bf16 codec state widened for its call
  std::vector<float> bucketWide_; ///< a bf16 bucket's chunk widened for its hop
  /// The communicator of the ranks that differ only on the axes in `mask`.
  MPI_Comm splitSubset(unsigned mask);
  /// Posts the receive and the send (each split in pieces MPI's int counts
  /// can express), waits for both, and counts the bytes sent.
  /// `op` names the collective if the wait times out (PeerWait.h).
  void exchange(const char *op, const void *sendBuf, size_t sendBytes, int dest,
                void *recvBuf, size_t recvBytes, int source, MPI_Comm comm);
  int peer(int axis, int64_t offset) const;
};

/// Fails (hpcrt::Error) with MPI's message when rc is not MPI_SUCCESS.
void checkMpi(int rc, const char *what);

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_MPICOMM_H
