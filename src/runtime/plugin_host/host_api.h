#pragma once
// The host's side of the C ABI: the table of functions a plugin instance (or its validate())
// calls back into (pmq_host_api), over the context it is handed as host_ctx.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "picomq/kit/plugin_options.hpp"
#include "picomq/sink_abi.h"

namespace picomq::runtime {

class WriteCall;
struct WriteOutcome;

// What host_ctx points to: the instance's identity, its validated options, and what it
// declared during open().
struct HostContext {
  std::string sink_key;
  std::string subscriptions;  // ABI 2.7: the [[topics]] blocks as JSON; empty: not offered
  kit::PluginOptions options;
  bool opening = false;
  uint32_t unread_fields = 0;  // PMQ_FIELD_* bits
  uint32_t max_in_flight = 0;  // set_max_in_flight(); 0: the descriptor's
  uint32_t plane = 0;          // set_plane(); 0: the best native plane
  mutable std::mutex counters_mutex;
  std::map<std::string, uint64_t, std::less<>> counters;  // count(), any thread
};

// The host API as an instance (or validate()) sees it: every function set, the config
// accessors over `ctx`'s options. `ctx` must outlive every call through it.
pmq_host_api make_host_api(HostContext* ctx);

}  // namespace picomq::runtime

// The host side of the opaque result type plugins fill through pmq_host_api.
struct pmq_write_result {
  picomq::runtime::WriteOutcome* outcome;
  picomq::runtime::WriteCall* call;  // set for batch and Arrow writes, which may complete later
};
