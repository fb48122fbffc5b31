# Every C and C++ source of the project is formatted as .clang-format says. clang-format 14 (Debian
# 12's) is the reference: other versions format some constructs differently.
# Usage: cmake -DCLANG_FORMAT=<clang-format-14, or empty> -DSOURCE_DIR=<the project>
#        -P format_test.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT CLANG_FORMAT)
  message("skipped: clang-format-14 not found (tools/install-deps.sh installs it)")
  return()
endif()
set(files)
foreach(dir engine kernels models tools tests examples python)
  file(GLOB_RECURSE found ${SOURCE_DIR}/${dir}/*.c ${SOURCE_DIR}/${dir}/*.cpp
       ${SOURCE_DIR}/${dir}/*.h ${SOURCE_DIR}/${dir}/*.hpp)
  list(FILTER found EXCLUDE REGEX "/node_modules/")  # tests/node's packages
  list(APPEND files ${found})
endforeach()
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${files} RESULT_VARIABLE status
                ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "not formatted as .clang-format says (clang-format-14 -i FILE):\n${output}")
endif()
list(LENGTH files count)
message(STATUS "${count} files formatted as .clang-format says")
