#!/usr/bin/env bash
# libnvjpeg for the GPU runner's device-inexact checks (pinfeed loads it at run time): the library
# of NVIDIA's nvidia-nvjpeg wheel on PyPI (pip download, no install), into DIR. Already there:
# nothing is fetched. Prints DIR.
# Usage: scripts/fetch-nvjpeg.sh [DIR]   (default build/nvjpeg)
set -euo pipefail
dir=${1:-build/nvjpeg}
version=13.3.2.43
if [[ -s $dir/libnvjpeg.so.13 ]]; then echo "$dir"; exit 0; fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --dest "$tmp" \
  "nvidia-nvjpeg==$version" >&2 || { echo "fetch-nvjpeg.sh: pip could not download nvidia-nvjpeg $version from PyPI" >&2; exit 1; }
python3 - "$(ls "$tmp"/nvidia_nvjpeg-*.whl)" "$dir" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if os.path.basename(n).startswith("libnvjpeg.so")]
    if not names:
        sys.exit("fetch-nvjpeg.sh: no libnvjpeg in " + wheel)
    for n in names:
        with open(os.path.join(out, os.path.basename(n)), "wb") as f:
            f.write(z.read(n))
PY
echo "$dir"
