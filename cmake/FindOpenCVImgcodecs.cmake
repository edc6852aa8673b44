# Finds the OpenCV modules pinfeed uses from Debian's libopencv-*-dev packages, which ship no
# OpenCVConfig.cmake without the umbrella package:
#   OpenCVImgcodecs::core             core + imgproc (resize, colour conversion)
#   OpenCVImgcodecs::OpenCVImgcodecs  the above + imgcodecs (PNG, WebP, BMP, TIFF, ...), when found
# OpenCVImgcodecs_imgcodecs_FOUND says whether the second exists.
find_path(OpenCVImgcodecs_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
foreach(_m core imgproc imgcodecs)
  find_library(OpenCVImgcodecs_${_m}_LIBRARY opencv_${_m})
endforeach()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenCVImgcodecs REQUIRED_VARS OpenCVImgcodecs_INCLUDE_DIR
  OpenCVImgcodecs_core_LIBRARY OpenCVImgcodecs_imgproc_LIBRARY)
set(OpenCVImgcodecs_imgcodecs_FOUND FALSE)
if(OpenCVImgcodecs_imgcodecs_LIBRARY AND EXISTS "${OpenCVImgcodecs_INCLUDE_DIR}/opencv2/imgcodecs.hpp")
  set(OpenCVImgcodecs_imgcodecs_FOUND TRUE)
endif()
if(OpenCVImgcodecs_FOUND AND NOT TARGET OpenCVImgcodecs::core)
  add_library(OpenCVImgcodecs::core INTERFACE IMPORTED)
  set_target_properties(OpenCVImgcodecs::core PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenCVImgcodecs_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${OpenCVImgcodecs_imgproc_LIBRARY};${OpenCVImgcodecs_core_LIBRARY}")
  if(OpenCVImgcodecs_imgcodecs_FOUND)
    add_library(OpenCVImgcodecs::OpenCVImgcodecs INTERFACE IMPORTED)
    set_target_properties(OpenCVImgcodecs::OpenCVImgcodecs PROPERTIES
      INTERFACE_LINK_LIBRARIES "${OpenCVImgcodecs_imgcodecs_LIBRARY};OpenCVImgcodecs::core")
  endif()
endif()
