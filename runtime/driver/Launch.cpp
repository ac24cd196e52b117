//===- Launch.cpp - the job's side of hpc-launch --------------------------===//

#include "Launch.h"

#include "Args.h"

#include <cstdio>
#include <cstdlib>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hpcrt::driver {

int64_t attemptFromEnvironment() {
  const char *v = getenv("HPC_ATTEMPT");
  return v && *v ? parseCount("HPC_ATTEMPT", v) : 0;
}

std::string restartReason() {
  const char *v = getenv("HPC_RESTART_REASON");
  return v ? v : "";
}

Heartbeat::Heartbeat() {
  const char *v = getenv("HPC_HEARTBEAT");
  if (v && *v) {
    path_ = v;
    tmp_ = path_ + ".tmp";
  }
}

std::string Heartbeat::seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

void Heartbeat::alive() const {
  if (!path_.empty())
    utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);
}

void Heartbeat::beat(const std::string &line) {
  if (path_.empty())
    return;
  // Best effort: a heartbeat that cannot be written reads as a hang to
  // hpc-launch, which names the rank; the run itself goes on.
  int fd = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  std::string text = line + "\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (ok)
    rename(tmp_.c_str(), path_.c_str());
}

} // namespace hpcrt::driver
