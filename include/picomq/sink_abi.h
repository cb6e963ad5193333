/*
 * picomq-connect sink ABI — the only contract between the runtime and a sink plugin.
 *
 * A plugin is a shared library that exports one C symbol, PMQ_SINK_ENTRY_SYMBOL:
 *
 *     const pmq_sink_plugin *picomq_sink_plugin_entry(uint32_t host_abi_version);
 *
 * It returns a static descriptor that states the ABI version it was built against. The host
 * refuses a plugin whose major version differs from its own, or whose minor version is newer.
 *
 * Rules that keep this ABI stable:
 *  - Structs only ever grow at the end; each starts with (or is accompanied by) its size, so
 *    either side can tell which fields the other knows about.
 *  - Memory handed to a plugin (batches, records, strings) is valid for the duration of the call
 *    only. Anything the plugin reports back (error messages, rejections) goes through host
 *    callbacks that copy it, so no ownership ever crosses the boundary.
 *  - No C++ exception may cross it: a C++ plugin catches everything at the boundary.
 *  - Calls into one plugin instance are serialised by the host (never two at once).
 */
#ifndef PICOMQ_SINK_ABI_H
#define PICOMQ_SINK_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMQ_SINK_ABI_VERSION_MAJOR 1
#define PMQ_SINK_ABI_VERSION_MINOR 0
#define PMQ_SINK_ABI_VERSION ((uint32_t)((PMQ_SINK_ABI_VERSION_MAJOR << 16) | PMQ_SINK_ABI_VERSION_MINOR))
#define PMQ_SINK_ABI_MAJOR(v) ((uint32_t)(v) >> 16)
#define PMQ_SINK_ABI_MINOR(v) ((uint32_t)(v)&0xffffu)

#define PMQ_SINK_ENTRY_SYMBOL "picomq_sink_plugin_entry"

#if defined(_WIN32)
#define PMQ_SINK_EXPORT __declspec(dllexport)
#else
#define PMQ_SINK_EXPORT __attribute__((visibility("default")))
#endif

/* A byte range. data == NULL means "absent" (e.g. a record without a key); size may be 0. */
typedef struct pmq_bytes {
  const uint8_t *data;
  size_t size;
} pmq_bytes;

typedef struct pmq_header {
  pmq_bytes name;  /* UTF-8 as sent by the producer (not validated) */
  pmq_bytes value; /* data == NULL for a null header value */
} pmq_header;

/* What the payload of every record in a batch is, after decoding. */
typedef enum pmq_payload_format {
  PMQ_PAYLOAD_JSON = 0, /* one complete, validated JSON value (UTF-8) */
  PMQ_PAYLOAD_TEXT = 1, /* validated UTF-8 text */
  PMQ_PAYLOAD_RAW = 2   /* bytes exactly as on the broker */
} pmq_payload_format;

typedef struct pmq_record {
  int64_t offset;
  int64_t timestamp_ms; /* record timestamp, epoch milliseconds; -1 when the broker has none */
  pmq_bytes key;        /* data == NULL when the record has no key */
  const pmq_header *headers;
  size_t header_count;
  pmq_bytes payload; /* decoded payload in the batch's payload_format; data == NULL: tombstone */
} pmq_record;

/* One batch: records from one topic-partition, in offset order. */
typedef struct pmq_batch {
  size_t struct_size; /* sizeof(pmq_batch) as the host knows it */
  const char *topic;  /* NUL-terminated */
  int32_t partition;
  int32_t payload_format; /* pmq_payload_format */
  const char *schema;     /* the definition's schema name: "json", "raw", "text", ... */
  const pmq_record *records;
  size_t record_count;
  size_t record_size; /* stride of records[]: index with ((const char*)records + i*record_size) */
} pmq_batch;

/* The outcome of a write; the host decides what happens to the offset from it. */
typedef enum pmq_write_status {
  PMQ_WRITE_OK = 0,        /* every record is durably written: the offset moves past the batch */
  PMQ_WRITE_RETRY = 1,     /* nothing was written and the same batch may be retried */
  PMQ_WRITE_PARTIAL = 2,   /* possibly partly written; a retry relies on the sink being idempotent */
  PMQ_WRITE_FATAL = 3,     /* permanent failure: retrying cannot help; the sink stops in Error */
  PMQ_WRITE_REJECTED = 4   /* the records named through reject_record were refused, the rest written */
} pmq_write_status;

/* Opaque, owned by the host; filled through the host API during a write call. */
typedef struct pmq_write_result pmq_write_result;

typedef enum pmq_log_level {
  PMQ_LOG_DEBUG = 0,
  PMQ_LOG_INFO = 1,
  PMQ_LOG_WARN = 2,
  PMQ_LOG_ERROR = 3
} pmq_log_level;

/* Services the host offers a plugin. Valid from open() until close() returns. */
typedef struct pmq_host_api {
  size_t struct_size;
  uint32_t abi_version;
  void *host_ctx; /* pass back as the first argument of log */
  void (*log)(void *host_ctx, int32_t level, const char *message);
  /* Attach a human-readable reason to a failed write. The host copies the string. */
  void (*set_error)(pmq_write_result *result, const char *message);
  /* Name one record (by its index in the batch) that the destination refused, and why. */
  void (*reject_record)(pmq_write_result *result, size_t record_index, const char *reason);
} pmq_host_api;

typedef struct pmq_sink_plugin {
  size_t struct_size;   /* sizeof(pmq_sink_plugin) as the plugin knows it */
  uint32_t abi_version; /* PMQ_SINK_ABI_VERSION the plugin was built against */
  const char *name;     /* e.g. "stdout" */
  const char *version;  /* the plugin's own version, e.g. "0.1.0" */

  /* Opens one instance. config_json is the definition's [plugin_config] as a JSON object.
   * Returns NULL on failure with a message in errbuf. */
  void *(*open)(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size);

  /* Writes one batch. Must not return PMQ_WRITE_OK unless every record is written. */
  pmq_write_status (*write_batch)(void *instance, const pmq_batch *batch, pmq_write_result *result);

  /* Flushes and releases everything the instance holds. */
  void (*close)(void *instance);
} pmq_sink_plugin;

typedef const pmq_sink_plugin *(*pmq_sink_entry_fn)(uint32_t host_abi_version);

/* Convenience accessor for a record of a batch, honouring the stride. */
static inline const pmq_record *pmq_batch_record(const pmq_batch *batch, size_t index) {
  return (const pmq_record *)((const char *)batch->records + index * batch->record_size);
}

#ifdef __cplusplus
}
#endif

#endif /* PICOMQ_SINK_ABI_H */
