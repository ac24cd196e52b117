//===- Replan.cpp - re-planning a running job (--replan-every) ------------===//
//
// The Replanner of Replan.h: it follows the job's metrics file (only the
// bytes appended since its last read), starts the compiler on the newest
// profile line, reads the compiler's verdict (its exit status, whether it
// wrote the binary, its report's "replan" numbers) and decides when the job
// is at a checkpoint it can switch at. The JSON it reads is scanned for a
// few keys, not parsed: the launcher links no JSON library.
//
//===----------------------------------------------------------------------===//

#include "Replan.h"
#include "Launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hpc::launch {

namespace {

/// The N of a name `step-N`; -1 for any other name.
int64_t stepOfName(const std::string &name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return -1;
  return strtoll(name.c_str() + 5, nullptr, 10);
}

/// Where the value of `"key"` begins in `text` (after the colon and any
/// blanks); npos when no `"key":` is there.
size_t jsonValueAt(const std::string &text, const std::string &key) {
  const std::string quoted = "\"" + key + "\"";
  const char *blanks = " \t\r\n";
  for (size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at + 1)) {
    size_t colon = text.find_first_not_of(blanks, at + quoted.size());
    if (colon != std::string::npos && text[colon] == ':') // else a string value
      return text.find_first_not_of(blanks, colon + 1);
  }
  return std::string::npos;
}

/// The step of a metrics line that is a profile (`"profile": true`).
bool profileStep(const std::string &line, int64_t &step) {
  size_t at = jsonValueAt(line, "profile");
  double s = 0;
  if (at == std::string::npos || line.compare(at, 4, "true") != 0 ||
      !findJsonNumber(line, "step", s))
    return false;
  step = static_cast<int64_t>(s);
  return true;
}

/// mkdir -p.
bool makeDirectories(const std::string &path, std::string &error) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      error = prefix + ": " + strerror(errno);
      return false;
    }
    if (slash == std::string::npos)
      return true;
  }
}

bool isRegularFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// A whole (small) file's text; empty when it cannot be read.
std::string readText(const std::string &path) {
  std::string text;
  FILE *f = fopen(path.c_str(), "r");
  if (!f)
    return text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  fclose(f);
  return text;
}

/// "exited with status 2", "was killed by signal 9 (SIGKILL)".
std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return "was killed by " + describeSignal(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

} // namespace

int64_t highestStepDirectory(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  if (!d)
    return -1;
  int64_t highest = -1;
  while (dirent *e = readdir(d)) {
    int64_t step = stepOfName(e->d_name);
    struct stat st;
    if (step > highest && stat((dir + "/" + e->d_name).c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      highest = step;
  }
  closedir(d);
  return highest;
}

int64_t newestCheckpoint(const std::string &dir) {
  std::string latest = readText(dir + "/latest");
  latest.erase(latest.find_last_not_of(" \r\n") + 1);
  int64_t step = stepOfName(latest);
  return step >= 0 ? step : highestStepDirectory(dir);
}

bool findJsonNumber(const std::string &text, const std::string &key, double &out) {
  size_t at = jsonValueAt(text, key);
  if (at == std::string::npos)
    return false;
  const char *begin = text.c_str() + at;
  char *end = nullptr;
  double v = strtod(begin, &end);
  if (end == begin || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

std::string findJsonObject(const std::string &text, const std::string &key) {
  size_t begin = jsonValueAt(text, key);
  if (begin == std::string::npos || text[begin] != '{')
    return "";
  int depth = 0;
  bool inString = false;
  for (size_t i = begin; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return text.substr(begin, i + 1 - begin);
    }
  }
  return ""; // not closed
}

std::string Replan::prediction() const {
  if (!hasMeasured || !hasPredicted)
    return "";
  char buf[192];
  if (hasRunning)
    snprintf(buf, sizeof buf,
             "predicted %.3f ms a step against %.3f ms for the running plan, which measured "
             "%.3f ms",
             1e3 * predictedS, 1e3 * runningS, 1e3 * measuredS);
  else
    snprintf(buf, sizeof buf, "predicted %.3f ms a step against %.3f ms measured",
             1e3 * predictedS, 1e3 * measuredS);
  return buf;
}

//===----------------------------------------------------------------------===//
// The Replanner
//===----------------------------------------------------------------------===//

void Replanner::beginAttempt(bool resumes) {
  partial_.clear();
  offset_ = 0;
  lastSaves_.clear();
  struct stat st;
  if (resumes) {
    if (stat(o_.metrics.c_str(), &st) == 0)
      offset_ = st.st_size;
  } else if (truncate(o_.metrics.c_str(), 0) != 0 && errno != ENOENT) {
    fprintf(stderr, "hpc-launch: warning: cannot truncate %s (%s): re-planning may take a profile "
                    "of an earlier run\n",
            o_.metrics.c_str(), strerror(errno));
  }
}

bool Replanner::poll(const std::vector<int64_t> &saves, bool ending) {
  lastSaves_ = saves;
  if (pid_ > 0 && !ended_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_)
      reaped(pid_, status);
  }
  if (ended_)
    compileEnded();
  int64_t newest = -1;
  readProfiles(newest);
  // One compile at a time, and none while a plan waits: the profiles in
  // between are skipped. So is the profile of the last step: the job ends.
  bool last = ending || (o_.lastStep >= 0 && newest >= o_.lastStep);
  if (newest >= 0 && pid_ < 0 && !pending_ && !last)
    startCompile(newest);
  return switchReady(saves, ending);
}

bool Replanner::reaped(pid_t pid, int status) {
  if (pid_ <= 0 || pid != pid_ || ended_)
    return false;
  ended_ = true;
  status_ = status;
  endTime_ = realtimeNow();
  return true;
}

void Replanner::readProfiles(int64_t &newest) {
  int fd = open(o_.metrics.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return; // not written yet
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size < offset_) {
    offset_ = 0; // truncated behind hpc-launch's back: a new run's file
    partial_.clear();
  }
  char buf[65536];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof buf, offset_)) > 0) {
    partial_.append(buf, static_cast<size_t>(n));
    offset_ += n;
  }
  close(fd);
  size_t begin = 0;
  for (size_t end; (end = partial_.find('\n', begin)) != std::string::npos; begin = end + 1) {
    int64_t step;
    if (profileStep(partial_.substr(begin, end - begin), step))
      newest = std::max(newest, step);
  }
  partial_.erase(0, begin); // the last line, until it is complete
}

void Replanner::startCompile(int64_t step) {
  Replan r;
  r.step = step;
  r.status = "failed";
  std::string dir = planDir(), stem = dir + "/plan-" + std::to_string(step);
  std::string binary = stem + ".bin", report = stem + ".json";
  if (binary == running_)
    return; // the job runs that plan already (resumed before its step)
  std::string why;
  if (!makeDirectories(dir, why)) {
    fprintf(stderr, "hpc-launch: warning: re-planning at step %lld failed (cannot make %s); "
                    "keeping the running plan\n",
            static_cast<long long>(step), why.c_str());
    replans_.push_back(r);
    return;
  }
  // Whether the compiler wrote a plan is whether the binary is there.
  unlink(binary.c_str());
  unlink(report.c_str());
  char threshold[32];
  snprintf(threshold, sizeof threshold, "%g", o_.threshold);
  std::vector<std::string> command = o_.compile;
  for (const std::string &a :
       {std::string("--auto-parallel"), "--recalibrate=" + o_.metrics + "@" + std::to_string(step),
        std::string("--replan-threshold=") + threshold, "--report=" + report, std::string("-o"),
        binary})
    command.push_back(a);
  fprintf(stderr, "hpc-launch: re-planning at step %lld\n", static_cast<long long>(step));
  // Never outliving hpc-launch; its output is hpc-launch's stderr.
  pid_t pid = startInGroup(command, SIGKILL, /*stdoutToStderr=*/true);
  if (pid < 0) {
    fprintf(stderr, "hpc-launch: warning: re-planning at step %lld failed (cannot start %s: %s); "
                    "keeping the running plan\n",
            static_cast<long long>(step), command[0].c_str(), strerror(errno));
    replans_.push_back(r);
    return;
  }
  pid_ = pid;
  ended_ = false;
  startTime_ = realtimeNow();
  r.status = "compiling";
  replans_.push_back(r);
}

void Replanner::readVerdict(Replan &r) const {
  std::string section =
      findJsonObject(readText(planDir() + "/plan-" + std::to_string(r.step) + ".json"), "replan");
  r.hasMeasured = findJsonNumber(section, "measured_step_s", r.measuredS);
  r.hasPredicted = findJsonNumber(section, "predicted_step_s", r.predictedS);
  r.hasGain = findJsonNumber(section, "gain", r.gain);
  // hpc-opt's gain is against the running plan costed on the same model.
  r.hasRunning = findJsonNumber(section, "running_predicted_step_s", r.runningS);
}

void Replanner::switchTimed(double firstStep) {
  timing_ = false;
  if (firstStep > switchStop_)
    switchCostS_ = firstStep - switchStop_;
}

void Replanner::compileEnded() {
  Replan &r = replans_.back();
  pid_ = -1;
  ended_ = false;
  r.compileS = endTime_ - startTime_;
  readVerdict(r);
  std::string stem = planDir() + "/plan-" + std::to_string(r.step);
  long long step = static_cast<long long>(r.step);
  if (!WIFEXITED(status_) || WEXITSTATUS(status_) != 0) {
    r.status = "failed";
    fprintf(stderr, "hpc-launch: warning: re-planning at step %lld failed (the compiler %s); "
                    "keeping the running plan\n",
            step, describeStatus(status_).c_str());
    return;
  }
  if (!isRegularFile(stem + ".bin")) {
    r.status = "kept";
    std::string why = r.prediction();
    fprintf(stderr, "hpc-launch: re-planning at step %lld kept the running plan%s\n", step,
            why.empty() ? "" : (" (" + why + ")").c_str());
    return;
  }
  r.status = "ready";
  r.binary = stem + ".bin";
  pending_ = true;
  savesAtReady_ = lastSaves_;
  checkpointed_ = newestCheckpoint(o_.ckptDir) >= r.step;
  fprintf(stderr, "hpc-launch: re-planned at step %lld: %s (the compiler's report: %s.json)\n",
          step, r.binary.c_str(), stem.c_str());
}

/// A plan waits and the job has a checkpoint at or past the profile's
/// step that it did not have when the compile started: one that existed
/// when the plan was ready, or one every rank wrote since. Not when the
/// job is about to finish (a rank beat `done`, or the checkpoint is of
/// its last step): resuming it would only repeat its end.
bool Replanner::switchReady(const std::vector<int64_t> &saves, bool ending) {
  if (!pending_ || ending)
    return false;
  bool saved = !savesAtReady_.empty() && saves.size() == savesAtReady_.size();
  for (size_t i = 0; saved && i < saves.size(); ++i)
    saved = saves[i] > savesAtReady_[i];
  if (!checkpointed_ && !saved)
    return false;
  if (o_.lastStep < 0)
    return true;
  int64_t at = newestCheckpoint(o_.ckptDir);
  if (at >= o_.lastStep)
    return false;
  // Worth it only when the steps left save more than the switch costs.
  Replan &r = replans_.back();
  double perStep = r.hasMeasured && r.hasGain ? r.measuredS * r.gain
                   : r.hasMeasured && r.hasPredicted ? r.measuredS - r.predictedS
                                                     : 0;
  if (perStep > 0 && double(o_.lastStep - at) * perStep < switchCostS_) {
    if (!r.tooLate)
      fprintf(stderr,
              "hpc-launch: not switching at step %lld: the %lld steps left would save "
              "%.2f s, a switch costs about %.2f s\n",
              static_cast<long long>(at), static_cast<long long>(o_.lastStep - at),
              double(o_.lastStep - at) * perStep, switchCostS_);
    r.tooLate = true;
    return false;
  }
  return true;
}

void Replanner::stopCompile() {
  if (pid_ <= 0)
    return;
  int status = 0;
  if (!ended_ && waitpid(pid_, &status, WNOHANG) == pid_)
    reaped(pid_, status); // it ended on its own: its verdict counts
  if (!ended_) {
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    // Not a verdict of the compiler's: it was stopped.
    replans_.back().status = "cancelled";
    replans_.back().compileS = realtimeNow() - startTime_;
    pid_ = -1;
    return;
  }
  compileEnded();
}

void Replanner::endAttempt() {
  stopCompile();
  if (pending_)
    replans_.back().status = "cancelled";
  pending_ = false;
}

const Replan &Replanner::switched() {
  Replan &r = replans_.back();
  r.status = "switched";
  r.switchedAt = newestCheckpoint(o_.ckptDir);
  timing_ = true;
  running_ = r.binary;
  pending_ = false;
  return r;
}

int Replanner::switches() const {
  return static_cast<int>(std::count_if(replans_.begin(), replans_.end(),
                                        [](const Replan &r) { return r.status == "switched"; }));
}

} // namespace hpc::launch
