#!/usr/bin/env bash
# Side-by-side: pinfeed.torch against the same pipeline from C++ (`pinfeed run`) and against the
# PyTorch DataLoader (python_torch.py), in the test environment (.venv-test: torch, torchvision,
# nanobind) with the module built into build/python.
# Usage: bench/compare/run_python_compare.sh [python_torch.py's arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$root/scripts/install-test-env.sh" >/dev/null
py=$root/.venv-test/bin/python
cmake -S "$root" -B "$root/build" -DPINFEED_PYTHON=ON -DPython_EXECUTABLE="$py" >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target _pinfeed pinfeed_tool >/dev/null
cd "$root"
PYTHONPATH=$root/build/python:$root/bench/compare exec "$py" "$root/bench/compare/python_torch.py" --pinfeed "$root/build/tools/pinfeed" \
  --photos "$root/.venv-test/photos" "$@"
