//! The sinks' one Parquet writer: Arrow record batches into Parquet files with arrow-rs' `parquet`
//! crate, configured the same way wherever a sink writes Parquet.
//!
//! - Rust sinks (Delta) build their [`WriterProperties`] with [`writer_properties`].
//! - C++ sinks (S3 `format = "parquet"`) call [`pmq_parquet_write_file`] through
//!   `include/picomq/parquet_writer.h`; the kit loads this library (`libpicomq_parquet.so`) when a
//!   sink needs it, so the light plugins do not carry arrow-rs.
//!
//! A file's bytes depend only on the batch and the options (no clock, no random ids): a sink that
//! writes the same records again writes the same file.

use std::ffi::c_void;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow::array::{Array, RecordBatch, StructArray};
use arrow::datatypes::{DataType, Schema};
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

/// A Parquet codec, as the sinks' `compression` options name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None,
    Snappy,
    Zstd,
}

impl Codec {
    /// "none", "snappy", "zstd"; None for anything else.
    pub fn parse(name: &str) -> Option<Codec> {
        match name {
            "none" => Some(Codec::None),
            "snappy" => Some(Codec::Snappy),
            "zstd" => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// How files are written. The defaults are the sinks' documented defaults.
#[derive(Clone, Debug)]
pub struct ParquetOptions {
    pub codec: Codec,
    /// zstd 1-22; 0: the codec's default (3).
    pub level: i32,
    /// Rows per row group at most (a file's rows are cut into groups of this many).
    pub row_group_records: usize,
    /// Dictionary encoding of every column (falls back to plain per page when a dictionary grows large).
    pub dictionary: bool,
    /// Min / max / null-count statistics per page and per row group (readers skip row groups by them).
    pub statistics: bool,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            codec: Codec::Zstd,
            level: 0,
            row_group_records: 1 << 20,
            dictionary: true,
            statistics: true,
        }
    }
}

/// The writer properties of `options`; an invalid zstd level is an error naming it.
pub fn writer_properties(options: &ParquetOptions) -> Result<WriterProperties, String> {
    let compression = match options.codec {
        Codec::None => Compression::UNCOMPRESSED,
        Codec::Snappy => Compression::SNAPPY,
        Codec::Zstd if options.level == 0 => Compression::ZSTD(ZstdLevel::default()),
        Codec::Zstd => Compression::ZSTD(
            ZstdLevel::try_new(options.level).map_err(|e| format!("zstd level {}: {e}", options.level))?,
        ),
    };
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(options.row_group_records.max(1)))
        .set_dictionary_enabled(options.dictionary)
        .set_statistics_enabled(if options.statistics {
            EnabledStatistics::Page
        } else {
            EnabledStatistics::None
        })
        .set_created_by("picomq-connect".to_string())
        .build())
}

/// One Parquet file of `batch`'s rows, appended to `out`.
pub fn write_file<W: Write + Send>(batch: &RecordBatch, options: &ParquetOptions, out: W) -> Result<(), String> {
    let props = writer_properties(options)?;
    let mut writer = ArrowWriter::try_new(out, batch.schema(), Some(props))
        .map_err(|e| format!("starting the Parquet file: {e}"))?;
    writer
        .write(batch)
        .map_err(|e| format!("writing the Parquet file: {e}"))?;
    writer.close().map_err(|e| format!("ending the Parquet file: {e}"))?;
    Ok(())
}

/// A struct array (one row per record) as a record batch of its fields. Rows null at the top level
/// cannot be columns: refused.
pub fn record_batch_of(array: StructArray) -> Result<RecordBatch, String> {
    if array.null_count() > 0 {
        return Err("the Arrow batch has null rows at the top level".into());
    }
    let (fields, columns, _) = array.into_parts();
    RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns).map_err(|e| format!("the Arrow batch: {e}"))
}

// ---- C API (include/picomq/parquet_writer.h) ----

/// Mirrors `pmq_parquet_options` of include/picomq/parquet_writer.h.
#[repr(C)]
pub struct PmqParquetOptions {
    pub struct_size: usize,
    pub codec: i32, // 0 none, 1 snappy, 2 zstd
    pub level: i32,
    pub row_group_records: u64,
    pub dictionary: i32,
    pub statistics: i32,
}

/// Receives the file's bytes as they are written (several calls) and the error message, if any.
pub type PmqParquetBytes = extern "C" fn(ctx: *mut c_void, data: *const u8, len: usize);

struct CallbackWriter {
    ctx: *mut c_void,
    bytes: PmqParquetBytes,
}

// The C side's buffer is used by the calling thread only, for the duration of the call.
unsafe impl Send for CallbackWriter {}

impl Write for CallbackWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.bytes)(self.ctx, buf.as_ptr(), buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn options_of(o: &PmqParquetOptions) -> Result<ParquetOptions, String> {
    if o.struct_size < std::mem::size_of::<PmqParquetOptions>() {
        return Err(format!(
            "pmq_parquet_options of {} bytes, {} expected",
            o.struct_size,
            std::mem::size_of::<PmqParquetOptions>()
        ));
    }
    let codec = match o.codec {
        0 => Codec::None,
        1 => Codec::Snappy,
        2 => Codec::Zstd,
        c => return Err(format!("unknown codec {c}")),
    };
    Ok(ParquetOptions {
        codec,
        level: o.level,
        row_group_records: o.row_group_records.max(1) as usize,
        dictionary: o.dictionary != 0,
        statistics: o.statistics != 0,
    })
}

/// # Safety
/// `schema` and `array` are C Data Interface structs the caller owns (a struct array); they are
/// moved in (released here, whatever the outcome). `options` is valid for the call.
unsafe fn write_ffi(
    options: *const PmqParquetOptions,
    schema: *mut FFI_ArrowSchema,
    array: *mut FFI_ArrowArray,
    out: CallbackWriter,
) -> Result<(), String> {
    let schema = FFI_ArrowSchema::from_raw(schema);
    let array = FFI_ArrowArray::from_raw(array);
    let options = options_of(&*options)?;
    let data = from_ffi(array, &schema).map_err(|e| format!("importing the Arrow batch: {e}"))?;
    if !matches!(data.data_type(), DataType::Struct(_)) {
        return Err(format!(
            "the Arrow batch is not a struct array but {}",
            data.data_type()
        ));
    }
    let batch = record_batch_of(StructArray::from(data))?;
    write_file(&batch, &options, out)
}

/// Writes one Parquet file of the struct array's rows. Returns 0 and hands the file's bytes to
/// `bytes(ctx, ...)` (in order, several calls), or returns -1 and hands an error message (UTF-8,
/// not NUL-terminated) to `error(ctx, ...)` once. `schema` and `array` are moved in: released
/// here in every case.
///
/// # Safety
/// As `include/picomq/parquet_writer.h` says: valid pointers, callbacks callable for the call.
#[no_mangle]
pub unsafe extern "C" fn pmq_parquet_write_file(
    options: *const PmqParquetOptions,
    schema: *mut FFI_ArrowSchema,
    array: *mut FFI_ArrowArray,
    bytes: PmqParquetBytes,
    error: PmqParquetBytes,
    ctx: *mut c_void,
) -> i32 {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if options.is_null() || schema.is_null() || array.is_null() {
            return Err("a null argument".to_string());
        }
        write_ffi(options, schema, array, CallbackWriter { ctx, bytes })
    }));
    let message = match outcome {
        Ok(Ok(())) => return 0,
        Ok(Err(m)) => m,
        Err(panic) => format!(
            "the Parquet writer panicked: {}",
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        ),
    };
    error(ctx, message.as_ptr(), message.len());
    -1
}

/// The C API's version: major * 100 + minor (the loader checks the major).
#[no_mangle]
pub extern "C" fn pmq_parquet_api_version() -> u32 {
    100
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::Field;
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

    fn batch(rows: i64) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows)),
                Arc::new(StringArray::from_iter((0..rows).map(|i| {
                    if i % 7 == 0 {
                        None
                    } else {
                        Some(format!("n{}", i % 3))
                    }
                }))),
                Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64 / 4.0))),
            ],
        )
        .unwrap()
    }

    fn written(b: &RecordBatch, o: &ParquetOptions) -> Vec<u8> {
        let mut out = Vec::new();
        write_file(b, o, &mut out).unwrap();
        out
    }

    #[test]
    fn a_file_reads_back_as_the_batch() {
        let b = batch(1000);
        let file = written(&b, &ParquetOptions::default());
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(file))
            .unwrap()
            .build()
            .unwrap();
        let back: Vec<RecordBatch> = reader.map(|r| r.unwrap()).collect();
        assert_eq!(arrow::compute::concat_batches(&b.schema(), &back).unwrap(), b);
    }

    #[test]
    fn options_reach_the_file() {
        let b = batch(10_000);
        let o = ParquetOptions {
            codec: Codec::Snappy,
            row_group_records: 3000,
            dictionary: false,
            ..Default::default()
        };
        let r = SerializedFileReader::new(Bytes::from(written(&b, &o))).unwrap();
        let meta = r.metadata();
        assert_eq!(meta.num_row_groups(), 4); // 3000 + 3000 + 3000 + 1000
        assert_eq!(meta.row_group(3).num_rows(), 1000);
        let col = meta.row_group(0).column(1);
        assert_eq!(col.compression(), Compression::SNAPPY);
        assert!(col.dictionary_page_offset().is_none());
        assert!(col.statistics().is_some());
        assert_eq!(meta.file_metadata().created_by(), Some("picomq-connect"));

        let z = ParquetOptions {
            level: 9,
            statistics: false,
            ..Default::default()
        };
        let r = SerializedFileReader::new(Bytes::from(written(&b, &z))).unwrap();
        let col = r.metadata().row_group(0).column(1);
        assert!(matches!(col.compression(), Compression::ZSTD(_))); // a file does not record the level
        assert!(col.dictionary_page_offset().is_some());
        assert!(col.statistics().is_none());
    }

    #[test]
    fn the_same_batch_gives_the_same_bytes() {
        let b = batch(5000);
        assert_eq!(
            written(&b, &ParquetOptions::default()),
            written(&b, &ParquetOptions::default())
        );
    }

    #[test]
    fn a_bad_level_is_named() {
        let o = ParquetOptions {
            level: 99,
            ..Default::default()
        };
        assert!(writer_properties(&o).unwrap_err().contains("zstd level 99"));
    }

    extern "C" fn collect(ctx: *mut c_void, data: *const u8, len: usize) {
        let v = unsafe { &mut *(ctx as *mut Vec<u8>) };
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
    }

    #[test]
    fn the_c_api_takes_a_struct_array_and_moves_it_in() {
        let b = batch(100);
        let strukt = StructArray::from(b.clone());
        let mut array = FFI_ArrowArray::new(&strukt.to_data());
        let mut schema = FFI_ArrowSchema::try_from(strukt.data_type()).unwrap();
        let o = PmqParquetOptions {
            struct_size: std::mem::size_of::<PmqParquetOptions>(),
            codec: 2,
            level: 0,
            row_group_records: 1 << 20,
            dictionary: 1,
            statistics: 1,
        };
        let (mut file, mut error) = (Vec::<u8>::new(), Vec::<u8>::new());
        let rc = unsafe {
            pmq_parquet_write_file(
                &o,
                &mut schema,
                &mut array,
                collect,
                collect,
                &mut file as *mut _ as *mut c_void,
            )
        };
        assert_eq!(rc, 0, "{}", String::from_utf8_lossy(&error));
        assert!(array.is_released());
        assert_eq!(file, written(&b, &ParquetOptions::default()));

        // A bad codec: an error through the callback, the structs released all the same.
        let mut array = FFI_ArrowArray::new(&strukt.to_data());
        let mut schema = FFI_ArrowSchema::try_from(strukt.data_type()).unwrap();
        let bad = PmqParquetOptions { codec: 7, ..o };
        let rc = unsafe {
            pmq_parquet_write_file(
                &bad,
                &mut schema,
                &mut array,
                collect,
                collect,
                &mut error as *mut _ as *mut c_void,
            )
        };
        assert_eq!(rc, -1);
        assert_eq!(String::from_utf8_lossy(&error), "unknown codec 7");
        assert!(array.is_released());
    }
}
