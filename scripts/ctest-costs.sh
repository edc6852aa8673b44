#!/usr/bin/env bash
# Seeds CTest's timings of a build directory that has none (tests/ctest-costs.txt), so that a first
# `ctest -j` starts the longest tests first. A build with timings of its own keeps them.
# Usage: scripts/ctest-costs.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=$1/Testing/Temporary/CTestCostData.txt
[[ -s $data ]] && exit 0
mkdir -p "$(dirname "$data")"
# CTest's format: "<test> <runs> <seconds>" a line, then "---" and the tests that failed last.
{ grep -v '^#' "$root/tests/ctest-costs.txt" | awk 'NF == 2 { print $1, 1, $2 }'; echo ---; } >"$data"
