#pragma once
// The process: runtime config, optional embedded broker, one SinkRunner per valid definition,
// signal handling and an orderly shutdown.
#include <chrono>
#include <optional>

#include "config/runtime_config.h"

namespace picomq::runtime {

struct RunOptions {
  std::optional<std::chrono::milliseconds> stop_after;  // stop by itself (quickstart, demos)
};

// Blocks SIGINT/SIGTERM in the calling thread (and so in every thread it starts); call first.
void block_stop_signals();

// Runs until SIGINT/SIGTERM (or stop_after). Exit code: 0 clean, 1 when a sink ended in Error
// or a definition was invalid, 3 when a sink had to be abandoned at shutdown.
int run(const config::RuntimeConfig& config, const RunOptions& options);

}  // namespace picomq::runtime
