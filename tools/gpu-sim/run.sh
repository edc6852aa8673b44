#!/usr/bin/env bash
# Runs a CUDA program (built with -cudart shared and PTX for compute_75) on the functional GPU
# simulator that tools/gpu-sim/build.sh built. Each run gets a working directory of its own (the
# simulator writes the program's PTX and its config there), removed afterwards unless the run failed.
#
# The simulator talks a lot on standard output: that goes to a log. What comes through is the
# program's standard error, the simulator's errors, the doctest report (with --doctest: the program
# is a doctest executable, whose report is written to a file of its own) and a last line that
# counts the kernels and PTX instructions simulated. The program's exit status is returned (77, a
# test that skipped, stays 77).
#
# Usage: tools/gpu-sim/run.sh [--doctest] PROGRAM [ARGS...]
# Environment: PINFEED_GPU_SIM_DIR (the simulator build; default: what tools/gpu-sim/build.sh
#              prints, building it if needed), PINFEED_GPU_SIM_KEEP=1 keeps every working directory,
#              GPGPUSIM_NUM_DEVICES (default 2): the CUDA devices the program sees, every one of them
#              the one simulated GPU, each with its own primary context (for the multi-GPU cases).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
doctest=0
if [[ ${1:-} == --doctest ]]; then doctest=1; shift; fi
(($#)) || { echo "usage: tools/gpu-sim/run.sh [--doctest] PROGRAM [ARGS...]" >&2; exit 2; }
dir=${PINFEED_GPU_SIM_DIR:-}
if [[ -z $dir ]]; then
  dir=$(bash "$here/build.sh") || exit 1
fi
[[ -f $dir/env.sh ]] || { echo "gpu-sim: no simulator build in $dir (run tools/gpu-sim/build.sh)" >&2; exit 1; }
program=$1
shift
[[ $program == */* ]] && program=$(cd "$(dirname "$program")" && pwd)/$(basename "$program")

work=$(mktemp -d "${TMPDIR:-/tmp}/pinfeed-gpu-sim.XXXXXX")
cp "$dir"/config/* "$work/"
log=$work/simulator.log
args=("$@")
((doctest)) && args+=("--out=$work/report.txt")
(
  source "$dir/env.sh"
  export GPGPUSIM_NUM_DEVICES=${GPGPUSIM_NUM_DEVICES:-2}
  cd "$work"
  exec "$program" "${args[@]}"
) >"$log" 2>"$work/stderr.log"
status=$?

cat "$work/stderr.log" >&2
((doctest)) && [[ -f $work/report.txt ]] && cat "$work/report.txt"
grep -E '^GPGPU-Sim.*(ERROR|error)' "$log" | head -n 20
kernels=$(grep -c '^GPGPU-Sim: Done functional simulation' "$log")
# The simulator counts instructions over the whole run: its last count is the total.
instructions=$(sed -n 's/^GPGPU-Sim: Done functional simulation (\([0-9]*\) instructions simulated).*/\1/p' "$log" | tail -n 1)
echo "gpu-sim: $kernels kernels, ${instructions:-0} thread instructions simulated"
if [[ $status -ne 0 && $status -ne 77 ]] || [[ ${PINFEED_GPU_SIM_KEEP:-0} == 1 ]]; then
  echo "gpu-sim: exit status $status; the simulator's log and the program's PTX are in $work"
else
  rm -rf "$work"
fi
exit $status
