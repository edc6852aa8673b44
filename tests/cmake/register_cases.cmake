# Run after a test executable is built: registers each of its doctest cases as a CTest test of its
# own, so that one case can be run or selected by name (ctest -R runtime_tests.loader.bad_input).
# Cases of the doctest suite "gpu" become <name>.gpu.<case>, labelled gpu: without a usable device
# they exit 77 and CTest counts them skipped. The others are <name>.<case>, labelled cpu. A case
# that skips itself (pinfeed::test::skip_case) exits 77 too, and every case may.
# With SIM_RUNNER (tools/gpu-sim/run.sh) only the GPU cases are registered: <name>.gpu-sim.<case>,
# labelled gpu-sim, run on the GPU simulator.
# Variables: EXE, NAME, EMULATOR (a list, may be empty), OUT, TIMEOUT, SERIAL (TRUE/FALSE), SIM_RUNNER.

function(list_cases out)
  execute_process(COMMAND ${EMULATOR} "${EXE}" ${ARGN} --list-test-cases --no-version
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "listing the test cases of ${EXE} failed (${rc}):\n${text}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(cases "")
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "^\\[doctest\\]" OR line MATCHES "^=+$")
      continue()
    endif()
    list(APPEND cases "${line}")
  endforeach()
  set(${out} "${cases}" PARENT_SCOPE)
endfunction()

set(script "")
macro(add_case test_name case suite_args labels extra)
  # A comma separates filters in --test-case: escape it; the name is quoted as a bracket argument.
  string(REPLACE "," "\\," filter "${case}")
  set(command "")
  foreach(part IN LISTS EMULATOR)
    string(APPEND command " [==[${part}]==]")
  endforeach()
  string(APPEND script "add_test([==[${test_name}]==]${command} [==[${EXE}]==] [==[--test-case=${filter}]==] ${suite_args})\n")
  string(APPEND script "set_tests_properties([==[${test_name}]==] PROPERTIES LABELS ${labels} TIMEOUT ${TIMEOUT} ${extra})\n")
endmacro()

set(serial "")
if(SERIAL)
  set(serial "RUN_SERIAL TRUE")
endif()
list_cases(gpu_cases --test-suite=gpu)
if(SIM_RUNNER)
  set(EMULATOR "${SIM_RUNNER};--doctest")
  foreach(case IN LISTS gpu_cases)
    add_case("${NAME}.gpu-sim.${case}" "${case}" "--test-suite=gpu --no-skipped-summary" gpu-sim "SKIP_RETURN_CODE 77 ${serial}")
  endforeach()
else()
  list_cases(cpu_cases --test-suite-exclude=gpu)
  foreach(case IN LISTS cpu_cases)
    add_case("${NAME}.${case}" "${case}" "--test-suite-exclude=gpu" cpu "SKIP_RETURN_CODE 77 ${serial}")
  endforeach()
  foreach(case IN LISTS gpu_cases)
    add_case("${NAME}.gpu.${case}" "${case}" "--test-suite=gpu --no-skipped-summary" gpu "SKIP_RETURN_CODE 77 ${serial}")
  endforeach()
endif()
file(WRITE "${OUT}" "${script}")
