#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and runs the doctor on the built-in synthetic
# pipeline of the input-pipeline article (random 1024x1024 RGB image -> RandomCrop(256) ->
# RandomMask(0.25) -> RGB->YCbCr -> /255, batch 64): the pipeline in a ladder of modes with caches
# at each stage, a table, the stage costs and a verdict naming what limits it. With a GPU the
# colour/scale tail runs on the device. Extra arguments go to `pinfeed doctor` (e.g. --step-ms 20,
# --json report.json).
# The report goes to the terminal and, for a CI run to publish, into $PINFEED_REPORT_DIR (default
# build/report): doctor-report.txt and the same as a page, doctor-report.html.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/build.sh"
reports=${PINFEED_REPORT_DIR:-$root/build/report}
mkdir -p "$reports"
"$root/build/tools/pinfeed" info
"$root/build/tools/pinfeed" doctor --source synthetic --samples 2048 --batch 64 \
  --transforms "crop(256),mask(0.25),ycbcr,scale" --html "$reports/doctor-report.html" "$@" | tee "$reports/doctor-report.txt"
echo "run.sh: the report is in $reports/doctor-report.txt and, as a page, $reports/doctor-report.html"
