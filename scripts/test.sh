#!/usr/bin/env bash
# Installs the dependencies, builds and runs every test (GPU cases skip where no device exists).
# Usage: scripts/test.sh [--sanitize address|thread] [--faults] [extra ctest arguments...]
# --faults: only the allocation-failure sweeps (tests/fault), every allocation point up to 2,000
#   and a stride past them (CI runs 500 points of each).
# Without --sanitize it also, before the main test run:
#   - builds the Python module (python/, with the test environment's nanobind) into build/python;
#     its pytest files (tests/python) run in the main run as the CTest cases python.*,
#   - builds the GPU runner's bundle and dry-runs its device checks (scripts/gpu-bundle.sh),
#   - builds the Python wheel as `pip wheel .` does and checks it installed on its own
#     (scripts/check-wheel.sh),
#   - cross-builds for aarch64 and runs the runtime, ops and loaders tests under qemu
#     (scripts/cross-aarch64.sh),
#   - compiles every CUDA translation unit with the newest CUDA 13.x from PyPI (scripts/check-cuda-newest.sh),
#   - runs every fuzz target for 4 s (PINFEED_CI_FUZZ_SECONDS) from its seeds (scripts/fuzz.sh),
#   - runs the GPU suites on the functional GPU simulator (scripts/gpu-sim-tests.sh: ctest -L gpu-sim).
# Every test run fails a case that passed without a single assertion and recorded no skip (the
# tests' main counts each case's assertions: tests/test_main.cpp). Each step's start is stamped.
# PINFEED_SKIP_BUNDLE=1, PINFEED_SKIP_WHEEL=1, PINFEED_SKIP_CROSS=1, PINFEED_SKIP_CUDA_NEWEST=1, PINFEED_SKIP_FUZZ=1 and
# PINFEED_SKIP_GPU_SIM=1 leave one out.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_args=()
faults=0
if [[ ${1:-} == --sanitize ]]; then build_args=(--sanitize "$2"); shift 2; fi
if [[ ${1:-} == --faults ]]; then faults=1; shift; fi
# In CI (CI=true, no GPU), sm_90 only: the GPU bundle's architecture, so that the bundle's tree takes
# this tree's CUDA objects from the compiler cache; the newest-CUDA step compiles sm_80. Elsewhere
# build.sh's default (80;90), which a GPU here may need. PINFEED_CUDA_ARCHS overrides both.
archs=${PINFEED_CUDA_ARCHS:-"80;90"}
[[ ${CI:-} == true && -z ${PINFEED_CUDA_ARCHS:-} ]] && archs=90
# A whole run (no --sanitize, no --faults): every step's Debian packages first, in one apt
# transaction, then what the later steps download (the test environment's wheels, the arm64
# sysroot, the newest CUDA's wheels) beside the main build, which needs the CPUs while they need
# the network. Each is waited for, its output printed, before its step; a failed one fails the run.
fetches=()
if ((${#build_args[@]} == 0 && faults == 0)); then
  bash "$root/scripts/install-deps.sh"
  bash "$root/scripts/install-deps.sh" --only chromium python3-venv python3-pip g++-aarch64-linux-gnu qemu-user-static \
    clang libclang-rt-14-dev
  mkdir -p "$root/build"
  fetch() {  # fetch NAME SKIP COMMAND...: runs COMMAND in the background unless SKIP is 1
    local name=$1 skip=$2; shift 2
    [[ $skip == 1 ]] && return
    ( set +e; "$@" >"$root/build/fetch-$name.log" 2>&1; echo $? >"$root/build/fetch-$name.rc" ) &
    fetches+=("$name")
  }
  fetch test-env 0 bash "$root/scripts/install-test-env.sh"
  fetch sysroot "${PINFEED_SKIP_CROSS:-0}" bash "$root/scripts/cross-aarch64.sh" --sysroot
  fetch cuda-newest "${PINFEED_SKIP_CUDA_NEWEST:-0}" bash "$root/scripts/check-cuda-newest.sh" --fetch
fi
bash "$root/scripts/build.sh" --arch "$archs" "${build_args[@]}"
if ((${#fetches[@]})); then
  wait
  for name in "${fetches[@]}"; do
    sed "s/^/[fetch $name] /" "$root/build/fetch-$name.log"
    [[ $(cat "$root/build/fetch-$name.rc" 2>/dev/null) == 0 ]] || { echo "test.sh: fetching $name failed" >&2; exit 1; }
  done
else
  bash "$root/scripts/install-test-env.sh"  # Chromium, moto, Pillow and torchvision for the tests
fi
build_dir=$root/build${build_args[1]:+-${build_args[1]}}
if ((${#build_args[@]} == 0 && faults == 0)); then
  # The Python module, against the test environment's Python and nanobind (fetched beside the
  # build), into build/python; its tests (tests/python) join the main run as python.*.
  echo "== test.sh: Python module ($(date -u +%H:%M:%S))"
  source "$root/scripts/ccache-env.sh"  # the build's compiler cache (build-ccache/), as build.sh set it up
  cmake -S "$root" -B "$build_dir" -DPINFEED_PYTHON=ON -DPython_EXECUTABLE="$root/.venv-test/bin/python" >/dev/null
  cmake --build "$build_dir" -j "$(nproc)" --target _pinfeed
fi
ctest_args=(--output-on-failure -j 2)
if ((${#build_args[@]})); then
  # Sanitized runs check the host code; the package tests rebuild pinfeed and add nothing there.
  ctest_args+=(-E '^package\.')
  export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp}
fi
if ((faults)); then
  export PINFEED_FAULT_POINTS=all
  ctest_args+=(-R '^fault_tests\.')
elif ((${#build_args[@]} == 0)); then
  step() { echo "== test.sh: $1 ($(date -u +%H:%M:%S))"; }
  if [[ ${PINFEED_SKIP_BUNDLE:-0} != 1 ]]; then
    # The GPU runner's bundle, checked here without a GPU: every bundled binary starts with the
    # bundle's libraries alone, and each step of both phases runs in its no-GPU form.
    step "GPU runner bundle and its dry run"
    bash "$root/scripts/gpu-bundle.sh" "$root/bundle"
    OUT="$root/build/device-checks-dry-run" bash "$root/bundle/run-device-checks.sh" --dry-run
  fi
  if [[ ${PINFEED_SKIP_WHEEL:-0} != 1 ]]; then
    # The wheel a user's `pip wheel .` builds (its objects from the compiler cache), installed into
    # a fresh environment and checked there without CUDA's libraries.
    step "Python wheel: built, installed alone, imported without CUDA"
    bash "$root/scripts/check-wheel.sh" --arch "$archs"
  fi
  if [[ ${PINFEED_SKIP_CROSS:-0} != 1 ]]; then
    step "aarch64 cross build, tests under qemu"
    bash "$root/scripts/cross-aarch64.sh"
  fi
  if [[ ${PINFEED_SKIP_CUDA_NEWEST:-0} != 1 ]]; then
    step "newest CUDA 13.x toolkit: compile and link"
    bash "$root/scripts/check-cuda-newest.sh"
  fi
  if [[ ${PINFEED_SKIP_FUZZ:-0} != 1 ]]; then
    # Every fuzz target for a short while (a found input fails here and is kept in fuzz/regressions/).
    step "fuzz targets, ${PINFEED_CI_FUZZ_SECONDS:-4} s each"
    PINFEED_FUZZ_JOBS=$(nproc) bash "$root/scripts/fuzz.sh" "${PINFEED_CI_FUZZ_SECONDS:-4}"
  fi
  if [[ ${PINFEED_SKIP_GPU_SIM:-0} != 1 ]]; then
    step "GPU suites on the simulator"
    bash "$root/scripts/gpu-sim-tests.sh"
  fi
  step "main test run"
fi
bash "$root/scripts/ctest-costs.sh" "$build_dir"  # the longest tests first in a fresh build
cd "$build_dir"
ctest "${ctest_args[@]}" "$@"
