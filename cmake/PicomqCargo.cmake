# Rust plugins (sdk/rust, examples/sinks/rust_sink, sinks/delta, sinks/iceberg): built by cargo from the
# workspace at the top of the tree (Cargo.toml, Cargo.lock), driven from here so scripts/build.sh
# builds them like any other target.
#
# The dependency stack (arrow-rs, parquet, delta-rs...) compiles once per machine: the target
# directory is ${PICOMQ_CARGO_TARGET} (default ~/.cache/picomq/cargo-target), outside the clone,
# and the registry is CARGO_HOME's (default ~/.cargo). Clones and worktrees share both; cargo
# locks the target directory, so two builds wait for each other instead of racing.
#
#   picomq_add_cargo_sink(delta
#     CRATE picomq-delta-sink          # the workspace package whose cdylib is
#                                      # libpicomq_connector_<name>_sink.so
#     COMPONENT delta                  # cmake --install component (default: the plugin's name)
#     NO_INSTALL                       # examples and test plugins
#     DOC ${CMAKE_CURRENT_SOURCE_DIR}/../../docs/sinks/delta.md
#     CONFORMANCE conformance_adapter.cpp)
#
# Makes the custom target picomq_connector_<name>_sink (in ALL) that copies the crate's library
# into PICOMQ_PLUGIN_DIR after picomq_rust_workspace built it; DOC and CONFORMANCE as
# picomq_add_sink().
#
# One cargo invocation builds the whole workspace (picomq_rust_workspace): cargo unifies the
# features of shared dependencies per invocation, so building crates one by one (-p) would
# compile arrow-rs twice, once with the SDK's features and once with delta-rs'.
include_guard(GLOBAL)

find_program(PICOMQ_CARGO cargo HINTS $ENV{HOME}/.cargo/bin $ENV{CARGO_HOME}/bin)
if(DEFINED ENV{PICOMQ_CARGO_TARGET})
  set(picomq_cargo_target_default $ENV{PICOMQ_CARGO_TARGET})
else()
  set(picomq_cargo_target_default $ENV{HOME}/.cache/picomq/cargo-target)
endif()
set(PICOMQ_CARGO_TARGET ${picomq_cargo_target_default} CACHE PATH "cargo's target directory, shared by clones (outside the tree)")
set(PICOMQ_CARGO_PROFILE release CACHE STRING "the cargo profile of the Rust plugins")
set(PICOMQ_CARGO_WORKSPACE ${CMAKE_CURRENT_LIST_DIR}/..)
set(PICOMQ_CARGO_OUT ${PICOMQ_CARGO_TARGET}/${PICOMQ_CARGO_PROFILE})
# Clippy in the build: cargo runs the workspace's own crates through clippy-driver (rustc plus
# clippy's lints, the same code generated), so one compilation gives the plugins, the test binaries
# and clippy's findings as warnings. The style check (scripts/style.sh) reruns the same cargo steps,
# which replay those warnings from cargo's cache, instead of a `cargo clippy` that would check every
# dependency a second time in another profile (~20 min on a new machine).
find_program(PICOMQ_CLIPPY_DRIVER clippy-driver HINTS $ENV{HOME}/.cargo/bin $ENV{CARGO_HOME}/bin)
if(PICOMQ_CLIPPY_DRIVER)
  set(picomq_clippy_default ON)
else()
  set(picomq_clippy_default OFF)
endif()
option(PICOMQ_CARGO_CLIPPY "build the Rust workspace's crates through clippy-driver (lints as warnings)" ${picomq_clippy_default})
set(picomq_cargo_wrapper)
if(PICOMQ_CARGO_CLIPPY AND PICOMQ_CLIPPY_DRIVER)
  set(picomq_cargo_wrapper RUSTC_WORKSPACE_WRAPPER=${PICOMQ_CLIPPY_DRIVER})
endif()
# The command every cargo step runs: the shared target dir, a locked lock file, this tree's header.
# (Every step the same environment: a crate built with another wrapper would be built again.)
set(PICOMQ_CARGO_ENV ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${PICOMQ_CARGO_TARGET}
    PICOMQ_SDK_INCLUDE_DIR=${PICOMQ_CARGO_WORKSPACE}/include ${picomq_cargo_wrapper})

# --timings: cargo writes where its build's time went (target/cargo-timings/, one page per build;
# scripts/build.sh prints the slowest units of the last one). CI turns it on.
option(PICOMQ_CARGO_TIMINGS "cargo build --timings (target/cargo-timings/)" OFF)
if(PICOMQ_CARGO AND NOT TARGET picomq_rust_workspace)
  set(picomq_cargo_args --locked --profile ${PICOMQ_CARGO_PROFILE} --workspace --manifest-path ${PICOMQ_CARGO_WORKSPACE}/Cargo.toml)
  set(picomq_cargo_build_args ${picomq_cargo_args})
  if(PICOMQ_CARGO_TIMINGS)
    list(APPEND picomq_cargo_build_args --timings)
  endif()
  set(picomq_cargo_tests_cmd)
  if(BUILD_TESTING)
    # The test binaries too, in the same invocation's feature set (ctest rust_tests runs them).
    set(picomq_cargo_tests_cmd COMMAND ${PICOMQ_CARGO_ENV} ${PICOMQ_CARGO} test ${picomq_cargo_args} --no-run)
  endif()
  add_custom_target(picomq_rust_workspace ALL
    COMMAND ${PICOMQ_CARGO_ENV} ${PICOMQ_CARGO} build ${picomq_cargo_build_args}
    ${picomq_cargo_tests_cmd}
    WORKING_DIRECTORY ${PICOMQ_CARGO_WORKSPACE}
    USES_TERMINAL
    COMMENT "cargo: the Rust workspace (sdk/rust, sinkkit/parquet, examples/sinks/rust_sink, sinks/delta, sinks/iceberg)")
endif()

# The custom target (in ALL) that copies the workspace's <lib> into PICOMQ_PLUGIN_DIR after cargo built it.
function(picomq_cargo_copy_target target lib crate)
  add_custom_target(${target} ALL
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PICOMQ_PLUGIN_DIR}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${PICOMQ_CARGO_OUT}/${lib} ${PICOMQ_PLUGIN_DIR}/${lib}
    BYPRODUCTS ${PICOMQ_PLUGIN_DIR}/${lib}
    COMMENT "${crate} -> ${PICOMQ_PLUGIN_DIR}/${lib}")
  add_dependencies(${target} picomq_rust_workspace)
endfunction()

function(picomq_add_cargo_sink name)
  cmake_parse_arguments(PARSE_ARGV 1 CS "NO_INSTALL" "CRATE;COMPONENT;DOC;CONFORMANCE" "")
  if(NOT PICOMQ_CARGO)
    message(STATUS "picomq_add_cargo_sink(${name}): no cargo found; the Rust plugin is not built")
    return()
  endif()
  set(target picomq_connector_${name}_sink)
  set(lib libpicomq_connector_${name}_sink.so)
  picomq_cargo_copy_target(${target} ${lib} ${CS_CRATE})
  set_target_properties(${target} PROPERTIES PICOMQ_PLUGIN_FILE ${PICOMQ_PLUGIN_DIR}/${lib})
  if(NOT CS_NO_INSTALL)
    if(NOT CS_COMPONENT)
      set(CS_COMPONENT ${name})
    endif()
    # A heavy sink is its own artifact: `cmake --install build --component <component>`.
    install(FILES ${PICOMQ_PLUGIN_DIR}/${lib} DESTINATION lib/picomq-connect/plugins COMPONENT ${CS_COMPONENT}
            EXCLUDE_FROM_ALL)
  endif()
  if(CS_DOC AND BUILD_TESTING AND TARGET picomq-connect)
    add_test(NAME sink_docs_${name}
             COMMAND bash ${PICOMQ_SINK_DOCS_SCRIPT} check $<TARGET_FILE:picomq-connect> ${PICOMQ_PLUGIN_DIR} ${CS_DOC})
  endif()
  if(CS_CONFORMANCE)
    get_filename_component(adapter ${CS_CONFORMANCE} ABSOLUTE)
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_ADAPTERS ${adapter})
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_PLUGINS ${target})
    set_property(GLOBAL APPEND PROPERTY PICOMQ_CONFORMANCE_SINKS ${name})
  endif()
endfunction()

# The workspace's own tests (every crate's `cargo test`, the binaries built by
# picomq_rust_workspace) as one ctest: picomq_add_cargo_tests(rust_tests [COST n])
function(picomq_add_cargo_tests test)
  cmake_parse_arguments(PARSE_ARGV 1 CT "" "COST" "")
  if(NOT PICOMQ_CARGO OR NOT BUILD_TESTING)
    return()
  endif()
  add_test(NAME ${test}
           COMMAND ${PICOMQ_CARGO_ENV} ${PICOMQ_CARGO} test --offline ${picomq_cargo_args})
  set_tests_properties(${test} PROPERTIES LABELS "rust" TIMEOUT 600)
  if(CT_COST)
    set_tests_properties(${test} PROPERTIES COST ${CT_COST})
  endif()
endfunction()

# A Rust library that is not a sink (the kit's Parquet writer): its cdylib lib<name>.so copied
# into PICOMQ_PLUGIN_DIR, where the plugins that load it look, and installed with COMPONENT.
#   picomq_add_cargo_library(picomq_parquet CRATE picomq-parquet COMPONENT runtime)
# Makes the custom target <name>_library (in ALL).
function(picomq_add_cargo_library name)
  cmake_parse_arguments(PARSE_ARGV 1 CL "" "CRATE;COMPONENT" "")
  if(NOT PICOMQ_CARGO)
    message(STATUS "picomq_add_cargo_library(${name}): no cargo found; lib${name}.so is not built")
    return()
  endif()
  set(lib lib${name}.so)
  picomq_cargo_copy_target(${name}_library ${lib} ${CL_CRATE})
  install(FILES ${PICOMQ_PLUGIN_DIR}/${lib} DESTINATION lib/picomq-connect/plugins COMPONENT ${CL_COMPONENT})
endfunction()
