#!/usr/bin/env bash
# Side-by-side: pinfeed against the PyTorch DataLoader and NVIDIA DALI's CPU pipeline on one JPEG
# folder, rrc(224) and hflip (jpeg_torch_dali.py). The DataLoader runs in the test environment
# (.venv-test: torch, torchvision); DALI in a virtualenv of its own (.venv-dali, nvidia-dali-cuda120
# from PyPI, about 600 MB; made on first use; its CPU pipeline needs no GPU).
# Usage: bench/compare/run_dali_compare.sh [jpeg_torch_dali.py's arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$root/scripts/install-test-env.sh" >/dev/null
want="nvidia-dali-cuda120==2.4.0"
dali=$root/.venv-dali
if [[ $(cat "$dali/.installed" 2>/dev/null) != "$want" ]]; then
  python3 -m venv "$dali"
  "$dali/bin/pip" install -q --disable-pip-version-check "$want"
  echo "$want" >"$dali/.installed"
fi
pf=$root/build/tools/pinfeed
[[ -x $pf ]] || bash "$root/scripts/build.sh"
cd "$root"
PYTHONPATH=$root/bench/compare exec "$root/.venv-test/bin/python" "$root/bench/compare/jpeg_torch_dali.py" --pinfeed "$pf" \
  --dali-python "$dali/bin/python" --photos "$root/.venv-test/photos" "$@"
