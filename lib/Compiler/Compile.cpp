//===- Compile.cpp - the compile flow as a library -------------------------===//
//
// hpc::compileToExecutable: the plan (searched for a cluster, or the given
// mesh), the hpc-compile pipeline, the stability guard's conservative plan,
// and the emitter and linker. Every error is a diagnostic on the module's
// context; nothing here prints to the terminal or exits.
//
//===----------------------------------------------------------------------===//

#include "hpc/Compile.h"

#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/ModelExtract.h"
#include "hpc/Passes.h"
#include "hpc/PipelineSchedule.h"
#include "hpc/Recalibrate.h"
#include "hpc/Recompute.h"
#include "hpc/Target/Emit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;

const char *hpc::version() { return HPC_VERSION; }

namespace {

/// One error diagnostic at no location (the flow's own errors: about the
/// options, files and the plan, not an op).
LogicalResult flowError(MLIRContext *context, const llvm::Twine &message) {
  emitError(UnknownLoc::get(context)) << message;
  return failure();
}

bool isPipelined(llvm::StringRef mesh) { return hpc::splitPipelineAxis(mesh).stages > 1; }

/// The first dimension of @main's first ranked argument (the batch a search
/// plans); 0 when there is none.
int64_t moduleBatch(ModuleOp module) {
  auto main = module.lookupSymbol<FunctionOpInterface>("main");
  if (!main)
    return 0;
  for (Type type : main.getArgumentTypes())
    if (auto ranked = dyn_cast<RankedTensorType>(type); ranked && ranked.getRank() > 0)
      return ranked.getDimSize(0);
  return 0;
}

/// Runs the compile pipeline on `module` with whatever its passes print
/// silenced (the reports were printed for the plan); its errors come out
/// after, as the conservative plan's.
LogicalResult runQuietly(ModuleOp module, const hpc::CompileOptions &options) {
  MLIRContext *context = module.getContext();
  PassManager pm(context);
  hpc::buildCompilePipeline(pm, options);
  std::vector<std::string> errors;
  LogicalResult compiled = failure();
  {
    ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        errors.push_back(diag.str());
      return success();
    });
    llvm::errs().flush();
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0)
      dup2(null, 2);
    compiled = pm.run(module);
    llvm::errs().flush();
    if (saved >= 0 && null >= 0)
      dup2(saved, 2);
    for (int fd : {saved, null})
      if (fd >= 0)
        close(fd);
  }
  for (const std::string &e : errors)
    (void)flowError(context, "the conservative plan: " + e);
  return compiled;
}

/// The stability guard's conservative plan: `imported` (a copy of the step
/// before the pipeline) compiled with hpc::makeConservative's settings,
/// its weights written to a temporary file and dropped (the manifests must
/// agree on them). Its state must be laid out as `main`'s: when dropping
/// the compression changes it (error feedback keeps state), the plan keeps
/// the compression; when it still differs there is no conservative plan
/// (a note says why) and the result is null.
FailureOr<OwningOpRef<ModuleOp>> compileConservative(ModuleOp imported,
                                                     const hpc::CompileOptions &options,
                                                     ModuleOp main,
                                                     const hpc::FlowOptions &flow) {
  MLIRContext *context = imported.getContext();
  SmallString<128> weights;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("hpc-conservative", "safetensors", weights))
    return flowError(context, "cannot create a temporary file: " + ec.message());
  std::string why;
  for (bool keepCompression : {false, true}) {
    if (keepCompression && options.compress == "none")
      break;
    hpc::CompileOptions c;
    c.copyOptionValuesFrom(options);
    double lrScale = hpc::makeConservative(c);
    if (keepCompression)
      c.compress = options.compress;
    c.weightsFile = weights.str().str();
    OwningOpRef<ModuleOp> module = imported.clone();
    Builder b(context);
    (*module)->setAttr(
        "hpc.conservative",
        b.getDictionaryAttr({b.getNamedAttr("lr_scale", b.getF64FloatAttr(lrScale)),
                             b.getNamedAttr("clip_norm", b.getF64FloatAttr(c.clipNorm)),
                             b.getNamedAttr("compress", b.getStringAttr(c.compress)),
                             b.getNamedAttr("overlap", b.getBoolAttr(false))}));
    LogicalResult compiled = runQuietly(*module, c);
    llvm::sys::fs::remove(weights);
    if (failed(compiled))
      return failure();
    if (hpc::sameStateLayout(hpc::programManifest(main), hpc::programManifest(*module), why))
      return module;
  }
  if (flow.log)
    flow.log("note: no conservative plan: its state is laid out unlike the plan's (" + why +
             ")");
  return OwningOpRef<ModuleOp>();
}

/// The search settings of the flow: the mesh given or, under
/// auto-parallel, what the flow compiles (one mesh for every stage, no ep;
/// a forward program on one stage), planned as hpc::matchSearchToStep says.
hpc::DistSearchOptions searchOptions(const hpc::CompileOptions &options, int64_t batch,
                                     int64_t microBatches) {
  hpc::DistSearchOptions so;
  so.cluster = options.cluster;
  so.mesh = options.mesh;
  so.report = options.report;
  // The search costs the schedules the compiler may run: the one given, or
  // under auto the candidates dist-pipeline picks from.
  so.schedule = options.pipelineSchedule;
  if (options.autoParallel) {
    // A train step compiles pipeline stages (dist-pipeline) and sequence
    // parallelism; a forward program is one stage of dp x tp.
    so.maxStages = options.train ? 0 : 1;
    so.sequenceParallel = options.train;
    // One mesh and one set of options for every stage.
    so.uniformStages = true;
    so.expertParallel = options.moeDispatch == "routed";
    // A forward program has no state to shard and nothing to recompute.
    so.zeroStages = "0";
    so.recompute = "off";
  } else if (!so.mesh.empty() && !StringRef(so.mesh).contains("sp=")) {
    // A given mesh is costed as compiled: sequence parallel only on request.
    so.mesh += options.sequenceParallel ? ",sp=1" : ",sp=0";
  }
  hpc::matchSearchToStep(so, options);
  if (microBatches > 1 && batch > 0)
    so.microBatch = batch / microBatches; // the plan runs the step's micro-batches
  return so;
}

/// The plan dist-search recorded on @main, or null.
DictionaryAttr searchedPlan(ModuleOp module) {
  auto main = module.lookupSymbol<FunctionOpInterface>("main");
  return main ? main->getAttrOfType<DictionaryAttr>("hpc.plan") : nullptr;
}

/// The plan dist-search recorded, as its `mesh` spec: the degrees and
/// knobs of the first stage (the compile flow's stages share them), the
/// stage count and the samples per micro-batch per dp rank.
std::string planSpec(DictionaryAttr plan) {
  auto stages = plan.getAs<ArrayAttr>("stages");
  auto first = stages && !stages.empty() ? dyn_cast<DictionaryAttr>(stages[0]) : nullptr;
  if (!first)
    return "";
  auto integer = [](DictionaryAttr d, StringRef key) {
    auto a = d.getAs<IntegerAttr>(key);
    return a ? a.getInt() : int64_t(0);
  };
  auto flag = [](DictionaryAttr d, StringRef key) {
    auto a = d.getAs<BoolAttr>(key);
    return a && a.getValue() ? 1 : 0;
  };
  int64_t dp = std::max<int64_t>(integer(first, "dp"), 1);
  return llvm::formatv("dp={0},tp={1},pp={2},zero={3},sp={4},recompute={5},mbs={6}", dp,
                       integer(first, "tp"), int64_t(stages.size()), integer(first, "zero"),
                       flag(first, "sp"), flag(first, "recompute"),
                       std::max<int64_t>(integer(plan, "micro_batch") / dp, 1))
      .str();
}

/// The cost model's prediction of the plan, for the manifest: the parts of
/// the step, the cluster and the recalibration's scales it was made with,
/// and the plan itself (to be costed again by a recalibration).
DictionaryAttr predictionAttr(DictionaryAttr plan, double computeScale, double networkScale,
                              double latencyScale, double overlap) {
  Builder b(plan.getContext());
  SmallVector<NamedAttribute> items;
  for (const char *key :
       {"cluster", "step_time_s", "compute_s", "exposed_comm_s", "bubble_s", "schedule"})
    if (Attribute a = plan.get(key))
      items.push_back(b.getNamedAttr(key, a));
  items.push_back(b.getNamedAttr("plan", b.getStringAttr(planSpec(plan))));
  items.push_back(b.getNamedAttr("compute_scale", b.getF64FloatAttr(computeScale)));
  items.push_back(b.getNamedAttr("network_scale", b.getF64FloatAttr(networkScale)));
  items.push_back(b.getNamedAttr("latency_scale", b.getF64FloatAttr(latencyScale)));
  items.push_back(b.getNamedAttr("overlap", b.getF64FloatAttr(overlap)));
  return b.getDictionaryAttr(items);
}

std::string planSchedule(DictionaryAttr plan) {
  auto a = plan ? plan.getAs<StringAttr>("schedule") : nullptr;
  return a ? a.str() : "";
}

double planNumber(DictionaryAttr plan, StringRef key) {
  auto f = plan ? plan.getAs<FloatAttr>(key) : nullptr;
  return f ? f.getValueAsDouble() : 0;
}

/// Adds `sections` to the report dist-search wrote at `path` (rewritten
/// through a temporary file).
LogicalResult extendReport(MLIRContext *context, StringRef path, llvm::json::Object sections) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  llvm::Expected<llvm::json::Value> report =
      buffer ? llvm::json::parse((*buffer)->getBuffer())
             : llvm::Expected<llvm::json::Value>(llvm::createStringError("unreadable"));
  if (!report || !report->getAsObject()) {
    if (!report)
      llvm::consumeError(report.takeError());
    return flowError(context, "cannot read back the report " + path.str());
  }
  for (auto &kv : sections)
    (*report->getAsObject())[kv.first] = std::move(kv.second);
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output)
    return flowError(context, error);
  output->os() << llvm::formatv("{0:2}", *report) << "\n";
  output->keep();
  return success();
}

/// --recalibrate's verdict on the searched plan against the measured run:
/// a line for the log, the report's "recalibration" and "replan" sections,
/// and whether to compile.
bool judgeReplan(const hpc::MeasuredRun &run, double computeScale, double networkScale,
                 double latencyScale, double overlap, double clusterOverlap, DictionaryAttr plan,
                 std::optional<double> running,
                 const hpc::CompileOptions &options, const hpc::FlowOptions &flow,
                 llvm::json::Object &sections) {
  double measured = run.measured[0], predicted = planNumber(plan, "step_time_s");
  // Like against like: the running plan costed on the same recalibrated
  // model (what the fit leaves unexplained then cancels), else what it
  // measured. The same plan again gains nothing.
  double baseline = running ? *running : measured;
  bool samePlan = !run.plan.empty() && run.plan == planSpec(plan) &&
                  (run.schedule.empty() || run.schedule == planSchedule(plan));
  double gain = samePlan || !(baseline > 0) ? 0 : 1 - predicted / baseline;
  // Without a threshold the plan is compiled whatever it gains.
  bool compile = options.replanThreshold == 0 || (gain >= options.replanThreshold && !samePlan);
  auto log = [&](const std::string &line) {
    if (flow.log) // an embedder may want no log
      flow.log(line);
  };
  std::string from = run.file + (run.step > 0 ? " at step " + std::to_string(run.step)
                                              : std::string(" (its summary)"));
  std::string hidden =
      overlap == clusterOverlap
          ? ""
          : llvm::formatv(", overlap {0:f2} (the cluster's {1:f2})", overlap, clusterOverlap).str();
  log(llvm::formatv("recalibrated on {0}: compute x{1:f2}, communication x{2:f2}{3} "
                    "(measured {4:f3} ms a step = compute {5:f3} + exposed communication "
                    "{6:f3} + bubble {7:f3}; the binary predicted {8:f3} ms)",
                    from, computeScale / run.computeScale, networkScale / run.networkScale,
                    hidden, 1e3 * measured, 1e3 * run.measured[1], 1e3 * run.measured[2],
                    1e3 * run.measured[3], 1e3 * run.predicted[0])
          .str());
  std::string mesh =
      options.mesh.empty() ? std::string("of one rank") : std::string(options.mesh);
  std::string verdict =
      samePlan ? llvm::formatv("the plan (mesh {0}) is the one that ran, predicted {1:f3} ms a "
                               "step",
                               mesh, 1e3 * predicted)
                     .str()
      : running
          ? llvm::formatv("the plan (mesh {0}) is predicted {1:f3} ms a step against {2:f3} "
                          "for the plan that ran, {3:f1}% {4}",
                          mesh, 1e3 * predicted, 1e3 * *running, 100 * std::abs(gain),
                          gain >= 0 ? "faster" : "slower")
                .str()
          : llvm::formatv("the plan (mesh {0}) is predicted {1:f3} ms a step, {2:f1}% {3} "
                          "than measured",
                          mesh, 1e3 * predicted, 100 * std::abs(gain),
                          gain >= 0 ? "faster" : "slower")
                .str();
  if (options.replanThreshold > 0)
    verdict += compile ? llvm::formatv(": re-planning (replan-threshold {0:f1}%)",
                                       100 * options.replanThreshold)
                             .str()
                       : llvm::formatv(": below replan-threshold {0:f1}%, keeping the "
                                       "running plan (nothing written)",
                                       100 * options.replanThreshold)
                             .str();
  log(verdict);
  llvm::json::Object measuredParts, predictedParts;
  for (int k = 0; k < hpc::kStepParts; ++k) {
    measuredParts[hpc::kStepPartNames[k]] = run.measured[k];
    predictedParts[hpc::kStepPartNames[k]] = run.predicted[k];
  }
  sections["recalibration"] = llvm::json::Object{
      {"metrics", run.file},
      {"step", run.step > 0 ? llvm::json::Value(run.step) : llvm::json::Value(nullptr)},
      {"host", run.host},
      {"measured", std::move(measuredParts)},
      {"predicted_by_the_run", std::move(predictedParts)},
      {"compute_scale", computeScale},
      {"network_scale", networkScale},
      {"latency_scale", latencyScale},
      {"overlap", overlap},
      {"cluster_overlap", clusterOverlap}};
  sections["replan"] = llvm::json::Object{{"measured_step_s", measured},
                                          {"predicted_step_s", predicted},
                                          {"running_plan", run.plan},
                                          {"running_predicted_step_s",
                                           running ? llvm::json::Value(*running)
                                                   : llvm::json::Value(nullptr)},
                                          {"same_plan", samePlan},
                                          {"gain", gain},
                                          {"threshold", double(options.replanThreshold)},
                                          {"mesh", std::string(options.mesh)},
                                          {"compile", compile}};
  return compile;
}

/// With `cluster`: searches the plan (auto-parallel) or evaluates the mesh,
/// and folds what the plan chose into `options`; `module` may be replaced by
/// a re-import for the plan's micro-batches. With `recalibrate`, first fits
/// the cost model to the measured run; false (nothing to compile) when the
/// plan is not enough faster than that run.
FailureOr<bool> plan(ModuleOp &module, OwningOpRef<ModuleOp> &reimported,
                     hpc::CompileOptions &options, const hpc::FlowOptions &flow) {
  MLIRContext *context = module.getContext();
  hpc::cost::ClusterSpec cluster;
  std::string error;
  if (!hpc::cost::parseClusterSpec(options.cluster, cluster, error))
    return flowError(context, error);
  std::optional<hpc::MeasuredRun> run;
  double computeScale = 1, networkScale = 1, latencyScale = 1;
  if (!options.recalibrate.empty()) {
    run.emplace();
    if (!hpc::readMeasuredRun(options.recalibrate, *run, error))
      return flowError(context, error);
    if (run->cluster != cluster.name)
      return flowError(context, "recalibrate: the run's binary was planned for the cluster '" +
                                    run->cluster + "', not '" + cluster.name +
                                    "': give the cluster it was compiled for");
    if (!run->host.empty() && run->host != cluster.device.kind && flow.log)
      flow.log("warning: recalibrate: the run measured on '" + run->host +
               "', the cluster's devices are '" + cluster.device.kind +
               "': its times are another machine's");
    // A run of another model is refused before the search prints its plan.
    auto main = module.lookupSymbol<func::FuncOp>("main");
    hpc::cost::ExtractedModel extracted;
    if (main && run->parameters >= 0 && hpc::cost::extractModel(main, extracted, error)) {
      int64_t params = int64_t(std::llround(extracted.model.params()));
      if (params != run->parameters)
        return flowError(context, "recalibrate: " + run->file + " is a run of a model of " +
                                      std::to_string(run->parameters) +
                                      " parameters, this one has " + std::to_string(params) +
                                      ": a profile of another model");
    }
    hpc::recalibrationScales(*run, computeScale, networkScale);
    latencyScale = run->latencyScale;
  }
  int64_t microBatches = options.train ? int64_t(options.microBatches) : 1;
  hpc::DistSearchOptions so = searchOptions(options, moduleBatch(module), microBatches);
  so.computeScale = computeScale;
  so.networkScale = networkScale;
  so.latencyScale = latencyScale;
  // The plan that ran, costed on the recalibrated model (quietly, on a copy).
  std::optional<double> running;
  double overlap = cluster.efficiency.overlap;
  if (run && !run->plan.empty()) {
    OwningOpRef<ModuleOp> copy = module.clone();
    // The links' latency is not lengthened with the network (only what a
    // run's bytes cannot explain goes on it, below): the run fitted is
    // usually a dp step of few large buckets, which says little of it, and
    // hpc-calibrate measures the overhead per call where the step runs.
    // Lengthened, 4 ranks on 2 cores fitted 11x to a dp run's wait for the
    // cores and priced each of tp=4's 25 small collectives 2-3x too slow.
    // A faster run than predicted shortens it. The run's own binary may
    // have been fitted so.
    bool latencyToo = run->latencyScale > std::min(run->networkScale, 1.0);
    auto latencyFor = [&](double network) {
      return latencyToo ? network : std::min(network, 1.0);
    };
    auto cost = [&](double network, double hidden) -> DictionaryAttr {
      hpc::DistSearchOptions again = so;
      again.networkScale = network;
      again.latencyScale = latencyFor(network);
      again.overlap = hidden;
      again.mesh = run->plan;
      again.report = "";
      again.table = false;
      if (!run->schedule.empty())
        again.schedule = run->schedule;
      PassManager evaluate(context);
      evaluate.addPass(hpc::createDistSearch(again));
      return succeeded(evaluate.run(*copy)) ? searchedPlan(*copy) : nullptr;
    };
    DictionaryAttr ran = cost(networkScale, overlap);
    if (!ran)
      return flowError(context, "recalibrate: cannot cost the plan that ran (" + run->plan +
                                    ") on this model");
    // The exposed communication is what the compute leaves unhidden, not
    // proportional to the scale: find the parameter at which the plan that
    // ran predicts what it measured (the exposure grows with the scale and
    // shrinks with the overlap), bisecting.
    double target = run->measured[2];
    auto exposed = [&](double network, double hidden) {
      return planNumber(cost(network, hidden), "exposed_comm_s");
    };
    auto bisect = [](double lo, double hi, bool logSpace, auto below) {
      for (int i = 0; i < 40 && (logSpace ? hi / lo > 1 + 1e-6 : hi - lo > 1e-6); ++i) {
        double mid = logSpace ? std::sqrt(lo * hi) : (lo + hi) / 2;
        (below(mid) ? lo : hi) = mid;
      }
      return logSpace ? std::sqrt(lo * hi) : (lo + hi) / 2;
    };
    if (target > 0 && std::abs(planNumber(ran, "exposed_comm_s") - target) > 1e-3 * target) {
      // From the scale the run was predicted with, not the ratio's guess
      // (a plan that hides most of its communication makes that ratio
      // large for a small miss).
      networkScale = run->networkScale;
      ran = cost(networkScale, overlap);
      // More exposed than predicted: first less of it hidden, which the
      // machine may not do (hpc-calibrate measures 0 on 2 cores that two
      // ranks fill), before a slower network (which would slow every
      // collective of every plan alike); only what no overlap explains is
      // put on the network.
      double predicted = planNumber(ran, "exposed_comm_s");
      if (predicted < target && overlap > 0) {
        // Only a plan that hides some of its communication says how much
        // the machine hides.
        double unhidden = exposed(networkScale, 0);
        if (unhidden > predicted * (1 + 1e-6))
          overlap = unhidden >= target
                        ? bisect(0.0, overlap, false,
                                 [&](double o) { return exposed(networkScale, o) >= target; })
                        : 0;
      }
      if (std::abs(exposed(networkScale, overlap) - target) > 1e-3 * target) {
        double lo = networkScale / 1e3, hi = networkScale * 1e3;
        // What even 1000x the time a byte takes cannot explain (a run of
        // small collectives on busy cores) lengthens the latency too:
        // asked of the bytes alone, whatever the run's binary was fitted
        // with, so that the bisection below runs in the mode it was bounded in.
        latencyToo = false;
        bool beyondBytes = exposed(hi, overlap) < target;
        latencyToo = beyondBytes;
        if (exposed(hi, overlap) <= target)
          networkScale = hi;
        else if (exposed(lo, overlap) >= target)
          networkScale = lo;
        else
          networkScale = bisect(lo, hi, true,
                                [&](double n) { return exposed(n, overlap) < target; });
      }
      so.networkScale = networkScale;
      so.overlap = overlap;
      ran = cost(networkScale, overlap);
    }
    latencyScale = so.latencyScale = latencyFor(so.networkScale);
    running = planNumber(ran, "step_time_s");
  }
  PassManager search(context);
  search.addPass(hpc::createDistSearch(so));
  if (failed(search.run(module)))
    return failure();
  DictionaryAttr planAttr = searchedPlan(module);
  if (!planAttr)
    return flowError(context, "dist-search left no plan on @main");
  DictionaryAttr prediction =
      predictionAttr(planAttr, computeScale, networkScale, latencyScale, overlap);
  // The ranks are laid on the cluster's nodes node-major; the runtime checks
  // that it was launched so.
  options.ranksPerNode = cluster.devicesPerNode;
  if (options.autoParallel) {
    FailureOr<std::string> mesh = hpc::planMesh(module);
    if (failed(mesh))
      return flowError(context, "the searched plan's stages differ in their dp x tp (or use "
                                "ep): not compiled yet");
    options.mesh = *mesh;
    options.sequenceParallel = hpc::planSequenceParallel(module);
    // Its stages end where the plan's layers do (read before a re-import
    // drops the plan's tags).
    options.stageBoundaries = hpc::planStageBoundaries(module);
    // The plan's stages run the schedule the search costed them with.
    // Interleaved stages hold V chunks each, not the plan's one range of
    // layers: dist-pipeline-stages balances the P x V chunks itself.
    if (!options.stageBoundaries.empty())
      options.pipelineSchedule = hpc::planSchedule(module);
    if (StringRef(options.pipelineSchedule).starts_with("interleaved:"))
      options.stageBoundaries.clear();
    options.zero = hpc::planZero(module);
    if (options.train && !options.recompute.hasValue() && hpc::planRecompute(module))
      options.recompute = "full";
    // The step runs the micro-batches whose activations the plan's memory
    // counts (one in flight), accumulating their gradients.
    if (options.train)
      microBatches = hpc::planMicroBatches(module);
  }
  options.microBatches = microBatches;
  if (run) {
    llvm::json::Object sections;
    bool compile = judgeReplan(*run, computeScale, networkScale, latencyScale, overlap,
                               cluster.efficiency.overlap, planAttr, running, options,
                               flow, sections);
    if (!options.report.empty() && failed(extendReport(context, options.report,
                                                       std::move(sections))))
      return failure();
    if (!compile)
      return false;
  }
  if (microBatches > 1) {
    // The search planned the whole batch; the step is compiled from the
    // model of one micro-batch.
    if (!flow.reimport)
      return flowError(context,
                       "the plan runs " + std::to_string(microBatches) +
                           " micro-batches: compile the model imported for one of them "
                           "(micro-batches=" +
                           std::to_string(microBatches) + " without cluster)");
    reimported = flow.reimport(microBatches);
    if (!reimported)
      return failure();
    module = *reimported;
  }
  module->setAttr("hpc.prediction", prediction);
  return true;
}

/// "A, B" of the planned arenas (the program's, or each pipeline stage's),
/// taken off the modules, which keep no attribute the emitter does not know.
std::string takeArenaSizes(ArrayRef<ModuleOp> modules) {
  std::string text;
  for (ModuleOp m : modules) {
    auto arena = m->getAttrOfType<IntegerAttr>("hpc.arena_bytes");
    m->removeAttr("hpc.arena_bytes");
    text += (text.empty() ? "" : ", ") + std::to_string(arena ? arena.getInt() : 0);
  }
  return text;
}

} // namespace

void hpc::matchSearchToStep(DistSearchOptions &so, const CompileOptions &options) {
  if (options.train || options.precision.hasValue())
    so.dtype = stringifyPrecision(options.precision).str();
  if (!options.train)
    return;
  so.layout = "compiled";
  so.optimizer = options.optimizer == "sgd" ? "sgd" : "adam";
  so.zeroStages = options.autoParallel    ? "0,1,2"
                  : options.zero.hasValue() ? std::to_string(options.zero)
                                            : "0";
  so.recompute = options.recompute.hasValue() ? (options.recompute == "full" ? "on" : "off")
                 : options.autoParallel       ? "auto"
                                              : "off";
}

std::string hpc::shortNumber(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%g", value);
  return text;
}

bool hpc::verifyCompileOptions(const CompileOptions &options, std::string &error) {
  auto fail = [&](const llvm::Twine &message) {
    error = message.str();
    return false;
  };
  bool hasMesh = !options.mesh.empty() || options.autoParallel;
  if (options.clipNorm < 0)
    return fail("clip-norm must not be negative");
  if (!options.shard.empty() && options.mesh.empty())
    return fail("shard needs mesh");
  if (options.asyncCollectives && options.mesh.empty())
    return fail("async-collectives needs mesh");
  if (options.bucketMb != -1 && !(options.bucketMb >= 0 && options.bucketMb <= 1e6))
    return fail("bucket-mb must be -1 (auto) or a number of MiB from 0 to 1e6");
  if (options.zero < 0 || options.zero > 3)
    return fail("zero must be 0, 1, 2 or 3");
  if (options.zero > 0 && (!options.train || !hasMesh))
    return fail("zero shards a train step's state over data parallelism: it needs train and "
                "a mesh with a dp axis");
  if (options.zero.hasValue() && options.autoParallel && options.zero > 0)
    return fail("zero fixes the ZeRO stage; auto-parallel compiles the one its search "
                "chooses: use one of them");
  if (options.hierarchical != "auto" && options.hierarchical != "on" &&
      options.hierarchical != "off")
    return fail("hierarchical must be auto, on or off, not '" + options.hierarchical + "'");
  if (options.hierarchical == "on" && (options.cluster.empty() || !hasMesh))
    return fail("hierarchical=on needs cluster and a mesh (mesh or auto-parallel)");
  CompressSpec compress;
  if (!parseCompressSpec(options.compress, compress, error))
    return false;
  if (options.compress != "none" && (!options.train || !hasMesh))
    return fail("compress=" + options.compress + " compresses a train step's gradient "
                "reductions: it needs train and a mesh with a dp axis");
  if (options.gradientBuffersBf16 && (!options.train || !hasMesh))
    return fail("gradient-buffers-bf16 needs train and a mesh with a dp axis");
  if (options.autoParallel && options.cluster.empty())
    return fail("auto-parallel needs cluster (PRESET:NODES or a cluster file)");
  if (options.autoParallel && !options.mesh.empty())
    return fail("auto-parallel searches the plan; mesh gives one: use one of them");
  if (!options.report.empty() && options.cluster.empty())
    return fail("report needs cluster");
  if (!options.recalibrate.empty() && (options.cluster.empty() || !options.train))
    return fail("recalibrate needs train and cluster (the cluster the measured run's "
                "binary was compiled for)");
  if (!(options.replanThreshold >= 0 && options.replanThreshold < 1))
    return fail("replan-threshold must be a fraction from 0 to below 1");
  if (options.replanThreshold > 0 && options.recalibrate.empty())
    return fail("replan-threshold needs recalibrate (the measured step it compares with)");
  if (options.train && options.loss.empty())
    return fail("train needs loss=cross-entropy:LOGITS,LABELS, mse:OUT,TARGET or output:NAME");
  if (!options.train && (!options.loss.empty() || options.printTrainable ||
                         options.keepGradients || options.trainMode))
    return fail("loss, print-trainable, keep-gradients and train-mode need train");
  if (!parseRecomputeMode(options.recompute))
    return fail("recompute must be none, full or selective, not '" + options.recompute + "'");
  if (options.recompute.hasValue() && options.recompute != "none" && !options.train)
    return fail("recompute needs train");
  PipelineMesh pipeline = splitPipelineAxis(options.mesh);
  if (pipeline.stages > 1 && !options.train)
    return fail("mesh=" + options.mesh + ": pipeline stages split a train step; add train");
  if (pipeline.stages > 1)
    for (StringRef axis : llvm::split(StringRef(pipeline.rest), ',')) {
      StringRef name = axis.split('=').first.trim();
      if (!name.empty() && name != "dp" && name != "tp")
        return fail("mesh=" + options.mesh + ": pipeline stages compose with dp and tp; '" +
                    name + "' with pp is not compiled yet");
    }
  if (options.sequenceParallel && !options.autoParallel && meshAxisSize(options.mesh, "tp") < 2)
    return fail("sequence-parallel splits the sequence over the tp ranks: give a mesh with "
                "tp=N, N >= 2");
  if (!options.stageBoundaries.empty() && pipeline.stages == 1)
    return fail("stage-boundaries needs pipeline stages (mesh=pp=P with P >= 2)");
  PipelineSchedule schedule;
  if (!parsePipelineSchedule(options.pipelineSchedule, schedule, error))
    return false;
  if (options.moeDispatch != "routed" && options.moeDispatch != "dense")
    return fail("moe-dispatch must be routed or dense, not '" + options.moeDispatch + "'");
  if (!(options.moeCapacityFactor >= 0))
    return fail("moe-capacity-factor must be >= 0 (0: no token is dropped), not " +
                hpc::shortNumber(options.moeCapacityFactor));
  if (!hpc::parseMoEBalance(options.moeBalance))
    return fail("moe-balance must be none or bias:RATE with RATE > 0, not '" +
                options.moeBalance + "'");
  if (!(options.moeAuxLoss >= 0))
    return fail("moe-aux-loss must be >= 0, not " + hpc::shortNumber(options.moeAuxLoss));
  if ((options.moeBalance != "none" || options.moeAuxLoss > 0) && !options.train)
    return fail("moe-balance and moe-aux-loss balance a train step: they need train");
  if (options.microBatches < 1)
    return fail("micro-batches must be at least 1, not " +
                std::to_string(options.microBatches));
  if (options.microBatches > 1 && !options.train)
    return fail("micro-batches needs train (it accumulates a train step's gradients)");
  if (int64_t ep = meshAxisSize(options.mesh, "ep"); ep > 1) {
    if (options.moeDispatch != "routed")
      return fail("mesh=" + options.mesh + ": ep splits routed experts; moe-dispatch=dense "
                  "keeps every expert on every rank");
    if (options.microBatches > 1)
      return fail("mesh=" + options.mesh + ": ep with micro-batches is not compiled yet");
  }
  return true;
}

LogicalResult hpc::compileToExecutable(ModuleOp module, const CompileOptions &given,
                                       StringRef outputPath, const FlowOptions &flow) {
  MLIRContext *context = module.getContext();
  std::string error;
  if (!verifyCompileOptions(given, error))
    return flowError(context, error);
  if (outputPath.empty())
    return flowError(context, "no output path");
  bool writesFile = flow.emit != EmitKind::LLVMIR;
  if (writesFile && outputPath == "-")
    return flowError(context, "an object file or executable needs an output file, not '-'");

  CompileOptions options;
  options.copyOptionValuesFrom(given);
  // An object or executable has its weights beside it; LLVM IR, only where
  // weights-file says.
  if (writesFile && options.weightsFile.empty())
    options.weightsFile = outputPath.str() + ".safetensors";
  std::string weightsPath = options.weightsFile;
  if (options.weightsName.empty() && !weightsPath.empty())
    options.weightsName = llvm::sys::path::filename(weightsPath).str();
  if (options.modelName.empty())
    if (auto file = dyn_cast<FileLineColLoc>(module.getLoc()))
      options.modelName = llvm::sys::path::filename(file.getFilename().getValue()).str();

  OwningOpRef<ModuleOp> reimported;
  if (!options.cluster.empty()) {
    FailureOr<bool> compile = plan(module, reimported, options, flow);
    if (failed(compile))
      return failure();
    if (!*compile)
      return success(); // --replan-threshold: the running plan stays
  }

  // The stability guard's conservative plan, compiled from the same step
  // (one program: not yet for pipeline stages).
  OwningOpRef<ModuleOp> imported, conservative;
  if (options.train && writesFile && options.conservativePlan && !isPipelined(options.mesh))
    imported = module.clone();
  PassManager pm(context);
  buildCompilePipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  SmallVector<ModuleOp> stageModules = pipelineStageModules(module);
  if (imported && stageModules.empty()) {
    auto made = compileConservative(*imported, options, module, flow);
    if (failed(made))
      return failure();
    conservative = std::move(*made);
  }
  std::string arenaText =
      takeArenaSizes(stageModules.empty() ? SmallVector<ModuleOp>{module} : stageModules);

  if (flow.emit == EmitKind::LLVMIR) {
    auto output = openOutputFile(outputPath, &error);
    if (!output)
      return flowError(context, error);
    if (failed(emitLLVMIR(module, output->os(), error, conservative.get())))
      return flowError(context, error);
    output->keep();
    return success();
  }
  std::string objectPath = outputPath.str();
  SmallString<128> temp;
  if (flow.emit == EmitKind::Executable) {
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("hpc-program", "o", temp))
      return flowError(context, "cannot create a temporary file: " + ec.message());
    objectPath = temp.str().str();
  }
  LogicalResult emitted = emitObjectFile(module, objectPath, error, conservative.get());
  if (succeeded(emitted) && flow.emit == EmitKind::Executable)
    emitted = linkExecutable(objectPath, outputPath.str(), error);
  if (flow.emit == EmitKind::Executable)
    llvm::sys::fs::remove(objectPath);
  if (failed(emitted))
    return flowError(context, error);
  if (!flow.log)
    return success();
  if (stageModules.empty()) {
    flow.log("wrote " + outputPath.str() + " and " + weightsPath + " (arena " + arenaText +
             " bytes" + (conservative ? "; with a conservative plan" : "") + ")");
  } else {
    StringRef ext = llvm::sys::path::extension(weightsPath);
    std::string stem = weightsPath.substr(0, weightsPath.size() - ext.size());
    flow.log("wrote " + outputPath.str() + " (" + std::to_string(stageModules.size()) +
             " pipeline stages) and " + stem + ".stage{0.." +
             std::to_string(stageModules.size() - 1) + "}" + ext.str() + " (arena " +
             arenaText + " bytes)");
  }
  return success();
}
