//! Borrowed views of what the host hands a write: batches of records, Arrow batches, partitions.
use std::ffi::CStr;
use std::os::raw::c_char;
use std::sync::Arc;

use arrow::array::{RecordBatch, StructArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};

use crate::abi;
use crate::Error;

fn c_str<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        // SAFETY: NUL-terminated and valid for the call (the ABI).
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
    }
}

fn bytes<'a>(b: abi::pmq_bytes) -> Option<&'a [u8]> {
    if b.data.is_null() {
        None
    } else if b.size == 0 {
        Some(&[])
    } else {
        // SAFETY: the host's memory, valid for the call.
        Some(unsafe { std::slice::from_raw_parts(b.data, b.size) })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFormat {
    /// One complete, validated JSON value.
    Json,
    /// Validated UTF-8 text.
    Text,
    /// Bytes as on the broker.
    Raw,
}

impl PayloadFormat {
    fn from_abi(v: i32) -> Self {
        match v {
            abi::PMQ_PAYLOAD_JSON => PayloadFormat::Json,
            abi::PMQ_PAYLOAD_TEXT => PayloadFormat::Text,
            _ => PayloadFormat::Raw,
        }
    }
}

/// A batch of records from one topic-partition, in offset order; valid for the call (or, for a
/// pending write, until it completes: copy what you keep).
pub struct Batch<'a> {
    raw: &'a abi::pmq_batch,
}

impl<'a> Batch<'a> {
    /// # Safety
    /// `raw` must be a batch the host passed to this call.
    pub unsafe fn from_raw(raw: &'a abi::pmq_batch) -> Self {
        Batch { raw }
    }
    pub fn topic(&self) -> &'a str {
        c_str(self.raw.topic)
    }
    pub fn partition(&self) -> i32 {
        self.raw.partition
    }
    pub fn payload_format(&self) -> PayloadFormat {
        PayloadFormat::from_abi(self.raw.payload_format)
    }
    /// The definition's schema name ("json", "raw", ...).
    pub fn schema(&self) -> &'a str {
        c_str(self.raw.schema)
    }
    /// The [[topics]] block (ABI 2.2; 0 from an older host).
    pub fn block_index(&self) -> u32 {
        if self.raw.struct_size >= std::mem::offset_of!(abi::pmq_batch, block_index) + 4 {
            self.raw.block_index
        } else {
            0
        }
    }
    /// ABI 2.4: the writer schema (JSON text) record `index`'s payload was decoded by, for an
    /// avro block; None for another schema, a tombstone, or a host older than 2.4.
    pub fn writer_schema(&self, index: usize) -> Option<&'a str> {
        assert!(
            index < self.raw.record_count,
            "record {index} beyond a batch of {}",
            self.raw.record_count
        );
        if self.raw.struct_size < std::mem::offset_of!(abi::pmq_batch, writer_schemas) + std::mem::size_of::<usize>()
            || self.raw.writer_schemas.is_null()
        {
            return None;
        }
        // SAFETY: the host gives one entry per record when the array is set.
        let s = unsafe { *self.raw.writer_schemas.add(index) };
        (!s.is_null()).then(|| c_str(s))
    }
    /// ABI 2.8: the records are change events (the block has `changes`, docs/changes.md): read
    /// each one's [`Record::op`] and [`Record::key_json`]. False from an older host.
    pub fn has_changes(&self) -> bool {
        self.raw.struct_size >= std::mem::offset_of!(abi::pmq_batch, changes) + std::mem::size_of::<u32>()
            && self.raw.changes != 0
    }
    pub fn len(&self) -> usize {
        self.raw.record_count
    }
    pub fn is_empty(&self) -> bool {
        self.raw.record_count == 0
    }
    pub fn record(&self, index: usize) -> Record<'a> {
        assert!(
            index < self.raw.record_count,
            "record {index} beyond a batch of {}",
            self.raw.record_count
        );
        // SAFETY: index checked; the stride is the host's record_size.
        let raw =
            unsafe { &*((self.raw.records as *const u8).add(index * self.raw.record_size) as *const abi::pmq_record) };
        Record {
            raw,
            index,
            record_size: self.raw.record_size,
        }
    }
    pub fn records(&self) -> impl Iterator<Item = Record<'a>> + '_ {
        (0..self.len()).map(move |i| self.record(i))
    }
}

/// What a record does (ABI 2.8 `pmq_change_op`): `Append` for a plain record; under `changes`
/// an operation on the row named by [`Record::key_json`] (docs/changes.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeOp {
    /// A record, not a change: written as the sink writes records.
    Append,
    /// The payload is the full row (a JSON object): insert or replace the row of the key.
    Upsert,
    /// No payload: delete the row of the key (a key without a row: nothing to do).
    Delete,
    /// No payload, no key: every row of the record's destination goes.
    Truncate,
    /// The payload names the columns that change; the others keep their value (Debezium's
    /// unchanged TOAST values). A key without a row: inserted with what the patch names.
    Patch,
}

impl ChangeOp {
    /// From `pmq_change_op`; an unknown value (a newer host's) is None.
    pub fn from_abi(op: i32) -> Option<Self> {
        match op {
            abi::PMQ_OP_APPEND => Some(ChangeOp::Append),
            abi::PMQ_OP_UPSERT => Some(ChangeOp::Upsert),
            abi::PMQ_OP_DELETE => Some(ChangeOp::Delete),
            abi::PMQ_OP_TRUNCATE => Some(ChangeOp::Truncate),
            abi::PMQ_OP_PATCH => Some(ChangeOp::Patch),
            _ => None,
        }
    }
    pub fn abi(self) -> i32 {
        match self {
            ChangeOp::Append => abi::PMQ_OP_APPEND,
            ChangeOp::Upsert => abi::PMQ_OP_UPSERT,
            ChangeOp::Delete => abi::PMQ_OP_DELETE,
            ChangeOp::Truncate => abi::PMQ_OP_TRUNCATE,
            ChangeOp::Patch => abi::PMQ_OP_PATCH,
        }
    }
    /// Its bit in [`crate::Sink::CHANGE_OPS`] (`PMQ_CHANGE_OP_BIT`).
    pub const fn bit(self) -> u32 {
        match self {
            ChangeOp::Append => abi::pmq_change_op_bit(abi::PMQ_OP_APPEND),
            ChangeOp::Upsert => abi::pmq_change_op_bit(abi::PMQ_OP_UPSERT),
            ChangeOp::Delete => abi::pmq_change_op_bit(abi::PMQ_OP_DELETE),
            ChangeOp::Truncate => abi::pmq_change_op_bit(abi::PMQ_OP_TRUNCATE),
            ChangeOp::Patch => abi::pmq_change_op_bit(abi::PMQ_OP_PATCH),
        }
    }
}

#[derive(Clone, Copy)]
pub struct Record<'a> {
    raw: &'a abi::pmq_record,
    index: usize,
    /// The batch's record_size: a field past it is not there (an older host's shorter records).
    record_size: usize,
}

impl<'a> Record<'a> {
    /// The record's index in its batch (what `Call::reject` takes).
    pub fn index(&self) -> usize {
        self.index
    }
    pub fn offset(&self) -> i64 {
        self.raw.offset
    }
    /// Epoch milliseconds; None when the broker has none.
    pub fn timestamp_ms(&self) -> Option<i64> {
        (self.raw.timestamp_ms != -1).then_some(self.raw.timestamp_ms)
    }
    pub fn key(&self) -> Option<&'a [u8]> {
        bytes(self.raw.key)
    }
    /// None: a tombstone (and a delete or truncate of a batch of changes).
    pub fn payload(&self) -> Option<&'a [u8]> {
        bytes(self.raw.payload)
    }
    /// ABI 2.8: what the record does ([`ChangeOp::Append`] for a plain record and from an older
    /// host, whose records end before `op`). An op this SDK does not know is `Err(value)`.
    pub fn op(&self) -> Result<ChangeOp, i32> {
        if self.record_size < std::mem::offset_of!(abi::pmq_record, op) + std::mem::size_of::<i32>() {
            return Ok(ChangeOp::Append);
        }
        ChangeOp::from_abi(self.raw.op).ok_or(self.raw.op)
    }
    /// ABI 2.8: the record key decoded as one JSON value; under `changes` the row's key as a JSON
    /// object (`{"id":7}`, minified: equal keys are equal texts). None: no key (a truncate, a block
    /// without a decoded key, an older host).
    pub fn key_json(&self) -> Option<&'a [u8]> {
        if self.record_size < std::mem::offset_of!(abi::pmq_record, key_json) + std::mem::size_of::<abi::pmq_bytes>() {
            return None;
        }
        bytes(self.raw.key_json)
    }
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let raw = self.raw;
        (0..raw.header_count).map(move |i| {
            // SAFETY: header_count entries at headers.
            let h = unsafe { &*raw.headers.add(i) };
            Header {
                name: bytes(h.name).unwrap_or(&[]),
                value: bytes(h.value),
            }
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Header<'a> {
    pub name: &'a [u8],
    /// None: a null header value.
    pub value: Option<&'a [u8]>,
}

/// One batch on the Arrow plane. [`ArrowBatch::take`] imports it zero-copy.
pub struct ArrowBatch<'a> {
    raw: &'a abi::pmq_arrow_batch,
    taken: bool,
}

impl<'a> ArrowBatch<'a> {
    /// # Safety
    /// `raw` must be an Arrow batch the host passed to this call.
    pub unsafe fn from_raw(raw: &'a abi::pmq_arrow_batch) -> Self {
        ArrowBatch { raw, taken: false }
    }
    pub fn topic(&self) -> &'a str {
        c_str(self.raw.topic)
    }
    pub fn partition(&self) -> i32 {
        self.raw.partition
    }
    pub fn payload_format(&self) -> PayloadFormat {
        PayloadFormat::from_abi(self.raw.payload_format)
    }
    pub fn schema(&self) -> &'a str {
        c_str(self.raw.schema)
    }
    pub fn block_index(&self) -> u32 {
        if self.raw.struct_size >= std::mem::offset_of!(abi::pmq_arrow_batch, block_index) + 4 {
            self.raw.block_index
        } else {
            0
        }
    }
    pub fn len(&self) -> usize {
        self.raw.record_count
    }
    pub fn is_empty(&self) -> bool {
        self.raw.record_count == 0
    }
    /// offsets()[i]: the Kafka offset of row i.
    pub fn offsets(&self) -> &'a [i64] {
        if self.raw.offsets.is_null() || self.raw.record_count == 0 {
            &[]
        } else {
            // SAFETY: record_count offsets, valid for the call.
            unsafe { std::slice::from_raw_parts(self.raw.offsets, self.raw.record_count) }
        }
    }
    /// Moves the C Data Interface structs out of the host's (leaving them released, as the
    /// interface specifies) and imports them without copying: the RecordBatch's buffers are the
    /// host's, freed by the host's release callback when the last array referencing them drops.
    /// It may outlive the call. Once per batch.
    pub fn take(&mut self) -> Result<RecordBatch, Error> {
        if self.taken {
            return Err(Error::fatal("the Arrow batch was already taken"));
        }
        if self.raw.arrow_schema.is_null() || self.raw.arrow_array.is_null() {
            return Err(Error::fatal("the host passed an Arrow batch without schema or array"));
        }
        self.taken = true;
        // SAFETY: valid C Data Interface structs owned by the host for the call; from_raw moves
        // them out (sets the source's release to NULL).
        let (array, schema) = unsafe {
            (
                FFI_ArrowArray::from_raw(self.raw.arrow_array),
                FFI_ArrowSchema::from_raw(self.raw.arrow_schema),
            )
        };
        let data =
            unsafe { from_ffi(array, &schema) }.map_err(|e| Error::fatal(format!("importing the Arrow batch: {e}")))?;
        let DataType::Struct(_) = data.data_type() else {
            return Err(Error::fatal(format!(
                "the Arrow batch is not a struct array but {}",
                data.data_type()
            )));
        };
        let strukt = StructArray::from(data);
        let (fields, columns, nulls) = strukt.into_parts();
        if nulls.map(|n| n.null_count() > 0).unwrap_or(false) {
            return Err(Error::fatal("the Arrow batch has null rows at the top level"));
        }
        let schema = Arc::new(Schema::new(fields.iter().map(|f| Field::clone(f)).collect::<Vec<_>>()));
        RecordBatch::try_new(schema, columns).map_err(|e| Error::fatal(format!("the Arrow batch: {e}")))
    }
    /// The Arrow batch as a struct array, for a sink that wants the top-level column too.
    pub fn take_struct(&mut self) -> Result<StructArray, Error> {
        self.take().map(StructArray::from)
    }
}

/// One partition of a partition notification.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub(crate) unsafe fn list(raw: *const abi::pmq_topic_partition, count: usize) -> Vec<TopicPartition> {
        if raw.is_null() || count == 0 {
            return Vec::new();
        }
        std::slice::from_raw_parts(raw, count)
            .iter()
            .map(|tp| TopicPartition {
                topic: c_str(tp.topic).to_string(),
                partition: tp.partition,
            })
            .collect()
    }
}
