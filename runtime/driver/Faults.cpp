//===- Faults.cpp - HPC_FAULT: the fault injection of the tests -----------===//

#include "Faults.h"

#include "Args.h"
#include "Launch.h"
#include "Process.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

namespace hpcrt::driver {

namespace {
struct KindName {
  const char *name;
  FaultKind kind;
  bool located; ///< RANK:STEP or NODE:STEP
};
constexpr KindName kKinds[] = {
    {"nan-grad", FaultKind::NanGrad, false},
    {"loss-spike", FaultKind::LossSpike, false},
    {"kill", FaultKind::Kill, false},
    {"kill-rank", FaultKind::KillRank, true},
    {"kill-node", FaultKind::KillNode, true},
    {"hang-rank", FaultKind::HangRank, true},
    {"crash-in-checkpoint", FaultKind::CrashInCheckpoint, false},
};
constexpr const char *kExpected =
    "nan-grad@STEP, loss-spike@STEP, kill@STEP, kill-rank@RANK:STEP, kill-node@NODE:STEP, "
    "hang-rank@RANK:STEP or crash-in-checkpoint@STEP, comma-separated";

Fault parseFault(const std::string &item) {
  size_t at = item.find('@');
  std::string name = item.substr(0, at);
  for (const KindName &k : kKinds) {
    if (name != k.name)
      continue;
    if (at == std::string::npos)
      break;
    Fault f{k.kind};
    std::string where = item.substr(at + 1);
    if (k.located) {
      size_t colon = where.find(':');
      if (colon == std::string::npos)
        fail("HPC_FAULT: " + name + " needs " +
             (k.kind == FaultKind::KillNode ? "NODE" : "RANK") + ":STEP, got '" + item + "'");
      f.where = parseCount("HPC_FAULT " + name, where.substr(0, colon));
      where = where.substr(colon + 1);
    }
    f.step = parsePositive("HPC_FAULT " + name, where);
    return f;
  }
  fail("HPC_FAULT: unknown fault '" + item + "' (expected " + kExpected + ")");
}
} // namespace

Faults::Faults(const std::string &spec, int64_t attempt) : armed_(attempt == 0) {
  size_t start = 0;
  while (start <= spec.size() && !spec.empty()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? comma : comma - start);
    faults_.push_back(parseFault(item));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
}

Faults Faults::fromEnvironment() {
  const char *v = getenv("HPC_FAULT");
  return Faults(v ? v : "", attemptFromEnvironment());
}

bool Faults::fires(FaultKind kind, int64_t step, int rank, int node) const {
  if (!armed_)
    return false;
  for (const Fault &f : faults_) {
    if (f.kind != kind || f.step != step)
      continue;
    if ((kind == FaultKind::KillRank || kind == FaultKind::HangRank) && f.where != rank)
      continue;
    if (kind == FaultKind::KillNode && f.where != node)
      continue;
    return true;
  }
  return false;
}

bool Faults::lists(FaultKind kind) const {
  for (const Fault &f : faults_)
    if (f.kind == kind)
      return true;
  return false;
}

void Faults::killSelf() {
  fflush(stdout);
  fflush(stderr);
  raise(SIGKILL);
  _exit(137); // not reached
}

void Faults::hang() {
  fflush(stdout);
  fflush(stderr);
  for (;;)
    pause();
}

} // namespace hpcrt::driver
