//===- KernelCall.cpp - the ABI's kernel entry points ----------------------===//
//
// One extern "C" hpcrt_<op> per line of Ops.def. runKernel decodes the id
// list, calls the kernel the context's backend lists for the op, turns any
// error into the context's first error (so the compiled code, which has no
// unwind tables, never sees an exception), and keeps the trace and the
// high-water mark.
//
//===----------------------------------------------------------------------===//

#include "KernelCall.h"

#include <cstring>
#include <new>

namespace hpcrt {

namespace {

struct OpInfoEntry {
  const char *mnemonic;
  bool communicating;
};

constexpr OpInfoEntry kOps[] = {
#define HPCRT_OP(Id, cname, mnemonic) {mnemonic, false},
#define HPCRT_DIST_OP(Id, cname, mnemonic) {mnemonic, true},
#include "Ops.def"
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps, "one entry per op");

} // namespace

const char *opMnemonic(OpId id) { return kOps[static_cast<int>(id)].mnemonic; }
bool isCommunicating(OpId id) { return kOps[static_cast<int>(id)].communicating; }

Tensor &OpCall::in(size_t k) const {
  Tensor *t = operands.at(k);
  if (!t)
    fail("operand " + std::to_string(k) + " is absent (-1) but required");
  return *t;
}

void OpCall::expect(size_t nResults, size_t nOperands) const {
  if (results.size() != nResults || operands.size() != nOperands)
    fail("expected " + std::to_string(nResults) + " result(s) and " +
         std::to_string(nOperands) + " operand(s), got " +
         std::to_string(results.size()) + " and " + std::to_string(operands.size()));
}

void runKernel(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, const int64_t *ia,
               const double *fa, const char *const *sa, OpId id) {
  if (!ctx)
    return;
  const KernelEntry &kernel = ctx->backend().kernel(id);
  if (ctx->failed() && !isCommunicating(id))
    return;
  bool setup = ctx->settingUp();
  if (setup && !kernel.stateful)
    return;
  bool tracing = ctx->tracing();
  // The profile times the communicating ops only; a started collective's
  // call just queues it (its wait is what the step waits for).
  bool profiled = ctx->profiling() && !setup && isCommunicating(id) &&
                  !strstr(opMnemonic(id), "_start");
  double t0 = tracing || profiled ? ctx->nowUs() : 0.0;
  const auto &ops = ctx->ops();
  bool known = op >= 0 && static_cast<size_t>(op) < ops.size();
  const char *mnemonic = opMnemonic(id);
  std::string name = strchr(mnemonic, '.') ? std::string(mnemonic)
                                           : std::string("hpc.") + mnemonic;
  try {
    if (!ctx->prepared())
      fail("kernel called before the context was prepared");
    if (!ops.empty() && !known)
      fail("op index " + std::to_string(op) + " is not in the manifest's " +
           std::to_string(ops.size()) + " ops");
    if (known && ops[op].name != name)
      fail("the manifest lists op " + std::to_string(op) + " as " + ops[op].name);
    if (!kernel.fn)
      fail(std::string("the ") + ctx->backend().name() + " backend has no kernel for " +
           name);
    if (!ids)
      fail("no tensor ids");
    OpCall c{*ctx, op, mnemonic, {}, {}, ia, fa, sa};
    c.setup = setup;
    int32_t nres = ids[0];
    if (nres < 0 || nres > 65536)
      fail("bad result count " + std::to_string(nres));
    c.results.reserve(static_cast<size_t>(nres));
    for (int32_t k = 0; k < nres; ++k)
      c.results.push_back(&ctx->tensor(ids[1 + k]));
    int32_t nops = ids[1 + nres];
    if (nops < 0 || nops > 65536)
      fail("bad operand count " + std::to_string(nops));
    c.operands.reserve(static_cast<size_t>(nops));
    for (int32_t k = 0; k < nops; ++k) {
      int32_t tid = ids[2 + nres + k];
      c.operands.push_back(tid < 0 ? nullptr : &ctx->tensor(tid));
    }
    // Kernels write the arena, or state a collective fills directly (a
    // ZeRO parameter gathered into place); never weights or inputs.
    for (Tensor *r : c.results)
      if (r->region != Region::Arena && r->region != Region::State)
        fail("result tensor is not in the arena or the state");
    if (!kernel.readsBlocked)
      for (const std::vector<Tensor *> *list : {&c.results, &c.operands})
        for (Tensor *t : *list)
          if (t && t->blocked)
            fail("this kernel does not read or write the blocked layout (a tensor " +
                 shapeString(t->shape) + " is blocked)");
    kernel.fn(c);
    if (!setup)
      for (Tensor *r : c.results)
        ctx->noteWrite(*r);
  } catch (const Error &e) {
    ctx->setError("op " + std::to_string(op) + " (" + name +
                  (known && !ops[op].loc.empty() ? " at '" + ops[op].loc + "'" : "") +
                  "): " + e.what());
  } catch (const std::bad_alloc &) {
    ctx->setError("op " + std::to_string(op) + " (" + name + "): out of memory");
  } catch (const std::exception &e) {
    ctx->setError("op " + std::to_string(op) + " (" + name + "): " + e.what());
  }
  if (tracing && !setup)
    ctx->addTrace(op, t0, ctx->nowUs() - t0);
  if (profiled) {
    bool bubble =
        id == OpId::send || id == OpId::recv || (id == OpId::wait && known && ops[op].recv);
    ctx->addProfile(bubble, ctx->nowUs() - t0);
  }
}

} // namespace hpcrt

// The entry points the compiled program calls (hpcrt.h).
#define HPCRT_OP(Id, cname, mnemonic)                                          \
  extern "C" void cname(hpcrt_ctx *ctx, int32_t op, const int32_t *ids,        \
                        const int64_t *ia, const double *fa,                   \
                        const char *const *sa) {                               \
    ::hpcrt::runKernel(ctx, op, ids, ia, fa, sa, ::hpcrt::OpId::Id);           \
  }
#include "Ops.def"
