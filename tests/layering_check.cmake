# test_layering: the include views of the top-level CMakeLists.txt keep the
# layers apart. For each layer, a header of an allowed layer must preprocess
# and a header of a forbidden one must fail with "No such file" (any other
# failure is a failure of this test, not a proof). Run by CTest as
#   cmake -DCC=<compiler> -DLAYERS=<build>/layers -P layering_check.cmake
set(cases
  # layer     header                      allowed
  "cm_proto   cm_proto/cmp_engine.h       1"
  "cm_proto   umad/um_frame.h             0"
  "cm_proto   lib/cma_int.h               0"
  "umad       umad/um_transport.h         1"
  "umad       cm_proto/cmp_mad.h          1"
  "umad       lib/usp_proto.h             0"
  "umad       daemon/usd_int.h            0"
  "lib        lib/cma_int.h               1"
  "lib        daemon/usd_int.h            0"
  "sim        sim/simf.h                  1"
  "sim        cm_proto/cmp_mad.h          0"
  "sim        umad/um_frame.h             0"
  "sim        lib/cma_int.h               0")
set(bad 0)
foreach(c ${cases})
  string(REGEX MATCHALL "[^ ]+" f "${c}")
  list(GET f 0 layer)
  list(GET f 1 header)
  list(GET f 2 allowed)
  set(view ${LAYERS}/${layer})
  # -include searches the working directory first: run in the view itself.
  execute_process(COMMAND ${CC} -E -I${view} -I${SRC}/include -include ${header} -x c /dev/null
                  WORKING_DIRECTORY ${view}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(allowed)
    if(rc EQUAL 0)
      message(STATUS "ok   ${layer} includes ${header}")
    else()
      message(STATUS "FAIL ${layer} cannot include ${header}: ${err}")
      math(EXPR bad "${bad} + 1")
    endif()
  elseif(NOT rc EQUAL 0 AND err MATCHES "${header}: No such file")
    message(STATUS "ok   ${layer} cannot include ${header}")
  else()
    message(STATUS "FAIL ${layer} may include ${header} (rc ${rc}): ${err}")
    math(EXPR bad "${bad} + 1")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "${bad} layering check(s) failed")
endif()
