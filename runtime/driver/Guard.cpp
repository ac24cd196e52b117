//===- Guard.cpp - the loss monitor of the stability guard ----------------===//

#include "Guard.h"

#include "Process.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hpcrt::driver {

OnDivergence parseOnDivergence(const std::string &flag, const std::string &v) {
  if (v == "rollback")
    return OnDivergence::Rollback;
  if (v == "stop")
    return OnDivergence::Stop;
  if (v == "ignore")
    return OnDivergence::Ignore;
  fail(flag + ": expected rollback, stop or ignore, got '" + v + "'");
}

const char *onDivergenceName(OnDivergence d) {
  switch (d) {
  case OnDivergence::Rollback:
    return "rollback";
  case OnDivergence::Stop:
    return "stop";
  case OnDivergence::Ignore:
    return "ignore";
  }
  return "?";
}

std::string LossMonitor::diverges(float loss) const {
  if (!std::isfinite(loss))
    return std::string("loss ") + (std::isnan(loss) ? "nan" : "inf");
  size_t n = window_.size();
  if (o_.spikeSigma <= 0 || n < static_cast<size_t>(std::max<int64_t>(2, o_.spikeWindow / 2)))
    return "";
  double mean = 0;
  for (double l : window_)
    mean += l;
  mean /= static_cast<double>(n);
  double var = 0;
  for (double l : window_)
    var += (l - mean) * (l - mean);
  double sd = std::max(std::sqrt(var / static_cast<double>(n - 1)), 0.01 * std::fabs(mean));
  double limit = mean + o_.spikeSigma * sd;
  if (loss <= limit)
    return "";
  char buf[160];
  snprintf(buf, sizeof buf, "loss %.6g above %.6g (the mean %.6g of the last %zu + %g x %.3g)",
           static_cast<double>(loss), limit, mean, n, o_.spikeSigma, sd);
  return buf;
}

void LossMonitor::accept(float loss) {
  if (!std::isfinite(loss))
    return;
  window_.push_back(loss);
  while (window_.size() > static_cast<size_t>(o_.spikeWindow))
    window_.pop_front();
}

double ClipStats::threshold() const {
  if (count < kWarmup)
    return INFINITY;
  return mean + kSigmas * std::sqrt(var);
}

void ClipStats::observe(double norm) {
  if (!std::isfinite(norm))
    return;
  norm = std::min(norm, threshold());
  if (count == 0) {
    mean = norm;
    var = 0;
  } else {
    double d = norm - mean;
    mean += (1 - kWeight) * d;
    var = kWeight * (var + (1 - kWeight) * d * d);
  }
  ++count;
}

bool RollbackCounter::add(int64_t step) {
  steps_.push_back(step);
  while (!steps_.empty() && steps_.front() <= step - o_.rollbackWindow)
    steps_.pop_front();
  return static_cast<int64_t>(steps_.size()) >= o_.maxRollbacks;
}

} // namespace hpcrt::driver
