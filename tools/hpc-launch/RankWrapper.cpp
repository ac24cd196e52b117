//===- RankWrapper.cpp - one rank of a job started by hpc-launch ----------===//
//
// mpirun starts `hpc-launch --rank-wrapper --dir D --attempt K
// [--restart-reason TEXT] -- PROGRAM ARGS...` once per rank. The wrapper
// gives the program its attempt number, its heartbeat file and the reason
// of the restart in the environment (HPC_ATTEMPT, HPC_HEARTBEAT,
// HPC_RESTART_REASON), runs it as its child (which dies with it:
// PR_SET_PDEATHSIG), forwards SIGTERM, SIGINT and SIGHUP to it, and when it
// ends records how and when in D/exit-R (written to a temporary file, then
// renamed), the launcher's evidence of which rank failed first. It exits
// with the program's status (128 + the signal's number for a signal).
//
// This file also holds the exit file's format and the helpers both modes
// use, so that the line written here and the line read by the launcher
// have one definition.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace hpc::launch {

double realtimeNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void printError(const std::string &message) {
  std::string line = "hpc-launch: error: " + message + "\n";
  fflush(stdout);
  fputs(line.c_str(), stderr);
}

std::string exitFileName(int rank) { return "exit-" + std::to_string(rank); }

std::string heartbeatFileName(int rank) { return "heartbeat-" + std::to_string(rank); }

std::string describeSignal(int signum) {
  std::string text = "signal " + std::to_string(signum);
  if (const char *abbrev = sigabbrev_np(signum))
    text += std::string(" (SIG") + abbrev + ")";
  return text;
}

std::string ExitRecord::describe() const {
  if (signaled)
    return "killed by " + describeSignal(code);
  return "exited with status " + std::to_string(code);
}

std::string ExitRecord::format() const {
  char buf[96];
  snprintf(buf, sizeof buf, "%s %d %.6f\n", signaled ? "signal" : "exit", code, seconds);
  return buf;
}

bool ExitRecord::parse(const std::string &line, ExitRecord &out) {
  char kind[16];
  int code = 0;
  double seconds = 0;
  if (sscanf(line.c_str(), "%15s %d %lf", kind, &code, &seconds) != 3)
    return false;
  std::string k = kind;
  if (k != "exit" && k != "signal")
    return false;
  out.signaled = k == "signal";
  out.code = code;
  out.seconds = seconds;
  return true;
}

pid_t startInGroup(const std::vector<std::string> &command, int deathSignal,
                   bool stdoutToStderr) {
  std::vector<char *> argv;
  for (const std::string &a : command)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  fflush(nullptr);
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0)
      setpgid(pid, pid); // also here: no race with a kill of the group
    return pid;
  }
  // A group of its own, so that a kill of the group ends whatever it
  // started, and it reads no terminal (a background group that read one
  // would be stopped); told to stop should hpc-launch die.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, deathSignal);
  if (getppid() != self)
    _exit(128 + deathSignal);
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0)
    dup2(null, STDIN_FILENO);
  if (stdoutToStderr)
    dup2(STDERR_FILENO, STDOUT_FILENO);
  execvp(argv[0], argv.data());
  std::string line = "hpc-launch: error: cannot run " + command[0] + ": " + strerror(errno) + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  _exit(127);
}

bool findExecutable(const std::string &program, std::string &error) {
  if (program.empty()) {
    error = strerror(ENOENT);
    return false;
  }
  if (program.find('/') != std::string::npos) {
    struct stat st;
    if (stat(program.c_str(), &st) != 0) {
      error = strerror(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode) || access(program.c_str(), X_OK) != 0) {
      error = strerror(S_ISDIR(st.st_mode) ? EISDIR : EACCES);
      return false;
    }
    return true;
  }
  const char *path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0)
      return true;
    begin = end + 1;
  }
  error = "not found on PATH";
  return false;
}

namespace {

/// The wrapper's command line.
struct WrapperOptions {
  std::string dir;
  std::string attempt;
  std::string reason;
  bool hasReason = false;
  std::vector<char *> program; ///< PROGRAM ARGS..., null-terminated
};

/// The program's pid, for the signal handler (0 before it starts).
volatile sig_atomic_t gChild = 0;

/// The handler of the forwarded signals: passes them to the program.
void forwardSignal(int signum) {
  pid_t child = gChild;
  if (child > 0)
    kill(child, signum);
}

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP};

/// Reads the wrapper's flags; false after printing one error line.
bool parseWrapperOptions(int argc, char **argv, WrapperOptions &o) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (int j = i + 1; j < argc; ++j)
        o.program.push_back(argv[j]);
      break;
    }
    if (i + 1 >= argc) {
      printError("--rank-wrapper: " + a + " needs a value");
      return false;
    }
    if (a == "--dir") {
      o.dir = argv[++i];
    } else if (a == "--attempt") {
      o.attempt = argv[++i];
    } else if (a == "--restart-reason") {
      o.reason = argv[++i];
      o.hasReason = true;
    } else {
      printError("--rank-wrapper: unknown option '" + a + "'");
      return false;
    }
  }
  if (o.dir.empty() || o.attempt.empty() || o.program.empty()) {
    printError("--rank-wrapper needs --dir D --attempt K -- PROGRAM ARGS...");
    return false;
  }
  o.program.push_back(nullptr);
  return true;
}

/// This process's rank: OMPI_COMM_WORLD_RANK, else PMIX_RANK, else 0.
int rankFromEnvironment() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    const char *v = getenv(name);
    if (v && *v)
      return atoi(v);
  }
  return 0;
}

/// In the forked child: the environment, death with the wrapper, default
/// signals, then the program. Never returns.
[[noreturn]] void execProgram(const WrapperOptions &o, const std::string &heartbeat, pid_t wrapper,
                              const sigset_t &oldMask) {
  setenv("HPC_ATTEMPT", o.attempt.c_str(), 1);
  setenv("HPC_HEARTBEAT", heartbeat.c_str(), 1);
  if (o.hasReason)
    setenv("HPC_RESTART_REASON", o.reason.c_str(), 1);
  else
    unsetenv("HPC_RESTART_REASON");
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != wrapper)
    _exit(128 + SIGKILL); // the wrapper died before the prctl
  for (int s : kForwarded)
    signal(s, SIG_DFL);
  sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  execvp(o.program[0], o.program.data());
  std::string line =
      std::string("hpc-launch: error: cannot run ") + o.program[0] + ": " + strerror(errno) + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  _exit(127);
}

/// Writes `record` to DIR/exit-R through DIR/.exit-R.tmp and a rename.
void writeExitFile(const std::string &dir, int rank, const ExitRecord &record) {
  std::string path = dir + "/" + exitFileName(rank);
  std::string tmp = dir + "/." + exitFileName(rank) + ".tmp";
  std::string text = record.format();
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0)
    ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0)
    printError("cannot write " + path + ": " + strerror(errno));
}

} // namespace

int runRankWrapper(int argc, char **argv) {
  WrapperOptions o;
  if (!parseWrapperOptions(argc, argv, o))
    return 1;
  int rank = rankFromEnvironment();
  std::string heartbeat = o.dir + "/" + heartbeatFileName(rank);

  // Forwarded signals wait (blocked) until the child's pid is known.
  sigset_t forwarded, oldMask;
  sigemptyset(&forwarded);
  for (int s : kForwarded)
    sigaddset(&forwarded, s);
  sigprocmask(SIG_BLOCK, &forwarded, &oldMask);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forwardSignal;
  sigemptyset(&sa.sa_mask);
  for (int s : kForwarded)
    sigaction(s, &sa, nullptr);

  // When mpirun (or the node's daemon) dies without stopping this rank,
  // stop the program as if it had been told to.
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent)
    raise(SIGTERM);

  fflush(nullptr);
  pid_t wrapper = getpid();
  pid_t child = fork();
  if (child < 0) {
    printError(std::string("cannot start ") + o.program[0] + ": " + strerror(errno));
    writeExitFile(o.dir, rank, ExitRecord{false, 127, realtimeNow()});
    return 127;
  }
  if (child == 0)
    execProgram(o, heartbeat, wrapper, oldMask);
  gChild = child;
  sigprocmask(SIG_SETMASK, &oldMask, nullptr);

  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  ExitRecord record;
  record.seconds = realtimeNow();
  if (WIFSIGNALED(status)) {
    record.signaled = true;
    record.code = WTERMSIG(status);
  } else {
    record.code = WEXITSTATUS(status);
  }
  writeExitFile(o.dir, rank, record);
  return record.signaled ? 128 + record.code : record.code;
}

} // namespace hpc::launch
