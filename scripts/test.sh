#!/usr/bin/env bash
# Installs the dependencies, builds and runs every test (GPU cases skip where no device exists).
# Usage: scripts/test.sh [--sanitize address|thread] [extra ctest arguments...]
# Without --sanitize it also builds the GPU runner's bundle (scripts/gpu-bundle.sh) and dry-runs
# its device checks (PINFEED_SKIP_BUNDLE=1 skips that).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_args=()
if [[ ${1:-} == --sanitize ]]; then build_args=(--sanitize "$2"); shift 2; fi
bash "$root/scripts/build.sh" "${build_args[@]}"
build_dir=$root/build${build_args[1]:+-${build_args[1]}}
ctest_args=(--output-on-failure -j 2)
if ((${#build_args[@]})); then
  # Sanitized runs check the host code; the package tests rebuild pinfeed and add nothing there.
  ctest_args+=(-E '^package\.')
  export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp}
fi
if ((${#build_args[@]} == 0)) && [[ ${PINFEED_SKIP_BUNDLE:-0} != 1 ]]; then
  # The GPU runner's bundle, checked here without a GPU: every bundled binary starts with the
  # bundle's libraries alone, and each step of both phases runs in its no-GPU form.
  bash "$root/scripts/gpu-bundle.sh" "$root/bundle"
  OUT="$root/build/device-checks-dry-run" bash "$root/bundle/run-device-checks.sh" --dry-run
fi
cd "$build_dir"
ctest "${ctest_args[@]}" "$@"
