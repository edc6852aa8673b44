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
    cmake -S "$src/examples/trainer" -B "$work/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
    ;;
  add_subdirectory)
    cmake -S "$src/examples/subdir" -B "$work/build" "${gen[@]}" -DPINFEED_SOURCE_DIR="$src" \
      -DCMAKE_CUDA_ARCHITECTURES="$archs" -DCMAKE_BUILD_TYPE=Release >/dev/null
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
cmake --build "$work/build" -j 2 >/dev/null
out=$("$work/build/trainer")
echo "$out"
grep -q "trained on 512 samples" <<<"$out"
grep -q "^doctor: " <<<"$out"
