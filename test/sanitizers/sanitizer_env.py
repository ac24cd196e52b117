#===- sanitizer_env.py - the environment of a sanitized test run ----------===#
#
# The ASan/LSan/UBSan options every test of a -DHPC_SANITIZE build runs with:
# test/lit.cfg.py imports this, and `sanitizer_env.py` (run as a script)
# prints them as shell `export` lines for .ci/sanitize.sh, ctest and manual
# runs. Every report aborts the process (SIGABRT): a sanitizer's own exit
# status 1 would pass for an expected error under `not` or expect_error.py.
# A failed allocation returns null (std::bad_alloc), as it does in a release
# build, instead of being a report. With HPC_SANITIZER_LOG_DIR set, reports
# go to files there (DIR/report.<pid>) instead of stderr: .ci/sanitize.sh
# fails when any exists, whatever the test that caused it concluded.
#
#===-----------------------------------------------------------------------===#

import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def environment(log_dir=None):
    """The variables to set, naming the suppression files next to this one;
    `log_dir` (default: $HPC_SANITIZER_LOG_DIR) collects the reports."""
    if log_dir is None:
        log_dir = os.environ.get("HPC_SANITIZER_LOG_DIR")
    common = "abort_on_error=1:print_summary=1:symbolize=1"
    if log_dir:
        common += ":log_path=" + os.path.join(log_dir, "report")
    return {
        # Debian's libraries (OpenMPI, protobuf) are built without frame
        # pointers: only the slow unwinder sees their frames in the stack
        # of an allocation, which lsan.supp's entries match.
        # soft_rss_limit_mb: the fuzz drivers' 4 GiB RLIMIT_AS cannot hold
        # under ASan (it reserves terabytes at start); past 4 GiB resident
        # an allocation fails instead, as it does under the rlimit.
        "ASAN_OPTIONS": common + ":detect_leaks=1:allocator_may_return_null=1"
                        ":check_initialization_order=1:fast_unwind_on_malloc=0"
                        ":soft_rss_limit_mb=4096",
        "LSAN_OPTIONS": "suppressions=%s:print_suppressions=0"
                        % os.path.join(HERE, "lsan.supp"),
        "UBSAN_OPTIONS": common + ":halt_on_error=1:print_stacktrace=1"
                         ":suppressions=%s" % os.path.join(HERE, "ubsan.supp"),
    }


if __name__ == "__main__":
    for key, value in environment().items():
        sys.stdout.write("export %s=%s\n" % (key, shlex.quote(value)))
