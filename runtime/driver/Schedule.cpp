//===- Schedule.cpp - the learning rate of each step ----------------------===//
//
// k = step - 1; warmup W, total T: k < W gives lr * k / max(1, W); after it,
// linear gives lr * max(0, (T - k) / max(1, T - W)) and cosine
// lr * max(0, 0.5 * (1 + cos(pi * (k - W) / max(1, T - W)))), in double.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include "../core/Context.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace hpcrt::driver {

double LrSchedule::at(int64_t step) const {
  if (kind == "constant")
    return lr;
  double k = static_cast<double>(step - 1);
  double w = static_cast<double>(warmup), t = static_cast<double>(total);
  if (k < w)
    return lr * k / std::max(1.0, w);
  double decay = std::max(1.0, t - w);
  if (kind == "linear")
    return lr * std::max(0.0, (t - k) / decay);
  return lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * (k - w) / decay)));
}

std::string LrSchedule::describe() const {
  if (kind == "constant")
    return kind;
  return kind + ":" + std::to_string(warmup) + "," + std::to_string(total);
}

LrSchedule parseLrSchedule(const std::string &text) {
  LrSchedule s;
  if (text == "constant")
    return s;
  size_t colon = text.find(':');
  std::string kind = text.substr(0, colon);
  auto bad = [&]() {
    fail("--lr-schedule needs constant, cosine:WARMUP,TOTAL or linear:WARMUP,TOTAL, got '" +
         text + "'");
  };
  if ((kind != "cosine" && kind != "linear") || colon == std::string::npos)
    bad();
  std::string rest = text.substr(colon + 1);
  size_t comma = rest.find(',');
  if (comma == std::string::npos)
    bad();
  auto number = [&](const std::string &v) -> int64_t {
    char *end = nullptr;
    errno = 0;
    long long n = strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno || n < 0 || n > 1000000000000LL)
      bad();
    return n;
  };
  s.kind = kind;
  s.warmup = number(rest.substr(0, comma));
  s.total = number(rest.substr(comma + 1));
  return s;
}

} // namespace hpcrt::driver
