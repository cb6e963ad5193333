# picomq_add_conformance_test(): the sink conformance suite (tests/conformance/README.md) for a
# sink built outside this tree, as one executable and one ctest. It comes with
# find_package(picomq-sdk 2 COMPONENTS sinkkit conformance).
#
#   picomq_add_sink(my_sink SOURCES my_sink.cpp)
#   picomq_add_conformance_test(my_sink
#     ADAPTER conformance_adapter.cpp     # a SinkAdapter registered with PICOMQ_CONFORMANCE_ADAPTER
#     LIBRARIES PkgConfig::SOMETHING      # what the adapter needs to read the destination back
#     TIMEOUT 600)                        # seconds (default 900)
#
# Makes the executable and the test <name>_conformance (labels conformance, kafka): the
# installed conformance_main.cpp and the adapter, linked with picomq::conformance, with these
# built in (the environment overrides each when it runs):
#  - PICOMQ_CONNECT_BIN: the installation's bin/picomq-connect (PICOMQ_CONNECT_EXECUTABLE);
#  - PICOMQ_PLUGIN_PATH: the folder the sink's plugin is built into;
#  - PICOMQ_KAFKA_SH: the installed Kafka launcher, share/picomq-sdk/testing/kafka.sh (it needs
#    Java and Kafka's jars: PICOMQ_KAFKA_LIBS).
# PICOMQ_CONFORMANCE_BOOTSTRAP=host:port runs the suite against a running broker instead.
include_guard(GLOBAL)

function(picomq_add_conformance_test name)
  cmake_parse_arguments(PARSE_ARGV 1 CONF "" "ADAPTER;TIMEOUT" "LIBRARIES")
  set(sink picomq_connector_${name}_sink)
  if(NOT CONF_ADAPTER)
    message(FATAL_ERROR "picomq_add_conformance_test(${name}): ADAPTER is required")
  endif()
  if(NOT TARGET ${sink})
    message(FATAL_ERROR "picomq_add_conformance_test(${name}): no target ${sink}; declare the sink with picomq_add_sink(${name} ...) first")
  endif()
  if(NOT TARGET picomq::conformance)
    message(FATAL_ERROR "picomq_add_conformance_test(${name}): find_package(picomq-sdk 2 COMPONENTS ... conformance) first")
  endif()
  if(NOT PICOMQ_CONNECT_EXECUTABLE)
    message(WARNING "picomq_add_conformance_test(${name}): no installed picomq-connect found; set PICOMQ_CONNECT_BIN when the test runs")
  endif()
  if(NOT CONF_TIMEOUT)
    set(CONF_TIMEOUT 900)
  endif()
  set(test ${name}_conformance)
  add_executable(${test} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/conformance_main.cpp ${CONF_ADAPTER})
  target_compile_features(${test} PRIVATE cxx_std_20)
  target_link_libraries(${test} PRIVATE picomq::conformance ${CONF_LIBRARIES})
  target_compile_definitions(${test} PRIVATE
    PICOMQ_CONNECT_BIN="${PICOMQ_CONNECT_EXECUTABLE}"
    PICOMQ_PLUGIN_DIR="$<TARGET_FILE_DIR:${sink}>"
    PICOMQ_KAFKA_SH="${PICOMQ_CONFORMANCE_KAFKA_SH}")
  add_dependencies(${test} ${sink})
  add_test(NAME ${test} COMMAND ${test})
  set_tests_properties(${test} PROPERTIES LABELS "conformance;kafka" TIMEOUT ${CONF_TIMEOUT})
endfunction()
