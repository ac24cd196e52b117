//===- NcclTest.cpp - the NCCL communicators on real GPUs ------------------===//
//
// Run under mpirun -n N (one GPU per rank): builds the MPI communicator of a
// one-axis mesh of N ranks, bootstraps an NCCL communicator for its group
// through MPI, and runs CommunicatorChecks.h's checks through the
// Communicator interface with device buffers (the values MPI's
// implementation is held to in CommunicatorTest.cpp), plus what only NCCL
// runs here: all_reduce sums in f16 and bf16 and of 2^20 elements. Exits 77
// (ctest: skipped) on every rank when there are fewer CUDA devices than
// ranks.
//
//===----------------------------------------------------------------------===//

#include "CommunicatorChecks.h"

#include "comm/NcclComm.h"
#include "cpu/Kernel.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace hpcrt;
using namespace hpcrt::comm;
using namespace hpcrt::test;

namespace {

template <typename T> T *deviceCopy(const std::vector<T> &host) {
  T *d = nullptr;
  checkCuda(cudaMalloc(&d, std::max<size_t>(host.size(), 1) * sizeof(T)), "cudaMalloc");
  if (!host.empty())
    checkCuda(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  return d;
}

template <typename T> std::vector<T> hostCopy(const T *d, size_t n, cudaStream_t s) {
  checkCuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<T> h(n);
  if (n)
    checkCuda(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return h;
}

/// CommunicatorChecks.h's Memory for device buffers: copies made with
/// cudaMemcpy, read back after the stream has finished.
struct DeviceMemory {
  cudaStream_t stream;
  template <typename T> T *put(std::vector<T> &v) { return deviceCopy(v); }
  template <typename T> std::vector<T> get(const T *p, size_t n) {
    return hostCopy(p, n, stream);
  }
  template <typename T> void release(T *p) { cudaFree(p); }
};

void run(int size) {
  std::vector<MeshAxis> mesh = {{"x", size, "intra_node"}};
  MpiComm mpi(mesh, MPI_COMM_WORLD);
  const Group &g = mpi.group({0});
  int device = localDevice(MPI_COMM_WORLD);
  NcclComm nccl(g, device);
  expect(nccl.rank() == g.index && nccl.size() == size, "NCCL rank/size = group index/size");
  cudaStream_t s;
  checkCuda(cudaStreamCreate(&s), "cudaStreamCreate");
  nccl.setStream(s);
  DeviceMemory dev{s};
  checkCommunicator(nccl, "nccl", "mesh x", dev);
  const int r = g.index;

  // all_reduce sum of 2^20 f32 (NCCL's algorithms change with the size).
  {
    const size_t n = size_t(1) << 20;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(value(r, i));
    float *d = deviceCopy(x);
    nccl.allReduce(d, d, n, HPCRT_F32, 0);
    std::vector<float> y = hostCopy(d, n, s);
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int m = 0; m < size; ++m)
        want += value(m, i);
      ok = y[i] == static_cast<float>(want);
    }
    expect(ok, "all_reduce f32 sum of 2^20");
    cudaFree(d);
  }
  // all_reduce sum in f16 and bf16 (bits).
  for (int dtype : {HPCRT_F16, HPCRT_BF16}) {
    const size_t n = 4097;
    std::vector<uint16_t> x(n);
    for (size_t i = 0; i < n; ++i) {
      float v = static_cast<float>(value(r, i));
      x[i] = dtype == HPCRT_F16 ? floatToHalf(v) : floatToBf16(v);
    }
    uint16_t *d = deviceCopy(x);
    nccl.allReduce(d, d, n, dtype, 0);
    std::vector<uint16_t> y = hostCopy(d, n, s);
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      float want = 0;
      for (int m = 0; m < size; ++m)
        want += static_cast<float>(value(m, i));
      float got = dtype == HPCRT_F16 ? halfToFloat(y[i]) : bf16ToFloat(y[i]);
      ok = got == want;
    }
    expect(ok, std::string("all_reduce sum ") + dtypeName(dtype));
    cudaFree(d);
  }
  cudaStreamDestroy(s);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess)
    devices = 0;
  int enough = devices >= size ? 1 : 0, all = 0;
  MPI_Allreduce(&enough, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (worldRank() == 0)
      printf("skipped: %d CUDA device(s) visible, %d rank(s) need one each%s%s\n", devices, size,
             rc != cudaSuccess ? ": " : "", rc != cudaSuccess ? cudaGetErrorString(rc) : "");
    MPI_Finalize();
    return 77;
  }
  try {
    run(size);
  } catch (const std::exception &e) {
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int status = reportChecks("nccl", size);
  MPI_Finalize();
  return status;
}
