//===- DistSearch.cpp - the dist-search pass ------------------------------===//
//
// Reads func @main, extracts its layers, runs the strategy search (or
// evaluates a given mesh) on the cluster, prints the plan, writes the JSON
// report and attaches the plan to the IR for dist-partition:
//
//   func @main attributes {hpc.plan = {cluster = "...", devices = N,
//       micro_batch = B, num_micro_batches = M, step_time_s, compute_s,
//       exposed_comm_s, bubble_s (the prediction), stages = [{first_layer,
//       end_layer, first_device, num_devices, dp, tp, sp, ep, zero,
//       recompute, memory_bytes}, ...], ...}}
//   every op of @main: {hpc.stage = S : i64, hpc.layer = L : i64}
//
// docs/search.md is the contract for these attributes.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/ModelExtract.h"
#include "hpc/Passes.h"
#include "hpc/Search/Search.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

namespace hpc {
#define GEN_PASS_DEF_DISTSEARCH
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::cost;
using namespace hpc::search;

namespace {

/// "40GiB", "38e9", "38 GB" -> bytes.
bool parseBytes(llvm::StringRef text, double &bytes) {
  text = text.trim();
  struct Unit {
    const char *suffix;
    double scale;
  };
  const Unit units[] = {{"TiB", 1099511627776.0}, {"GiB", 1073741824.0},
                        {"MiB", 1048576.0},      {"KiB", 1024.0},
                        {"TB", 1e12},            {"GB", 1e9},
                        {"MB", 1e6},             {"KB", 1e3},
                        {"B", 1}};
  double scale = 1;
  for (const Unit &u : units)
    if (text.ends_with(u.suffix)) {
      text = text.drop_back(std::strlen(u.suffix)).trim();
      scale = u.scale;
      break;
    }
  double v;
  if (text.empty() || text.getAsDouble(v) || !(v > 0) || !std::isfinite(v))
    return false;
  bytes = v * scale;
  return true;
}

struct DistSearchPass : hpc::impl::DistSearchBase<DistSearchPass> {
  using DistSearchBase::DistSearchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Plain copies of the options (string concatenation below).
    std::string cluster = this->cluster, mesh = this->mesh,
                report = this->report, memoryLimit = this->memoryLimit,
                dtype = this->dtype, optimizer = this->optimizer,
                zeroStages = this->zeroStages, recompute = this->recompute,
                method = this->method, layout = this->layout;
    // Reported on the location, not the op: one line, without the module
    // printed as a note.
    auto fail = [&](const llvm::Twine &message) {
      mlir::emitError(module.getLoc()) << "dist-search: " << message;
      signalPassFailure();
    };

    func::FuncOp func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
      if (funcs.size() == 1)
        func = funcs.front();
    }
    if (!func)
      return fail("no func.func @main to plan");

    ClusterSpec clusterSpec;
    std::string error;
    if (!parseClusterSpec(cluster, clusterSpec, error))
      return fail(error);
    if (!(computeScale > 0) || !(networkScale > 0) || !(latencyScale > 0) ||
        !std::isfinite(computeScale) || !std::isfinite(networkScale) ||
        !std::isfinite(latencyScale))
      return fail("compute-scale, network-scale and latency-scale must be positive");
    scaleClusterSpec(clusterSpec, computeScale, networkScale, latencyScale);
    if (overlap > 1 || !std::isfinite(overlap))
      return fail("overlap must be a fraction <= 1 (< 0: the cluster's)");
    if (overlap >= 0)
      clusterSpec.efficiency.overlap = overlap;

    ExtractedModel extracted;
    if (!extractModel(func, extracted, error))
      return fail(error);
    const Model &model = extracted.model;

    CostContext ctx;
    ctx.model = &model;
    ctx.cluster = &clusterSpec;
    TrainOptions &o = ctx.options;
    o.globalBatch = globalBatch > 0 ? int64_t(globalBatch) : extracted.irBatch;
    if (globalBatch < 0)
      return fail("global-batch must be positive");
    if (dtype.empty()) {
      const double *peak = clusterSpec.device.peakFlops;
      o.dtype = peak[int(DType::BF16)] > 0   ? DType::BF16
                : peak[int(DType::FP16)] > 0 ? DType::FP16
                                             : DType::FP32;
    } else if (!parseDType(dtype, o.dtype)) {
      return fail("dtype '" + dtype +
                  "' is not one of bf16, fp16, fp32, tf32, fp8");
    }
    if (!(clusterSpec.device.peakFlops[int(o.dtype)] > 0))
      return fail("the " + clusterSpec.device.kind + " has no " +
                  dtypeName(o.dtype) + " peak; choose another dtype");
    if (layout != "megatron" && layout != "compiled")
      return fail("layout '" + layout + "' is not megatron or compiled");
    o.compiledLayout = layout == "compiled";
    if (optimizer == "adam")
      o.optimizer = Optimizer::Adam;
    else if (optimizer == "sgd")
      o.optimizer = Optimizer::SGD;
    else
      return fail("optimizer '" + optimizer + "' is not adam or sgd");
    if (!memoryLimit.empty() && !parseBytes(memoryLimit, o.memoryLimit))
      return fail("memory-limit '" + memoryLimit +
                  "': expected a positive size such as 40GiB or 38e9");
    if (!(ctx.memoryLimit() > 0))
      return fail("the devices have no usable memory");

    SearchSpace space;
    space.zeroStages.clear();
    llvm::SmallVector<llvm::StringRef> zs;
    llvm::StringRef(zeroStages).split(zs, ',', -1, false);
    for (llvm::StringRef z : zs) {
      int v;
      if (z.trim().getAsInteger(10, v) || v < 0 || v > 3)
        return fail("zero '" + zeroStages +
                    "': expected ZeRO stages 0-3, comma-separated");
      space.zeroStages.push_back(v);
    }
    if (space.zeroStages.empty())
      return fail("zero: at least one ZeRO stage must be allowed");
    if (recompute == "auto")
      space.recompute = {false, true};
    else if (recompute == "on")
      space.recompute = {true};
    else if (recompute == "off")
      space.recompute = {false};
    else
      return fail("recompute '" + recompute + "' is not auto, on or off");
    space.allowSequenceParallel = sequenceParallel;
    space.allowExpertParallel = expertParallel;
    space.maxTP = maxTP;
    space.maxStages = maxStages;
    space.uniformStages = uniformStages;
    hpc::PipelineSchedule chosen;
    if (!hpc::parsePipelineSchedule(schedule, chosen, error))
      return fail("schedule: " + error);
    // auto: the compiler's candidates, in its order of preference on a tie.
    space.schedules = {chosen};
    if (chosen.automatic) {
      llvm::SmallVector<hpc::PipelineSchedule> all = hpc::automaticPipelineSchedules();
      space.schedules.assign(all.begin(), all.end());
    }
    if (microBatch < 0)
      return fail("micro-batch must be positive");
    if (microBatch > 0 && o.globalBatch % microBatch)
      return fail("micro-batch " + std::to_string(microBatch) +
                  " does not divide the global batch " +
                  std::to_string(o.globalBatch));
    space.microBatch = microBatch;

    Plan plan;
    SearchStats stats;
    std::string methodName = method;
    if (!mesh.empty()) {
      MeshSpec m;
      if (!parseMesh(mesh, m, error))
        return fail(error);
      plan = evaluateMesh(ctx, space, m, error);
      if (!plan.valid)
        return fail(error);
      methodName = "mesh";
    } else {
      if (method == "dp") {
        plan = searchDP(ctx, space, &stats);
      } else if (method == "exhaustive") {
        plan = searchExhaustive(ctx, space, &stats);
      } else if (method == "brute-force") {
        bool tooLarge = false;
        plan = searchBruteForce(ctx, space, 20000000, tooLarge, &stats);
        if (tooLarge)
          return fail("method=brute-force: more than 20000000 plans; use "
                      "dp or exhaustive");
      } else if (method == "grid") {
        plan = gridSearchMegatron(ctx, space, &stats);
      } else {
        return fail("method '" + method +
                    "' is not dp, exhaustive, brute-force or grid");
      }
      if (!plan.valid) {
        double least = minimumMemory(ctx, space);
        if (std::isfinite(least) && least > ctx.memoryLimit())
          return fail("the model does not fit on " + clusterSpec.name +
                      ": every plan needs at least " + formatBytes(least) +
                      " per device, " + formatBytes(ctx.memoryLimit()) +
                      " are usable (" + clusterSpec.device.kind + ")");
        if (method == "grid")
          return fail("no Megatron-style grid plan fits");
        return fail("no plan: no configuration divides global batch " +
                    std::to_string(o.globalBatch) +
                    " and the layers' split dimensions on " +
                    clusterSpec.name);
      }
    }

    Plan baseline;
    if (compareGrid)
      baseline = gridSearchMegatron(ctx, space);

    std::string title = func.getSymName().str() + " on " + clusterSpec.name +
                        " (" + methodName + ")";
    if (table) {
      llvm::errs() << formatPlanTable(ctx, plan, title);
      if (!methodName.empty() && methodName != "mesh")
        llvm::errs() << "search: " << methodName << ", "
                     << llvm::format("%.3f", stats.seconds) << " s, "
                     << stats.stageEvaluations << " stage evaluations\n";
      if (compareGrid) {
        if (baseline.valid)
          llvm::errs() << "Megatron-style grid: step time "
                       << llvm::format("%.4f", baseline.stepTime) << " s ("
                       << baseline.stages.size() << " stages, tp "
                       << baseline.stages.front().config.tp << ", dp "
                       << baseline.stages.front().config.dp << ", micro-batch "
                       << baseline.microBatch << "), ratio grid/searched "
                       << llvm::format("%.4f", baseline.stepTime / plan.stepTime)
                       << "\n";
        else
          llvm::errs() << "Megatron-style grid: no plan fits\n";
      }
    }
    if (!report.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(report, ec);
      if (ec)
        return fail("cannot write the report '" + report + "': " +
                    ec.message());
      os << planToJSON(ctx, plan, stats, methodName,
                       compareGrid ? &baseline : nullptr);
    }
    annotate(func, extracted, ctx, clusterSpec, plan);
  }

  void annotate(func::FuncOp func, const ExtractedModel &extracted,
                const CostContext &ctx, const ClusterSpec &c,
                const Plan &plan) {
    Builder b(func.getContext());
    std::vector<int> stageOfLayer(extracted.model.layers.size(), 0);
    SmallVector<Attribute> stages;
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      const StagePlan &sp = plan.stages[s];
      for (int l = sp.firstLayer; l < sp.endLayer; ++l)
        stageOfLayer[l] = int(s);
      const StageConfig &k = sp.config;
      stages.push_back(b.getDictionaryAttr({
          b.getNamedAttr("stage", b.getI64IntegerAttr(int64_t(s))),
          b.getNamedAttr("first_layer", b.getI64IntegerAttr(sp.firstLayer)),
          b.getNamedAttr("end_layer", b.getI64IntegerAttr(sp.endLayer)),
          b.getNamedAttr("first_device", b.getI64IntegerAttr(sp.firstDevice)),
          b.getNamedAttr("num_devices", b.getI64IntegerAttr(sp.numDevices)),
          b.getNamedAttr("dp", b.getI64IntegerAttr(k.dp)),
          b.getNamedAttr("tp", b.getI64IntegerAttr(k.tp)),
          b.getNamedAttr("sp", b.getBoolAttr(k.sp)),
          b.getNamedAttr("ep", b.getI64IntegerAttr(k.ep)),
          b.getNamedAttr("zero", b.getI64IntegerAttr(k.zero)),
          b.getNamedAttr("recompute", b.getBoolAttr(k.recompute)),
          b.getNamedAttr("memory_bytes",
                         b.getI64IntegerAttr(int64_t(std::llround(sp.memory)))),
      }));
    }
    func->setAttr(
        "hpc.plan",
        b.getDictionaryAttr({
            b.getNamedAttr("cluster", b.getStringAttr(c.name)),
            b.getNamedAttr("devices", b.getI64IntegerAttr(plan.devicesUsed)),
            b.getNamedAttr("devices_per_stage",
                           b.getI64IntegerAttr(plan.devicesPerStage)),
            b.getNamedAttr("global_batch",
                           b.getI64IntegerAttr(ctx.options.globalBatch)),
            b.getNamedAttr("micro_batch", b.getI64IntegerAttr(plan.microBatch)),
            b.getNamedAttr("num_micro_batches",
                           b.getI64IntegerAttr(plan.numMicroBatches)),
            b.getNamedAttr("num_layers", b.getI64IntegerAttr(int64_t(
                                             extracted.model.layers.size()))),
            b.getNamedAttr("schedule", b.getStringAttr(hpc::pipelineScheduleName(plan.schedule))),
            b.getNamedAttr("dtype",
                           b.getStringAttr(dtypeName(ctx.options.dtype))),
            b.getNamedAttr("step_time_s", b.getF64FloatAttr(plan.stepTime)),
            b.getNamedAttr("compute_s", b.getF64FloatAttr(plan.compute)),
            b.getNamedAttr("exposed_comm_s", b.getF64FloatAttr(plan.exposedComm)),
            b.getNamedAttr("bubble_s", b.getF64FloatAttr(plan.bubble)),
            b.getNamedAttr("stages", b.getArrayAttr(stages)),
        }));
    for (auto [op, layer] : extracted.opLayers) {
      op->setAttr("hpc.layer", b.getI64IntegerAttr(layer));
      op->setAttr(hpc::kStageAttr, b.getI64IntegerAttr(stageOfLayer[layer]));
    }
  }
};

} // namespace

/// The stage of the plan dist-search recorded on @main when every stage has
/// the same knobs (one stage, or pipeline stages that differ only in their
/// layers and devices), or null.
static DictionaryAttr uniformStage(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  auto plan = func ? func->getAttrOfType<DictionaryAttr>("hpc.plan") : nullptr;
  auto stages = plan ? plan.getAs<ArrayAttr>("stages") : nullptr;
  if (!stages || stages.empty())
    return nullptr;
  auto first = dyn_cast<DictionaryAttr>(stages[0]);
  for (Attribute a : stages) {
    auto stage = dyn_cast<DictionaryAttr>(a);
    if (!stage || !first)
      return nullptr;
    for (StringRef knob : {"dp", "tp", "sp", "ep", "zero", "recompute"})
      if (stage.get(knob) != first.get(knob))
        return nullptr;
  }
  return first;
}

/// The number of pipeline stages of that plan.
static int64_t planStages(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  auto plan = func ? func->getAttrOfType<DictionaryAttr>("hpc.plan") : nullptr;
  auto stages = plan ? plan.getAs<ArrayAttr>("stages") : nullptr;
  return stages ? int64_t(stages.size()) : 1;
}

FailureOr<std::string> hpc::planMesh(ModuleOp module) {
  DictionaryAttr stage = uniformStage(module);
  auto size = [&](StringRef axis) {
    auto a = stage ? stage.getAs<IntegerAttr>(axis) : nullptr;
    return a ? a.getInt() : int64_t(0);
  };
  // The search's dp counts every data-parallel rank, ep a divisor of it:
  // the mesh's dp axis is what remains of it beside ep.
  int64_t ep = std::max<int64_t>(size("ep"), 1);
  if (!stage || size("dp") < 1 || size("tp") < 1 || size("dp") % ep != 0)
    return failure();
  // Pipeline stages first: the ranks of stage K follow those of stage K-1.
  std::string mesh;
  if (int64_t stages = planStages(module); stages > 1)
    mesh = "pp=" + std::to_string(stages);
  for (auto [axis, n] : {std::pair<StringRef, int64_t>("dp", size("dp") / ep), {"ep", ep},
                         {"tp", size("tp")}})
    if (n > 1)
      mesh += (mesh.empty() ? "" : ",") + axis.str() + "=" + std::to_string(n);
  return mesh;
}

std::vector<std::string> hpc::planStageBoundaries(ModuleOp module) {
  // dist-search tagged each op of the plan's layers with its stage: a stage
  // ends at its last named op.
  std::vector<std::string> ends(std::max<int64_t>(planStages(module) - 1, 0));
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func)
    return ends;
  func.walk([&](Operation *op) {
    auto stage = op->getAttrOfType<IntegerAttr>(hpc::kStageAttr);
    std::string name = locationName(op->getLoc());
    if (stage && stage.getInt() < int64_t(ends.size()) && !name.empty() &&
        !isa<WeightOp, ConstantOp>(op))
      ends[stage.getInt()] = name;
  });
  return ends;
}

int64_t hpc::planZero(ModuleOp module) {
  DictionaryAttr stage = uniformStage(module);
  auto zero = stage ? stage.getAs<IntegerAttr>("zero") : nullptr;
  return zero ? zero.getInt() : 0;
}

bool hpc::planSequenceParallel(ModuleOp module) {
  DictionaryAttr stage = uniformStage(module);
  auto sp = stage ? stage.getAs<BoolAttr>("sp") : nullptr;
  return sp && sp.getValue();
}

std::string hpc::planSchedule(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  auto plan = func ? func->getAttrOfType<DictionaryAttr>("hpc.plan") : nullptr;
  auto schedule = plan ? plan.getAs<StringAttr>("schedule") : nullptr;
  return schedule ? schedule.str() : "1f1b";
}

int64_t hpc::planMicroBatches(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  auto plan = func ? func->getAttrOfType<DictionaryAttr>("hpc.plan") : nullptr;
  auto count = plan ? plan.getAs<IntegerAttr>("num_micro_batches") : nullptr;
  return count && count.getInt() > 1 ? count.getInt() : 1;
}

bool hpc::planRecompute(ModuleOp module) {
  DictionaryAttr stage = uniformStage(module);
  auto recompute = stage ? stage.getAs<BoolAttr>("recompute") : nullptr;
  return recompute && recompute.getValue();
}
