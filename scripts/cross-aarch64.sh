#!/usr/bin/env bash
# CPU-only cross build of pinfeed for aarch64 (Grace / GH200 hosts), tested under qemu: installs the
# cross compiler and qemu-user-static (apt-get), downloads the arm64 packages pinfeed needs into a
# private apt state and unpacks them into a sysroot (the host's own packages are not touched),
# builds with PINFEED_WITH_CUDA=OFF and a DLPack 1.x header (scripts/fetch-dlpack.sh: the versioned
# views are built and tested here; the x86 build keeps Debian's DLPack 0.6), and runs the runtime,
# ops and loaders test suites.
# Usage: scripts/cross-aarch64.sh [--sysroot | extra ctest arguments]
#   --sysroot: only download and unpack the sysroot (CI does it beside the main build: network, not CPUs)
# Environment: PINFEED_CROSS_CACHE (default /var/cache/pinfeed-cross: apt lists, .debs, sysroot),
#              PINFEED_CROSS_BUILD (default ./build-aarch64).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PINFEED_CROSS_CACHE:-/var/cache/pinfeed-cross}
build=${PINFEED_CROSS_BUILD:-$root/build-aarch64}
sysroot=$cache/sysroot
bash "$root/scripts/install-deps.sh" --only g++-aarch64-linux-gnu qemu-user-static cmake ninja-build

# The arm64 packages: pinfeed's dependencies and everything they need at run time (libc included,
# for qemu). A private status file makes apt resolve the whole closure.
target_packages=(libtbb-dev libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libpng-dev libwebp-dev libtiff-dev libturbojpeg0-dev
                 libjpeg62-turbo-dev libstdc++6 doctest-dev libcli11-dev nlohmann-json3-dev
                 libhwloc-dev)
stamp=$sysroot/.packages
if [[ ! -f $stamp || $(cat "$stamp") != "${target_packages[*]}" ]]; then
  mkdir -p "$cache/lists/partial" "$cache/archives/partial"
  : >"$cache/status"
  apt_opts=(-o APT::Architecture=arm64 -o APT::Architectures=arm64 -o "Dir::State::Lists=$cache/lists"
            -o "Dir::Cache=$cache" -o "Dir::Cache::archives=$cache/archives" -o "Dir::State::status=$cache/status"
            -o Debug::NoLocking=1)
  apt-get "${apt_opts[@]}" update -qq
  apt-get "${apt_opts[@]}" install --download-only --no-install-recommends -y -qq "${target_packages[@]}" >/dev/null
  rm -rf "$sysroot"
  mkdir -p "$sysroot"
  for deb in "$cache"/archives/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
  # Absolute symlinks inside the packages (libfoo.so -> /lib/...) must point into the sysroot.
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    ln -sfn "$sysroot$(readlink "$link")" "$link"
  done
  # Some packages' CMake files name absolute /usr paths (libjpeg-turbo's imported locations): into the sysroot too.
  find "$sysroot/usr/lib" "$sysroot/usr/share" -name '*.cmake' -path '*cmake*' -print0 2>/dev/null |
    xargs -0 -r sed -i "s|\"/usr|\"$sysroot/usr|g"
  echo "${target_packages[*]}" >"$stamp"
  echo "cross-aarch64: sysroot of $(ls "$cache"/archives/*.deb | wc -l) arm64 packages in $sysroot"
fi
[[ ${1:-} == --sysroot ]] && exit 0

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -DPINFEED_SYSROOT="$sysroot" -DPINFEED_DLPACK_INCLUDE_DIR="$(bash "$root/scripts/fetch-dlpack.sh")" -DPINFEED_WITH_CUDA=OFF -DPINFEED_WITH_CURL=OFF -DCMAKE_BUILD_TYPE=Release -DPINFEED_INSTALL=OFF \
  -DPINFEED_BUILD_TOOLS=OFF -DPINFEED_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target runtime_tests ops_tests loaders_tests
readelf -h "$build/tests/ops_tests" | grep -q "AArch64" || { echo "cross-aarch64: ops_tests is not an aarch64 binary" >&2; exit 1; }
bash "$root/scripts/ctest-costs.sh" "$build"  # the longest cases first
cd "$build"
ctest --output-on-failure -j 2 -L cpu -R '^(runtime|ops|loaders)_tests[.]' "$@"
