/*
 * picomq-connect sink ABI — the only contract between the runtime and a sink plugin.
 *
 * A plugin is a shared library that exports one C symbol, PMQ_SINK_ENTRY_SYMBOL:
 *
 *     const pmq_sink_plugin *picomq_sink_plugin_entry(uint32_t host_abi_version);
 *
 * It returns a static descriptor that states the ABI version it was built against. The host
 * refuses a plugin whose major version differs from its own, or whose minor version is newer.
 * The descriptor also says what the plugin is: its name and version, the data planes it accepts
 * and handles natively, and the options its [plugin_config] takes (validated by the host before
 * open(), and the source of each sink's option docs).
 *
 * Data planes: a batch reaches a plugin on the best plane it declares native:
 *   PMQ_PLANE_ARROW    write_arrow(): one Arrow record batch (C Data Interface) per call;
 *   PMQ_PLANE_BATCHES  write_batch(): one pmq_batch of records per call;
 *   PMQ_PLANE_ROWS     write_record(): one record per call.
 * Every sink accepts rows. A native plane must be accepted and implemented; the host refuses a
 * descriptor that breaks this (see pmq_sink_plane_spec() at the end, shared by host and SDK).
 *
 * Rules that keep this ABI stable:
 *  - Structs only ever grow at the end; each starts with (or is accompanied by) its size, so
 *    either side can tell which fields the other knows about.
 *  - Memory handed to a plugin (batches, records, strings) is valid for the duration of the call
 *    only. Anything the plugin reports back (error messages, rejections) goes through host
 *    callbacks that copy it. The only ownership that can outlive a call travels with a release
 *    callback: the Arrow structs of write_arrow(), which a plugin may move out and keep.
 *  - No C++ exception may cross it: a C++ plugin catches everything at the boundary.
 *  - Calls into one plugin instance are serialised by the host (never two at once): open,
 *    write_*, flush, partitions_assigned / partitions_revoked and close. The host may make them
 *    from different threads, one at a time. The one exception is stop() (ABI 2.6), which exists
 *    to reach a call in progress.
 *
 * Lifecycle of an instance (ABI 2.2):
 *   validate? -> open -> { partitions_assigned | write_* | flush | partitions_revoked }* -> stop? -> flush -> close
 */
#ifndef PICOMQ_SINK_ABI_H
#define PICOMQ_SINK_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "picomq/arrow_c_data.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PMQ_SINK_ABI_VERSION_MAJOR 2
#define PMQ_SINK_ABI_VERSION_MINOR 9
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

/* Since ABI 2.8: what a record asks of the destination (pmq_record.op). Plain records (every
 * batch of a block without `changes`) are PMQ_OP_APPEND; a block with `changes` (docs/changes.md)
 * turns each record into a change of one row, named by its key. A sink declares the operations
 * it applies in pmq_sink_plugin.change_ops; the host hands it no other. */
typedef enum pmq_change_op {
  PMQ_OP_APPEND = 0,   /* a record, not a change: write it as the sink writes records */
  PMQ_OP_UPSERT = 1,   /* payload: the row (a JSON object); key_json: its key. Insert or replace */
  PMQ_OP_DELETE = 2,   /* payload absent; key_json: the key of the row to delete (absent: no-op) */
  PMQ_OP_TRUNCATE = 3, /* every row of the record's destination goes; payload and key_json absent */
  PMQ_OP_PATCH = 4     /* payload: the columns it changes (a JSON object), key_json: its key; the
                          columns it does not name keep their value (Debezium's unchanged TOAST
                          values); a row that is not there is inserted with what it names */
} pmq_change_op;
#define PMQ_CHANGE_OP_BIT(op) ((uint32_t)1u << (op))
/* The operations a sink must apply to be handed changes at all. */
#define PMQ_CHANGE_OPS_KEYED (PMQ_CHANGE_OP_BIT(PMQ_OP_UPSERT) | PMQ_CHANGE_OP_BIT(PMQ_OP_DELETE))

typedef struct pmq_record {
  int64_t offset;
  int64_t timestamp_ms; /* record timestamp, epoch milliseconds; -1 when the broker has none */
  pmq_bytes key;        /* data == NULL when the record has no key */
  const pmq_header *headers;
  size_t header_count;
  pmq_bytes payload; /* decoded payload in the batch's payload_format; data == NULL: tombstone */
  /* Since ABI 2.8: read them through pmq_record_op() / pmq_record_key_json(), which check the
   * batch's record_size (a host of 2.7 or older hands shorter records). */
  int32_t op;         /* pmq_change_op; PMQ_OP_APPEND unless the batch has changes */
  pmq_bytes key_json; /* the record key decoded per the block's [topics.key] as one JSON value; under
                         `changes` the row's key as a JSON object ({"id": 7}); data NULL: none */
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
  /* Since ABI 2.2 (check struct_size): the [[topics]] block (0-based, in definition order) the
   * batch was consumed by. One instance serves every block of a sink. */
  uint32_t block_index;
  /* Since ABI 2.4 (check struct_size; pmq_batch_writer_schema() does): NULL, or one entry per
   * record: the writer schema record i's payload was decoded by, as the schema's JSON text, or
   * NULL for a record that has none (a tombstone). Set when the block's schema is "avro" (the
   * definition's avro_schema_json / _path, or each record's schema from the registry, so it can
   * change within a batch: compare the texts, not only the pointers). The payload is the JSON
   * the decoder made of the datum (docs/decoders.md), before any transform rewrote it. Valid for
   * the call, as the records. */
  const char *const *writer_schemas;
  /* Since ABI 2.8 (check struct_size; pmq_batch_has_changes() does): 1 when the block has
   * `changes` and every record's op is a change (UPSERT / DELETE / TRUNCATE), else 0. */
  uint32_t changes;
} pmq_batch;

/* One batch as an Arrow record batch: a struct array with one row per record, in offset order
 * (columns: docs/arrow.md). arrow_schema/arrow_array are valid for the call; the host releases
 * them afterwards unless the plugin moved them out (copied the struct and set the original's
 * release to NULL, as the C Data Interface specifies), in which case the plugin releases them. */
typedef struct pmq_arrow_batch {
  size_t struct_size; /* sizeof(pmq_arrow_batch) as the host knows it */
  const char *topic;
  int32_t partition;
  int32_t payload_format; /* pmq_payload_format the records were decoded to */
  const char *schema;
  struct ArrowSchema *arrow_schema;
  struct ArrowArray *arrow_array;
  const int64_t *offsets; /* offsets[i]: the Kafka offset of row i */
  size_t record_count;
  uint32_t block_index; /* since ABI 2.2 (check struct_size): as pmq_batch.block_index */
} pmq_arrow_batch;

/* Since ABI 2.2: one partition of a topic, as the partition notifications name them. */
typedef struct pmq_topic_partition {
  const char *topic; /* NUL-terminated, valid for the call */
  int32_t partition;
} pmq_topic_partition;

/* Data planes, as bits of pmq_sink_plugin.accepted_planes / native_planes. */
typedef enum pmq_data_plane {
  PMQ_PLANE_ROWS = 1u << 0,
  PMQ_PLANE_BATCHES = 1u << 1,
  PMQ_PLANE_ARROW = 1u << 2
} pmq_data_plane;
#define PMQ_PLANES_ALL ((uint32_t)(PMQ_PLANE_ROWS | PMQ_PLANE_BATCHES | PMQ_PLANE_ARROW))

/* The type of a [plugin_config] option. The host checks values against it and hands the
 * plugin normalised values (durations in milliseconds, byte sizes in bytes). */
typedef enum pmq_option_type {
  PMQ_OPTION_STRING = 0,      /* TOML string */
  PMQ_OPTION_INT = 1,         /* TOML integer */
  PMQ_OPTION_FLOAT = 2,       /* TOML float or integer */
  PMQ_OPTION_BOOL = 3,        /* TOML boolean */
  PMQ_OPTION_DURATION = 4,    /* "250ms", "5s", "2m", "1h" or integer milliseconds -> milliseconds */
  PMQ_OPTION_BYTE_SIZE = 5,   /* "64KiB", "8MB" or integer bytes -> bytes */
  PMQ_OPTION_STRING_LIST = 6, /* array of strings */
  PMQ_OPTION_TABLE = 7        /* any TOML table or array: the plugin reads it as JSON */
} pmq_option_type;

#define PMQ_OPTION_REQUIRED 1u /* must be set (a default makes no sense) */
#define PMQ_OPTION_SECRET 2u   /* never logged or shown (connection strings, tokens) */

typedef struct pmq_option {
  const char *name;
  int32_t type;             /* pmq_option_type */
  uint32_t flags;           /* PMQ_OPTION_REQUIRED | PMQ_OPTION_SECRET */
  const char *default_json; /* the default as a JSON value, e.g. "true", "\"stdout\"", "100"; NULL: none */
  const char *allowed;      /* for strings: the allowed values separated by '|', e.g. "stdout|stderr"; NULL: any */
  const char *help;         /* one or two sentences for the docs */
} pmq_option;

/* The outcome of a write; the host decides what happens to the offset from it. */
typedef enum pmq_write_status {
  PMQ_WRITE_OK = 0,       /* every record is durably written: the offset moves past the batch */
  PMQ_WRITE_RETRY = 1,    /* nothing was written and the same batch may be retried */
  PMQ_WRITE_PARTIAL = 2,  /* possibly partly written; a retry relies on the sink being idempotent */
  PMQ_WRITE_FATAL = 3,    /* permanent failure: retrying cannot help; the sink stops in Error */
  PMQ_WRITE_REJECTED = 4, /* the records named through reject_record were refused, the rest written */
  PMQ_WRITE_PENDING = 5   /* started; the outcome follows through host->complete() (see max_in_flight) */
} pmq_write_status;

/* Record fields an instance can declare it never reads (set_unread_fields), so the host can
 * save the work of filling them. */
#define PMQ_FIELD_HEADERS ((uint32_t)1u << 0) /* then every record has header_count 0 */

/* Opaque, owned by the host; filled through the host API during a write call. */
typedef struct pmq_write_result pmq_write_result;

typedef enum pmq_log_level { PMQ_LOG_DEBUG = 0, PMQ_LOG_INFO = 1, PMQ_LOG_WARN = 2, PMQ_LOG_ERROR = 3 } pmq_log_level;

/* Services the host offers a plugin. Valid from open() until close() returns.
 *
 * Threads: log, set_error, reject_record, complete and count may be called from any thread
 * (a sink's own I/O threads included); set_error / reject_record only for a result whose write
 * is not completed yet. config_* may be called from any thread (the values never change).
 * set_unread_fields and set_max_in_flight only on the thread running open(), during open(). */
typedef struct pmq_host_api {
  size_t struct_size;
  uint32_t abi_version;
  void *host_ctx; /* pass back as the first argument of log */
  void (*log)(void *host_ctx, int32_t level, const char *message);
  /* Attach a human-readable reason to a failed write. The host copies the string. */
  void (*set_error)(pmq_write_result *result, const char *message);
  /* Name one record (by its index in the batch) that the destination refused, and why. */
  void (*reject_record)(pmq_write_result *result, size_t record_index, const char *reason);

  /* The validated [plugin_config] (defaults filled in) of this instance. Strings returned stay
   * valid until close() returns. Asking for an option the descriptor does not declare, or with
   * the wrong type, returns the "unset" value (0 / NULL). */
  int (*config_has)(void *host_ctx, const char *name);            /* set, or has a default */
  const char *(*config_string)(void *host_ctx, const char *name); /* STRING; NULL when unset */
  int64_t (*config_int)(void *host_ctx, const char *name);        /* INT, DURATION (ms), BYTE_SIZE */
  double (*config_float)(void *host_ctx, const char *name);       /* FLOAT (or INT) */
  int (*config_bool)(void *host_ctx, const char *name);           /* BOOL: 0 or 1 */
  size_t (*config_list_size)(void *host_ctx, const char *name);   /* STRING_LIST */
  const char *(*config_list_item)(void *host_ctx, const char *name, size_t index);
  const char *(*config_json)(void *host_ctx, const char *name); /* any option, as JSON text */

  /* Completes a write that returned PMQ_WRITE_PENDING, exactly once, from any thread, with
   * any status but PENDING; set_error / reject_record on the same result go before it. Until
   * then everything the write was handed (batch, records, Arrow structs) stays valid. */
  void (*complete)(pmq_write_result *result, pmq_write_status status);

  /* Since ABI 2.1 (check struct_size). Called during open() only: this instance never reads the
   * record fields in `fields` (PMQ_FIELD_* bits), so the host may leave them empty. Parsing
   * headers is a measurable share of the host's per-record work, and most destinations never
   * store them. Without the call every field is filled. */
  void (*set_unread_fields)(void *host_ctx, uint32_t fields);

  /* Since ABI 2.1 (check struct_size). Called during open() only: this instance keeps at most
   * `n` writes of a [[topics]] block pending at once, 1 up to the descriptor's max_in_flight
   * (a larger value is capped, 0 is taken as 1). For a sink whose configured mode needs its
   * writes strictly one after the other (e.g. last-write-wins upserts). */
  void (*set_max_in_flight)(void *host_ctx, uint32_t n);

  /* Since ABI 2.2 (check struct_size). The definition's key of this sink: a stable prefix for
   * object keys, load labels and transaction ids. Valid until close() returns. */
  const char *sink_key;
  /* Since ABI 2.2. Adds n to this instance's counter `name` (created at 0 on first use; names
   * are [a-z0-9_]+, e.g. "requests", "bytes_sent", "server_rejections"). The host shows them in
   * the status and exposes them as metrics. Any thread. */
  void (*count)(void *host_ctx, const char *name, uint64_t n);

  /* Since ABI 2.3 (check struct_size). For a write that returned PMQ_WRITE_PENDING: the plugin
   * holds what it needs of the batch (it encoded or copied the records), so the host may free
   * the batch now rather than at the completion. A sink that gathers many batches into one
   * large object or file then holds its own bytes only, not every pending batch's records, and
   * the runtime's buffer limit counts the batch as gone. Call it at most once, after any
   * reject_record() of the write and before complete(), from any thread; from then on the batch
   * (records, Arrow structs) must not be read.
   * The host cannot send a released batch again: when its write then completes with RETRY or
   * PARTIAL (or rejects records after the release), the host reads the records again from the
   * broker, from the batch's first offset, after the retry policy's back-off (a rewind). Every
   * later write of that partition is discarded whatever its outcome, and the records come
   * again in new batches, possibly cut at other offsets. The host may also keep the batch
   * (e.g. it holds records bound for the bad-record policy): then a failed write is resent as
   * usual. A sink must take either in stride, as it takes any replay. */
  void (*release)(pmq_write_result *result);

  /* Since ABI 2.5 (check struct_size). Called during open() only: this instance takes its
   * batches on `plane` (one PMQ_PLANE_* bit, a native plane of the descriptor) instead of the
   * best native one. For a plugin whose plane depends on its configuration: it declares every
   * plane it may use native and names the one this instance uses (the Python sink: its class's
   * plane, so that Arrow batches are exported by the host, beside decoding, not by the plugin).
   * A plane that is not native fails the open. */
  void (*set_plane)(void *host_ctx, uint32_t plane);

  /* Since ABI 2.7 (check struct_size). The definition's [[topics]] blocks, in definition order,
   * as a JSON array: [{"topics": ["a", "b"], "pattern": "^orders\\..*"}, ...] ("pattern" null when
   * the block has none; the pattern anchored as the runtime matches it). What the instance can
   * be handed: a sink whose destinations are named by a template checks that the template tells
   * apart every topic it may see (validate() and open(); valid until close() returns). */
  const char *subscriptions;
} pmq_host_api;

typedef struct pmq_sink_plugin {
  size_t struct_size;      /* sizeof(pmq_sink_plugin) as the plugin knows it */
  uint32_t abi_version;    /* PMQ_SINK_ABI_VERSION the plugin was built against */
  const char *name;        /* e.g. "stdout" */
  const char *version;     /* the plugin's own version, e.g. "0.1.0" */
  const char *description; /* one sentence for the docs; may be NULL */

  uint32_t accepted_planes; /* PMQ_PLANE_* bits; 0 means rows only */
  uint32_t native_planes;   /* PMQ_PLANE_* bits, a subset of accepted; 0 means rows only */

  const pmq_option *options; /* the [plugin_config] table; the host refuses keys not in it */
  size_t option_count;
  size_t option_size; /* sizeof(pmq_option) as the plugin knows it (stride of options[]) */

  /* Opens one instance. config_json is the validated [plugin_config] (defaults filled in) as a
   * JSON object; host->config_* read the same values. Returns NULL on failure with a message in
   * errbuf. */
  void *(*open)(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size);

  /* Planes; the ones declared native must be set, the others may be NULL. None may return
   * PMQ_WRITE_OK unless everything it was given is written. */
  pmq_write_status (*write_record)(void *instance, const pmq_batch *batch, size_t record_index,
                                   pmq_write_result *result);
  pmq_write_status (*write_batch)(void *instance, const pmq_batch *batch, pmq_write_result *result);
  pmq_write_status (*write_arrow)(void *instance, const pmq_arrow_batch *batch, pmq_write_result *result);

  /* Flushes and releases everything the instance holds. Every pending write is completed
   * before it is called. */
  void (*close)(void *instance);

  /* How many batch or Arrow writes of one [[topics]] block may be pending at once (0 or 1: the
   * host waits for each). Calls stay serialised; only their completions overlap. The host still
   * commits in offset order, and only what completed OK. */
  uint32_t max_in_flight;

  /* ---- Since ABI 2.2 (the host checks struct_size); each may be NULL. ---- */

  /* Pure cross-option checks (no I/O, no instance): e.g. "upsert_key needs write_mode =
   * upsert". `host` offers log and config_* over the validated config (defaults filled in),
   * which is also config_json; its other functions must not be called. Returns 1 when the
   * config is valid, else 0 with one problem per line in errbuf, each "<key>: <message>".
   * The host calls it before open() and from `--check`, on any thread. */
  int (*validate)(const pmq_host_api *host, const char *config_json, char *errbuf, size_t errbuf_size);

  /* The host needs every pending write of this instance completed: at shutdown, before a
   * partition is revoked, and after poll_interval with nothing new to write. A sink that holds
   * writes open to accumulate (one COPY or file across batches) seals and completes them now,
   * or starts doing so and completes them later through host->complete(); the host waits up to
   * timeout_ms for the completions, which follow the usual rules. Serialised with the writes. */
  void (*flush)(void *instance, int64_t timeout_ms);

  /* Ownership changes of one [[topics]] block: the partitions it was given, and the ones it is
   * handing away. A revoke comes after the revoked partitions' writes completed (or timed out)
   * and before the next owner starts. Offsets stay with the host: a sink opens and seals
   * per-partition state here, never tracks offsets of its own. Serialised with the writes. */
  void (*partitions_assigned)(void *instance, uint32_t block_index, const pmq_topic_partition *partitions,
                              size_t count);
  void (*partitions_revoked)(void *instance, uint32_t block_index, const pmq_topic_partition *partitions, size_t count);

  /* ---- Since ABI 2.6 (the host checks struct_size); may be NULL. ---- */

  /* The host is stopping this instance (a shutdown, or its definition removed): the only call
   * that is not serialised. It comes from another thread, between open() returning and close(),
   * possibly while a write or flush runs, and may come more than once. The instance ends the
   * waits of its retries now — a back-off before a resend, a Retry-After, a wait for a load or
   * task that an earlier failure left running — and the writes in them complete as RETRY
   * (nothing of them is committed: the records come again on the next start). Work that
   * progresses is not cut (a request on the wire, a healthy destination's task being polled):
   * those writes complete as usual, within the host's shutdown_timeout. It must not block.
   * flush() and close() follow as usual. */
  void (*stop)(void *instance);

  /* ---- Since ABI 2.8 (the host checks struct_size). ---- */

  /* The change operations this sink applies (PMQ_CHANGE_OP_BIT of each pmq_change_op): at least
   * PMQ_CHANGE_OPS_KEYED to be given a block with `changes` (the host refuses such a definition
   * at --check otherwise, naming the block), plus PMQ_OP_TRUNCATE if it empties a destination.
   * A truncate for a sink without it is a bad record of the sink's stage. 0: plain records only.
   * validate() sees each block's `changes` in host->subscriptions and may refuse a setting it
   * cannot honour. */
  uint32_t change_ops;

  /* ---- Since ABI 2.9 (read it only from a plugin of minor 9 or newer: it sits where older
   * descriptors had padding). ---- */

  /* 1: the sink takes a redrive of dead letters (docs/operations.md, "Dead letters"): records
   * of a partition handed to it again long after later offsets of that partition were written,
   * at their own coordinates. It writes them like any record, and a second delivery of one (a
   * redrive resumed after a crash) does what its replays do. 0: the host refuses to redrive into
   * it: a sink that skips what lies below a per-partition high-water mark as a replay (a Delta
   * txn version, an offsets table, a deduplication window by offsets) would drop them. */
  uint32_t takes_redrives;
} pmq_sink_plugin;

typedef const pmq_sink_plugin *(*pmq_sink_entry_fn)(uint32_t host_abi_version);

/* Convenience accessor for a record of a batch, honouring the stride. */
static inline const pmq_record *pmq_batch_record(const pmq_batch *batch, size_t index) {
  return (const pmq_record *)((const char *)batch->records + index * batch->record_size);
}

/* The writer schema of record `index` (ABI 2.4, see pmq_batch.writer_schemas), or NULL. */
static inline const char *pmq_batch_writer_schema(const pmq_batch *batch, size_t index) {
  if (batch->struct_size < offsetof(pmq_batch, writer_schemas) + sizeof(const char *const *)) return NULL;
  return batch->writer_schemas ? batch->writer_schemas[index] : NULL;
}

/* Whether the batch's records are changes (ABI 2.8, see pmq_batch.changes). */
static inline int pmq_batch_has_changes(const pmq_batch *batch) {
  if (batch->struct_size < offsetof(pmq_batch, changes) + sizeof(uint32_t)) return 0;
  return batch->changes != 0;
}

/* A record's op (ABI 2.8); PMQ_OP_APPEND from an older host. */
static inline int32_t pmq_record_op(const pmq_batch *batch, const pmq_record *record) {
  if (batch->record_size < offsetof(pmq_record, op) + sizeof(int32_t)) return PMQ_OP_APPEND;
  return record->op;
}

/* A record's decoded key (ABI 2.8), or absent (data NULL). */
static inline pmq_bytes pmq_record_key_json(const pmq_batch *batch, const pmq_record *record) {
  pmq_bytes none = {NULL, 0};
  if (batch->record_size < offsetof(pmq_record, key_json) + sizeof(pmq_bytes)) return none;
  return record->key_json;
}

static inline const pmq_option *pmq_plugin_option(const pmq_sink_plugin *plugin, size_t index) {
  return (const pmq_option *)((const char *)plugin->options + index * plugin->option_size);
}

static inline const char *pmq_plane_name(uint32_t plane) {
  return plane == PMQ_PLANE_ROWS      ? "rows"
         : plane == PMQ_PLANE_BATCHES ? "batches"
         : plane == PMQ_PLANE_ARROW   ? "arrow"
                                      : "unknown";
}

/* The normalised data-plane contract of a plugin: what the host's planner uses and what the
 * C++ SDK's sink_data_plane_spec() returns, from this one function.
 *  - 0 for accepted or native means rows only; rows are always accepted;
 *  - a native plane must be accepted, and its write function set;
 *  - unknown plane bits are refused.
 * Returns 1 and fills *spec, or 0 with the reason in errbuf. */
typedef struct pmq_plane_spec {
  uint32_t accepted_planes;
  uint32_t native_planes;
  uint32_t best_plane; /* the native plane batches are delivered on: arrow > batches > rows */
} pmq_plane_spec;

static inline int pmq_sink_plane_spec(const pmq_sink_plugin *plugin, pmq_plane_spec *spec, char *errbuf,
                                      size_t errbuf_size) {
  uint32_t accepted = plugin->accepted_planes ? plugin->accepted_planes : (uint32_t)PMQ_PLANE_ROWS;
  uint32_t native = plugin->native_planes ? plugin->native_planes : (uint32_t)PMQ_PLANE_ROWS;
  uint32_t plane;
  if ((accepted | native) & ~PMQ_PLANES_ALL) {
    snprintf(errbuf, errbuf_size, "declares unknown data plane bits 0x%x",
             (unsigned)((accepted | native) & ~PMQ_PLANES_ALL));
    return 0;
  }
  accepted |= PMQ_PLANE_ROWS;
  for (plane = PMQ_PLANE_ROWS; plane <= PMQ_PLANE_ARROW; plane <<= 1) {
    const int implemented = plane == PMQ_PLANE_ROWS      ? plugin->write_record != NULL
                            : plane == PMQ_PLANE_BATCHES ? plugin->write_batch != NULL
                                                         : plugin->write_arrow != NULL;
    const char *fn = plane == PMQ_PLANE_ROWS      ? "write_record"
                     : plane == PMQ_PLANE_BATCHES ? "write_batch"
                                                  : "write_arrow";
    if ((native & plane) && !(accepted & plane)) {
      snprintf(errbuf, errbuf_size, "declares native data plane '%s' but does not accept it", pmq_plane_name(plane));
      return 0;
    }
    if ((native & plane) && !implemented) {
      snprintf(errbuf, errbuf_size, "declares native data plane '%s' but does not implement %s", pmq_plane_name(plane),
               fn);
      return 0;
    }
  }
  spec->accepted_planes = accepted;
  spec->native_planes = native;
  spec->best_plane = (native & PMQ_PLANE_ARROW)     ? PMQ_PLANE_ARROW
                     : (native & PMQ_PLANE_BATCHES) ? PMQ_PLANE_BATCHES
                                                    : PMQ_PLANE_ROWS;
  return 1;
}

/* What a host accepts from set_plane() (ABI 2.5): exactly one plane, one of the native ones.
 * Returns 1, or 0 with the reason in errbuf. */
static inline int pmq_plane_choice_valid(const pmq_plane_spec *spec, uint32_t plane, char *errbuf, size_t errbuf_size) {
  if (plane != 0 && (plane & (plane - 1)) == 0 && (spec->native_planes & plane)) return 1;
  snprintf(errbuf, errbuf_size, "chose the data plane %u (%s) with set_plane(), which is not one of its native planes",
           (unsigned)plane, pmq_plane_name(plane));
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* PICOMQ_SINK_ABI_H */
