# The release's install layout and its Debian packages (CPack DEB, one package per component).
#
#   component      package                          what
#   runtime        picomq-connect                   /usr/bin/picomq-connect, the light sinks and the
#                                                   Parquet writer in /usr/lib/picomq-connect/plugins,
#                                                   /etc/picomq-connect (conffiles), the systemd unit,
#                                                   the docs and the quickstart
#   python         picomq-connect-python            the Python sink host and the picomq_connect package
#   sink-<heavy>   picomq-connect-sink-<heavy>      doris, redshift, delta, iceberg: one plugin each
#   dev            picomq-connect-dev               C ABI, C++ SDK, kit, CMake package, pkg-config,
#                                                   conformance suite
# Each package's dependencies are computed from its binaries (dpkg-shlibdeps); binaries are
# stripped and their debug symbols go to <package>-dbgsym (.ddeb). scripts/release.sh runs this
# (`cpack` in the build tree) and tests/packaging installs the result into a clean Debian 12 root.
include(GNUInstallDirs)

# /etc and /lib/systemd are absolute: the packages install into /usr, but config and unit do not
# follow the prefix (Debian 12 ships units in /lib/systemd/system).
set(PICOMQ_ETC_DIR /etc/picomq-connect)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/etc/runtime.toml DESTINATION ${PICOMQ_ETC_DIR} COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/etc/env DESTINATION ${PICOMQ_ETC_DIR} COMPONENT runtime EXCLUDE_FROM_ALL
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/etc/sinks.d/stdout.toml.example DESTINATION ${PICOMQ_ETC_DIR}/sinks.d
        COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/picomq-connect.service DESTINATION /lib/systemd/system
        COMPONENT runtime EXCLUDE_FROM_ALL)
# The docs and the quickstart (its config finds the plugins in the default plugin directory).
set(PICOMQ_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/picomq-connect)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${PICOMQ_DOC_DIR} COMPONENT runtime)
# picomq-connect links librdkafka statically (cmake/PicomqRdkafka.cmake): its licenses go with it.
install(FILES ${PICOMQ_RDKAFKA_ROOT}/LICENSES.txt DESTINATION ${PICOMQ_DOC_DIR} RENAME librdkafka-LICENSES.txt COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${PICOMQ_DOC_DIR} COMPONENT runtime
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
# The installed quickstart's runtime.toml without the source tree's plugin folders: the package's
# plugin directory is searched by default.
file(READ ${PROJECT_SOURCE_DIR}/examples/quickstart/runtime.toml picomq_quickstart)
string(REGEX REPLACE "\n\\[plugins\\]\npath = [^\n]*\n"
       "\n# [plugins]: none; the package's plugin directory (/usr/lib/picomq-connect/plugins) is searched by default.\n"
       picomq_quickstart_installed "${picomq_quickstart}")
if(picomq_quickstart_installed STREQUAL picomq_quickstart)
  message(FATAL_ERROR "examples/quickstart/runtime.toml: no [plugins] path line to take out for the installed copy")
endif()
file(WRITE ${PROJECT_BINARY_DIR}/packaging/quickstart/runtime.toml "${picomq_quickstart_installed}")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/quickstart/ DESTINATION ${CMAKE_INSTALL_DATADIR}/picomq-connect/quickstart
        COMPONENT runtime PATTERN runtime.toml EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/packaging/quickstart/runtime.toml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/picomq-connect/quickstart COMPONENT runtime)

# The Python package beside Debian's python3 (the host embeds Debian's CPython 3.11 and finds it
# on its default path), with _picomq_abi so the package also imports outside the host.
if(TARGET picomq_python_abi)
  set(PICOMQ_PYTHON_SITE lib/python3/dist-packages)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/picomq_connect ${PROJECT_SOURCE_DIR}/python/agora
          DESTINATION ${PICOMQ_PYTHON_SITE} COMPONENT python PATTERN "__pycache__" EXCLUDE)
  install(TARGETS picomq_python_abi LIBRARY DESTINATION ${PICOMQ_PYTHON_SITE} COMPONENT python)
endif()

# Every package's /usr/share/doc/<package>/copyright (Debian Policy 12.5) and changelog.gz (12.7),
# written when the component is installed: packaging/debian/copyright.py (picomq-connect's
# licence, librdkafka's where it is linked statically, and the Rust crates linked into a cdylib,
# from cargo metadata after the build; RDKAFKA names the file that links librdkafka, CRATES
# crate=file pairs) and packaging/debian/changelog.py (this version's items of CHANGELOG.md).
# tests/packaging/lintian_test.sh runs lintian over every .deb.
set(CPACK_PACKAGE_CONTACT "picomq-connect maintainers <maintainers@picomq-connect.dev>")
find_package(Python3 COMPONENTS Interpreter QUIET)
function(picomq_install_package_docs component package)
  cmake_parse_arguments(PARSE_ARGV 2 CR "" "RDKAFKA" "CRATES")
  set(doc "\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/doc/${package}")
  set(args --out "${doc}/copyright")
  if(CR_RDKAFKA)
    list(APPEND args --rdkafka ${CR_RDKAFKA} --rdkafka-licenses ${PICOMQ_RDKAFKA_ROOT}/LICENSES.txt)
  endif()
  foreach(crate IN LISTS CR_CRATES)
    list(APPEND args --crate ${crate})
  endforeach()
  if(CR_CRATES)
    list(APPEND args --cargo ${PICOMQ_CARGO} --manifest ${PICOMQ_CARGO_WORKSPACE}/Cargo.toml)
  endif()
  list(JOIN args "\" \"" quoted)
  install(CODE "file(MAKE_DIRECTORY \"${doc}\")
    execute_process(COMMAND \"${Python3_EXECUTABLE}\" \"${PROJECT_SOURCE_DIR}/packaging/debian/copyright.py\" \"${quoted}\"
                    COMMAND_ERROR_IS_FATAL ANY)
    execute_process(COMMAND \"${Python3_EXECUTABLE}\" \"${PROJECT_SOURCE_DIR}/packaging/debian/changelog.py\"
                            --out \"${doc}/changelog.gz\" --source \"${PROJECT_SOURCE_DIR}/CHANGELOG.md\"
                            --version ${PROJECT_VERSION} \"--maintainer=${CPACK_PACKAGE_CONTACT}\"
                    COMMAND_ERROR_IS_FATAL ANY)" COMPONENT ${component} EXCLUDE_FROM_ALL)
endfunction()
# What lintian reports and is meant (each with its reason, in the file): packaging/debian/*.lintian-overrides.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/runtime.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME picomq-connect COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/dev.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME picomq-connect-dev COMPONENT dev EXCLUDE_FROM_ALL)
set(picomq_plugins_path lib/picomq-connect/plugins)
picomq_install_package_docs(runtime picomq-connect RDKAFKA usr/bin/picomq-connect
  CRATES picomq-parquet=usr/${picomq_plugins_path}/libpicomq_parquet.so)
picomq_install_package_docs(python picomq-connect-python)
picomq_install_package_docs(sink-doris picomq-connect-sink-doris)
picomq_install_package_docs(sink-redshift picomq-connect-sink-redshift)
picomq_install_package_docs(sink-delta picomq-connect-sink-delta
  CRATES picomq-delta-sink=usr/${picomq_plugins_path}/libpicomq_connector_delta_sink.so)
picomq_install_package_docs(sink-iceberg picomq-connect-sink-iceberg
  CRATES picomq-iceberg-sink=usr/${picomq_plugins_path}/libpicomq_connector_iceberg_sink.so)
picomq_install_package_docs(dev picomq-connect-dev RDKAFKA usr/${CMAKE_INSTALL_LIBDIR}/picomq-sdk/librdkafka/*)

set(CPACK_PACKAGE_NAME picomq-connect)
set(CPACK_PACKAGE_VENDOR "picomq-connect")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/picomq/picomq-connect")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime python sink-doris sink-redshift sink-delta sink-iceberg dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Strips every unstripped ELF file (RelWithDebInfo) and keeps its debug info in <package>-dbgsym.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(picomq_same_version "picomq-connect (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME picomq-connect)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "passwd, ca-certificates, init-system-helpers (>= 1.54~)")  # deb-systemd-invoke
# Descriptions: lines of at most 80 columns (Debian Policy 3.4.1; lintian checks).
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Sink connector runtime for Kafka-protocol brokers
Turns topics on PicoMQ, Apache Kafka or Redpanda into writes against
PostgreSQL, ClickHouse, Elasticsearch/OpenSearch, Quickwit, MongoDB,
Meilisearch, SurrealDB, InfluxDB, S3, HTTP and stdout, committing offsets only
after the write. The heavy sinks (Doris, Redshift, Delta Lake, Iceberg) and
Python sinks come in packages of their own.")
foreach(script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/runtime-${script} ${PROJECT_BINARY_DIR}/packaging/runtime/${script} COPYONLY)
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/runtime-conffiles ${PROJECT_BINARY_DIR}/packaging/runtime/conffiles COPYONLY)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${PROJECT_BINARY_DIR}/packaging/runtime/conffiles ${PROJECT_BINARY_DIR}/packaging/runtime/postinst
  ${PROJECT_BINARY_DIR}/packaging/runtime/prerm ${PROJECT_BINARY_DIR}/packaging/runtime/postrm)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME picomq-connect-python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "${picomq_same_version}, python3")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "picomq-connect sinks written in Python
The Python sink host (libpicomq_connector_python_sink.so, on Debian's
CPython 3.11) and the picomq_connect package: BaseSink, DataPlane,
sink_data_plane_spec.")

set(picomq_heavy_body "One of picomq-connect's heavy sinks, shipped apart from the runtime: its
plugin goes into /usr/lib/picomq-connect/plugins, where the runtime finds it.")
foreach(heavy doris redshift delta iceberg)
  string(TOUPPER "SINK-${heavy}" c)
  set(CPACK_DEBIAN_${c}_PACKAGE_NAME picomq-connect-sink-${heavy})
  set(CPACK_DEBIAN_${c}_PACKAGE_DEPENDS "${picomq_same_version}")
endforeach()
set(CPACK_DEBIAN_SINK-DORIS_DESCRIPTION "picomq-connect sink: Apache Doris (Stream Load)
${picomq_heavy_body}")
set(CPACK_DEBIAN_SINK-REDSHIFT_DESCRIPTION "picomq-connect sink: Amazon Redshift (S3-staged COPY and MERGE)
${picomq_heavy_body}")
set(CPACK_DEBIAN_SINK-DELTA_DESCRIPTION "picomq-connect sink: Delta Lake tables (delta-rs)
${picomq_heavy_body}")
set(CPACK_DEBIAN_SINK-ICEBERG_DESCRIPTION "picomq-connect sink: Apache Iceberg tables (iceberg-rust)
${picomq_heavy_body}")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME picomq-connect-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libsasl2-dev, zlib1g-dev, libcurl4-openssl-dev, libdeflate-dev, libzstd-dev, libssl-dev, libsimdjson-dev, nlohmann-json3-dev, libgtest-dev, cmake, pkg-config, python3")  # python3: the testing library's HTTP receiver
set(CPACK_DEBIAN_DEV_DESCRIPTION "picomq-connect sink SDK
The stable C ABI (sink_abi.h), the header-only C++ SDK, the sink kit (static
library), the CMake package (find_package(picomq-sdk)), pkg-config files and
the sink conformance suite (with the static librdkafka 2.12.1 it links).")

include(CPack)
