//===- Args.cpp - command-line flags of the model executable --------------===//
//
// ArgCursor and the value parsers of Args.h (strtoll/strtod with the whole
// text consumed and ranges checked).
//
//===----------------------------------------------------------------------===//

#include "Args.h"

#include "../core/Context.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

#include <sched.h>

namespace hpcrt::driver {

bool ArgCursor::next() {
  if (++i_ >= argc_)
    return false;
  arg_ = argv_[i_];
  flag_ = arg_;
  hasInline_ = false;
  if (arg_.rfind("--", 0) == 0 && arg_.find('=') != std::string::npos) {
    flag_ = arg_.substr(0, arg_.find('='));
    inline_ = arg_.substr(arg_.find('=') + 1);
    hasInline_ = true;
  }
  return true;
}

std::string ArgCursor::value() {
  if (hasInline_)
    return inline_;
  if (i_ + 1 >= argc_)
    fail(flag_ + " needs a value");
  return argv_[++i_];
}

std::string ArgCursor::path() { return requirePath(flag_, value()); }

void ArgCursor::noValue() const {
  if (hasInline_)
    fail(flag_ + " takes no value");
}

namespace {
/// An integer in [lo, 1e9], or fail() naming what `flag` needs.
int64_t parseInteger(const std::string &flag, const std::string &v, long long lo,
                     const char *what) {
  char *end = nullptr;
  errno = 0;
  long long n = strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || n < lo || n > 1000000000)
    fail(flag + " needs " + what + ", got '" + v + "'");
  return n;
}
} // namespace

int64_t parsePositive(const std::string &flag, const std::string &v) {
  return parseInteger(flag, v, 1, "a positive integer");
}

int64_t parseCount(const std::string &flag, const std::string &v) {
  return parseInteger(flag, v, 0, "a non-negative integer");
}

const std::string &requirePath(const std::string &flag, const std::string &v) {
  if (v.empty())
    fail(flag + " needs a path, got ''");
  return v;
}

namespace {
/// The CPUs this process may run on (its affinity mask), at least 1.
int64_t usableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}
} // namespace

int64_t parseThreads(const std::string &flag, const std::string &v) {
  int64_t n = parsePositive(flag, v);
  int64_t cpus = usableCpus();
  if (n > 4 * cpus)
    fail(flag + " " + v + ": at most " + std::to_string(4 * cpus) + " (4x the " +
         std::to_string(cpus) + " CPU" + (cpus == 1 ? "" : "s") + " this process may use)");
  return n;
}

double parseNonNegative(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  double d = strtod(v.c_str(), &end);
  if (v.empty() || *end || errno || !std::isfinite(d) || d < 0)
    fail(flag + " needs a non-negative number, got '" + v + "'");
  return d;
}

std::pair<std::string, std::string> parseNameValue(const std::string &flag,
                                                   const std::string &v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    fail(flag + " needs NAME=FILE, got '" + v + "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

std::vector<int64_t> parsePositiveList(const std::string &flag, const std::string &v) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= v.size()) {
    size_t j = v.find(',', i);
    if (j == std::string::npos)
      j = v.size();
    out.push_back(parsePositive(flag, v.substr(i, j - i)));
    i = j + 1;
  }
  return out;
}

} // namespace hpcrt::driver
