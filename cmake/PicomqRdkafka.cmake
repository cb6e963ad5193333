# librdkafka 2.12.1, the Kafka client of the runtime, its dead-letter producer, the embedded broker and
# the tests: one version, linked statically, so the packages and the image carry it. Built once per
# machine by scripts/build-librdkafka.sh (from the pinned source crates.io serves) into
# PICOMQ_RDKAFKA_ROOT; configuring runs it when that holds no finished build. Debian 12's librdkafka
# (2.0.2, what kcat links) is never used by the project.
set(PICOMQ_RDKAFKA_VERSION 2.12.1)
if(DEFINED ENV{PICOMQ_DEPS_CACHE})
  set(_picomq_deps_cache "$ENV{PICOMQ_DEPS_CACHE}")
else()
  set(_picomq_deps_cache "$ENV{HOME}/.cache/picomq")
endif()
# A ThreadSanitizer build links librdkafka's TSan variant (instrumented, on POSIX threads: see the script).
set(_picomq_rdkafka_variant "")
set(_picomq_rdkafka_dir "librdkafka-${PICOMQ_RDKAFKA_VERSION}")
if(PICOMQ_SANITIZE STREQUAL "thread")
  set(_picomq_rdkafka_variant "tsan")
  string(APPEND _picomq_rdkafka_dir "-tsan")
endif()
set(PICOMQ_RDKAFKA_ROOT "${_picomq_deps_cache}/${_picomq_rdkafka_dir}"
    CACHE PATH "where scripts/build-librdkafka.sh installs librdkafka ${PICOMQ_RDKAFKA_VERSION}")
execute_process(COMMAND bash "${PROJECT_SOURCE_DIR}/scripts/build-librdkafka.sh" "${PICOMQ_RDKAFKA_ROOT}"
                        ${_picomq_rdkafka_variant}
                RESULT_VARIABLE _picomq_rdkafka_result)
if(NOT _picomq_rdkafka_result EQUAL 0)
  message(FATAL_ERROR "librdkafka ${PICOMQ_RDKAFKA_VERSION}: scripts/build-librdkafka.sh failed (its output is above)")
endif()
find_package(RdKafka ${PICOMQ_RDKAFKA_VERSION} EXACT REQUIRED CONFIG PATHS "${PICOMQ_RDKAFKA_ROOT}" NO_DEFAULT_PATH)
message(STATUS "librdkafka ${RdKafka_VERSION}: ${PICOMQ_RDKAFKA_ROOT}")
