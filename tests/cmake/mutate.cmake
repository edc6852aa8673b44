# Writes a copy of a source file with one deliberate bug (a mutant), for the check that the GPU
# simulator's test step catches broken kernels. Fails if the text to break is not found exactly
# once: a mutant that silently equals the original would prove nothing.
# Variables: IN, OUT, FIND, REPLACE: literal text, where <newline> and <semicolon> stand for those
# characters.
string(ASCII 59 semicolon)
foreach(var FIND REPLACE)
  string(REPLACE "<newline>" "\n" ${var} "${${var}}")
  string(REPLACE "<semicolon>" "${semicolon}" ${var} "${${var}}")
endforeach()
file(READ "${IN}" text)
string(FIND "${text}" "${FIND}" first)
if(first EQUAL -1)
  message(FATAL_ERROR "mutate: '${FIND}' is not in ${IN}: update the mutant in tests/CMakeLists.txt")
endif()
string(LENGTH "${FIND}" length)
math(EXPR after "${first} + ${length}")
string(SUBSTRING "${text}" ${after} -1 rest)
string(FIND "${rest}" "${FIND}" second)
if(NOT second EQUAL -1)
  message(FATAL_ERROR "mutate: '${FIND}' occurs more than once in ${IN}: make the mutant's text unique")
endif()
string(REPLACE "${FIND}" "${REPLACE}" mutated "${text}")
file(WRITE "${OUT}.tmp" "${mutated}")
file(RENAME "${OUT}.tmp" "${OUT}")
