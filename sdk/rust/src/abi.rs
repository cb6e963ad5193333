//! The C ABI of `include/picomq/sink_abi.h`, as `repr(C)` types. Hand-written (no bindgen, so no
//! libclang at build time) and pinned by the layout test (`tests/layout.rs`), which compares every
//! size and field offset with what a C compiler says about the header (`abi_probe.c`).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub use arrow::ffi::{FFI_ArrowArray as ArrowArray, FFI_ArrowSchema as ArrowSchema};

pub const PMQ_SINK_ABI_VERSION_MAJOR: u32 = 2;
pub const PMQ_SINK_ABI_VERSION_MINOR: u32 = 9;
pub const PMQ_SINK_ABI_VERSION: u32 = (PMQ_SINK_ABI_VERSION_MAJOR << 16) | PMQ_SINK_ABI_VERSION_MINOR;

pub const PMQ_PLANE_ROWS: u32 = 1 << 0;
pub const PMQ_PLANE_BATCHES: u32 = 1 << 1;
pub const PMQ_PLANE_ARROW: u32 = 1 << 2;
pub const PMQ_PLANES_ALL: u32 = PMQ_PLANE_ROWS | PMQ_PLANE_BATCHES | PMQ_PLANE_ARROW;

pub const PMQ_PAYLOAD_JSON: i32 = 0;
pub const PMQ_PAYLOAD_TEXT: i32 = 1;
pub const PMQ_PAYLOAD_RAW: i32 = 2;

pub const PMQ_OPTION_STRING: i32 = 0;
pub const PMQ_OPTION_INT: i32 = 1;
pub const PMQ_OPTION_FLOAT: i32 = 2;
pub const PMQ_OPTION_BOOL: i32 = 3;
pub const PMQ_OPTION_DURATION: i32 = 4;
pub const PMQ_OPTION_BYTE_SIZE: i32 = 5;
pub const PMQ_OPTION_STRING_LIST: i32 = 6;
pub const PMQ_OPTION_TABLE: i32 = 7;
pub const PMQ_OPTION_REQUIRED: u32 = 1;
pub const PMQ_OPTION_SECRET: u32 = 2;

pub const PMQ_FIELD_HEADERS: u32 = 1;

/// `pmq_change_op` (ABI 2.8): what a record of a batch of changes does to the row named by its key.
pub const PMQ_OP_APPEND: i32 = 0;
pub const PMQ_OP_UPSERT: i32 = 1;
pub const PMQ_OP_DELETE: i32 = 2;
pub const PMQ_OP_TRUNCATE: i32 = 3;
pub const PMQ_OP_PATCH: i32 = 4;
/// `PMQ_CHANGE_OP_BIT(op)`: the bit of an operation in `pmq_sink_plugin.change_ops`.
pub const fn pmq_change_op_bit(op: i32) -> u32 {
    1u32 << op
}
/// `PMQ_CHANGE_OPS_KEYED`: the operations a sink must apply to be handed changes at all.
pub const PMQ_CHANGE_OPS_KEYED: u32 = pmq_change_op_bit(PMQ_OP_UPSERT) | pmq_change_op_bit(PMQ_OP_DELETE);

pub const PMQ_LOG_DEBUG: i32 = 0;
pub const PMQ_LOG_INFO: i32 = 1;
pub const PMQ_LOG_WARN: i32 = 2;
pub const PMQ_LOG_ERROR: i32 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pmq_bytes {
    pub data: *const u8,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pmq_header {
    pub name: pmq_bytes,
    pub value: pmq_bytes,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pmq_record {
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: pmq_bytes,
    pub headers: *const pmq_header,
    pub header_count: usize,
    pub payload: pmq_bytes,
    /// Since ABI 2.8 (check the batch's record_size): pmq_change_op, 0 (APPEND) for plain records.
    pub op: i32,
    /// Since ABI 2.8: the decoded record key / the row's key under `changes` (JSON), or NULL.
    pub key_json: pmq_bytes,
}

#[repr(C)]
#[derive(Debug)]
pub struct pmq_batch {
    pub struct_size: usize,
    pub topic: *const c_char,
    pub partition: i32,
    pub payload_format: i32,
    pub schema: *const c_char,
    pub records: *const pmq_record,
    pub record_count: usize,
    pub record_size: usize,
    pub block_index: u32,
    /// Since ABI 2.4: NULL, or one writer schema (JSON text, or NULL) per record.
    pub writer_schemas: *const *const c_char,
    /// Since ABI 2.8: 1 when the records are change events (docs/changes.md).
    pub changes: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct pmq_arrow_batch {
    pub struct_size: usize,
    pub topic: *const c_char,
    pub partition: i32,
    pub payload_format: i32,
    pub schema: *const c_char,
    pub arrow_schema: *mut ArrowSchema,
    pub arrow_array: *mut ArrowArray,
    pub offsets: *const i64,
    pub record_count: usize,
    pub block_index: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct pmq_topic_partition {
    pub topic: *const c_char,
    pub partition: i32,
}

#[repr(C)]
#[derive(Debug)]
pub struct pmq_option {
    pub name: *const c_char,
    pub type_: i32,
    pub flags: u32,
    pub default_json: *const c_char,
    pub allowed: *const c_char,
    pub help: *const c_char,
}

/// `pmq_write_status`.
pub type pmq_write_status = c_int;
pub const PMQ_WRITE_OK: pmq_write_status = 0;
pub const PMQ_WRITE_RETRY: pmq_write_status = 1;
pub const PMQ_WRITE_PARTIAL: pmq_write_status = 2;
pub const PMQ_WRITE_FATAL: pmq_write_status = 3;
pub const PMQ_WRITE_REJECTED: pmq_write_status = 4;
pub const PMQ_WRITE_PENDING: pmq_write_status = 5;

/// Opaque, owned by the host.
#[repr(C)]
pub struct pmq_write_result {
    _private: [u8; 0],
}

#[repr(C)]
pub struct pmq_host_api {
    pub struct_size: usize,
    pub abi_version: u32,
    pub host_ctx: *mut c_void,
    pub log: Option<unsafe extern "C" fn(*mut c_void, i32, *const c_char)>,
    pub set_error: Option<unsafe extern "C" fn(*mut pmq_write_result, *const c_char)>,
    pub reject_record: Option<unsafe extern "C" fn(*mut pmq_write_result, usize, *const c_char)>,
    pub config_has: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int>,
    pub config_string: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> *const c_char>,
    pub config_int: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> i64>,
    pub config_float: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> f64>,
    pub config_bool: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int>,
    pub config_list_size: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> usize>,
    pub config_list_item: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> *const c_char>,
    pub config_json: Option<unsafe extern "C" fn(*mut c_void, *const c_char) -> *const c_char>,
    pub complete: Option<unsafe extern "C" fn(*mut pmq_write_result, pmq_write_status)>,
    pub set_unread_fields: Option<unsafe extern "C" fn(*mut c_void, u32)>,
    pub set_max_in_flight: Option<unsafe extern "C" fn(*mut c_void, u32)>,
    pub sink_key: *const c_char,
    pub count: Option<unsafe extern "C" fn(*mut c_void, *const c_char, u64)>,
    /// Since ABI 2.3: the plugin no longer reads a pending write's batch (see sink_abi.h).
    pub release: Option<unsafe extern "C" fn(*mut pmq_write_result)>,
    /// Since ABI 2.5: during open(), the one native plane this instance takes batches on.
    pub set_plane: Option<unsafe extern "C" fn(*mut c_void, u32)>,
    /// Since ABI 2.7: the definition's [[topics]] blocks as JSON (see sink_abi.h).
    pub subscriptions: *const c_char,
}

pub type OpenFn = unsafe extern "C" fn(*const pmq_host_api, *const c_char, *mut c_char, usize) -> *mut c_void;
pub type WriteRecordFn =
    unsafe extern "C" fn(*mut c_void, *const pmq_batch, usize, *mut pmq_write_result) -> pmq_write_status;
pub type WriteBatchFn = unsafe extern "C" fn(*mut c_void, *const pmq_batch, *mut pmq_write_result) -> pmq_write_status;
pub type WriteArrowFn =
    unsafe extern "C" fn(*mut c_void, *const pmq_arrow_batch, *mut pmq_write_result) -> pmq_write_status;
pub type ValidateFn = unsafe extern "C" fn(*const pmq_host_api, *const c_char, *mut c_char, usize) -> c_int;
pub type PartitionsFn = unsafe extern "C" fn(*mut c_void, u32, *const pmq_topic_partition, usize);

#[repr(C)]
pub struct pmq_sink_plugin {
    pub struct_size: usize,
    pub abi_version: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub description: *const c_char,
    pub accepted_planes: u32,
    pub native_planes: u32,
    pub options: *const pmq_option,
    pub option_count: usize,
    pub option_size: usize,
    pub open: Option<OpenFn>,
    pub write_record: Option<WriteRecordFn>,
    pub write_batch: Option<WriteBatchFn>,
    pub write_arrow: Option<WriteArrowFn>,
    pub close: Option<unsafe extern "C" fn(*mut c_void)>,
    pub max_in_flight: u32,
    pub validate: Option<ValidateFn>,
    pub flush: Option<unsafe extern "C" fn(*mut c_void, i64)>,
    pub partitions_assigned: Option<PartitionsFn>,
    pub partitions_revoked: Option<PartitionsFn>,
    /// Since ABI 2.6: the host is stopping the instance (not serialised with the other calls).
    pub stop: Option<unsafe extern "C" fn(*mut c_void)>,
    /// Since ABI 2.8: the change operations the sink applies (1 << pmq_change_op); 0: plain
    /// records only, and the host refuses `changes` for it.
    pub change_ops: u32,
    /// Since ABI 2.9: 1 when the sink takes a redrive of dead letters (records of a partition
    /// handed again after later offsets were written); 0: the host refuses redrives into it.
    pub takes_redrives: u32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct pmq_plane_spec {
    pub accepted_planes: u32,
    pub native_planes: u32,
    pub best_plane: u32,
}

extern "C" {
    /// The header's own `pmq_sink_plane_spec()` (a static inline), compiled by build.rs in
    /// `abi_probe.c`: the SDK's plane rules are the host's, not a re-implementation.
    pub fn picomq_rs_plane_spec(
        plugin: *const pmq_sink_plugin,
        spec: *mut pmq_plane_spec,
        errbuf: *mut c_char,
        errbuf_size: usize,
    ) -> c_int;
    /// sizeof / offsetof of the header's structs by name ("pmq_batch", "pmq_batch.topic"); -1 for
    /// a name the probe does not know. For the layout test.
    pub fn picomq_rs_layout(name: *const c_char) -> i64;
}
