#!/usr/bin/env bash
# The tests' main fails a run in which a case passed without a single assertion (and recorded no
# skip), naming the case; a case that asserts passes; a case that skips exits 77.
# Usage: assertion_probe_test.sh PROBE_EXECUTABLE
set -uo pipefail
probe=$1 fails=0
expect() {  # expect CASE EXIT PATTERN: the run of CASE exits EXIT and prints a line matching PATTERN (grep -E)
  local out rc
  out=$("$probe" --test-case="$1" 2>&1); rc=$?
  if ((rc == $2)) && grep -qE -- "$3" <<<"$out"; then
    echo "ok   $1: exit $rc"
  else
    echo "FAIL $1: exit $rc (expected $2), output:"; echo "$out"; fails=$((fails + 1))
  fi
}
expect probe.passes_without_assertion 1 "passed without a single assertion"
expect probe.passes_without_assertion 1 "assertion_probe\.cpp:[0-9]+ probe\.passes_without_assertion$"
expect probe.asserts 0 "Status: SUCCESS"
expect probe.skips 77 "skipped: probe\.skips: the probe's own skip"
((fails == 0)) || exit 1
echo "the assertion rule holds"
