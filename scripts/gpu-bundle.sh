#!/usr/bin/env bash
# Builds the GPU checks for sm_90 (H100/H200) and packs them into a small relocatable bundle for a
# GPU runner that has the NVIDIA driver, compute-sanitizer and (optionally) PyTorch, but none of
# pinfeed's Debian libraries:
#   bundle/bin/       runtime_tests, ops_tests, doctor_tests and pinfeed, built without OpenCV's
#                     codecs (PINFEED_WITH_IMGCODECS=OFF), with a DLPack 1.x header (scripts/fetch-dlpack.sh:
#                     the versioned views too), with RPATH $ORIGIN/../lib
#   bundle/lib/       the shared libraries they need, except the system base: the glibc family,
#                     libstdc++/libgcc_s and the CUDA driver come from the runner
#   bundle/compare/   the PyTorch comparison script
#   bundle/photos/    the JPEG photos of scripts/fetch-photos.sh, for the decode bench
#   bundle/nvjpeg/    libnvjpeg.so.13 from PyPI (scripts/fetch-nvjpeg.sh), for decode device-inexact
#   bundle/run-device-checks.sh, bundle/BUNDLE_INFO
# and bundle.tar.gz beside the folder: carry that archive, then on the runner
#   tar -xzf bundle.tar.gz && bash bundle/run-device-checks.sh tests
#   bash bundle/run-device-checks.sh bench
# Nothing is put on LD_LIBRARY_PATH: only the bundled binaries look in bundle/lib.
# Usage: scripts/gpu-bundle.sh [BUNDLE_DIR (default: ./bundle)]
# Environment: PINFEED_BUNDLE_BUILD_DIR (default ./build-bundle), PINFEED_BUNDLE_ARCHS (default 90).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=$(realpath -m "${1:-$root/bundle}")
build=${PINFEED_BUNDLE_BUILD_DIR:-$root/build-bundle}
archs=${PINFEED_BUNDLE_ARCHS:-90}
source "$root/scripts/find-nvcc.sh"
bash "$root/scripts/install-deps.sh"


# DT_RPATH (not RUNPATH) so that the bundled libraries' own dependencies are found there too.
source "$root/scripts/ccache-env.sh"  # the host sources compile as the simulator tree's do
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$archs" "${ccache_args[@]}" \
  -DPINFEED_WITH_IMGCODECS=OFF -DPINFEED_INSTALL=OFF \
  -DPINFEED_DLPACK_INCLUDE_DIR="$(bash "$root/scripts/fetch-dlpack.sh")" -DPINFEED_BUILD_TESTS=ON -DPINFEED_BUILD_TOOLS=ON \
  -DPINFEED_BUILD_BENCH=ON '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
  >/dev/null
cmake --build "$build" -j "$(nproc)" --target runtime_tests ops_tests doctor_tests pinfeed_tool

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/compare"
for exe in tests/runtime_tests tests/ops_tests tests/doctor_tests tools/pinfeed; do
  cp "$build/$exe" "$bundle/bin/"
done

# The system base every Linux GPU runner has (one list, read by the dry run too); everything else
# the binaries load is bundled.
source "$root/scripts/base-libs.sh"
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    is_base_lib "$name" || cp -nL "$path" "$bundle/lib/$name"
  done
done
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so* 2>/dev/null || true

cp "$root/bench/compare/sampler_torch.py" "$root/bench/compare/common.py" "$bundle/compare/"
cp "$root/scripts/run-device-checks.sh" "$root/scripts/system-base-libs.txt" "$root/scripts/base-libs.sh" "$bundle/"
# The decode bench's photos: the JPEG ones (this build decodes no PNG), about 1 MB.
mkdir -p "$bundle/photos"
if photos=$(bash "$root/scripts/fetch-photos.sh" "$root/build/photos" 2>/dev/null); then
  cp "$photos"/*.jpg "$bundle/photos/"
else
  echo "gpu-bundle: no photos (scripts/fetch-photos.sh failed): the bundle's decode bench will be skipped" >&2
fi
# nvJPEG for the device-inexact checks (loaded at run time, where the runner has none of its own):
# the PyPI wheel's library, about 3 MB packed.
if nvjpeg=$(bash "$root/scripts/fetch-nvjpeg.sh" "$root/build/nvjpeg" 2>/dev/null); then
  mkdir -p "$bundle/nvjpeg"
  cp "$nvjpeg"/libnvjpeg.so.13 "$bundle/nvjpeg/"
else
  echo "gpu-bundle: no libnvjpeg (scripts/fetch-nvjpeg.sh failed): device-inexact falls back to the exact path there" >&2
fi
chmod +x "$bundle/run-device-checks.sh"
{
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo '+changes')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), CUDA archs $archs, PINFEED_WITH_IMGCODECS=OFF"
} >"$bundle/BUNDLE_INFO"

tar -C "$(dirname "$bundle")" -czf "$bundle.tar.gz" "$(basename "$bundle")"
echo "gpu-bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/lib" | wc -l) libraries: $(ls "$bundle/lib" | tr '\n' ' '))"
echo "gpu-bundle: $(du -h "$bundle.tar.gz" | cut -f1) in $bundle.tar.gz"
# A device run carries at most 64 MiB with the working tree (about 4 MiB): keep the archive at
# half of that (27 MiB on 2026-12-05, libnvjpeg's 3 MiB included).
size=$(stat -c %s "$bundle.tar.gz")
if ((size > 32 * 1024 * 1024)); then
  echo "gpu-bundle: $bundle.tar.gz is $((size >> 20)) MiB, over the 32 MiB budget" >&2
  exit 1
fi
