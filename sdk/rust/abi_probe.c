/* Compiled into the Rust SDK by build.rs: the header's own plane rules (pmq_sink_plane_spec is a
 * static inline, so it needs a C translation unit to be called from Rust) and the sizes and
 * offsets the layout test (tests/layout.rs) compares with the Rust repr(C) types. */
#include <stddef.h>
#include <string.h>

#include "picomq/sink_abi.h"

int picomq_rs_plane_spec(const pmq_sink_plugin *plugin, pmq_plane_spec *spec, char *errbuf, size_t errbuf_size) {
  return pmq_sink_plane_spec(plugin, spec, errbuf, errbuf_size);
}

#define SIZE(T) {#T, (long long)sizeof(T)},
#define FIELD(T, f) {#T "." #f, (long long)offsetof(T, f)},

static const struct {
  const char *name;
  long long value;
} kLayout[] = {
    SIZE(pmq_bytes) FIELD(pmq_bytes, data) FIELD(pmq_bytes, size) SIZE(pmq_header) FIELD(pmq_header, name)
        FIELD(pmq_header, value) SIZE(pmq_record) FIELD(pmq_record, offset) FIELD(pmq_record, timestamp_ms) FIELD(
            pmq_record, key) FIELD(pmq_record, headers) FIELD(pmq_record, header_count) FIELD(pmq_record, payload)
            FIELD(pmq_record, op) FIELD(pmq_record, key_json) SIZE(pmq_batch) FIELD(pmq_batch, struct_size) FIELD(
                pmq_batch, topic) FIELD(pmq_batch, partition) FIELD(pmq_batch, payload_format) FIELD(pmq_batch, schema)
                FIELD(pmq_batch, records) FIELD(pmq_batch, record_count) FIELD(pmq_batch, record_size) FIELD(
                    pmq_batch, block_index) FIELD(pmq_batch, writer_schemas) FIELD(pmq_batch, changes)
                    SIZE(pmq_arrow_batch) FIELD(pmq_arrow_batch, struct_size) FIELD(pmq_arrow_batch, topic) FIELD(
                        pmq_arrow_batch, partition) FIELD(pmq_arrow_batch, payload_format) FIELD(pmq_arrow_batch,
                                                                                                 schema)
                        FIELD(pmq_arrow_batch, arrow_schema) FIELD(pmq_arrow_batch, arrow_array) FIELD(
                            pmq_arrow_batch,
                            offsets) FIELD(pmq_arrow_batch,
                                           record_count) FIELD(pmq_arrow_batch,
                                                               block_index) SIZE(pmq_topic_partition)
                            FIELD(pmq_topic_partition,
                                  topic) FIELD(pmq_topic_partition,
                                               partition) SIZE(pmq_option) FIELD(pmq_option,
                                                                                 name) FIELD(pmq_option, type)
                                FIELD(pmq_option, flags) FIELD(pmq_option, default_json) FIELD(
                                    pmq_option,
                                    allowed) FIELD(pmq_option,
                                                   help) SIZE(pmq_host_api) FIELD(pmq_host_api, struct_size)
                                    FIELD(pmq_host_api, abi_version) FIELD(pmq_host_api, host_ctx) FIELD(
                                        pmq_host_api,
                                        log) FIELD(pmq_host_api, set_error)
                                        FIELD(pmq_host_api, reject_record) FIELD(pmq_host_api, config_has) FIELD(
                                            pmq_host_api,
                                            config_string) FIELD(pmq_host_api, config_int)
                                            FIELD(pmq_host_api, config_float) FIELD(pmq_host_api, config_bool) FIELD(
                                                pmq_host_api,
                                                config_list_size) FIELD(pmq_host_api, config_list_item)
                                                FIELD(pmq_host_api, config_json) FIELD(pmq_host_api, complete) FIELD(
                                                    pmq_host_api,
                                                    set_unread_fields) FIELD(pmq_host_api, set_max_in_flight)
                                                    FIELD(pmq_host_api, sink_key) FIELD(pmq_host_api, count) FIELD(
                                                        pmq_host_api,
                                                        release) FIELD(pmq_host_api,
                                                                       set_plane) FIELD(pmq_host_api, subscriptions)
                                                        SIZE(pmq_sink_plugin) FIELD(pmq_sink_plugin, struct_size) FIELD(
                                                            pmq_sink_plugin,
                                                            abi_version) FIELD(pmq_sink_plugin,
                                                                               name) FIELD(pmq_sink_plugin, version)
                                                            FIELD(pmq_sink_plugin,
                                                                  description) FIELD(pmq_sink_plugin, accepted_planes)
                                                                FIELD(pmq_sink_plugin, native_planes) FIELD(
                                                                    pmq_sink_plugin,
                                                                    options) FIELD(pmq_sink_plugin,
                                                                                   option_count) FIELD(pmq_sink_plugin,
                                                                                                       option_size)
                                                                    FIELD(pmq_sink_plugin, open) FIELD(
                                                                        pmq_sink_plugin,
                                                                        write_record) FIELD(pmq_sink_plugin, write_batch)
                                                                        FIELD(pmq_sink_plugin, write_arrow) FIELD(
                                                                            pmq_sink_plugin,
                                                                            close) FIELD(pmq_sink_plugin, max_in_flight)
                                                                            FIELD(pmq_sink_plugin, validate) FIELD(
                                                                                pmq_sink_plugin,
                                                                                flush) FIELD(pmq_sink_plugin,
                                                                                             partitions_assigned)
                                                                                FIELD(pmq_sink_plugin, partitions_revoked) FIELD(
                                                                                    pmq_sink_plugin,
                                                                                    stop) FIELD(pmq_sink_plugin, change_ops)
                                                                                    SIZE(pmq_plane_spec) FIELD(
                                                                                        pmq_plane_spec,
                                                                                        accepted_planes)
                                                                                        FIELD(pmq_plane_spec,
                                                                                              native_planes)
                                                                                            FIELD(pmq_plane_spec,
                                                                                                  best_plane)
                                                                                                SIZE(struct ArrowSchema) SIZE(
                                                                                                    struct ArrowArray){
                                                                                                    "pmq_write_status",
                                                                                                    (long long)sizeof(
                                                                                                        pmq_write_status)},
    {"PMQ_SINK_ABI_VERSION", (long long)PMQ_SINK_ABI_VERSION},
    {"PMQ_OP_APPEND", (long long)PMQ_OP_APPEND},
    {"PMQ_OP_UPSERT", (long long)PMQ_OP_UPSERT},
    {"PMQ_OP_DELETE", (long long)PMQ_OP_DELETE},
    {"PMQ_OP_TRUNCATE", (long long)PMQ_OP_TRUNCATE},
    {"PMQ_OP_PATCH", (long long)PMQ_OP_PATCH},
    {"PMQ_CHANGE_OPS_KEYED", (long long)PMQ_CHANGE_OPS_KEYED},
};

long long picomq_rs_layout(const char *name) {
  size_t i;
  for (i = 0; i < sizeof kLayout / sizeof kLayout[0]; ++i)
    if (strcmp(kLayout[i].name, name) == 0) return kLayout[i].value;
  return -1;
}
