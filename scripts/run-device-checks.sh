#!/usr/bin/env bash
# Runs inside a bundle made by scripts/gpu-bundle.sh, on a GPU machine: the gpu-labelled tests,
# compute-sanitizer (memcheck, racecheck) on the device ops, the GPU benchmarks and the PyTorch
# comparison. Everything is written under $OUT (default ./out). Keeps going after a failure and
# exits non-zero if any step failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PINFEED_LOG_LEVEL=info
failed=()
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2; shift 2
  echo "== $name" | tee -a "$out/summary.txt"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  ((rc == 0)) || failed+=("$name")
  tail -n 3 "$out/$name.log" | sed 's/^/   /' | tee -a "$out/summary.txt"
}
date -u +"%Y-%m-%dT%H:%M:%SZ" >"$out/date.txt"
step nvidia-smi 30 nvidia-smi
step info 30 "$here/pinfeed" info
step runtime-gpu 300 "$here/runtime_tests" --test-suite=gpu
step ops-gpu 300 "$here/ops_tests" --test-suite=gpu
step loaders-gpu 300 "$here/loaders_tests" --test-suite=gpu
step doctor-gpu 300 "$here/doctor_tests" --test-suite=gpu
step runtime-all 300 "$here/runtime_tests"
# On a GPU machine no GPU case may skip: a skip means the device was not usable.
if grep -q "skipped (no GPU)" "$out/runtime-gpu.log" "$out/ops-gpu.log" "$out/doctor-gpu.log"; then
  echo "   GPU cases skipped: the device was not usable" | tee -a "$out/summary.txt"
  failed+=("gpu-not-used")
fi
if command -v compute-sanitizer >/dev/null; then
  step memcheck-ops 600 compute-sanitizer --tool memcheck --error-exitcode 1 "$here/ops_tests" --test-suite=gpu \
    --test-case-exclude='*overflow*'
  step racecheck-ops 600 compute-sanitizer --tool racecheck --error-exitcode 1 "$here/ops_tests" --test-suite=gpu \
    --test-case='*bit_identical*,*tie*'
  step memcheck-runtime 600 compute-sanitizer --tool memcheck --error-exitcode 1 "$here/runtime_tests" --test-suite=gpu
else
  echo "compute-sanitizer not found" >>"$out/summary.txt"
fi
step run-article-gpu 300 "$here/pinfeed" run --device cuda --samples 2048 --batch 64 --prefetch 4 \
  --transforms "crop(256),mask(0.25),ycbcr,scale" --step-ms 2 --json "$out/run-article-gpu.json"
step doctor-article-gpu 300 "$here/pinfeed" doctor --device cuda --samples 2048 --batch 64 --prefetch 4 \
  --transforms "crop(256),mask(0.25),ycbcr,scale" --step-ms 2 --json "$out/doctor-article-gpu.json"
step bench-h2d 300 "$here/pinfeed" bench h2d
cp "$out/bench-h2d.log" "$out/bench-h2d.jsonl"
step bench-sampler 600 "$here/pinfeed" bench sampler --device cuda --repeats 5
grep '^{' "$out/bench-sampler.log" >"$out/bench-sampler.jsonl"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  step torch-compare 600 python3 "$here/sampler_torch.py" --pinfeed "$here/pinfeed" --device cuda \
    --sizes 1000 10000 100000 1000000 10000000 --json "$out/sampler_cuda_vs_torch.jsonl"
fi
echo "failed: ${failed[*]:-none}" | tee -a "$out/summary.txt"
((${#failed[@]} == 0))
