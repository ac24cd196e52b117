//===- Recalibrate.cpp - the cost model fitted to a measured run ----------===//

#include "hpc/Recalibrate.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace hpc;

const char *const hpc::kStepPartNames[kStepParts] = {"step_time_s", "compute_s",
                                                     "exposed_comm_s", "bubble_s"};

namespace {

/// Reads the parts under kStepPartNames of `o` into `out`; false when one
/// is missing or negative.
bool readParts(const llvm::json::Object &o, double (&out)[kStepParts]) {
  for (int k = 0; k < kStepParts; ++k) {
    std::optional<double> v = o.getNumber(kStepPartNames[k]);
    if (!v || !(*v >= 0) || !std::isfinite(*v))
      return false;
    out[k] = *v;
  }
  return true;
}

} // namespace

bool hpc::readMeasuredRun(llvm::StringRef spec, MeasuredRun &run, std::string &error) {
  llvm::StringRef path = spec;
  int64_t wanted = -1;
  // FILE@STEP: the suffix names a step only when it is a number.
  if (size_t at = spec.rfind('@'); at != llvm::StringRef::npos) {
    llvm::StringRef suffix = spec.drop_front(at + 1);
    uint64_t step;
    if (!suffix.empty() && !suffix.getAsInteger(10, step)) {
      if (step == 0) {
        error = "recalibrate: " + spec.str() + ": steps count from 1";
        return false;
      }
      path = spec.take_front(at);
      wanted = int64_t(step);
    }
  }
  run.file = path.str();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = "recalibrate: cannot read " + path.str() + ": " + buffer.getError().message();
    return false;
  }
  // The profile line asked for (or the last one), else the last summary.
  std::optional<llvm::json::Value> profile, summary;
  int64_t lineNo = 0;
  for (llvm::StringRef rest = (*buffer)->getBuffer(); !rest.empty();) {
    auto [line, next] = rest.split('\n');
    rest = next;
    ++lineNo;
    if (line.trim().empty())
      continue;
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
    if (!value) {
      error = "recalibrate: " + path.str() + ":" + std::to_string(lineNo) + ": not JSON (" +
              llvm::toString(value.takeError()) + ")";
      return false;
    }
    const llvm::json::Object *o = value->getAsObject();
    if (!o)
      continue;
    if (o->getBoolean("profile").value_or(false)) {
      if (wanted < 0 || o->getInteger("step") == wanted)
        profile = std::move(*value);
    } else if (o->getBoolean("summary").value_or(false)) {
      summary = std::move(*value);
    }
  }
  const llvm::json::Object *record = profile ? profile->getAsObject()
                                     : wanted < 0 && summary ? summary->getAsObject()
                                                             : nullptr;
  if (!record) {
    error = "recalibrate: " + path.str() + ": no profile line" +
            (wanted < 0 ? std::string(" and no summary")
                        : " at step " + std::to_string(wanted)) +
            " (train --profile-every K --metrics FILE writes them)";
    return false;
  }
  run.step = profile ? record->getInteger("step").value_or(-1) : -1;
  std::string where = path.str() + (profile ? "@" + std::to_string(run.step) : " (summary)");
  if (!readParts(*record, run.measured)) {
    error = "recalibrate: " + where + ": the line lacks the measured step_time_s, compute_s, "
                                      "exposed_comm_s and bubble_s";
    return false;
  }
  const llvm::json::Object *predicted = record->getObject("predicted");
  if (!predicted) {
    error = "recalibrate: " + where +
            ": the run holds no prediction to recalibrate against (its binary was compiled "
            "without a cluster)";
    return false;
  }
  if (!readParts(*predicted, run.predicted)) {
    error = "recalibrate: " + where + ": its prediction lacks step_time_s, compute_s, "
                                      "exposed_comm_s or bubble_s";
    return false;
  }
  run.computeScale = predicted->getNumber("compute_scale").value_or(1);
  run.networkScale = predicted->getNumber("network_scale").value_or(1);
  // Binaries before the latency had its own scale scaled it with the network.
  run.latencyScale = predicted->getNumber("latency_scale").value_or(run.networkScale);
  if (!(run.computeScale > 0) || !(run.networkScale > 0) || !(run.latencyScale > 0)) {
    error = "recalibrate: " + where + ": its prediction's scales are not positive";
    return false;
  }
  run.cluster = predicted->getString("cluster").value_or("").str();
  run.plan = predicted->getString("plan").value_or("").str();
  run.schedule = predicted->getString("schedule").value_or("").str();
  run.host = record->getString("host").value_or("").str();
  run.parameters = record->getInteger("parameters").value_or(-1);
  return true;
}

void hpc::recalibrationScales(const MeasuredRun &run, double &compute, double &network) {
  // The prediction was made under the run's scales: scale them further by
  // how far each part was off. Times are linear in the scales for compute
  // (every kernel's roofline time) and nearly so for the exposed
  // communication (the hidden part depends on the compute too).
  auto ratio = [](double measured, double predicted) {
    return measured > 0 && predicted > 0 ? measured / predicted : 1.0;
  };
  compute = run.computeScale * ratio(run.measured[1], run.predicted[1]);
  network = run.networkScale * ratio(run.measured[2], run.predicted[2]);
}
