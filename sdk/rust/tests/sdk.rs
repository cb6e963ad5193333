//! The SDK against a host written here in Rust over the raw ABI: descriptor and option table,
//! outcomes, rejections, pending completions from another thread, panics, zero-copy Arrow import,
//! partition notifications and the ABI's plane rules.
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use picomq_sink::abi::*;
use picomq_sink::arrow::array::{Array, Int64Array, StringArray, StructArray};
use picomq_sink::arrow::datatypes::{DataType, Field};
use picomq_sink::arrow::ffi::{to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use picomq_sink::*;

// ---- a host over the raw ABI ----

#[derive(Default)]
struct Outcome {
    errors: Vec<String>,
    rejected: Vec<(usize, String)>,
    completed: Vec<pmq_write_status>,
    released: usize,
}

struct FakeHost {
    config: HashMap<String, CString>,
    logs: Mutex<Vec<(i32, String)>>,
    counters: Mutex<HashMap<String, u64>>,
    sink_key: CString,
}

unsafe fn s(p: *const c_char) -> String {
    CStr::from_ptr(p).to_string_lossy().into_owned()
}
unsafe fn host_of<'a>(ctx: *mut c_void) -> &'a FakeHost {
    &*(ctx as *const FakeHost)
}
unsafe extern "C" fn log(ctx: *mut c_void, level: i32, m: *const c_char) {
    host_of(ctx).logs.lock().unwrap().push((level, s(m)));
}
unsafe extern "C" fn set_error(r: *mut pmq_write_result, m: *const c_char) {
    (*(r as *mut Mutex<Outcome>)).lock().unwrap().errors.push(s(m));
}
unsafe extern "C" fn reject(r: *mut pmq_write_result, i: usize, m: *const c_char) {
    (*(r as *mut Mutex<Outcome>)).lock().unwrap().rejected.push((i, s(m)));
}
unsafe extern "C" fn release(r: *mut pmq_write_result) {
    (*(r as *mut Mutex<Outcome>)).lock().unwrap().released += 1;
}
unsafe extern "C" fn complete(r: *mut pmq_write_result, st: pmq_write_status) {
    (*(r as *mut Mutex<Outcome>)).lock().unwrap().completed.push(st);
}
unsafe extern "C" fn has(ctx: *mut c_void, n: *const c_char) -> c_int {
    host_of(ctx).config.contains_key(&s(n)) as c_int
}
unsafe extern "C" fn string(ctx: *mut c_void, n: *const c_char) -> *const c_char {
    host_of(ctx)
        .config
        .get(&s(n))
        .map(|v| v.as_ptr())
        .unwrap_or(std::ptr::null())
}
unsafe extern "C" fn int(ctx: *mut c_void, n: *const c_char) -> i64 {
    host_of(ctx)
        .config
        .get(&s(n))
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(0)
}
unsafe extern "C" fn float(_: *mut c_void, _: *const c_char) -> f64 {
    0.0
}
unsafe extern "C" fn boolean(ctx: *mut c_void, n: *const c_char) -> c_int {
    host_of(ctx)
        .config
        .get(&s(n))
        .map(|v| v.to_str() == Ok("true"))
        .unwrap_or(false) as c_int
}
unsafe extern "C" fn list_size(_: *mut c_void, _: *const c_char) -> usize {
    0
}
unsafe extern "C" fn list_item(_: *mut c_void, _: *const c_char, _: usize) -> *const c_char {
    std::ptr::null()
}
unsafe extern "C" fn count(ctx: *mut c_void, n: *const c_char, v: u64) {
    *host_of(ctx).counters.lock().unwrap().entry(s(n)).or_default() += v;
}

fn make_host(config: &[(&str, &str)]) -> (Box<FakeHost>, Box<pmq_host_api>) {
    let host = Box::new(FakeHost {
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), CString::new(*v).unwrap()))
            .collect(),
        logs: Mutex::default(),
        counters: Mutex::default(),
        sink_key: CString::new("orders-sink").unwrap(),
    });
    let api = Box::new(pmq_host_api {
        struct_size: std::mem::size_of::<pmq_host_api>(),
        abi_version: PMQ_SINK_ABI_VERSION,
        host_ctx: &*host as *const FakeHost as *mut c_void,
        log: Some(log),
        set_error: Some(set_error),
        reject_record: Some(reject),
        config_has: Some(has),
        config_string: Some(string),
        config_int: Some(int),
        config_float: Some(float),
        config_bool: Some(boolean),
        config_list_size: Some(list_size),
        config_list_item: Some(list_item),
        config_json: Some(string),
        complete: Some(complete),
        set_unread_fields: None,
        set_max_in_flight: None,
        sink_key: host.sink_key.as_ptr(),
        count: Some(count),
        release: Some(release),
        set_plane: None,
        subscriptions: std::ptr::null(),
    });
    (host, api)
}

// ---- the sink under test: what it does is in each record's payload ----

static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct TestSink {
    host: Host,
    prefix: String,
    held: Vec<Pending>,
}

impl Sink for TestSink {
    const NAME: &'static str = "rust_test";
    const VERSION: &'static str = "1.2.3";
    const DESCRIPTION: &'static str = "A sink for the SDK's tests.";
    const ACCEPTED_PLANES: u32 = PLANE_ROWS | PLANE_BATCHES | PLANE_ARROW;
    const NATIVE_PLANES: u32 = PLANE_BATCHES | PLANE_ARROW;
    const MAX_IN_FLIGHT: u32 = 4;

    fn options() -> Vec<OptionSpec> {
        vec![
            OptionSpec::string("prefix").required().help("A prefix."),
            OptionSpec::string("compression")
                .default_str("zstd")
                .allowed(&["zstd", "snappy"])
                .help("Codec."),
            OptionSpec::string("token").secret().help("A secret."),
            OptionSpec::duration("commit_interval")
                .default("1000")
                .help("Interval."),
        ]
    }
    fn validate(config: &Host) -> Result<(), Vec<String>> {
        match config.config_string("prefix") {
            Some(p) if p.is_empty() => Err(vec!["prefix: must not be empty".into()]),
            _ => Ok(()),
        }
    }
    fn open(host: Host) -> Result<Self, Error> {
        let prefix = host.config_string("prefix").unwrap_or_default();
        if prefix == "refuse" {
            return Err(Error::fatal("prefix 'refuse' refused"));
        }
        if prefix == "panic" {
            panic!("open panicked on purpose");
        }
        Ok(TestSink {
            host,
            prefix,
            held: Vec::new(),
        })
    }
    fn write_batch(&mut self, batch: &Batch, call: &mut Call) -> Result<(), Error> {
        self.host.count("records", batch.len() as u64);
        for r in batch.records() {
            let p = std::str::from_utf8(r.payload().unwrap_or(b"")).unwrap().to_string();
            match p.as_str() {
                "retry" => return Err(Error::retry("destination busy")),
                "maybe" => return Err(Error::maybe_written("timed out")),
                "fatal" => return Err(Error::fatal("table missing")),
                "panic" => panic!("boom at {}", r.offset()),
                "reject" => call.reject(r.index(), "no thanks"),
                "pending-thread" => {
                    let done = call.pending();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(20));
                        done.done();
                    });
                }
                "pending-hold" => self.held.push(call.pending()),
                "pending-release" => {
                    let p = call.pending();
                    assert!(p.release(), "the first release reaches the host");
                    assert!(!p.release(), "a second one does not");
                    self.held.push(p);
                }
                "pending-now" => {
                    call.pending().done();
                }
                "pending-drop" => {
                    let _ = call.pending();
                }
                // A back-off of the sink's own, which the host's stop() ends.
                "wait-for-stop" if self.host.stop_signal().wait(Duration::from_secs(30)) => {
                    return Err(Error::retry("stopping during a back-off"));
                }
                _ => {}
            }
            EVENTS.lock().unwrap().push(format!(
                "{}{}:{}:{}",
                self.prefix,
                batch.topic(),
                batch.partition(),
                r.offset()
            ));
        }
        Ok(())
    }
    fn write_arrow(&mut self, batch: &mut ArrowBatch, _call: &mut Call) -> Result<(), Error> {
        let offsets = batch.offsets().to_vec();
        let rb = batch.take()?;
        let ids = rb
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        // The values buffer's address, to show the import did not copy.
        EVENTS.lock().unwrap().push(format!(
            "arrow {} rows {:?} ptr {:p}",
            rb.num_rows(),
            offsets,
            ids.values().as_ptr()
        ));
        Ok(())
    }
    fn flush(&mut self, _timeout: Duration) {
        for p in self.held.drain(..) {
            p.done();
        }
    }
    fn partitions_assigned(&mut self, block: u32, partitions: &[TopicPartition]) {
        EVENTS.lock().unwrap().push(format!("assigned {block} {partitions:?}"));
    }
    fn partitions_revoked(&mut self, block: u32, partitions: &[TopicPartition]) {
        EVENTS.lock().unwrap().push(format!("revoked {block} {partitions:?}"));
    }
    fn close(self) {
        self.host.log(LogLevel::Info, "closing");
    }
}

fn plugin() -> &'static Descriptor {
    static D: std::sync::OnceLock<Descriptor> = std::sync::OnceLock::new();
    D.get_or_init(descriptor::<TestSink>)
}

// Tests share EVENTS: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Opened {
    _host: Box<FakeHost>,
    api: Box<pmq_host_api>,
    instance: *mut c_void,
}

fn open_sink(config: &[(&str, &str)]) -> Result<Opened, String> {
    let (host, api) = make_host(config);
    let mut err = [0 as c_char; 256];
    let p = plugin().raw();
    let instance = unsafe { (p.open.unwrap())(&*api, c"{}".as_ptr(), err.as_mut_ptr(), err.len()) };
    if instance.is_null() {
        return Err(unsafe { s(err.as_ptr()) });
    }
    Ok(Opened {
        _host: host,
        api,
        instance,
    })
}

fn write(o: &Opened, payloads: &[&str]) -> (pmq_write_status, Arc<Mutex<Outcome>>) {
    let topic = CString::new("orders").unwrap();
    let schema = CString::new("raw").unwrap();
    let records: Vec<pmq_record> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| pmq_record {
            offset: 100 + i as i64,
            timestamp_ms: -1,
            key: pmq_bytes {
                data: std::ptr::null(),
                size: 0,
            },
            headers: std::ptr::null(),
            header_count: 0,
            payload: pmq_bytes {
                data: p.as_ptr(),
                size: p.len(),
            },
            op: 0,
            key_json: pmq_bytes {
                data: std::ptr::null(),
                size: 0,
            },
        })
        .collect();
    let batch = pmq_batch {
        struct_size: std::mem::size_of::<pmq_batch>(),
        topic: topic.as_ptr(),
        partition: 3,
        payload_format: PMQ_PAYLOAD_RAW,
        schema: schema.as_ptr(),
        records: records.as_ptr(),
        record_count: records.len(),
        record_size: std::mem::size_of::<pmq_record>(),
        block_index: 0,
        writer_schemas: std::ptr::null(),
        changes: 0,
    };
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let status = unsafe {
        (plugin().raw().write_batch.unwrap())(o.instance, &batch, Arc::as_ptr(&outcome) as *mut pmq_write_result)
    };
    (status, outcome)
}

/// Closes the instance; the host outlives the call (its log is read afterwards).
fn close(o: Opened) -> Box<FakeHost> {
    unsafe { (plugin().raw().close.unwrap())(o.instance) };
    drop(o.api);
    o._host
}

#[test]
fn the_descriptor_states_name_planes_and_the_option_table() {
    let p = plugin().raw();
    unsafe {
        assert_eq!(s(p.name), "rust_test");
        assert_eq!(s(p.version), "1.2.3");
        assert_eq!(s(p.description), "A sink for the SDK's tests.");
    }
    assert_eq!(p.abi_version, PMQ_SINK_ABI_VERSION);
    assert_eq!(p.struct_size, std::mem::size_of::<pmq_sink_plugin>());
    assert_eq!(p.max_in_flight, 4);
    assert!(p.write_batch.is_some() && p.write_arrow.is_some() && p.write_record.is_none());
    assert_eq!(p.option_count, 4);
    let opts = unsafe { std::slice::from_raw_parts(p.options, p.option_count) };
    unsafe {
        assert_eq!(s(opts[0].name), "prefix");
        assert_eq!(opts[0].flags, PMQ_OPTION_REQUIRED);
        assert!(opts[0].default_json.is_null());
        assert_eq!(s(opts[1].default_json), "\"zstd\"");
        assert_eq!(s(opts[1].allowed), "zstd|snappy");
        assert_eq!(opts[2].flags, PMQ_OPTION_SECRET);
        assert_eq!(opts[3].type_, PMQ_OPTION_DURATION);
        assert_eq!(s(opts[3].help), "Interval.");
    }
}

#[test]
fn plane_spec_is_the_abis_function() {
    let spec = plane_spec(plugin().raw()).unwrap();
    assert_eq!(spec.accepted_planes, PLANE_ROWS | PLANE_BATCHES | PLANE_ARROW);
    assert_eq!(spec.native_planes, PLANE_BATCHES | PLANE_ARROW);
    assert_eq!(spec.best_plane, PLANE_ARROW);

    // The same rules as the C++ SDK and the host: a copy of the descriptor, broken three ways.
    let mut raw = unsafe { std::ptr::read(plugin().raw()) };
    raw.accepted_planes = PLANE_BATCHES;
    assert_eq!(
        plane_spec(&raw).unwrap_err(),
        "declares native data plane 'arrow' but does not accept it"
    );
    raw.accepted_planes = PLANE_ARROW | PLANE_BATCHES;
    raw.write_arrow = None;
    assert_eq!(
        plane_spec(&raw).unwrap_err(),
        "declares native data plane 'arrow' but does not implement write_arrow"
    );
    raw.native_planes = 1 << 7;
    assert_eq!(plane_spec(&raw).unwrap_err(), "declares unknown data plane bits 0x80");
    // 0 means rows only, and rows native needs write_record.
    raw.native_planes = 0;
    raw.accepted_planes = 0;
    assert_eq!(
        plane_spec(&raw).unwrap_err(),
        "declares native data plane 'rows' but does not implement write_record"
    );
    unsafe extern "C" fn rows(
        _: *mut c_void,
        _: *const pmq_batch,
        _: usize,
        _: *mut pmq_write_result,
    ) -> pmq_write_status {
        PMQ_WRITE_OK
    }
    raw.write_record = Some(rows);
    let rows = plane_spec(&raw).unwrap();
    assert_eq!(
        (rows.accepted_planes, rows.native_planes, rows.best_plane),
        (PLANE_ROWS, PLANE_ROWS, PLANE_ROWS)
    );
}

#[test]
fn open_validate_and_their_failures() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(
        open_sink(&[("prefix", "refuse")]).err().unwrap(),
        "prefix 'refuse' refused"
    );
    let e = open_sink(&[("prefix", "panic")]).err().unwrap();
    assert!(
        e.contains("rust_test panicked in open: open panicked on purpose"),
        "{e}"
    );
    let (_h, api) = make_host(&[("prefix", "")]);
    let mut err = [0 as c_char; 256];
    let ok = unsafe { (plugin().raw().validate.unwrap())(&*api, c"{}".as_ptr(), err.as_mut_ptr(), 256) };
    assert_eq!(ok, 0);
    assert_eq!(unsafe { s(err.as_ptr()) }, "prefix: must not be empty");
    let (_h, api) = make_host(&[("prefix", "p-")]);
    assert_eq!(
        unsafe { (plugin().raw().validate.unwrap())(&*api, c"{}".as_ptr(), err.as_mut_ptr(), 256) },
        1
    );
}

#[test]
fn outcomes_map_to_the_abis_statuses_with_their_messages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    EVENTS.lock().unwrap().clear();
    let (st, _) = write(&o, &["a", "b"]);
    assert_eq!(st, PMQ_WRITE_OK);
    assert_eq!(*EVENTS.lock().unwrap(), vec!["p-orders:3:100", "p-orders:3:101"]);
    assert_eq!(o._host.counters.lock().unwrap()["records"], 2);

    for (payload, status, message) in [
        ("retry", PMQ_WRITE_RETRY, "destination busy"),
        ("maybe", PMQ_WRITE_PARTIAL, "timed out"),
        ("fatal", PMQ_WRITE_FATAL, "table missing"),
    ] {
        let (st, out) = write(&o, &["a", payload]);
        assert_eq!(st, status, "{payload}");
        assert_eq!(out.lock().unwrap().errors, vec![message.to_string()]);
    }
    let (st, out) = write(&o, &["a", "reject", "b"]);
    assert_eq!(st, PMQ_WRITE_REJECTED);
    assert_eq!(out.lock().unwrap().rejected, vec![(1, "no thanks".to_string())]);
    close(o);
}

#[test]
fn a_panic_never_crosses_the_boundary_it_is_a_fatal_outcome() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    let (st, out) = write(&o, &["a", "panic"]);
    assert_eq!(st, PMQ_WRITE_FATAL);
    assert_eq!(
        out.lock().unwrap().errors,
        vec!["rust_test panicked: boom at 101".to_string()]
    );
    // The instance still works afterwards.
    assert_eq!(write(&o, &["a"]).0, PMQ_WRITE_OK);
    close(o);
}

#[test]
fn pending_writes_complete_once_from_any_thread() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    // Completed from another thread after the call returned.
    let (st, out) = write(&o, &["pending-thread"]);
    assert_eq!(st, PMQ_WRITE_PENDING);
    for _ in 0..200 {
        if !out.lock().unwrap().completed.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(out.lock().unwrap().completed, vec![PMQ_WRITE_OK]);
    // Held until flush, with a rejection made before the handle was taken.
    let (st, out) = write(&o, &["reject", "pending-hold"]);
    assert_eq!(st, PMQ_WRITE_PENDING);
    assert!(out.lock().unwrap().completed.is_empty());
    unsafe { (plugin().raw().flush.unwrap())(o.instance, 1000) };
    assert_eq!(out.lock().unwrap().completed, vec![PMQ_WRITE_REJECTED]);
    // Released (ABI 2.3) once, then completed at flush.
    let (st, out) = write(&o, &["pending-release"]);
    assert_eq!(st, PMQ_WRITE_PENDING);
    assert_eq!(out.lock().unwrap().released, 1);
    unsafe { (plugin().raw().flush.unwrap())(o.instance, 1000) };
    assert_eq!(out.lock().unwrap().completed, vec![PMQ_WRITE_OK]);
    // Completed before the call returned: that is the call's own status, never a second completion.
    let (st, out) = write(&o, &["pending-now"]);
    assert_eq!(st, PMQ_WRITE_OK);
    assert!(out.lock().unwrap().completed.is_empty());
    // A handle nobody kept: maybe-written, said so.
    let (st, out) = write(&o, &["pending-drop"]);
    assert_eq!(st, PMQ_WRITE_PARTIAL);
    assert!(out.lock().unwrap().errors[0].contains("kept no handle"));
    // An error after taking a handle is the call's outcome.
    let (st, out) = write(&o, &["pending-hold", "fatal"]);
    assert_eq!(st, PMQ_WRITE_FATAL);
    unsafe { (plugin().raw().flush.unwrap())(o.instance, 1000) };
    assert!(
        out.lock().unwrap().completed.is_empty(),
        "a failed call is not completed again"
    );
    close(o);
}

#[test]
fn arrow_batches_are_imported_without_copying_and_moved_out() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    let ids = Int64Array::from(vec![7, 8, 9]);
    let ptr = format!("{:p}", ids.values().as_ptr());
    let strukt = StructArray::from(vec![
        (
            Arc::new(Field::new("id", DataType::Int64, false)),
            Arc::new(ids) as Arc<dyn Array>,
        ),
        (
            Arc::new(Field::new("name", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as _,
        ),
    ]);
    let (mut array, mut schema): (FFI_ArrowArray, FFI_ArrowSchema) = to_ffi(&strukt.to_data()).unwrap();
    let offsets = [40i64, 41, 42];
    let topic = CString::new("orders").unwrap();
    let batch = pmq_arrow_batch {
        struct_size: std::mem::size_of::<pmq_arrow_batch>(),
        topic: topic.as_ptr(),
        partition: 0,
        payload_format: PMQ_PAYLOAD_JSON,
        schema: topic.as_ptr(),
        arrow_schema: &mut schema,
        arrow_array: &mut array,
        offsets: offsets.as_ptr(),
        record_count: 3,
        block_index: 0,
    };
    EVENTS.lock().unwrap().clear();
    let outcome = Mutex::new(Outcome::default());
    let st = unsafe { (plugin().raw().write_arrow.unwrap())(o.instance, &batch, &outcome as *const _ as *mut _) };
    assert_eq!(st, PMQ_WRITE_OK, "{:?}", outcome.lock().unwrap().errors);
    assert_eq!(
        *EVENTS.lock().unwrap(),
        vec![format!("arrow 3 rows [40, 41, 42] ptr {ptr}")]
    );
    // Moved out: the host's structs are released (release == NULL), so it does not free them again.
    assert!(array.is_released());
    close(o);
}

#[test]
fn partition_notifications_and_close_reach_the_sink() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    EVENTS.lock().unwrap().clear();
    let t = CString::new("orders").unwrap();
    let tps = [
        pmq_topic_partition {
            topic: t.as_ptr(),
            partition: 0,
        },
        pmq_topic_partition {
            topic: t.as_ptr(),
            partition: 5,
        },
    ];
    unsafe {
        (plugin().raw().partitions_assigned.unwrap())(o.instance, 1, tps.as_ptr(), 2);
        (plugin().raw().partitions_revoked.unwrap())(o.instance, 1, tps.as_ptr(), 1);
    }
    assert_eq!(
        *EVENTS.lock().unwrap(),
        vec![
            "assigned 1 [TopicPartition { topic: \"orders\", partition: 0 }, TopicPartition { topic: \"orders\", partition: 5 }]",
            "revoked 1 [TopicPartition { topic: \"orders\", partition: 0 }]"
        ]
    );
    let key = unsafe { Host::from_raw(&*o.api) }.sink_key();
    assert_eq!(key.as_deref(), Some("orders-sink"));
    let host = close(o);
    assert_eq!(
        host.logs.lock().unwrap().last().unwrap(),
        &(PMQ_LOG_INFO, "closing".to_string())
    );
}

#[test]
fn stop_from_another_thread_ends_a_wait_in_a_write_at_once() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let o = open_sink(&[("prefix", "p-")]).unwrap();
    let stop = plugin().raw().stop.expect("the descriptor offers ABI 2.6 stop()");
    struct Ptr(*mut c_void);
    unsafe impl Send for Ptr {}
    let instance = Ptr(o.instance);
    let stopper = std::thread::spawn(move || {
        let instance = instance;
        std::thread::sleep(Duration::from_millis(100));
        unsafe { stop(instance.0) };
        unsafe { stop(instance.0) }; // may come more than once
    });
    let start = std::time::Instant::now();
    let (status, outcome) = write(&o, &["wait-for-stop"]);
    let waited = start.elapsed();
    stopper.join().unwrap();
    assert_eq!(status, PMQ_WRITE_RETRY);
    assert!(outcome.lock().unwrap().errors.iter().any(|e| e.contains("stopping")));
    assert!(
        waited < Duration::from_secs(5),
        "the 30 s wait ended by the stop, took {waited:?}"
    );
    // Once stopped, a later wait returns at once; close still works.
    let start = std::time::Instant::now();
    assert_eq!(write(&o, &["wait-for-stop"]).0, PMQ_WRITE_RETRY);
    assert!(start.elapsed() < Duration::from_secs(1));
    close(o);
}

#[test]
fn writer_schemas_are_read_per_record_and_absent_from_an_older_host() {
    let topic = CString::new("t").unwrap();
    let schema = CString::new("avro").unwrap();
    let v1 = CString::new(r#"{"type":"long"}"#).unwrap();
    let records: Vec<pmq_record> = (0..2)
        .map(|i| pmq_record {
            offset: i,
            timestamp_ms: -1,
            key: pmq_bytes {
                data: std::ptr::null(),
                size: 0,
            },
            headers: std::ptr::null(),
            header_count: 0,
            payload: pmq_bytes {
                data: b"1".as_ptr(),
                size: 1,
            },
            op: 0,
            key_json: pmq_bytes {
                data: std::ptr::null(),
                size: 0,
            },
        })
        .collect();
    let schemas = [v1.as_ptr(), std::ptr::null()];
    let mut raw = pmq_batch {
        struct_size: std::mem::size_of::<pmq_batch>(),
        topic: topic.as_ptr(),
        partition: 0,
        payload_format: PMQ_PAYLOAD_JSON,
        schema: schema.as_ptr(),
        records: records.as_ptr(),
        record_count: records.len(),
        record_size: std::mem::size_of::<pmq_record>(),
        block_index: 0,
        writer_schemas: schemas.as_ptr(),
        changes: 0,
    };
    let batch = unsafe { Batch::from_raw(&raw) };
    assert_eq!(batch.writer_schema(0), Some(r#"{"type":"long"}"#));
    assert_eq!(batch.writer_schema(1), None, "a tombstone has none");
    raw.struct_size = std::mem::offset_of!(pmq_batch, writer_schemas); // a 2.3 host's batch
    let older = unsafe { Batch::from_raw(&raw) };
    assert_eq!(older.writer_schema(0), None);
}

fn change_record(offset: i64, op: i32, key: Option<&'static str>, payload: Option<&'static str>) -> pmq_record {
    let b = |v: Option<&'static str>| pmq_bytes {
        data: v.map(|s| s.as_ptr()).unwrap_or(std::ptr::null()),
        size: v.map(str::len).unwrap_or(0),
    };
    pmq_record {
        offset,
        timestamp_ms: -1,
        key: b(key),
        headers: std::ptr::null(),
        header_count: 0,
        payload: b(payload),
        op,
        key_json: b(key),
    }
}

#[test]
fn change_ops_and_keys_are_read_per_record_and_absent_from_an_older_host() {
    let topic = CString::new("shop.public.customers").unwrap();
    let schema = CString::new("json").unwrap();
    let records = [
        change_record(0, PMQ_OP_UPSERT, Some(r#"{"id":1}"#), Some(r#"{"id":1,"n":"a"}"#)),
        change_record(1, PMQ_OP_DELETE, Some(r#"{"id":2}"#), None),
        change_record(2, PMQ_OP_TRUNCATE, None, None),
        change_record(3, PMQ_OP_PATCH, Some(r#"{"id":1}"#), Some(r#"{"n":"b"}"#)),
        change_record(4, 77, Some(r#"{"id":1}"#), None),
    ];
    let mut raw = pmq_batch {
        struct_size: std::mem::size_of::<pmq_batch>(),
        topic: topic.as_ptr(),
        partition: 0,
        payload_format: PMQ_PAYLOAD_JSON,
        schema: schema.as_ptr(),
        records: records.as_ptr(),
        record_count: records.len(),
        record_size: std::mem::size_of::<pmq_record>(),
        block_index: 0,
        writer_schemas: std::ptr::null(),
        changes: 1,
    };
    let batch = unsafe { Batch::from_raw(&raw) };
    assert!(batch.has_changes());
    let ops: Vec<_> = batch.records().map(|r| r.op()).collect();
    assert_eq!(
        ops,
        vec![
            Ok(ChangeOp::Upsert),
            Ok(ChangeOp::Delete),
            Ok(ChangeOp::Truncate),
            Ok(ChangeOp::Patch),
            Err(77)
        ]
    );
    assert_eq!(batch.record(0).key_json(), Some(&br#"{"id":1}"#[..]));
    assert_eq!(batch.record(1).key_json(), Some(&br#"{"id":2}"#[..]));
    assert_eq!(batch.record(1).payload(), None);
    assert_eq!(batch.record(2).key_json(), None, "a truncate has no key");
    assert_eq!(batch.record(3).payload(), Some(&br#"{"n":"b"}"#[..]));

    // A 2.7 host: records end before `op` (the stride is its record_size), the batch before
    // `changes`: plain records, no key_json.
    let short = std::mem::offset_of!(pmq_record, op);
    let mut buf = vec![0u64; short * records.len() / 8 + 1];
    for (i, r) in records.iter().enumerate() {
        unsafe {
            std::ptr::copy_nonoverlapping(
                r as *const pmq_record as *const u8,
                (buf.as_mut_ptr() as *mut u8).add(i * short),
                short,
            )
        };
    }
    raw.records = buf.as_ptr() as *const pmq_record;
    raw.record_size = short;
    raw.struct_size = std::mem::offset_of!(pmq_batch, changes);
    let older = unsafe { Batch::from_raw(&raw) };
    assert!(!older.has_changes());
    for r in older.records() {
        assert_eq!(r.op(), Ok(ChangeOp::Append));
        assert_eq!(r.key_json(), None);
        assert_eq!(r.offset(), r.index() as i64, "the stride is the host's record_size");
    }
    assert_eq!(older.record(0).payload(), Some(&br#"{"id":1,"n":"a"}"#[..]));
}

struct ChangeSink;

impl Sink for ChangeSink {
    const NAME: &'static str = "rust_changes";
    const NATIVE_PLANES: u32 = PLANE_BATCHES;
    const CHANGE_OPS: u32 = CHANGE_OPS_KEYED | ChangeOp::Truncate.bit();
    fn validate(config: &Host) -> Result<(), Vec<String>> {
        match config.subscriptions() {
            Some(blocks) if has_changes(&blocks) => Err(vec![format!("changes: block 0 is {}", blocks[0].changes)]),
            Some(_) => Ok(()),
            None => Err(vec!["no subscriptions".into()]),
        }
    }
    fn open(_host: Host) -> Result<Self, Error> {
        Ok(ChangeSink)
    }
}

#[test]
fn the_descriptor_declares_the_change_ops_and_validate_reads_the_blocks_changes() {
    assert_eq!(plugin().raw().change_ops, 0, "plain records only by default");
    let d = descriptor::<ChangeSink>();
    assert_eq!(
        d.raw().change_ops,
        (1 << PMQ_OP_UPSERT) | (1 << PMQ_OP_DELETE) | (1 << PMQ_OP_TRUNCATE)
    );
    assert_eq!(ChangeOp::Patch.bit(), 1 << PMQ_OP_PATCH);
    assert_eq!(ChangeOp::from_abi(PMQ_OP_PATCH).map(ChangeOp::abi), Some(PMQ_OP_PATCH));

    let validate = |api: &pmq_host_api| {
        let mut err = [0 as c_char; 256];
        let ok = unsafe { (d.raw().validate.unwrap())(api, c"{}".as_ptr(), err.as_mut_ptr(), err.len()) };
        (ok, unsafe { s(err.as_ptr()) })
    };
    let (_host, mut api) = make_host(&[]);
    assert_eq!(validate(&api), (0, "no subscriptions".to_string()));
    let blocks = CString::new(
        r#"[{"topics": ["a", "b"], "pattern": null, "changes": "debezium"}, {"topics": [], "pattern": "^x.*"}]"#,
    )
    .unwrap();
    api.subscriptions = blocks.as_ptr();
    assert_eq!(validate(&api), (0, "changes: block 0 is debezium".to_string()));
    let parsed = parse_subscriptions(blocks.to_str().unwrap()).unwrap();
    assert_eq!(
        parsed,
        vec![
            Subscription {
                topics: vec!["a".into(), "b".into()],
                pattern: None,
                changes: "debezium".into()
            },
            Subscription {
                topics: vec![],
                pattern: Some("^x.*".into()),
                changes: "none".into()
            },
        ]
    );
    let plain = CString::new(r#"[{"topics": ["a"], "pattern": null}]"#).unwrap();
    api.subscriptions = plain.as_ptr();
    assert_eq!(
        validate(&api).0,
        1,
        "a block without changes (a 2.7 host's JSON) is plain"
    );
    // A 2.6 host: the field is past its struct_size.
    api.subscriptions = blocks.as_ptr();
    api.struct_size = std::mem::offset_of!(pmq_host_api, subscriptions);
    assert_eq!(validate(&api), (0, "no subscriptions".to_string()));
    assert_eq!(parse_subscriptions("{}"), None);
}
