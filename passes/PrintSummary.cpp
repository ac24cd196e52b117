//===- PrintSummary.cpp - one-screen model summary ------------------------===//
//
// Prints what a user wants to know first about an imported model: which ops
// it has, how many parameters, and how much compute one forward pass takes.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/OpCost.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <map>

namespace hpc {
#define GEN_PASS_DEF_HPCPRINTSUMMARY
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

/// 1234567 -> "1.23M".
std::string human(double v) {
  const char *units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(u ? "%.2f" : "%.0f", v) << units[u];
  return s;
}

struct PrintSummary : hpc::impl::HPCPrintSummaryBase<PrintSummary> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      summarize(func);
    markAllAnalysesPreserved();
  }

  void summarize(func::FuncOp func) {
    std::map<std::string, int64_t> counts;
    int64_t params = 0, paramBytes = 0, buffers = 0, bufferBytes = 0;
    int64_t flops = 0, total = 0;
    func.walk([&](Operation *op) {
      if (!isa<hpc::HPCDialect>(op->getDialect()))
        return;
      ++counts[op->getName().getStringRef().str()];
      ++total;
      flops += hpc::estimateFlops(op);
      if (auto w = dyn_cast<hpc::WeightOp>(op)) {
        // Floating-point weights are parameters; others (masks, position
        // tables) are buffers.
        auto t = cast<RankedTensorType>(w.getType());
        int64_t bytes = t.getNumElements() *
                        std::max<int64_t>(t.getElementTypeBitWidth() / 8, 1);
        bool isParam = isa<FloatType>(t.getElementType());
        (isParam ? params : buffers) += t.getNumElements();
        (isParam ? paramBytes : bufferBytes) += bytes;
      }
    });
    // Tokens: the elements of the first integer input (token ids); else the
    // leading dimension of the first input (samples).
    int64_t units = 0;
    StringRef unitName = "sample";
    for (Type t : func.getArgumentTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (rt && isa<IntegerType>(rt.getElementType()) && rt.hasStaticShape()) {
        units = rt.getNumElements();
        unitName = "token";
        break;
      }
    }
    if (!units && func.getNumArguments())
      if (auto rt = dyn_cast<RankedTensorType>(func.getArgumentTypes()[0]))
        units = rt.getRank() ? rt.getDimSize(0) : 1;

    auto &os = llvm::errs();
    os << "=== hpc model summary: @" << func.getSymName() << " ===\n";
    os << "inputs:";
    for (auto [i, t] : llvm::enumerate(func.getArgumentTypes())) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "hpc.name");
      os << " " << (name ? name.getValue() : StringRef("?")) << ":" << t;
    }
    os << "\noutputs:";
    for (auto [i, t] : llvm::enumerate(func.getResultTypes())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
      os << " " << (name ? name.getValue() : StringRef("?")) << ":" << t;
    }
    os << "\nops: " << total << " in " << counts.size() << " kinds\n";
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (auto &[name, n] : counts)
      sorted.push_back({-n, name});
    llvm::sort(sorted);
    int col = 0;
    for (auto &[n, name] : sorted) {
      os << llvm::format("  %-22s %6lld", name.c_str(), (long long)-n);
      if (++col % 3 == 0)
        os << "\n";
    }
    if (col % 3)
      os << "\n";
    os << "parameters: " << params << " (" << human(double(params)) << ", "
       << human(double(paramBytes)) << "B)";
    if (buffers)
      os << ", buffers: " << buffers << " (" << human(double(bufferBytes)) << "B)";
    os << "\n";
    os << "forward FLOPs: " << flops << " (" << human(double(flops)) << ")";
    if (units > 0)
      os << ", per " << unitName << ": " << human(double(flops) / double(units))
         << " (" << units << " " << unitName << "s)";
    os << "\n";
  }
};

} // namespace
