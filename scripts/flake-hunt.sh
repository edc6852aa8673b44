#!/usr/bin/env bash
# Flake hunt: runs the main test suite and the GPU-simulator suite N times (default 10), each with
# one core kept busy beside it (a spinning shell: the load a CI runner's neighbour may add), and
# prints, for every case that failed at least once, how often it failed and where its first
# failing output is kept. Nothing is retried: a case that fails once is reported.
# Usage: scripts/flake-hunt.sh [N] [extra ctest arguments, for both suites]
# Environment: PINFEED_FLAKE_DIR (default build/flake-hunt) holds each run's log and JUnit file and
# first-failures/<case>.txt; PINFEED_FLAKE_SUITES (default "main gpu-sim") names the suites to run,
# and PINFEED_SKIP_GPU_SIM=1 leaves the simulator suite out.
# Exit status: 0 when every run of every case passed (or skipped), 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-10}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "flake-hunt: N must be a whole number of runs (1 or more), got '$runs'" >&2
  exit 2
fi
(($#)) && shift
out=${PINFEED_FLAKE_DIR:-$root/build/flake-hunt}
sim=${PINFEED_GPU_SIM_BUILD:-$root/build-gpu-sim}

suites=()
for suite in ${PINFEED_FLAKE_SUITES:-main gpu-sim}; do
  case $suite in
    main) suites+=(main) ;;
    gpu-sim) [[ ${PINFEED_SKIP_GPU_SIM:-0} == 1 ]] || suites+=(gpu-sim) ;;
    *) echo "flake-hunt: unknown suite '$suite' in PINFEED_FLAKE_SUITES (main, gpu-sim)" >&2; exit 2 ;;
  esac
done
if ((${#suites[@]} == 0)); then echo "flake-hunt: no suite to run" >&2; exit 2; fi
bash "$root/scripts/build.sh"
bash "$root/scripts/install-test-env.sh"
if [[ " ${suites[*]} " == *" gpu-sim "* ]]; then bash "$root/scripts/gpu-sim-tests.sh" --build-only; fi
rm -rf "$out"
mkdir -p "$out"

busy=""
stop_busy() { if [[ -n $busy ]]; then kill "$busy" 2>/dev/null || true; wait "$busy" 2>/dev/null || true; busy=""; fi; }
trap stop_busy EXIT
bash -c 'while :; do :; done' &
busy=$!
echo "flake-hunt: $runs runs of: ${suites[*]}; one core kept busy (pid $busy); logs in $out"

for ((i = 1; i <= runs; i++)); do
  for suite in "${suites[@]}"; do
    dir=$root/build label_args=()
    if [[ $suite == gpu-sim ]]; then dir=$sim label_args=(-L gpu-sim); fi
    start=$(date +%s)
    rc=0
    (cd "$dir" && ctest --output-on-failure -j 2 "${label_args[@]}" --output-junit "$out/$suite-$i.xml" "$@") \
      >"$out/$suite-$i.log" 2>&1 || rc=$?
    echo "flake-hunt: run $i/$runs $suite: exit $rc in $(($(date +%s) - start)) s ($(grep -E 'tests passed|tests failed' "$out/$suite-$i.log" | tail -1))"
  done
done
stop_busy

python3 - "$out" "$runs" "${suites[@]}" <<'EOF'
import os, re, sys
import xml.etree.ElementTree as ET

out, runs, suites = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
failures = {}   # case -> list of (suite, run)
first = {}      # case -> first failing output
seen = set()
missing = []
for run in range(1, runs + 1):
    for suite in suites:
        path = os.path.join(out, f"{suite}-{run}.xml")
        if not os.path.exists(path):
            missing.append(f"{suite}-{run}")
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name")
            seen.add(name)
            failed = case.get("status") == "fail" or case.find("failure") is not None or case.find("error") is not None
            if not failed:
                continue
            failures.setdefault(name, []).append((suite, run))
            if name not in first:
                text = case.findtext("system-out") or ""
                first[name] = f"{suite} run {run}\n{text}"
os.makedirs(os.path.join(out, "first-failures"), exist_ok=True)
for name, where in sorted(failures.items()):
    keep = os.path.join(out, "first-failures", re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".txt")
    with open(keep, "w") as f:
        f.write(first[name])
    runs_text = ", ".join(f"{s} run {r}" for s, r in where)
    print(f"FLAKY {name}: failed {len(where)} of {runs} runs ({runs_text}); first failing output: {keep}")
for m in missing:
    print(f"flake-hunt: no JUnit file for {m}: that run did not finish (see its log)")
total = sum(len(w) for w in failures.values())
print(f"flake-hunt: {runs} runs of {' and '.join(suites)}, {len(seen)} cases, "
      f"{total} failures in {len(failures)} cases")
sys.exit(1 if failures or missing else 0)
EOF
