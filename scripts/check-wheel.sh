#!/usr/bin/env bash
# Builds pinfeed's wheel as a user's `pip wheel .` does (scikit-build-core at the root, the CUDA
# runtime linked in), then checks it on its own: installed into a fresh virtual environment
# (numpy its only dependency), outside the source tree, with no CUDA library on the loader's
# path, it imports and loads batches on the CPU (tests/python/wheel_check.py). The test
# environment's Python, nanobind and scikit-build-core build it (--no-build-isolation); its tree is
# build-wheel/, laid out as build/, so the compiler cache shared with the main build
# (scripts/ccache-env.sh) gives the library's objects without compiling them again.
# Usage: scripts/check-wheel.sh [--arch "80;90"]   (default: the main build's, 90 in CI)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
archs=${PINFEED_CUDA_ARCHS:-90}
if [[ ${1:-} == --arch ]]; then archs=$2; shift 2; fi
source "$root/scripts/find-nvcc.sh"
source "$root/scripts/ccache-env.sh"
py=$root/.venv-test/bin/python
[[ -x $py ]] || { echo "check-wheel: no test environment (scripts/install-test-env.sh)" >&2; exit 1; }
dlpack=$(bash "$root/scripts/fetch-dlpack.sh")
# The main build's C++ compiler by the same name (the cache tells c++ from g++).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$root/build/CMakeCache.txt" 2>/dev/null || true)
out=$root/build/wheel
rm -rf "$out" "$root/build/wheel-venv"
mkdir -p "$out"
start=$(date +%s)
CMAKE_ARGS="${ccache_args[*]}" CMAKE_GENERATOR=Ninja "$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$out" -C build-dir="$root/build-wheel" -C cmake.define.CMAKE_CUDA_ARCHITECTURES="$archs" \
  -C cmake.define.PINFEED_DLPACK_INCLUDE_DIR="$dlpack" ${cxx:+-C cmake.define.CMAKE_CXX_COMPILER="$cxx"} "$root"
wheel=$(ls "$out"/pinfeed-*.whl)
echo "check-wheel: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) in $(($(date +%s) - start)) s"
python3 -m venv "$root/build/wheel-venv"
"$root/build/wheel-venv/bin/pip" install -q --disable-pip-version-check "$wheel"
# A bare environment: no CUDA library path, no PYTHONPATH, and the working directory outside the tree.
cd /
env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" "$root/build/wheel-venv/bin/python" "$root/tests/python/wheel_check.py" "$wheel"
