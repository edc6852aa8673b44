# Finds the three OpenCV modules pinfeed uses (core, imgproc, imgcodecs) from Debian's
# libopencv-*-dev packages, which ship no OpenCVConfig.cmake without the umbrella package.
# Defines the imported target OpenCVImgcodecs::OpenCVImgcodecs.
find_path(OpenCVImgcodecs_INCLUDE_DIR opencv2/imgcodecs.hpp PATH_SUFFIXES opencv4)
foreach(_m core imgproc imgcodecs)
  find_library(OpenCVImgcodecs_${_m}_LIBRARY opencv_${_m})
endforeach()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenCVImgcodecs REQUIRED_VARS OpenCVImgcodecs_INCLUDE_DIR
  OpenCVImgcodecs_core_LIBRARY OpenCVImgcodecs_imgproc_LIBRARY OpenCVImgcodecs_imgcodecs_LIBRARY)
if(OpenCVImgcodecs_FOUND AND NOT TARGET OpenCVImgcodecs::OpenCVImgcodecs)
  add_library(OpenCVImgcodecs::OpenCVImgcodecs INTERFACE IMPORTED)
  set_target_properties(OpenCVImgcodecs::OpenCVImgcodecs PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenCVImgcodecs_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${OpenCVImgcodecs_imgcodecs_LIBRARY};${OpenCVImgcodecs_imgproc_LIBRARY};${OpenCVImgcodecs_core_LIBRARY}")
endif()
