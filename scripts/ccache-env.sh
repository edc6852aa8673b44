# Sourced by scripts/build.sh, gpu-bundle.sh and gpu-sim-tests.sh (with $root set): one compiler
# cache for the build trees of a checkout (build/, build-bundle/, build-gpu-sim/), so that what
# they compile alike - every host source whose flags and headers agree - is compiled once.
# Paths under the checkout are hashed relative to each tree (CCACHE_BASEDIR, and the trees are
# siblings), so a tree's own include directory does not set it apart; the cache lives in the
# checkout (build-ccache/), so a fresh clone starts it empty. Sets ccache_args (CMake's compiler
# launchers) where ccache is installed (scripts/install-deps.sh installs it), else leaves them
# empty. PINFEED_CCACHE=0 turns it off.
ccache_args=()
if [[ ${PINFEED_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_DIR=${PINFEED_CCACHE_DIR:-$root/build-ccache}
  export CCACHE_BASEDIR=$root
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
  # The suites' and the tool's precompiled headers (CMake's target_precompile_headers): without
  # this ccache refuses every file compiled with one.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros
  ccache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
