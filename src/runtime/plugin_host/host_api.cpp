#include "runtime/plugin_host/host_api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>

#include "runtime/plugin_host/write_call.h"

namespace picomq::runtime {
namespace {

const kit::PluginOptions& options_of(void* host_ctx) { return static_cast<HostContext*>(host_ctx)->options; }

void host_log(void* host_ctx, int32_t level, const char* message) {
  const auto* ctx = static_cast<const HostContext*>(host_ctx);
  auto lvl = level <= PMQ_LOG_DEBUG  ? spdlog::level::debug
             : level == PMQ_LOG_INFO ? spdlog::level::info
             : level == PMQ_LOG_WARN ? spdlog::level::warn
                                     : spdlog::level::err;
  spdlog::log(lvl, "sink '{}': {}", ctx ? ctx->sink_key : "?", message ? message : "");
}

void host_set_error(pmq_write_result* result, const char* message) {
  if (result && message) result->outcome->message = message;
}

void host_reject_record(pmq_write_result* result, size_t index, const char* reason) {
  if (result) result->outcome->rejections.emplace_back(index, reason ? reason : "rejected by the sink");
}

void host_complete(pmq_write_result* result, pmq_write_status status) {
  if (!result || !result->call) {
    spdlog::error("a plugin completed a write that cannot be pending (rows plane); ignored");
    return;
  }
  result->call->complete(status);
}

void host_release(pmq_write_result* result) {
  if (!result || !result->call) {
    spdlog::error("a plugin released a write that cannot be pending (rows plane); ignored");
    return;
  }
  result->call->request_release();
}

int host_config_has(void* ctx, const char* name) { return name && options_of(ctx).has(name); }
const char* host_config_string(void* ctx, const char* name) { return name ? options_of(ctx).string(name) : nullptr; }
int64_t host_config_int(void* ctx, const char* name) { return name ? options_of(ctx).integer(name) : 0; }
double host_config_float(void* ctx, const char* name) { return name ? options_of(ctx).number(name) : 0; }
int host_config_bool(void* ctx, const char* name) { return name && options_of(ctx).boolean(name); }
size_t host_config_list_size(void* ctx, const char* name) { return name ? options_of(ctx).list_size(name) : 0; }
const char* host_config_list_item(void* ctx, const char* name, size_t index) {
  return name ? options_of(ctx).list_item(name, index) : nullptr;
}
const char* host_config_json(void* ctx, const char* name) { return name ? options_of(ctx).json(name) : nullptr; }

// The instance's context for a declaration, which only open() may make: the consumers read
// declarations without a lock, as they are fixed once open() returns. Null (and a warning) after.
HostContext* declaring(void* host_ctx, const char* call) {
  auto* ctx = static_cast<HostContext*>(host_ctx);
  if (ctx->opening) return ctx;
  spdlog::warn("sink '{}': {} called after open(); ignored", ctx->sink_key, call);
  return nullptr;
}

void host_set_unread_fields(void* host_ctx, uint32_t fields) {
  if (auto* ctx = declaring(host_ctx, "set_unread_fields")) ctx->unread_fields = fields;
}

void host_set_max_in_flight(void* host_ctx, uint32_t n) {
  if (auto* ctx = declaring(host_ctx, "set_max_in_flight")) ctx->max_in_flight = std::max<uint32_t>(n, 1);
}

// Checked against the native planes once open() returns (a plane that is not native fails it).
void host_set_plane(void* host_ctx, uint32_t plane) {
  if (auto* ctx = declaring(host_ctx, "set_plane")) ctx->plane = plane;
}

bool valid_counter_name(const char* name) {
  if (!name || !*name) return false;
  for (const char* c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

void host_count(void* host_ctx, const char* name, uint64_t n) {
  auto* ctx = static_cast<HostContext*>(host_ctx);
  if (!valid_counter_name(name)) {
    spdlog::warn("sink '{}': count() with an invalid counter name '{}' (want [a-z0-9_]+); ignored", ctx->sink_key,
                 name ? name : "(null)");
    return;
  }
  std::lock_guard lock(ctx->counters_mutex);
  auto it = ctx->counters.find(std::string_view(name));
  if (it == ctx->counters.end()) it = ctx->counters.emplace(name, 0).first;
  it->second += n;
}

}  // namespace

pmq_host_api make_host_api(HostContext* ctx) {
  pmq_host_api host{};
  host.struct_size = sizeof(pmq_host_api);
  host.abi_version = PMQ_SINK_ABI_VERSION;
  host.host_ctx = ctx;
  host.log = host_log;
  host.set_error = host_set_error;
  host.reject_record = host_reject_record;
  host.config_has = host_config_has;
  host.config_string = host_config_string;
  host.config_int = host_config_int;
  host.config_float = host_config_float;
  host.config_bool = host_config_bool;
  host.config_list_size = host_config_list_size;
  host.config_list_item = host_config_list_item;
  host.config_json = host_config_json;
  host.complete = host_complete;
  host.set_unread_fields = host_set_unread_fields;
  host.set_max_in_flight = host_set_max_in_flight;
  host.sink_key = ctx->sink_key.c_str();
  host.count = host_count;
  host.release = host_release;
  host.set_plane = host_set_plane;
  host.subscriptions = ctx->subscriptions.empty() ? nullptr : ctx->subscriptions.c_str();
  return host;
}

}  // namespace picomq::runtime
