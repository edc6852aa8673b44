#!/usr/bin/env bash
# A mutation campaign over pinfeed's C++ sources (scripts/mutate.py: universalmutator's mutants,
# each compiled, compared and tested against the cases of its folder, on a copy of one commit in
# build-mutate/). Hours on two cores; resumable; not part of CI.
# Usage: scripts/mutate.sh [--files GLOB]... [--budget N] [--seed S] [--commit C] [--report]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$root/.venv-mutate
want="universalmutator==1.14.1"
if [[ ! -x $venv/bin/mutate || $(cat "$venv/.installed" 2>/dev/null) != "$want" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$want"
  echo "$want" >"$venv/.installed"
fi
source "$root/scripts/find-nvcc.sh"
exec python3 "$root/scripts/mutate.py" "$@"
