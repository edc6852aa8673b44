#!/usr/bin/env bash
# Real photos for `pinfeed bench decode`: the colour sample photos that scikit-image's wheel
# carries (NASA's astronaut, rocket and Hubble deep field, a cup of coffee, a cat, a motorcycle
# pair, a retina, a stained tissue section), taken from the wheel on PyPI (pip download, no
# install) into DIR. Already there: nothing is fetched.
# Usage: scripts/fetch-photos.sh [DIR]   (default build/photos)
set -euo pipefail
dir=${1:-build/photos}
photos=(astronaut.png coffee.png chelsea.png rocket.jpg hubble_deep_field.jpg motorcycle_left.png motorcycle_right.png retina.jpg ihc.png)
have=0
for p in "${photos[@]}"; do [[ -s $dir/$p ]] && have=$((have + 1)); done
if ((have == ${#photos[@]})); then echo "$dir"; exit 0; fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" 'scikit-image==0.26.0' >&2 ||
  { echo "fetch-photos.sh: pip could not download scikit-image 0.26.0 from PyPI" >&2; exit 1; }
wheel=$(ls "$tmp"/scikit_image-*.whl)
python3 - "$wheel" "$dir" "${photos[@]}" <<'PY'
import sys, zipfile, os
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for n in names:
        data = z.read("skimage/data/" + n)
        with open(os.path.join(out, n), "wb") as f:
            f.write(data)
PY
echo "$dir"
