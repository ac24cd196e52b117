//===- Args.h - command-line flags of the model executable ------*- C++ -*-===//
//
// The flag syntax every command shares (`--flag value` or `--flag=value`)
// and the value parsers, each failing with one line naming the flag.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_ARGS_H
#define HPCRT_DRIVER_ARGS_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpcrt::driver {

/// Walks argv from `first`: each call of next() yields one flag, value()
/// its value (inline after '=' or the next argument).
class ArgCursor {
public:
  ArgCursor(int argc, char **argv, int first) : argc_(argc), argv_(argv), i_(first - 1) {}
  /// Advances to the next flag; false at the end.
  bool next();
  const std::string &flag() const { return flag_; }
  /// The argument as written ("--steps=5").
  const std::string &arg() const { return arg_; }
  std::string value();
  /// value() for a flag that names a file or directory: an empty one is an
  /// error, never "not given".
  std::string path();
  /// Fails when the flag was given an inline value.
  void noValue() const;

private:
  int argc_;
  char **argv_;
  int i_;
  std::string arg_, flag_, inline_;
  bool hasInline_ = false;
};

/// A positive integer up to 1e9.
int64_t parsePositive(const std::string &flag, const std::string &v);
/// A non-negative integer up to 1e9.
int64_t parseCount(const std::string &flag, const std::string &v);
/// `v` itself; fails when it is empty ("--weights needs a path, got ''").
const std::string &requirePath(const std::string &flag, const std::string &v);
/// A thread count: a positive integer up to 4x the CPUs this process may
/// run on (more cannot help, and a library asked for 100,000 threads may
/// fail to make them and hang when it shuts down).
int64_t parseThreads(const std::string &flag, const std::string &v);
/// A finite non-negative number.
double parseNonNegative(const std::string &flag, const std::string &v);
/// NAME=VALUE with both parts non-empty.
std::pair<std::string, std::string> parseNameValue(const std::string &flag,
                                                   const std::string &v);
/// A comma-separated list of positive integers ("1,20").
std::vector<int64_t> parsePositiveList(const std::string &flag, const std::string &v);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_ARGS_H
