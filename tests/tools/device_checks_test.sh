#!/usr/bin/env bash
# The device checks' verdicts (scripts/run-device-checks.sh) on every compute-sanitizer outcome: a
# fake compute-sanitizer on PATH prints each real summary format with its exit status, and the
# recorded status of the sanitizer step must be the one the harness promises. Also: the phases'
# step limits fit their budgets.
# Usage: device_checks_test.sh SCRIPTS_DIR WORK_DIR
set -uo pipefail
scripts=$1
root=$2
rm -rf "$root"
mkdir -p "$root/bin" "$root/work" "$root/out"

# The fake: FAKE_OUTPUT is what it prints, FAKE_EXIT its exit status, FAKE_SLEEP seconds it waits.
cat >"$root/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
if [[ ${1:-} == --version ]]; then echo "NVIDIA (R) Compute Sanitizer Version 2026.1.0 (fake)"; exit 0; fi
[[ -n ${FAKE_SLEEP:-} ]] && sleep "$FAKE_SLEEP"
printf '%b\n' "$FAKE_OUTPUT"
exit "$FAKE_EXIT"
EOF
chmod +x "$root/bin/compute-sanitizer"
export PATH=$root/bin:$PATH

source "$scripts/run-device-checks.sh"
work=$root/work out=$root/out packed=$root/packed.tar.gz dry=0
deadline=$((SECONDS + 600))

fails=0
expect() {  # expect NAME TOOL STATUS EXIT OUTPUT: the step must record STATUS
  local name=$1 tool=$2 want=$3
  FAKE_EXIT=$4 FAKE_OUTPUT=$5 sanitizer_step "$name" "$tool" "" true >/dev/null
  local got
  got=$(awk -v n="$name" '$1 == n {s = $2} END {print s}' "$work/summary.txt")
  if [[ $got == "$want" ]]; then
    echo "ok   $name: $got"
  else
    echo "FAIL $name: recorded '$got', expected '$want'"
    grep -a "^$name " "$work/summary.txt" | tail -n 1
    fails=$((fails + 1))
  fi
}

doctest_ok='[doctest] test cases: 5 | 5 passed | 0 failed | 0 skipped'
doctest_failed='/src/ops_test.cu:40: ERROR: CHECK( a == b ) is NOT correct!\n[doctest] test cases: 5 | 4 passed | 1 failed | 0 skipped\n[doctest] Status: FAILURE!'
# memcheck (and synccheck, initcheck) summaries
limit[mc-clean]=20; expect mc-clean memcheck pass 0 "$doctest_ok\n========= ERROR SUMMARY: 0 errors"
limit[mc-errors]=20; expect mc-errors memcheck fail 1 "========= Invalid __global__ write of size 4 bytes\n$doctest_ok\n========= ERROR SUMMARY: 3 errors"
limit[mc-one]=20; expect mc-one memcheck fail 1 "$doctest_ok\n========= ERROR SUMMARY: 1 error"
limit[mc-test-failed]=20; expect mc-test-failed memcheck fail 1 "$doctest_failed\n========= ERROR SUMMARY: 0 errors"
limit[mc-no-summary]=20; expect mc-no-summary memcheck fail 1 "========= COMPUTE-SANITIZER\n========= Error: Target application terminated before first instrumented API call"
limit[mc-no-device]=20; expect mc-no-device memcheck fail 77 "skipped: 15 case(s) of the GPU suite, no usable CUDA device (cudaErrorNoDevice: no CUDA-capable device is detected)\n========= ERROR SUMMARY: 0 errors"
limit[mc-sandboxed]=20; expect mc-sandboxed memcheck unsupported 1 "========= COMPUTE-SANITIZER\n========= Error: Device not supported\n========= ERROR SUMMARY: 0 errors"
# racecheck summaries: hazards fail, warnings included, and in the singular too
limit[rc-clean]=20; expect rc-clean racecheck pass 0 "$doctest_ok\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
limit[rc-errors]=20; expect rc-errors racecheck fail 1 "$doctest_ok\n========= RACECHECK SUMMARY: 4 hazards displayed (4 errors, 0 warnings)"
limit[rc-warnings]=20; expect rc-warnings racecheck fail 0 "$doctest_ok\n========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)"
limit[rc-one]=20; expect rc-one racecheck fail 1 "$doctest_ok\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
limit[rc-test-failed]=20; expect rc-test-failed racecheck fail 1 "$doctest_failed\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
limit[rc-wrong-summary]=20; expect rc-wrong-summary racecheck fail 0 "$doctest_ok\n========= ERROR SUMMARY: 0 errors"
# a run past its limit
limit[mc-timeout]=1; FAKE_SLEEP=5 expect mc-timeout memcheck timeout 0 "========= ERROR SUMMARY: 0 errors"
# dry runs: a sanitizer step whose case filter selects no case fails (a renamed case would leave
# the tool nothing to check); one that selects cases is skipped, naming how many.
cat >"$root/bin/fake_tests" <<'EOF'
#!/usr/bin/env bash
echo "[doctest] unskipped test cases passing the current filters: $FAKE_CASES"
EOF
chmod +x "$root/bin/fake_tests"
dry_expect() {  # dry_expect NAME CASES STATUS
  limit[$1]=20
  dry=1 FAKE_CASES=$2 sanitizer_step "$1" racecheck "" "$root/bin/fake_tests" --test-case='*x*' >/dev/null
  local got
  got=$(awk -v n="$1" '$1 == n {s = $2} END {print s}' "$work/summary.txt")
  if [[ $got == "$3" ]]; then echo "ok   $1: $got"; else echo "FAIL $1: recorded '$got', expected '$3'"; fails=$((fails + 1)); fi
}
dry_expect dry-no-cases 0 fail
dry_expect dry-three-cases 3 skip
dry=0

# no compute-sanitizer at all
find_sanitizer() { :; }
limit[mc-absent]=20; expect mc-absent memcheck unsupported 0 ""

if check_budgets; then echo "ok   budgets"; else echo "FAIL budgets"; fails=$((fails + 1)); fi
((fails == 0)) || { echo "$fails verdicts wrong"; exit 1; }
echo "every verdict as promised"
