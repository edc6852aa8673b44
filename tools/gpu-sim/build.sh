#!/usr/bin/env bash
# Builds GPGPU-Sim, with pinfeed's patch (gpgpu-sim.patch: CUDA 13 support and the fixes that make
# CUB's and pinfeed's kernels execute correctly in functional simulation), into a cache outside the
# clone, and prints the directory of the build. A second run with the same inputs (source, patch,
# these scripts, the CUDA toolkit) finds the cache and builds nothing.
#
# The cache holds: lib/ (the simulator's libcudart.so.13, which a program linked with
# -cudart shared loads instead of CUDA's), cuda/ (a view of the system toolkit plus cuobjdump and
# nvdisasm from PyPI wheels: the simulator reads the program's PTX with them), config/ (the
# simulated GPU) and env.sh (the environment the simulator needs; tools/gpu-sim/run.sh uses it).
#
# Usage: tools/gpu-sim/build.sh
# Environment: PINFEED_GPU_SIM_SOURCE (the pristine GPGPU-Sim tarball; default: the first of
#              ../shared/gpu-sim/ beside the clone and /work/shared/gpu-sim/),
#              PINFEED_GPU_SIM_CACHE (default /var/cache/pinfeed-gpu-sim).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${PINFEED_GPU_SIM_CACHE:-/var/cache/pinfeed-gpu-sim}
tarball_name=gpgpu-sim_distribution-dev-667834cf.tar.gz
tarball_sha=dbac65a71218547a3be6eb0f5f0e6bb72b83fe910116dd50fd627de7e9ed77bc
cuobjdump_wheel=nvidia-cuda-cuobjdump==13.2.51
nvdisasm_wheel=nvidia-cuda-nvdisasm==13.2.86

source "$root/scripts/find-nvcc.sh"
cuda=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd -P)

tarball=${PINFEED_GPU_SIM_SOURCE:-}
if [[ -z $tarball ]]; then
  for candidate in "$root/../shared/gpu-sim/$tarball_name" "/work/shared/gpu-sim/$tarball_name"; do
    [[ -f $candidate ]] && { tarball=$candidate; break; }
  done
fi
if [[ -z $tarball || ! -f $tarball ]]; then
  echo "gpu-sim: the GPGPU-Sim source $tarball_name was not found (looked in ../shared/gpu-sim/ beside" \
       "the clone and in /work/shared/gpu-sim/); set PINFEED_GPU_SIM_SOURCE to its path" >&2
  exit 1
fi
if [[ $(sha256sum "$tarball" | cut -d' ' -f1) != "$tarball_sha" ]]; then
  echo "gpu-sim: $tarball is not the pristine GPGPU-Sim snapshot the patch is made for (sha256 differs)" >&2
  exit 1
fi

key=$( { echo "$tarball_sha"; cat "$here/gpgpu-sim.patch" "$here/no-power-model.patch" "$here/build.sh" "$here/cuda_errors.py";
         "$cuda/bin/nvcc" --version; echo "$cuobjdump_wheel $nvdisasm_wheel"; } | sha256sum | cut -c1-16)
dir=$cache/$key
if [[ -f $dir/.built ]]; then
  echo "$dir"
  exit 0
fi

log() { echo "gpu-sim: $*" >&2; }
# One build at a time (ctest runs cases in parallel, each of which may call this): a second caller
# waits for the first, then finds its build.
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  log "waiting for another build of the simulator to finish"
  flock 9
fi
if [[ -f $dir/.built ]]; then
  echo "$dir"
  exit 0
fi
log "building GPGPU-Sim into $dir (a minute or two on 2 cores)"
bash "$root/scripts/install-deps.sh" --only build-essential xutils-dev bison flex zlib1g-dev python3-pip >&2
rm -rf "$dir"
mkdir -p "$dir"
tar -xzf "$tarball" -C "$dir"
mv "$dir/gpgpu-sim_distribution" "$dir/src"
(cd "$dir/src" && patch -p1 --quiet --forward < "$here/gpgpu-sim.patch")
python3 "$here/cuda_errors.py" "$cuda/include/driver_types.h" "$dir/src/libcuda/cuda_error_strings.inc"
# No power model and no debug information: functional simulation never runs the power model
# (-power_simulation_enabled 0), and without its directory setup_environment configures the build
# without it, so AccelWattch and CACTI are not compiled (no-power-model.patch drops the Makefile's
# check that insists on it and mends the two places of gpu-sim.cc that need it); -g3 and -ggdb only
# slow the compiler. A third of the build's time.
rm -rf "$dir/src/src/accelwattch"
(cd "$dir/src" && patch -p1 --quiet --forward < "$here/no-power-model.patch")
for mk in Makefile src/Makefile src/cuda-sim/Makefile src/gpgpu-sim/Makefile libcuda/Makefile cuobjdump_to_ptxplus/Makefile; do
  sed -i -E 's/ -g3\b//; s/ -ggdb\b//' "$dir/src/$mk"
done
(
  cd "$dir/src"
  set +euo pipefail  # setup_environment reads unset variables and runs git outside a repository
  export CUDA_INSTALL_PATH=$cuda PATH=$cuda/bin:$PATH
  source setup_environment release >/dev/null 2>&1
  set -e
  make -j "$(nproc)" >"$dir/build.log" 2>&1 || { tail -n 40 "$dir/build.log" >&2; exit 1; }
)
built=$(find "$dir/src/lib" -name libcudart.so -path '*release*' | head -n 1)
[[ -n $built ]] || { log "the build made no libcudart.so (see $dir/build.log)"; exit 1; }
mkdir -p "$dir/lib"
cp "$built" "$dir/lib/libcudart.so"
ln -sfn libcudart.so "$dir/lib/libcudart.so.13"

# cuobjdump and nvdisasm are not in Debian's CUDA 13.0 install; the simulator runs both.
mkdir -p "$dir/wheels" "$dir/tools" "$dir/cuda/bin"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels" "$cuobjdump_wheel" "$nvdisasm_wheel" >&2
for wheel in "$dir"/wheels/*.whl; do (cd "$dir/tools" && python3 -m zipfile -e "$wheel" .); done
for entry in "$cuda"/*; do [[ $(basename "$entry") == bin ]] || ln -sfn "$entry" "$dir/cuda/"; done
for tool in "$cuda"/bin/*; do ln -sfn "$tool" "$dir/cuda/bin/"; done
for tool in cuobjdump nvdisasm; do
  chmod +x "$dir/tools/nvidia/cu13/bin/$tool"
  ln -sfn "$dir/tools/nvidia/cu13/bin/$tool" "$dir/cuda/bin/$tool"
done

# The simulated GPU: a Turing (sm_75) of 4 SMs in functional mode. Few SMs make the kernels' grid-stride
# loops take several passes on small inputs. Copies are not timed (no performance model).
mkdir -p "$dir/config"
cp "$dir/src/configs/tested-cfgs/SM75_RTX2060/"* "$dir/config/"
sed -i -e 's/^-gpgpu_n_clusters .*/-gpgpu_n_clusters 4/' -e 's/^-gpgpu_perf_sim_memcpy .*/-gpgpu_perf_sim_memcpy 0/' \
  "$dir/config/gpgpusim.config"
grep -q '^-gpgpu_n_clusters 4$' "$dir/config/gpgpusim.config"

cat >"$dir/env.sh" <<EOF
# The environment of a program run on the simulator (written by tools/gpu-sim/build.sh).
export PINFEED_GPU_SIM_DIR=$dir
export LD_LIBRARY_PATH=$dir/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export CUDA_INSTALL_PATH=$dir/cuda
export PATH=$dir/cuda/bin:\$PATH
export PTX_SIM_MODE_FUNC=1 CUOBJDUMP_SIM_FILE=jj PTX_SIM_USE_PTX_FILE=1.ptx PTX_SIM_KERNELFILE=_1.ptx
EOF
rm -rf "$dir/wheels"
rm -rf "$dir/src/build" "$dir/src/lib"  # objects: only lib/, cuda/, config/ and env.sh are used
touch "$dir/.built"
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +  # earlier builds
log "built in $dir"
echo "$dir"
