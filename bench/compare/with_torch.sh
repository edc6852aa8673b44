#!/usr/bin/env bash
# Runs one comparison script of this folder with --pinfeed set, in a virtualenv with torch,
# torchvision, pillow and numpy from PyPI (comparison only; made on first use).
# Usage: bench/compare/with_torch.sh SCRIPT.py [its arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${PINFEED_COMPARE_VENV:-$root/.venv-compare}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch, torchvision, PIL, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch torchvision pillow numpy
fi
pf=${PINFEED_BIN:-$root/build/tools/pinfeed}
[[ -x $pf ]] || bash "$root/scripts/build.sh"
script=$1
shift
exec "$venv/bin/python" "$root/bench/compare/$script" --pinfeed "$pf" "$@"
