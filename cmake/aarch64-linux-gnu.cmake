# Cross-compiling pinfeed for aarch64 (Grace, GH200 hosts) on an x86-64 Debian machine, CPU-only:
# Debian's g++-aarch64-linux-gnu, and the arm64 packages pinfeed needs unpacked into a sysroot
# (scripts/cross-aarch64.sh makes it). -DPINFEED_SYSROOT=DIR names it. Tests run under
# qemu-aarch64-static with that sysroot as its library prefix.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
if(NOT PINFEED_SYSROOT)
  set(PINFEED_SYSROOT "$ENV{PINFEED_SYSROOT}")
endif()
if(NOT PINFEED_SYSROOT)
  message(FATAL_ERROR "aarch64 toolchain: set PINFEED_SYSROOT to the arm64 sysroot (scripts/cross-aarch64.sh)")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PINFEED_SYSROOT)
set(CMAKE_FIND_ROOT_PATH "${PINFEED_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Library directories of the sysroot: multiarch, plain /usr/lib (GDAL's HDF4 and OGDI libraries),
# and the BLAS/LAPACK that Debian's alternatives would link into place (nothing runs postinst here).
set(_pf_libdirs "")
foreach(_d usr/lib/aarch64-linux-gnu lib/aarch64-linux-gnu usr/lib usr/lib/aarch64-linux-gnu/blas
           usr/lib/aarch64-linux-gnu/lapack)
  string(APPEND _pf_libdirs "${PINFEED_SYSROOT}/${_d}:")
endforeach()
# The libraries' own dependencies (OpenCV's, say) are found at link time in the sysroot too.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_pf_libdirs}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_pf_libdirs}")
# Multiarch headers (jconfig.h, TBB's, OpenCV's) live under the sysroot's include directories.
include_directories(SYSTEM "${PINFEED_SYSROOT}/usr/include/aarch64-linux-gnu" "${PINFEED_SYSROOT}/usr/include")
# ctest runs the test executables through qemu, with the sysroot's libraries (libc included).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L "${PINFEED_SYSROOT}" -E "LD_LIBRARY_PATH=${_pf_libdirs}")
