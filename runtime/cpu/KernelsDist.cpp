//===- KernelsDist.cpp - the dist ops' kernels (CPU tensors, MPI) ----------===//
//
// hpcrt_all_reduce, hpcrt_reduce_scatter, hpcrt_all_gather,
// hpcrt_all_to_all, hpcrt_broadcast, hpcrt_all_slice, hpcrt_send and
// hpcrt_recv: check the shapes against the group size, bring the pieces
// along the split dimension together (a piece of a middle dimension is not
// contiguous), and hand contiguous buffers to the group's communicator
// (runtime/comm/Communicator.h; for CPU tensors MPI's, MpiComm.h). The
// point-to-point ops address a peer by mesh-axis offset, which only
// MpiComm has. The attribute encoding is in hpcrt.h.
//
// Each op is prepared on the main thread (attributes read, shapes checked:
// a bad call fails at once) into a job that moves the data. The synchronous
// form runs the job in place, after the communication thread has finished
// what was started before it; `<op>_start` queues it on that thread
// (runtime/comm/CommQueue.h) under its token, and hpcrt_wait blocks until
// the token's job has run.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"
#include "Parallel.h"

#include "../comm/Codec.h"
#include "../comm/CommQueue.h"
#include "../comm/MpiComm.h"
#include "../comm/Reduce.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

using namespace hpcrt;
using hpcrt::comm::Group;
using hpcrt::comm::MpiComm;

namespace {

MpiComm &commOf(OpCall &c) {
  MpiComm *m = c.ctx.comm();
  if (m)
    return *m;
  if (!c.ctx.hasMesh())
    fail("a dist op in a program without a mesh");
  fail("no communicator: the ranks of the mesh were not started");
}

/// The data movement of one dist op, run now or on the communication thread.
using CommJob = std::function<void()>;

/// Runs a synchronous op's job once everything started before it is done
/// (collectives keep the same order on every rank; MPI sees one thread at
/// a time).
void runNow(OpCall &c, const CommJob &job) {
  if (comm::CommQueue *q = c.ctx.commQueue())
    q->drain();
  job();
}

/// Queues an asynchronous op's job under its token (the op's result); a
/// `finish` step runs when the token is waited for.
void start(OpCall &c, CommJob job, CommJob finish = {}) {
  comm::CommQueue *q = c.ctx.commQueue();
  if (!q)
    fail("no communication queue: the ranks of the mesh were not started");
  q->submit(&c.out(), c.op, "op " + std::to_string(c.op) + " (" + c.mnemonic + ")",
            std::move(job), std::move(finish));
}


/// A tensor seen as [outer][n][inner] around dimension d.
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
Around around(const std::vector<int64_t> &shape, int64_t d) {
  Around a;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    if (k < d)
      a.outer *= shape[k];
    else if (k == d)
      a.n = shape[k];
    else
      a.inner *= shape[k];
  }
  return a;
}

/// [outer][g][piece] -> [g][outer][piece] (bytes).
void splitPieces(const char *src, char *dst, int64_t outer, int64_t g, size_t piece) {
  // Copies cost about piece/8 ns each (memcpy bandwidth).
  hpcrt::parallelFor(outer, double(g) * double(piece) / 8, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      for (int64_t j = 0; j < g; ++j)
        memcpy(dst + (j * outer + o) * piece, src + (o * g + j) * piece, piece);
  });
}

/// [g][outer][piece] -> [outer][g][piece] (bytes).
void joinPieces(const char *src, char *dst, int64_t outer, int64_t g, size_t piece) {
  hpcrt::parallelFor(outer, double(g) * double(piece) / 8, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      for (int64_t j = 0; j < g; ++j)
        memcpy(dst + (o * g + j) * piece, src + (j * outer + o) * piece, piece);
  });
}

std::unique_ptr<char[]> buffer(size_t bytes) {
  return std::unique_ptr<char[]>(new char[std::max<size_t>(bytes, 1)]);
}

/// Checks that dimension d of `shape` splits into g equal pieces.
void checkSplits(const std::vector<int64_t> &shape, int64_t d, int g, const char *what) {
  if (shape[d] % g != 0)
    fail(std::string(what) + " " + std::to_string(d) + " of " + shapeString(shape) +
         " does not split into " + std::to_string(g) + " equal pieces");
}

void copyIfApart(Tensor &y, const Tensor &x) {
  if (y.data != x.data && y.bytes)
    memmove(y.data, x.data, y.bytes);
}

/// A reduction's ranks_per_node: 0 for the flat rings, else the node size
/// its two levels run over (MpiComm::twoLevel).
int64_t ranksPerNode(OpCall &c) {
  int64_t p = c.i();
  if (p < 0)
    fail("ranks_per_node " + std::to_string(p) + " is negative");
  return p;
}

/// A reduction's compression, read after its axes: sattrs "int8_block:B",
/// "topk:RATIO" or "powersgd:R[:no_feedback]" (none: uncompressed), for
/// PowerSGD iattrs [2P, rows, cols, ... (P pieces), K, bounds... (K chunk
/// bounds)], and with a second operand its state (f32).
comm::Compression compressionOf(OpCall &c) {
  if (c.results.size() != 1 || (c.operands.size() != 1 && c.operands.size() != 2))
    c.expect(1, 1); // fails with the counts
  comm::Compression z;
  if (!c.sa) {
    if (c.operands.size() == 2)
      fail("error-feedback state without a compression");
    return z;
  }
  std::string error = comm::parseCompression(c.s(), z);
  if (!error.empty())
    fail(error);
  if (z.codec == comm::Codec::PowerSgd) {
    std::vector<int64_t> pieces = c.ivec();
    if (pieces.size() % 2)
      fail("PowerSGD's pieces are (rows, cols) pairs, not " + std::to_string(pieces.size()) +
           " values");
    for (size_t p = 0; p < pieces.size(); p += 2) {
      z.rows.push_back(pieces[p]);
      z.cols.push_back(pieces[p + 1]);
    }
    z.chunks = c.ivec();
    if (c.operands.size() != 2)
      fail("PowerSGD needs its state operand (each matrix's Q)");
  }
  if (c.operands.size() == 2) {
    Tensor &f = c.in(1);
    if (f.dtype == HPCRT_F32)
      z.feedback = f.as<float>();
    else if (f.dtype == HPCRT_BF16)
      z.feedbackBf16 = f.as<uint16_t>();
    else
      fail("the codec state must be f32 or bf16");
    z.feedbackCount = static_cast<size_t>(f.numel);
  }
  return z;
}

// iattrs = [n, axes..., (PowerSGD's pieces and bounds), ranks_per_node,
// reduction]; sattrs = [compression]?
CommJob allReduce(OpCall &c) {
  std::vector<int64_t> axes = c.ivec();
  comm::Compression z = compressionOf(c);
  int64_t perNode = ranksPerNode(c);
  int64_t kind = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  checkShape(y, x.shape, "the result");
  comm::makeReducer(y.dtype, kind); // a bad kind fails here, not in the job
  comm::Communicator &g = commOf(c).communicator(axes, perNode);
  if (z.compressed())
    return [&g, &x, &y, kind, z] {
      g.allReduceCompressed(x.data, y.data, static_cast<size_t>(y.numel), y.dtype, kind, z);
    };
  return [&g, &x, &y, kind] {
    g.allReduce(x.data, y.data, static_cast<size_t>(y.numel), y.dtype, kind);
  };
}

// iattrs = [n, axes..., dim, ranks_per_node, reduction]; sattrs = [compression]?
CommJob reduceScatter(OpCall &c) {
  std::vector<int64_t> axes = c.ivec();
  comm::Compression z = compressionOf(c);
  int64_t dim = c.i();
  int64_t perNode = ranksPerNode(c);
  int64_t kind = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  int64_t d = normalizeAxis(dim, x.rank(), "dim");
  comm::makeReducer(y.dtype, kind); // a bad kind fails here, not in the job
  comm::Communicator &g = commOf(c).communicator(axes, perNode);
  checkSplits(x.shape, d, g.size(), "dim");
  std::vector<int64_t> shape = x.shape;
  shape[d] /= g.size();
  checkShape(y, shape, "the result");
  Around a = around(x.shape, d);
  return [&g, &x, &y, kind, a, z] {
    const char *packed = x.as<char>();
    std::unique_ptr<char[]> tmp;
    if (a.outer > 1 && g.size() > 1) {
      tmp = buffer(x.bytes);
      splitPieces(x.as<char>(), tmp.get(), a.outer, g.size(), y.bytes / a.outer);
      packed = tmp.get();
    }
    if (z.compressed())
      g.reduceScatterCompressed(packed, y.data, static_cast<size_t>(y.numel), y.dtype, kind, z);
    else
      g.reduceScatter(packed, y.data, static_cast<size_t>(y.numel), y.dtype, kind);
  };
}

// iattrs = [n, axes..., dim]
CommJob allGather(OpCall &c) {
  c.expect(1, 1);
  std::vector<int64_t> axes = c.ivec();
  int64_t dim = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  int64_t d = normalizeAxis(dim, x.rank(), "dim");
  comm::Communicator &g = commOf(c).communicator(axes);
  std::vector<int64_t> shape = x.shape;
  shape[d] *= g.size();
  checkShape(y, shape, "the result");
  Around a = around(x.shape, d);
  return [&g, &x, &y, a] {
    size_t count = static_cast<size_t>(x.numel);
    if (a.outer <= 1 || g.size() == 1) {
      g.allGather(x.data, y.data, count, x.dtype);
      return;
    }
    std::unique_ptr<char[]> tmp = buffer(y.bytes);
    g.allGather(x.data, tmp.get(), count, x.dtype);
    joinPieces(tmp.get(), y.as<char>(), a.outer, g.size(), x.bytes / a.outer);
  };
}

// iattrs = [n, axes..., concat_dim, split_dim]
CommJob allToAll(OpCall &c) {
  c.expect(1, 1);
  std::vector<int64_t> axes = c.ivec();
  int64_t concatDim = c.i(), splitDim = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  int64_t cd = normalizeAxis(concatDim, x.rank(), "concat_dim");
  int64_t sd = normalizeAxis(splitDim, x.rank(), "split_dim");
  comm::Communicator &g = commOf(c).communicator(axes);
  checkSplits(x.shape, sd, g.size(), "split_dim");
  std::vector<int64_t> piece = x.shape;
  piece[sd] /= g.size();
  std::vector<int64_t> shape = piece;
  shape[cd] *= g.size();
  checkShape(y, shape, "the result");
  size_t pieceBytes = x.bytes / g.size();
  size_t pieceCount = static_cast<size_t>(x.numel / g.size());
  // Pieces of split_dim, one per member, contiguous; what arrives is
  // concatenated along concat_dim in group-index order.
  Around s = around(x.shape, sd), r = around(piece, cd);
  return [&g, &x, &y, s, r, pieceBytes, pieceCount] {
    const char *send = x.as<char>();
    std::unique_ptr<char[]> sendTmp;
    if (s.outer > 1 && g.size() > 1) {
      sendTmp = buffer(x.bytes);
      splitPieces(x.as<char>(), sendTmp.get(), s.outer, g.size(), pieceBytes / s.outer);
      send = sendTmp.get();
    }
    if (r.outer <= 1 || g.size() == 1) {
      g.allToAll(send, y.data, pieceCount, x.dtype);
      return;
    }
    std::unique_ptr<char[]> recvTmp = buffer(y.bytes);
    g.allToAll(send, recvTmp.get(), pieceCount, x.dtype);
    joinPieces(recvTmp.get(), y.as<char>(), r.outer, g.size(), pieceBytes / r.outer);
  };
}

// iattrs = [n, axes..., root]
CommJob broadcast(OpCall &c) {
  c.expect(1, 1);
  std::vector<int64_t> axes = c.ivec();
  int64_t root = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  checkShape(y, x.shape, "the result");
  comm::Communicator &g = commOf(c).communicator(axes);
  if (root < 0 || root >= g.size())
    fail("root " + std::to_string(root) + " is not a group index (the group has " +
         std::to_string(g.size()) + " ranks)");
  return [&g, &x, &y, root] {
    g.broadcast(x.data, y.data, static_cast<size_t>(y.numel), y.dtype, static_cast<int>(root));
  };
}

// send: ids = [0, 1, input]; send_start: ids = [1, token, 1, input];
// iattrs = [axis, offset]
CommJob send(OpCall &c, size_t results) {
  c.expect(results, 1);
  int64_t axis = c.i(), offset = c.i();
  Tensor &x = c.in(0);
  MpiComm &m = commOf(c);
  return [&m, &x, axis, offset] { m.send(x.data, x.bytes, static_cast<int>(axis), offset); };
}

// recv: ids = [1, result, 0] (recv_start: the token is the result);
// iattrs = [axis, offset]. Without a peer the result is zeros. The receive
// is posted by the first job and completed by the second, so a started
// receive does not hold up what follows it (a send the peer waits for).
std::pair<CommJob, CommJob> recv(OpCall &c) {
  c.expect(1, 0);
  int64_t axis = c.i(), offset = c.i();
  Tensor &y = c.out();
  MpiComm &m = commOf(c);
  auto pending = std::make_shared<MpiComm::PendingRecv>();
  CommJob post = [&m, &y, axis, offset, pending] {
    *pending = m.postRecv(y.data, y.bytes, static_cast<int>(axis), offset);
  };
  CommJob finish = [&m, &y, pending] {
    if (!m.finishRecv(*pending) && y.bytes)
      memset(y.data, 0, y.bytes);
  };
  return {post, finish};
}

} // namespace

HPCRT_DIST_KERNEL(all_reduce) { runNow(c, allReduce(c)); }
HPCRT_DIST_KERNEL(all_reduce_start) { start(c, allReduce(c)); }
HPCRT_DIST_KERNEL(reduce_scatter) { runNow(c, reduceScatter(c)); }
HPCRT_DIST_KERNEL(reduce_scatter_start) { start(c, reduceScatter(c)); }
HPCRT_DIST_KERNEL(all_gather) { runNow(c, allGather(c)); }
HPCRT_DIST_KERNEL(all_gather_start) { start(c, allGather(c)); }
HPCRT_DIST_KERNEL(all_to_all) { runNow(c, allToAll(c)); }
HPCRT_DIST_KERNEL(all_to_all_start) { start(c, allToAll(c)); }
HPCRT_DIST_KERNEL(broadcast) { runNow(c, broadcast(c)); }
HPCRT_DIST_KERNEL(broadcast_start) { start(c, broadcast(c)); }
HPCRT_DIST_KERNEL(send) { runNow(c, send(c, 0)); }
HPCRT_DIST_KERNEL(send_start) { start(c, send(c, 1)); }
HPCRT_DIST_KERNEL(recv) {
  auto [post, finish] = recv(c);
  runNow(c, [&] {
    post();
    finish();
  });
}
HPCRT_DIST_KERNEL(recv_start) {
  auto [post, finish] = recv(c);
  start(c, std::move(post), std::move(finish));
}

// ids = [n, (result), 1, token]: blocks until the token's job has run; the
// result is the token's buffer (the compiler plans it as a view).
HPCRT_DIST_KERNEL(wait) {
  if (c.results.size() > 1)
    fail("expects at most 1 result, got " + std::to_string(c.results.size()));
  c.expect(c.results.size(), 1);
  Tensor &token = c.in(0);
  comm::CommQueue *q = c.ctx.commQueue();
  if (!q)
    fail("no communication queue: the ranks of the mesh were not started");
  q->wait(&token);
  if (!c.results.empty())
    copyIfApart(c.out(), token);
}

// iattrs = [n, axes..., dim]; no communication.
HPCRT_DIST_KERNEL(all_slice) {
  c.expect(1, 1);
  std::vector<int64_t> axes = c.ivec();
  int64_t dim = c.i();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "operand and result");
  int64_t d = normalizeAxis(dim, x.rank(), "dim");
  MpiComm &m = commOf(c);
  const Group &g = m.group(axes);
  checkSplits(x.shape, d, g.size, "dim");
  std::vector<int64_t> shape = x.shape;
  shape[d] /= g.size;
  checkShape(y, shape, "the result");
  if (y.bytes == 0)
    return;
  Around a = around(x.shape, d);
  size_t row = y.bytes / a.outer; // one outer index's piece
  const char *src = x.as<char>() + g.index * row;
  char *dst = y.as<char>();
  for (int64_t o = 0; o < a.outer; ++o)
    memcpy(dst + o * row, src + o * row * g.size, row);
}
