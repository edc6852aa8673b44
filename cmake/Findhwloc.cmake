# Finds hwloc (Debian: libhwloc-dev), which the node plan reads the machine's topology with (the
# CPUs and NUMA node close to each GPU). Defines hwloc::hwloc.
find_path(hwloc_INCLUDE_DIR hwloc.h)
find_library(hwloc_LIBRARY hwloc)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hwloc REQUIRED_VARS hwloc_INCLUDE_DIR hwloc_LIBRARY)
if(hwloc_FOUND AND NOT TARGET hwloc::hwloc)
  add_library(hwloc::hwloc UNKNOWN IMPORTED)
  set_target_properties(hwloc::hwloc PROPERTIES
    IMPORTED_LOCATION "${hwloc_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${hwloc_INCLUDE_DIR}")
endif()
