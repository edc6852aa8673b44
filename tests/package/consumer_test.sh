#!/usr/bin/env bash
# Builds and runs examples/trainer against pinfeed, either installed (find_package) or as a
# subdirectory. Usage: consumer_test.sh MODE BUILD_DIR SOURCE_DIR WORK_DIR CUDA_ARCHS (comma-separated)
set -euo pipefail
mode=$1 build=$2 src=$3 work=$4 archs=${5//,/;}
rm -rf "$work"
mkdir -p "$work"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
case $mode in
  find_package)
    cmake --install "$build" --prefix "$work/prefix" >/dev/null
    test -f "$work/prefix/lib/cmake/pinfeed/pinfeedConfig.cmake"
    test -f "$work/prefix/include/pinfeed/runtime/loader.hpp"
    test -f "$work/prefix/include/pinfeed/doctor/doctor.hpp"
    test -f "$work/prefix/share/pinfeed/doctor-report.schema.json"
    test -f "$work/prefix/include/pinfeed/version.hpp"
    test -f "$work/prefix/include/pinfeed/config.hpp"
    # Only the public headers are installed: of detail/, just no_cuda.hpp (cuda_api.hpp's CPU-only half).
    if find "$work/prefix/include/pinfeed" -path '*/detail/*' ! -name no_cuda.hpp | grep .; then
      echo "consumer_test: internal headers were installed (above)" >&2; exit 1
    fi
    # The imgcodecs module is installed beside the libraries, and the installed program, moved with
    # its prefix, opens that copy (found from where the program lies) on its first PNG.
    if grep -q "^PINFEED_WITH_IMGCODECS:BOOL=ON" "$build/CMakeCache.txt"; then
      test -f "$work/prefix/lib/pinfeed/libpinfeed_imgcodecs.so"
      python3 -c 'import os, struct, sys, zlib
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
os.makedirs(sys.argv[1] + "/a", exist_ok=True)
rows = b"".join(b"\0" + bytes(range(12)) for _ in range(4))
open(sys.argv[1] + "/a/0.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)) +
    chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))' "$work/png"
      LD_DEBUG=files "$work/prefix/bin/pinfeed" run --source "folder:$work/png" --transforms "center_crop(2)" --batch 1 --device cpu --limit 1 \
        >"$work/png.out" 2>&1
      grep -q "file=$work/prefix/lib/pinfeed/libpinfeed_imgcodecs.so" "$work/png.out" ||
        { echo "consumer_test: the installed program did not open the installed imgcodecs module" >&2; exit 1; }
    fi
    # The examples come with the package, and the trainer is built from the installed copy.
    test -f "$work/prefix/share/pinfeed/examples/trainer/main.cpp"
    test -f "$work/prefix/share/pinfeed/examples/trainer/CMakeLists.txt"
    # The package files: no condition left as a literal, no include directory listed twice.
    config=$work/prefix/lib/cmake/pinfeed/pinfeedConfig.cmake
    if grep -nE '^[[:space:]]*if\((ON|OFF|TRUE|FALSE|0|1)\)' "$config"; then
      echo "consumer_test: $config has a literal condition" >&2; exit 1
    fi
    if grep -E 'INTERFACE_INCLUDE_DIRECTORIES' "$work/prefix/lib/cmake/pinfeed/pinfeedTargets.cmake" |
        python3 -c 'import sys,re
for line in sys.stdin:
    dirs = re.search(r"\"(.*)\"", line).group(1).split(";")
    if len(dirs) != len(set(dirs)): print("duplicate include directories:", line.strip()); sys.exit(0)
sys.exit(1)'; then
      exit 1
    fi
    cmake -S "$work/prefix/share/pinfeed/examples/trainer" -B "$work/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
    expect_huffman="pinfeed's|libjpeg-turbo's"  # whatever the installed build chose
    ;;
  add_subdirectory)
    # A CPU-only consumer: pinfeed built from source without the CUDA toolkit's help, and with
    # pinfeed's JPEG Huffman decoder forced off (libjpeg-turbo's own then decodes). No build type
    # (CMake's default for a project that sets none: no optimisation flags, pinfeed's assertions
    # on), the quickest build of the whole library: what is checked is how it builds and links.
    cmake -S "$src/examples/subdir" -B "$work/build" "${gen[@]}" -DPINFEED_SOURCE_DIR="$src" \
      -DPINFEED_WITH_CUDA=OFF -DPINFEED_JPEG_HUFFMAN=OFF -DCMAKE_BUILD_TYPE= >/dev/null
    expect_huffman="libjpeg-turbo's [(]pinfeed's decoder was not built"
    grep -q "define PINFEED_WITH_CUDA 0" "$work/build/pinfeed/include/pinfeed/config.hpp"
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
cmake --build "$work/build" -j 2 >/dev/null
out=$("$work/build/trainer")
echo "$out"
grep -q "trained on 512 samples" <<<"$out"
grep -qE "JPEG Huffman decoder: ($expect_huffman)" <<<"$out"
grep -q "^doctor: " <<<"$out"

# pinfeed's public headers beside CUDA's own <cuda_runtime_api.h> (before and after), and README's
# ten-line example, compiled with -Wall -Wextra -Werror by the same kind of consumer
# (tests/package/headers): the installed CUDA build, or the CPU-only build from source.
python3 - "$src/README.md" "$work/readme_block.inc" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
start = lines.index("```cpp") + 1
end = lines.index("```", start)
open(sys.argv[2], "w").write("\n".join(lines[start:end]) + "\n")
PY
headers_args=(-DREADME_BLOCK="$work/readme_block.inc" -DCMAKE_BUILD_TYPE=Release)
case $mode in
  find_package) headers_args+=(-DCMAKE_PREFIX_PATH="$work/prefix") ;;
  add_subdirectory) headers_args+=(-DPINFEED_SOURCE_DIR="$src" -DPINFEED_WITH_CUDA=OFF -DPINFEED_JPEG_HUFFMAN=OFF) ;;
esac
cmake -S "$src/tests/package/headers" -B "$work/headers" "${gen[@]}" "${headers_args[@]}" >/dev/null
cmake --build "$work/headers" --target headers_consumer
echo "consumer_test: public headers beside <cuda_runtime_api.h>: compiled warning-free"
