#!/usr/bin/env bash
# Builds pinfeed's libFuzzer targets (fuzz/: clang, ASan + UBSan, the same libraries the tool
# links, built without CUDA) and runs each for SECONDS (default 600), PINFEED_FUZZ_JOBS of them at
# a time (default: the number of CPUs). Each starts from its seeds (fuzz/corpus/<target>) and the
# inputs that once failed (fuzz/regressions/<target>); what it learns stays in
# build-fuzz/corpus/<target> for the next run. An input that fails a check or crashes is written
# to fuzz/regressions/<target>/, which the test suite replays on every run, and the script exits 1.
# Prints, per target, the executions, the coverage (libFuzzer's cov: and ft:) and the outcome.
# PINFEED_FUZZ_KEEP_GOING=1 (for long runs): a target goes on after a failing input (libFuzzer's
# fork mode), so one run finds every failure it can; each is kept as above.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: the folders of fuzz/corpus)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
shift || true
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive number, not '$seconds'" >&2; exit 2; }
jobs=${PINFEED_FUZZ_JOBS:-$(nproc)}
build=${PINFEED_FUZZ_BUILD:-$root/build-fuzz}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/install-deps.sh" --only clang libclang-rt-14-dev
start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPINFEED_FUZZ=ON \
  -DPINFEED_WITH_CUDA=OFF -DPINFEED_BUILD_TESTS=OFF -DPINFEED_BUILD_TOOLS=OFF -DPINFEED_BUILD_BENCH=OFF \
  -DPINFEED_INSTALL=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >/dev/null
cmake --build "$build" -j "$(nproc)" --target pinfeed_fuzzers
echo "fuzz.sh: built the targets in $(( $(date +%s) - start )) s"

mapfile -t built < "$build/fuzz/targets.txt"
targets=("$@")
((${#targets[@]})) || targets=("${built[@]}")
for t in "${targets[@]}"; do
  [[ " ${built[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (this build has: ${built[*]})" >&2; exit 2; }
done

logs=$build/logs
mkdir -p "$logs"
run_one() {
  local t=$1 corpus=$build/corpus/$1 regressions=$root/fuzz/regressions/$1
  mkdir -p "$corpus" "$regressions"
  cp -n "$root/fuzz/corpus/$t"/* "$corpus/" 2>/dev/null || true
  # A fresh directory for what it finds, so that a crash is told apart from the inputs kept before.
  local found=$build/found/$t
  rm -rf "$found" && mkdir -p "$found"
  local rc=0 extra=()
  [[ ${PINFEED_FUZZ_KEEP_GOING:-0} == 1 ]] && extra=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz/$t" "${extra[@]}" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="$found/" "$corpus" "$regressions" >"$logs/$t.log" 2>&1) || rc=$?
  local kept
  kept=$(find "$found" -type f | head -n 20)
  if [[ -n $kept ]]; then
    cp "$found"/* "$regressions/"
    rc=${rc/#0/1}
  fi
  echo "$rc" >"$logs/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
wait || true

failed=0
printf '%-14s %12s %10s %8s %8s  %s\n' target executions 'exec/s' cov ft outcome
for t in "${targets[@]}"; do
  log=$logs/$t.log rc=$(cat "$logs/$t.rc" 2>/dev/null || echo 1)
  stat() { { grep -a -o "$1" "$log" || true; } | tail -n 1 | awk '{print $NF}'; }
  # A plain run's final stats, or (fork mode) the last status line's count.
  execs=$(stat 'stat::number_of_executed_units: *[0-9]*')
  [[ -n $execs ]] || execs=$({ grep -a -o -E '^#[0-9]+' "$log" || true; } | tail -n 1 | tr -d '#')
  rate=$(( ${execs:-0} / seconds ))
  cov=$(stat 'cov: [0-9]*')
  ft=$(stat 'ft: [0-9]*')
  if [[ $rc == 0 ]]; then
    outcome=clean
  else
    failed=1
    outcome="FAILED (exit $rc): input kept in fuzz/regressions/$t/; log $log"
  fi
  printf '%-14s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$outcome"
done
if ((failed)); then
  for t in "${targets[@]}"; do
    [[ $(cat "$logs/$t.rc" 2>/dev/null) == 0 ]] && continue
    echo "== $t: the end of its log"
    grep -a -v -e '^#[0-9]' -e 'NEW_FUNC' "$logs/$t.log" | tail -n 40 || true
  done
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, $seconds s each, no failure"
