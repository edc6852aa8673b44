#!/usr/bin/env bash
# Runs a mutant's test on the GPU simulator (tools/gpu-sim/run.sh --doctest) and passes only if the
# mutant was caught: the test ran to its end and failed, on a failed assertion, an exception (a CUDA
# error, the kernels' fault report) or a memory fault. A run that fails any other way (no
# simulator, a crash, no test run) fails.
# Usage: tools/gpu-sim/expect-failure.sh PROGRAM [ARGS...]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(bash "$here/run.sh" --doctest "$@" 2>&1)
status=$?
echo "$out" | tail -n 40
if [[ $status -eq 0 ]]; then
  echo "expect-failure: the mutant passed its test: the simulator step would not catch this bug"
  exit 1
fi
if ! echo "$out" | grep -q '^\[doctest\] Status: FAILURE!'; then
  echo "expect-failure: the run failed (status $status) without finishing its test: not a catch"
  exit 1
fi
if echo "$out" | grep -q -E 'ERROR: (CHECK|REQUIRE)|ERROR: test case THREW exception|out-of-bounds global'; then
  echo "expect-failure: caught (status $status)"
  exit 0
fi
echo "expect-failure: the test failed (status $status) without a failed assertion, an exception or a memory fault"
exit 1
