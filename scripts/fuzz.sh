#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for SECONDS (default 600) on the
# seed corpus in fuzz/corpus/<target>. Crashing inputs are kept in fuzz/regressions/<target>/,
# which the test suite replays on every run. Needs clang and libclang-rt (Debian: clang,
# libclang-rt-14-dev) and a built tree (scripts/build.sh).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: tar_index file_list decode)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(tar_index file_list decode)
out=$root/build-fuzz
mkdir -p "$out"
[[ -f $root/build/runtime/libpinfeed_runtime.a ]] || bash "$root/scripts/build.sh"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/runtime/include" -I"$root/ops/include" -I"$root/loaders/include" -I"$root/fuzz"
       -I/usr/local/cuda/include -I/usr/include/opencv4)
sources=("$root/fuzz/targets.cpp" "$root/loaders/src/shards.cpp" "$root/loaders/src/decode.cpp" "$root/loaders/src/jpeg_huffman.cpp"
         "$root/loaders/src/image_files.cpp" "$root/loaders/src/pipeline_source.cpp" "$root/loaders/src/transforms.cpp")
libs=("$root/build/ops/libpinfeed_ops.a" "$root/build/runtime/libpinfeed_runtime.a" -lturbojpeg -ljpeg -lopencv_imgcodecs -lopencv_imgproc -lopencv_core
      -ltbb -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread)
for t in "${targets[@]}"; do
  echo "== building $t"
  clang++ "${flags[@]}" "$root/fuzz/${t}_fuzz.cpp" "${sources[@]}" "${libs[@]}" -o "$out/$t"
  mkdir -p "$out/corpus-$t" "$root/fuzz/regressions/$t"
  cp -n "$root/fuzz/corpus/$t"/* "$out/corpus-$t/" 2>/dev/null || true
  echo "== fuzzing $t for $seconds s"
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./$t" -max_total_time="$seconds" -rss_limit_mb=4096 -max_len=65536 \
      -artifact_prefix="$root/fuzz/regressions/$t/" "corpus-$t" 2>&1 | tail -n 5) || echo "!! $t found a crash: see fuzz/regressions/$t"
done
