#pragma once
// `picomq-connect test`: a definition's fixtures (config/test_fixture.h) run through what the
// runtime does to a batch before the sink — the block's decoders, change events, the transform
// chain, the bad-record sorting (runtime/delivery/batch_preparer.h) — with no broker and no
// destination. Each test's records go in as one batch of one partition; what the sink would be
// called with, which records go bad (and at which stage) and how many a filter drops are compared
// with what the fixture expects, and every difference is printed with where it is.
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <vector>

#include "config/env.h"

namespace picomq::authoring {

struct TestOptions {
  // Where the definition's plugin is looked for (its option check and the change operations it
  // applies); the default plugin directory is searched after these.
  std::vector<std::filesystem::path> plugin_path;
  // Leave the plugin alone: its [plugin_config] unchecked, every change operation taken as applied.
  bool without_plugin = false;
  // Print what the sink is called with in every test, passed or not (writing fixtures).
  bool show = false;
  // The definition to test instead of the one each fixture names.
  std::optional<std::filesystem::path> definition;
};

struct TestTally {
  int passed = 0;
  int failed = 0;
  int unusable = 0;  // fixtures or definitions that did not load
};

// Runs every test of the fixture file, printing to `out`; adds to `tally`.
void run_fixture_file(const std::filesystem::path& file, const TestOptions& options, const config::EnvLookup& env,
                      std::ostream& out, TestTally& tally);

// The fixture files `path` names: itself, or a directory's *.toml files (recursively, in name
// order, dot-files skipped).
std::vector<std::filesystem::path> fixture_files(const std::filesystem::path& path);

// The whole command: 0 when every test passed, 1 when one failed, 2 when a fixture or its
// definition could not be used (or no fixture was found).
int run_tests(const std::vector<std::filesystem::path>& paths, const TestOptions& options, const config::EnvLookup& env,
              std::ostream& out);

}  // namespace picomq::authoring
