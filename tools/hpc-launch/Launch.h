//===- Launch.h - what hpc-launch's two modes share -------------*- C++ -*-===//
//
// hpc-launch runs in two modes: the launcher (hpc-launch.cpp), which starts
// the job under mpirun, watches it and restarts it, and the rank wrapper
// (RankWrapper.cpp, `hpc-launch --rank-wrapper`), which mpirun starts once
// per rank and which runs the program. They meet in the attempt's directory:
// the wrapper writes `exit-R` when rank R's program ends, the program writes
// `heartbeat-R`, and the launcher reads both. The formats of those files and
// the clock they are stamped with are defined once, here and in
// RankWrapper.cpp. docs/launch.md describes the whole contract.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TOOLS_HPC_LAUNCH_LAUNCH_H
#define HPC_TOOLS_HPC_LAUNCH_LAUNCH_H

#include <sys/types.h>

#include <string>
#include <vector>

namespace hpc::launch {

/// CLOCK_REALTIME in seconds: the clock of the exit files and of the
/// heartbeat files' modification times.
double realtimeNow();

/// Prints `hpc-launch: error: MESSAGE` on stderr.
void printError(const std::string &message);

/// The name of the file in an attempt's directory that the wrapper of rank
/// `rank` writes when its program ends (`exit-R`), and the heartbeat file
/// the program writes (`heartbeat-R`).
std::string exitFileName(int rank);
std::string heartbeatFileName(int rank);

/// How one rank's program ended: the one line of its exit file,
/// `exit CODE SECONDS` or `signal SIGNUM SECONDS`.
struct ExitRecord {
  bool signaled = false; ///< killed by signal `code`, else exited with `code`
  int code = 0;
  double seconds = 0; ///< when the wrapper saw it end (CLOCK_REALTIME)

  /// Whether the rank ended badly (a non-zero status or a signal).
  bool failed() const { return signaled || code != 0; }
  /// "exited with status 3", "killed by signal 9 (SIGKILL)".
  std::string describe() const;
  /// The file's line, newline included.
  std::string format() const;
  /// Reads a line written by format(); false when it is not one.
  static bool parse(const std::string &line, ExitRecord &out);
};

/// "signal 9 (SIGKILL)": a signal number with its name where it has one.
std::string describeSignal(int signum);

/// Resolves `program` as execvp would (a name without '/' is looked up on
/// PATH); false and strerror's text in `error` when it cannot be run.
bool findExecutable(const std::string &program, std::string &error);

/// Starts `command` (execvp) as a child in a process group of its own,
/// with stdin from /dev/null, that gets `deathSignal` should hpc-launch
/// die, and with its stdout on stderr when `stdoutToStderr`. Returns its
/// pid (the group's id), or -1 with errno set when fork fails; a command
/// that cannot be run exits 127 after an error line.
pid_t startInGroup(const std::vector<std::string> &command, int deathSignal,
                   bool stdoutToStderr);

/// The rank wrapper: `hpc-launch --rank-wrapper --dir D --attempt K
/// [--restart-reason TEXT] -- PROGRAM ARGS...`, with argv the arguments
/// after `--rank-wrapper`. Returns the exit status (the program's, 128 +
/// its signal, 127 when it could not be started, 1 for bad arguments).
int runRankWrapper(int argc, char **argv);

} // namespace hpc::launch

#endif // HPC_TOOLS_HPC_LAUNCH_LAUNCH_H
