//===- Report.cpp - plan tables and JSON reports --------------------------===//
//
// The two views of a plan: the table dist-search prints on stderr, and the
// JSON report (report=plan.json) that scripts and the benchmarks read.
// docs/search.md describes the report's fields.
//
//===----------------------------------------------------------------------===//

#include "hpc/Search/Search.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace hpc;
using namespace hpc::cost;
using namespace hpc::search;

std::string hpc::search::formatBytes(double bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const double GiB = 1024.0 * 1024 * 1024;
  if (!std::isfinite(bytes))
    os << "unbounded";
  else if (bytes >= 1024 * GiB)
    os << llvm::format("%.1f TiB", bytes / (1024 * GiB));
  else if (bytes >= 0.1 * GiB)
    os << llvm::format("%.1f GiB", bytes / GiB);
  else
    os << llvm::format("%.1f MiB", bytes / (1024 * 1024));
  return s;
}

/// 175.2B, 8.39M, 1.01T (counts, not bytes).
static std::string formatCount(double v) {
  const char *units[] = {"", "K", "M", "B", "T", "P"};
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(v >= 100 ? "%.1f%s" : "%.3g%s", v, units[u]);
  return s;
}

static std::string formatSeconds(double s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (s >= 1)
    os << llvm::format("%.3f s", s);
  else if (s >= 1e-3)
    os << llvm::format("%.2f ms", s * 1e3);
  else
    os << llvm::format("%.1f us", s * 1e6);
  return out;
}

/// "embedding, other, 12 x block".
static std::string describeLayers(const Model &model, int begin, int end) {
  std::string out;
  int i = begin;
  while (i < end) {
    LayerKind k = model.layers[i].kind;
    int j = i;
    while (j < end && model.layers[j].kind == k)
      ++j;
    if (!out.empty())
      out += ", ";
    if (j - i > 1)
      out += std::to_string(j - i) + " x ";
    out += layerKindName(k);
    i = j;
  }
  return out;
}

std::string hpc::search::formatPlanTable(const CostContext &ctx,
                                         const Plan &plan,
                                         const std::string &title) {
  const ClusterSpec &c = *ctx.cluster;
  const Model &model = *ctx.model;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "=== dist-search: " << title << " ===\n";
  os << "cluster: " << c.name << ", " << c.nodes << " x " << c.devicesPerNode
     << " " << c.device.kind << " (" << c.numDevices() << " devices, "
     << formatBytes(ctx.memoryLimit()) << " usable each)\n";
  os << "model: " << model.layers.size() << " layers, "
     << formatCount(model.params()) << " parameters, "
     << formatCount(model.gemmFlopsPerSample())
     << "FLOP forward per sample; global batch "
     << ctx.options.globalBatch << ", " << dtypeName(ctx.options.dtype)
     << ", " << (ctx.options.optimizer == Optimizer::Adam ? "adam" : "sgd")
     << "\n";
  os << "plan: " << plan.stages.size() << " stage"
     << (plan.stages.size() == 1 ? "" : "s") << " x " << plan.devicesPerStage
     << " devices (" << plan.devicesUsed << " used), micro-batch "
     << plan.microBatch << " x " << plan.numMicroBatches
     << " per step"
     << (plan.stages.size() > 1 ? ", schedule " + pipelineScheduleName(plan.schedule) : "")
     << "\n";
  os << llvm::format("%5s  %-9s  %-28s  %-11s %4s %4s %3s %3s %4s %3s %10s %10s\n",
                     "stage", "layers", "kinds", "devices", "dp", "tp", "sp",
                     "ep", "zero", "rc", "t/micro", "memory");
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan &sp = plan.stages[s];
    std::string layers = std::to_string(sp.firstLayer) + "-" +
                         std::to_string(sp.endLayer - 1);
    std::string devices = std::to_string(sp.firstDevice) + "-" +
                          std::to_string(sp.firstDevice + sp.numDevices - 1);
    std::string kinds = describeLayers(model, sp.firstLayer, sp.endLayer);
    if (kinds.size() > 28)
      kinds = kinds.substr(0, 25) + "...";
    const StageConfig &k = sp.config;
    os << llvm::format(
        "%5zu  %-9s  %-28s  %-11s %4lld %4lld %3s %3lld %4d %3s %10s %10s\n", s,
        layers.c_str(), kinds.c_str(), devices.c_str(), (long long)k.dp,
        (long long)k.tp, k.sp ? "on" : "off", (long long)k.ep, k.zero,
        k.recompute ? "on" : "off",
        formatSeconds(sp.cost.perMicroBatch).c_str(),
        formatBytes(sp.memory).c_str());
  }
  os << "step time " << formatSeconds(plan.stepTime) << " = compute "
     << formatSeconds(plan.compute) << " + exposed communication "
     << formatSeconds(plan.exposedComm) << " + bubble "
     << formatSeconds(plan.bubble) << " (bottleneck: stage " << plan.bottleneck
     << ")\n";
  os << "throughput " << llvm::format("%.0f", plan.tokensPerSecond)
     << " tokens/s (" << llvm::format("%.2f", plan.samplesPerSecond)
     << " samples/s); MFU " << llvm::format("%.1f", plan.mfu * 100)
     << "%; " << llvm::format("%.1f", plan.tflopsPerDevice)
     << " TFLOP/s per device (Megatron-LM count)\n";
  if (!plan.stages.empty()) {
    const StagePlan *peak = &plan.stages[0];
    for (const StagePlan &sp : plan.stages)
      if (sp.memory > peak->memory)
        peak = &sp;
    const StageCost &pc = peak->cost;
    os << "memory per device " << formatBytes(plan.peakMemory) << " at most"
       << " (stage " << (peak - plan.stages.data()) << ": weights "
       << formatBytes(pc.weights) << ", gradients " << formatBytes(pc.grads)
       << ", optimizer " << formatBytes(pc.optimizerStates)
       << ", activations " << formatBytes(pc.activationsPerMicroBatch)
       << " x " << llvm::format("%g", peak->inFlight) << " in flight, workspace "
       << formatBytes(pc.workspace) << ")\n";
  }
  return out;
}

static llvm::json::Object planJSON(const CostContext &ctx, const Plan &plan) {
  llvm::json::Array stages;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan &sp = plan.stages[s];
    const StageCost &c = sp.cost;
    const StageConfig &k = sp.config;
    stages.push_back(llvm::json::Object{
        {"stage", int64_t(s)},
        {"first_layer", sp.firstLayer},
        {"end_layer", sp.endLayer},
        {"layers", describeLayers(*ctx.model, sp.firstLayer, sp.endLayer)},
        {"first_device", sp.firstDevice},
        {"num_devices", sp.numDevices},
        {"dp", k.dp},
        {"tp", k.tp},
        {"sp", k.sp ? k.tp : int64_t(1)},
        {"sequence_parallel", k.sp},
        {"ep", k.ep},
        {"zero", k.zero},
        {"recompute", k.recompute},
        {"in_flight", sp.inFlight},
        {"memory_bytes", sp.memory},
        {"memory",
         llvm::json::Object{
             {"weights_bytes", c.weights},
             {"gradients_bytes", c.grads},
             {"optimizer_states_bytes", c.optimizerStates},
             {"activations_per_micro_batch_bytes", c.activationsPerMicroBatch},
             {"workspace_bytes", c.workspace}}},
        {"time",
         llvm::json::Object{{"compute_s", c.compute},
                            {"tp_comm_s", c.tpComm},
                            {"moe_comm_s", c.moeComm},
                            {"zero_comm_s", c.zeroComm},
                            {"p2p_s", c.p2p},
                            {"per_micro_batch_s", c.perMicroBatch},
                            {"grad_sync_s", c.gradSync},
                            {"optimizer_s", c.optimizer},
                            {"per_step_s", c.perStep}}}});
  }
  return llvm::json::Object{
      {"schedule", pipelineScheduleName(plan.schedule)},
      {"micro_batch", plan.microBatch},
      {"num_micro_batches", plan.numMicroBatches},
      {"devices_per_stage", plan.devicesPerStage},
      {"devices_used", plan.devicesUsed},
      {"num_stages", int64_t(plan.stages.size())},
      {"stages", std::move(stages)},
      {"prediction",
       llvm::json::Object{{"step_time_s", plan.stepTime},
                          {"compute_s", plan.compute},
                          {"exposed_comm_s", plan.exposedComm},
                          {"bubble_s", plan.bubble},
                          {"bottleneck_stage", plan.bottleneck},
                          {"samples_per_s", plan.samplesPerSecond},
                          {"tokens_per_s", plan.tokensPerSecond},
                          {"mfu", plan.mfu},
                          {"tflops_per_device", plan.tflopsPerDevice},
                          {"peak_memory_bytes", plan.peakMemory}}}};
}

std::string hpc::search::planToJSON(const CostContext &ctx, const Plan &plan,
                                    const SearchStats &stats,
                                    const std::string &method,
                                    const Plan *baseline) {
  const Model &model = *ctx.model;
  llvm::json::Array layers;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer &l = model.layers[i];
    // Per-sample figures of the forward pass (elements unless named).
    llvm::json::Object o{
        {"index", int64_t(i)},
        {"name", l.name},
        {"kind", layerKindName(l.kind)},
        {"class", l.classId},
        {"params", l.params()},
        {"params_tp_split", l.paramsSharded + l.paramsExpertSharded},
        {"gemms", int64_t(l.gemms.size())},
        {"gemm_flops", l.gemmFlops()},
        {"other_flops", l.otherFlops},
        {"other_elements_moved",
         l.otherElemsReplicated + l.otherElemsSharded},
        {"kernels", l.kernels},
        {"saved_replicated", l.savedReplicated},
        {"saved_tp_split", l.savedSharded},
        {"saved_fp32", l.savedFp32},
        {"input_elements", l.inputElems},
        {"output_elements", l.outputElems},
        {"tp_forward_allreduce", l.tpForwardAllReduce + l.tpLookupAllReduce},
        {"tp_backward_allreduce", l.tpBackwardAllReduce},
        {"tp_divisor", l.tpDivisor},
        // Where this compiler's step differs (training.layout "compiled"):
        // parameter elements held whole over tp, those of them whose
        // gradient is gathered and in how many gathers, the logits
        // gathered for the loss, and the vocabulary-parallel lookup's
        // all-reduce (in tp_forward_allreduce) it does not make.
        {"params_tp_whole", l.paramsTpWhole},
        {"tp_grad_gather_elements", l.tpGradGatherElems},
        {"tp_grad_gathers", l.tpGradGathers},
        {"tp_result_gather", l.tpResultGather},
        {"tp_lookup_allreduce", l.tpLookupAllReduce}};
    if (l.numExperts) {
      o["experts"] = l.numExperts;
      o["moe_all_to_all"] = l.moeAllToAll;
      o["params_expert"] = l.paramsExpertReplicated + l.paramsExpertSharded;
    }
    layers.push_back(std::move(o));
  }
  llvm::Expected<llvm::json::Value> cluster =
      llvm::json::parse(clusterToJSON(*ctx.cluster));
  llvm::json::Object root{
      {"model",
       llvm::json::Object{
           {"name", model.name},
           {"parameters", model.params()},
           {"tokens_per_sample", model.tokensPerSample},
           {"gemm_flops_per_sample", model.gemmFlopsPerSample()},
           {"megatron_flops_per_sample", model.megatronFlopsPerSample()},
           {"layers", std::move(layers)}}},
      {"cluster", cluster ? std::move(*cluster) : llvm::json::Value(nullptr)},
      {"training",
       llvm::json::Object{
           {"global_batch", ctx.options.globalBatch},
           {"dtype", dtypeName(ctx.options.dtype)},
           {"optimizer",
            ctx.options.optimizer == Optimizer::Adam ? "adam" : "sgd"},
           {"layout", ctx.options.compiledLayout ? "compiled" : "megatron"},
           {"memory_limit_bytes", ctx.memoryLimit()}}},
      {"plan", planJSON(ctx, plan)},
      {"search",
       llvm::json::Object{{"method", method},
                          {"seconds", stats.seconds},
                          {"stage_evaluations", stats.stageEvaluations},
                          {"subproblems", stats.subproblems},
                          {"front_entries", stats.frontEntries},
                          {"partitions", stats.partitions},
                          {"plans", stats.plans}}}};
  if (!cluster)
    llvm::consumeError(cluster.takeError());
  if (baseline) {
    llvm::json::Object b = planJSON(ctx, *baseline);
    b["kind"] = "megatron-grid";
    if (baseline->valid)
      b["step_time_ratio"] = baseline->stepTime / plan.stepTime;
    b["valid"] = baseline->valid;
    root["baseline"] = std::move(b);
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return s;
}
