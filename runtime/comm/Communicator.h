//===- Communicator.h - one group's collectives, whatever moves the bytes -*- C++ -*-===//
//
// The seam between the dist kernels and the libraries that move their
// bytes: the collectives and point-to-point transfers of one group (the
// ranks of a collective over some mesh axes, comm::Group), with counts in
// elements of an hpcrt_dtype and reductions as the compiler encodes them
// (dist.ReductionKind: sum=0, max=1, min=2, prod=3, avg=4). MPI implements
// it for host memory (MpiComm.h, MpiGroupComm: ring algorithms whose bytes
// on the wire are the compiler's prediction), NCCL for device memory
// (NcclComm.h, enqueued on the communicator's stream). Pieces are ordered by
// group index in both, so a program's collectives mean the same on either
// (hpcrt.h, "Collectives"). A backend's dist kernels call only this; the
// mesh-level point-to-point of the pipeline ops (MpiComm::send/postRecv,
// a peer by mesh-axis offset) stays MPI's for now.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_COMMUNICATOR_H
#define HPCRT_COMM_COMMUNICATOR_H

#include "Codec.h"

#include <cstddef>
#include <cstdint>

namespace hpcrt {
namespace comm {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// "mpi" (buffers in host memory) or "nccl" (device memory).
  virtual const char *transport() const = 0;
  /// This rank's group index and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// `count` elements in and out (in place when send == recv), reduced
  /// over the group.
  virtual void allReduce(const void *send, void *recv, size_t count, int dtype,
                         int64_t kind) = 0;
  /// size() blocks of `count` elements in (block j for member j); this
  /// member's reduced block of `count` out.
  virtual void reduceScatter(const void *send, void *recv, size_t count, int dtype,
                             int64_t kind) = 0;
  /// The same reductions with the hop across nodes compressed (Codec.h;
  /// f32, sum or avg): fail unless the transport has them (MPI does).
  virtual void allReduceCompressed(const void *send, void *recv, size_t count, int dtype,
                                   int64_t kind, const Compression &c);
  virtual void reduceScatterCompressed(const void *send, void *recv, size_t count, int dtype,
                                       int64_t kind, const Compression &c);
  /// `count` elements in; size() * count out, piece j from member j.
  virtual void allGather(const void *send, void *recv, size_t count, int dtype) = 0;
  /// size() pieces of `count` elements in (piece j to member j) and out
  /// (piece j from member j).
  virtual void allToAll(const void *send, void *recv, size_t count, int dtype) = 0;
  /// `count` elements of group index `root`'s `send` into every member's
  /// `recv` (in place when send == recv).
  virtual void broadcast(const void *send, void *recv, size_t count, int dtype, int root) = 0;
  /// `count` elements to / from group index `peer` (a receive matches the
  /// peer's send of the same count).
  virtual void send(const void *data, size_t count, int dtype, int peer) = 0;
  virtual void recv(void *data, size_t count, int dtype, int peer) = 0;
  /// Returns when every call made so far is complete (MPI's are when they
  /// return; NCCL's are enqueued on a stream).
  virtual void synchronize() = 0;
};

/// The bytes of `count` elements of `dtype` (what a call's count means in
/// either implementation); fails (hpcrt::Error) for an unknown dtype.
size_t payloadBytes(size_t count, int dtype);

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_COMMUNICATOR_H
