# -*- Python -*-
# lit configuration of the HPC-Opt test suite. The site config generated into
# the build tree (lit.site.cfg.py) sets the paths and then loads this file.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "HPC-Opt"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)

# .mlir: dialect and pass tests; .onnxtxt: textual ONNX models fed straight to
# hpc-opt; .test: anything else driven by RUN lines.
config.suffixes = [".mlir", ".onnxtxt", ".test"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.hpc_obj_root, "test")

# unit/ holds the GoogleTest sources (ctest runs them); Inputs/ directories
# hold files that tests read, not tests.
config.excludes = [
    "CMakeLists.txt",
    "README.md",
    "lit.cfg.py",
    "lit.site.cfg.py",
    "unit",
    "Inputs",
]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%onnx_testdata", config.onnx_testdata_dir))
config.substitutions.append(
    ("%models", os.path.join(config.hpc_src_root, "test", "models"))
)
config.substitutions.append(
    ("%examples", os.path.join(config.hpc_src_root, "examples"))
)

# The project's version (CMake's project(VERSION)).
config.substitutions.append(("%hpc_version", config.hpc_version))

# %python is the interpreter CMake chose (before the default substitutions,
# which would make it the one running lit).
config.substitutions.append(("%python", config.python_executable))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# Our tools first, then LLVM's (FileCheck, not, split-file).
llvm_config.with_environment("PATH", config.hpc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.hpc_tools_dir, config.llvm_tools_dir]
tools = [
    "hpc-opt",
    "hpc-calibrate",
    "hpc-launch",
    "split-file",
    ToolSubst("%PYTHON", config.python_executable, unresolved="ignore"),
    ToolSubst("python3", config.python_executable, unresolved="ignore"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

if os.path.isdir(config.onnx_testdata_dir):
    config.available_features.add("onnx-testdata")

# `avx512`: the CPU has oneDNN's avx512_core (AVX-512 F, BW, VL, DQ), where
# the runtime's kernel choices differ (the blocked layouts, Winograd); the
# tests of those choices are reported unsupported elsewhere.
try:
    with open("/proc/cpuinfo") as f:
        cpu_flags = next((l.split(":", 1)[1].split() for l in f
                          if l.startswith("flags")), [])
except OSError:
    cpu_flags = []
if all(flag in cpu_flags for flag in ("avx512f", "avx512bw", "avx512vl", "avx512dq")):
    config.available_features.add("avx512")

# Multi-rank tests run the compiled binaries under OpenMPI's mpirun (as root
# in CI, and with more ranks than cores), each launch with a session
# directory of its own: lit runs several at once (see mpirun-private.sh).
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "%s mpirun --allow-run-as-root --oversubscribe" %
         os.path.join(os.path.dirname(__file__), "mpirun-private.sh")))

# The two-node cluster of network namespaces (scripts/netns-cluster.sh):
# the feature `netns` where namespaces can be made here (root, iproute2);
# tests that need it are reported unsupported elsewhere, never passed.
import subprocess
netns_cluster = os.path.join(config.hpc_src_root, "scripts", "netns-cluster.sh")
config.substitutions.append(("%netns_cluster", netns_cluster))
if subprocess.run([netns_cluster, "check"], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("netns")

# A sanitized build (-DHPC_SANITIZE, docs/testing.md "Sanitizers"): every
# report aborts the process, so that it fails the test even under `not` and
# the Python drivers that expect one error line; leaks in third-party
# libraries are suppressed (test/sanitizers/lsan.supp says which and why).
# The Python scripts launch the instrumented tools with this environment.
if config.hpc_sanitize:
    config.available_features.add("sanitize")
    import sys
    sys.path.insert(0, os.path.join(config.hpc_src_root, "test", "sanitizers"))
    import sanitizer_env
    config.environment.update(sanitizer_env.environment())
