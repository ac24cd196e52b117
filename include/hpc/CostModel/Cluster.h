//===- Cluster.h - cluster and device descriptions ---------------*- C++ -*-===//
//
// What the cost model knows about a machine: how many nodes, how many devices
// a node holds, what one device can do (peak FLOP/s per data type, memory
// capacity and bandwidth) and the links of each topology level (intra-node:
// NVLink/NVSwitch, HCCS; inter-node: InfiniBand, RoCE) with their bandwidth
// and latency. A cluster comes from a preset (`dgx-a100-80g:128`) or a JSON
// file; docs/cost-model.md documents the format and where the preset figures
// come from. A file written by hpc-calibrate also carries the raw
// measurements it was made from (Calibration), which the reader checks and
// the writer prints back.
//
// Plain C++ (no MLIR headers): the search and its unit tests use it directly.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COSTMODEL_CLUSTER_H
#define HPC_COSTMODEL_CLUSTER_H

#include <cstdint>
#include <string>
#include <vector>

namespace hpc {
namespace cost {

/// Data types a device may have a peak rate for.
enum class DType { FP32 = 0, TF32, BF16, FP16, FP8 };
constexpr int kNumDTypes = 5;

/// "fp32", "tf32", "bf16", "fp16", "fp8".
const char *dtypeName(DType t);
/// Parses a dtype name; false for an unknown one.
bool parseDType(const std::string &name, DType &out);
/// Bytes one element of `t` takes in memory (tf32 is stored as fp32).
int dtypeBytes(DType t);

/// One accelerator.
struct DeviceSpec {
  std::string kind;                 ///< e.g. "A100-SXM4-80GB"
  double peakFlops[kNumDTypes] = {}; ///< dense FLOP/s per dtype; 0 = none
  double memoryBytes = 0;           ///< capacity
  double memoryBandwidth = 0;       ///< bytes/s
  double reservedBytes = 0;         ///< taken by the runtime (context, workspaces)
  /// The fraction of a node's cores each device has when all of them
  /// compute at once: 1 unless the devices (ranks) outnumber the cores, as
  /// on a small machine running a larger cluster (hpc-calibrate: cores /
  /// (ranks on the node x threads)). The peak rates are the shared ones.
  double coreShare = 1;
  /// With coreShare < 1: how much of a waiting device's share the devices
  /// still computing get, in [0, 1] (a waiting rank spins a while before
  /// it sleeps; hpc-calibrate measures it).
  double coreLending = 1;
  double usableMemory() const { return memoryBytes - reservedBytes; }
};

/// The links of one topology level, per device and per direction.
struct LinkSpec {
  std::string name;      ///< e.g. "nvlink3", "ib-hdr"
  double bandwidth = 0;  ///< bytes/s one device can send (and receive) at once
  double latency = 0;    ///< seconds per message (one step of a collective)
};

/// Achievable fractions of the peaks, and fixed overheads. Calibrated against
/// Megatron-LM's published throughput (docs/cost-model.md, docs/benchmarks.md).
struct Efficiency {
  double matmul = 0.8;          ///< fraction of peak FLOP/s a large GEMM reaches
  double memory = 0.8;          ///< fraction of memory bandwidth kernels reach
  double network = 0.8;          ///< fraction of intra-node link bandwidth
                                ///< collectives reach
  double networkInter = 0.9;    ///< the same for inter-node links
  double kernelOverhead = 0;    ///< seconds per kernel launch
  double overlap = 1.0;         ///< fraction of gradient sync that may hide under backward
  /// Seconds each collective (or send) of a step costs beyond its transfer:
  /// handing it to the runtime's communication thread and waking the
  /// waiting kernel thread when it is done (hpc-calibrate measures it; 0 in
  /// the presets, whose factors were fitted without it).
  double collectiveOverhead = 0;
};

/// One timed product or convolution of a calibration run.
struct KernelTiming {
  std::string name;           ///< e.g. "square-512", "gpt2s-mlp-fc"
  /// gemm: batch, m, k, n; conv: n, c, h, w, out_channels, kernel_h,
  /// kernel_w, stride, pad (docs/cost-model.md, "Calibration (hpc-calibrate)").
  std::vector<int64_t> shape;
  DType dtype = DType::FP32;
  double seconds = 0;         ///< per call (> 0)
  double flopRate = 0;        ///< FLOP/s achieved (> 0)
};

/// One timed memory-bound kernel: the bytes it reads and writes per call.
struct MemoryTiming {
  std::string kernel;         ///< e.g. "add"
  int64_t bytes = 0;          ///< read + written per call
  double seconds = 0;         ///< per call
  double bandwidth = 0;       ///< bytes/s achieved
};

/// One collective (or point-to-point "send_recv") of one topology level,
/// timed at several message sizes and fitted to t(n) = alpha + n / beta.
struct CollectiveTiming {
  std::string level;          ///< "intra-node" or "inter-node"
  std::string kind;           ///< all_reduce, reduce_scatter, all_gather,
                              ///< all_to_all, broadcast, send_recv
  int64_t groupSize = 2;      ///< ranks taking part
  double alpha = 0;           ///< seconds
  double beta = 0;            ///< bytes/s
  std::vector<int64_t> sizes; ///< message bytes measured
  std::vector<double> seconds; ///< time per call at each size
  /// The cost model's factor on `seconds` (scaleClusterSpec's network
  /// scale; not written to a file).
  double timeScale = 1;
};

/// How much of a collective hides under compute on this machine: a GEMM
/// loop alone, an all-reduce on the runtime's communication thread alone,
/// and both at once; fraction = (compute + comm - both) / compute, in
/// [0, 1] (the cost model's `overlap`).
struct OverlapTiming {
  bool present = false;
  int64_t bytes = 0;          ///< the all-reduce's buffer
  double computeS = 0, commS = 0, bothS = 0;
  double fraction = 0;
};

/// Names of the collective kinds a CollectiveTiming may have.
const std::vector<std::string> &calibrationCollectiveKinds();

/// The raw measurements behind a calibrated cluster file (hpc-calibrate).
/// The cost model reads the summary fields of ClusterSpec; these tables are
/// kept so that later models can use them.
struct Calibration {
  bool present = false;       ///< the file had a "calibration" section
  std::string date;           ///< when it was measured (ISO 8601, UTC)
  int64_t ranks = 1;          ///< MPI ranks of the run
  int64_t threads = 1;        ///< kernel threads per rank
  bool quick = false;         ///< --quick: few sizes and repetitions
  std::vector<KernelTiming> gemm, conv;
  std::vector<MemoryTiming> memory;
  double kernelOverhead = 0;  ///< seconds of a tiny kernel call
  /// Seconds a small all-reduce costs through the communication thread
  /// between kernels, beyond the same all-reduce called directly; < 0:
  /// not measured (one rank, or a file from before the measurement).
  double collectiveOverhead = -1;
  std::vector<CollectiveTiming> collectives;
  OverlapTiming overlap;      ///< with two or more ranks
};

/// The factors fitted to Megatron-LM's weak-scaling table (Narayanan et
/// al., SC'21, Table 1) by `scripts/bench_search.py --calibrate`: every
/// preset's, and a cluster file's where it gives no `efficiency`.
Efficiency calibratedEfficiency();

/// A whole machine: `nodes` nodes of `devicesPerNode` identical devices.
struct ClusterSpec {
  std::string name;          ///< preset spelling ("dgx-a100-80g:128") or file name
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  DeviceSpec device;
  LinkSpec intraNode;        ///< level 0: devices in one node
  LinkSpec interNode;        ///< level 1: between nodes (unused with one node)
  /// Whether the levels are the machine's own: a file may leave one out
  /// (then the other's figures stand in for it) and clusterToJSON prints
  /// only the levels that are.
  bool hasIntraNode = true, hasInterNode = true;
  Efficiency efficiency;
  Calibration calibration;   ///< present only in hpc-calibrate's files

  int64_t numDevices() const { return nodes * devicesPerNode; }
};

/// Names of the presets, each usable as "NAME:NODES".
std::vector<std::string> clusterPresetNames();

/// Fills `out` from "PRESET:NODES" (or "PRESET", one node). False and a
/// one-line reason in `error` for an unknown preset or a bad node count.
bool clusterFromPreset(const std::string &spec, ClusterSpec &out,
                       std::string &error);

/// Parses the JSON cluster format. On failure `error` is
/// "<fileName>: <field path>: <reason>", e.g.
/// "c.json: links[1].bandwidth_gbps: expected a number > 0".
bool clusterFromJSON(const std::string &text, const std::string &fileName,
                     ClusterSpec &out, std::string &error);

/// "PRESET:NODES", "PRESET", a path to a JSON file (anything ending in .json
/// or naming an existing file), or "FILE.json:NODES" (the file's node type at
/// another node count).
bool parseClusterSpec(const std::string &spec, ClusterSpec &out,
                      std::string &error);

/// The cluster in the JSON format clusterFromJSON reads.
std::string clusterToJSON(const ClusterSpec &c);

/// A recalibration from a measured run (hpc-opt --recalibrate): every
/// compute time the model predicts on `c` becomes `computeScale` times as
/// long (the peaks and memory bandwidth divided, the kernel overhead
/// multiplied), every transfer's bytes `networkScale` times as long (both
/// levels' bandwidths divided and the measured collectives' times
/// multiplied) and the links' latencies `latencyScale` times (the
/// collective overhead, a hand-off between threads, kept). All scales > 0.
void scaleClusterSpec(ClusterSpec &c, double computeScale, double networkScale,
                      double latencyScale);

} // namespace cost
} // namespace hpc

#endif // HPC_COSTMODEL_CLUSTER_H
