//! picomq-sink: write a picomq-connect sink in Rust, over the C ABI of
//! `include/picomq/sink_abi.h` (docs/abi.md), as the C++ SDK does in C++ (docs/sdk.md).
//!
//! ```ignore
//! struct MySink { host: picomq_sink::Host }
//! impl picomq_sink::Sink for MySink {
//!     const NAME: &'static str = "my_sink";
//!     const NATIVE_PLANES: u32 = picomq_sink::PLANE_BATCHES;
//!     fn options() -> Vec<picomq_sink::OptionSpec> { vec![picomq_sink::OptionSpec::string("path").required()] }
//!     fn open(host: picomq_sink::Host) -> Result<Self, picomq_sink::Error> { Ok(MySink { host }) }
//!     fn write_batch(&mut self, batch: &picomq_sink::Batch, call: &mut picomq_sink::Call) -> Result<(), picomq_sink::Error> { Ok(()) }
//! }
//! picomq_sink::export_sink!(MySink);
//! ```
//!
//! - A write returns `Ok(())` when everything it was given is durably written, or an [`Error`]
//!   (retry, maybe-written, fatal); `call.reject(i, why)` names refused records; `call.pending()`
//!   hands out a [`Pending`] that completes the write later, from any thread.
//! - No panic crosses the boundary: each entry point runs under `catch_unwind`; a panic in a write
//!   is a fatal outcome with the panic's message, in `open` a failed open, elsewhere a logged error.
//! - Arrow batches are imported zero-copy (`arrow::ffi`): [`ArrowBatch::take`] moves the host's
//!   C Data Interface structs out and gives a `RecordBatch` whose buffers are the host's.

pub mod abi;
mod batch;
pub mod conform;
mod export;
mod host;
mod options;
pub mod resend;
mod stop;

pub use batch::{ArrowBatch, Batch, ChangeOp, Header, PayloadFormat, Record, TopicPartition};
pub use export::{descriptor, plane_spec, Descriptor, PlaneSpec};
pub use host::{has_changes, parse_subscriptions, Call, Host, LogLevel, Pending, Subscription};
pub use options::{OptionSpec, OptionType};
pub use stop::Stop;

pub use arrow;

pub const PLANE_ROWS: u32 = abi::PMQ_PLANE_ROWS;
pub const PLANE_BATCHES: u32 = abi::PMQ_PLANE_BATCHES;
pub const PLANE_ARROW: u32 = abi::PMQ_PLANE_ARROW;
pub const FIELD_HEADERS: u32 = abi::PMQ_FIELD_HEADERS;
/// Upserts and deletes: what a sink must apply to be handed changes at all (`PMQ_CHANGE_OPS_KEYED`).
pub const CHANGE_OPS_KEYED: u32 = abi::PMQ_CHANGE_OPS_KEYED;

/// How a write (or open) failed; the runtime decides what happens to the offset from the kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Nothing was written; the same batch may be retried (PMQ_WRITE_RETRY).
    Retry,
    /// Possibly partly written; a retry relies on the sink being idempotent (PMQ_WRITE_PARTIAL).
    MaybeWritten,
    /// Retrying cannot help; the sink stops in Error (PMQ_WRITE_FATAL).
    Fatal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn retry(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Retry,
            message: message.into(),
        }
    }
    pub fn maybe_written(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::MaybeWritten,
            message: message.into(),
        }
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Fatal,
            message: message.into(),
        }
    }
    pub(crate) fn status(&self) -> abi::pmq_write_status {
        match self.kind {
            ErrorKind::Retry => abi::PMQ_WRITE_RETRY,
            ErrorKind::MaybeWritten => abi::PMQ_WRITE_PARTIAL,
            ErrorKind::Fatal => abi::PMQ_WRITE_FATAL,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// A sink. One value per instance; the host serialises every call into it (never two at once,
/// possibly from different threads), hence `Send` and `&mut self`.
pub trait Sink: Send + Sized + 'static {
    const NAME: &'static str;
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "";
    /// PLANE_* bits; rows are always accepted. Defaults to the native planes.
    const ACCEPTED_PLANES: u32 = 0;
    /// The planes the sink implements (write_record / write_batch / write_arrow).
    const NATIVE_PLANES: u32;
    /// Writes of one [[topics]] block that may be pending at once (see [`Call::pending`]).
    const MAX_IN_FLIGHT: u32 = 1;
    /// ABI 2.8: the change operations the sink applies, [`ChangeOp::bit`]s (at least
    /// [`CHANGE_OPS_KEYED`] to be handed a block with `changes`, docs/changes.md). 0: plain records
    /// only, and the host refuses `changes` for the sink at `--check`.
    const CHANGE_OPS: u32 = 0;
    /// ABI 2.9: true when the sink writes a record handed to it again long after later offsets
    /// of its partition were written (a redrive of dead letters, docs/operations.md). False: the
    /// host refuses redrives into it; keep it so for a sink that skips records below a
    /// per-partition high-water mark as replays.
    const TAKES_REDRIVES: bool = false;

    /// The [plugin_config] table; the host validates values against it before `open`.
    fn options() -> Vec<OptionSpec> {
        Vec::new()
    }
    /// Cross-option checks without I/O: one "<key>: <message>" per problem.
    fn validate(_config: &Host) -> Result<(), Vec<String>> {
        Ok(())
    }
    fn open(host: Host) -> Result<Self, Error>;

    fn write_record(&mut self, batch: &Batch, index: usize, call: &mut Call) -> Result<(), Error> {
        let _ = (batch, index, call);
        Err(Error::fatal(format!("{} does not implement write_record", Self::NAME)))
    }
    fn write_batch(&mut self, batch: &Batch, call: &mut Call) -> Result<(), Error> {
        let _ = (batch, call);
        Err(Error::fatal(format!("{} does not implement write_batch", Self::NAME)))
    }
    fn write_arrow(&mut self, batch: &mut ArrowBatch, call: &mut Call) -> Result<(), Error> {
        let _ = (batch, call);
        Err(Error::fatal(format!("{} does not implement write_arrow", Self::NAME)))
    }
    /// Seal and complete every pending write (shutdown, before a revoke, when idle).
    fn flush(&mut self, _timeout: std::time::Duration) {}
    fn partitions_assigned(&mut self, _block: u32, _partitions: &[TopicPartition]) {}
    fn partitions_revoked(&mut self, _block: u32, _partitions: &[TopicPartition]) {}
    fn close(self) {}
}

/// Exports `$sink` as this library's plugin: defines `picomq_sink_plugin_entry`.
#[macro_export]
macro_rules! export_sink {
    ($sink:ty) => {
        #[no_mangle]
        pub extern "C" fn picomq_sink_plugin_entry(_host_abi_version: u32) -> *const $crate::abi::pmq_sink_plugin {
            static DESCRIPTOR: ::std::sync::OnceLock<$crate::Descriptor> = ::std::sync::OnceLock::new();
            DESCRIPTOR.get_or_init($crate::descriptor::<$sink>).as_ptr()
        }
    };
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
