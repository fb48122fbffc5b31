# The build refuses an upward include (cmake/layers.cmake). For each library, a file that includes
# one of its own headers compiles, and the same file including a header of the library above it
# fails, because that header is not found.
# Usage: cmake -DBUILD_DIR=<build tree> -DPROBES=<target:header:expect;...> -P layering_test.cmake
# where expect is "compiles" or "refused".
cmake_minimum_required(VERSION 3.20)
foreach(probe ${PROBES})
  string(REPLACE ":" ";" fields "${probe}")
  list(GET fields 0 target)
  list(GET fields 1 header)
  list(GET fields 2 expect)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target}
                  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  string(REGEX MATCH "${header}'?: No such file|'${header}' file not found" not_found "${output}")
  if(expect STREQUAL "compiles" AND NOT status EQUAL 0)
    message(FATAL_ERROR "${target}: including ${header} should compile:\n${output}")
  elseif(expect STREQUAL "refused" AND (status EQUAL 0 OR NOT not_found))
    message(FATAL_ERROR "${target}: including ${header} should fail as not found:\n${output}")
  endif()
  message(STATUS "${target}: ${header} ${expect}")
endforeach()
