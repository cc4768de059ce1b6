# cmake -DCMD=<program> -DARGS=<;-list> -DREGEX=<regex> -P expect_failure.cmake
# Passes when the program exits non-zero AND its output matches REGEX (ctest alone can check only one).
execute_process(COMMAND ${CMD} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0; output:\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}':\n${out}${err}")
endif()
message(STATUS "exit ${rc}, output matched")
