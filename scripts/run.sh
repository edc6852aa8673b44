#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and runs pinfeed on the built-in synthetic
# pipeline of the input-pipeline article (random 1024x1024 RGB image -> RandomCrop(256) ->
# RandomMask(0.25) -> RGB->YCbCr -> /255, batch 64), printing throughput and per-stage statistics.
# With a GPU the colour/scale tail runs on the device. Extra arguments go to `pinfeed run`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/build.sh"
"$root/build/tools/pinfeed" info
"$root/build/tools/pinfeed" run --source synthetic --samples 2048 --batch 64 --prefetch 4 \
  --transforms "crop(256),mask(0.25),ycbcr,scale" "$@"
