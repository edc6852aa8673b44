#!/usr/bin/env bash
# Side-by-side: pinfeed's balanced sampler vs the article's two PyTorch functions, same machine,
# same threads, same sizes. Installs torch from PyPI into a virtualenv (comparison only).
# Usage: bench/compare/run_sampler_compare.sh [--device cpu|cuda] [extra sampler_torch.py args]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${PINFEED_COMPARE_VENV:-$root/.venv-compare}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
pf=${PINFEED_BIN:-$root/build/tools/pinfeed}
[[ -x $pf ]] || bash "$root/scripts/build.sh"
exec "$venv/bin/python" "$root/bench/compare/sampler_torch.py" --pinfeed "$pf" "$@"
