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
