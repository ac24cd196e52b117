#!/usr/bin/env python3
"""Runs a command that must fail the way a user error does: exit status 1,
exactly one line on stderr (printed here for FileCheck), nothing on
stdout. Otherwise says what differed and exits 1.

usage: expect_error.py COMMAND [ARGS...]
"""
import subprocess
import sys

p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)
lines = p.stderr.splitlines()
if p.returncode != 1 or len(lines) != 1 or p.stdout:
    print("expected exit 1 and one line on stderr; got exit %d, stdout %r, stderr %r"
          % (p.returncode, p.stdout, p.stderr))
    sys.exit(1)
print(lines[0])
