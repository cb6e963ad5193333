# picomq_add_sink(): a sink plugin in a few lines, the same in this tree and out of it
# (find_package(picomq-sdk 2 COMPONENTS sinkkit) brings it).
#
#   picomq_add_sink(http
#     SOURCES http_sink.cpp body.cpp
#     LIBRARIES PkgConfig::SOMETHING         # beyond the kit (linked privately)
#     DOC ${CMAKE_CURRENT_SOURCE_DIR}/../../docs/sinks/http.md
#     CONFORMANCE conformance_adapter.cpp    # in this tree: joins tests/conformance (out of
#                                            # it: picomq_add_conformance_test(), component conformance)
#     COMPONENT sink-doris)                  # the install component, i.e. the package it ships in
#                                            # (default: ${PICOMQ_SINK_COMPONENT}, else none)
#
# Makes libpicomq_connector_<name>_sink.so (a MODULE) that:
#  - exports one dynamic symbol, picomq_sink_plugin_entry (a version script; hidden visibility;
#    static libraries' symbols kept out with --exclude-libs), so two plugins never interpose
#    each other's copies of the kit, libstdc++ inlines or simdjson;
#  - compiles without STB_GNU_UNIQUE (-fno-gnu-unique, from the SDK target), so it unloads;
#  - links the kit (picomq::sinkkit) and the SDK;
#  - installs into lib/picomq-connect/plugins (component COMPONENT);
#  - with DOC: a test `sink_docs_<name>` that fails when the doc's generated option table
#    (scripts/sink-docs.sh) is missing or differs from the plugin's descriptor;
#  - with CONFORMANCE (in this tree): the adapter is compiled into tests/conformance.
# The target is picomq_connector_<name>_sink; add sources or options to it as to any target.
include_guard(GLOBAL)
# Installed beside this file; in this tree, scripts/ (set by the top-level CMakeLists.txt).
if(NOT PICOMQ_SINK_DOCS_SCRIPT)
  set(PICOMQ_SINK_DOCS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/sink-docs.sh)
endif()

function(picomq_add_sink name)
  cmake_parse_arguments(PARSE_ARGV 1 SINK "" "DOC;CONFORMANCE;COMPONENT" "SOURCES;LIBRARIES")
  if(NOT SINK_SOURCES)
    message(FATAL_ERROR "picomq_add_sink(${name}): SOURCES is required")
  endif()
  if(NOT name MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "picomq_add_sink(${name}): a sink name is [a-z][a-z0-9_]*")
  endif()
  set(target picomq_connector_${name}_sink)
  add_library(${target} MODULE ${SINK_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "lib"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(PICOMQ_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PICOMQ_PLUGIN_DIR})
  endif()
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_link_libraries(${target} PRIVATE picomq::sinkkit picomq::sdk ${SINK_LIBRARIES})
  set(map ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  file(WRITE ${map} "{\n  global: picomq_sink_plugin_entry;\n  local: *;\n};\n")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}" "LINKER:--exclude-libs,ALL")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  if(NOT SINK_COMPONENT AND PICOMQ_SINK_COMPONENT)
    set(SINK_COMPONENT ${PICOMQ_SINK_COMPONENT})
  endif()
  if(SINK_COMPONENT)
    install(TARGETS ${target} LIBRARY DESTINATION lib/picomq-connect/plugins COMPONENT ${SINK_COMPONENT})
  else()
    install(TARGETS ${target} LIBRARY DESTINATION lib/picomq-connect/plugins)
  endif()
  set_property(GLOBAL APPEND PROPERTY PICOMQ_SINK_TARGETS ${target})

  if(SINK_DOC AND BUILD_TESTING)
    if(TARGET picomq-connect)
      set(connect $<TARGET_FILE:picomq-connect>)
    elseif(PICOMQ_CONNECT_EXECUTABLE)
      set(connect ${PICOMQ_CONNECT_EXECUTABLE})
    endif()
    if(connect)
      add_test(NAME sink_docs_${name}
               COMMAND bash ${PICOMQ_SINK_DOCS_SCRIPT} check ${connect} $<TARGET_FILE_DIR:${target}> ${SINK_DOC})
    else()
      message(STATUS "picomq_add_sink(${name}): no picomq-connect found; the docs check of ${SINK_DOC} is not registered")
    endif()
  endif()
  if(SINK_CONFORMANCE)
    get_filename_component(adapter ${SINK_CONFORMANCE} ABSOLUTE)
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_ADAPTERS ${adapter})
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_PLUGINS ${target})
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_SINKS ${name})
  endif()
endfunction()
