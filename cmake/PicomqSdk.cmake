# The sink SDK: the C ABI header, the Arrow C Data structs and the header-only C++ SDK, as one
# interface target; the sink kit (sinkkit/, a static library) and its testing library are
# exported with it, as the `sinkkit` and `sinkkit_testing` components. In this tree it is `picomq_sink_abi` (alias picomq::sdk); installed, it is
# `picomq::sdk` from find_package(picomq-sdk) and `picomq-sdk` for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(picomq_sink_abi INTERFACE)
add_library(picomq::sdk ALIAS picomq_sink_abi)
target_include_directories(picomq_sink_abi INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(picomq_sink_abi PROPERTIES EXPORT_NAME sdk)
# GCC gives static locals of inline templates (libstdc++'s std::to_string digit table...)
# STB_GNU_UNIQUE binding whatever -fvisibility says, and glibc never unloads the first library
# that defines one: a plugin could never be dlclose()d or reloaded. Every plugin compiles
# without them (PluginCycles tests check that each one unloads).
target_compile_options(picomq_sink_abi INTERFACE $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-fno-gnu-unique>)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/picomq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(TARGETS picomq_sink_abi EXPORT picomq-sdk-targets)
set(PICOMQ_SDK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/picomq-sdk)
install(EXPORT picomq-sdk-targets NAMESPACE picomq:: DESTINATION ${PICOMQ_SDK_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/picomq-sdk-config.cmake.in
  ${PROJECT_BINARY_DIR}/picomq-sdk-config.cmake INSTALL_DESTINATION ${PICOMQ_SDK_CMAKE_DIR})
# The ABI major is the compatibility line: a plugin built against 2.x loads in any 2.y runtime.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/picomq-sdk-config-version.cmake
  VERSION 2.0 COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/picomq-sdk-config.cmake ${PROJECT_BINARY_DIR}/picomq-sdk-config-version.cmake
        ${PROJECT_SOURCE_DIR}/cmake/PicomqAddSink.cmake DESTINATION ${PICOMQ_SDK_CMAKE_DIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/sink-docs.sh DESTINATION ${PICOMQ_SDK_CMAKE_DIR})
file(RELATIVE_PATH PICOMQ_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/picomq-sdk.pc.in ${PROJECT_BINARY_DIR}/picomq-sdk.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/picomq-sinkkit.pc.in ${PROJECT_BINARY_DIR}/picomq-sinkkit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/picomq-sdk.pc ${PROJECT_BINARY_DIR}/picomq-sinkkit.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
