#!/usr/bin/env bash
# Runs pinfeed's GPU checks from a bundle made by scripts/gpu-bundle.sh, in two phases that each end
# by themselves within a phase budget (default 280 s), every step under its own time limit:
#   tests  nvidia-smi, pinfeed info, the gpu-labelled test suites, compute-sanitizer memcheck and
#          racecheck on the device ops and memcheck on the runtime's GPU cases
#   bench  host-to-device copies, the sampler on a bounded size list, the doctor on the article's
#          pipeline on the GPU, and PyTorch's best sampler variants (torch.compile included) against
#          pinfeed's rows of the sampler step
# Results: exactly two files under $OUT (default ./device-checks-out), rewritten after every step so
# that a run cut short still returns what it did:
#   summary.txt      one line per step: name, pass/fail/skip/unsupported/timeout, seconds, key figure
#   results.tar.gz   every log and JSONL file of both phases
# --dry-run runs without a GPU: it checks that every bundled binary starts with the bundle's
# libraries plus the system base, runs each step in its no-GPU form, and exits 0 if nothing broke.
# Exit status: 0 when no step failed, timed out or was left unrun by the budget (skipped and
# unsupported steps do not fail).
# Usage: run-device-checks.sh [--dry-run] [tests|bench|all]   (default: all with --dry-run, else
#        a phase must be named)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
dry=0 phase=""
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
budget=${PINFEED_PHASE_BUDGET_S:-280}
failed=0

summary() { echo "$*" | tee -a "$work/summary.txt"; }
packed=$(mktemp "${TMPDIR:-/tmp}/pinfeed-results.XXXXXX")
trap 'rm -f "$packed"' EXIT
publish() {  # copy the summary and pack every log into $OUT (two files, nothing else)
  cp "$work/summary.txt" "$out/summary.txt"
  tar -C "$work" -czf "$packed" . && cp "$packed" "$out/results.tar.gz"
}
record() {  # record NAME STATUS SECONDS FIGURE
  printf '%-18s %-11s %5ss  %s\n' "$1" "$2" "$3" "$4" | tee -a "$work/summary.txt"
  case $2 in fail|timeout|not-run) failed=1 ;; esac
  publish
}

# step NAME LIMIT_S COMMAND...: runs COMMAND under min(LIMIT_S, what is left of the phase budget),
# stdout+stderr to NAME.log; sets $rc and $took.
step() {
  local name=$1 limit=$2; shift 2
  local left=$((deadline - SECONDS))
  if ((left < 5)); then
    rc=-1 took=0
    return
  fi
  ((limit > left)) && limit=$left
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$work/$name.log" 2>&1
  rc=$? took=$((SECONDS - t0))
}
# status of a finished step from $rc: pass, fail, timeout, skip (exit 77), or not-run (no time
# left in the phase budget, which fails the phase: a check that never ran proves nothing)
status_of() {
  case $rc in
    -1) echo not-run ;; 0) echo pass ;; 77) echo skip ;; 124|137) echo timeout ;; *) echo fail ;;
  esac
}
no_time="not run: no time left in the ${budget} s phase budget"

# The doctest summary line of a log, e.g. "12 passed, 0 failed, 3 skipped".
doctest_figure() {
  local line
  line=$(grep -a '^\[doctest\] test cases:' "$work/$1.log" | tail -n 1)
  # A suite that exits 77 ran without a device: its own line says why.
  if ((rc == 77)) || [[ -z $line ]]; then grep -a -m1 '^skipped:' "$work/$1.log" || echo "no doctest summary"; return; fi
  echo "$line" | sed -E 's/.*test cases: *([0-9]+) \| *([0-9]+) passed \| *([0-9]+) failed \| *([0-9]+) skipped.*/cases \1: \2 passed, \3 failed/'
}

test_step() {  # test_step NAME LIMIT BINARY ARGS...
  local name=$1 limit=$2; shift 2
  step "$name" "$limit" "$@"
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

sanitizer_step() {  # sanitizer_step NAME LIMIT TOOL BINARY ARGS...
  local name=$1 limit=$2 tool=$3; shift 3
  local cs
  cs=$(find_sanitizer)
  if [[ -z $cs ]]; then
    record "$name" unsupported 0 "compute-sanitizer not found on PATH or under /usr/local/cuda/bin"
    return
  fi
  if ((dry)); then
    step "$name" "$limit" "$cs" --version
    record "$name" skip "$took" "dry run: $cs found ($(grep -a -m1 -o 'Version [0-9.]*' "$work/$name.log" || echo '?'))"
    return
  fi
  step "$name" "$limit" "$cs" --tool "$tool" --error-exitcode 1 --print-limit 20 "$@"
  local st fig errors
  st=$(status_of)
  errors=$(grep -a -o 'ERROR SUMMARY: [0-9]* error' "$work/$name.log" | tail -n 1 | grep -o '[0-9]*')
  if ((rc == -1)); then
    fig=$no_time
  elif ((rc == 77)); then
    st=fail fig="device not usable: $(doctest_figure "$name")"
  elif [[ -z $errors && $rc != 0 && $rc != 124 && $rc != 137 ]]; then
    # No report at all: the sanitizer refused the device or could not attach.
    st=unsupported
    fig=$(grep -a -m1 -E '^========= (Error|Internal error)|not supported' "$work/$name.log" || tail -n 1 "$work/$name.log")
  else
    fig="${errors:-?} $tool errors; $(doctest_figure "$name")"
  fi
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
  deadline=$((SECONDS + budget))
  summary "# phase tests ($( ((dry)) && echo 'dry run, no GPU' || echo GPU)), budget ${budget} s"
  if ((dry)); then
    check_libraries
    record nvidia-smi skip 0 "dry run"
  else
    step nvidia-smi 20 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
    local st
    st=$(status_of)
    record nvidia-smi "$st" "$took" "$(head -n 1 "$work/nvidia-smi.log")"
  fi
  step info 20 "$bin/pinfeed" info
  record info "$(status_of)" "$took" "$(grep -a -m1 '^CUDA devices' "$work/info.log" | sed 's/  */ /g')"
  # The heavy sampler cases (80M labels, k = 2.5M) run once, outside the sanitizers.
  local heavy='*overflow_and_ties*,*one_row_large_k*,*most_rows*,*candidates_overflow*'
  test_step runtime-gpu 45 "$bin/runtime_tests" --test-suite=gpu
  test_step ops-gpu 70 "$bin/ops_tests" --test-suite=gpu
  test_step doctor-gpu 40 "$bin/doctor_tests" --test-suite=gpu
  sanitizer_step memcheck-ops 45 memcheck "$bin/ops_tests" --test-suite=gpu --test-case-exclude="$heavy"
  sanitizer_step racecheck-ops 30 racecheck "$bin/ops_tests" --test-suite=gpu \
    --test-case='*label_and_index_types*,*tie_at_threshold*,*labels_changed*'
  sanitizer_step memcheck-runtime 45 memcheck "$bin/runtime_tests" --test-suite=gpu
}

# --- phase: bench ------------------------------------------------------------------------------------
phase_bench() {
  deadline=$((SECONDS + budget))
  summary "# phase bench ($( ((dry)) && echo 'dry run, no GPU' || echo GPU)), budget ${budget} s"
  local device=cuda sizes=(10000 100000 1000000) samples=2048
  if ((dry)); then device=cpu sizes=(10000) samples=128; fi

  step bench-h2d 30 "$bin/pinfeed" bench h2d
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

  step bench-sampler 80 "$bin/pinfeed" bench sampler --device "$device" --repeats 5 --rows 32 \
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

  step doctor-article 70 "$bin/pinfeed" doctor --device "$device" --samples "$samples" --batch 64 --prefetch 4 \
    --transforms "crop(256),mask(0.25),ycbcr,scale" --step-ms 2 --json "$work/doctor-article.json"
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

  if python3 -c "import torch" >/dev/null 2>&1; then
    if ((dry)) || python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
      step torch-compare 90 env PYTHONUNBUFFERED=1 python3 "$here/compare/sampler_torch.py" --device "$device" \
        --pinfeed-jsonl "$work/bench-sampler.jsonl" --sizes "${sizes[@]}" --rows 32 --repeats 3 \
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

summary "# pinfeed device checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
[[ -f $here/BUNDLE_INFO ]] && while read -r line; do summary "# bundle: $line"; done <"$here/BUNDLE_INFO"
case $phase in
  tests) phase_tests ;;
  bench) phase_bench ;;
  all) phase_tests; phase_bench ;;
esac
summary "# done: $( ((failed)) && echo 'some step failed' || echo 'no step failed')"
publish
exit $failed
