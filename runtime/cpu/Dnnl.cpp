//===- Dnnl.cpp - oneDNN engine, descriptors and cached primitives ---------===//

#include "Dnnl.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>

namespace hpcrt::onednn {

dn::engine &engine() {
  static dn::engine e(dn::engine::kind::cpu, 0);
  return e;
}

dn::stream &stream() {
  static dn::stream s(engine());
  return s;
}

ThreadScope::ThreadScope(int threads) : saved_(omp_get_max_threads()) {
  if (threads != saved_)
    omp_set_num_threads(threads);
}

ThreadScope::~ThreadScope() {
  if (omp_get_max_threads() != saved_)
    omp_set_num_threads(saved_);
}

namespace {
std::atomic<bool> primitivesOn{true};
} // namespace

void setPrimitivesEnabled(bool on) { primitivesOn.store(on, std::memory_order_relaxed); }
bool primitivesEnabled() { return primitivesOn.load(std::memory_order_relaxed); }

int threadsFor(double flops) {
  // ~100 us at the ~50 GFLOP/s of one core.
  constexpr double kSerialFlops = 5e6;
  return flops < kSerialFlops || inParallel() ? 1 : maxThreads();
}

double productWork(double flops, double bytes) {
  constexpr double kWorkPerByte = 5;
  return std::max(flops, kWorkPerByte * bytes);
}

dt dataType(int dtype) {
  switch (dtype) {
  case HPCRT_F32: return dt::f32;
  case HPCRT_BF16: return dt::bf16;
  case HPCRT_F16: return dt::f16;
  default: return dt::undef;
  }
}

dn::memory::desc plain(const dims &shape, dt type) {
  dims strides(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = acc;
    acc *= std::max<int64_t>(shape[d], 1);
  }
  return dn::memory::desc(shape, type, strides);
}

dn::memory::desc strided(const dims &shape, dt type, const dims &strides) {
  return dn::memory::desc(shape, type, strides);
}

bool hasAvx512Core() {
  int isa = static_cast<int>(dn::get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

bool blockedIsChannelsLast(const Context &ctx) {
  return hasAvx512Core() && ctx.hasBlockedBf16();
}

dn::memory::desc activationDesc(const Context &ctx, bool blocked, const dims &shape, dt type) {
  using tag = dn::memory::format_tag;
  if (!blocked)
    return plain(shape, type);
  if (!hasAvx512Core())
    return dn::memory::desc(shape, type, tag::nChw8c);
  return dn::memory::desc(shape, type, blockedIsChannelsLast(ctx) ? tag::nhwc : tag::nChw16c);
}

int activationIndex(const std::string &a) {
  static const char *const known[] = {"none", "relu", "gelu", "gelu_tanh",
                                      "sigmoid", "tanh", "silu"};
  for (int k = 0; k < static_cast<int>(std::size(known)); ++k)
    if (a == known[k])
      return k;
  return -1;
}

bool knownActivation(const std::string &a) { return activationIndex(a) >= 0; }

void appendActivation(dn::post_ops &ops, const std::string &a) {
  using alg = dn::algorithm;
  if (a == "none")
    return;
  if (a == "relu")
    ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
  else if (a == "gelu")
    ops.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0.0f, 0.0f);
  else if (a == "gelu_tanh")
    ops.append_eltwise(1.0f, alg::eltwise_gelu_tanh, 0.0f, 0.0f);
  else if (a == "sigmoid")
    ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
  else if (a == "tanh")
    ops.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f);
  else if (a == "silu")
    ops.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f);
  else
    fail("unknown activation '" + a + "'");
}

std::string isaName() {
  using isa = dn::cpu_isa;
  switch (dn::get_effective_cpu_isa()) {
  case isa::sse41: return "sse41";
  case isa::avx: return "avx";
  case isa::avx2: return "avx2";
  case isa::avx2_vnni: return "avx2_vnni";
  case isa::avx512_core: return "avx512_core";
  case isa::avx512_core_vnni: return "avx512_core_vnni";
  case isa::avx512_core_bf16: return "avx512_core_bf16";
  case isa::avx512_core_amx: return "avx512_core_amx";
  default: return "other";
  }
}

void noteWidened(OpCall &c, int dtype) {
  if (dtype != HPCRT_BF16)
    return;
  c.ctx.setKernelNote("oneDNN has no bf16 kernels for this CPU (its instruction set here: " +
                      isaName() +
                      "; bf16 needs avx512_core or newer, fastest with AMX): the bf16 "
                      "products run widened to f32 and rounded to bf16 once, the same "
                      "numerics at f32 speed or slower");
}

Made productMade(const dn::primitive_desc_base &pd, dn::primitive prim, bool bias,
                 const dn::memory::desc *postOpSrc) {
  if (!pd)
    return {};
  Made m{pd, std::move(prim), {}};
  m.args = {{DNNL_ARG_SRC, pd.src_desc()},
            {DNNL_ARG_WEIGHTS, pd.weights_desc()},
            {DNNL_ARG_DST, pd.dst_desc()}};
  if (bias)
    m.args.push_back({DNNL_ARG_BIAS, pd.query_md(dn::query::weights_md, 1)});
  if (postOpSrc)
    m.args.push_back({kPostOpSrcArg, *postOpSrc});
  return m;
}

dn::primitive_attr baseAttr() {
  dn::primitive_attr attr;
  attr.set_scratchpad_mode(dn::scratchpad_mode::user);
  return attr;
}

namespace {
std::string &keyBuffer() {
  thread_local std::string buffer;
  return buffer;
}
} // namespace

Key::Key(const char *kind) : buf_(keyBuffer()) { buf_.assign(kind); }

Key &Key::operator<<(const Tensor &t) {
  buf_ += ' ';
  buf_ += dtypeName(t.dtype);
  appendShape(buf_, t.shape);
  return *this;
}

Key &Key::operator<<(const char *s) {
  buf_ += ' ';
  buf_ += s;
  return *this;
}

Key &Key::operator<<(int64_t v) {
  char text[24];
  auto r = std::to_chars(text, text + sizeof(text), v);
  buf_ += ' ';
  buf_.append(text, r.ptr);
  return *this;
}

Key &Key::operator<<(const dims &v) {
  buf_ += ' ';
  appendShape(buf_, v);
  return *this;
}

void Primitive::bindArgs() {
  execArgs.clear();
  rebind.clear();
  for (auto &[arg, mem] : args) {
    execArgs.push_back({arg, mem.get()});
    // oneDNN zeroes a blocked layout's padding when a handle is set: a
    // padded argument is set every call (its buffer may have been written
    // since).
    dn::memory::desc md = mem.get_desc();
    bool padded = false;
    for (int d = 0; d < md.data.ndims; ++d)
      padded |= md.data.padded_dims[d] != md.data.dims[d];
    rebind.push_back(padded);
  }
  bound.assign(execArgs.size(), nullptr);
}

void Primitive::execute(Context &ctx, std::initializer_list<std::pair<int, const void *>> data) {
  auto bind = [&](int arg, const void *ptr) {
    size_t k = 0;
    while (k < execArgs.size() && execArgs[k].arg != arg)
      ++k;
    if (k == execArgs.size())
      fail("oneDNN: the primitive has no argument " + std::to_string(arg));
    if (bound[k] != ptr || rebind[k]) {
      dn::error::wrap_c_api(
          dnnl_memory_set_data_handle_v2(execArgs[k].memory, const_cast<void *>(ptr), nullptr),
          "could not set a memory object's data handle");
      bound[k] = ptr;
    }
  };
  for (const auto &[arg, ptr] : data)
    bind(arg, ptr);
  if (data.size() + (scratchpadBytes ? 1 : 0) != execArgs.size())
    fail("oneDNN: " + std::to_string(execArgs.size()) + " arguments expected, " +
         std::to_string(data.size()) + " given");
  if (scratchpadBytes)
    bind(DNNL_ARG_SCRATCHPAD, ctx.scratchpad(scratchpadBytes));
  ThreadScope scope(threads);
  dn::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream().get(),
                                               static_cast<int>(execArgs.size()),
                                               execArgs.data()),
                        "could not execute a primitive");
  stream().wait();
}

void Primitive::executeProduct(Context &ctx, const void *src, const void *weights,
                               const void *bias, void *dst, const void *postOpSrc) {
  std::pair<int, const void *> src1{kPostOpSrcArg, postOpSrc};
  if (bias && postOpSrc)
    execute(ctx, {{DNNL_ARG_SRC, src},
                  {DNNL_ARG_WEIGHTS, weights},
                  {DNNL_ARG_BIAS, bias},
                  {DNNL_ARG_DST, dst},
                  src1});
  else if (bias)
    execute(ctx, {{DNNL_ARG_SRC, src},
                  {DNNL_ARG_WEIGHTS, weights},
                  {DNNL_ARG_BIAS, bias},
                  {DNNL_ARG_DST, dst}});
  else if (postOpSrc)
    execute(ctx, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, src1});
  else
    execute(ctx, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
}

const void *reorderedWeights(Primitive &p, int arg, const dn::memory::desc &srcMd,
                             const void *src) {
  if (p.weightsReady)
    return p.weights.data();
  dn::memory::desc want = p.args.at(arg).get_desc();
  p.weights = Buffer(want.get_size());
  dn::memory from(srcMd, engine(), const_cast<void *>(src));
  dn::memory to(want, engine(), p.weights.data());
  ThreadScope scope(p.threads);
  dn::reorder(from, to).execute(stream(), from, to);
  stream().wait();
  p.heldBytes = p.weights.size();
  p.weightsReady = true;
  return p.weights.data();
}

ConvShape convShape(const Tensor &x, const Tensor &y, const ConvGeom &g, int64_t group,
                    bool transposed) {
  ConvShape s;
  if (g.r < 1 || g.r > 3)
    return s;
  int64_t N = x.shape[0], C = x.shape[1], M = y.shape[1];
  s.src = {N, C};
  s.dst = {N, M};
  for (int d = 0; d < g.r; ++d) {
    s.src.push_back(g.in[d]);
    s.dst.push_back(g.out[d]);
    int64_t span = g.dil[d] * (g.k[d] - 1) + 1;
    s.strides.push_back(g.stride[d]);
    s.dilation.push_back(g.dil[d] - 1);
    if (g.padB[d] < 0) // conv_transpose's negative pads: the own path
      return s;
    s.padL.push_back(g.padB[d]);
    // The right padding that gives exactly the output size. For a
    // convolution any value up to stride - 1 above it gives the same size
    // (ONNX and oneDNN both round down), so a negative one (the last rows
    // unused, a strided 1x1) becomes 0.
    int64_t padR = transposed ? (g.in[d] - 1) * g.stride[d] + span - g.padB[d] - g.out[d]
                              : std::max<int64_t>(
                                    0, (g.out[d] - 1) * g.stride[d] + span - g.in[d] - g.padB[d]);
    if (padR < 0)
      return s;
    s.padR.push_back(padR);
  }
  s.bias = {M};
  // Filter dims as oneDNN names them ([g,] OC, IC, K...) with the strides of
  // the ONNX layout: conv [g, OC/g, IC/g, K...], conv_transpose [g, IC/g, OC/g, K...].
  int64_t Og = M / group, Ig = C / group, K = g.kSize;
  int64_t oStride = transposed ? K : Ig * K, iStride = transposed ? Og * K : K;
  if (group > 1) {
    s.weights = {group, Og, Ig};
    s.weightsStrides = {Og * Ig * K, oStride, iStride};
  } else {
    s.weights = {Og, Ig};
    s.weightsStrides = {oStride, iStride};
  }
  int64_t acc = K;
  for (int d = 0; d < g.r; ++d) {
    s.weights.push_back(g.k[d]);
    acc /= g.k[d];
    s.weightsStrides.push_back(acc);
  }
  s.ok = true;
  return s;
}

} // namespace hpcrt::onednn
