# The libraries are layers: kernels -> format -> runtime -> the model families -> API -> tools.
# A library's headers are included by their path from the project root ("engine/runtime/graph.h"),
# and a library sees only its own folder and those of the libraries it links: each exposes a
# directory of the build tree holding just a link to its folder. So an include of a library above
# (or beside) it is not found, and the build fails (tests/layering_test.cmake checks it does).
function(aft_library_folder target)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(root ${PROJECT_BINARY_DIR}/library-folders/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${folder} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
endfunction()

# The public C header (engine/include/aft.h): the contract every layer speaks (its status codes).
add_library(aft_header INTERFACE)
target_include_directories(aft_header INTERFACE ${PROJECT_SOURCE_DIR}/engine/include)
