# Every exception pinfeed's own code throws derives from pinfeed::error (exception.hpp): no source
# of the library, the doctor or the tool throws a bare standard exception. std::bad_alloc is the
# one that passes through as it is.
# Usage: cmake -D ROOT=<source dir> -P check_throws.cmake
set(found "")
foreach(component runtime ops loaders doctor tools)
  file(GLOB_RECURSE sources "${ROOT}/${component}/*.cpp" "${ROOT}/${component}/*.hpp" "${ROOT}/${component}/*.cu"
       "${ROOT}/${component}/*.cuh")
  foreach(f ${sources})
    file(STRINGS "${f}" lines REGEX "(throw|return|->) +std::[a-z_]+(_error|_argument|_range)[^a-z_]")
    foreach(line ${lines})
      if(NOT line MATCHES "^ *//")
        file(RELATIVE_PATH rel "${ROOT}" "${f}")
        list(APPEND found "${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(found)
  string(REPLACE ";" "\n  " text "${found}")
  message(FATAL_ERROR "standard exceptions thrown where a pinfeed::error belongs:\n  ${text}")
endif()
message(STATUS "every exception thrown is a pinfeed::error (std::bad_alloc aside)")
