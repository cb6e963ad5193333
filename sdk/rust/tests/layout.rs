//! The hand-written repr(C) types against the header: every size and field offset as a C
//! compiler lays out include/picomq/sink_abi.h (abi_probe.c, compiled by build.rs).
use std::ffi::CString;
use std::mem::{offset_of, size_of};

use picomq_sink::abi::*;

fn c(name: &str) -> i64 {
    let n = CString::new(name).unwrap();
    let v = unsafe { picomq_rs_layout(n.as_ptr()) };
    assert!(v >= 0, "the probe does not know {name}");
    v
}

macro_rules! check_size {
    ($t:ty, $name:expr) => {
        assert_eq!(size_of::<$t>() as i64, c($name), "sizeof({})", $name);
    };
}
macro_rules! check_field {
    ($t:ty, $name:expr, $rs:ident => $cf:expr) => {
        assert_eq!(offset_of!($t, $rs) as i64, c(&format!("{}.{}", $name, $cf)), "offsetof({}, {})", $name, $cf);
    };
    ($t:ty, $name:expr, $($f:ident),+) => {
        $( check_field!($t, $name, $f => stringify!($f)); )+
    };
}

#[test]
fn every_struct_has_the_headers_size_and_field_offsets() {
    check_size!(pmq_bytes, "pmq_bytes");
    check_field!(pmq_bytes, "pmq_bytes", data, size);
    check_size!(pmq_header, "pmq_header");
    check_field!(pmq_header, "pmq_header", name, value);
    check_size!(pmq_record, "pmq_record");
    check_field!(
        pmq_record,
        "pmq_record",
        offset,
        timestamp_ms,
        key,
        headers,
        header_count,
        payload,
        op,
        key_json
    );
    check_size!(pmq_batch, "pmq_batch");
    check_field!(
        pmq_batch,
        "pmq_batch",
        struct_size,
        topic,
        partition,
        payload_format,
        schema,
        records,
        record_count,
        record_size,
        block_index,
        writer_schemas,
        changes
    );
    check_size!(pmq_arrow_batch, "pmq_arrow_batch");
    check_field!(
        pmq_arrow_batch,
        "pmq_arrow_batch",
        struct_size,
        topic,
        partition,
        payload_format,
        schema,
        arrow_schema,
        arrow_array,
        offsets,
        record_count,
        block_index
    );
    check_size!(pmq_topic_partition, "pmq_topic_partition");
    check_field!(pmq_topic_partition, "pmq_topic_partition", topic, partition);
    check_size!(pmq_option, "pmq_option");
    check_field!(pmq_option, "pmq_option", name, flags, default_json, allowed, help);
    check_field!(pmq_option, "pmq_option", type_ => "type");
    check_size!(pmq_host_api, "pmq_host_api");
    check_field!(
        pmq_host_api,
        "pmq_host_api",
        struct_size,
        abi_version,
        host_ctx,
        log,
        set_error,
        reject_record,
        config_has,
        config_string,
        config_int,
        config_float,
        config_bool,
        config_list_size,
        config_list_item,
        config_json,
        complete,
        set_unread_fields,
        set_max_in_flight,
        sink_key,
        count,
        release,
        set_plane,
        subscriptions
    );
    check_size!(pmq_sink_plugin, "pmq_sink_plugin");
    check_field!(
        pmq_sink_plugin,
        "pmq_sink_plugin",
        struct_size,
        abi_version,
        name,
        version,
        description,
        accepted_planes,
        native_planes,
        options,
        option_count,
        option_size,
        open,
        write_record,
        write_batch,
        write_arrow,
        close,
        max_in_flight,
        validate,
        flush,
        partitions_assigned,
        partitions_revoked,
        stop,
        change_ops
    );
    check_size!(pmq_plane_spec, "pmq_plane_spec");
    check_field!(
        pmq_plane_spec,
        "pmq_plane_spec",
        accepted_planes,
        native_planes,
        best_plane
    );
    check_size!(ArrowSchema, "struct ArrowSchema");
    check_size!(ArrowArray, "struct ArrowArray");
    check_size!(pmq_write_status, "pmq_write_status");
    assert_eq!(PMQ_SINK_ABI_VERSION as i64, c("PMQ_SINK_ABI_VERSION"));
    // pmq_change_op and the bits of change_ops (ABI 2.8).
    assert_eq!(PMQ_OP_APPEND as i64, c("PMQ_OP_APPEND"));
    assert_eq!(PMQ_OP_UPSERT as i64, c("PMQ_OP_UPSERT"));
    assert_eq!(PMQ_OP_DELETE as i64, c("PMQ_OP_DELETE"));
    assert_eq!(PMQ_OP_TRUNCATE as i64, c("PMQ_OP_TRUNCATE"));
    assert_eq!(PMQ_OP_PATCH as i64, c("PMQ_OP_PATCH"));
    assert_eq!(PMQ_CHANGE_OPS_KEYED as i64, c("PMQ_CHANGE_OPS_KEYED"));
}
