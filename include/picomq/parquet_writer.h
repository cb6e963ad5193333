/* The C API of libpicomq_parquet.so, the sinks' one Parquet writer (sinkkit/parquet, a Rust crate
 * on arrow-rs' parquet). C++ sinks reach it through picomq/kit/parquet.hpp, which loads the
 * library when a sink first writes Parquet; Rust sinks use the crate directly. */
#ifndef PICOMQ_PARQUET_WRITER_H
#define PICOMQ_PARQUET_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "picomq/arrow_c_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this API: major * 100 + minor. A loader refuses another major. */
#define PMQ_PARQUET_API_VERSION 100

typedef enum pmq_parquet_codec { PMQ_PARQUET_NONE = 0, PMQ_PARQUET_SNAPPY = 1, PMQ_PARQUET_ZSTD = 2 } pmq_parquet_codec;

typedef struct pmq_parquet_options {
  size_t struct_size;         /* sizeof(pmq_parquet_options) */
  int32_t codec;              /* pmq_parquet_codec */
  int32_t level;              /* zstd 1-22; 0: the codec's default */
  uint64_t row_group_records; /* rows per row group at most */
  int32_t dictionary;         /* dictionary encoding of every column (0/1) */
  int32_t statistics;         /* min/max/null-count statistics per page and row group (0/1) */
} pmq_parquet_options;

/* Receives bytes: the file, in order, over several calls; or the error message once (UTF-8, not
 * NUL-terminated). */
typedef void (*pmq_parquet_bytes)(void *ctx, const uint8_t *data, size_t len);

uint32_t pmq_parquet_api_version(void);

/* One Parquet file of the rows of `array` (a struct array: one column per field, no null rows).
 * Returns 0 after handing the whole file to bytes(); -1 after handing a message to error().
 * `schema` and `array` are moved in (released in every case). The bytes depend only on the rows
 * and the options. */
int32_t pmq_parquet_write_file(const pmq_parquet_options *options, struct ArrowSchema *schema, struct ArrowArray *array,
                               pmq_parquet_bytes bytes, pmq_parquet_bytes error, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* PICOMQ_PARQUET_WRITER_H */
