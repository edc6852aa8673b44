#!/usr/bin/env bash
# Installs what the tests need beyond the build: Debian's Chromium (the doctor's page is checked in
# a headless browser), and the Python servers the remote-shard tests start on loopback: moto's
# standalone S3 server (with boto3 for the tests' setup script), and Pillow, the independent decoder
# the image-format test compares every variant against, into .venv-test (idempotent;
# apt-get and PyPI only).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh" --only chromium
venv=$root/.venv-test
want="moto[server]==5.2.5 boto3==1.44.8 pillow==12.0.0"
if [[ -x $venv/bin/moto_server && -f $venv/.installed && $(cat "$venv/.installed") == "$want" ]]; then
  echo "install-test-env: $venv ready"
  exit 0
fi
bash "$root/scripts/install-deps.sh" --only python3-venv
python3 -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/pip" install -q --disable-pip-version-check $want
echo "$want" >"$venv/.installed"
echo "install-test-env: installed $want into $venv"
