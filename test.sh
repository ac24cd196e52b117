#!/usr/bin/env bash
#===- test.sh - build HPC-Opt and run every test --------------------------===#
#
# Installs what is missing, builds (incrementally), sets up the onnxruntime
# venv of the agreement tests, then runs ctest: the lit suites (test/,
# through the `lit` test), the GoogleTest unit tests, the runtime tests and
# the onnxruntime agreement tests.
# Exits non-zero when anything fails.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

"$ROOT/.ci/install-deps.sh"
"$ROOT/.ci/build.sh"
# onnxruntime (from PyPI) for the agreement tests; without it they are
# reported as skipped, not passed.
"$ROOT/scripts/setup-test-venv.sh" >/dev/null ||
  echo "test.sh: warning: no onnxruntime venv; the ort.* tests will be skipped" >&2
ctest --test-dir "${HPC_BUILD_DIR:-$ROOT/build}" --output-on-failure
