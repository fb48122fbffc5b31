# The files that let other projects find the installed library: a CMake package (aftConfig.cmake,
# imported targets aft::aft and aft::aft_static) and a pkg-config file (aft.pc). Both locate the
# installation from their own place, so an installed tree may be moved.
include(CMakePackageConfigHelpers)

set(AFT_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/aft)
set(AFT_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/aftConfig.cmake.in ${PROJECT_BINARY_DIR}/aftConfig.cmake
  INSTALL_DESTINATION ${AFT_PACKAGE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
# 0.x: a new minor version may change the ABI (the soname is libaft.so.MAJOR.MINOR).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/aftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/aftConfig.cmake ${PROJECT_BINARY_DIR}/aftConfigVersion.cmake
  DESTINATION ${AFT_PACKAGE_DIR})

# aft.pc finds the prefix from its own directory (${pcfiledir}) unless the directories are absolute.
file(RELATIVE_PATH AFT_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(AFT_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(AFT_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/aft.pc.in ${PROJECT_BINARY_DIR}/aft.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/aft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
