#!/usr/bin/env bash
# Installs pinfeed's build and test dependencies on Debian 12 (idempotent; apt-get only).
# The CUDA 13 toolkit (nvcc, CCCL, NVTX) is expected on PATH already; it is not a Debian package.
# Usage: scripts/install-deps.sh [--only PACKAGE...]   (--only: just those packages, no nvcc check)
set -euo pipefail
only=0
if [[ ${1:-} == --only ]]; then only=1; shift; fi

packages=("$@")
((only)) || packages=(
  cmake g++ make ninja-build pkg-config
  libtbb-dev            # worker pool (task arena)
  doctest-dev           # test framework
  libcli11-dev          # command line of the pinfeed tool
  nlohmann-json3-dev    # JSON (stats, trace, bench output)
  libdlpack-dev         # DLPack view of batches
  openmpi-bin           # mpirun, for the multi-rank sharding test
  libturbojpeg0-dev     # JPEG decoding (TurboJPEG API, DCT scaling)
  libjpeg62-turbo-dev   # libjpeg API of the same library: decoding only a crop window
  libopencv-core-dev libopencv-imgproc-dev  # resize, colour conversion
  libopencv-imgcodecs-dev  # tests: images of every format made at test time
  libpng-dev libwebp-dev libtiff-dev  # PNG, WebP and TIFF (the codec module)
  zlib1g-dev  # pinfeed preview writes its sheet as a PNG (libpng-dev brings it too)
  libcurl4-openssl-dev  # remote shards: HTTP(S) and S3 (SigV4) through libcurl
  libexpat1-dev         # remote shards: S3 listings (XML)
  libhwloc-dev          # the node plan: CPUs and NUMA node close to each GPU
  python3-jsonschema    # tests: the doctor's JSON report against its published schema
  nginx-light           # tests: a loopback HTTP server for the remote shards
  universal-ctags       # tests: the size limits of the sources (scripts/check-sizes.py)
  ccache                # one compiler cache for the build trees of a checkout (scripts/ccache-env.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all packages present"
fi

((only)) && exit 0
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [[ -x $d/nvcc ]] && { echo "install-deps: nvcc found at $d (add it to PATH)"; exit 0; }
  done
  echo "install-deps: nvcc (CUDA 13 toolkit) not found on PATH; pinfeed needs it to build" >&2
  exit 1
fi
