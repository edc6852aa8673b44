#!/usr/bin/env bash
# Installs the dependencies and builds pinfeed out of tree.
# Usage: scripts/build.sh [--sanitize address|thread] [--build-dir DIR] [--arch "80;90"] [--debug]
# Environment: PINFEED_CUDA_ARCHS overrides the CUDA architectures (default "80;90");
#   PINFEED_DLPACK_INCLUDE_DIR the DLPack header directory (default: DLPack 1.3's, fetched by
#   scripts/fetch-dlpack.sh, which adds the versioned views; empty: the dlpack package's 0.6).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize="" build_dir="" archs=${PINFEED_CUDA_ARCHS:-"80;90"} build_type=Release
while (($#)); do
  case $1 in
    --sanitize) sanitize=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --arch) archs=$2; shift 2 ;;
    --debug) build_type=Debug; shift ;;
    *) echo "build.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z $build_dir ]]; then
  build_dir=$root/build${sanitize:+-$sanitize}
fi
source "$root/scripts/find-nvcc.sh"
bash "$root/scripts/install-deps.sh"
if [[ -n $sanitize ]]; then build_type=RelWithDebInfo; fi
source "$root/scripts/ccache-env.sh"
# DLPack 1.3's header, as the GPU bundle's and the simulator's trees have it: the versioned views
# are built and tested here too, and the trees' host objects agree (the compiler cache shares them).
dlpack=${PINFEED_DLPACK_INCLUDE_DIR-$(bash "$root/scripts/fetch-dlpack.sh")}
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=$build_type "${ccache_args[@]}" \
  -DPINFEED_DLPACK_INCLUDE_DIR="$dlpack" \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DPINFEED_SANITIZE="$sanitize" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "build.sh: built $build_dir ($build_type${sanitize:+, sanitize=$sanitize}, CUDA archs $archs)"
