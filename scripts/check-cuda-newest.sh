#!/usr/bin/env bash
# Compiles every CUDA translation unit of pinfeed (the libraries', the benches' and the GPU tests')
# and every public header beside <cuda_runtime_api.h> (pinfeed_headers_check) with the newest CUDA
# 13.x toolkit, installed into a local prefix from PyPI wheels (nvcc, NVVM, CRT, the runtime and
# CCCL), beside the system's CUDA 13.0: CUB/Thrust or runtime API drift between CCCL 3.0 / CUDA 13.0
# and the newest fails here. The host-only translation units see no CUDA header that the public
# headers do not, so they are not compiled again; nothing is linked or run. For sm_80: the other
# trees of a CI run build sm_90 (scripts/test.sh), so both architectures are compiled.
# Usage: scripts/check-cuda-newest.sh [--fetch]   (--fetch: only download and unpack the toolkit's wheels)
# Environment: PINFEED_CUDA_NEWEST (default 13.5: the nvcc/runtime series), PINFEED_CCCL_WHEEL (default
#              13.3.5.0.6: nvidia-cuda-cccl's CCCL 3.5), PINFEED_CUDA_NEWEST_CACHE (default
#              /var/cache/pinfeed-cuda-newest), PINFEED_CUDA_NEWEST_BUILD (default ./build-cuda-newest).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
series=${PINFEED_CUDA_NEWEST:-13.5}
cccl=${PINFEED_CCCL_WHEEL:-13.3.5.0.6}
cache=${PINFEED_CUDA_NEWEST_CACHE:-/var/cache/pinfeed-cuda-newest}
build=${PINFEED_CUDA_NEWEST_BUILD:-$root/build-cuda-newest}
prefix=$cache/prefix-$series-$cccl
cuda=$prefix/nvidia/cu13
[[ ${1:-} == --fetch ]] || bash "$root/scripts/install-deps.sh" >/dev/null
if [[ ! -x $cuda/bin/nvcc ]]; then
  mkdir -p "$cache/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$cache/wheels" "nvidia-cuda-nvcc==$series.*" "nvidia-nvvm==$series.*" "nvidia-cuda-crt==$series.*" \
    "nvidia-cuda-runtime==$series.*" "nvidia-cuda-cccl==$cccl"
  rm -rf "$prefix"
  python3 -m pip install -q --root-user-action=ignore --no-deps --no-compile --no-index --target "$prefix" \
    "$cache"/wheels/nvidia_cuda_nvcc-$series.*.whl "$cache"/wheels/nvidia_nvvm-$series.*.whl \
    "$cache"/wheels/nvidia_cuda_crt-$series.*.whl "$cache"/wheels/nvidia_cuda_runtime-$series.*.whl \
    "$cache"/wheels/nvidia_cuda_cccl-$cccl-*.whl
  # CMake's FindCUDAToolkit looks for the unversioned library name.
  ln -sfn libcudart.so.13 "$cuda/lib/libcudart.so"
fi
[[ ${1:-} == --fetch ]] && { echo "check-cuda-newest: CUDA $series in $prefix"; exit 0; }
echo "check-cuda-newest: $("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1), CUB $(sed -n 's/^#define CUB_VERSION \([0-9]*\).*/\1/p' "$cuda/include/cccl/cub/version.cuh")"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" \
  -DCUDAToolkit_ROOT="$cuda" -DCMAKE_CUDA_ARCHITECTURES=80 -DPINFEED_INSTALL=OFF -DPINFEED_HEADERS_CHECK=ON >/dev/null
# Every object compiled from a .cu file, and the header check's objects.
mapfile -t objects < <(ninja -C "$build" -t targets all | sed -n 's/^\([^:]*\(\.cu\.o\|pinfeed_headers_check\.dir\/[^:]*\.o\)\): .*/\1/p')
cu=$(printf '%s\n' "${objects[@]}" | grep -c '\.cu\.o$' || true)
if ((cu == 0)) || ! printf '%s\n' "${objects[@]}" | grep -q pinfeed_headers_check; then
  echo "check-cuda-newest: found $cu CUDA objects and $(printf '%s\n' "${objects[@]}" | grep -c pinfeed_headers_check) header objects to build; expected both" >&2
  exit 1
fi
ninja -C "$build" -j "$(nproc)" "${objects[@]}"
echo "check-cuda-newest: $cu CUDA translation units and the public headers compiled"
