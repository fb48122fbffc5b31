# The rule of the ISA files (kernels/README.md): every weak symbol of an isa_<name>.cpp object names
# that file's own architecture, so the linker, which keeps one copy of a weak symbol for all its
# callers, cannot hand one ISA's code to another's (AVX-512 code on the SSE2 path, say).
# Usage: cmake -DNM=<nm> -DOBJECTS=<object;...> -P isa_symbols_test.cmake
cmake_minimum_required(VERSION 3.20)
set(marker_sse2 "sse2")
set(marker_avx2 "avx2")
set(marker_avx512 "avx512f")
set(marker_avx512vnni "avx512bw")
set(marker_avx512bf16 "avx512dq")
set(marker_avx512amx "avx512cd|AmxTiles|EmulatedTiles")
set(marker_neon "neon64")
set(checked 0)
foreach(object ${OBJECTS})
  if(NOT object MATCHES "isa_([a-z0-9]+)\\.cpp\\.o(bj)?$")
    continue()
  endif()
  set(isa ${CMAKE_MATCH_1})
  if(NOT DEFINED marker_${isa})
    message(FATAL_ERROR "${object}: no architecture is known for isa_${isa}.cpp; add it here")
  endif()
  execute_process(COMMAND ${NM} --defined-only -C ${object} RESULT_VARIABLE status
                  OUTPUT_VARIABLE symbols ERROR_VARIABLE error)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} ${object} failed: ${error}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  foreach(line ${lines})
    # Weak symbols (W, V), but data: the exception-handling personality's reference, and the
    # type information of function types that clang's -fsanitize=function emits (Sanitize build).
    if(line MATCHES "^[0-9a-f]+ [WV] (.*)$")
      set(symbol "${CMAKE_MATCH_1}")
      if(NOT symbol MATCHES "${marker_${isa}}" AND NOT symbol MATCHES "^DW\\.ref\\."
         AND NOT symbol MATCHES "^typeinfo (name )?for .*\\)( const)?$")
        message(FATAL_ERROR "isa_${isa}.cpp emits a weak symbol that does not name its "
                            "architecture (${marker_${isa}}): ${symbol}")
      endif()
    endif()
  endforeach()
  math(EXPR checked "${checked} + 1")
  message(STATUS "isa_${isa}.cpp: every weak symbol names ${marker_${isa}}")
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no isa_*.cpp object among: ${OBJECTS}")
endif()
