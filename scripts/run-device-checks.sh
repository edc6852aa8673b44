#!/usr/bin/env bash
# Runs pinfeed's GPU checks from a bundle made by scripts/gpu-bundle.sh, in two phases that each end
# by themselves within a phase budget (tests 390 s, bench 210 s), every step under its own time limit:
#   tests  nvidia-smi, pinfeed info, the gpu-labelled test suites, compute-sanitizer memcheck on the
#          device ops and on the runtime's GPU cases (out-of-bounds and misaligned accesses, at the
#          cases' small shapes), racecheck and synccheck on the sampler's kernels (shared-memory
#          hazards and barriers: the only kernels with either), and the stream-ordering cases run
#          many times beside busy host threads, each checking the sums its readers saw
#          (ordering-repeat: a missing cudaStreamWaitEvent shows as a wrong sum there; no sanitizer
#          sees the order of streams). docs/gpu.md lists what each step checks and cannot see.
#   bench  host-to-device copies, the sampler on a bounded size list, the doctor on the article's
#          pipeline on the GPU, JPEG decoding (the host half's CPU time against the host path's, and
#          the device half's images/s), and PyTorch's best sampler variants (torch.compile included)
#          against pinfeed's rows of the sampler step
# Results: exactly two files under $OUT (default ./device-checks-out), rewritten after every step so
# that a run cut short still returns what it did:
#   summary.txt      one line per step: name, pass/fail/skip/unsupported/timeout, seconds, key figure
#   results.tar.gz   every log and JSONL file of both phases, and the doctor's page (doctor-report.html)
# --dry-run runs without a GPU: it checks that every bundled binary starts with the bundle's
# libraries plus the system base, runs each step in its no-GPU form, and exits 0 if nothing broke.
# Each step's time comes from the work it runs, counted: a start (process, CUDA context, module
# loading; under a sanitizer its instrumentation of every kernel) plus a cost per unit of work (a
# selected case; for the decode bench an image decoded by one loader at one quality). A step that
# passes past that expected time is reported slow, not failed; one still running at twice it (or
# at the end of the phase's budget) is stopped and reported timeout. The phase's expected times
# add up to no more than its budget (checked first).
# Exit status: 0 when no step failed, timed out or was left unrun by the budget (skipped, slow and
# unsupported steps do not fail).
# Usage: run-device-checks.sh [--dry-run] [tests|bench|all]   (default: all with --dry-run, else
#        a phase must be named). Sourced (as tests/tools/device_checks_test.sh does), it only
#        defines its functions.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
# nvJPEG (decode device-inexact): the runner's own where it has one, else the bundle's.
# (ldconfig's list read whole: `grep -q` on a pipe closes it at the first match, and under pipefail
# ldconfig's SIGPIPE would then read as "not found".)
if [[ -z ${PINFEED_NVJPEG_LIBRARY:-} && -e $here/nvjpeg/libnvjpeg.so.13 ]] &&
   ! grep -q 'libnvjpeg\.so\.13' <<<"$(ldconfig -p 2>/dev/null)"; then
  export PINFEED_NVJPEG_LIBRARY=$here/nvjpeg/libnvjpeg.so.13
fi
dry=0 phase="" failed=0
# Each phase's budget in seconds: both together, with the machine's start, within a lent GPU's 15
# minutes (PINFEED_TESTS_BUDGET_S, PINFEED_BENCH_BUDGET_S override them).
declare -A budget_of=([tests]=${PINFEED_TESTS_BUDGET_S:-390} [bench]=${PINFEED_BENCH_BUDGET_S:-210})

# A step's expected seconds: start_ms + unit_ms x its counted units (plan_step), in milliseconds.
# The bases: a GPU case at its GPU shapes runs in well under a second on an H100/H200 (the sampler's
# heavy ones, 80M labels, in a few); under a sanitizer the cases run at their small shapes
# (PINFEED_TEST_SMALL_SHAPES: the simulator's inputs, milliseconds of GPU work), so start-up and the
# tool's per-launch bookkeeping dominate.
declare -A start_ms=(
  [nvidia-smi]=5000 [info]=5000 [runtime-gpu]=10000 [ops-gpu]=10000 [doctor-gpu]=10000
  [memcheck-ops]=30000 [racecheck-ops]=30000 [synccheck-ops]=30000 [memcheck-runtime]=30000 [ordering-repeat]=2000
  [bench-h2d]=10000 [bench-sampler]=35000 [doctor-article]=30000 [bench-decode]=10000 [bench-augment]=40000 [torch-compare]=60000
)
declare -A unit_ms=(
  [nvidia-smi]=0 [info]=0 [runtime-gpu]=1000 [ops-gpu]=1000 [doctor-gpu]=5000
  [memcheck-ops]=1000 [racecheck-ops]=3000 [synccheck-ops]=2000 [memcheck-runtime]=1500 [ordering-repeat]=600
  [bench-h2d]=0 [bench-sampler]=0 [doctor-article]=0 [bench-decode]=8 [bench-augment]=0 [torch-compare]=0
)
declare -A expect_s=() limit=()  # set by plan_step: the expected seconds, and the hard limit (twice)
tests_steps=(nvidia-smi info runtime-gpu ops-gpu doctor-gpu memcheck-ops racecheck-ops synccheck-ops memcheck-runtime
             ordering-repeat)
bench_steps=(bench-h2d bench-sampler doctor-article bench-decode bench-augment torch-compare)
# Cases that assert timing (a call returns before a busy kernel ends, a copy overlaps a kernel): a
# sanitizer serializes and slows the device's work, so they are left out of its runs.
timing_cases='*never_waits*,*copy_overlaps*'
# The runtime's cases that order streams: DLPack views read on streams of their own (the per-thread
# and legacy streams among them), batches released after a stream, slots reused after the
# consumer's work, views and releases inside a graph capture.
stream_cases='*dlpack*,*releases_after*,*slot_reuse_waits*,*views_*'
# The heavy sampler cases (80M labels, k = 2.5M) run once, outside the sanitizers.
heavy_cases='*overflow_and_ties*,*one_row_large_k*,*most_rows*,*candidates_overflow*'
# The sampler's cases that racecheck and synccheck run: its kernels are the ones with shared memory
# and barriers.
barrier_cases='*label_and_index_types*,*tie_at_threshold*,*labels_changed*,*augment.every_op*,*augment.captured*'
# Repeats of the stream-ordering cases in ordering-repeat.
ordering_repeats=${PINFEED_ORDERING_REPEATS:-10}

# What each suite step runs: a bundled binary and its doctest arguments (none holds a space).
declare -A step_args=(
  [runtime-gpu]="runtime_tests --test-suite=gpu"
  [ops-gpu]="ops_tests --test-suite=gpu"
  [doctor-gpu]="doctor_tests --test-suite=gpu"
  [memcheck-ops]="ops_tests --test-suite=gpu --test-case-exclude=$heavy_cases,$timing_cases"
  [racecheck-ops]="ops_tests --test-suite=gpu --test-case=$barrier_cases"
  [synccheck-ops]="ops_tests --test-suite=gpu --test-case=$barrier_cases"
  [memcheck-runtime]="runtime_tests --test-suite=gpu --test-case-exclude=$timing_cases"
  [ordering-repeat]="runtime_tests --test-suite=gpu --test-case=$stream_cases"
)

# listed_cases BINARY ARGS...: how many cases doctest would run with ARGS (its own count), or empty.
listed_cases() {
  timeout 30 "$@" --list-test-cases 2>/dev/null |
    sed -n 's/.*test cases passing the current filters: *\([0-9]*\).*/\1/p' | tail -n 1
}

# count_cases NAME: the cases step NAME's selection runs (doctest's own count of its filters); the
# sampler's heavy cases count ten each in ops-gpu. Empty when the binary cannot list them.
count_cases() {
  local -a a
  read -ra a <<<"${step_args[$1]}"
  local n heavy=0
  n=$(listed_cases "$bin/${a[0]}" "${a[@]:1}")
  if [[ $1 == ops-gpu && -n $n ]]; then
    heavy=$(listed_cases "$bin/${a[0]}" "${a[@]:1}" --test-case="$heavy_cases")
    n=$((n + 9 * ${heavy:-0}))
  fi
  echo "$n"
}

# plan_step NAME UNITS: the step's expected seconds (expect_s) and hard limit (limit, twice that).
plan_step() {
  local ms=$(( ${start_ms[$1]:?no start for step $1} + ${unit_ms[$1]:?no unit cost for step $1} * $2 ))
  expect_s[$1]=$(( (ms + 999) / 1000 ))
  limit[$1]=$(( 2 * expect_s[$1] ))
}

# units_of NAME: the counted work of step NAME (cases selected, times the repeats; images decoded).
units_of() {
  case $1 in
    runtime-gpu|ops-gpu|doctor-gpu|memcheck-ops|racecheck-ops|synccheck-ops|memcheck-runtime)
      local n; n=$(count_cases "$1"); echo "${n:-0}" ;;
    ordering-repeat) local n; n=$(count_cases "$1"); echo $(( ${n:-0} * ordering_repeats )) ;;
    bench-decode) echo $(( decode_images * 3 * 3 * decode_repeats )) ;;  # 3 qualities, 3 loaders
    *) echo 0 ;;
  esac
}
decode_images=64 decode_repeats=3

# plan_phase STEP...: plans every step from its counted work.
plan_phase() {
  local name
  for name in "$@"; do plan_step "$name" "$(units_of "$name")"; done
}

summary() { echo "$*" | tee -a "$work/summary.txt"; }
publish() {  # copy the summary and pack every log into $OUT (two files, nothing else)
  cp "$work/summary.txt" "$out/summary.txt"
  tar -C "$work" -czf "$packed" . && cp "$packed" "$out/results.tar.gz"
}
record() {  # record NAME STATUS SECONDS FIGURE   (a pass past the step's expected time: slow)
  local st=$2 fig=$4
  if [[ $st == pass && -n ${expect_s[$1]:-} ]] && (($3 > expect_s[$1])); then
    st=slow fig="$fig; slow: $3 s against the $((expect_s[$1])) s its counted work should take"
  fi
  printf '%-18s %-11s %5ss  %s\n' "$1" "$st" "$3" "$fig" | tee -a "$work/summary.txt"
  case $st in fail|timeout|not-run) failed=1 ;; esac
  publish
}

# check_budgets: every phase's expected step times (plan_phase) add up to no more than its budget;
# prints the sums and fails otherwise.
check_budgets() {
  local phase_name steps sum name ok=0
  for phase_name in tests bench; do
    declare -n steps=${phase_name}_steps
    sum=0
    for name in "${steps[@]}"; do sum=$((sum + ${expect_s[$name]:-0})); done
    echo "$phase_name: steps expected to take $sum s of the ${budget_of[$phase_name]} s budget"
    ((sum <= budget_of[$phase_name])) || ok=1
    unset -n steps
  done
  return $ok
}

# step NAME COMMAND...: runs COMMAND under min(the step's limit, what is left of the phase budget),
# stdout+stderr to NAME.log; sets $rc and $took.
step() {
  local name=$1 lim=${limit[$1]:?no limit for step $1}; shift
  local left=$((deadline - SECONDS))
  if ((left < 5)); then
    rc=-1 took=0
    return
  fi
  ((lim > left)) && lim=$left
  local t0=$SECONDS
  timeout -k 5 "$lim" "$@" >"$work/$name.log" 2>&1
  rc=$? took=$((SECONDS - t0))
}
# status of a finished step from $rc: pass, slow (passed, past its expected time), fail, timeout,
# skip (exit 77), or not-run (no time left in the phase budget, which fails the phase: a check that
# never ran proves nothing)
status_of() {
  case $rc in
    -1) echo not-run ;; 77) echo skip ;; 124|137) echo timeout ;;
    0) echo pass ;;
    *) echo fail ;;
  esac
}
no_time="not run: no time left in the phase's budget"

# The doctest summary line of a log (doctest_figure_of LOG EXIT), e.g. "cases 12: 12 passed, 0
# failed"; doctest_figure NAME reads NAME.log with the last step's exit status.
doctest_figure_of() {
  local line
  line=$(grep -a '^\[doctest\] test cases:' "$1" | tail -n 1)
  # A suite that exits 77 ran without a device: its own line says why.
  if (($2 == 77)) || [[ -z $line ]]; then grep -a -m1 '^skipped:' "$1" || echo "no doctest summary"; return; fi
  echo "$line" | sed -E 's/.*test cases: *([0-9]+) \| *([0-9]+) passed \| *([0-9]+) failed \| *([0-9]+) skipped.*/cases \1: \2 passed, \3 failed/'
}
doctest_figure() { doctest_figure_of "$work/$1.log" "$rc"; }

test_step() {  # test_step NAME BINARY ARGS...
  local name=$1; shift
  step "$name" "$@"
  local st fig
  st=$(status_of)
  if ((rc == -1)); then fig=$no_time; else fig=$(doctest_figure "$name"); fi
  # On a GPU runner a GPU suite that skips means the device was not usable: that fails the check.
  if [[ $st == skip && $dry == 0 && $rc == 77 ]]; then st=fail fig="device not usable: $fig"; fi
  record "$name" "$st" "$took" "$fig"
}

find_sanitizer() {
  command -v compute-sanitizer 2>/dev/null && return
  local c
  # /usr/local/cuda first, then the versioned installs, newest first.
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
           $(ls -d /usr/local/cuda-*/bin/compute-sanitizer 2>/dev/null | sort -rV); do
    [[ -x $c ]] && { echo "$c"; return; }
  done
}

# sanitizer_verdict TOOL LOG RC: "status|figure" of a compute-sanitizer run. Its summary line is
# "ERROR SUMMARY: N error(s)" (memcheck, synccheck, initcheck) or "RACECHECK SUMMARY: N hazard(s)
# displayed (E error(s), W warning(s))" (racecheck). Any error or hazard, warnings included, fails;
# so does a non-zero exit with a clean summary (a test failed under the tool) and a run with no
# summary at all. "unsupported" only when the tool says the device is not supported (a sandboxed
# GPU, as under gVisor).
sanitizer_verdict() {
  local tool=$1 log=$2 code=$3 summary count why
  why=$(grep -a -m1 -i -E 'device (is )?not supported|not supported on this (device|platform)' "$log")
  if [[ -n $why ]]; then echo "unsupported|${why#========= }"; return; fi
  case $code in
    124|137) echo "timeout|timed out"; return ;;
    77) echo "fail|device not usable: $(grep -a -m1 '^skipped:' "$log" || echo 'the suite exited 77')"; return ;;
  esac
  if [[ $tool == racecheck ]]; then
    summary=$(grep -a -o -E 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)' "$log" | tail -n 1)
  else
    summary=$(grep -a -o -E 'ERROR SUMMARY: [0-9]+ errors?' "$log" | tail -n 1)
  fi
  if [[ -z $summary ]]; then
    echo "fail|no $tool summary (exit $code): $(grep -a -v '^\s*$' "$log" | tail -n 1)"
    return
  fi
  count=$(sed -E 's/^[A-Z ]+SUMMARY: ([0-9]+).*/\1/' <<<"$summary")
  local figure="$summary; $(doctest_figure_of "$log" "$code")"
  if ((count > 0)); then echo "fail|$figure"
  elif ((code != 0)); then echo "fail|exit $code under the tool: $figure"
  else echo "pass|$figure"
  fi
}

sanitizer_step() {  # sanitizer_step NAME TOOL NOTE BINARY ARGS...   (NOTE: what the run leaves out)
  local name=$1 tool=$2 note=$3; shift 3
  local cs
  cs=$(find_sanitizer)
  if [[ -z $cs ]]; then
    record "$name" unsupported 0 "compute-sanitizer not found on PATH or under /usr/local/cuda/bin"
    return
  fi
  if ((dry)); then
    step "$name" "$cs" --version
    # The step's case filter must select cases: a renamed case would leave the tool nothing to check.
    local listed
    listed=$(listed_cases "$@")
    if [[ -z $listed || $listed == 0 ]]; then
      record "$name" fail "$took" "dry run: its case filter selects ${listed:-no} cases"
      return
    fi
    record "$name" skip "$took" "dry run: $cs found ($(grep -a -m1 -o 'Version [0-9.]*' "$work/$name.log" || echo '?')), $listed cases selected"
    return
  fi
  # API errors are not reported: cases query events that are not ready yet (cudaErrorNotReady).
  # At the cases' small shapes (the simulator's inputs): the same kernel paths, bounded work.
  step "$name" env PINFEED_TEST_SMALL_SHAPES=1 "$cs" --tool "$tool" --error-exitcode 1 --report-api-errors no \
    --print-limit 20 "$@"
  if ((rc == -1)); then
    record "$name" not-run 0 "$no_time"
    return
  fi
  local verdict
  verdict=$(sanitizer_verdict "$tool" "$work/$name.log" "$rc")
  record "$name" "${verdict%%|*}" "$took" "${verdict#*|}${note:+ ($note)}"
}

# repeat_step NAME TIMES BINARY ARGS...: runs a doctest selection TIMES times in a row with busy host
# threads beside it (all cores but two spinning), stopping at the first failed run. Each of the
# stream-ordering cases checks the sums its readers computed from a slot that the next copy would
# overwrite: a missing or misplaced wait shows as a wrong sum in some run, where a sanitizer sees
# nothing. Records pass (every run passed), fail (the first failing run and its first failed check),
# skip (no device: the first run exited 77), timeout or not-run.
repeat_step() {
  local name=$1 times=$2; shift 2
  local busy=$(( $(nproc) - 2 )) pids=() i
  ((busy < 1)) && busy=1
  ((dry)) && busy=0  # the dry run checks the step's logic, not the machine
  for ((i = 0; i < busy; i++)); do (while :; do :; done) & pids+=($!); done
  step "$name" bash -c 'n=$1; shift; for ((r = 1; r <= n; r++)); do echo "== run $r of $n"; "$@" || exit $?; done' \
    repeat "$times" "$@"
  ((${#pids[@]})) && { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; }
  local st fig runs
  st=$(status_of)
  runs=$(grep -a -c '^== run ' "$work/$name.log")
  case $st in
    pass) fig="$times runs passed beside $busy busy host threads, $(doctest_figure "$name") each" ;;
    skip) fig=$(doctest_figure "$name")
          if ((dry == 0)); then st=fail fig="device not usable: $fig"; fi ;;
    not-run) fig=$no_time ;;
    timeout) fig="$((runs - 1)) of $times runs passed before the limit" ;;
    *) fig="run $runs of $times failed: $(grep -a -m1 -E 'ERROR:|error:|FATAL' "$work/$name.log" | cut -c1-160)" ;;
  esac
  record "$name" "$st" "$took" "$fig"
}

# --- the bundle's binaries start with their own libraries plus the system base ---------------------
check_libraries() {
  local t0=$SECONDS bad="" exe lib path listing
  source "$here/base-libs.sh"
  for exe in "$bin"/*; do
    while read -r lib path; do
      [[ -n $path ]] && path=$(realpath -m "$path")
      [[ $path == "$here"/lib/* ]] && continue
      is_base_lib "$lib" || bad+=" $(basename "$exe"):$lib=>${path:-missing}"
    done < <(ldd "$exe" 2>&1 | awk '/=>/ {print $1, ($3 ~ /^\//) ? $3 : ""}')
  done
  {
    for exe in runtime_tests ops_tests doctor_tests; do
      timeout 30 "$bin/$exe" --list-test-cases >/dev/null 2>&1 || bad+=" $exe:--list-test-cases-failed"
    done
    timeout 30 "$bin/pinfeed" --help >/dev/null 2>&1 || bad+=" pinfeed:--help-failed"
  }
  if [[ -z $bad ]]; then
    listing=$(ls "$here/lib" | wc -l)
    record libraries pass $((SECONDS - t0)) "$(ls "$bin" | wc -l) binaries start with $listing bundled libraries + the system base"
  else
    record libraries fail $((SECONDS - t0)) "not from the bundle or not starting:$bad"
  fi
}

# --- phase: tests ------------------------------------------------------------------------------------
phase_tests() {
  local budget=${budget_of[tests]}
  deadline=$((SECONDS + budget))
  summary "# phase tests ($( ((dry)) && echo 'dry run, no GPU' || echo GPU)), budget ${budget} s"
  if ((dry)); then
    check_libraries
    record nvidia-smi skip 0 "dry run"
  else
    step nvidia-smi nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
    local st
    st=$(status_of)
    record nvidia-smi "$st" "$took" "$(head -n 1 "$work/nvidia-smi.log")"
  fi
  step info "$bin/pinfeed" info
  record info "$(status_of)" "$took" "$(grep -a -m1 '^CUDA devices' "$work/info.log" | sed 's/  */ /g')"
  local -a a
  for name in runtime-gpu ops-gpu doctor-gpu; do
    read -ra a <<<"${step_args[$name]}"
    test_step "$name" "$bin/${a[0]}" "${a[@]:1}"
  done
  read -ra a <<<"${step_args[memcheck-ops]}"
  sanitizer_step memcheck-ops memcheck "heavy and timing cases left out" "$bin/${a[0]}" "${a[@]:1}"
  read -ra a <<<"${step_args[racecheck-ops]}"
  sanitizer_step racecheck-ops racecheck "the sampler's shared-memory kernels, 3 cases" "$bin/${a[0]}" "${a[@]:1}"
  read -ra a <<<"${step_args[synccheck-ops]}"
  sanitizer_step synccheck-ops synccheck "the sampler's barriers, 3 cases" "$bin/${a[0]}" "${a[@]:1}"
  read -ra a <<<"${step_args[memcheck-runtime]}"
  sanitizer_step memcheck-runtime memcheck "timing cases left out" "$bin/${a[0]}" "${a[@]:1}"
  # No sanitizer sees the order between streams: the ordering cases, many times, check it by data.
  read -ra a <<<"${step_args[ordering-repeat]}"
  repeat_step ordering-repeat "$ordering_repeats" "$bin/${a[0]}" "${a[@]:1}"
}

# decode_step COMMAND...: the decode bench (COMMAND prints its JSONL rows), recorded as bench-decode.
# The host path and the exact device path promise the same images: a difference fails the step,
# whatever the exit status; nvJPEG (inexact) is reported with its mean difference.
decode_step() {
  step bench-decode "$@"  # decode_images x 3 qualities x 3 loaders x decode_repeats (units_of)
  grep -a '^{' "$work/bench-decode.log" >"$work/bench-decode.jsonl" 2>/dev/null
  local fig=$no_time
  if ((rc != -1)); then
    fig=$(python3 - "$work/bench-decode.jsonl" 2>/dev/null <<'EOF' || echo "no rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def dev(r):
    v = r.get("device_half_images_per_s")
    s = f", device half {v:.0f} img/s" if v else ""
    h, d = r.get("loader_host_images_per_s"), r.get("loader_device_images_per_s")
    if h and d:
        same = "same images" if r.get("loader_same_images") else "IMAGES DIFFER"
        s += f", loader {d:.0f} vs {h:.0f} img/s decoding on the device vs the host ({same}; {r.get('loader_decoded')})"
    n = r.get("loader_nvjpeg_images_per_s")
    if n:
        s += f", nvJPEG {r.get('loader_nvjpeg')} {n:.0f} img/s (mean abs diff {r.get('loader_nvjpeg_mean_abs_diff', 0):.2f})"
    elif r.get("loader_nvjpeg"):
        s += f", nvJPEG {r.get('loader_nvjpeg')}"
    return s
print("; ".join(f"q{r['quality']}: host half {r['host_half_ratio']:.2f}x, {r['slot_bytes_mean'] / 1024:.0f} KB/img{dev(r)}" for r in rows))
EOF
    )
  fi
  local st
  st=$(status_of)
  # The host and the exact device path promise the same bits: a difference fails the step.
  [[ $fig == *"IMAGES DIFFER"* ]] && st=fail
  record bench-decode "$st" "$took" "$fig"
}

# --- phase: bench ------------------------------------------------------------------------------------
phase_bench() {
  local budget=${budget_of[bench]}
  deadline=$((SECONDS + budget))
  summary "# phase bench ($( ((dry)) && echo 'dry run, no GPU' || echo GPU)), budget ${budget} s"
  local device=cuda sizes=(10000 100000 1000000) samples=2048
  if ((dry)); then device=cpu sizes=(10000) samples=128; fi

  step bench-h2d "$bin/pinfeed" bench h2d
  grep -a '^{' "$work/bench-h2d.log" >"$work/bench-h2d.jsonl" 2>/dev/null
  local fig=$no_time
  if ((rc != -1)); then
    fig=$(python3 - "$work/bench-h2d.jsonl" 2>/dev/null <<'EOF' || echo "no rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r.get("impl"): r for r in rows if r.get("device") == "cuda"}
skipped = [r for r in rows if "skipped" in r]
if by:
    print(", ".join(f"{k} {by[k]['gb_per_s']:.1f} GB/s" for k in ("cudaMemcpy_pageable", "cudaMemcpy_pinned", "ring") if k in by))
elif skipped:
    print("skipped: " + skipped[0].get("reason", "?"))
else:
    print(f"{len(rows)} rows")
EOF
    )
  fi
  record bench-h2d "$(status_of)" "$took" "$fig"

  step bench-sampler "$bin/pinfeed" bench sampler --device "$device" --repeats 5 --rows 32 \
    --sizes "${sizes[@]}" --max-cpu-n 100000
  grep -a '^{' "$work/bench-sampler.log" >"$work/bench-sampler.jsonl" 2>/dev/null
  local fig=$no_time
  if ((rc != -1)); then
    fig=$(python3 - "$work/bench-sampler.jsonl" 2>/dev/null <<'EOF' || echo "no rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = [r for r in rows if r.get("impl") in ("graph", "batched", "cub_topk") and r.get("B") == 32 and "median_ms" in r]
if not want:
    print(f"{len(rows)} rows, none batched")
else:
    top = max(r["N"] for r in want)
    print("; ".join(f"{r['impl']} B=32 N={r['N']}: {r['median_ms']:.3f} ms ({r.get('device', '?')})" for r in want if r["N"] == top))
EOF
    )
  fi
  record bench-sampler "$(status_of)" "$took" "$fig"

  step doctor-article "$bin/pinfeed" doctor --device "$device" --samples "$samples" --batch 64 --prefetch 4 \
    --transforms "crop(256),mask(0.25),ycbcr,scale" --step-ms 2 --json "$work/doctor-article.json" \
    --html "$work/doctor-report.html"
  local fig=$no_time
  if ((rc != -1)); then
    fig=$(python3 - "$work/doctor-article.json" 2>/dev/null <<'EOF' || echo "no report"
import json, sys
r = json.load(open(sys.argv[1]))
print(str(r.get("verdict", "no verdict"))[:160])
EOF
    )
  fi
  record doctor-article "$(status_of)" "$took" "$fig"

  if compgen -G "$here/photos/*.jpg" >/dev/null; then
    decode_step "$bin/pinfeed" bench decode --photos "$here/photos" --images "$decode_images" --repeats "$decode_repeats"
  else
    record bench-decode skip 0 "no photos in the bundle"
  fi

  # The device ops on batches of 64, and the recipe decoded and augmented on the GPU against the host
  # (the same checksum lines, or the step fails); without a GPU (the dry run) the bench says it skipped.
  step bench-augment "$bin/pinfeed" bench augment --device cuda --images 256 --repeats 3 --seconds 0.1 --data "$work/augment-data" --photos "$here/photos"
  grep -a '^{' "$work/bench-augment.log" >"$work/bench-augment.jsonl" 2>/dev/null
  local fig=$no_time
  if ((rc != -1)); then
    fig=$(python3 - "$work/bench-augment.jsonl" 2>/dev/null <<'EOF' || echo "no rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ops = [r for r in rows if "us_per_image" in r]
recipe = [r for r in rows if r.get("workload") == "recipe"]
skipped = [r for r in rows if r.get("skipped") == "gpu"]
if skipped:
    print("skipped: " + skipped[0].get("reason", "?")[:120])
else:
    s = f"{len(ops)} device ops, " + ", ".join(f"{r['op']} {r['us_per_image']:.1f} us" for r in ops if r["op"] in ("trivial_augment", "rand_augment(2,9)", "equalize"))
    for r in recipe:
        same = "same checksums" if r["same_checksums"] else "CHECKSUMS DIFFER"
        s += f"; recipe {r['device_images_per_s']:.0f} vs {r['host_images_per_s']:.0f} img/s on the device vs the host ({same})"
    print(s)
EOF
    )
  fi
  local st
  st=$(status_of)
  [[ $fig == *"CHECKSUMS DIFFER"* ]] && st=fail
  record bench-augment "$st" "$took" "$fig"

  if python3 -c "import torch" >/dev/null 2>&1; then
    if ((dry)) || python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
      # torch.compile compiles one shape (B = 1 and B = 32 at N = 100000): cold, that takes most of
      # the step's two minutes.
      step torch-compare env PYTHONUNBUFFERED=1 python3 "$here/compare/sampler_torch.py" --device "$device" \
        --pinfeed-jsonl "$work/bench-sampler.jsonl" --sizes "${sizes[@]}" --compile-sizes 100000 --rows 32 --repeats 3 \
        --json "$work/sampler-vs-torch.jsonl"
      local fig=$no_time
      if ((rc != -1)); then
        fig=$(python3 - "$work/sampler-vs-torch.jsonl" 2>/dev/null <<'EOF' || echo "no rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("; ".join(f"B={r['B']} N={r['N']}: best torch / pinfeed {r['best_torch_over_pinfeed']:.1f}x" for r in rows if r["B"] > 1))
EOF
        )
      fi
      record torch-compare "$(status_of)" "$took" "$fig"
    else
      record torch-compare skip 0 "PyTorch has no usable CUDA device"
    fi
  else
    record torch-compare skip 0 "PyTorch is not installed here"
  fi
}

main() {
  for arg in "$@"; do
    case $arg in
      --dry-run) dry=1 ;;
      tests|bench|all) phase=$arg ;;
      *) echo "run-device-checks: unknown argument '$arg' (expected --dry-run, tests, bench or all)" >&2; exit 2 ;;
    esac
  done
  [[ -z $phase && $dry == 1 ]] && phase=all
  [[ -n $phase ]] || { echo "run-device-checks: name a phase: tests, then bench (or --dry-run)" >&2; exit 2; }
  out=${OUT:-$PWD/device-checks-out}
  work=$here/results  # logs of the phases run from this bundle: tests starts afresh, bench adds to it
  [[ $phase == bench ]] || rm -rf "$work"
  mkdir -p "$out" "$work"
  packed=$(mktemp "${TMPDIR:-/tmp}/pinfeed-results.XXXXXX")
  trap 'rm -f "$packed"' EXIT

  summary "# pinfeed device checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  [[ -f $here/BUNDLE_INFO ]] && while read -r line; do summary "# bundle: $line"; done <"$here/BUNDLE_INFO"
  # Every step's expected time from its counted work (the bundle's binaries count their cases).
  plan_phase "${tests_steps[@]}" "${bench_steps[@]}"
  local sums name plan=""
  for name in "${tests_steps[@]}" "${bench_steps[@]}"; do plan+=" $name=${expect_s[$name]}"; done
  summary "# expected seconds:$plan"
  sums=$(check_budgets | paste -sd ';' -)
  summary "# budgets: $sums"
  check_budgets >/dev/null || record budgets fail 0 "a phase's expected step times add up to more than its budget: $sums"
  case $phase in
    tests) phase_tests ;;
    bench) phase_bench ;;
    all) phase_tests; phase_bench ;;
  esac
  summary "# done: $( ((failed)) && echo 'some step failed' || echo 'no step failed')"
  publish
  exit $failed
}

# Run when executed; sourced, only the functions are defined.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
