//===- NcclComm.h - an NCCL communicator bootstrapped through MPI -*- C++ -*-===//
//
// The GPU side of runtime/comm: one NCCL communicator per group (the ranks
// of a collective over some mesh axes, comm::Group), its ncclUniqueId made
// on group index 0 and broadcast over the group's MPI communicator, NCCL
// rank = group index, so the collectives order pieces as the CPU ones do
// (hpcrt.h, "Collectives"). It is the Communicator (Communicator.h) of
// device memory: buffers are device pointers; every call is enqueued on the
// communicator's stream (setStream; the default stream until then) and
// returns without waiting, synchronize() waits for them.
//
// Built into the separate static library hpcrt_nccl, and only where CMake
// finds nccl.h and libnccl (with CUDA's runtime); libhpcrt does not need it.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_NCCLCOMM_H
#define HPCRT_COMM_NCCLCOMM_H

#include "MpiComm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace hpcrt {
namespace comm {

/// The NCCL element type of an hpcrt_dtype (bool as u8); throws
/// hpcrt::Error for types NCCL has not (i16, u16).
ncclDataType_t ncclTypeOf(int dtype);
/// The NCCL reduction of a dist reduction kind (sum=0 .. avg=4).
ncclRedOp_t ncclOpOf(int64_t kind);
/// The CUDA device this process should use: its rank among the ranks on
/// its node (MPI_COMM_TYPE_SHARED) modulo the visible devices. Throws when
/// no device is visible.
int localDevice(MPI_Comm world);

/// Fails with NCCL's message when rc is not ncclSuccess.
void checkNccl(ncclResult_t rc, const char *what);
/// Fails with CUDA's message when rc is not cudaSuccess.
void checkCuda(cudaError_t rc, const char *what);

class NcclComm final : public Communicator {
public:
  /// Collective over the group's MPI communicator: makes the NCCL
  /// communicator of the group on `device`.
  NcclComm(const Group &group, int device);
  ~NcclComm();
  NcclComm(const NcclComm &) = delete;
  NcclComm &operator=(const NcclComm &) = delete;

  const char *transport() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const { return device_; }
  ncclComm_t handle() const { return comm_; }
  /// The stream the calls are enqueued on.
  void setStream(cudaStream_t stream) { stream_ = stream; }
  cudaStream_t stream() const { return stream_; }

  // Communicator.h's collectives, as NCCL's (ncclAlltoAll for allToAll).
  void allReduce(const void *send, void *recv, size_t count, int dtype, int64_t kind) override;
  void allGather(const void *send, void *recv, size_t count, int dtype) override;
  void reduceScatter(const void *send, void *recv, size_t count, int dtype,
                     int64_t kind) override;
  void allToAll(const void *send, void *recv, size_t count, int dtype) override;
  void broadcast(const void *send, void *recv, size_t count, int dtype, int root) override;
  void send(const void *data, size_t count, int dtype, int peer) override;
  void recv(void *data, size_t count, int dtype, int peer) override;
  /// cudaStreamSynchronize of the stream.
  void synchronize() override;

  /// Bytes this rank handed to NCCL calls as payload (send buffers; NCCL's
  /// own algorithm decides what goes on the wire).
  uint64_t payloadBytes() const { return payloadBytes_; }

private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
  uint64_t payloadBytes_ = 0;
};

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_NCCLCOMM_H
