# Runs the CLI and checks its exit code and output: a CTest test that fails unless both match.
#   cmake -DCLI=<path to gdn> -DARGS=<args separated by |> -DEXIT=<code> -DMATCH=<regex> -P cli_expect.cmake
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${CLI} ${args} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT code STREQUAL EXIT)
  message(FATAL_ERROR "gdn ${args}: exit code ${code}, expected ${EXIT}; output:\n${all}")
endif()
if(NOT all MATCHES "${MATCH}")
  message(FATAL_ERROR "gdn ${args}: output does not match '${MATCH}':\n${all}")
endif()
message(STATUS "gdn ${args}: exit code ${code}, output matches '${MATCH}'")
