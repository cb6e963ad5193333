//! The descriptor a Sink exports and the extern "C" entry points behind it. Every entry point
//! runs the sink under catch_unwind: no panic crosses the boundary.
use std::cell::UnsafeCell;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::abi;
use crate::host::{c_string, Call, Host, LogLevel};
use crate::stop::StopState;
use crate::{panic_message, ArrowBatch, Batch, Error, Sink, TopicPartition};

/// The static descriptor of a sink type (owned strings and option rows behind the raw struct).
pub struct Descriptor {
    plugin: abi::pmq_sink_plugin,
    _strings: Vec<CString>,
    _options: Vec<abi::pmq_option>,
}

// SAFETY: immutable after construction; the raw pointers point into the owned vectors above.
unsafe impl Send for Descriptor {}
unsafe impl Sync for Descriptor {}

impl Descriptor {
    pub fn as_ptr(&self) -> *const abi::pmq_sink_plugin {
        &self.plugin
    }
    pub fn raw(&self) -> &abi::pmq_sink_plugin {
        &self.plugin
    }
}

struct Instance<S: Sink> {
    sink: Option<S>,
    host: Host,
}

/// What the host's instance pointer points to. `stop()` comes from another thread while a write
/// may hold the instance mutably: it touches only `stop`, the calls serialised by the host reach
/// `inner` through the cell.
struct Shell<S: Sink> {
    stop: Arc<StopState>,
    inner: UnsafeCell<Instance<S>>,
}

/// The instance behind the host's pointer, for a call the host serialises.
///
/// # Safety
/// `instance` is a live Shell<S> from open, and no other serialised call runs.
unsafe fn instance_of<'a, S: Sink>(instance: *mut c_void) -> &'a mut Instance<S> {
    &mut *(*(instance as *const Shell<S>)).inner.get()
}

/// Builds the descriptor of `S` (what export_sink! returns from picomq_sink_plugin_entry).
pub fn descriptor<S: Sink>() -> Descriptor {
    let mut strings = Vec::new();
    let mut keep = |s: &str| -> *const c_char {
        let c = c_string(s);
        let p = c.as_ptr();
        strings.push(c);
        p
    };
    let name = keep(S::NAME);
    let version = keep(S::VERSION);
    let description = if S::DESCRIPTION.is_empty() {
        std::ptr::null()
    } else {
        keep(S::DESCRIPTION)
    };
    let options: Vec<abi::pmq_option> = S::options()
        .iter()
        .map(|o| abi::pmq_option {
            name: keep(&o.name),
            type_: o.type_.abi(),
            flags: o.flags(),
            default_json: o.default_json.as_deref().map(&mut keep).unwrap_or(std::ptr::null()),
            allowed: if o.allowed.is_empty() {
                std::ptr::null()
            } else {
                keep(&o.allowed.join("|"))
            },
            help: keep(&o.help),
        })
        .collect();
    let native = S::NATIVE_PLANES;
    let accepted = if S::ACCEPTED_PLANES == 0 {
        native
    } else {
        S::ACCEPTED_PLANES
    };
    let plugin = abi::pmq_sink_plugin {
        struct_size: std::mem::size_of::<abi::pmq_sink_plugin>(),
        abi_version: abi::PMQ_SINK_ABI_VERSION,
        name,
        version,
        description,
        accepted_planes: accepted,
        native_planes: native,
        options: if options.is_empty() {
            std::ptr::null()
        } else {
            options.as_ptr()
        },
        option_count: options.len(),
        option_size: std::mem::size_of::<abi::pmq_option>(),
        open: Some(open::<S>),
        // A plane's function is set when the sink declares it native: the trait's default
        // methods exist for every plane, so "implemented" is the sink's declaration.
        write_record: (native & abi::PMQ_PLANE_ROWS != 0).then_some(write_record::<S> as abi::WriteRecordFn),
        write_batch: (native & abi::PMQ_PLANE_BATCHES != 0).then_some(write_batch::<S> as abi::WriteBatchFn),
        write_arrow: (native & abi::PMQ_PLANE_ARROW != 0).then_some(write_arrow::<S> as abi::WriteArrowFn),
        close: Some(close::<S>),
        max_in_flight: S::MAX_IN_FLIGHT,
        validate: Some(validate::<S>),
        flush: Some(flush::<S>),
        partitions_assigned: Some(assigned::<S>),
        partitions_revoked: Some(revoked::<S>),
        stop: Some(stop::<S>),
        // ABI 2.8: the change operations the sink applies (0: plain records only).
        change_ops: S::CHANGE_OPS,
        // ABI 2.9: whether the host may redrive dead letters into the sink.
        takes_redrives: u32::from(S::TAKES_REDRIVES),
    };
    Descriptor {
        plugin,
        _strings: strings,
        _options: options,
    }
}

/// The normalised data-plane contract of a descriptor, from the ABI's own pmq_sink_plane_spec()
/// (the same function the host's planner and the C++ SDK use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneSpec {
    pub accepted_planes: u32,
    pub native_planes: u32,
    pub best_plane: u32,
}

pub fn plane_spec(plugin: &abi::pmq_sink_plugin) -> Result<PlaneSpec, String> {
    let mut spec = abi::pmq_plane_spec::default();
    let mut err = [0 as c_char; 256];
    // SAFETY: a valid descriptor, a spec to fill and a buffer with its size.
    let ok = unsafe { abi::picomq_rs_plane_spec(plugin, &mut spec, err.as_mut_ptr(), err.len()) };
    if ok == 0 {
        return Err(unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned());
    }
    Ok(PlaneSpec {
        accepted_planes: spec.accepted_planes,
        native_planes: spec.native_planes,
        best_plane: spec.best_plane,
    })
}

fn write_errbuf(errbuf: *mut c_char, size: usize, message: &str) {
    if errbuf.is_null() || size == 0 {
        return;
    }
    // Cut at a character boundary so the host gets valid UTF-8.
    let mut end = message.len().min(size - 1);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let bytes = &message.as_bytes()[..end];
    // SAFETY: errbuf has `size` bytes; we write end < size bytes and a NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, errbuf, bytes.len());
        *errbuf.add(bytes.len()) = 0;
    }
}

unsafe extern "C" fn open<S: Sink>(
    host: *const abi::pmq_host_api,
    _config_json: *const c_char,
    errbuf: *mut c_char,
    errbuf_size: usize,
) -> *mut c_void {
    let stop = Arc::new(StopState::default());
    let h = Host::from_raw(host).with_stop(&stop);
    match catch_unwind(AssertUnwindSafe(|| S::open(h))) {
        Ok(Ok(sink)) => Box::into_raw(Box::new(Shell {
            stop,
            inner: UnsafeCell::new(Instance {
                sink: Some(sink),
                host: h,
            }),
        })) as *mut c_void,
        Ok(Err(e)) => {
            write_errbuf(errbuf, errbuf_size, &e.message);
            std::ptr::null_mut()
        }
        Err(p) => {
            write_errbuf(
                errbuf,
                errbuf_size,
                &format!("{} panicked in open: {}", S::NAME, panic_message(&*p)),
            );
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn validate<S: Sink>(
    host: *const abi::pmq_host_api,
    _config_json: *const c_char,
    errbuf: *mut c_char,
    errbuf_size: usize,
) -> c_int {
    let h = Host::from_raw(host);
    match catch_unwind(AssertUnwindSafe(|| S::validate(&h))) {
        Ok(Ok(())) => 1,
        Ok(Err(problems)) => {
            write_errbuf(errbuf, errbuf_size, &problems.join("\n"));
            0
        }
        Err(p) => {
            write_errbuf(
                errbuf,
                errbuf_size,
                &format!("{} panicked in validate: {}", S::NAME, panic_message(&*p)),
            );
            0
        }
    }
}

/// Runs one write under catch_unwind: a panic is a fatal outcome carrying its message.
unsafe fn run_write<S: Sink>(
    instance: *mut c_void,
    result: *mut abi::pmq_write_result,
    f: impl FnOnce(&mut S, &mut Call) -> Result<(), Error>,
) -> abi::pmq_write_status {
    let inst = instance_of::<S>(instance);
    let mut call = Call::new(inst.host, result);
    let Some(sink) = inst.sink.as_mut() else {
        call.set_error("write after close");
        return abi::PMQ_WRITE_FATAL;
    };
    let outcome = match catch_unwind(AssertUnwindSafe(|| f(sink, &mut call))) {
        Ok(r) => r,
        Err(p) => Err(Error::fatal(format!("{} panicked: {}", S::NAME, panic_message(&*p)))),
    };
    call.finish(outcome)
}

unsafe extern "C" fn write_record<S: Sink>(
    instance: *mut c_void,
    batch: *const abi::pmq_batch,
    index: usize,
    result: *mut abi::pmq_write_result,
) -> abi::pmq_write_status {
    run_write::<S>(instance, result, |sink, call| {
        sink.write_record(&Batch::from_raw(&*batch), index, call)
    })
}

unsafe extern "C" fn write_batch<S: Sink>(
    instance: *mut c_void,
    batch: *const abi::pmq_batch,
    result: *mut abi::pmq_write_result,
) -> abi::pmq_write_status {
    run_write::<S>(instance, result, |sink, call| {
        sink.write_batch(&Batch::from_raw(&*batch), call)
    })
}

unsafe extern "C" fn write_arrow<S: Sink>(
    instance: *mut c_void,
    batch: *const abi::pmq_arrow_batch,
    result: *mut abi::pmq_write_result,
) -> abi::pmq_write_status {
    run_write::<S>(instance, result, |sink, call| {
        sink.write_arrow(&mut ArrowBatch::from_raw(&*batch), call)
    })
}

/// Runs a call without an outcome (flush, notifications, close): a panic is logged as an error.
unsafe fn run_logged<S: Sink>(instance: *mut c_void, what: &str, f: impl FnOnce(&mut Instance<S>)) {
    let inst = instance_of::<S>(instance);
    let host = inst.host;
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(inst))) {
        host.log(
            LogLevel::Error,
            &format!("{} panicked in {what}: {}", S::NAME, panic_message(&*p)),
        );
    }
}

unsafe extern "C" fn flush<S: Sink>(instance: *mut c_void, timeout_ms: i64) {
    run_logged::<S>(instance, "flush", |inst| {
        if let Some(s) = inst.sink.as_mut() {
            s.flush(std::time::Duration::from_millis(timeout_ms.max(0) as u64))
        }
    })
}

unsafe extern "C" fn assigned<S: Sink>(
    instance: *mut c_void,
    block: u32,
    tps: *const abi::pmq_topic_partition,
    count: usize,
) {
    let list = TopicPartition::list(tps, count);
    run_logged::<S>(instance, "partitions_assigned", |inst| {
        if let Some(s) = inst.sink.as_mut() {
            s.partitions_assigned(block, &list)
        }
    })
}

unsafe extern "C" fn revoked<S: Sink>(
    instance: *mut c_void,
    block: u32,
    tps: *const abi::pmq_topic_partition,
    count: usize,
) {
    let list = TopicPartition::list(tps, count);
    run_logged::<S>(instance, "partitions_revoked", |inst| {
        if let Some(s) = inst.sink.as_mut() {
            s.partitions_revoked(block, &list)
        }
    })
}

unsafe extern "C" fn close<S: Sink>(instance: *mut c_void) {
    if instance.is_null() {
        return;
    }
    run_logged::<S>(instance, "close", |inst| {
        if let Some(s) = inst.sink.take() {
            s.close()
        }
    });
    drop(Box::from_raw(instance as *mut Shell<S>));
}

/// ABI 2.6: not serialised with the other calls; sets the signal the sink's waits end on.
unsafe extern "C" fn stop<S: Sink>(instance: *mut c_void) {
    if instance.is_null() {
        return;
    }
    (*(instance as *const Shell<S>)).stop.trigger();
}
