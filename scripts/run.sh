#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and runs pinfeed on the built-in synthetic
# pipeline (1024x1024 RGB images, batch 32), printing throughput and per-stage statistics.
# Extra arguments go to `pinfeed run`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/build.sh"
"$root/build/tools/pinfeed" info
"$root/build/tools/pinfeed" run --source synthetic --samples 1024 --batch 32 --prefetch 4 --normalize "$@"
