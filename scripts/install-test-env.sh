#!/usr/bin/env bash
# Installs what the tests need beyond the build: Debian's Chromium (the doctor's page is checked in
# a headless browser), and the Python servers the remote-shard tests start on loopback: moto's
# standalone S3 server (with boto3 for the tests' setup script), Pillow, the independent decoder
# the image-format test compares every variant against, and torch with torchvision, whose v2
# functional ops define every augmentation's pixels, nanobind and scikit-build-core (the Python
# module and its wheel are built with them) and pytest (its tests), into .venv-test (idempotent; apt-get and PyPI
# only). PyPI's torch for x86-64 Linux brings its CUDA libraries (about 2.9 GB of wheels, 5.4 GB
# installed): the tests run it on the CPU. And the photos the torchvision comparisons cut
# (scripts/fetch-photos.sh, into .venv-test/photos). test.sh fetches all this beside the main build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh" --only chromium
venv=$root/.venv-test
want="moto[server]==5.2.5 boto3==1.44.8 pillow==12.0.0 numpy==2.4.6 torch==2.15.0 torchvision==0.29.2 nanobind==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0"
if [[ -x $venv/bin/moto_server && -f $venv/.installed && $(cat "$venv/.installed") == "$want" ]]; then
  bash "$root/scripts/fetch-photos.sh" "$venv/photos" >/dev/null  # the torchvision comparisons' photos
  echo "install-test-env: $venv ready"
  exit 0
fi
bash "$root/scripts/install-deps.sh" --only python3-venv
python3 -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/pip" install -q --disable-pip-version-check $want
bash "$root/scripts/fetch-photos.sh" "$venv/photos" >/dev/null
echo "$want" >"$venv/.installed"
echo "install-test-env: installed $want into $venv"
