//===- ProcFiles.h - fields of /proc files, shared by the runtime and hpc-calibrate -*- C++ -*-===//
//
// hpc-calibrate names a cluster file's device by the CPU's "model name" and
// the runtime's metrics name the host the same way, so that
// plan_vs_measured.py can tell a plan for another machine: one reader for
// both. Plain C++ (no exceptions needed).
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COMMON_PROCFILES_H
#define HPC_COMMON_PROCFILES_H

#include <fstream>
#include <string>

namespace hpc {
namespace proc {

/// The value after "KEY:" on the first line of `file` that starts with KEY,
/// without surrounding blanks ("" when there is none).
inline std::string field(const char *file, const char *key) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      size_t colon = line.find(':');
      size_t start = colon == std::string::npos ? colon : line.find_first_not_of(" \t", colon + 1);
      if (start == std::string::npos)
        return "";
      return line.substr(start, line.find_last_not_of(" \t\r") + 1 - start);
    }
  return "";
}

/// This machine's CPU: "model name" of /proc/cpuinfo ("" when unknown).
inline std::string cpuName() { return field("/proc/cpuinfo", "model name"); }

} // namespace proc
} // namespace hpc

#endif // HPC_COMMON_PROCFILES_H
