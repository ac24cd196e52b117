//===- Dnnl.h - oneDNN primitives behind the CPU kernels --------*- C++ -*-===//
//
// The CPU backend's products (matmul, gemm, convolution, deconvolution and
// the convolution's weight gradient) run on oneDNN primitives. The compiler
// fixes every shape, so each op's primitive is made once, by the setup run
// at start (Context::beginSetup) or by the op's first call, and kept in the
// op's KernelState with one memory object per argument whose data handle is
// set per call. Scratchpads are user-managed: every primitive reports its
// size at creation and all share the context's one scratchpad buffer.
// Weights that never change (the weights region) are reordered once into
// the layout the primitive picked for this CPU.
//
// Where oneDNN has no implementation (a dtype this CPU lacks, such as bf16
// without AVX512-BF16/AMX; f64; an attribute combination), primitiveFor()
// records that, and the kernel runs its own code path instead.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CPU_DNNL_H
#define HPCRT_CPU_DNNL_H

#include "Kernel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hpcrt::onednn {

namespace dn = ::dnnl;
using dims = dn::memory::dims;
using dt = dn::memory::data_type;

/// The process's CPU engine and its in-order stream.
dn::engine &engine();
dn::stream &stream();

/// oneDNN's data type of a runtime dtype (dt::undef: none).
dt dataType(int dtype);

/// A plain (row-major) memory descriptor.
dn::memory::desc plain(const dims &shape, dt type);
/// A memory descriptor with explicit element strides.
dn::memory::desc strided(const dims &shape, dt type, const dims &strides);

/// Whether oneDNN's effective instruction set reaches avx512_core: the
/// blocked layout's 16-channel blocks, and bf16 kernels at all (below it
/// every bf16 primitive is unimplemented).
bool hasAvx512Core();

/// Whether the context's blocked layout is channels-last (nhwc): with
/// AVX-512 in a program with bf16 blocked tensors, where oneDNN's brgemm
/// convolutions read and write it (on AMX; nChw16c gets the AVX512-BF16
/// direct kernels). An f32 program's blocked layout is nChw16c with
/// AVX-512: oneDNN's Winograd convolutions read only that, and they run
/// ResNet-18's 3x3 stride-1 convolutions 1.5-1.7x faster than the brgemm
/// ones on nhwc (2026-12-07, the AMX Xeon, docs/benchmarks.md). Without
/// AVX-512: nChw8c (the AVX2 direct kernels).
bool blockedIsChannelsLast(const Context &ctx);

/// The descriptor of an activation tensor: plain, or (blocked) the
/// context's blocked channel layout (blockedIsChannelsLast; nChw16c or
/// nChw8c otherwise).
dn::memory::desc activationDesc(const Context &ctx, bool blocked, const dims &shape, dt type);
inline dn::memory::desc activationDesc(const Context &ctx, const Tensor &t, const dims &shape,
                                       dt type) {
  return activationDesc(ctx, t.blocked, shape, type);
}

/// Whether `activation` names a fused epilogue the runtime knows ("none",
/// "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu").
bool knownActivation(const std::string &activation);
/// Its position in that list (-1: unknown).
int activationIndex(const std::string &activation);
/// Appends the eltwise post-op of `activation` (nothing for "none").
void appendActivation(dn::post_ops &ops, const std::string &activation);

/// OpenMP's thread count for a scope (oneDNN reads it when it makes a
/// primitive and when it runs one: both happen under the same count).
class ThreadScope {
public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope &) = delete;
  ThreadScope &operator=(const ThreadScope &) = delete;

private:
  int saved_;
};

/// The threads a primitive of `flops` floating-point operations runs on:
/// one below ~100 us of work. An OpenMP region waits for all its threads,
/// and on a busy machine a second thread may not be scheduled for a whole
/// time slice; small products are fastest in the calling thread (as
/// parallelFor decides for the runtime's own pool).
int threadsFor(double flops);

/// threadsFor's work of a product of `flops` that reads and writes `bytes`:
/// a thin product (a classifier's one row times its weights) is bound by
/// its memory traffic, not its flops. ~10 GB/s of one core's streaming is 5
/// units per byte: ResNet-18's 1x512x1000 fc (1 MFLOP, 2 MB) is ~70 us on
/// one core and 1.6x faster on two; a 64x64x64 product (48 KB) stays serial.
double productWork(double flops, double bytes);

/// False: the kernels that keep their own f32 code next to a oneDNN path
/// (layer_norm, KernelsNorm.cpp) run their own code and make no
/// primitive. For the tests that check both paths and for hpcrt-norm-bench
/// (which times the two against each other); true unless set.
void setPrimitivesEnabled(bool on);
bool primitivesEnabled();

/// What a product kernel's call was checked on: its tensors (a context's
/// tensors never change shape, dtype or layout once it is made) and its
/// attributes.
struct CallSignature {
  const Tensor *tensors[4] = {};
  /// The attributes, each exactly (a double as its bits).
  uint64_t attrs[3] = {};
  bool operator==(const CallSignature &o) const {
    return std::equal(tensors, tensors + 4, o.tensors) &&
           std::equal(attrs, attrs + 3, o.attrs);
  }
};

/// One op's primitive and the memory objects of its arguments.
struct Primitive : KernelState {
  std::string key; ///< what it was made for (shapes, dtypes, attributes)
  bool available = false; ///< false: oneDNN has no implementation here
  int threads = 1;        ///< OpenMP threads it was made for and runs on
  std::string impl;       ///< oneDNN's implementation ("brgconv:avx512_core")
  dn::primitive prim;
  std::unordered_map<int, dn::memory> args;
  /// args as oneDNN's C API takes them, made once (bindArgs), and the data
  /// handle each holds: a call sets only the handles that changed and
  /// builds no map (a 64x64x64 bf16 product takes ~1 us on AMX).
  std::vector<dnnl_exec_arg_t> execArgs;
  std::vector<const void *> bound;
  std::vector<bool> rebind; ///< set every call (a blocked layout's padding)
  size_t scratchpadBytes = 0;
  /// Read-only weights in the primitive's own layout (reordered once).
  Buffer weights;
  bool weightsReady = false;
  /// The last call that passed the kernel's checks and found this
  /// primitive by its key, and the weights it read (a copy made once; null:
  /// the operand itself). A call with the same signature goes straight to
  /// execution (verifiedPrimitive): the checks and the key cost ~0.7 us,
  /// as much as a 64x64x64 bf16 product on AMX.
  CallSignature verified;
  bool hasVerified = false;
  const void *verifiedWeights = nullptr;
  void markVerified(const CallSignature &sig, const void *weightsCopy) {
    verified = sig;
    hasVerified = true;
    verifiedWeights = weightsCopy;
  }

  /// Fills execArgs from args (after the last argument is added).
  void bindArgs();
  /// Runs the primitive on these (argument, data) pairs, with the context's
  /// scratchpad.
  void execute(Context &ctx, std::initializer_list<std::pair<int, const void *>> data);
  /// execute() of a product (matmul, convolution, deconvolution): source,
  /// weights, the bias when there is one (null: none), destination, and the
  /// second source of a binary post-op 0 when there is one (a conv's
  /// residual; null: none).
  void executeProduct(Context &ctx, const void *src, const void *weights, const void *bias,
                      void *dst, const void *postOpSrc = nullptr);
};

/// What primitiveFor's `make` fills in: the primitive descriptor (empty
/// when oneDNN has no implementation) and the argument descriptors.
struct Made {
  dn::primitive_desc_base pd;
  dn::primitive prim;
  std::vector<std::pair<int, dn::memory::desc>> args;
};

/// The argument of a product's post-op 0 when that is a binary op (a conv's
/// residual add).
constexpr int kPostOpSrcArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;

/// The Made of a product primitive (matmul, convolution, deconvolution):
/// source, weights, destination and, with `bias`, the bias, and with
/// `postOpSrc` that descriptor as kPostOpSrcArg; empty when `pd` is (no
/// implementation).
Made productMade(const dn::primitive_desc_base &pd, dn::primitive prim, bool bias,
                 const dn::memory::desc *postOpSrc = nullptr);

/// A primitive for `key` made by make() (returning Made), with its
/// scratchpad asked of `ctx`; `flops` sizes its thread count (threadsFor).
/// Not available when oneDNN has no implementation. For kernels whose state
/// holds more than one primitive; the others use primitiveFor.
template <typename MakeFn>
std::unique_ptr<Primitive> makePrimitive(Context &ctx, const std::string &key, double flops,
                                         MakeFn &&make) {
  auto fresh = std::make_unique<Primitive>();
  fresh->key = key;
  fresh->threads = threadsFor(flops);
  try {
    ThreadScope scope(fresh->threads);
    Made m = make();
    if (m.pd) {
      fresh->available = true;
      fresh->impl = m.pd.impl_info_str();
      fresh->prim = std::move(m.prim);
      for (auto &[arg, md] : m.args)
        fresh->args.emplace(arg, dn::memory(md, engine(), DNNL_MEMORY_NONE));
      dn::memory::desc sp = m.pd.scratchpad_desc();
      fresh->scratchpadBytes = sp.get_size();
      if (fresh->scratchpadBytes)
        fresh->args.emplace(DNNL_ARG_SCRATCHPAD, dn::memory(sp, engine(), DNNL_MEMORY_NONE));
      fresh->bindArgs();
      ctx.requireScratchpad(fresh->scratchpadBytes);
    }
  } catch (const dn::error &e) {
    if (e.status != dnnl_unimplemented)
      fail(std::string("oneDNN: ") + e.what());
  }
  return fresh;
}

/// The op's primitive for `key` (its kernel state): made by make() when the
/// op has none yet or has one for another key (a test reusing an op number).
template <typename MakeFn>
Primitive &primitiveFor(OpCall &c, const std::string &key, double flops, MakeFn &&make) {
  auto *p = dynamic_cast<Primitive *>(c.ctx.kernelState(c.op));
  if (p && p->key == key)
    return *p;
  std::unique_ptr<Primitive> fresh = makePrimitive(c.ctx, key, flops, make);
  Primitive &ref = *fresh;
  c.ctx.setKernelState(c.op, std::move(fresh));
  return ref;
}

/// The op's primitive when its last checked call (Primitive::markVerified)
/// had this signature; null otherwise (the kernel checks its call and
/// finds the primitive by its key).
inline Primitive *verifiedPrimitive(OpCall &c, const CallSignature &sig) {
  auto *p = dynamic_cast<Primitive *>(c.ctx.kernelState(c.op));
  return p && p->available && p->hasVerified && p->verified == sig ? p : nullptr;
}

/// The name of the instruction set oneDNN uses on this CPU ("avx2", ...).
std::string isaName();

/// Records (Context::setKernelNote) that a product of `dtype` has no oneDNN
/// kernel on this CPU and runs widened to f32; only bf16 gets a note (the
/// precision a user asks for with --precision=bf16).
void noteWidened(OpCall &c, int dtype);

/// The attributes every primitive here is made with (user scratchpad).
dn::primitive_attr baseAttr();

/// A primitive's key for primitiveFor: the kind, then the pieces streamed
/// in (a tensor as "f32[2, 3]", strings, integers, dims lists). Built in
/// this thread's one buffer, so that the check every call makes allocates
/// nothing once warm (a 64x64x64 product takes ~5 us; building the key from
/// temporaries took a tenth of that). One key at a time per thread: it is
/// read by primitiveFor (which copies it into a new primitive) before the
/// next is made.
class Key {
public:
  explicit Key(const char *kind);
  Key &operator<<(const Tensor &t);
  Key &operator<<(const char *s);
  Key &operator<<(const std::string &s) { return *this << s.c_str(); }
  Key &operator<<(int64_t v);
  Key &operator<<(const dims &v);
  const std::string &str() const { return buf_; }
  operator const std::string &() const { return buf_; }

private:
  std::string &buf_;
};

/// Runs the reorder of `src` (described by srcMd) into p.weights (the
/// layout of the primitive's argument `arg`) once; returns p.weights' data.
const void *reorderedWeights(Primitive &p, int arg, const dn::memory::desc &srcMd,
                             const void *src);

/// oneDNN's view of a convolution (or, `transposed`, a deconvolution) of
/// x [N, C, D...] into y [N, M, O...] with `group` groups, at most 3
/// spatial dimensions: sizes, the filter's descriptor over the ONNX layout
/// ([M, C/g, K...]; transposed [C, M/g, K...]), strides, dilations (oneDNN
/// counts from 0) and paddings (the right ones from the output size, so
/// ONNX's floor rule fits).
struct ConvShape {
  dims src, dst, weights, bias, strides, dilation, padL, padR;
  dims weightsStrides;
  /// False: oneDNN cannot express it (rank, a negative right padding).
  bool ok = false;
};
ConvShape convShape(const Tensor &x, const Tensor &y, const ConvGeom &g, int64_t group,
                    bool transposed);

/// conv_weight_grad on oneDNN's convolution backward-weights primitive:
/// dw of the forward conv x * dw -> dy (defined in KernelsLinalg.cpp next
/// to the forward paths). False: the own path runs.
bool convWeightGrad(OpCall &c, const Tensor &x, const Tensor &dy, Tensor &dw,
                    const ConvGeom &g, int64_t group);

} // namespace hpcrt::onednn

#endif // HPCRT_CPU_DNNL_H
