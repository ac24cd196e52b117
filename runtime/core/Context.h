//===- Context.h - the runtime's execution context ---------------*- C++ -*-===//
//
// The state behind the opaque `hpcrt_ctx` of hpcrt.h: the manifest's tensor
// table, the weights (memory-mapped safetensors, or bytes a test hands in),
// the arena, the bound inputs, the state region of a train-step program (and
// its manifest's "state" and "train" sections), the arena high-water mark,
// the Chrome trace and the first kernel error. Backend-neutral: the
// regions' memory comes from the context's backend (Backend.h), whose
// kernels the compiled program's calls reach. The compiled program only
// calls kernels; everything else (parsing, binding, reporting) is driven by
// Main.cpp, the train driver (runtime/driver) or a test.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CORE_CONTEXT_H
#define HPCRT_CORE_CONTEXT_H

#include "Backend.h"
#include "Buffer.h"
#include "hpcrt.h"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace hpcrt {
namespace comm {
class CommQueue;
class MpiComm;
} // namespace comm

/// Every error a user or a malformed program can cause: one line of text,
/// printed by the driver as `<prog>: error: <what>`.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string &message);

/// Bytes per element of a dtype code; 0 for codes the runtime does not know.
size_t dtypeSize(int dtype);
/// A short name ("f32", "i64", "bool", ...); "dtype(<code>)" when unknown.
std::string dtypeName(int dtype);
/// "[1, 3, 224, 224]".
std::string shapeString(const std::vector<int64_t> &shape);
/// Appends shapeString(shape) to `out`.
void appendShape(std::string &out, const std::vector<int64_t> &shape);
int64_t numElements(const std::vector<int64_t> &shape);

enum class Region { Input, Arena, Weights, State };

/// One entry of the manifest's tensor table, resolved to memory.
struct Tensor {
  int dtype = 0;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  size_t bytes = 0;
  Region region = Region::Arena;
  int64_t index = 0;  ///< input number (Region::Input)
  int64_t offset = 0; ///< byte offset (Region::Arena, Weights, State)
  /// A rank's piece of a weight (a split along its outermost dimension, so
  /// no copy): the data is at offset + i * rankStride, i = this rank's
  /// group index over the mesh axes rankAxes.
  std::vector<int64_t> rankAxes;
  int64_t rankStride = 0;
  /// Stored in the CPU's blocked channel layout (manifest "layout":
  /// "blocked"; an f32 or bf16 [N, C, H, W] tensor, C % 16 == 0, the same
  /// bytes as plain): the one the backend picks for the program on this CPU
  /// (nChw8c, nChw16c or nhwc, onednn::blockedIsChannelsLast). Only
  /// layout-aware kernels touch it.
  bool blocked = false;
  void *data = nullptr;

  int rank() const { return static_cast<int>(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

struct NamedTensor {
  std::string name;
  int tensor = 0;
};

/// How a state tensor is initialized before the first step.
enum class StateInit { Zeros, Weights };

/// One entry of the manifest's "state" list (a train-step program).
struct StateEntry {
  std::string name; ///< the initializer name ("fc0.weight", "fc0.weight.exp_avg")
  int tensor = 0;   ///< its tensor (region "state")
  std::string role; ///< "param" (a model weight) or "optimizer"
  StateInit init = StateInit::Zeros;
  int64_t weightsOffset = 0; ///< StateInit::Weights: offset in the weights data
  /// ZeRO-3: the weights hold every rank's rows; this rank's start at
  /// weightsOffset + (its index over these mesh axes) * rankStride.
  std::vector<int64_t> rankAxes;
  int64_t rankStride = 0;
  int64_t rankPieces = 1; ///< ranks over rankAxes (ranksOver)
  /// A sharded tensor (manifest "split"): per dimension, the mesh axes that
  /// split it, major first; empty when every rank holds it whole.
  std::vector<std::vector<int64_t>> split;
  /// A tensor of the model (a trained "param", or a "buffer" such as
  /// batch-norm running statistics in train mode), saved under its
  /// initializer name; not optimizer state.
  bool isParam() const { return role == "param" || role == "buffer"; }
};

/// The manifest's "train" section, its names resolved to input and output
/// numbers (checked: dtypes and shapes as hpcrt.h says).
struct TrainInfo {
  std::string loss;   ///< "cross-entropy", "mse" or "output"
  std::string labels; ///< the labels input ("" for loss "output")
  int labelsInput = -1;
  int64_t batch = 0; ///< the global batch B
  int64_t microBatches = 1; ///< micro-batches the program runs B in (gradients accumulated)
  std::string lrInputName, stepInputName, lossOutputName, gradNormOutputName;
  std::string lossScaleInputName;
  int lrInput = -1, stepInput = -1;        ///< input numbers
  /// The 0-d f32 input the backward starts from (the loss's gradient; 1
  /// each step, NaN for the fault nan-grad); -1 in older programs.
  int lossScaleInput = -1;
  /// The 0-d f32 input of the clipping threshold (the optimizer clips the
  /// gradient norm to it); -1 when the step does not clip.
  int clipNormInput = -1;
  std::string clipNormInputName;
  double clipNorm = 0;       ///< optimizer.clip_norm (0: none, or automatic)
  bool clipNormAuto = false; ///< optimizer.clip_norm_auto: --clip-norm=auto
  /// "conservative": this program is the stability guard's conservative
  /// plan; its lr is the schedule's times lr_scale.
  bool conservative = false;
  double conservativeLrScale = 1;
  std::string conservativeCompress = "none"; ///< its gradient compression
  int lossOutput = -1, gradNormOutput = -1; ///< output numbers (-1: none)
  /// A routed mixture-of-experts layer's output of its choices per expert
  /// (an i64 [experts]; "moe_loads"), and its buffers' rows per expert.
  struct MoELoad {
    int output = -1;
    int64_t capacity = 0;
  };
  std::vector<MoELoad> moeLoads;
  /// The output of the auxiliary balancing loss (an f32 scalar,
  /// "moe_balance_loss_output"; -1: none).
  int moeBalanceLossOutput = -1;
  std::string moeBalanceLossOutputName;
  std::string optimizer; ///< optimizer.name ("sgd", "adamw")
  bool hasLr = false;    ///< optimizer.lr is present
  double lr = 0;         ///< optimizer.lr, the compiled base lr
  std::string optimizerJson; ///< the whole "optimizer" object, as JSON text
  /// optimizer.skip_nonfinite: the updates skip a step whose grad_norm is
  /// not finite, and the step input counts the optimizer's steps (applied
  /// updates) rather than the run's
  bool skipNonfinite = false;
  std::string scheduleKind = "constant"; ///< lr_schedule.kind
  int64_t warmup = 0, total = 0;         ///< lr_schedule.warmup, .total
  /// Whether input number `i` is a data input (not the lr, step or loss
  /// scale input).
  bool isDataInput(int i) const {
    return i != lrInput && i != stepInput && i != lossScaleInput && i != clipNormInput;
  }
};

struct OpInfo {
  std::string name; ///< "hpc.matmul"
  std::string loc;  ///< the ONNX node name (or another source location)
  std::string block; ///< a pipeline stage's block ("F3", "B3", "W3"; "" otherwise)
  bool recv = false; ///< a dist.wait on a receive from another pipeline stage
};

/// One axis of the manifest's "mesh".
struct MeshAxisInfo {
  std::string name;
  int64_t size = 1;
  std::string level;
};

/// What a kernel keeps between calls of one op: a oneDNN primitive made
/// for the op's fixed shapes, weights reordered into the primitive's layout
/// (runtime/cpu/Dnnl.h). Created by the setup run at start (or by the first
/// call) and kept by the context until it goes.
struct KernelState {
  virtual ~KernelState() = default;
  /// Bytes the state holds for the whole run (reordered weights).
  uint64_t heldBytes = 0;
};

struct TraceEvent {
  int32_t op;
  int32_t run;
  double startUs;
  double durationUs;
  int32_t rank = 0; ///< the trace's "pid" (the MPI rank of a mesh run)
  int32_t tid = kTraceKernels; ///< the trace's "tid": which thread ran it
  /// The threads of a rank's trace: the kernels (and synchronous dist ops)
  /// on the main thread, started dist ops' data movement on the
  /// communication thread (comm/CommQueue.h).
  static constexpr int32_t kTraceKernels = 0, kTraceComm = 1;
};

} // namespace hpcrt

/// The execution context (hpcrt::Context).
struct hpcrt_ctx {
public:
  /// Parses and validates a manifest (throws hpcrt::Error); the kernels and
  /// the regions' memory are `backend`'s (not owned; it outlives the
  /// context).
  explicit hpcrt_ctx(const std::string &manifestJson,
                     const hpcrt::Backend &backend = hpcrt::defaultBackend());
  ~hpcrt_ctx();
  hpcrt_ctx(const hpcrt_ctx &) = delete;
  hpcrt_ctx &operator=(const hpcrt_ctx &) = delete;

  /// The backend whose kernels run the program.
  const hpcrt::Backend &backend() const { return backend_; }

  // --- manifest ---------------------------------------------------------
  const std::string &model() const { return model_; }
  /// The source model's absolute path at compile time (manifest
  /// "model_path"; empty when the manifest has none).
  const std::string &modelPath() const { return modelPath_; }
  /// The products' precision (manifest "precision"; "fp32" when absent).
  const std::string &precision() const { return precision_; }
  /// How the train step recomputes activations (manifest "recompute":
  /// "full" or "selective"; empty when absent: none).
  const std::string &recompute() const { return recompute_; }
  uint64_t arenaBytes() const { return arenaBytes_; }
  bool hasWeights() const { return hasWeights_; }
  const std::string &weightsFile() const { return weightsFile_; }
  uint64_t weightsBytes() const { return weightsBytes_; }
  /// Bytes of the weights data only the state's initial values read: once
  /// prepare() has initialized the state they are released (a train step's
  /// parameters live in the state, not next to their initial copy).
  uint64_t initOnlyWeightsBytes() const;
  /// The weights the kernels read: what stays resident.
  uint64_t residentWeightsBytes() const { return weightsBytes_ - initOnlyWeightsBytes(); }
  uint64_t weightsHash() const { return weightsHash_; }
  /// Whether a blocked tensor (Tensor::blocked) is bf16: the CPU backend
  /// picks the blocked layout per program (onednn::blockedIsChannelsLast).
  bool hasBlockedBf16() const { return hasBlockedBf16_; }
  const std::vector<hpcrt::NamedTensor> &inputList() const { return inputs_; }
  const std::vector<hpcrt::NamedTensor> &outputList() const { return outputs_; }
  const std::vector<hpcrt::OpInfo> &ops() const { return ops_; }
  /// The mesh a partitioned program runs on (empty: a single-rank program).
  const std::vector<hpcrt::MeshAxisInfo> &mesh() const { return mesh_; }
  bool hasMesh() const { return !mesh_.empty(); }
  /// The product of the mesh sizes (1 without a mesh).
  int64_t meshRanks() const;
  /// The compiler's count of the bytes each rank sends per run (-1: none).
  int64_t plannedBytesPerRank() const { return bytesPerRank_; }
  /// The compiler's count of the bytes all ranks together send per run to
  /// a rank on another node (dist-hierarchical; -1: none).
  int64_t plannedBytesAcrossNodes() const { return bytesAcrossNodes_; }
  /// The ZeRO stage the state is sharded by (dist-zero; 0: none).
  int64_t zeroStage() const { return zeroStage_; }
  /// The ranks per node the compiler laid the mesh on, node-major (ranks
  /// [k*P, (k+1)*P) on node k; 0: not known).
  int64_t ranksPerNode() const { return ranksPerNode_; }
  /// The compiler's prediction of this plan's step (hpc-opt --cluster: the
  /// manifest's "prediction", as compact JSON), or "" when it made none.
  const std::string &prediction() const { return prediction_; }
  /// Ranks in a group over these mesh axes (indices).
  uint64_t ranksOver(const std::vector<int64_t> &axes) const;
  size_t numTensors() const { return tensors_.size(); }
  hpcrt::Tensor &tensor(int id);
  const hpcrt::Tensor &tensor(int id) const;

  // --- train-step programs (manifest "state", "state_bytes", "train") -----
  /// Whether the manifest has a "train" section (a program of --train).
  bool isTrainStep() const { return isTrainStep_; }
  const hpcrt::TrainInfo &train() const { return train_; }
  uint64_t stateBytes() const { return stateBytes_; }
  const std::vector<hpcrt::StateEntry> &stateList() const { return state_; }
  /// The part of its whole (global) tensor a state tensor of this rank
  /// holds: `global` gets the whole tensor's shape, `start` this rank's
  /// first index per dimension (its extent is the tensor's shape).
  void stateSlice(const hpcrt::StateEntry &e, std::vector<int64_t> &global,
                  std::vector<int64_t> &start) const;
  /// The state buffer (after prepare(); null when state_bytes is 0).
  void *stateData() const { return stateBuffer_.data(); }

  // --- setup (in this order: weights, inputs, prepare) -------------------
  /// Maps a safetensors file and checks its hpc_hash and data hash.
  void loadWeightsFile(const std::string &path);
  /// Uses `bytes` bytes at `data` as the weights data section (not copied;
  /// must outlive the context); checks size and hash against the manifest.
  void setWeightsData(const void *data, size_t bytes);
  /// Takes `data` as the weights data section: bytes laid out for this plan
  /// from another file (`run --weights` with a by-name file), so its size
  /// must be the manifest's but its hash is not checked. Replaces (and
  /// unmaps) whatever was loaded before; residentBytes() counts it.
  void adoptWeightsData(hpcrt::Buffer data);
  /// The weights data section (after loading; null before).
  const uint8_t *weightsData() const { return weightsData_; }
  /// Copies an input's data (its dtype and shape must be the manifest's).
  void bindInput(size_t inputNumber, int dtype,
                 const std::vector<int64_t> &shape, const void *data,
                 size_t bytes);
  /// Allocates the arena (and, the first time, the state buffer, which it
  /// initializes from the weights or with zeros) and resolves every tensor
  /// to a pointer. Inputs not bound yet get a zeroed buffer (tests, and the
  /// train driver, which fills them in place); the driver checks binding
  /// first.
  void prepare();
  bool prepared() const { return prepared_; }
  /// Before prepare(): this context runs on `owner`'s state buffer (laid
  /// out alike; the stability guard's conservative plan), which it neither
  /// allocates nor initializes. `owner` must outlive it.
  void shareState(const hpcrt_ctx &owner);
  /// The buffer of input number `i` (after prepare()): the train driver
  /// writes each step's batch into it.
  void *inputData(size_t i);
  /// Bytes the context holds: the arena, the state, the inputs' buffers and
  /// the weights (the whole mapped file, or the copy of its data).
  uint64_t residentBytes() const;

  /// The communicator the dist kernels use (set by the driver after
  /// MPI_Init; not owned). Without one, dist kernels fail.
  void setComm(hpcrt::comm::MpiComm *comm) { comm_ = comm; }
  hpcrt::comm::MpiComm *comm() const { return comm_; }
  /// Where the asynchronous dist ops run their communication (not owned).
  void setCommQueue(hpcrt::comm::CommQueue *queue) { commQueue_ = queue; }
  hpcrt::comm::CommQueue *commQueue() const { return commQueue_; }

  // --- kernel states (made once at start) --------------------------------
  /// The setup run: the compiled program called once after prepare(), in
  /// which only the kernels that keep a state run, and they only make it
  /// (primitives, reordered weights, the scratchpad's size); nothing is
  /// computed or communicated. Kernels met later without a state make it on
  /// their first call, so a program without the setup run still works.
  void beginSetup() { settingUp_ = true; }
  /// Ends the setup run: allocates the scratchpad the states asked for.
  void endSetup();
  bool settingUp() const { return settingUp_; }
  /// The state of op `op` (null: none yet).
  hpcrt::KernelState *kernelState(int op) const;
  void setKernelState(int op, std::unique_ptr<hpcrt::KernelState> state);
  /// Asks for a scratchpad of at least `bytes` (one buffer that every
  /// kernel shares: kernels run one at a time).
  void requireScratchpad(size_t bytes);
  /// The shared scratchpad (allocated by endSetup(), or grown here when a
  /// kernel without a setup run needs more).
  void *scratchpad(size_t bytes);
  uint64_t scratchpadBytes() const { return scratchpad_.size(); }
  /// Bytes the kernel states hold (reordered weights), and how many there are.
  uint64_t kernelStateBytes() const;
  size_t kernelStateCount() const;
  /// A note for the user about the kernels of this CPU (the first one a
  /// kernel gave; printed once after the setup run).
  void setKernelNote(const std::string &note) {
    if (kernelNote_.empty())
      kernelNote_ = note;
  }
  const std::string &kernelNote() const { return kernelNote_; }

  // --- execution ----------------------------------------------------------
  /// Kernel bookkeeping (Kernel.h's dispatch calls these).
  void noteWrite(const hpcrt::Tensor &t);
  uint64_t highWater() const { return highWater_; }
  void setTracing(bool on) { tracing_ = on; }
  bool tracing() const { return tracing_; }
  /// Where a run's time went, for the train command's measured profile
  /// (the parts hpc-opt's plan predicts): the blocking collectives and the
  /// waits for started ones are exposed communication, the point-to-point
  /// transfers between pipeline stages and the waits for received values
  /// are the bubble; the rest of a step is compute.
  struct RunProfile {
    double exposedCommUs = 0, bubbleUs = 0;
  };
  void setProfiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  void addProfile(bool bubble, double us) {
    (bubble ? profile_.bubbleUs : profile_.exposedCommUs) += us;
  }
  /// The profile since the last call (then zeroed).
  RunProfile takeProfile() {
    RunProfile p = profile_;
    profile_ = {};
    return p;
  }
  void beginRun() { ++run_; }
  /// Records one event; thread-safe (the communication thread adds the
  /// started ops' jobs with tid TraceEvent::kTraceComm).
  void addTrace(int op, double startUs, double durationUs,
                int32_t tid = hpcrt::TraceEvent::kTraceKernels);
  int32_t currentRun() const { return run_; }
  const std::vector<hpcrt::TraceEvent> &trace() const { return trace_; }
  /// Writes the Chrome trace (JSON object format) to `path`.
  void writeTrace(const std::string &path) const;
  /// Writes `events` (of this program, any rank) as a Chrome trace; in a
  /// pipeline binary rank r's events are of `stageOps[r / ranksPerStage]`.
  void writeTrace(const std::string &path, const std::vector<hpcrt::TraceEvent> &events,
                  const std::vector<std::vector<hpcrt::OpInfo>> &stageOps = {},
                  int32_t ranksPerStage = 1) const;
  /// A manifest's "ops" list (another pipeline stage's, for the trace).
  static std::vector<hpcrt::OpInfo> manifestOps(const char *manifestJson);
  double nowUs() const;

  /// The first kernel error; kernels after it do nothing.
  bool failed() const { return !error_.empty(); }
  const std::string &error() const { return error_; }
  void setError(const std::string &message) {
    if (error_.empty())
      error_ = message;
  }
  void clearError() { error_.clear(); }

private:
  const hpcrt::Backend &backend_;
  std::string model_;
  std::string modelPath_;
  std::string precision_ = "fp32";
  std::string recompute_;
  uint64_t arenaBytes_ = 0;
  bool hasWeights_ = false;
  std::string weightsFile_;
  uint64_t weightsBytes_ = 0;
  uint64_t weightsHash_ = 0;
  bool hasBlockedBf16_ = false;
  /// The weights file's entry names by data offset (manifest
  /// weights.entries; empty for a manifest without them).
  std::vector<std::pair<uint64_t, std::string>> weightNames_;
  std::vector<hpcrt::NamedTensor> inputs_, outputs_;
  std::vector<hpcrt::Tensor> tensors_;
  std::vector<hpcrt::OpInfo> ops_;
  std::vector<hpcrt::MeshAxisInfo> mesh_;
  int64_t bytesPerRank_ = -1;
  int64_t bytesAcrossNodes_ = -1;
  int64_t zeroStage_ = 0;
  int64_t ranksPerNode_ = 0;
  std::string prediction_;
  bool isTrainStep_ = false;
  hpcrt::TrainInfo train_;
  uint64_t stateBytes_ = 0;
  std::vector<hpcrt::StateEntry> state_;
  hpcrt::comm::CommQueue *commQueue_ = nullptr;
  hpcrt::comm::MpiComm *comm_ = nullptr;

  const uint8_t *weightsData_ = nullptr;
  size_t weightsDataBytes_ = 0;
  void *mapBase_ = nullptr;
  size_t mapBytes_ = 0;
  hpcrt::Buffer weightsCopy_;
  hpcrt::Buffer arena_;
  hpcrt::Buffer stateBuffer_;
  bool stateShared_ = false; ///< stateBuffer_ is another context's (shareState)
  std::vector<hpcrt::Buffer> inputBuffers_;
  std::vector<bool> inputBound_;
  bool prepared_ = false;

  uint64_t highWater_ = 0;
  bool tracing_ = false;
  bool profiling_ = false;
  RunProfile profile_;
  int32_t run_ = 0;
  std::vector<hpcrt::TraceEvent> trace_;
  std::mutex traceMu_;
  double epochUs_ = 0;
  std::string error_;

  bool settingUp_ = false;
  std::string kernelNote_;
  std::vector<std::unique_ptr<hpcrt::KernelState>> kernelStates_;
  size_t scratchpadWanted_ = 0;
  hpcrt::Buffer scratchpad_;

  void checkWeights(const uint8_t *data, size_t bytes, const std::string &what);
  /// The manifest's "state_bytes" and "state" (after the tensor table).
  void parseState(const nlohmann::json &manifest);
  /// The manifest's "train" (after the inputs and outputs).
  void parseTrain(const nlohmann::json &manifest);
  /// Fills the freshly allocated state buffer (zeros, weights).
  void initializeState();
  /// The [begin, end) offsets of the weights data that only initialize state.
  std::vector<std::pair<uint64_t, uint64_t>> initOnlyRanges() const;
  /// Returns the pages of those ranges to the system (after initializeState).
  void releaseInitOnlyWeights();
  uint64_t releasedBytes_ = 0; ///< whole pages handed back
  bool initReleased_ = false;
};

namespace hpcrt {
using Context = ::hpcrt_ctx;

/// The directory of the running executable (/proc/self/exe), "." if unknown.
std::string executableDir();
/// Parses 16 hex digits (throws Error naming `what`).
uint64_t parseHash(const std::string &hex, const std::string &what);
std::string hashString(uint64_t hash);
} // namespace hpcrt

#endif // HPCRT_CORE_CONTEXT_H
