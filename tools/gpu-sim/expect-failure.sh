#!/usr/bin/env bash
# Runs a mutant's test on the GPU simulator (tools/gpu-sim/run.sh --doctest) and passes only if the
# mutant was caught: the run simulated kernels and then failed an assertion or faulted on a memory
# access. A run that fails for any other reason (no simulator, a crash before any kernel) fails.
# Usage: tools/gpu-sim/expect-failure.sh PROGRAM [ARGS...]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(bash "$here/run.sh" --doctest "$@" 2>&1)
status=$?
echo "$out" | tail -n 40
kernels=$(echo "$out" | sed -n 's/^gpu-sim: \([0-9]*\) kernels.*/\1/p' | tail -n 1)
if [[ $status -eq 0 ]]; then
  echo "expect-failure: the mutant passed its test: the simulator step would not catch this bug"
  exit 1
fi
if [[ ${kernels:-0} -eq 0 ]]; then
  echo "expect-failure: the run failed (status $status) before any kernel was simulated: not a catch"
  exit 1
fi
if echo "$out" | grep -q -E 'ERROR: (CHECK|REQUIRE)|ERROR: test case THREW exception|out-of-bounds global|cudaErrorIllegalAddress'; then
  echo "expect-failure: caught (status $status after $kernels kernels)"
  exit 0
fi
echo "expect-failure: the run failed (status $status) without a failed assertion or a memory fault"
exit 1
