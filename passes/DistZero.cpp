//===- DistZero.cpp - ZeRO stages as sharding annotations ------------------===//
//
// ZeRO (Rajbhandari et al.) keeps each data-parallel rank's share of the
// training state instead of all of it. This pass says, on the global train
// step, which tensors are held in dp pieces; dist-propagate and
// dist-partition then derive the collectives like any other resharding:
//
//   stage 1: optimizer state split over dp (dim 0). The update runs on this
//            rank's rows of the parameter (a copy, `dist.updates_shard`) and
//            of the gradient; the new rows are all-gathered back into the
//            parameter by an hpc.assign at the end of the step. The gradient
//            is reduce-scattered where the backward pass finishes it (the
//            step's micro-batches have accumulated it by then): a partial
//            sum becoming dp rows is one reduce_scatter, and the global norm
//            adds the shards' partial sums of squares and reduces one
//            scalar. A reduce-scatter and the gather are one all-reduce: dp's
//            traffic, as in DeepSpeed's stage 1 and Megatron-LM's distributed
//            optimizer (an all-reduce then a slice, PyTorch's
//            ZeroRedundancyOptimizer, sends 1.5x).
//   stage 2: also the gradient. The compiled step reduces once, after its
//            micro-batches accumulated the gradient, so the full gradient
//            dies at the reduction as under stage 1: the two stages make the
//            same collectives, in buckets half the size under stage 2
//            (dist-bucket). DeepSpeed's stage 2 reduce-scatters every
//            micro-batch's gradient instead, to keep only rows between them.
//
//   stage 3: also the parameters (and their initial values): every use in
//            the forward and backward passes gathers the parameter whole
//            right before it (`dist.regather`: a gather per use, prefetched
//            by dist-async-collectives, freed after), and the update writes
//            this rank's rows of the state directly.
//
//===----------------------------------------------------------------------===//

#include "DistSharding.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hpc {
#define GEN_PASS_DEF_DISTZERO
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

struct DistZero : hpc::impl::DistZeroBase<DistZero> {
  using Base::Base;

  void runOnOperation() override {
    if (stage == 0)
      return;
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      module.emitError(message);
      signalPassFailure();
    };
    if (stage < 0 || stage > 3)
      return fail("--zero: expected a ZeRO stage 1, 2 or 3, got " + Twine(stage));
    MeshAttr meshAttr = module->getAttrOfType<MeshAttr>("dist.mesh");
    if (!meshAttr && !mesh.empty()) {
      std::string error;
      auto parsed = parseMesh(&getContext(), mesh, error);
      if (failed(parsed))
        return fail(error);
      meshAttr = *parsed;
      // The annotations below name its axes (dist-propagate sets the same).
      module->setAttr("dist.mesh", meshAttr);
    }
    int64_t dpIndex = meshAttr ? meshAttr.axisIndex("dp") : -1;
    if (dpIndex < 0 || meshAttr.getSizes()[dpIndex] < 2)
      return fail("--zero shards the training state over data parallelism: the mesh "
                  "needs a dp axis of 2 or more ranks (--mesh=dp=N)");
    int64_t dp = meshAttr.getSizes()[dpIndex];
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!module->hasAttr("hpc.train") || !func || func.getBody().empty())
      return fail("--zero applies to a train step (--train)");

    SmallVector<Operation *> updates;
    func.walk([&](Operation *op) {
      if (isa<hpc::SGDUpdateOp, hpc::AdamWUpdateOp>(op))
        updates.push_back(op);
    });
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    MLIRContext *ctx = &getContext();
    for (Operation *update : updates) {
      Value param = update->getOperand(0);
      auto var = param.getDefiningOp<hpc::VariableOp>();
      auto type = cast<RankedTensorType>(param.getType());
      if (!var || type.getRank() == 0 || type.getDimSize(0) % dp != 0) {
        if (stage == 3) {
          std::string shape;
          llvm::raw_string_ostream(shape) << type;
          return fail("--zero=3 keeps every parameter in dp rows, but '" +
                      (var ? var.getName() : StringRef("?")) + "' (" + shape +
                      ") has no first dimension that dp=" + Twine(dp) + " divides");
        }
        ++replicated;
        continue;
      }
      Sharding rows = Sharding::replicated(type.getRank());
      rows.dims[0] = {"dp"};
      ShardingAttr rowsAttr = rows.toAttr(ctx);
      ShardingAttr whole = Sharding::replicated(type.getRank()).toAttr(ctx);

      // Optimizer state: this rank's rows only (zero-initialized variables
      // that only this update reads).
      for (unsigned i : hpc::inPlaceOperands(update)) {
        if (i == 0 || i >= update->getNumOperands())
          continue;
        auto state = update->getOperand(i).getDefiningOp<hpc::VariableOp>();
        if (!state || state.getValue() || !update->getOperand(i).hasOneUse())
          return fail("--zero: the optimizer state of '" + var.getName() +
                      "' is not a fresh variable of its update (a compiler bug)");
        state->setAttr("dist.sharding", rowsAttr);
      }

      // Where the backward pass finishes the gradient, it is reduced into
      // rows, which the update reads (the clipping multiply keeps them).
      annotateUpdateGradient(update, rowsAttr, rowsAttr);
      OpBuilder b(update);
      Location loc = update->getLoc();
      update->setAttr("dist.updates_shard", UnitAttr::get(ctx));
      if (stage == 3) {
        // The parameter itself in rows (its initial value too): each use
        // gathers it whole right before it, and the update writes the rows.
        var->setAttr("dist.sharding", rowsAttr);
        SmallVector<OpOperand *> uses;
        for (OpOperand &use : param.getUses())
          if (use.getOwner() != update)
            uses.push_back(&use);
        for (OpOperand *use : uses) {
          OpBuilder ub(use->getOwner());
          auto gathered = AnnotateOp::create(ub, use->getOwner()->getLoc(), type, param, whole);
          gathered->setAttr("dist.regather", UnitAttr::get(ctx));
          use->set(gathered.getResult());
        }
        ++sharded;
        continue;
      }
      // The parameter's rows, updated in place, then gathered back into it
      // once every update has run (the gathers overlap the later updates).
      auto mine = AnnotateOp::create(b, loc, type, param, rowsAttr);
      update->setOperand(0, mine);
      b.setInsertionPointAfter(update);
      auto gathered = AnnotateOp::create(b, loc, type, mine.getResult(), whole);
      b.setInsertionPoint(ret);
      hpc::AssignOp::create(b, loc, param, gathered.getResult());
      ++sharded;
    }
    module->setAttr("dist.zero", IntegerAttr::get(IntegerType::get(ctx, 64), stage));
  }
};

} // namespace
