# Sourced by the build scripts: puts the CUDA toolkit's nvcc on PATH when it is installed in its
# usual place but not on PATH.
if ! command -v nvcc >/dev/null 2>&1; then
  for pinfeed_cuda_bin in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [[ -x $pinfeed_cuda_bin/nvcc ]] && export PATH=$pinfeed_cuda_bin:$PATH && break
  done
fi
