//===- hpc-launch.cpp - run a training job and restart it when it fails ---===//
//
// `hpc-launch -n N [options] -- PROGRAM ARGS...` runs PROGRAM on N ranks
// under mpirun (or --launcher CMD), each rank through hpc-launch's own rank
// wrapper (RankWrapper.cpp), and watches the job: a rank whose program
// exits non-zero or is killed, or whose heartbeat file grows older than
// --heartbeat-timeout, fails the attempt. hpc-launch names the rank and the
// cause in one line, stops the whole job (SIGTERM to the launcher's
// process group, SIGKILL 5 s later) and, while --max-restarts allows,
// starts it again with --resume, so that the program continues from the
// newest checkpoint of its --ckpt-dir: torchrun's restart loop for mpirun
// jobs. Each recovery is timed from the failure to the first step of the
// new attempt on every rank, split into detecting and stopping, restarting
// and loading, and the first step; --report writes it all as JSON. With
// --replan-every, the job's profiles go to the compiler, and a plan it
// predicts faster replaces PROGRAM at a checkpoint: the job is stopped and
// resumed on it (Replan.h).
//
// Plain C++17 and POSIX (Linux: prctl, inotify); no MLIR, no runtime.
// docs/launch.md is the user's description of all of this.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"
#include "Replan.h"
#include "common/Json.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

using namespace hpc::launch;

namespace {

constexpr const char *kUsage =
    "usage: hpc-launch -n N [--max-restarts K] [--heartbeat-timeout S] [--launcher CMD]\n"
    "                  [--report FILE.json] [--replan-every K --replan-compile CMD\n"
    "                  [--replan-threshold F]] [mpirun options] -- PROGRAM ARGS...\n"
    "\n"
    "Runs PROGRAM ARGS... on N ranks under mpirun and watches every rank (how its\n"
    "program ends, and its heartbeat file). When a rank fails or hangs, stops the\n"
    "whole job and starts it again with --resume (the program continues from the\n"
    "newest checkpoint of its --ckpt-dir), at most K times. docs/launch.md.\n"
    "\n"
    "  -n N                   the number of ranks (required)\n"
    "  --max-restarts K       restarts after failures (default 3; 0: never restart)\n"
    "  --heartbeat-timeout S  seconds without a heartbeat after which a rank is hung\n"
    "                         (default 300)\n"
    "  --launcher CMD         the launcher command, split on whitespace (default mpirun)\n"
    "  --report FILE.json     write the attempts, failures, recovery times and re-plans\n"
    "  --replan-every K       re-plan during training: the job profiles every K steps\n"
    "                         (--profile-every K is added to ARGS); each profile goes to\n"
    "                         the compiler, and a plan it predicts faster replaces\n"
    "                         PROGRAM at the job's next checkpoint (ARGS need --metrics\n"
    "                         FILE and --ckpt-dir DIR; plans go to DIR/replan)\n"
    "  --replan-compile CMD   the compiler command of the job's model without plan flags,\n"
    "                         split on whitespace (hpc-opt MODEL --train ... --cluster=C)\n"
    "  --replan-threshold F   the predicted gain (a fraction in (0,1), default 0.1)\n"
    "                         below which the running plan is kept\n"
    "  --help                 this text\n"
    "\n"
    "Every other option before `--` (--oversubscribe, -x VAR, --bind-to none, ...)\n"
    "goes to the launcher, after `-n N`.\n";

/// How often the launcher looks at the job when no file event wakes it.
constexpr int kPollMs = 50;
/// How long a stopped job gets between SIGTERM and SIGKILL.
constexpr double kStopGraceS = 5.0;

/// The signal that told hpc-launch to stop (0: none yet).
volatile sig_atomic_t gSignal = 0;

/// The handler of SIGINT, SIGTERM and SIGHUP: remembers the first.
void noteSignal(int signum) {
  if (!gSignal)
    gSignal = signum;
}

//===----------------------------------------------------------------------===//
// The command line
//===----------------------------------------------------------------------===//

/// The command line.
struct Options {
  int ranks = 0; ///< 0: not given
  int maxRestarts = 3;
  double heartbeatTimeout = 300;
  std::vector<std::string> launcher{"mpirun"};
  std::string report;
  std::vector<std::string> passed;  ///< options for the launcher
  std::vector<std::string> program; ///< PROGRAM ARGS...
  bool help = false;
  int replanEvery = 0; ///< 0: no re-planning
  double replanThreshold = 0.1;
  bool replanThresholdGiven = false;
  std::vector<std::string> replanCompile; ///< empty: not given
};

/// The words of `text`, split on whitespace.
std::vector<std::string> splitWords(const std::string &text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isspace(static_cast<unsigned char>(text[i])))
      ++i;
    size_t begin = i;
    while (i < text.size() && !isspace(static_cast<unsigned char>(text[i])))
      ++i;
    if (i > begin)
      words.push_back(text.substr(begin, i - begin));
  }
  return words;
}

/// An integer flag value from `min` to `max`.
bool parseInteger(const std::string &flag, const std::string &value, long min, long max, int &out,
                  std::string &error) {
  char *end = nullptr;
  errno = 0;
  long n = strtol(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || n < min || n > max) {
    error = flag + ": expected " +
            (min == 0 ? std::string("a count (0 or more)") : std::string("a positive integer")) +
            ", got '" + value + "'";
    return false;
  }
  out = static_cast<int>(n);
  return true;
}

/// A positive, finite number of seconds.
bool parseSeconds(const std::string &flag, const std::string &value, double &out,
                  std::string &error) {
  char *end = nullptr;
  errno = 0;
  double s = strtod(value.c_str(), &end);
  if (value.empty() || *end || errno || !std::isfinite(s) || s <= 0) {
    error = flag + ": expected a positive number of seconds, got '" + value + "'";
    return false;
  }
  out = s;
  return true;
}

/// A fraction strictly between 0 and 1.
bool parseFraction(const std::string &flag, const std::string &value, double &out,
                   std::string &error) {
  char *end = nullptr;
  errno = 0;
  double f = strtod(value.c_str(), &end);
  if (value.empty() || *end || errno || !(f > 0 && f < 1)) {
    error = flag + ": expected a fraction between 0 and 1, got '" + value + "'";
    return false;
  }
  out = f;
  return true;
}

/// A command line split on whitespace (no quoting), not empty.
bool parseCommand(const std::string &flag, const std::string &value,
                  std::vector<std::string> &out, std::string &error) {
  out = splitWords(value);
  if (out.empty())
    error = flag + ": expected a command, got '" + value + "'";
  return !out.empty();
}

/// Sets the value of one of hpc-launch's own flags.
bool setOption(Options &o, const std::string &flag, const std::string &value, std::string &error) {
  if (flag == "-n")
    return parseInteger(flag, value, 1, 1 << 20, o.ranks, error);
  if (flag == "--max-restarts")
    return parseInteger(flag, value, 0, 1 << 20, o.maxRestarts, error);
  if (flag == "--heartbeat-timeout")
    return parseSeconds(flag, value, o.heartbeatTimeout, error);
  if (flag == "--launcher")
    return parseCommand(flag, value, o.launcher, error);
  if (flag == "--replan-every")
    return parseInteger(flag, value, 1, INT_MAX, o.replanEvery, error);
  if (flag == "--replan-threshold") {
    o.replanThresholdGiven = true;
    return parseFraction(flag, value, o.replanThreshold, error);
  }
  if (flag == "--replan-compile")
    return parseCommand(flag, value, o.replanCompile, error);
  if (value.empty()) {
    error = flag + ": expected a file name";
    return false;
  }
  o.report = value;
  return true;
}

/// Whether `args` hold `flag`, alone or as `flag=VALUE`; `value` gets the
/// value where there is one.
bool hasFlag(const std::vector<std::string> &args, const std::string &flag,
             std::string *value = nullptr) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      if (value && i + 1 < args.size())
        *value = args[i + 1];
      return true;
    }
    if (args[i].rfind(flag + "=", 0) == 0) {
      if (value)
        *value = args[i].substr(flag.size() + 1);
      return true;
    }
  }
  return false;
}

/// Checks --replan-every against the other flags and the job's arguments,
/// and has the job profile every K steps (unless ARGS say how often).
bool checkReplanning(Options &o, std::string &error) {
  if (!o.replanEvery) {
    if (o.replanThresholdGiven)
      error = "--replan-threshold needs --replan-every";
    else if (!o.replanCompile.empty())
      error = "--replan-compile needs --replan-every";
    return error.empty();
  }
  std::string metrics, ckptDir;
  if (!hasFlag(o.program, "--metrics", &metrics) || metrics.empty())
    error = "--replan-every needs the job's --metrics FILE";
  else if (!hasFlag(o.program, "--ckpt-dir", &ckptDir) || ckptDir.empty())
    error = "--replan-every needs the job's --ckpt-dir DIR";
  else if (o.replanCompile.empty())
    error = "--replan-every needs --replan-compile CMD (the compiler command of the job's model)";
  if (!error.empty())
    return false;
  if (!hasFlag(o.program, "--profile-every")) {
    o.program.push_back("--profile-every");
    o.program.push_back(std::to_string(o.replanEvery));
  }
  return true;
}

/// Reads the flags; false and a one-line reason for a bad one.
bool parseOptions(int argc, char **argv, Options &o, std::string &error) {
  static const char *const kOwn[] = {
      "-n",           "--max-restarts",   "--heartbeat-timeout", "--launcher",
      "--report",     "--replan-every",   "--replan-compile",    "--replan-threshold"};
  bool separator = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      separator = true;
      o.program.assign(argv + i + 1, argv + argc);
      break;
    }
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    std::string flag = a, value;
    size_t eq = a.find('=');
    bool inlineValue = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inlineValue) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    }
    if (std::find(std::begin(kOwn), std::end(kOwn), flag) == std::end(kOwn)) {
      o.passed.push_back(a); // the launcher's
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) {
        error = flag + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (!setOption(o, flag, value, error))
      return false;
  }
  if (o.help)
    return true;
  if (o.ranks == 0)
    error = "missing -n N (the number of ranks)";
  else if (!separator)
    error = "missing '--' before the program (hpc-launch -n N [options] -- PROGRAM ARGS...)";
  else if (o.program.empty())
    error = "no program after '--'";
  return error.empty() && checkReplanning(o, error);
}

/// Whether the checkpoint directory holds a `step-N` directory (what the
/// program's --resume continues from).
bool holdsCheckpoint(const std::string &dir) { return highestStepDirectory(dir) >= 0; }

//===----------------------------------------------------------------------===//
// Failures and their recovery
//===----------------------------------------------------------------------===//

/// Checkpoints written: by one rank (its heartbeats), or by the job (the
/// count and seconds of the slowest rank, since ranks write at once, and
/// the bytes of all).
struct Saves {
  int64_t count = 0;
  double seconds = 0;
  uint64_t bytes = 0;
};

/// One failed attempt, and the recovery of the attempt after it.
struct Failure {
  int attempt = 0;
  int rank = -1;       ///< -1: no rank is to blame (the launcher failed)
  std::string cause;   ///< "killed by signal 9 (SIGKILL)", ...
  int64_t step = -1;   ///< the rank's last heartbeat's step; -1: none
  double failTime = 0; ///< the rank's end, or when the hang or the launcher's end was seen
  double downTime = 0; ///< when the job was stopped and reaped
  bool ready = false;  ///< every rank of the next attempt is set up
  double readyTime = 0;
  double loadS = 0;       ///< the longest checkpoint load among the ranks
  bool recovered = false; ///< every rank of the next attempt took a step
  double firstTime = 0;

  /// "rank 1 failed: CAUSE" or "job failed: CAUSE".
  std::string failedLine() const {
    return (rank >= 0 ? "rank " + std::to_string(rank) : std::string("job")) + " failed: " + cause;
  }
  /// The text of the next attempt's --restart-reason.
  std::string reason() const {
    if (rank < 0)
      return cause;
    if (cause.rfind("no heartbeat", 0) == 0)
      return "rank " + std::to_string(rank) + " sent " + cause;
    return "rank " + std::to_string(rank) + " " + cause;
  }
};

/// One heartbeat line: `ready STEP LOAD_S`, or `step`, `ckpt` or `done`
/// with `STEP SAVES SAVE_S BYTES` (runtime/driver/Launch.h; a job of
/// another kind may leave the last three out).
struct Beat {
  std::string kind;
  int64_t step = -1;
  double loadS = 0;
  Saves saves; ///< the checkpoints the rank has written in this attempt
};

/// Reads a heartbeat line; false when it is none of the four.
bool parseBeat(const std::string &line, Beat &out) {
  char kind[16];
  long long step = 0, saves = 0;
  double seconds = 0;
  unsigned long long bytes = 0;
  int n = sscanf(line.c_str(), "%15s %lld %lf", kind, &step, &seconds);
  if (n < 2)
    return false;
  out.kind = kind;
  out.step = step;
  out.loadS = 0;
  out.saves = Saves();
  if (out.kind == "ready") {
    out.loadS = n == 3 ? seconds : 0;
    return true;
  }
  if (sscanf(line.c_str(), "%*15s %*s %lld %lf %llu", &saves, &seconds, &bytes) == 3)
    out.saves = Saves{saves, seconds, bytes};
  return out.kind == "step" || out.kind == "ckpt" || out.kind == "done";
}

/// What the launcher knows of one rank of the running attempt.
struct RankView {
  bool beaten = false; ///< a heartbeat file was read
  std::string line;    ///< its text
  double beatTime = 0; ///< its modification time
  Beat beat;           ///< its meaning (kind empty: unreadable)
  bool ready = false;  ///< the recovery's marks: set up ...
  double readyTime = 0;
  int64_t readyStep = 0;
  double loadS = 0;
  bool stepped = false; ///< ... and past its first step
  double steppedTime = 0;
  bool exited = false; ///< its exit file was read
  ExitRecord exit;
};

/// Reads a small file and its modification time; false when it is absent.
bool readSmallFile(const std::string &path, std::string &text, double &mtime) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  char buf[256];
  ssize_t n = fstat(fd, &st) == 0 ? read(fd, buf, sizeof buf - 1) : -1;
  close(fd);
  if (n < 0)
    return false;
  text.assign(buf, static_cast<size_t>(n));
  mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  return true;
}

/// nanosleep for `s` seconds.
void sleepSeconds(double s) {
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  nanosleep(&ts, nullptr);
}

/// SIGKILL to every process whose parent is hpc-launch (orphans of the job
/// that hpc-launch, a child subreaper, inherited).
void killChildren() {
  DIR *d = opendir("/proc");
  if (!d)
    return;
  pid_t self = getpid();
  while (dirent *e = readdir(d)) {
    pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0)
      continue;
    std::string text;
    double unused;
    if (!readSmallFile(std::string("/proc/") + e->d_name + "/stat", text, unused))
      continue;
    size_t paren = text.rfind(')');
    char state;
    int ppid = 0;
    if (paren != std::string::npos &&
        sscanf(text.c_str() + paren + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
      kill(pid, SIGKILL);
  }
  closedir(d);
}

//===----------------------------------------------------------------------===//
// One attempt
//===----------------------------------------------------------------------===//

/// How an attempt ended; Switched: stopped to continue on a new plan.
enum class Outcome { Finished, Failed, Interrupted, Switched };

/// One run of the job: started, watched, stopped.
class Attempt {
public:
  /// `recovering`: the failure this attempt recovers from (null for the
  /// first and after a switch), whose recovery times it fills in;
  /// `replanner`: with --replan-every, else null.
  Attempt(const Options &o, std::string dir, Failure *recovering, Replanner *replanner)
      : o_(o), dir_(std::move(dir)), recovering_(recovering), replanner_(replanner),
        ranks_(static_cast<size_t>(o.ranks)) {}
  ~Attempt() {
    if (inotify_ >= 0)
      close(inotify_);
  }

  /// Starts `command` in a process group of its own; false after an error line.
  bool start(const std::vector<std::string> &command);
  /// Watches the job until it finishes, fails (`failure` says how), is to
  /// switch to a new plan or hpc-launch is told to stop; the job is
  /// stopped and reaped on return.
  Outcome watch(Failure &failure);
  /// The checkpoints the attempt's ranks said they wrote.
  Saves saves() const;

private:
  /// Waits up to kPollMs for file events in the attempt's directory and
  /// reads the files they name.
  void waitForEvents();
  void readNamed(const std::string &name);
  /// Reads rank `rank`'s heartbeat file (when it changed) or exit file.
  void readHeartbeat(int rank);
  void readExit(int rank);
  /// Reads every rank's files.
  void scanAll();
  void noteBeat(RankView &v, double time);
  void checkRecovered();
  bool earliestExitFailure(int &rank) const;
  bool findHang(Failure &failure);
  /// Each rank's checkpoints written, and whether a rank finished training
  /// (what the replanner's switch waits for).
  std::vector<int64_t> rankSaves() const;
  bool anyRankDone() const;
  bool allRanksDone() const;
  bool reapChildren();
  double stop(int signum);
  void blameExit(Failure &failure, int rank);

  const Options &o_;
  std::string dir_;
  Failure *recovering_;
  Replanner *replanner_;
  std::vector<RankView> ranks_;
  pid_t pid_ = -1; ///< the launcher, leader of the job's process group
  bool launcherDone_ = false;
  int launcherStatus_ = 0;
  double launcherTime_ = 0;
  bool noChildren_ = false;
  double startTime_ = 0;
  int inotify_ = -1;
};

bool Attempt::start(const std::vector<std::string> &command) {
  inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ >= 0 &&
      inotify_add_watch(inotify_, dir_.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    close(inotify_);
    inotify_ = -1; // polling alone still works
  }
  startTime_ = realtimeNow();
  // Should hpc-launch itself be killed, the launcher is told to stop.
  pid_ = startInGroup(command, SIGTERM, /*stdoutToStderr=*/false);
  if (pid_ < 0) {
    printError("cannot start " + command[0] + ": " + strerror(errno));
    return false;
  }
  return true;
}

void Attempt::waitForEvents() {
  pollfd fd{inotify_, POLLIN, 0};
  if (poll(&fd, inotify_ >= 0 ? 1 : 0, kPollMs) <= 0)
    return;
  alignas(inotify_event) char buf[4096];
  ssize_t n;
  while ((n = read(inotify_, buf, sizeof buf)) > 0) {
    for (char *p = buf; p < buf + n;) {
      auto *e = reinterpret_cast<inotify_event *>(p);
      if (e->len)
        readNamed(e->name);
      p += sizeof(inotify_event) + e->len;
    }
  }
}

/// Reads the file an inotify event names, at once (a heartbeat may be
/// replaced by the next one soon).
void Attempt::readNamed(const std::string &name) {
  for (bool heartbeat : {true, false}) {
    std::string prefix = heartbeat ? "heartbeat-" : "exit-";
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
      continue;
    long rank = strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (rank >= 0 && rank < o_.ranks) {
      if (heartbeat)
        readHeartbeat(static_cast<int>(rank));
      else
        readExit(static_cast<int>(rank));
    }
  }
}

void Attempt::readHeartbeat(int rank) {
  RankView &v = ranks_[static_cast<size_t>(rank)];
  std::string text;
  double mtime = 0;
  if (!readSmallFile(dir_ + "/" + heartbeatFileName(rank), text, mtime))
    return;
  if (v.beaten && text == v.line && mtime == v.beatTime)
    return;
  v.beaten = true;
  v.line = text;
  v.beatTime = mtime;
  Beat beat;
  if (parseBeat(text, beat)) {
    v.beat = beat;
    noteBeat(v, mtime);
  }
}

void Attempt::readExit(int rank) {
  RankView &v = ranks_[static_cast<size_t>(rank)];
  std::string text;
  double mtime = 0;
  if (!v.exited && readSmallFile(dir_ + "/" + exitFileName(rank), text, mtime))
    v.exited = ExitRecord::parse(text, v.exit);
}

void Attempt::scanAll() {
  for (int r = 0; r < o_.ranks; ++r) {
    readHeartbeat(r);
    readExit(r);
  }
}

/// The recovery's marks of a rank: its `ready` beat, then its first beat
/// past the ready step. A `ready` replaced before it could be read reads
/// as set up at the first beat seen (its load time unknown: 0).
void Attempt::noteBeat(RankView &v, double time) {
  if (!recovering_ && !(replanner_ && replanner_->timingSwitch()))
    return;
  if (!v.ready) {
    v.ready = true;
    v.readyTime = time;
    bool isReady = v.beat.kind == "ready";
    v.readyStep = isReady ? v.beat.step : v.beat.step - 1;
    v.loadS = isReady ? v.beat.loadS : 0;
  }
  if (!v.stepped && v.beat.kind != "ready" && v.beat.step > v.readyStep) {
    v.stepped = true;
    v.steppedTime = time;
  }
}

/// Completes the recovery's times when every rank is set up, and when every
/// rank has stepped (then prints them).
void Attempt::checkRecovered() {
  auto all = [&](bool RankView::*mark) {
    return std::all_of(ranks_.begin(), ranks_.end(), [&](const RankView &v) { return v.*mark; });
  };
  // After a switch: its cost ends with every rank's first step.
  if (!recovering_ && replanner_ && replanner_->timingSwitch() && all(&RankView::stepped)) {
    double first = 0;
    for (const RankView &v : ranks_)
      first = std::max(first, v.steppedTime);
    replanner_->switchTimed(first);
  }
  Failure *f = recovering_;
  if (!f || f->recovered)
    return;
  if (!f->ready && all(&RankView::ready)) {
    f->ready = true;
    for (const RankView &v : ranks_) {
      f->readyTime = std::max(f->readyTime, v.readyTime);
      f->loadS = std::max(f->loadS, v.loadS);
    }
  }
  if (!f->ready || !all(&RankView::stepped))
    return;
  f->recovered = true;
  for (const RankView &v : ranks_)
    f->firstTime = std::max(f->firstTime, v.steppedTime);
  fprintf(stderr,
          "hpc-launch: recovered in %.2f s (detect and stop %.2f s, restart and load %.2f s, "
          "of which checkpoint load %.2f s, first step %.2f s)\n",
          f->firstTime - f->failTime, f->downTime - f->failTime, f->readyTime - f->downTime,
          f->loadS, f->firstTime - f->readyTime);
}

/// The rank whose exit file says it failed first, if any.
bool Attempt::earliestExitFailure(int &rank) const {
  rank = -1;
  for (int r = 0; r < o_.ranks; ++r) {
    const RankView &v = ranks_[static_cast<size_t>(r)];
    if (v.exited && v.exit.failed() &&
        (rank < 0 || v.exit.seconds < ranks_[static_cast<size_t>(rank)].exit.seconds))
      rank = r;
  }
  return rank >= 0;
}

std::vector<int64_t> Attempt::rankSaves() const {
  std::vector<int64_t> counts;
  for (const RankView &v : ranks_)
    counts.push_back(v.beat.saves.count);
  return counts;
}

bool Attempt::allRanksDone() const {
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [](const RankView &v) { return v.beat.kind == "done"; });
}

bool Attempt::anyRankDone() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const RankView &v) { return v.beat.kind == "done"; });
}

Saves Attempt::saves() const {
  Saves job;
  for (const RankView &v : ranks_) {
    job.count = std::max(job.count, v.beat.saves.count);
    job.seconds = std::max(job.seconds, v.beat.saves.seconds);
    job.bytes += v.beat.saves.bytes;
  }
  return job;
}

/// A running rank whose last heartbeat (or, before its first, the
/// attempt's start) is older than the timeout: the one silent longest,
/// a rank that never beat first.
bool Attempt::findHang(Failure &failure) {
  double now = realtimeNow();
  int worst = -1;
  double worstKey = 0;
  for (int r = 0; r < o_.ranks; ++r) {
    const RankView &v = ranks_[static_cast<size_t>(r)];
    if (v.exited || v.beat.kind == "done")
      continue;
    double last = v.beaten ? v.beatTime : startTime_;
    if (now - last <= o_.heartbeatTimeout)
      continue;
    double key = v.beaten ? last : -1; // a missing file is the oldest
    if (worst < 0 || key < worstKey) {
      worst = r;
      worstKey = key;
    }
  }
  if (worst < 0)
    return false;
  const RankView &v = ranks_[static_cast<size_t>(worst)];
  double silent = now - (v.beaten ? v.beatTime : startTime_);
  char buf[128];
  std::string where;
  if (!v.beaten || v.beat.kind.empty())
    where = "hung before its first step";
  else if (v.beat.kind == "ckpt")
    where = "hung writing the checkpoint of step " + std::to_string(v.beat.step);
  else if (v.beat.kind == "done")
    where = "hung after its last step";
  else // ready or step: the next step never ended
    where = "hung in step " + std::to_string(v.beat.step + 1);
  snprintf(buf, sizeof buf, "no heartbeat for %.1f s (%s)", silent, where.c_str());
  failure.rank = worst;
  failure.cause = buf;
  failure.step = v.beat.kind.empty() ? -1 : v.beat.step;
  failure.failTime = now;
  return true;
}

/// Reaps every child that ended (the launcher, the compiler of a re-plan,
/// and orphans of the job hpc-launch inherited); true once the launcher
/// has ended.
bool Attempt::reapChildren() {
  for (;;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      if (p == pid_) {
        launcherDone_ = true;
        launcherStatus_ = status;
        launcherTime_ = realtimeNow();
      } else if (replanner_) {
        replanner_->reaped(p, status);
      }
      continue;
    }
    noChildren_ = p < 0 && errno == ECHILD;
    return launcherDone_;
  }
}

/// Ends the job: `signum` (unless 0) to the launcher's process group, up to
/// kStopGraceS for it and every process it left to end, then SIGKILL to
/// them. Returns when all are reaped. A compile of a re-plan is killed
/// first: it is no part of the job, and would hold up the wait for no
/// children.
double Attempt::stop(int signum) {
  if (replanner_)
    replanner_->stopCompile();
  if (signum)
    kill(-pid_, signum);
  double deadline = realtimeNow() + kStopGraceS;
  while (!(reapChildren() && noChildren_) && realtimeNow() < deadline)
    sleepSeconds(0.01);
  for (int round = 0; !(launcherDone_ && noChildren_) && round < 500; ++round) {
    if (round % 5 == 0) {
      kill(-pid_, SIGKILL);
      killChildren();
    }
    sleepSeconds(0.01);
    reapChildren();
  }
  return realtimeNow();
}

/// The failure of the rank whose exit file says it failed first.
void Attempt::blameExit(Failure &failure, int rank) {
  const RankView &v = ranks_[static_cast<size_t>(rank)];
  failure.rank = rank;
  failure.cause = v.exit.describe();
  failure.failTime = v.exit.seconds;
  failure.step = v.beat.kind.empty() ? -1 : v.beat.step;
}

Outcome Attempt::watch(Failure &failure) {
  double lastScan = 0;
  for (;;) {
    if (gSignal) {
      stop(gSignal);
      return Outcome::Interrupted;
    }
    waitForEvents();
    double now = realtimeNow();
    bool scanned = now - lastScan >= kPollMs * 1e-3;
    if (scanned) {
      scanAll();
      lastScan = now;
    }
    checkRecovered();
    int rank = -1;
    if (earliestExitFailure(rank) || reapChildren()) {
      // Let it all end first: then every exit file is there, and the
      // earliest failure is known.
      failure.downTime = stop(launcherDone_ ? 0 : SIGTERM);
      scanAll();
      checkRecovered();
      if (earliestExitFailure(rank)) {
        blameExit(failure, rank);
        return Outcome::Failed;
      }
      if (WIFEXITED(launcherStatus_) && WEXITSTATUS(launcherStatus_) == 0)
        return Outcome::Finished;
      failure.cause =
          WIFSIGNALED(launcherStatus_)
              ? "the launcher was killed by " + describeSignal(WTERMSIG(launcherStatus_))
              : "the launcher exited with status " + std::to_string(WEXITSTATUS(launcherStatus_));
      failure.failTime = launcherTime_;
      return Outcome::Failed;
    }
    if (findHang(failure)) {
      failure.downTime = stop(SIGTERM);
      return Outcome::Failed;
    }
    if (scanned && replanner_ && replanner_->poll(rankSaves(), anyRankDone())) {
      replanner_->switchStarting(realtimeNow());
      stop(SIGTERM);
      scanAll(); // the checkpoints it wrote while it was being stopped
      // It may have finished while it was being stopped: then it is done.
      if (allRanksDone() ||
          (launcherDone_ && WIFEXITED(launcherStatus_) && WEXITSTATUS(launcherStatus_) == 0))
        return Outcome::Finished;
      return Outcome::Switched;
    }
  }
}

//===----------------------------------------------------------------------===//
// The session: attempts, messages, the report
//===----------------------------------------------------------------------===//

/// Removes one entry of a tree (for nftw, depth first).
int removeEntry(const char *path, const struct stat *, int, FTW *) { return remove(path); }

/// A number for the report (printf's `format`), or null.
std::string jsonNumber(bool known, double v, const char *format = "%.6g") {
  if (!known)
    return "null";
  char buf[32];
  snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// A number of seconds for the report (3 decimals), or null.
std::string jsonSeconds(bool known, double s) { return jsonNumber(known, s, "%.3f"); }

/// The whole run: the attempts, the failures and switches between them,
/// the report.
class Session {
public:
  explicit Session(const Options &o) : o_(o), program_(o.program) {}
  ~Session() {
    if (!base_.empty())
      nftw(base_.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
  /// Runs the job to its end; returns hpc-launch's exit status.
  int run();

private:
  bool prepare();
  std::vector<std::string> command(int attempt, const std::string &dir,
                                   const std::vector<std::string> &args) const;
  std::vector<std::string> restartArguments(std::string &how) const;
  std::vector<std::string> switchPlan();
  int finished();
  int finish(int status);
  std::string reportText() const;
  std::string replansText() const;
  double saveRate() const;
  int switches() const { return replanner_ ? replanner_->switches() : 0; }
  /// The restarts after failures (the attempts after the first that are
  /// not switches).
  int restarts() const { return std::max(attempts_ - 1 - switches(), 0); }

  const Options &o_;
  std::string self_;
  std::string base_; ///< hpc-launch.XXXXXX, removed at exit
  /// PROGRAM ARGS... as a restart runs them: PROGRAM is the newest plan
  /// switched to.
  std::vector<std::string> program_;
  std::string restartReason_; ///< the next attempt's --restart-reason
  std::unique_ptr<Replanner> replanner_; ///< with --replan-every
  std::vector<Failure> failures_;
  Saves saves_; ///< over all attempts
  int attempts_ = 0;
  bool finished_ = false;
  double startTime_ = 0; ///< when the first attempt started
};

bool Session::prepare() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) {
    printError(std::string("cannot find hpc-launch's own path: ") + strerror(errno));
    return false;
  }
  self_.assign(path, static_cast<size_t>(n));
  std::string why;
  std::vector<std::string> programs{o_.launcher[0], o_.program[0]};
  if (o_.replanEvery)
    programs.push_back(o_.replanCompile[0]);
  for (const std::string &p : programs)
    if (!findExecutable(p, why)) {
      printError("cannot run " + p + ": " + why);
      return false;
    }
  const char *tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpc-launch.XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    printError("cannot make a directory " + pattern + ": " + strerror(errno));
    return false;
  }
  base_ = buf.data();
  // Orphans of the job (ranks whose mpirun died) become hpc-launch's
  // children, so that stop() can end and reap them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (o_.replanEvery) {
    ReplanOptions r;
    r.compile = o_.replanCompile;
    r.threshold = o_.replanThreshold;
    hasFlag(o_.program, "--metrics", &r.metrics);
    hasFlag(o_.program, "--ckpt-dir", &r.ckptDir);
    std::string steps;
    if (hasFlag(o_.program, "--steps", &steps))
      r.lastStep = strtoll(steps.c_str(), nullptr, 10);
    replanner_ = std::make_unique<Replanner>(std::move(r));
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = noteSignal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    sigaction(s, &sa, nullptr);
  return true;
}

/// PROGRAM ARGS... of a restart: with --resume where the program has a
/// checkpoint to continue from. `how` says how the restart begins.
std::vector<std::string> Session::restartArguments(std::string &how) const {
  std::vector<std::string> args = program_;
  std::string ckptDir;
  bool hasCkptDir = hasFlag(args, "--ckpt-dir", &ckptDir);
  if (hasFlag(args, "--resume")) {
    how = "with --resume";
  } else if (hasFlag(args, "--resume-from")) {
    how = "with --resume-from";
  } else if (!hasCkptDir) {
    how = "from the start";
  } else if (!holdsCheckpoint(ckptDir)) {
    how = "from the start (no checkpoint in " + ckptDir + " yet)";
  } else {
    how = "with --resume";
    args.push_back("--resume");
  }
  return args;
}

/// Says that the job switches to the plan it was stopped for, and returns
/// PROGRAM ARGS... of the next attempt: the plan's binary in PROGRAM's
/// place, continuing from the newest checkpoint (--resume, also in place
/// of a --resume-from, which names an older one). Later restarts keep them.
std::vector<std::string> Session::switchPlan() {
  const Replan &r = replanner_->switched();
  std::string why = r.prediction();
  fprintf(stderr, "hpc-launch: switching to the new plan at step %lld%s\n",
          static_cast<long long>(r.switchedAt), why.empty() ? "" : (" (" + why + ")").c_str());
  restartReason_ = "re-planned at step " + std::to_string(r.step);
  std::vector<std::string> args{r.binary};
  for (size_t i = 1; i < program_.size(); ++i) {
    if (program_[i] == "--resume-from")
      ++i;
    else if (program_[i].rfind("--resume-from=", 0) != 0)
      args.push_back(program_[i]);
  }
  if (!hasFlag(args, "--resume"))
    args.push_back("--resume");
  program_ = args;
  return args;
}

/// LAUNCHER... -n N [passed] SELF --rank-wrapper --dir D --attempt K
/// [--restart-reason TEXT] -- ARGS, ARGS being PROGRAM ARGS... as this
/// attempt runs them.
std::vector<std::string> Session::command(int attempt, const std::string &dir,
                                          const std::vector<std::string> &args) const {
  std::vector<std::string> cmd = o_.launcher;
  cmd.push_back("-n");
  cmd.push_back(std::to_string(o_.ranks));
  cmd.insert(cmd.end(), o_.passed.begin(), o_.passed.end());
  for (const std::string &a : {self_, std::string("--rank-wrapper"), std::string("--dir"), dir,
                               std::string("--attempt"), std::to_string(attempt)})
    cmd.push_back(a);
  if (attempt > 0) {
    cmd.push_back("--restart-reason");
    cmd.push_back(restartReason_);
  }
  cmd.push_back("--");
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

int Session::run() {
  if (!prepare())
    return 1;
  startTime_ = realtimeNow();
  if (o_.maxRestarts > 0 && !hasFlag(o_.program, "--ckpt-dir"))
    fprintf(stderr, "hpc-launch: warning: no --ckpt-dir in the job's arguments: a restart "
                    "starts it over\n");
  std::vector<std::string> args = program_;
  Failure *recovering = nullptr;
  for (int k = 0;; ++k) {
    std::string dir = base_ + "/attempt-" + std::to_string(k);
    if (mkdir(dir.c_str(), 0755) != 0) {
      printError("cannot make " + dir + ": " + strerror(errno));
      return finish(1);
    }
    Failure failure;
    failure.attempt = k;
    Outcome outcome;
    if (replanner_)
      replanner_->beginAttempt(hasFlag(args, "--resume") || hasFlag(args, "--resume-from"));
    {
      Attempt attempt(o_, dir, recovering, replanner_.get());
      if (!attempt.start(command(k, dir, args)))
        return finish(1);
      attempts_ = k + 1;
      outcome = attempt.watch(failure);
      Saves a = attempt.saves();
      saves_.count += a.count;
      saves_.seconds += a.seconds;
      saves_.bytes += a.bytes;
    }
    recovering = nullptr;
    if (outcome == Outcome::Switched && !gSignal) {
      args = switchPlan();
      continue;
    }
    if (replanner_)
      replanner_->endAttempt();
    if (outcome == Outcome::Switched) // and told to stop meanwhile
      break;
    if (outcome == Outcome::Finished)
      return finished();
    if (outcome == Outcome::Interrupted)
      break;
    failures_.push_back(failure);
    recovering = &failures_.back();
    restartReason_ = failure.reason();
    fprintf(stderr, "hpc-launch: %s (attempt %d)\n", failure.failedLine().c_str(), k);
    if (static_cast<int>(failures_.size()) > o_.maxRestarts) {
      printError(failure.failedLine() + "; no restarts left (--max-restarts " +
                 std::to_string(o_.maxRestarts) + ")");
      return finish(1);
    }
    if (gSignal)
      break;
    std::string how;
    args = restartArguments(how);
    // Switches are not restarts: they add to the attempts allowed.
    fprintf(stderr, "hpc-launch: restarting %s (attempt %d of at most %d)\n", how.c_str(), k + 1,
            o_.maxRestarts + 1 + switches());
  }
  fprintf(stderr, "hpc-launch: stopped the job on %s (attempt %d)\n",
          describeSignal(gSignal).c_str(), attempts_ - 1);
  return finish(128 + gSignal);
}

/// The lines of a job that finished; exit status 0 (unless the report
/// cannot be written).
int Session::finished() {
  finished_ = true;
  if (saves_.count)
    fprintf(stderr, "hpc-launch: checkpoints: %lld written in %.2f s (%.1f MB/s)\n",
            static_cast<long long>(saves_.count), saves_.seconds, saveRate());
  if (switches())
    fprintf(stderr, "hpc-launch: re-planned %d times\n", switches());
  fprintf(stderr, "hpc-launch: finished (attempts: %d, restarts: %d)\n", attempts_, restarts());
  return finish(0);
}

std::string Session::reportText() const {
  std::string s = "{\"attempts\": " + std::to_string(attempts_) +
                  ", \"restarts\": " + std::to_string(restarts()) +
                  ", \"finished\": " + (finished_ ? "true" : "false") +
                  ", \"wall_s\": " + jsonSeconds(startTime_ > 0, realtimeNow() - startTime_) +
                  ", \"failures\": [";
  for (size_t i = 0; i < failures_.size(); ++i) {
    const Failure &f = failures_[i];
    s += std::string(i ? ", " : "") + "{\"attempt\": " + std::to_string(f.attempt) +
         ", \"rank\": " + (f.rank >= 0 ? std::to_string(f.rank) : "null") +
         ", \"cause\": " + hpc::json::quoted(f.cause) +
         ", \"step\": " + (f.step >= 0 ? std::to_string(f.step) : "null") +
         ", \"recovery_s\": " + jsonSeconds(f.recovered, f.firstTime - f.failTime) +
         ", \"detect_stop_s\": " + jsonSeconds(true, f.downTime - f.failTime) +
         ", \"restart_load_s\": " + jsonSeconds(f.ready, f.readyTime - f.downTime) +
         ", \"checkpoint_load_s\": " + jsonSeconds(f.ready, f.loadS) +
         ", \"first_step_s\": " + jsonSeconds(f.recovered, f.firstTime - f.readyTime) + "}";
  }
  int loads = 0;
  double loadS = 0;
  for (const Failure &f : failures_)
    if (f.ready) {
      ++loads;
      loadS += f.loadS;
    }
  s += "], \"replans\": " + replansText();
  char ckpt[256];
  snprintf(ckpt, sizeof ckpt,
           ", \"checkpoints\": {\"saves\": %lld, \"save_s\": %.3f, \"save_bytes\": %llu, "
           "\"save_mb_per_s\": %.1f, \"loads\": %d, \"load_s\": %.3f}}\n",
           static_cast<long long>(saves_.count), saves_.seconds,
           static_cast<unsigned long long>(saves_.bytes), saveRate(), loads, loadS);
  return s + ckpt;
}

/// The report's "replans": one object per compile.
std::string Session::replansText() const {
  std::string s = "[";
  const std::vector<Replan> none;
  const std::vector<Replan> &replans = replanner_ ? replanner_->replans() : none;
  for (size_t i = 0; i < replans.size(); ++i) {
    const Replan &r = replans[i];
    s += std::string(i ? ", " : "") + "{\"step\": " + std::to_string(r.step) +
         ", \"status\": " + hpc::json::quoted(r.status) +
         ", \"binary\": " + (r.binary.empty() ? "null" : hpc::json::quoted(r.binary)) +
         ", \"measured_step_s\": " + jsonNumber(r.hasMeasured, r.measuredS) +
         ", \"predicted_step_s\": " + jsonNumber(r.hasPredicted, r.predictedS) +
         ", \"switched_at_step\": " +
         (r.switchedAt >= 0 ? std::to_string(r.switchedAt) : std::string("null")) +
         ", \"compile_s\": " + jsonSeconds(true, r.compileS) + "}";
  }
  return s + "]";
}

double Session::saveRate() const {
  return saves_.seconds > 0 ? static_cast<double>(saves_.bytes) / 1e6 / saves_.seconds : 0;
}

/// Writes the report (if asked for) and returns `status`, or 1 when the
/// report cannot be written.
int Session::finish(int status) {
  if (o_.report.empty())
    return status;
  std::string tmp = o_.report + ".tmp";
  std::string text = reportText();
  FILE *f = fopen(tmp.c_str(), "w");
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f)
    ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp.c_str(), o_.report.c_str()) != 0) {
    printError("cannot write " + o_.report + ": " + strerror(errno));
    return 1;
  }
  return status;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--rank-wrapper") == 0)
    return runRankWrapper(argc - 2, argv + 2);
  Options o;
  std::string error;
  if (!parseOptions(argc, argv, o, error)) {
    printError(error);
    return 1;
  }
  if (o.help) {
    fputs(kUsage, stdout);
    return 0;
  }
  Session session(o);
  return session.run();
}
