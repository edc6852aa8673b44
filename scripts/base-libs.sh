# Sourced by gpu-bundle.sh (on the build machine) and run-device-checks.sh (in the bundle, on the
# GPU runner): is_base_lib SONAME succeeds when the library belongs to the system base every Linux
# GPU runner has, as listed (globs) in system-base-libs.txt beside this file.
mapfile -t pinfeed_base_libs < <(grep -v '^#' "$(dirname "${BASH_SOURCE[0]}")/system-base-libs.txt")
is_base_lib() {
  local glob
  for glob in "${pinfeed_base_libs[@]}"; do
    # shellcheck disable=SC2053  # the list holds globs
    [[ $1 == $glob ]] && return 0
  done
  return 1
}
