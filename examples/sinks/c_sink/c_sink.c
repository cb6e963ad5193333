/* Example: a sink in plain C, straight on the ABI (no SDK, no C++). Native batches: each batch
 * appends "topic:partition:offset<TAB>payload-bytes" lines to a file with one fwrite + fflush.
 * Options come typed from the host (config_string / config_bool); the runtime validated them
 * against kOptions before open(). Build: cc -shared -fPIC $(pkg-config --cflags picomq-sdk). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picomq/sink_abi.h"

typedef struct c_sink {
  const pmq_host_api *host;
  FILE *file;
  int with_payload;
  unsigned long long records;
} c_sink;

static const pmq_option kOptions[] = {
    {"path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, NULL, NULL, "The file to append to."},
    {"with_payload", PMQ_OPTION_BOOL, 0, "true", NULL, "Write each payload's size after its id."},
};

static void *c_open(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size) {
  const char *path = host->config_string(host->host_ctx, "path");
  c_sink *sink;
  (void)config_json;
  sink = calloc(1, sizeof *sink);
  if (!sink) {
    snprintf(errbuf, errbuf_size, "out of memory");
    return NULL;
  }
  sink->host = host;
  sink->with_payload = host->config_bool(host->host_ctx, "with_payload");
  sink->file = fopen(path, "a");
  if (!sink->file) {
    snprintf(errbuf, errbuf_size, "cannot open %s: %s", path, strerror(errno));
    free(sink);
    return NULL;
  }
  return sink;
}

static pmq_write_status c_write_batch(void *instance, const pmq_batch *batch, pmq_write_result *result) {
  c_sink *sink = instance;
  size_t i;
  for (i = 0; i < batch->record_count; ++i) {
    const pmq_record *r = pmq_batch_record(batch, i);
    if (sink->with_payload)
      fprintf(sink->file, "%s:%d:%lld\t%zu\n", batch->topic, batch->partition, (long long)r->offset,
              r->payload.data ? r->payload.size : (size_t)0);
    else fprintf(sink->file, "%s:%d:%lld\n", batch->topic, batch->partition, (long long)r->offset);
  }
  if (fflush(sink->file) != 0) {
    sink->host->set_error(result, strerror(errno));
    clearerr(sink->file);
    return PMQ_WRITE_PARTIAL; /* some lines may be in the file */
  }
  sink->records += batch->record_count;
  /* ABI 2.2 counter, offered only by a host whose pmq_host_api is that large. */
  if (sink->host->struct_size >= offsetof(pmq_host_api, count) + sizeof sink->host->count && sink->host->count)
    sink->host->count(sink->host->host_ctx, "lines_written", batch->record_count);
  return PMQ_WRITE_OK;
}

/* ABI 2.2: cross-option checks before open() and in `--check`; pure, no file is touched. */
static int c_validate(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size) {
  const char *path = host->config_string(host->host_ctx, "path");
  (void)config_json;
  if (path && path[0] == '\0') {
    snprintf(errbuf, errbuf_size, "path: must not be empty");
    return 0;
  }
  return 1;
}

static void c_close(void *instance) {
  c_sink *sink = instance;
  char line[128];
  snprintf(line, sizeof line, "c sink closing after %llu records", sink->records);
  sink->host->log(sink->host->host_ctx, PMQ_LOG_INFO, line);
  fclose(sink->file);
  free(sink);
}

static const pmq_sink_plugin kPlugin = {
    sizeof(pmq_sink_plugin),
    PMQ_SINK_ABI_VERSION,
    "example_c",
    "0.1.0",
    "Appends topic:partition:offset lines to a file (a sink in plain C).",
    PMQ_PLANE_ROWS | PMQ_PLANE_BATCHES,
    PMQ_PLANE_BATCHES,
    kOptions,
    sizeof kOptions / sizeof kOptions[0],
    sizeof(pmq_option),
    c_open,
    NULL, /* rows: accepted (every sink accepts rows) but not native, so not implemented */
    c_write_batch,
    NULL,
    c_close,
    1, /* max_in_flight: writes complete before they return */
    c_validate,
    NULL, /* flush: every write is flushed before it returns */
    NULL, /* partitions_assigned: no per-partition state */
    NULL, /* partitions_revoked */
    NULL, /* stop: every wait ends within the write */
    0,    /* change_ops: plain records only (a block with `changes` is refused at --check) */
    1,    /* takes_redrives: a redriven dead letter is one more line (at least once, as a replay) */
};

PMQ_SINK_EXPORT const pmq_sink_plugin *picomq_sink_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &kPlugin;
}
