/* The sink ABI seen from plain C: the header compiles as C11, and the layout of every struct
 * is pinned (x86-64 / LP64 sizes and offsets). A change here breaks every plugin already
 * built: it needs a new major ABI version, not an edit of these numbers. Only a struct growing
 * at its end is a new minor version (2.1 added pmq_host_api.set_unread_fields and set_max_in_flight; 2.2 added
 * block_index to the batches, pmq_host_api.sink_key and count, and the descriptor's validate,
 * flush and partition notifications; 2.3 added pmq_host_api.release; 2.4 pmq_batch.writer_schemas; 2.5
 * pmq_host_api.set_plane; 2.6 the descriptor's stop; 2.7 pmq_host_api.subscriptions; 2.8 change events:
 * pmq_record.op and key_json, pmq_batch.changes, the descriptor's change_ops; 2.9 the descriptor's takes_redrives, in
 * what was padding: the size stays). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "picomq/sink_abi.h"

#define PIN(expr, value) _Static_assert((expr) == (value), #expr " changed")

PIN(sizeof(pmq_bytes), 16);
PIN(sizeof(pmq_header), 32);
PIN(offsetof(pmq_record, offset), 0);
PIN(offsetof(pmq_record, timestamp_ms), 8);
PIN(offsetof(pmq_record, key), 16);
PIN(offsetof(pmq_record, headers), 32);
PIN(offsetof(pmq_record, header_count), 40);
PIN(offsetof(pmq_record, payload), 48);
PIN(offsetof(pmq_record, op), 64);
PIN(offsetof(pmq_record, key_json), 72);
PIN(sizeof(pmq_record), 88);
PIN(offsetof(pmq_batch, struct_size), 0);
PIN(offsetof(pmq_batch, topic), 8);
PIN(offsetof(pmq_batch, partition), 16);
PIN(offsetof(pmq_batch, payload_format), 20);
PIN(offsetof(pmq_batch, schema), 24);
PIN(offsetof(pmq_batch, records), 32);
PIN(offsetof(pmq_batch, record_count), 40);
PIN(offsetof(pmq_batch, record_size), 48);
PIN(offsetof(pmq_batch, block_index), 56);
PIN(offsetof(pmq_batch, writer_schemas), 64);
PIN(offsetof(pmq_batch, changes), 72);
PIN(sizeof(pmq_batch), 80);
PIN(offsetof(pmq_arrow_batch, arrow_schema), 32);
PIN(offsetof(pmq_arrow_batch, arrow_array), 40);
PIN(offsetof(pmq_arrow_batch, offsets), 48);
PIN(offsetof(pmq_arrow_batch, record_count), 56);
PIN(offsetof(pmq_arrow_batch, block_index), 64);
PIN(sizeof(pmq_arrow_batch), 72);
PIN(offsetof(pmq_topic_partition, partition), 8);
PIN(sizeof(pmq_topic_partition), 16);
PIN(sizeof(pmq_option), 40);
PIN(offsetof(pmq_option, default_json), 16);
PIN(offsetof(pmq_host_api, log), 24);
PIN(offsetof(pmq_host_api, reject_record), 40);
PIN(offsetof(pmq_host_api, config_has), 48);
PIN(offsetof(pmq_host_api, config_json), 104);
PIN(offsetof(pmq_host_api, complete), 112);
PIN(offsetof(pmq_host_api, set_unread_fields), 120);
PIN(offsetof(pmq_host_api, set_max_in_flight), 128);
PIN(offsetof(pmq_host_api, sink_key), 136);
PIN(offsetof(pmq_host_api, count), 144);
PIN(offsetof(pmq_host_api, release), 152);
PIN(offsetof(pmq_host_api, set_plane), 160);
PIN(offsetof(pmq_host_api, subscriptions), 168);
PIN(sizeof(pmq_host_api), 176);
PIN(offsetof(pmq_sink_plugin, abi_version), 8);
PIN(offsetof(pmq_sink_plugin, name), 16);
PIN(offsetof(pmq_sink_plugin, accepted_planes), 40);
PIN(offsetof(pmq_sink_plugin, native_planes), 44);
PIN(offsetof(pmq_sink_plugin, options), 48);
PIN(offsetof(pmq_sink_plugin, open), 72);
PIN(offsetof(pmq_sink_plugin, write_record), 80);
PIN(offsetof(pmq_sink_plugin, write_batch), 88);
PIN(offsetof(pmq_sink_plugin, write_arrow), 96);
PIN(offsetof(pmq_sink_plugin, close), 104);
PIN(offsetof(pmq_sink_plugin, max_in_flight), 112);
PIN(offsetof(pmq_sink_plugin, validate), 120);
PIN(offsetof(pmq_sink_plugin, flush), 128);
PIN(offsetof(pmq_sink_plugin, partitions_assigned), 136);
PIN(offsetof(pmq_sink_plugin, partitions_revoked), 144);
PIN(offsetof(pmq_sink_plugin, stop), 152);
PIN(offsetof(pmq_sink_plugin, change_ops), 160);
PIN(offsetof(pmq_sink_plugin, takes_redrives), 164);
PIN(sizeof(pmq_sink_plugin), 168);
PIN(sizeof(struct ArrowSchema), 72);
PIN(sizeof(struct ArrowArray), 80);
PIN(PMQ_SINK_ABI_VERSION, 0x20009u);

static pmq_write_status write_record(void *instance, const pmq_batch *batch, size_t index, pmq_write_result *result) {
  (void)instance, (void)batch, (void)index, (void)result;
  return PMQ_WRITE_OK;
}

int main(void) {
  /* The plane contract works from C too, and explains a refusal. */
  pmq_sink_plugin d = {0};
  pmq_plane_spec spec;
  char reason[256];
  d.write_record = write_record;
  if (!pmq_sink_plane_spec(&d, &spec, reason, sizeof reason) || spec.best_plane != PMQ_PLANE_ROWS) {
    fprintf(stderr, "a rows sink was refused: %s\n", reason);
    return 1;
  }
  d.native_planes = PMQ_PLANE_BATCHES;
  if (pmq_sink_plane_spec(&d, &spec, reason, sizeof reason) || !strstr(reason, "does not accept it")) {
    fprintf(stderr, "a native plane that is not accepted was not refused\n");
    return 1;
  }
  {
    /* A 2.4 batch names each record's writer schema; a batch from an older host (a smaller
     * struct_size) has none, whatever lies beyond its end. */
    const char *schemas[2] = {"{\"type\":\"long\"}", NULL};
    pmq_batch b = {0};
    b.struct_size = sizeof b;
    b.writer_schemas = schemas;
    if (pmq_batch_writer_schema(&b, 0) != schemas[0] || pmq_batch_writer_schema(&b, 1) != NULL) {
      fprintf(stderr, "pmq_batch_writer_schema does not read writer_schemas\n");
      return 1;
    }
    b.struct_size = offsetof(pmq_batch, writer_schemas);
    if (pmq_batch_writer_schema(&b, 0) != NULL) {
      fprintf(stderr, "pmq_batch_writer_schema read beyond an older host's batch\n");
      return 1;
    }
  }
  {
    /* 2.8: a record's op and decoded key, read only within what the host's batch knows. */
    pmq_record r[1] = {{0}};
    pmq_batch b = {0};
    r[0].op = PMQ_OP_DELETE;
    r[0].key_json.data = (const uint8_t *)"{\"id\":1}";
    r[0].key_json.size = 8;
    b.struct_size = sizeof b;
    b.records = r;
    b.record_count = 1;
    b.record_size = sizeof r[0];
    b.changes = 1;
    if (!pmq_batch_has_changes(&b) || pmq_record_op(&b, &r[0]) != PMQ_OP_DELETE ||
        pmq_record_key_json(&b, &r[0]).size != 8) {
      fprintf(stderr, "the 2.8 accessors do not read op, key_json, changes\n");
      return 1;
    }
    b.struct_size = offsetof(pmq_batch, changes);
    b.record_size = offsetof(pmq_record, op);
    if (pmq_batch_has_changes(&b) || pmq_record_op(&b, &r[0]) != PMQ_OP_APPEND ||
        pmq_record_key_json(&b, &r[0]).data != NULL) {
      fprintf(stderr, "the 2.8 accessors read beyond an older host's batch or records\n");
      return 1;
    }
  }
  puts("sink ABI layout and plane contract: ok");
  return 0;
}
