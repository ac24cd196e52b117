//===- KernelCall.h - one kernel call, decoded -----------------*- C++ -*-===//
//
// The core's side of a kernel call: the compiled program calls hpcrt_<op>
// (hpcrt.h), the entry point (KernelCall.cpp, one per line of Ops.def)
// resolves the call's tensor ids against the context, and the kernel that
// the context's backend lists for the op runs on an OpCall: the tensors and
// a reader of the attributes in the ABI's order. Errors become the context's
// first error (the compiled code has no unwind tables), and the trace and
// the high-water mark are kept here, the same for every backend.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CORE_KERNELCALL_H
#define HPCRT_CORE_KERNELCALL_H

#include "Backend.h"
#include "Context.h"

#include <string>
#include <vector>

namespace hpcrt {

/// One kernel invocation: its tensors and an attribute reader that follows
/// the ABI's alphabetical order.
struct OpCall {
  Context &ctx;
  int op;
  const char *mnemonic;
  std::vector<Tensor *> results, operands;
  const int64_t *ia;
  const double *fa;
  const char *const *sa;
  size_t ii = 0, fi = 0, si = 0;
  /// The setup run (Context::beginSetup): a stateful kernel makes its state
  /// and returns without computing.
  bool setup = false;

  Tensor &out(size_t k = 0) const { return *results.at(k); }
  Tensor &in(size_t k) const;
  Tensor *opt(size_t k) const { return operands.at(k); }
  /// Fails unless there are exactly these many results and operands.
  void expect(size_t nResults, size_t nOperands) const;

  int64_t i() { return ia[ii++]; }
  bool b() { return ia[ii++] != 0; }
  std::vector<int64_t> ivec() {
    int64_t n = i();
    if (n < 0 || n > (1 << 20))
      fail("bad attribute array length " + std::to_string(n));
    std::vector<int64_t> v(ia + ii, ia + ii + n);
    ii += static_cast<size_t>(n);
    return v;
  }
  double f() { return fa[fi++]; }
  std::vector<double> fvec() {
    int64_t n = i();
    if (n < 0 || n > (1 << 20))
      fail("bad attribute array length " + std::to_string(n));
    std::vector<double> v(fa + fi, fa + fi + n);
    fi += static_cast<size_t>(n);
    return v;
  }
  std::string s() {
    if (!sa)
      fail("the call has no string attributes");
    const char *p = sa[si++];
    return p ? p : "";
  }
  /// An optional F64Attr: presence flag in iattrs, value in fattrs.
  bool optF(double &v) {
    if (!b())
      return false;
    v = f();
    return true;
  }
};

/// Runs one kernel call of op `id` on the context's backend. In the setup
/// run only stateful kernels run.
void runKernel(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, const int64_t *ia,
               const double *fa, const char *const *sa, OpId id);

} // namespace hpcrt

// The entry points the compiled program calls (hpcrt.h, "Kernel entry
// points"), one per line of Ops.def; declared here for the tests and the
// kernels that call one another through the ABI.
extern "C" {
#define HPCRT_OP(Id, cname, mnemonic)                                          \
  void cname(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, const int64_t *ia, \
             const double *fa, const char *const *sa);
#include "Ops.def"
}

#endif // HPCRT_CORE_KERNELCALL_H
