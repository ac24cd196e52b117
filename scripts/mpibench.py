"""What the multi-rank benchmark scripts share: where hpc-opt is, the
launcher, running a command (exit with its output when it fails) and the
ms/run a compiled program reports."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPC_OPT = os.path.join(ROOT, "build", "bin", "hpc-opt")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    """stdout + stderr of `cmd`; exits with them when it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def ms_per_run(output):
    """The mean time per run a program printed with `run --iters N`."""
    return float(re.search(r"time: ([\d.]+) ms/run", output).group(1))
