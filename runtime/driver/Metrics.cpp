//===- Metrics.cpp - what a train run reports: metrics, progress, memory --===//
//
// Numbers are formatted by hand: the shortest %g text that reads back as the
// same value (at most %.9g for a float, %.17g for a double), so that a loss
// read from the f32 output round-trips and a resumed run's lines compare as
// strings with an uninterrupted run's. The terminal progress line is redrawn with "\r" and
// cleared with "\033[K".
//
//===----------------------------------------------------------------------===//

#include "Metrics.h"

#include "../core/Context.h"
#include "common/Json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace hpcrt::driver {

std::string jsonString(const std::string &s) { return hpc::json::quoted(s); }

std::string jsonFloat(float v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(v));
    if (strtof(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string jsonDouble(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

JsonLine &JsonLine::add(const std::string &key, const std::string &jsonValue) {
  fields_.push_back({key, jsonValue});
  return *this;
}
JsonLine &JsonLine::add(const std::string &key, int64_t v) {
  return add(key, std::to_string(v));
}
JsonLine &JsonLine::add(const std::string &key, uint64_t v) {
  return add(key, std::to_string(v));
}

std::string JsonLine::text() const {
  std::string s = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    s += (i ? ", \"" : "\"") + fields_[i].first + "\": " + fields_[i].second;
  return s + "}";
}

MetricsFile::MetricsFile(const std::string &path, bool append) : path_(path) {
  f_ = fopen(path.c_str(), append ? "a" : "w");
  if (!f_)
    fail(path + ": cannot write the metrics file: " + strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (f_)
    fclose(f_);
}

void MetricsFile::line(const std::string &text) {
  if (!f_)
    return;
  if (fputs(text.c_str(), f_) < 0 || fputc('\n', f_) < 0 || fflush(f_) != 0)
    fail(path_ + ": write error: " + strerror(errno));
}

void MetricsFile::step(const StepReport &r) {
  JsonLine j;
  j.add("step", r.step)
      .add("loss", jsonFloat(r.loss))
      .add("lr", jsonDouble(r.lr))
      .add("grad_norm", r.hasGradNorm ? jsonFloat(r.gradNorm) : "null");
  char buf[40];
  snprintf(buf, sizeof(buf), "%.4f", r.stepMs);
  j.add("step_ms", buf);
  snprintf(buf, sizeof(buf), "%.1f", r.tokensPerS);
  j.add("tokens_per_s", buf);
  if (r.hasEval)
    j.add("eval_loss", jsonDouble(r.evalLoss));
  if (r.skipped)
    j.add("skipped", std::string("true"));
  if (r.rolledBack)
    j.add("rolled_back", std::string("true"));
  if (!r.moeLoad.empty()) {
    // Per layer: the choices per expert and max/mean of them; over all
    // layers, the fraction of choices dropped (past an expert's capacity).
    std::string loads = "[", balance = "[";
    int64_t choices = 0, dropped = 0;
    for (size_t l = 0; l < r.moeLoad.size(); ++l) {
      const std::vector<int64_t> &load = r.moeLoad[l];
      int64_t sum = 0, most = 0;
      std::string row = "[";
      for (size_t e = 0; e < load.size(); ++e) {
        row += (e ? ", " : "") + std::to_string(load[e]);
        sum += load[e];
        most = std::max(most, load[e]);
        dropped += std::max<int64_t>(load[e] - r.moeCapacity[l], 0);
      }
      choices += sum;
      double mean = static_cast<double>(sum) / static_cast<double>(load.size());
      snprintf(buf, sizeof(buf), "%.4f", mean > 0 ? static_cast<double>(most) / mean : 0.0);
      loads += (l ? ", " : "") + row + "]";
      balance += (l ? ", " : "") + std::string(buf);
    }
    j.add("moe_load", loads + "]").add("moe_max_mean", balance + "]");
    snprintf(buf, sizeof(buf), "%.6f",
             choices > 0 ? static_cast<double>(dropped) / static_cast<double>(choices) : 0.0);
    j.add("moe_dropped", buf);
  }
  if (r.hasBalanceLoss)
    j.add("moe_balance_loss", jsonDouble(r.balanceLoss));
  line(j.text());
  for (const GuardEvent &e : r.events)
    event(r.step, e);
}

void MetricsFile::event(int64_t step, const GuardEvent &e) {
  JsonLine j;
  j.add("event", jsonString(e.name)).add("step", step).add("reason", jsonString(e.reason));
  if (e.toStep >= 0)
    j.add("to_step", e.toStep);
  if (e.skippedBatches >= 0)
    j.add("skipped_batches", e.skippedBatches);
  line(j.text());
}

Progress::Progress(bool terminal, int64_t logEvery, int64_t lastStep, int64_t firstStep,
                   std::string unit)
    : terminal_(terminal), logEvery_(logEvery), lastStep_(lastStep), firstStep_(firstStep),
      unit_(std::move(unit)) {}

namespace {
std::string clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    seconds = 0;
  long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}
} // namespace

void Progress::step(const StepReport &r, double elapsedS) {
  int64_t done = r.step - firstStep_ + 1;
  double perS = elapsedS > 0 ? static_cast<double>(done) / elapsedS : 0;
  char grad[32] = "-";
  if (r.hasGradNorm)
    snprintf(grad, sizeof(grad), "%.4g", static_cast<double>(r.gradNorm));
  char eval[48] = "";
  if (r.hasEval)
    snprintf(eval, sizeof(eval), " eval_loss %.6g", r.evalLoss);
  if (terminal_) {
    double eta = perS > 0 ? static_cast<double>(lastStep_ - r.step) / perS : 0;
    printf("\rstep %lld/%lld  loss %.6g  lr %.3e  grad_norm %s  %.2f steps/s  %.0f %s/s  "
           "ETA %s%s\033[K",
           static_cast<long long>(r.step), static_cast<long long>(lastStep_),
           static_cast<double>(r.loss), r.lr, grad, perS, r.tokensPerS, unit_.c_str(),
           clock(eta).c_str(), eval);
    fflush(stdout);
    lineOpen_ = true;
    return;
  }
  if (r.step % logEvery_ != 0 && r.step != lastStep_ && !r.hasEval)
    return;
  printf("step %lld/%lld loss %.9g lr %.6g grad_norm %s step_ms %.3f %s/s %.1f%s\n",
         static_cast<long long>(r.step), static_cast<long long>(lastStep_),
         static_cast<double>(r.loss), r.lr, grad, r.stepMs, unit_.c_str(), r.tokensPerS, eval);
  fflush(stdout);
}

void Progress::message(const std::string &text) {
  if (lineOpen_)
    printf("\r\033[K");
  printf("%s\n", text.c_str());
  fflush(stdout);
  lineOpen_ = false;
}

void Progress::finish() {
  if (lineOpen_)
    printf("\n");
  fflush(stdout);
  lineOpen_ = false;
}

} // namespace hpcrt::driver
