//===- NcclTest.cpp - the NCCL communicators on real GPUs ------------------===//
//
// Run under mpirun -n N (one GPU per rank): builds the MPI communicator of a
// one-axis mesh of N ranks, bootstraps an NCCL communicator for its group
// through MPI, and checks every collective (all_reduce sum/avg/max in f32,
// f16 and bf16 and with a count that does not divide by N, all_gather,
// reduce_scatter, all_to_all, broadcast, send/recv around the ring) against
// values computed on the host. Exits 77 (ctest: skipped) on every rank when
// there are fewer CUDA devices than ranks.
//
//===----------------------------------------------------------------------===//

#include "comm/NcclComm.h"
#include "comm/Reduce.h"
#include "cpu/Kernel.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace hpcrt;
using namespace hpcrt::comm;

namespace {

int failures = 0;
int worldRank = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++failures;
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank, what.c_str());
  }
}

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

/// Member r's value at element i: small integers, exact in every type.
float value(int r, size_t i) { return static_cast<float>((r + 1) * ((i % 5) + 1) % 7) - 3.0f; }

void run(int rank, int size) {
  std::vector<MeshAxis> mesh = {{"x", size, "intra_node"}};
  MpiComm mpi(mesh, MPI_COMM_WORLD);
  const Group &g = mpi.group({0});
  int device = localDevice(MPI_COMM_WORLD);
  NcclComm nccl(g, device);
  expect(nccl.rank() == g.index && nccl.size() == size, "NCCL rank/size = group index/size");
  cudaStream_t s;
  checkCuda(cudaStreamCreate(&s), "cudaStreamCreate");
  const int r = g.index;

  // all_reduce f32: sum, avg, max; a count that does not divide by size.
  for (size_t n : {size_t(1000), size_t(1001), size_t(1) << 20}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = value(r, i);
    for (int64_t kind : {0, 1, 4}) {
      float *d = deviceCopy(x);
      nccl.allReduce(d, d, n, HPCRT_F32, kind, s);
      std::vector<float> y = hostCopy(d, n, s);
      bool ok = true;
      for (size_t i = 0; i < n && ok; ++i) {
        float want = kind == 1 ? -1e30f : 0.0f;
        for (int m = 0; m < size; ++m)
          want = kind == 1 ? std::max(want, value(m, i)) : want + value(m, i);
        if (kind == 4)
          want /= size;
        ok = y[i] == want;
      }
      expect(ok, "all_reduce f32 " + reductionName(kind) + " n=" + std::to_string(n));
      cudaFree(d);
    }
  }
  // all_reduce sum in f16 and bf16 (bits).
  for (int dtype : {HPCRT_F16, HPCRT_BF16}) {
    const size_t n = 4097;
    std::vector<uint16_t> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = dtype == HPCRT_F16 ? floatToHalf(value(r, i)) : floatToBf16(value(r, i));
    uint16_t *d = deviceCopy(x);
    nccl.allReduce(d, d, n, dtype, 0, s);
    std::vector<uint16_t> y = hostCopy(d, n, s);
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      float want = 0;
      for (int m = 0; m < size; ++m)
        want += value(m, i);
      float got = dtype == HPCRT_F16 ? halfToFloat(y[i]) : bf16ToFloat(y[i]);
      ok = got == want;
    }
    expect(ok, std::string("all_reduce sum ") + dtypeName(dtype));
    cudaFree(d);
  }
  // all_gather: piece j from member j.
  {
    const size_t n = 3001;
    std::vector<int32_t> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = static_cast<int32_t>(r * 100000 + i);
    int32_t *dx = deviceCopy(x);
    int32_t *dy = deviceCopy(std::vector<int32_t>(n * size));
    nccl.allGather(dx, dy, n, HPCRT_I32, s);
    std::vector<int32_t> y = hostCopy(dy, n * size, s);
    bool ok = true;
    for (int m = 0; m < size; ++m)
      for (size_t i = 0; i < n; ++i)
        ok = ok && y[m * n + i] == static_cast<int32_t>(m * 100000 + i);
    expect(ok, "all_gather i32");
    cudaFree(dx);
    cudaFree(dy);
  }
  // reduce_scatter: block r of the sum.
  {
    const size_t n = 513;
    std::vector<float> x(n * size);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = value(r, i);
    float *dx = deviceCopy(x);
    float *dy = deviceCopy(std::vector<float>(n));
    nccl.reduceScatter(dx, dy, n, HPCRT_F32, 0, s);
    std::vector<float> y = hostCopy(dy, n, s);
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int m = 0; m < size; ++m)
        want += value(m, r * n + i);
      ok = ok && y[i] == want;
    }
    expect(ok, "reduce_scatter f32");
    cudaFree(dx);
    cudaFree(dy);
  }
  // all_to_all: piece j of member m arrives at member j as piece m.
  {
    const size_t n = 257;
    std::vector<int64_t> x(n * size);
    for (int j = 0; j < size; ++j)
      for (size_t i = 0; i < n; ++i)
        x[j * n + i] = r * 1000000 + j * 1000 + static_cast<int64_t>(i);
    int64_t *dx = deviceCopy(x);
    int64_t *dy = deviceCopy(std::vector<int64_t>(n * size));
    nccl.allToAll(dx, dy, n, HPCRT_I64, s);
    std::vector<int64_t> y = hostCopy(dy, n * size, s);
    bool ok = true;
    for (int m = 0; m < size; ++m)
      for (size_t i = 0; i < n; ++i)
        ok = ok && y[m * n + i] == m * 1000000 + r * 1000 + static_cast<int64_t>(i);
    expect(ok, "all_to_all i64");
    cudaFree(dx);
    cudaFree(dy);
  }
  // broadcast from the last member.
  {
    const size_t n = 10000;
    const int root = size - 1;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = value(r, i);
    float *d = deviceCopy(x);
    nccl.broadcast(d, d, n, HPCRT_F32, root, s);
    std::vector<float> y = hostCopy(d, n, s);
    bool ok = true;
    for (size_t i = 0; i < n; ++i)
      ok = ok && y[i] == value(root, i);
    expect(ok, "broadcast f32");
    cudaFree(d);
  }
  // send to the next member, receive from the previous (one NCCL group).
  {
    const size_t n = 777;
    std::vector<int32_t> x(n, r + 1);
    int32_t *dx = deviceCopy(x);
    int32_t *dy = deviceCopy(std::vector<int32_t>(n, -1));
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    nccl.send(dx, n, HPCRT_I32, (r + 1) % size, s);
    nccl.recv(dy, n, HPCRT_I32, (r + size - 1) % size, s);
    checkNccl(ncclGroupEnd(), "ncclGroupEnd");
    std::vector<int32_t> y = hostCopy(dy, n, s);
    bool ok = true;
    for (size_t i = 0; i < n; ++i)
      ok = ok && y[i] == (r + size - 1) % size + 1;
    expect(ok, "send/recv ring i32");
    cudaFree(dx);
    cudaFree(dy);
  }
  cudaStreamDestroy(s);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess)
    devices = 0;
  int enough = devices >= size ? 1 : 0, all = 0;
  MPI_Allreduce(&enough, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (worldRank == 0)
      printf("skipped: %d CUDA device(s) visible, %d rank(s) need one each%s%s\n", devices, size,
             rc != cudaSuccess ? ": " : "", rc != cudaSuccess ? cudaGetErrorString(rc) : "");
    MPI_Finalize();
    return 77;
  }
  try {
    run(worldRank, size);
  } catch (const std::exception &e) {
    fprintf(stderr, "FAIL (rank %d): %s\n", worldRank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int mine = failures, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0)
    printf("nccl: %s on %d rank(s)\n", total ? "FAILED" : "all checks passed", size);
  MPI_Finalize();
  return total ? 1 : 0;
}
