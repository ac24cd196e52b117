//===- DistCommReport.cpp - bytes per rank of a per-rank program ----------===//
//
// One line with the traffic of every dist collective in the module, counted
// by bytesSentByRankZero (the accounting dist-partition and the runtime
// use), so programs partitioned by different tools compare on equal terms.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"
#include "hpc/Passes.h"

#include "llvm/ADT/MapVector.h"

namespace hpc {
#define GEN_PASS_DEF_DISTCOMMREPORT
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

struct DistCommReport : hpc::impl::DistCommReportBase<DistCommReport> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t bytes = 0;
    llvm::MapVector<StringRef, int64_t> counts;
    module.walk([&](Operation *op) {
      if (!isa<hpc::dist::DistDialect>(op->getDialect()) ||
          isa<hpc::dist::AnnotateOp, hpc::dist::ReshardOp, hpc::dist::AllSliceOp,
              hpc::dist::WaitOp>(op))
        return;
      bytes += hpc::dist::bytesSentByRankZero(op);
      ++counts[op->getName().stripDialect()];
    });
    int64_t total = 0;
    for (auto &[name, n] : counts)
      total += n;
    llvm::errs() << "dist-comm-report: each rank sends " << bytes << " bytes per step in "
                 << total << " collectives";
    if (!counts.empty()) {
      llvm::errs() << " (";
      llvm::interleaveComma(counts, llvm::errs(),
                            [](auto &entry) { llvm::errs() << entry.first << " x" << entry.second; });
      llvm::errs() << ")";
    }
    llvm::errs() << "\n";
    module->setAttr("dist.bytes_per_rank",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64), bytes));
  }
};

} // namespace
