#!/usr/bin/env bash
# The C++ blocks of README.md and docs/api.md, compiled against the installed package with -Wall
# -Wextra -Werror (and every option struct designated-initialized), then the ImageFolder trainer run on
# generated photos: a run stopped after 5 batches and resumed from its saved state delivers the
# same batches as one uninterrupted run, each once.
# Usage: readme_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake --install "$build" --prefix "$work/prefix" >/dev/null
targets=$(python3 "$src/tests/package/readme/extract.py" "$src" "$work/project" "$src/README.md" "$src/docs/api.md")
echo "readme_test: blocks: $targets"
cmake -S "$work/project" -B "$work/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j 2
"$work/build/make_photos" "$work/photos" 45
trainer=$work/build/readme_trainer
export PINFEED_LOG_LEVEL=warn
"$trainer" "$work/photos" >"$work/full.txt"
"$trainer" "$work/photos" "$work/state.json" 5 >"$work/part1.txt"
test -s "$work/state.json"
"$trainer" "$work/photos" "$work/state.json" >"$work/part2.txt"
batches() { grep '^batch ' "$@"; }
full=$(batches "$work/full.txt" | wc -l)
# 46 files (one broken, skipped and replaced), batches of 32: 2 a epoch, 3 epochs.
if [[ $full -ne 6 ]]; then echo "readme_test: the uninterrupted run gave $full batches, not 6" >&2; exit 1; fi
if [[ $(batches "$work/part1.txt" | wc -l) -ne 5 ]]; then echo "readme_test: the first run did not stop after 5 batches" >&2; exit 1; fi
if ! diff <(batches "$work/full.txt") <(cat <(batches "$work/part1.txt") <(batches "$work/part2.txt")); then
  echo "readme_test: stopped and resumed, the trainer's batches differ from an uninterrupted run's" >&2
  exit 1
fi
if [[ $(grep -c '^epoch [0-2]: batches ' "$work/full.txt") -ne 3 ]]; then
  echo "readme_test: the trainer did not print a summary per epoch" >&2; cat "$work/full.txt" >&2; exit 1
fi
echo "readme_test: $full batches uninterrupted = 5 + $(batches "$work/part2.txt" | wc -l) stopped and resumed"
