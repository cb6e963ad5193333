//! The host's services (log, config, counters) and the handles of one write call.
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::abi;
use crate::stop::{Stop, StopState};
use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// The host API of one instance: valid from open until close returns, usable from any thread
/// for log, count and config reads (the ABI's rules).
#[derive(Clone, Copy)]
pub struct Host {
    api: *const abi::pmq_host_api,
    /// The open instance's stop (null outside one: validate, from_raw); kept alive by the
    /// instance until close, as long as the API pointer.
    stop: *const StopState,
}

// SAFETY: the ABI makes log, count, config_* and the result callbacks callable from any thread
// while the instance is open; the pointer itself is immutable.
unsafe impl Send for Host {}
unsafe impl Sync for Host {}

/// A C string for the host; interior NULs (which C cannot carry) become U+FFFD.
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{fffd}")).expect("no NUL left")
}

fn opt_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        // SAFETY: the host hands NUL-terminated strings valid until close.
        Some(unsafe { CStr::from_ptr(p) }.to_str().unwrap_or(""))
    }
}

impl Host {
    /// # Safety
    /// `api` must be the host API the host passed to open/validate, valid while the Host is used.
    pub unsafe fn from_raw(api: *const abi::pmq_host_api) -> Self {
        Host {
            api,
            stop: std::ptr::null(),
        }
    }
    /// The Host of an open instance, whose [`Host::stop_signal`] is `stop`.
    pub(crate) fn with_stop(self, stop: &Arc<StopState>) -> Self {
        Host {
            stop: Arc::as_ptr(stop),
            ..self
        }
    }
    /// The instance's stop (ABI 2.6): a sink's own retry waits end on it ([`Stop::wait`]).
    /// Outside an open instance (validate) a signal the host never triggers.
    pub fn stop_signal(&self) -> Stop {
        if self.stop.is_null() {
            return Stop::new();
        }
        // SAFETY: `stop` came from Arc::as_ptr of the instance's Arc, alive until close, while
        // this Host may be used; one more strong count for the Stop handed out.
        unsafe {
            Arc::increment_strong_count(self.stop);
            Stop(Arc::from_raw(self.stop))
        }
    }
    pub fn raw(&self) -> *const abi::pmq_host_api {
        self.api
    }
    fn api(&self) -> &abi::pmq_host_api {
        // SAFETY: from_raw's contract.
        unsafe { &*self.api }
    }
    /// Whether the host's pmq_host_api has the field that ends at `end` (an older host's is shorter).
    fn has(&self, end: usize) -> bool {
        self.api().struct_size >= end
    }

    pub fn abi_version(&self) -> u32 {
        self.api().abi_version
    }

    pub fn log(&self, level: LogLevel, message: &str) {
        let api = self.api();
        if let Some(log) = api.log {
            let level = match level {
                LogLevel::Debug => abi::PMQ_LOG_DEBUG,
                LogLevel::Info => abi::PMQ_LOG_INFO,
                LogLevel::Warn => abi::PMQ_LOG_WARN,
                LogLevel::Error => abi::PMQ_LOG_ERROR,
            };
            let m = c_string(message);
            unsafe { log(api.host_ctx, level, m.as_ptr()) }
        }
    }

    /// Set, or has a default.
    pub fn config_has(&self, name: &str) -> bool {
        let api = self.api();
        let n = c_string(name);
        api.config_has
            .map(|f| unsafe { f(api.host_ctx, n.as_ptr()) } != 0)
            .unwrap_or(false)
    }
    pub fn config_string(&self, name: &str) -> Option<String> {
        let api = self.api();
        let n = c_string(name);
        api.config_string
            .and_then(|f| opt_str(unsafe { f(api.host_ctx, n.as_ptr()) }).map(str::to_string))
    }
    /// INT, DURATION (milliseconds) and BYTE_SIZE (bytes) options.
    pub fn config_int(&self, name: &str) -> i64 {
        let api = self.api();
        let n = c_string(name);
        api.config_int
            .map(|f| unsafe { f(api.host_ctx, n.as_ptr()) })
            .unwrap_or(0)
    }
    pub fn config_duration(&self, name: &str) -> std::time::Duration {
        std::time::Duration::from_millis(self.config_int(name).max(0) as u64)
    }
    pub fn config_float(&self, name: &str) -> f64 {
        let api = self.api();
        let n = c_string(name);
        api.config_float
            .map(|f| unsafe { f(api.host_ctx, n.as_ptr()) })
            .unwrap_or(0.0)
    }
    pub fn config_bool(&self, name: &str) -> bool {
        let api = self.api();
        let n = c_string(name);
        api.config_bool
            .map(|f| unsafe { f(api.host_ctx, n.as_ptr()) } != 0)
            .unwrap_or(false)
    }
    pub fn config_list(&self, name: &str) -> Vec<String> {
        let api = self.api();
        let n = c_string(name);
        let (Some(size), Some(item)) = (api.config_list_size, api.config_list_item) else {
            return Vec::new();
        };
        let count = unsafe { size(api.host_ctx, n.as_ptr()) };
        (0..count)
            .filter_map(|i| opt_str(unsafe { item(api.host_ctx, n.as_ptr(), i) }).map(str::to_string))
            .collect()
    }
    /// Any option as JSON text (TABLE options are read this way).
    pub fn config_json(&self, name: &str) -> Option<String> {
        let api = self.api();
        let n = c_string(name);
        api.config_json
            .and_then(|f| opt_str(unsafe { f(api.host_ctx, n.as_ptr()) }).map(str::to_string))
    }

    /// The definition's key of this sink (ABI 2.2; None from an older host).
    pub fn sink_key(&self) -> Option<String> {
        if !self.has(std::mem::offset_of!(abi::pmq_host_api, sink_key) + std::mem::size_of::<*const c_char>()) {
            return None;
        }
        opt_str(self.api().sink_key).map(str::to_string)
    }
    /// Adds n to the instance's counter `name` ([a-z0-9_]+); a no-op on an older host.
    pub fn count(&self, name: &str, n: u64) {
        let api = self.api();
        if !self.has(std::mem::offset_of!(abi::pmq_host_api, count) + std::mem::size_of::<usize>()) {
            return;
        }
        if let Some(count) = api.count {
            let c = c_string(name);
            unsafe { count(api.host_ctx, c.as_ptr(), n) }
        }
    }
    /// During open only: record fields (FIELD_HEADERS) this instance never reads.
    pub fn set_unread_fields(&self, fields: u32) {
        let api = self.api();
        if self.has(std::mem::offset_of!(abi::pmq_host_api, set_unread_fields) + std::mem::size_of::<usize>()) {
            if let Some(f) = api.set_unread_fields {
                unsafe { f(api.host_ctx, fields) }
            }
        }
    }
    /// During open only: at most n writes of a block pending at once.
    pub fn set_max_in_flight(&self, n: u32) {
        let api = self.api();
        if self.has(std::mem::offset_of!(abi::pmq_host_api, set_max_in_flight) + std::mem::size_of::<usize>()) {
            if let Some(f) = api.set_max_in_flight {
                unsafe { f(api.host_ctx, n) }
            }
        }
    }
    /// ABI 2.7: the definition's `[[topics]]` blocks as the host's JSON text; None from an older
    /// host (or one that offers none). In validate() and open(), and until close.
    pub fn subscriptions_json(&self) -> Option<String> {
        if !self.has(std::mem::offset_of!(abi::pmq_host_api, subscriptions) + std::mem::size_of::<*const c_char>()) {
            return None;
        }
        opt_str(self.api().subscriptions).map(str::to_string)
    }
    /// ABI 2.7: the definition's `[[topics]]` blocks (with each block's `changes`, ABI 2.8); None
    /// from an older host or for a text that is not the host's JSON.
    pub fn subscriptions(&self) -> Option<Vec<Subscription>> {
        parse_subscriptions(&self.subscriptions_json()?)
    }
    /// During open only (ABI 2.5): this instance takes its batches on `plane` (one PMQ_PLANE_*
    /// bit, a native plane of the descriptor) instead of the best native one.
    pub fn set_plane(&self, plane: u32) {
        let api = self.api();
        if self.has(std::mem::offset_of!(abi::pmq_host_api, set_plane) + std::mem::size_of::<usize>()) {
            if let Some(f) = api.set_plane {
                unsafe { f(api.host_ctx, plane) }
            }
        }
    }
}

/// One `[[topics]]` block of the definition, as the host passes them (ABI 2.7
/// `subscriptions`): what the instance can be handed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The explicit topic list.
    pub topics: Vec<String>,
    /// The block's pattern, anchored as the runtime matches it.
    pub pattern: Option<String>,
    /// ABI 2.8: the block's `changes`: "none" (default), "keyed" or "debezium" (docs/changes.md).
    pub changes: String,
}

impl Subscription {
    /// The block hands the sink change events.
    pub fn has_changes(&self) -> bool {
        self.changes != "none"
    }
}

/// Whether any block hands the sink change events.
pub fn has_changes(blocks: &[Subscription]) -> bool {
    blocks.iter().any(Subscription::has_changes)
}

/// The host's subscriptions JSON (`[{"topics": [...], "pattern": null, "changes": "none"}, ...]`);
/// None for a text that is not such an array.
pub fn parse_subscriptions(json: &str) -> Option<Vec<Subscription>> {
    let blocks: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut out = Vec::new();
    for b in blocks.as_array()? {
        let b = b.as_object()?;
        out.push(Subscription {
            topics: b
                .get("topics")
                .and_then(|t| t.as_array())
                .map(|t| t.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            pattern: b.get("pattern").and_then(|p| p.as_str()).map(str::to_string),
            changes: b.get("changes").and_then(|c| c.as_str()).unwrap_or("none").to_string(),
        });
    }
    Some(out)
}

/// One write call: its result handle, rejections, and the way to complete it later.
pub struct Call {
    host: Host,
    result: *mut abi::pmq_write_result,
    rejected: usize,
    pending: Option<Arc<PendingState>>,
}

impl Call {
    pub(crate) fn new(host: Host, result: *mut abi::pmq_write_result) -> Self {
        Call {
            host,
            result,
            rejected: 0,
            pending: None,
        }
    }
    pub fn host(&self) -> &Host {
        &self.host
    }
    /// The destination refused record `index` (of the batch) for `reason`; the others count as
    /// written when the write returns Ok.
    pub fn reject(&mut self, index: usize, reason: &str) {
        let r = c_string(reason);
        if let Some(f) = self.host.api().reject_record {
            unsafe { f(self.result, index, r.as_ptr()) }
        }
        self.rejected += 1;
    }
    pub fn rejected(&self) -> usize {
        self.rejected
    }
    /// Makes this write asynchronous: the write call returns PENDING when it returns Ok, and the
    /// handle (or a clone) completes it later, exactly once, from any thread. Until then the
    /// host keeps the batch alive; the sink keeps within its MAX_IN_FLIGHT.
    pub fn pending(&mut self) -> Pending {
        let state = self
            .pending
            .get_or_insert_with(|| {
                Arc::new(PendingState {
                    host: self.host,
                    result: SendPtr(self.result),
                    completion: Mutex::new(Completion {
                        in_call: true,
                        ..Completion::default()
                    }),
                    rejected: AtomicUsize::new(0),
                    released: std::sync::atomic::AtomicBool::new(false),
                })
            })
            .clone();
        state.rejected.fetch_add(self.rejected, Ordering::SeqCst);
        self.rejected = 0;
        Pending { state }
    }
    /// The status the call returns to the host, from the sink's Result.
    pub(crate) fn finish(self, outcome: Result<(), Error>) -> abi::pmq_write_status {
        if let Some(p) = &self.pending {
            p.rejected.fetch_add(self.rejected, Ordering::SeqCst);
            let mut c = p.completion.lock().unwrap_or_else(|e| e.into_inner());
            c.in_call = false;
            if outcome.is_ok() && !c.completed && Arc::strong_count(p) == 1 {
                // Ok with a handle nobody kept: nothing can complete it.
                c.completed = true;
                drop(c);
                self.set_error("the sink returned a pending write but kept no handle to complete it");
                return abi::PMQ_WRITE_PARTIAL;
            }
            if let Err(e) = &outcome {
                // The sink failed after taking a handle: the call's outcome is this error and
                // the handle must not complete it a second time.
                c.completed = true;
                drop(c);
                self.set_error(&e.message);
                return e.status();
            }
            if let Some((status, message)) = c.deferred.take() {
                drop(c);
                if let Some(m) = message {
                    self.set_error(&m);
                }
                return status;
            }
            return abi::PMQ_WRITE_PENDING;
        }
        match outcome {
            Err(e) => {
                self.set_error(&e.message);
                e.status()
            }
            Ok(()) if self.rejected > 0 => abi::PMQ_WRITE_REJECTED,
            Ok(()) => abi::PMQ_WRITE_OK,
        }
    }
    pub(crate) fn set_error(&self, message: &str) {
        let m = c_string(message);
        if let Some(f) = self.host.api().set_error {
            unsafe { f(self.result, m.as_ptr()) }
        }
    }
}

struct SendPtr(*mut abi::pmq_write_result);
// SAFETY: the ABI lets a pending result be completed (and rejected into) from any thread.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

#[derive(Default)]
struct Completion {
    /// The write call that made the handle has not returned yet: a completion now is kept and
    /// becomes the call's own status (the host never sees PENDING for it).
    in_call: bool,
    completed: bool,
    deferred: Option<(abi::pmq_write_status, Option<String>)>,
}

struct PendingState {
    host: Host,
    result: SendPtr,
    completion: Mutex<Completion>,
    rejected: AtomicUsize,
    released: std::sync::atomic::AtomicBool,
}

impl PendingState {
    fn complete(&self, status: abi::pmq_write_status, message: Option<&str>) -> bool {
        let mut c = self.completion.lock().unwrap_or_else(|e| e.into_inner());
        if c.completed {
            return false; // completes exactly once; later calls are ignored
        }
        c.completed = true;
        if c.in_call {
            c.deferred = Some((status, message.map(str::to_string)));
            return true;
        }
        drop(c);
        if let Some(m) = message {
            let m = c_string(m);
            if let Some(f) = self.host.api().set_error {
                unsafe { f(self.result.0, m.as_ptr()) }
            }
        }
        if let Some(f) = self.host.api().complete {
            unsafe { f(self.result.0, status) }
        }
        true
    }
    fn is_completed(&self) -> bool {
        self.completion.lock().unwrap_or_else(|e| e.into_inner()).completed
    }
}

/// The handle of a pending write (`Call::pending`): cloneable, `Send`, completes once. Dropping
/// the last handle of a write that was never completed completes it as maybe-written, so a lost
/// handle cannot stall the partition. Completed before the write call returned, it is simply
/// that call's outcome.
#[derive(Clone)]
pub struct Pending {
    state: Arc<PendingState>,
}

impl Pending {
    /// Every record is written (REJECTED when records were rejected).
    pub fn done(&self) -> bool {
        let status = if self.state.rejected.load(Ordering::SeqCst) > 0 {
            abi::PMQ_WRITE_REJECTED
        } else {
            abi::PMQ_WRITE_OK
        };
        self.state.complete(status, None)
    }
    pub fn reject(&self, index: usize, reason: &str) {
        if self.state.is_completed() {
            return;
        }
        let r = c_string(reason);
        if let Some(f) = self.state.host.api().reject_record {
            unsafe { f(self.state.result.0, index, r.as_ptr()) }
        }
        self.state.rejected.fetch_add(1, Ordering::SeqCst);
    }
    pub fn fail(&self, error: &Error) -> bool {
        self.state.complete(error.status(), Some(&error.message))
    }
    pub fn retry(&self, message: &str) -> bool {
        self.fail(&Error::retry(message))
    }
    pub fn maybe_written(&self, message: &str) -> bool {
        self.fail(&Error::maybe_written(message))
    }
    pub fn fatal(&self, message: &str) -> bool {
        self.fail(&Error::fatal(message))
    }
    pub fn is_completed(&self) -> bool {
        self.state.is_completed()
    }
    /// ABI 2.3: the sink holds what it needs of the batch (encoded or copied it), so the host
    /// may free it now; a failure after this makes the host read the records again from the
    /// broker (sink_abi.h). At most once, after any `reject`, before the completion. False (and
    /// nothing done) when already released or completed, or on a host older than 2.3.
    pub fn release(&self) -> bool {
        if self.state.is_completed() || self.state.released.swap(true, Ordering::SeqCst) {
            return false;
        }
        let host = &self.state.host;
        if !host.has(std::mem::offset_of!(abi::pmq_host_api, release) + std::mem::size_of::<usize>()) {
            return false;
        }
        match host.api().release {
            Some(f) => {
                unsafe { f(self.state.result.0) }
                true
            }
            None => false,
        }
    }
}

impl Drop for PendingState {
    fn drop(&mut self) {
        self.complete(
            abi::PMQ_WRITE_PARTIAL,
            Some("the sink dropped a pending write without completing it"),
        );
    }
}
