//===- PrintShardingRules.cpp - print each op's sharding rule -------------===//

#include "hpc/Passes.h"

namespace hpc {
#define GEN_PASS_DEF_HPCPRINTSHARDINGRULES
#include "passes/Passes.h.inc"
} // namespace hpc

namespace {
struct PrintShardingRules
    : hpc::impl::HPCPrintShardingRulesBase<PrintShardingRules> {
  void runOnOperation() override {
    getOperation().walk([](hpc::ShardingRuleInterface op) {
      llvm::errs() << op->getName() << ": " << op.getShardingRule().str() << "\n";
    });
    markAllAnalysesPreserved();
  }
};
} // namespace
