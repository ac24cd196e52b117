//===- NcclComm.cpp - an NCCL communicator bootstrapped through MPI --------===//
//
// ncclGetUniqueId on group index 0, MPI_Bcast over the group, then
// ncclCommInitRank with the group index as the NCCL rank. The collectives
// map one to one onto NCCL's (ncclAlltoAll for all_to_all).
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include "PeerWait.h"

#include "../core/Context.h"

#include <string>

namespace hpcrt {
namespace comm {

void checkNccl(ncclResult_t rc, const char *what) {
  if (rc != ncclSuccess)
    fail(std::string(what) + " failed: " + ncclGetErrorString(rc));
}

void checkCuda(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess)
    fail(std::string(what) + " failed: " + cudaGetErrorString(rc));
}

ncclDataType_t ncclTypeOf(int dtype) {
  switch (dtype) {
  case HPCRT_F32: return ncclFloat32;
  case HPCRT_F64: return ncclFloat64;
  case HPCRT_F16: return ncclFloat16;
  case HPCRT_BF16: return ncclBfloat16;
  case HPCRT_I8: return ncclInt8;
  case HPCRT_U8:
  case HPCRT_BOOL: return ncclUint8;
  case HPCRT_I32: return ncclInt32;
  case HPCRT_U32: return ncclUint32;
  case HPCRT_I64: return ncclInt64;
  case HPCRT_U64: return ncclUint64;
  default:
    fail("NCCL has no element type for dtype " + dtypeName(dtype));
  }
}

ncclRedOp_t ncclOpOf(int64_t kind) {
  switch (kind) {
  case 0: return ncclSum;
  case 1: return ncclMax;
  case 2: return ncclMin;
  case 3: return ncclProd;
  case 4: return ncclAvg;
  default:
    fail("unknown reduction kind " + std::to_string(kind) +
         " (sum=0, max=1, min=2, prod=3, avg=4)");
  }
}

int localDevice(MPI_Comm world) {
  int devices = 0;
  cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0)
    fail(std::string("no CUDA device") +
         (rc != cudaSuccess ? std::string(" (") + cudaGetErrorString(rc) + ")" : ""));
  MPI_Comm node;
  checkMpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
           "MPI_Comm_split_type");
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  return local % devices;
}

NcclComm::NcclComm(const Group &group, int device)
    : rank_(group.index), size_(group.size), device_(device) {
  ncclUniqueId id;
  if (group.index == 0)
    checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Request r;
  checkMpi(MPI_Ibcast(&id, sizeof(id), MPI_BYTE, group.commRank[0], group.comm, &r),
           "MPI_Ibcast of the NCCL id");
  waitCollective(r, "the broadcast of the NCCL id", group.comm);
  checkCuda(cudaSetDevice(device), "cudaSetDevice");
  checkNccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
}

NcclComm::~NcclComm() {
  if (comm_)
    ncclCommDestroy(comm_);
}

void NcclComm::allReduce(const void *send, void *recv, size_t count, int dtype,
                         int64_t kind) {
  checkNccl(ncclAllReduce(send, recv, count, ncclTypeOf(dtype), ncclOpOf(kind), comm_, stream_),
            "ncclAllReduce");
  payloadBytes_ += comm::payloadBytes(count, dtype);
}

void NcclComm::allGather(const void *send, void *recv, size_t count, int dtype) {
  checkNccl(ncclAllGather(send, recv, count, ncclTypeOf(dtype), comm_, stream_),
            "ncclAllGather");
  payloadBytes_ += comm::payloadBytes(count, dtype);
}

void NcclComm::reduceScatter(const void *send, void *recv, size_t count, int dtype,
                             int64_t kind) {
  checkNccl(ncclReduceScatter(send, recv, count, ncclTypeOf(dtype), ncclOpOf(kind), comm_,
                              stream_),
            "ncclReduceScatter");
  payloadBytes_ += comm::payloadBytes(count * size_, dtype);
}

void NcclComm::allToAll(const void *send, void *recv, size_t count, int dtype) {
  checkNccl(ncclAlltoAll(send, recv, count, ncclTypeOf(dtype), comm_, stream_),
            "ncclAlltoAll");
  payloadBytes_ += comm::payloadBytes(count * size_, dtype);
}

void NcclComm::broadcast(const void *send, void *recv, size_t count, int dtype, int root) {
  if (root < 0 || root >= size_)
    fail("broadcast root " + std::to_string(root) + " is not in the group of " +
         std::to_string(size_));
  checkNccl(ncclBroadcast(send, recv, count, ncclTypeOf(dtype), root, comm_, stream_),
            "ncclBroadcast");
  if (rank_ == root)
    payloadBytes_ += comm::payloadBytes(count, dtype);
}

void NcclComm::send(const void *data, size_t count, int dtype, int peer) {
  checkNccl(ncclSend(data, count, ncclTypeOf(dtype), peer, comm_, stream_), "ncclSend");
  payloadBytes_ += comm::payloadBytes(count, dtype);
}

void NcclComm::recv(void *data, size_t count, int dtype, int peer) {
  checkNccl(ncclRecv(data, count, ncclTypeOf(dtype), peer, comm_, stream_), "ncclRecv");
}

void NcclComm::synchronize() {
  checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

} // namespace comm
} // namespace hpcrt
