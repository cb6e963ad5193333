/* A sink built against the frozen ABI 2.1 header (include/ beside this file): it appends
 * "topic:partition:offset" lines to `log_path`, one fwrite per batch. It is what a plugin
 * compiled before ABI 2.2 looks like to a newer runtime: a shorter descriptor (no validate,
 * flush or partition notifications) and batches it reads with its own, smaller struct sizes. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picomq/sink_abi.h"

#if PMQ_SINK_ABI_VERSION_MINOR != 1
#error "this fixture must be built against the ABI 2.1 header"
#endif

typedef struct abi21_sink {
  const pmq_host_api *host;
  FILE *file;
} abi21_sink;

static const pmq_option kOptions[] = {
    {"log_path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, NULL, NULL, "The file to append to."},
};

static void *abi21_open(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size) {
  abi21_sink *sink = calloc(1, sizeof *sink);
  (void)config_json;
  if (!sink) return NULL;
  sink->host = host;
  sink->file = fopen(host->config_string(host->host_ctx, "log_path"), "a");
  if (!sink->file) {
    snprintf(errbuf, errbuf_size, "cannot open log_path: %s", strerror(errno));
    free(sink);
    return NULL;
  }
  if (host->struct_size >= offsetof(pmq_host_api, set_unread_fields) + sizeof host->set_unread_fields)
    host->set_unread_fields(host->host_ctx, PMQ_FIELD_HEADERS);
  return sink;
}

static pmq_write_status abi21_write_batch(void *instance, const pmq_batch *batch, pmq_write_result *result) {
  abi21_sink *sink = instance;
  size_t i;
  for (i = 0; i < batch->record_count; ++i)
    fprintf(sink->file, "%s:%d:%lld\n", batch->topic, batch->partition, (long long)pmq_batch_record(batch, i)->offset);
  if (fflush(sink->file) != 0) {
    sink->host->set_error(result, strerror(errno));
    return PMQ_WRITE_PARTIAL;
  }
  return PMQ_WRITE_OK;
}

static void abi21_close(void *instance) {
  abi21_sink *sink = instance;
  fclose(sink->file);
  free(sink);
}

static const pmq_sink_plugin kPlugin = {
    sizeof(pmq_sink_plugin),
    PMQ_SINK_ABI_VERSION,
    "abi21",
    "2.1.0",
    "A plugin built against ABI 2.1.",
    PMQ_PLANE_ROWS | PMQ_PLANE_BATCHES,
    PMQ_PLANE_BATCHES,
    kOptions,
    sizeof kOptions / sizeof kOptions[0],
    sizeof(pmq_option),
    abi21_open,
    NULL,
    abi21_write_batch,
    NULL,
    abi21_close,
    1,
};

PMQ_SINK_EXPORT const pmq_sink_plugin *picomq_sink_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &kPlugin;
}
