#!/usr/bin/env python3
#===- expect_error.py - run a command that must fail as a user error ------===#
#
#   expect_error.py CMD ARGS...
#
# Runs CMD and checks the contract for errors a user can cause: exit status
# exactly 1, no crash, and exactly one line of output (stdout and stderr
# together). Prints that line (for FileCheck) and exits 0; otherwise prints
# what was wrong and exits 1.
#
#===-----------------------------------------------------------------------===#

import subprocess
import sys

proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
lines = [l for l in out.splitlines() if l.strip()]
if proc.returncode != 1 or len(lines) != 1:
    print("expect_error: expected exit status 1 and one line of output, got "
          "exit status %d and %d lines:" % (proc.returncode, len(lines)))
    print(out)
    sys.exit(1)
print(lines[0])
