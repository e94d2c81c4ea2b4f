# The one place Criterion test executables are made and registered with
# CTest (tests/, tests/lib/, tests/sim/). docs/testing.md says why.
#
#   uscm_test_executable(NAME SOURCE)
#       build/tests/NAME from SOURCE with tests/cr_main.c as its main(): a
#       binary in which tests were skipped (and none failed) exits 77.
#       USCM_TEST_BIN_DIR is this build's bin/ (libtest.h, simtest.h).
#   uscm_add_test(TEST EXE [TIMEOUT s] [ENVIRONMENT VAR=value...] [ARGS arg...]
#                 [LABELS label...])
#       registers `EXE --jobs 1 ARGS` as TEST with USCM_SOURCE_DIR, USCM_BIN_DIR,
#       the given environment and SKIP_RETURN_CODE 77: CTest shows such a
#       binary as "Not Run (Skipped)", never as "Passed". Label `check`: the
#       quick set `make check` runs (docs/testing.md).

set(USCM_TEST_SKIP_CODE 77)

function(uscm_test_executable name src)
  add_executable(${name} ${src} ${CMAKE_SOURCE_DIR}/tests/cr_main.c)
  target_include_directories(${name} PRIVATE ${CRITERION_INCLUDE_DIRS})
  target_link_libraries(${name} PRIVATE ${CRITERION_LIBRARIES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # build/bin when USCM_BIN_DIR is not set (a binary run by hand)
  target_compile_definitions(${name} PRIVATE USCM_TEST_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
endfunction()

function(uscm_add_test test exe)
  cmake_parse_arguments(T "" "TIMEOUT" "ENVIRONMENT;ARGS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # --jobs 1: Criterion forks per test; CTest already runs files in parallel.
  add_test(NAME ${test} COMMAND ${exe} --jobs 1 ${T_ARGS})
  set(env "USCM_SOURCE_DIR=${CMAKE_SOURCE_DIR}" "USCM_BIN_DIR=${CMAKE_BINARY_DIR}/bin"
      ${T_ENVIRONMENT})
  set_tests_properties(${test} PROPERTIES
    ENVIRONMENT "${env}"
    SKIP_RETURN_CODE ${USCM_TEST_SKIP_CODE}
    TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${test} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
