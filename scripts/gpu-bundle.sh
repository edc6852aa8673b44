#!/usr/bin/env bash
# Builds pinfeed for sm_90 and packs a relocatable bundle for a GPU runner that has the NVIDIA
# driver, compute-sanitizer and (optionally) PyTorch, but none of pinfeed's Debian libraries:
# the test and bench executables, every shared library they need outside glibc/libstdc++/the CUDA
# driver, the comparison script and bundle/run-device-checks.sh, which runs everything into $OUT.
# It also writes BUNDLE_DIR.tar.xz: the libraries OpenCV's codecs pull in make the folder about
# 190 MB, over what a device run may carry (64 MiB), while the archive is about 50 MB. Carry the
# archive and run: tar -xJf bundle.tar.xz && bash bundle/run-device-checks.sh
# Usage: scripts/gpu-bundle.sh [BUNDLE_DIR (default: bundle)]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${1:-$root/bundle}
bash "$root/scripts/build.sh" --build-dir "$root/build-sm90" --arch 90
rm -rf "$bundle"
mkdir -p "$bundle/lib"
for exe in tests/runtime_tests tests/ops_tests tests/loaders_tests tests/doctor_tests tools/pinfeed; do
  cp "$root/build-sm90/$exe" "$bundle/"
done
# Shared libraries outside the system's C/C++ runtime and the CUDA driver (cudart is static).
for exe in "$bundle"/runtime_tests "$bundle"/ops_tests "$bundle"/loaders_tests "$bundle"/doctor_tests "$bundle"/pinfeed; do
  ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcuda.so*) ;;
      *) cp -nL "$lib" "$bundle/lib/" ;;
    esac
  done
done
cp "$root/bench/compare/sampler_torch.py" "$root/bench/compare/common.py" "$bundle/"
cp "$root/scripts/run-device-checks.sh" "$bundle/"
chmod +x "$bundle/run-device-checks.sh"
du -sh "$bundle"
ls "$bundle" "$bundle/lib"
tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -T0 -6 >"$bundle.tar.xz"
ls -l "$bundle.tar.xz"
