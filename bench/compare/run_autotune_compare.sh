#!/usr/bin/env bash
# Side-by-side: pinfeed with workers and prefetch on auto vs the PyTorch DataLoader's suggested
# settings (num_workers = cores, pin_memory) on the same data. Installs torch, torchvision and
# pillow from PyPI into a virtualenv (comparison only).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${PINFEED_COMPARE_VENV:-$root/.venv-compare}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch, torchvision, PIL" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch torchvision pillow numpy
fi
pf=${PINFEED_BIN:-$root/build/tools/pinfeed}
[[ -x $pf ]] || bash "$root/scripts/build.sh"
exec "$venv/bin/python" "$root/bench/compare/autotune_torch.py" --pinfeed "$pf" "$@"
