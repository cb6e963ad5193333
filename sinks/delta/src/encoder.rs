//! The window's Parquet writer on a thread of its own.
//!
//! Encoding (dictionaries, zstd) is most of an append's CPU: on the delivery thread it was the
//! bottleneck while the consumer thread, which decodes and exports the next batches, idled
//! (bench/README.md, "sink_bench.sh with BENCH_SINK=delta"). Here a write is queued and the call
//! returns; the writes stay pending until the commit, which flushes the writer and so waits for
//! every queued write. A write that fails is reported by the next call that asks (`failure`), by
//! the flush at the latest: the window then fails whole, as before.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake_core::kernel::Add;
use deltalake_core::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use picomq_sink::Error;

/// Writes queued at most before `write` blocks: the runtime's buffer bounds what is pending, this
/// bounds what is decoded and waiting for the encoder (a few batches keep it busy).
const QUEUED_WRITES: usize = 4;

enum Job {
    Write(RecordBatch, WriteMode),
    /// The writer's schema once the writes before it are done (schema evolution widens it).
    Schema(SyncSender<SchemaRef>),
    /// The first failed write's error, if any, taken (the writer reset with it).
    TakeFailure(SyncSender<Option<Error>>),
    Flush(SyncSender<Result<Vec<Add>, Error>>),
}

pub struct BackgroundWriter {
    jobs: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
    schema: SchemaRef,
    buffered: Arc<AtomicUsize>,
    failed: Arc<AtomicBool>,
}

impl BackgroundWriter {
    /// `classify` turns the writer's errors into the sink's (retryable or fatal).
    pub fn start(
        writer: RecordBatchWriter,
        rt: tokio::runtime::Handle,
        classify: fn(&str, deltalake_core::DeltaTableError) -> Error,
    ) -> Result<Self, Error> {
        let schema = writer.arrow_schema();
        let (jobs, queue) = sync_channel(QUEUED_WRITES);
        let buffered = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let (b, f) = (buffered.clone(), failed.clone());
        let thread = std::thread::Builder::new()
            .name("picomq-delta-enc".into())
            .spawn(move || encode(writer, queue, rt, classify, b, f))
            .map_err(|e| Error::retry(format!("starting the Parquet encoder thread: {e}")))?;
        Ok(BackgroundWriter {
            jobs: Some(jobs),
            thread: Some(thread),
            schema,
            buffered,
            failed,
        })
    }

    /// The writer's schema as of the last `sync_schema` (or its start).
    pub fn arrow_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Parquet bytes buffered for the open files, as of the last write encoded.
    pub fn buffer_len(&self) -> usize {
        self.buffered.load(Ordering::Relaxed)
    }

    /// Queues a write (blocks while `QUEUED_WRITES` wait).
    pub fn write(&mut self, rows: RecordBatch, mode: WriteMode) -> Result<(), Error> {
        self.send(Job::Write(rows, mode))
    }

    /// Waits for the queued writes and takes the writer's schema.
    pub fn sync_schema(&mut self) -> Result<SchemaRef, Error> {
        let (tx, rx) = sync_channel(1);
        self.send(Job::Schema(tx))?;
        self.schema = rx.recv().map_err(|_| gone())?;
        Ok(self.schema.clone())
    }

    /// A queued write failed: its error (once; the writer is reset with it). Cheap when none did.
    pub fn failure(&mut self) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let (tx, rx) = sync_channel(1);
        if let Err(e) = self.send(Job::TakeFailure(tx)) {
            return Some(e);
        }
        rx.recv().unwrap_or_else(|_| Some(gone()))
    }

    /// Waits for the queued writes and closes the files: their `add` actions, or the first error.
    pub fn flush(&mut self) -> Result<Vec<Add>, Error> {
        let (tx, rx) = sync_channel(1);
        self.send(Job::Flush(tx))?;
        rx.recv().map_err(|_| gone())?
    }

    fn send(&mut self, job: Job) -> Result<(), Error> {
        match &self.jobs {
            Some(jobs) => jobs.send(job).map_err(|_| gone()),
            None => Err(gone()),
        }
    }
}

impl Drop for BackgroundWriter {
    /// Discards what is buffered (as dropping the writer did): the queue closes, the thread ends.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gone() -> Error {
    Error::retry("the Parquet encoder thread ended (a panic while encoding)")
}

fn encode(
    mut writer: RecordBatchWriter,
    queue: Receiver<Job>,
    rt: tokio::runtime::Handle,
    classify: fn(&str, deltalake_core::DeltaTableError) -> Error,
    buffered: Arc<AtomicUsize>,
    failed: Arc<AtomicBool>,
) {
    let mut failure: Option<Error> = None;
    for job in queue {
        match job {
            Job::Write(rows, mode) => {
                // After a failure the window is lost: later writes are dropped until it is taken.
                if failure.is_none() {
                    if let Err(e) = rt.block_on(writer.write_with_mode(rows, mode)) {
                        failure = Some(classify("writing Parquet", e));
                        failed.store(true, Ordering::Release);
                    }
                    buffered.store(writer.buffer_len(), Ordering::Relaxed);
                }
            }
            Job::Schema(reply) => {
                let _ = reply.send(writer.arrow_schema());
            }
            Job::TakeFailure(reply) => {
                let _ = reply.send(take_failure(&mut failure, &mut writer, &buffered, &failed));
            }
            Job::Flush(reply) => {
                let result = match take_failure(&mut failure, &mut writer, &buffered, &failed) {
                    Some(e) => Err(e),
                    None => rt
                        .block_on(writer.flush())
                        .map_err(|e| classify("writing the Parquet files", e)),
                };
                buffered.store(0, Ordering::Relaxed);
                let _ = reply.send(result);
            }
        }
    }
}

/// The failed window's error, taken: the writer drops the window's rows with it.
fn take_failure(
    failure: &mut Option<Error>,
    writer: &mut RecordBatchWriter,
    buffered: &AtomicUsize,
    failed: &AtomicBool,
) -> Option<Error> {
    let taken = failure.take();
    if taken.is_some() {
        writer.reset();
        buffered.store(0, Ordering::Relaxed);
        failed.store(false, Ordering::Release);
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use deltalake_core::{DeltaTableBuilder, DeltaTableError};
    use std::future::IntoFuture;

    fn classify(what: &str, e: DeltaTableError) -> Error {
        Error::retry(format!("{what}: {e}"))
    }

    /// A fresh local table with columns id (long) and s (string), and a writer for it.
    fn table(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> RecordBatchWriter {
        let url = url::Url::from_directory_path(dir).unwrap();
        let t = DeltaTableBuilder::from_url(url).unwrap().build().unwrap();
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]);
        let kernel: deltalake_core::kernel::StructType =
            deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel::try_into_kernel(&schema).unwrap();
        let t = rt
            .block_on(t.create().with_columns(kernel.fields().cloned()).into_future())
            .unwrap();
        RecordBatchWriter::for_table(&t).unwrap()
    }

    fn rows(from: i64, n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let ids: Vec<i64> = (from..from + n).collect();
        let s: Vec<String> = ids.iter().map(|i| format!("v{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(s))],
        )
        .unwrap()
    }

    /// Rows of a column the table does not have.
    fn foreign_rows() -> RecordBatch {
        let other = Arc::new(Schema::new(vec![Field::new("other", DataType::Int64, false)]));
        RecordBatch::try_new(other, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap()
    }

    /// Records in the files of `adds` (their statistics).
    fn records_in(adds: &[Add]) -> i64 {
        adds.iter().map(|a| a.get_stats().unwrap().unwrap().num_records).sum()
    }

    /// A writer on a fresh table in its own folder (named by `tag`), removed by the caller.
    fn started(rt: &tokio::runtime::Runtime, tag: &str) -> (BackgroundWriter, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("picomq-delta-encoder-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let w = BackgroundWriter::start(table(rt, &dir), rt.handle().clone(), classify).unwrap();
        (w, dir)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn queued_writes_are_all_in_the_flushed_files() {
        let rt = runtime();
        let (mut w, dir) = started(&rt, "a");
        for i in 0..50 {
            w.write(rows(i * 100, 100), WriteMode::Default).unwrap();
        }
        assert!(w.failure().is_none());
        let adds = w.flush().unwrap();
        assert_eq!(records_in(&adds), 5000);
        assert_eq!(w.buffer_len(), 0);
        // The writer goes on after a flush: the next window's files.
        w.write(rows(5000, 10), WriteMode::Default).unwrap();
        let adds = w.flush().unwrap();
        assert_eq!(records_in(&adds), 10);
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_is_reported_once_and_its_window_dropped() {
        let rt = runtime();
        let (mut w, dir) = started(&rt, "b");
        w.write(rows(0, 10), WriteMode::Default).unwrap();
        // A column the table does not have: delta-rs refuses the write (on the encoder thread).
        w.write(foreign_rows(), WriteMode::Default).unwrap();
        w.write(rows(10, 10), WriteMode::Default).unwrap();
        w.sync_schema().unwrap(); // every write before it is done
        let e = w.failure().expect("the refused write is reported");
        assert!(e.message.starts_with("writing Parquet"), "{}", e.message);
        assert!(w.failure().is_none(), "reported once");
        // The failed window's rows were discarded with it; the writer takes the next window.
        w.write(rows(20, 5), WriteMode::Default).unwrap();
        let adds = w.flush().unwrap();
        assert_eq!(records_in(&adds), 5);
        // A failure not asked for is the flush's error.
        w.write(foreign_rows(), WriteMode::Default).unwrap();
        assert!(w.flush().is_err());
        assert!(w.flush().unwrap().is_empty());
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
