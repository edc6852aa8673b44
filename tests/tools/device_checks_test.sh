#!/usr/bin/env bash
# The device checks' verdicts (scripts/run-device-checks.sh) on every compute-sanitizer outcome: a
# fake compute-sanitizer on PATH prints each real summary format with its exit status, and the
# recorded status of the sanitizer step must be the one the harness promises. The same for the
# repeated stream-ordering step and the decode bench, with fake tools that behave as two mutants
# would (a copy stage without its release wait; host and device images that differ). Also: the
# phases' step limits fit their budgets.
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

# ordering-repeat: the stream-ordering cases run many times; the first failing run fails the step.
# The mutant is what a copy stage without its release wait gives: the case's sums come out wrong in
# some run (here the third), with doctest's failed check and exit 1.
cat >"$root/bin/fake_runtime_tests" <<'EOF'
#!/usr/bin/env bash
n=$(( $(cat "$FAKE_COUNTER" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$FAKE_COUNTER"
if [[ -n ${FAKE_EXIT77:-} ]]; then echo "skipped: 3 case(s) of the GPU suite, no usable CUDA device (fake)"; exit 77; fi
if [[ -n ${FAKE_FAIL_AT:-} && $n == "$FAKE_FAIL_AT" ]]; then
  echo "gpu_loader_test.cu:452: ERROR: CHECK( got[0] == reference_sum(77, 0, 8) ) is NOT correct!"
  echo "[doctest] test cases: 3 | 2 passed | 1 failed | 0 skipped"; exit 1
fi
echo "[doctest] test cases: 3 | 3 passed | 0 failed | 0 skipped"
EOF
chmod +x "$root/bin/fake_runtime_tests"
repeat_expect() {  # repeat_expect NAME STATUS TEXT [VAR=VALUE...]: the step records STATUS and TEXT
  local name=$1 want=$2 text=$3; shift 3
  limit[$name]=30
  rm -f "$root/counter"
  env FAKE_COUNTER="$root/counter" "$@" true >/dev/null  # the variables must be valid
  (export FAKE_COUNTER="$root/counter" "$@"; repeat_step "$name" 5 "$root/bin/fake_runtime_tests" --test-case='*x*' >/dev/null)
  local line got
  line=$(grep -a "^$name " "$work/summary.txt" | tail -n 1)
  got=$(awk '{print $2}' <<<"$line")
  if [[ $got == "$want" && $line == *"$text"* ]]; then echo "ok   $name: $got"; else
    echo "FAIL $name: recorded '$line', expected '$want' with '$text'"; fails=$((fails + 1)); fi
}
repeat_expect ordering-clean pass "5 runs passed"
repeat_expect ordering-mutant-release-wait fail "run 3 of 5 failed: gpu_loader_test.cu:452: ERROR: CHECK( got[0]" FAKE_FAIL_AT=3
repeat_expect ordering-no-device fail "device not usable" FAKE_EXIT77=1
dry=1; repeat_expect ordering-dry skip "skipped: 3 case(s)" FAKE_EXIT77=1; dry=0

# bench-decode: the host path and the exact device path promise the same images. The mutant forces
# that equality false: the step fails although the bench exited 0.
cat >"$root/bin/fake_pinfeed" <<'EOF'
#!/usr/bin/env bash
for q in 75 90; do
  echo "{\"quality\": $q, \"host_half_ratio\": 0.5, \"slot_bytes_mean\": 61440, \"loader_host_images_per_s\": 900, \"loader_device_images_per_s\": 2000, \"loader_same_images\": ${FAKE_SAME:-true}, \"loader_decoded\": \"device 64, host 0\"}"
done
EOF
chmod +x "$root/bin/fake_pinfeed"
decode_expect() {  # decode_expect NAME SAME STATUS TEXT
  limit[bench-decode]=20
  FAKE_SAME=$2 decode_step "$root/bin/fake_pinfeed" >/dev/null
  local line got
  line=$(grep -a "^bench-decode " "$work/summary.txt" | tail -n 1)
  got=$(awk '{print $2}' <<<"$line")
  if [[ $got == "$3" && $line == *"$4"* ]]; then echo "ok   $1: $got"; else
    echo "FAIL $1: recorded '$line', expected '$3' with '$4'"; fails=$((fails + 1)); fi
}
decode_expect decode-same true pass "q90: host half 0.50x, 60 KB/img, loader 2000 vs 900 img/s decoding on the device vs the host (same images"
decode_expect decode-mutant-differ false fail "IMAGES DIFFER"

# no compute-sanitizer at all
find_sanitizer() { :; }
limit[mc-absent]=20; expect mc-absent memcheck unsupported 0 ""

# Step sizes from counted work: a suite step's expected time is its start plus its cases' cost
# (doctest's own count of the step's filters), the hard limit twice that; the decode bench counts
# its images. A pass past the expected time is slow (not a failure); past the limit, a timeout.
cat >"$root/bin/runtime_tests" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do [[ $a == --list-test-cases ]] && { echo "[doctest] unskipped test cases passing the current filters: 12"; exit 0; }; done
exit 0
EOF
chmod +x "$root/bin/runtime_tests"
bin=$root/bin
plan_phase runtime-gpu memcheck-runtime bench-decode
size_ok() {  # size_ok NAME EXPECT LIMIT
  if [[ ${expect_s[$1]} == "$2" && ${limit[$1]} == "$3" ]]; then echo "ok   size $1: ${expect_s[$1]} s, limit ${limit[$1]} s"; else
    echo "FAIL size $1: expected ${expect_s[$1]} s, limit ${limit[$1]} s; wanted $2 and $3"; fails=$((fails + 1)); fi
}
size_ok runtime-gpu $(( (start_ms[runtime-gpu] + 12 * unit_ms[runtime-gpu] + 999) / 1000 )) $(( 2 * ((start_ms[runtime-gpu] + 12 * unit_ms[runtime-gpu] + 999) / 1000) ))
size_ok memcheck-runtime $(( (start_ms[memcheck-runtime] + 12 * unit_ms[memcheck-runtime] + 999) / 1000 )) \
  $(( 2 * ((start_ms[memcheck-runtime] + 12 * unit_ms[memcheck-runtime] + 999) / 1000) ))
size_ok bench-decode $(( (start_ms[bench-decode] + 64 * 9 * 3 * unit_ms[bench-decode] + 999) / 1000 )) \
  $(( 2 * ((start_ms[bench-decode] + 64 * 9 * 3 * unit_ms[bench-decode] + 999) / 1000) ))
cat >"$root/bin/slow_tests" <<'EOF'
#!/usr/bin/env bash
sleep "$FAKE_SLEEP"; echo "[doctest] test cases: 2 | 2 passed | 0 failed | 0 skipped"
EOF
chmod +x "$root/bin/slow_tests"
slow_expect() {  # slow_expect NAME SLEEP EXPECT STATUS
  expect_s[$1]=$3 limit[$1]=$((2 * $3))
  FAKE_SLEEP=$2 test_step "$1" "$root/bin/slow_tests" >/dev/null
  local line got
  line=$(grep -a "^$1 " "$work/summary.txt" | tail -n 1)
  got=$(awk '{print $2}' <<<"$line")
  if [[ $got == "$4" ]]; then echo "ok   $1: $got"; else echo "FAIL $1: recorded '$line', expected '$4'"; fails=$((fails + 1)); fi
}
slow_expect in-time 0 2 pass
slow_expect past-expected 3 2 slow
slow_expect past-limit 4 1 timeout
failed=0  # the timeout above sets the run's status; the verdicts are what this checks

# The budgets: with every step planned at its most (the bundle's real counts come from its binaries
# in the dry run, which records a budget failure itself), the sums are checked against the budget.
for name in "${tests_steps[@]}" "${bench_steps[@]}"; do expect_s[$name]=1; done
if check_budgets; then echo "ok   budgets"; else echo "FAIL budgets"; fails=$((fails + 1)); fi
expect_s[ops-gpu]=$((budget_of[tests] + 1))
if check_budgets >/dev/null; then echo "FAIL budgets: a phase over its budget passed"; fails=$((fails + 1)); else echo "ok   budgets: over is refused"; fi
((fails == 0)) || { echo "$fails verdicts wrong"; exit 1; }
echo "every verdict as promised"
