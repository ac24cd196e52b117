#!/usr/bin/env bash
#===- test.sh - build HPC-Opt and run every test --------------------------===#
#
# Installs what is missing, builds (incrementally), then runs ctest: the lit
# suites (test/, through the `lit` test) and every GoogleTest unit test.
# Exits non-zero when anything fails.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

"$ROOT/.ci/install-deps.sh"
"$ROOT/.ci/build.sh"
ctest --test-dir "${HPC_BUILD_DIR:-$ROOT/build}" --output-on-failure
