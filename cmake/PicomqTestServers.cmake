# The test servers built from source once per machine (scripts/build-test-servers.sh: FerretDB,
# SeaweedFS, InfluxDB 2.8, Helm) as one CTest fixture: the test `test_servers` runs that script
# (at once when they are built; else it builds them, or waits on the build scripts' locks while
# scripts/test.sh builds them in the background), and only the tests that use one of these
# servers wait for it. ctest starts the moment the project is built; on a new machine the suites
# that need no such server run while the last server still compiles.
#
#   picomq_test_needs_servers(s3_kafka s3_sink)   # in the directory that added the tests
include_guard(GLOBAL)

function(picomq_test_needs_servers)
  set_property(TEST ${ARGN} APPEND PROPERTY FIXTURES_REQUIRED picomq_test_servers)
endfunction()

# The fixture's setup test (tests/CMakeLists.txt). COST: scheduled first, so that its wait is spent
# beside the other suites and not after them.
function(picomq_add_test_servers_fixture)
  add_test(NAME test_servers COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/build-test-servers.sh)
  set_tests_properties(test_servers PROPERTIES FIXTURES_SETUP picomq_test_servers LABELS "servers"
                       TIMEOUT 5400 COST 100000)
endfunction()

# Every test-only target under `dir` (executables named *_test, the in-tree harness, the test servers'
# helpers and tools) gets -O0 after the build type's flags (see BUILD_TESTING in CMakeLists.txt).
function(picomq_unoptimize_test_code dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    if(target MATCHES "(_test|_test_server|_test_table|_test_tool|^picomq_test_harness)$")
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
        target_compile_options(${target} PRIVATE -O0)
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    picomq_unoptimize_test_code(${sub})
  endforeach()
endfunction()
