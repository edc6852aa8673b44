#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and runs the doctor on the built-in synthetic
# pipeline of the input-pipeline article (random 1024x1024 RGB image -> RandomCrop(256) ->
# RandomMask(0.25) -> RGB->YCbCr -> /255, batch 64): the pipeline in a ladder of modes with caches
# at each stage, a table, the stage costs and a verdict naming what limits it. With a GPU the
# colour/scale tail runs on the device. Extra arguments go to `pinfeed doctor` (e.g. --step-ms 20,
# --json report.json).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/build.sh"
"$root/build/tools/pinfeed" info
"$root/build/tools/pinfeed" doctor --source synthetic --samples 2048 --batch 64 \
  --transforms "crop(256),mask(0.25),ycbcr,scale" "$@"
