#!/usr/bin/env bash
# Prints a directory holding a DLPack 1.x header (dlpack/dlpack.h, with DLManagedTensorVersioned),
# for builds that check pinfeed's versioned DLPack views: Debian 12's libdlpack-dev is DLPack 0.6,
# which has none. The header comes from a pinned PyPI wheel (apache-tvm-ffi ships DLPack's header
# unchanged) and is checked against its SHA-256 before use; nothing is installed system-wide.
# Usage: dir=$(scripts/fetch-dlpack.sh); cmake ... -DPINFEED_DLPACK_INCLUDE_DIR="$dir"
# Environment: PINFEED_DLPACK_CACHE (default /var/cache/pinfeed-dlpack).
set -euo pipefail
wheel_pin="apache-tvm-ffi==0.1.15.post2"
header_sha256=62052bef24bd69bb7b52e95428f9e99bd7951783850c36c5f2a41e71fd63c2fc  # DLPack 1.3
cache=${PINFEED_DLPACK_CACHE:-/var/cache/pinfeed-dlpack}
dir=$cache/dlpack-1.3/include
header=$dir/dlpack/dlpack.h
have_header() { [[ -f $header ]] && echo "$header_sha256  $header" | sha256sum -c --status; }
if have_header; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache/wheels"
# Two builds starting at once (a CI runner's parallel jobs) fetch one at a time: the second finds
# the first's header. The header is written beside its place and renamed into it, so that no
# reader ever sees half of it.
exec 9>"$cache/.lock"
flock 9
if have_header; then
  echo "$dir"
  exit 0
fi
# The header is the same in every platform's wheel; one platform's is enough.
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 -d "$cache/wheels" "$wheel_pin" >&2
wheel=$(ls "$cache"/wheels/apache_tvm_ffi-0.1.15.post2-*.whl | head -n 1)
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 - "$wheel" "$tmp/dlpack.h" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("tvm_ffi/include/dlpack/dlpack.h"))
EOF
if ! echo "$header_sha256  $tmp/dlpack.h" | sha256sum -c --status; then
  echo "fetch-dlpack: the DLPack header in $wheel is not the one pinned (sha256 $(sha256sum "$tmp/dlpack.h" | cut -d' ' -f1), want $header_sha256)" >&2
  exit 1
fi
mkdir -p "$dir/dlpack"
mv "$tmp/dlpack.h" "$header"
echo "fetch-dlpack: DLPack $(sed -n 's/^#define DLPACK_MAJOR_VERSION \([0-9]*\)/\1/p' "$header").$(sed -n 's/^#define DLPACK_MINOR_VERSION \([0-9]*\)/\1/p' "$header") header in $dir" >&2
echo "$dir"
