#pragma once
// The operations surface as the runtime reaches it: the API server (api_server.h) and the health
// probe (health_probe.h) live in a module, libpicomq_ops.so, loaded when [api] enabled = true or
// `--health` is given. cpp-httplib (with OpenSSL, initialised when the library loads) and
// prometheus-cpp cost every runtime ~2.5 MB of memory at load; a runtime without the API never
// maps them. The module calls back into the runtime through the symbols the executable exports
// (src/app/exported_symbols.txt).
#include <memory>
#include <string>
#include <vector>

#include "modules/loader.h"
#include "runtime/ops/api_server.h"

namespace picomq::runtime {

struct OpsModule {
  modules::TableHeader header;
  std::unique_ptr<ApiServer> (*start_api_server)(const config::RuntimeConfig& config, Supervisor& sinks,
                                                 StatusBoard& status, std::string& error);
  int (*probe_health)(const std::string& url, const std::string& token);
  int (*run_ctl)(const std::vector<std::string>& args);  // `picomq-connect ctl ...` (ops/ctl.h)
};

inline constexpr const char* kOpsModule = "picomq_ops";
inline constexpr const char* kOpsModuleEntry = "picomq_ops_module";

// The loaded module, or null with `error` (which names the file and why).
inline const OpsModule* ops_module(std::string& error) {
  return modules::load<OpsModule>(kOpsModule, kOpsModuleEntry, error);
}

}  // namespace picomq::runtime
