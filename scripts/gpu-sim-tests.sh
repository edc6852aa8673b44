#!/usr/bin/env bash
# The GPU test suites on the functional GPU simulator: builds the simulator if its cache misses
# (tools/gpu-sim/build.sh), builds pinfeed's GPU test suites as PTX for compute_75 with the shared
# CUDA runtime (PINFEED_GPU_SIM) and a DLPack 1.x header (scripts/fetch-dlpack.sh), and runs every GPU case there (ctest -L gpu-sim): each case's
# kernels, copies, streams and events execute on the simulator and are compared with the CPU
# reference. With --mutants, also the mutants of the sampler, of the JPEG planes and of the
# augmentation jobs, each of which must fail (the suites can be seen to catch bugs in the kernels);
# they cost CI about 2.5 minutes of building and running, so CI leaves them out: run them after a
# change to a kernel or to its GPU test.
# Usage: scripts/gpu-sim-tests.sh [--mutants] [--build-only] [extra ctest arguments]
#   --build-only builds the simulator and the suites and runs nothing (scripts/flake-hunt.sh runs
#   them itself, many times).
# Environment: PINFEED_GPU_SIM_BUILD (default ./build-gpu-sim), and those of tools/gpu-sim/build.sh.
set -euo pipefail
build_only=0 mutants=0
if [[ ${1:-} == --mutants ]]; then mutants=1; shift; fi
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PINFEED_GPU_SIM_BUILD:-$root/build-gpu-sim}
source "$root/scripts/find-nvcc.sh"
bash "$root/scripts/install-deps.sh" >/dev/null
start=$(date +%s)
PINFEED_GPU_SIM_DIR=$(bash "$root/tools/gpu-sim/build.sh")
export PINFEED_GPU_SIM_DIR
echo "gpu-sim-tests: simulator in $PINFEED_GPU_SIM_DIR ($(($(date +%s) - start)) s)"
# As the GPU bundle's tree (JPEG only, the DLPack 1.x header): its host sources compile alike, and
# the compiler cache (scripts/ccache-env.sh) gives them to this tree; only the CUDA sources (PTX for
# compute_75) and the links are its own. The GPU suites decode no other image format.
source "$root/scripts/ccache-env.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPINFEED_GPU_SIM=ON -DPINFEED_INSTALL=OFF \
  -DPINFEED_DLPACK_INCLUDE_DIR="$(bash "$root/scripts/fetch-dlpack.sh")" -DPINFEED_WITH_IMGCODECS=OFF "${ccache_args[@]}" \
  -DPINFEED_BUILD_TOOLS=OFF >/dev/null
targets=(runtime_tests ops_tests doctor_tests)
# The list read whole first: `grep -q` on the pipe would close it at the first match, and ninja's
# SIGPIPE then failed the pipeline (pipefail), so bench_tests was left out at random.
target_list=$(cmake --build "$build" --target help)
grep -q '^bench_tests:' <<<"$target_list" && targets+=(bench_tests)
skip=()
if ((mutants)); then
  targets+=($(sed -n 's/^\(\(sampler\|jpeg\|augment\)_mutant_[a-z_]*\):.*/\1/p' <<<"$target_list"))
else
  skip=(-E '^gpu-sim[.]mutant[.]')
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
echo "gpu-sim-tests: built ($(($(date +%s) - start)) s)"
if ((build_only)); then exit 0; fi
bash "$root/scripts/ctest-costs.sh" "$build"  # the longest cases first
cd "$build"
ctest --output-on-failure -j 2 -L gpu-sim "${skip[@]}" "$@"
echo "gpu-sim-tests: done in $(($(date +%s) - start)) s"
