#pragma once
// The operations HTTP API (docs/operations.md): health, sinks and their control, offsets
// (KIP-875 style), validate, PUT / DELETE of definitions, Prometheus /metrics and the status
// page at /. Served by cpp-httplib (Debian's libcpp-httplib) on its own threads; off unless
// [api] enabled = true. Built into the ops module, which the runtime loads only then. Every request but the page itself
// carries the bearer token when one is configured.
#include <functional>
#include <memory>
#include <string>

#include "config/runtime_config.h"
#include "runtime/status.h"
#include "runtime/supervisor.h"

namespace picomq::runtime {

// A running API (made by the ops module, ops_module.h); stops serving when destroyed.
class ApiServer {
 public:
  virtual ~ApiServer() = default;
  virtual std::string url() const = 0;  // "http://127.0.0.1:8083"
};

// Binds and starts serving; nullptr with `error` when it cannot (address taken, bad TLS files).
std::unique_ptr<ApiServer> start_api_server(const config::RuntimeConfig& config, Supervisor& sinks, StatusBoard& status,
                                            std::string& error);

// The definition as GET /sinks/{key} shows it: every option the plugin declares secret, and
// every property or URL part that holds a credential, replaced by "***" (masked_definition.cpp).
std::string masked_definition_json(const config::SinkDefinition& definition,
                                   const std::vector<std::filesystem::path>& plugin_path);

// The Prometheus text exposition of GET /metrics: every sink's state, counters, lag and latency
// histograms, and the process's CPU and resident memory (metrics_exposition.cpp).
std::string metrics_exposition(const std::vector<SinkStatus>& sinks);

// The status page (static HTML + JavaScript on the JSON API).
extern const char* const kStatusPageHtml;

}  // namespace picomq::runtime
