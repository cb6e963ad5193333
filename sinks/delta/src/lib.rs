//! picomq-connect's Delta Lake sink (`libpicomq_connector_delta_sink`), on the Rust SDK
//! (sdk/rust) and delta-rs (`deltalake-core`, no DataFusion).
//!
//! - Arrow plane: each batch is imported zero-copy, conformed to the table's schema (columns by
//!   name, cast to the table's types; a value the table cannot hold rejects its record), and
//!   streamed into Parquet files by delta-rs' RecordBatchWriter.
//! - Exactly once: a commit holds, besides the files' `add` actions, one `txn` action per
//!   topic-partition: appId `<app_id>-<topic>-<partition>`, version = the offset after the last
//!   record the commit holds. On assignment (and on the first batch of a partition, and after any
//!   failed commit) the sink reads those versions from the table and drops records below them, so
//!   a batch the runtime replays after a crash between the Delta commit and the offset commit is
//!   never written twice. Whenever it reads a newer state of the table it reads the versions of
//!   every partition it holds, not only those it was after (another commit with this app id, such
//!   as a killed run's landing late, may hold any of them), and it commits an open window before:
//!   a commit is conflict-checked only against the commits after the snapshot it is built on.
//! - On S3, commits are created with If-None-Match: * (put-if-absent); the store is checked to
//!   refuse a second one once per start, before the first write (storage::check_conditional_writes).
//! - Change events (docs/changes.md, `changes` on a block): taken on the batches plane; each commit
//!   window is a copy-on-write merge by the row's key, without DataFusion (changes.rs): the files
//!   that may hold a changed key are read and rewritten without those rows, plus each key's final
//!   row, in one commit with the `remove`s, the `add`s and the same txn actions as appends.
//! - Writes are pending until the commit that holds them succeeded: the commit happens when the
//!   held records, bytes or age reach roll_records / roll_bytes / commit_interval, on flush, on
//!   revoke and at shutdown. A failed commit fails every held write as retryable (the runtime
//!   sends them again; the versions re-read from the table drop what did land).
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use std::future::IntoFuture;

use deltalake_core::kernel::transaction::{CommitBuilder, TableReference, TransactionError};
use deltalake_core::kernel::{Action, LogicalFileView, Transaction};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::writer::RecordBatchWriter;
use deltalake_core::{DeltaTable, DeltaTableError};
use parquet::file::properties::WriterProperties;
use picomq_parquet::{Codec, ParquetOptions};
use picomq_sink::resend::Resends;
use picomq_sink::{
    export_sink, ArrowBatch, Batch, Call, ChangeOp, Error, Host, LogLevel, OptionSpec, Pending, Sink, TopicPartition,
    FIELD_HEADERS, PLANE_ARROW, PLANE_BATCHES,
};
use serde_json::{Map, Value};

mod changes;
mod encoder;
mod storage;

use encoder::BackgroundWriter;

type Tp = (String, i32);
/// A change's key object, and its row or columns (upsert, patch).
type KeyedRow = (Map<String, Value>, Option<Map<String, Value>>);

pub struct DeltaSink {
    host: Host,
    rt: tokio::runtime::Runtime,
    table: DeltaTable,
    table_uri: String,
    /// false until the first batch creates the table (create_table, the table missing at open).
    table_exists: bool,
    partition_by: Vec<String>,
    /// (column, strftime format): a text column filled from each record's timestamp.
    time_column: Option<(String, &'static str)>,
    app_id: String,
    /// The window's Parquet writer, encoding on its own thread (encoder.rs).
    writer: Option<BackgroundWriter>,
    props: WriterProperties,
    roll_records: usize,
    roll_bytes: usize,
    commit_interval: Duration,
    max_commit_retries: usize,
    schema_evolution: bool,
    /// The txn version of each partition as the table has it: records below are committed.
    versions: HashMap<Tp, i64>,
    /// Partitions whose version must be read again from the table before the next batch.
    stale: HashSet<Tp>,
    /// Records of failed commits that must come again before later ones are taken.
    resends: Resends,
    /// s3:// with s3_conditional_commits: the store's name, until the probe passed.
    probe: Option<String>,
    /// The probe's fatal answer, given again to any later write without probing again.
    refused: Option<Error>,
    /// The last commit found other commits before its version (delta-rs retried it on top of
    /// them): the versions of the partitions held are read again from the new state.
    others_committed: bool,
    /// The window: the next offset of each partition it holds, its writes, its size.
    next: BTreeMap<Tp, i64>,
    held: Vec<Pending>,
    held_records: usize,
    window_started: Option<Instant>,
    /// A block has `changes`: batches of changes on the batches plane, merged by key per window.
    changes: bool,
    /// The window's changes (changes mode).
    window: changes::Window,
    /// The key's field names (columns of the table), from the first change: every key has them.
    key_columns: Option<Vec<String>>,
}

impl DeltaSink {
    fn log(&self, level: LogLevel, m: &str) {
        self.host.log(level, m)
    }

    fn app_id_of(&self, tp: &Tp) -> String {
        format!("{}-{}-{}", self.app_id, tp.0, tp.1)
    }

    /// Reads the table's latest state, then the txn versions of `tps` and of every partition
    /// whose version is held: a newer state may hold a commit of another writer with this app id
    /// (a killed run's, landing late) for any of them, and a floor left at the older version
    /// would write its records again.
    ///
    /// An open window is committed first, on the snapshot its floors were read from: delta-rs
    /// conflict-checks a commit only against the commits after the snapshot it is built on, so a
    /// window committed on a newer snapshot would miss a commit holding its own partitions.
    fn load_versions(&mut self, tps: &[Tp]) -> Result<(), Error> {
        if !self.held.is_empty() || !self.next.is_empty() {
            // Its outcome completes its own writes (a failure marks its partitions stale).
            let _ = self.commit();
        }
        let mut all: Vec<Tp> = self.versions.keys().cloned().collect();
        for tp in tps {
            if !all.contains(tp) {
                all.push(tp.clone());
            }
        }
        let table = &mut self.table;
        if let Err(e) = self.rt.block_on(table.update_state()) {
            self.stale.extend(all);
            return Err(classify("reading the table's log", e));
        }
        self.read_versions(&all)
    }

    /// The txn versions of `tps` as the table state held now has them (no refresh). On an error
    /// every one of them is stale: the next batch reads them again.
    fn read_versions(&mut self, tps: &[Tp]) -> Result<(), Error> {
        let log_store = self.table.log_store();
        let mut read = Vec::with_capacity(tps.len());
        let result = (|| -> Result<(), Error> {
            let state = self
                .table
                .snapshot()
                .map_err(|e| classify("reading the table's log", e))?;
            for tp in tps {
                let app_id = self.app_id_of(tp);
                let v = self
                    .rt
                    .block_on(state.transaction_version(log_store.as_ref(), &app_id))
                    .map_err(|e| classify("reading the txn version", e))?;
                read.push((tp.clone(), app_id, v.unwrap_or(-1)));
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.stale.extend(tps.iter().cloned());
            return Err(e);
        }
        for (tp, app_id, v) in read {
            let before = self.versions.insert(tp.clone(), v);
            self.stale.remove(&tp);
            match before {
                Some(b) if v > b => {
                    self.host.count("raised_txn_versions", 1);
                    self.log(
                        LogLevel::Info,
                        &format!(
                            "{}[{}]: the table holds records up to offset {v}, beyond the {b} read before: another commit with txn {app_id} (a killed run's, landing late?); records below it are dropped",
                            tp.0, tp.1
                        ),
                    );
                }
                _ => self.log(
                    LogLevel::Debug,
                    &format!("{}[{}]: committed up to offset {} (txn {app_id})", tp.0, tp.1, v),
                ),
            }
        }
        Ok(())
    }

    /// Before the first write of an s3:// table (s3_conditional_commits): the store must refuse a
    /// second If-None-Match PUT of one key (storage::check_conditional_writes). Fatal when it does
    /// not; a retryable failure is asked again at the next write.
    fn check_store(&mut self) -> Result<(), Error> {
        if let Some(e) = &self.refused {
            return Err(e.clone());
        }
        let Some(store_name) = self.probe.clone() else {
            return Ok(());
        };
        let store = self.table.log_store().object_store(None);
        if let Err(e) = self.rt.block_on(storage::check_conditional_writes(store, &store_name)) {
            if e.kind == picomq_sink::ErrorKind::Fatal {
                self.refused = Some(e.clone());
            }
            return Err(e);
        }
        self.probe = None;
        self.log(
            LogLevel::Info,
            &format!(
                "the store ({store_name}) refuses a second If-None-Match: * PUT of one key (checked with {}): each commit version is written once",
                storage::PROBE
            ),
        );
        Ok(())
    }

    fn writer(&mut self) -> Result<&mut BackgroundWriter, Error> {
        if self.writer.is_none() {
            let w = RecordBatchWriter::for_table(&self.table)
                .map_err(|e| classify("starting a file", e))?
                .with_writer_properties(self.props.clone())
                .with_target_file_size(self.roll_bytes as u64);
            self.writer = Some(BackgroundWriter::start(w, self.rt.handle().clone(), classify)?);
        }
        Ok(self.writer.as_mut().unwrap())
    }

    /// The table's schema as the Parquet writer has it (widened by schema evolution).
    fn table_schema(&mut self) -> Result<SchemaRef, Error> {
        Ok(self.writer()?.arrow_schema())
    }

    /// Seals the window: one Delta commit with the files and a txn action per partition; then
    /// completes the held writes with its outcome.
    fn commit(&mut self) -> Result<(), Error> {
        if self.held.is_empty() && self.next.is_empty() {
            return Ok(());
        }
        let result = self.try_commit();
        // Committed, or to come again from the runtime (the failed writes): either way done here.
        let window = std::mem::take(&mut self.window);
        let held = std::mem::take(&mut self.held);
        match &result {
            Ok(()) => {
                if let Some(ms) = std::env::var("PICOMQ_DELTA_TEST_PAUSE_AFTER_COMMIT_MS")
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    // Test hook (sinks/delta/tests): hold the writes open after their Delta
                    // commit, so a test can kill the process before the offsets are committed.
                    std::thread::sleep(Duration::from_millis(ms));
                }
                for (tp, v) in std::mem::take(&mut self.next) {
                    self.versions.insert(tp, v);
                }
                if std::mem::take(&mut self.others_committed) {
                    // Commits of other writers came before ours: one with this app id (a killed
                    // run's, landing late) may hold partitions this window did not (those it did
                    // would have failed it: ConcurrentTransaction). Their floors are read again.
                    let all: Vec<Tp> = self.versions.keys().cloned().collect();
                    if let Err(e) = self.read_versions(&all) {
                        self.log(
                            LogLevel::Warn,
                            &format!("reading the txn versions after other writers' commits (read again at the next batch): {e}"),
                        );
                    }
                }
                self.host.count("commits", 1);
                self.host.count("written_records", self.held_records as u64);
                if window.truncates > 0 {
                    self.host.count("truncates", window.truncates);
                }
                held.iter().for_each(|p| {
                    p.done();
                });
            }
            Err(e) => {
                // Whatever landed, the versions in the table say it: read them again first; the
                // window's records come again before any later ones are taken.
                for (tp, n) in &self.next {
                    self.resends.failed(tp, n - 1);
                }
                self.stale.extend(self.next.keys().cloned());
                self.next.clear();
                self.writer = None; // what it buffered is discarded
                self.log(LogLevel::Warn, &format!("commit to {} failed: {e}", self.table_uri));
                held.iter().for_each(|p| {
                    p.fail(e);
                });
            }
        }
        self.held_records = 0;
        self.window_started = None;
        result
    }

    fn try_commit(&mut self) -> Result<(), Error> {
        let mut actions: Vec<Action> = if self.changes {
            self.merge_window()?
        } else {
            let adds = match self.writer.as_mut() {
                Some(w) => w.flush()?,
                None => Vec::new(),
            };
            adds.into_iter().map(Action::Add).collect()
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .ok();
        for (tp, v) in &self.next {
            actions.push(Action::Txn(Transaction::new_with_last_update(
                self.app_id_of(tp),
                *v,
                now,
            )));
        }
        let committed_schema = self.table.snapshot().ok().map(|s| s.snapshot().arrow_schema());
        let evolved = self.writer.as_ref().map(|w| w.arrow_schema()).filter(|s| {
            self.schema_evolution
                && committed_schema
                    .as_ref()
                    .map(|c| c.fields().len() != s.fields().len())
                    .unwrap_or(false)
        });
        if let Some(schema) = evolved {
            let kernel: deltalake_core::kernel::StructType =
                deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel::try_into_kernel(schema.as_ref())
                    .map_err(|e| Error::fatal(format!("the evolved schema: {e}")))?;
            let state = self.table.snapshot().map_err(|e| classify("reading the table", e))?;
            let metadata = deltalake_core::kernel::MetadataExt::with_schema(state.metadata().clone(), &kernel)
                .map_err(|e| Error::fatal(format!("the evolved schema: {e}")))?;
            actions.push(Action::Metadata(metadata));
        }
        let state = self.table.snapshot().map_err(|e| classify("reading the table", e))?;
        let read_version = state.version();
        let partition_cols: Vec<String> = state.metadata().partition_columns().to_vec();
        let operation = if self.changes {
            // A merge that read the whole table (no predicate): delta-rs' conflict checker fails
            // it on a concurrent commit that removed files or added files that are not blind
            // appends, instead of committing a rewrite built on rows that changed meanwhile.
            DeltaOperation::Merge {
                predicate: None,
                merge_predicate: self
                    .key_columns
                    .as_ref()
                    .map(|k| format!("by key ({}): picomq-connect change events", k.join(", "))),
                matched_predicates: Vec::new(),
                not_matched_predicates: Vec::new(),
                not_matched_by_source_predicates: Vec::new(),
            }
        } else {
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: (!partition_cols.is_empty()).then_some(partition_cols),
                predicate: None,
            }
        };
        let log_store = self.table.log_store();
        let finalized = self
            .rt
            .block_on(
                CommitBuilder::default()
                    .with_actions(actions)
                    .with_max_retries(self.max_commit_retries)
                    .build(Some(state as &dyn TableReference), log_store, operation)
                    .into_future(),
            )
            .map_err(|e| classify("committing", e))?;
        self.log(
            LogLevel::Debug,
            &format!("committed version {} of {}", finalized.version(), self.table_uri),
        );
        self.others_committed = finalized.version() > read_version + 1;
        self.table.state = Some(finalized.snapshot());
        if self.schema_evolution {
            // The writer's window is drained by flush; a widened schema needs a new writer.
            self.writer = None;
        }
        Ok(())
    }

    fn due(&self) -> bool {
        let bytes = self.writer.as_ref().map(|w| w.buffer_len()).unwrap_or(0);
        self.held_records >= self.roll_records
            || bytes >= self.roll_bytes
            || self.held.len() >= Self::MAX_IN_FLIGHT as usize
            || self
                .window_started
                .map(|t| t.elapsed() >= self.commit_interval)
                .unwrap_or(false)
    }
}

/// The type a created table gets for an exported column: Delta has microsecond timestamps (UTC),
/// signed integers, no Utf8View / null type.
fn delta_type(t: &ArrowType) -> ArrowType {
    match t {
        ArrowType::Timestamp(_, _) | ArrowType::Date64 => {
            ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        ArrowType::UInt8 | ArrowType::UInt16 => ArrowType::Int32,
        ArrowType::UInt32 | ArrowType::UInt64 => ArrowType::Int64,
        ArrowType::Utf8View | ArrowType::Null => ArrowType::Utf8,
        ArrowType::BinaryView => ArrowType::Binary,
        ArrowType::List(f) => ArrowType::List(Arc::new(f.as_ref().clone().with_data_type(delta_type(f.data_type())))),
        ArrowType::Struct(fs) => ArrowType::Struct(
            fs.iter()
                .map(|f| Arc::new(f.as_ref().clone().with_data_type(delta_type(f.data_type()))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Maps a delta-rs error to an outcome: storage trouble and commit conflicts are retried (the txn
/// versions make a retry safe); a missing table, permissions or a protocol the writer cannot
/// write are fatal.
fn classify(what: &str, e: DeltaTableError) -> Error {
    let message = format!("{what}: {e}");
    match &e {
        DeltaTableError::ObjectStore { source }
        | DeltaTableError::Transaction {
            source: TransactionError::ObjectStore { source },
        } => match source {
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                Error::fatal(message)
            }
            _ => Error::retry(message),
        },
        DeltaTableError::Transaction {
            source:
                TransactionError::UnsupportedTableFeatures(_)
                | TransactionError::TableFeaturesRequired(_)
                | TransactionError::DeltaTableAppendOnly,
        } => Error::fatal(message),
        DeltaTableError::Transaction { .. } => Error::retry(message),
        DeltaTableError::NotATable(_) | DeltaTableError::InvalidTableLocation(_) => Error::fatal(message),
        DeltaTableError::Io { .. } => Error::retry(message),
        _ => Error::retry(message),
    }
}

impl Sink for DeltaSink {
    const NAME: &'static str = "delta";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Appends Parquet files to an existing Delta Lake table (local filesystem or S3), exactly once per topic-partition through Delta txn actions; applies change events (upserts, deletes, patches, truncates by key) as a copy-on-write merge per commit.";
    /// Arrow for appends; batches (JSON rows with their op and key) for change events.
    const NATIVE_PLANES: u32 = PLANE_ARROW | PLANE_BATCHES;
    const MAX_IN_FLIGHT: u32 = 256;
    const CHANGE_OPS: u32 =
        ChangeOp::Upsert.bit() | ChangeOp::Delete.bit() | ChangeOp::Truncate.bit() | ChangeOp::Patch.bit();

    fn options() -> Vec<OptionSpec> {
        let mut o = vec![
            OptionSpec::string("table_uri").required().help(
                "The Delta table: a local path (or file:// URL) or s3://bucket/prefix. It must exist (Delta tables are created with their schema by their owner), unless create_table is set.",
            ),
            OptionSpec::string("app_id").help(
                "The prefix of the txn appIds (`<app_id>-<topic>-<partition>`); default: the definition's sink key. Two definitions writing one table need different ones.",
            ),
            OptionSpec::int("roll_records").default("100000").help(
                "Commit once this many records are held (the runtime's max_buffered_records also bounds a window: when its buffer is full it flushes).",
            ),
            OptionSpec::byte_size("roll_bytes").default("134217728").help(
                "Target Parquet file size; a file reaching it is closed and a new one started, and the window is committed.",
            ),
            OptionSpec::duration("commit_interval").default_str("10s").help("Commit at the latest this long after the window's first record."),
            OptionSpec::string("compression").default_str("zstd").allowed(&["zstd", "snappy", "none"]).help("Parquet compression codec."),
            OptionSpec::int("row_group_records").default("1048576").help("Records per Parquet row group at most."),
            OptionSpec::boolean("dictionary").default("true").help("Parquet dictionary encoding."),
            OptionSpec::boolean("schema_evolution").default("false").help(
                "Add payload fields the table does not have as new nullable columns (unpartitioned tables); otherwise a record carrying one is rejected.",
            ),
            OptionSpec::int("max_commit_retries").default("15").help(
                "Attempts of one commit against concurrent writers (each re-reads the log) before the window is retried by the runtime.",
            ),
            OptionSpec::boolean("create_table").default("false").help(
                "Create the table when there is none at table_uri, with the first batch's columns (the definition's arrow_schema, or the columns inferred from the records) and partition_by. Off by default: the spec's Delta expects an existing table.",
            ),
            OptionSpec::string_list("partition_by").help(
                "The partition columns of a table the sink creates (create_table); an existing table's partition columns are its own.",
            ),
            OptionSpec::string("time_column").help(
                "Adds a text column of this name to every row, from the record's timestamp (UTC) in time_column_format, e.g. to partition by record time (partition_by = [\"<it>\"]); never the wall clock, so a replay lands in the same partitions. The table must have it as a string column (create_table adds it).",
            ),
            OptionSpec::string("time_column_format").default_str("date").allowed(&["date", "hour", "month", "year"]).help(
                "time_column's text: date 2026-12-02, hour 2026-12-02-13, month 2026-12, year 2026.",
            ),
        ];
        o.extend(storage::options());
        o
    }

    fn validate(config: &Host) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if config.config_string("table_uri").unwrap_or_default().trim().is_empty() {
            problems.push("table_uri: must not be empty".to_string());
        }
        for k in ["roll_records", "row_group_records", "roll_bytes"] {
            if config.config_int(k) < 1 {
                problems.push(format!("{k}: must be at least 1"));
            }
        }
        if config.config_int("max_commit_retries") < 0 {
            problems.push("max_commit_retries: must not be negative".to_string());
        }
        if !config.config_list("partition_by").is_empty() && !config.config_bool("create_table") {
            problems.push(
                "partition_by: only used with create_table = true (an existing table's partition columns are its own)"
                    .to_string(),
            );
        }
        if config
            .config_string("time_column")
            .map(|c| c.trim().is_empty() && !c.is_empty())
            .unwrap_or(false)
        {
            problems.push("time_column: must not be blank".to_string());
        }
        problems.extend(storage::validate(config));
        problems.extend(validate_changes(config));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    fn open(host: Host) -> Result<Self, Error> {
        let table_uri = host.config_string("table_uri").unwrap_or_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("picomq-delta")
            .enable_all()
            .build()
            .map_err(|e| Error::fatal(format!("starting the I/O runtime: {e}")))?;
        let (table, table_exists) =
            rt.block_on(storage::load_table(&host, &table_uri, host.config_bool("create_table")))?;
        let time_column = host.config_string("time_column").filter(|c| !c.is_empty()).map(|c| {
            let format = match host.config_string("time_column_format").as_deref() {
                Some("hour") => "%Y-%m-%d-%H",
                Some("month") => "%Y-%m",
                Some("year") => "%Y",
                _ => "%Y-%m-%d",
            };
            (c, format)
        });
        // The kit's Parquet writer settings (sinkkit/parquet): the same files as the S3 sink's.
        let props = picomq_parquet::writer_properties(&ParquetOptions {
            codec: host
                .config_string("compression")
                .as_deref()
                .and_then(Codec::parse)
                .unwrap_or(Codec::Zstd),
            row_group_records: host.config_int("row_group_records").max(1) as usize,
            dictionary: host.config_bool("dictionary"),
            ..Default::default()
        })
        .map_err(Error::fatal)?;
        let app_id = host
            .config_string("app_id")
            .filter(|s| !s.is_empty())
            .or_else(|| host.sink_key())
            .ok_or_else(|| Error::fatal("app_id: not set and the host gives no sink key"))?;
        let probe = storage::is_s3(&table_uri).then(|| {
            let endpoint = host
                .config_string("s3_endpoint")
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "AWS S3".to_string());
            format!("{table_uri} at {endpoint}")
        });
        let probe = match probe {
            Some(store) if !host.config_bool("s3_conditional_commits") => {
                host.log(
                    LogLevel::Warn,
                    &format!("s3_conditional_commits = false: the store ({store}) is not checked to refuse a second If-None-Match: * PUT of one key. If it does not, a killed run's commit that lands late replaces the live run's commit of that version after its offsets were committed (its rows are lost), and two writers' commits of one version can replace each other"),
                );
                None
            }
            other => other,
        };
        let changes = host
            .subscriptions()
            .map(|blocks| picomq_sink::has_changes(&blocks))
            .unwrap_or(false);
        if changes {
            if !table_exists {
                return Err(Error::fatal(format!("table_uri: there is no Delta table at {table_uri}: under changes the sink applies them to an existing table (create it with its key columns first)")));
            }
            let state = table.snapshot().map_err(|e| classify("reading the table", e))?;
            let partitions = state.metadata().partition_columns().to_vec();
            if !partitions.is_empty() {
                return Err(Error::fatal(format!(
                    "changes: the table {table_uri} is partitioned by {}; the sink applies change events to unpartitioned tables only (docs/sinks/delta.md, Change events)",
                    partitions.join(", ")
                )));
            }
            // Changes come as JSON rows with their op and key; the Arrow export carries neither.
            host.set_plane(PLANE_BATCHES);
            host.set_unread_fields(FIELD_HEADERS);
        }
        let sink = DeltaSink {
            host,
            rt,
            table,
            table_uri: table_uri.clone(),
            table_exists,
            partition_by: host.config_list("partition_by"),
            time_column,
            app_id,
            writer: None,
            props,
            roll_records: host.config_int("roll_records").max(1) as usize,
            roll_bytes: host.config_int("roll_bytes").max(1) as usize,
            commit_interval: host.config_duration("commit_interval"),
            max_commit_retries: host.config_int("max_commit_retries").max(0) as usize,
            schema_evolution: host.config_bool("schema_evolution"),
            versions: HashMap::new(),
            stale: HashSet::new(),
            resends: Resends::default(),
            probe,
            refused: None,
            others_committed: false,
            next: BTreeMap::new(),
            held: Vec::new(),
            held_records: 0,
            window_started: None,
            changes,
            window: changes::Window::default(),
            key_columns: None,
        };
        if table_exists {
            let version = sink
                .table
                .version()
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into());
            sink.log(
                LogLevel::Info,
                &format!(
                    "{} the Delta table {table_uri} (version {version}), txn appIds {}-<topic>-<partition>",
                    if changes {
                        "applying change events (a copy-on-write merge by key per commit) to"
                    } else {
                        "appending to"
                    },
                    sink.app_id
                ),
            );
        } else {
            sink.log(LogLevel::Info, &format!("no Delta table at {table_uri} yet: the first batch creates it (create_table), txn appIds {}-<topic>-<partition>", sink.app_id));
        }
        Ok(sink)
    }

    fn write_arrow(&mut self, batch: &mut ArrowBatch, call: &mut Call) -> Result<(), Error> {
        let tp: Tp = (batch.topic().to_string(), batch.partition());
        let offsets = batch.offsets().to_vec();
        if offsets.is_empty() {
            return Ok(());
        }
        self.check_store()?;
        if let Some(err) = self.writer.as_mut().and_then(|w| w.failure()) {
            // A queued write of this window failed on the encoder thread: the held writes and
            // this one must come again.
            self.fail_window(&err);
            return Err(err);
        }
        let mut taken = None;
        if !self.table_exists {
            let rows = self.with_time_column(batch.take()?)?;
            self.create_table(&rows.schema())?;
            taken = Some(rows);
        }
        if !self.versions.contains_key(&tp) || self.stale.contains(&tp) {
            let mut tps: Vec<Tp> = self.stale.iter().cloned().collect();
            if !tps.contains(&tp) {
                tps.push(tp.clone());
            }
            self.load_versions(&tps)?;
        }
        let committed = self.versions.get(&tp).copied().unwrap_or(-1);
        let window_next = self.next.get(&tp).copied().unwrap_or(-1);
        let floor = committed.max(window_next);
        self.resends.check(&tp, offsets[0], floor)?;
        let last = *offsets.last().unwrap();
        if last < floor {
            // Everything here is in the table (or in this window) already: a replay.
            self.host.count("already_written_records", offsets.len() as u64);
            return Ok(());
        }
        let imported = match taken {
            Some(rows) => rows,
            None => self.with_time_column(batch.take()?)?,
        };
        let table_schema = self.table_schema()?;
        let (conformed, problems) = picomq_sink::conform::conform(&imported, &table_schema, self.schema_evolution);
        // Back to the table's nullability once the refused rows are gone (evolution: the widened one).
        let target = (!self.schema_evolution).then(|| table_schema.clone());
        if let Some(rows) = picomq_sink::conform::rows_to_write(conformed, &problems, &offsets, floor, call, target)? {
            let kept = rows.num_rows();
            let mode = if self.schema_evolution {
                deltalake_core::writer::WriteMode::MergeSchema
            } else {
                deltalake_core::writer::WriteMode::Default
            };
            let evolving = self.schema_evolution;
            let writer = self.writer()?;
            // Queued for the encoder thread; a widened schema is waited for (the next batch is
            // conformed to it).
            let mut r = writer.write(rows, mode);
            if r.is_ok() && evolving {
                r = writer
                    .sync_schema()
                    .map(|_| ())
                    .and_then(|()| writer.failure().map_or(Ok(()), Err));
            }
            if let Err(err) = r {
                // The writer's window is all-or-nothing: the held writes must come again.
                self.fail_window(&err);
                return Err(err);
            }
            self.held_records += kept;
        }
        self.next.insert(tp, last + 1);
        self.window_started.get_or_insert_with(Instant::now);
        self.held.push(call.pending());
        if self.due() {
            // The commit completes this call's handle too: its outcome is the call's status.
            let _ = self.commit();
        }
        Ok(())
    }

    fn write_batch(&mut self, batch: &Batch, call: &mut Call) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        if !self.changes || !batch.has_changes() {
            return Err(Error::fatal(
                "a batch of plain records on the batches plane: the sink takes plain records on the Arrow plane, and changes only from a definition whose every block has changes",
            ));
        }
        let tp: Tp = (batch.topic().to_string(), batch.partition());
        let first = batch.record(0).offset();
        let last = batch.record(batch.len() - 1).offset();
        let Some(floor) = self.admit(&tp, first, last, batch.len())? else {
            return Ok(());
        };
        let table_schema = self.table_schema()?;
        let payload_schema = changes::payload_schema(&table_schema);
        let mut admitted = 0usize;
        for r in batch.records() {
            if r.offset() < floor {
                continue; // committed already (a replay), or in this window
            }
            admitted += 1;
            let op = match r.op() {
                Ok(op) => op,
                Err(v) => {
                    call.reject(r.index(), &format!("change event: unknown operation {v}"));
                    continue;
                }
            };
            let meta = changes::Meta {
                topic: tp.0.clone(),
                partition: tp.1,
                offset: r.offset(),
                timestamp_ms: r.timestamp_ms(),
                key: r.key().map(<[u8]>::to_vec),
            };
            if op == ChangeOp::Truncate {
                self.window.apply(op, None, None, meta);
                continue;
            }
            match self.change_of(&r, op, &table_schema, &payload_schema) {
                Ok((key, payload)) => self.window.apply(op, Some(key), payload, meta),
                Err(why) => call.reject(r.index(), &why),
            }
        }
        self.held_records += admitted;
        self.next.insert(tp, last + 1);
        self.window_started.get_or_insert_with(Instant::now);
        // The window holds its own copy of the changes: the host may free the batch.
        let pending = call.pending();
        pending.release();
        self.held.push(pending);
        if self.due() {
            let _ = self.commit();
        }
        Ok(())
    }

    fn flush(&mut self, _timeout: Duration) {
        let _ = self.commit();
    }

    fn partitions_assigned(&mut self, _block: u32, partitions: &[TopicPartition]) {
        let tps: Vec<Tp> = partitions.iter().map(|p| (p.topic.clone(), p.partition)).collect();
        if !self.table_exists {
            // Nothing to read yet (create_table): the first batch creates the table, then reads them.
            return;
        }
        if let Err(e) = self.load_versions(&tps) {
            // The first batch of each partition reads them again.
            self.stale.extend(tps);
            self.log(
                LogLevel::Warn,
                &format!("reading the committed versions on assignment: {e}"),
            );
        }
    }

    fn partitions_revoked(&mut self, _block: u32, partitions: &[TopicPartition]) {
        let _ = self.commit();
        for p in partitions {
            let tp = (p.topic.clone(), p.partition);
            self.resends.forget(&tp);
            self.versions.remove(&tp);
        }
    }

    fn close(mut self) {
        let _ = self.commit();
    }
}

impl DeltaSink {
    /// The batch with time_column added (from pico_timestamp, the record's timestamp).
    fn with_time_column(&self, rows: RecordBatch) -> Result<RecordBatch, Error> {
        let Some((name, format)) = &self.time_column else {
            return Ok(rows);
        };
        let ts = rows.column_by_name("pico_timestamp").ok_or_else(|| {
            Error::fatal(format!("time_column {name}: the records have no pico_timestamp column to take the time from (keep the metadata columns in the Arrow export)"))
        })?;
        let ts = arrow::compute::cast(ts, &ArrowType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())))
            .map_err(|e| Error::fatal(format!("time_column {name}: pico_timestamp: {e}")))?;
        let options = FormatOptions::default()
            .with_timestamp_tz_format(Some(format))
            .with_null("");
        let formatter = ArrayFormatter::try_new(ts.as_ref(), &options)
            .map_err(|e| Error::fatal(format!("time_column {name}: {e}")))?;
        let text: StringArray = (0..ts.len())
            .map(|i| (!ts.is_null(i)).then(|| formatter.value(i).to_string()))
            .collect();
        let mut fields: Vec<Arc<Field>> = rows
            .schema()
            .fields()
            .iter()
            .filter(|f| f.name() != name)
            .cloned()
            .collect();
        let mut columns: Vec<ArrayRef> = rows
            .schema()
            .fields()
            .iter()
            .zip(rows.columns())
            .filter(|(f, _)| f.name() != name)
            .map(|(_, c)| c.clone())
            .collect();
        fields.push(Arc::new(Field::new(name, ArrowType::Utf8, true)));
        columns.push(Arc::new(text));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| Error::fatal(format!("time_column {name}: {e}")))
    }

    /// Creates the table from the first batch's columns (create_table), or takes the one another
    /// writer created meanwhile.
    fn create_table(&mut self, schema: &Schema) -> Result<(), Error> {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_data_type(delta_type(f.data_type())))
            .collect();
        let names: Vec<String> = fields.iter().map(|f| f.name().clone()).collect();
        for p in &self.partition_by {
            if !names.contains(p) {
                return Err(Error::fatal(format!(
                    "partition_by: the records have no column {p} (columns: {})",
                    names.join(", ")
                )));
            }
        }
        let kernel: deltalake_core::kernel::StructType =
            deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel::try_into_kernel(&Schema::new(fields))
                .map_err(|e| Error::fatal(format!("create_table: the records' columns as a Delta schema: {e}")))?;
        let builder = self
            .table
            .create()
            .with_columns(kernel.fields().cloned())
            .with_partition_columns(self.partition_by.clone())
            .with_save_mode(SaveMode::Ignore);
        let table = self
            .rt
            .block_on(builder.into_future())
            .map_err(|e| classify("creating the table", e))?;
        let version = table.version().map(|v| v.to_string()).unwrap_or_else(|| "none".into());
        self.table = table;
        self.table_exists = true;
        self.host.count("created_tables", 1);
        self.log(
            LogLevel::Info,
            &format!(
                "created the Delta table {} (version {version}): {} columns{}",
                self.table_uri,
                names.len(),
                if self.partition_by.is_empty() {
                    String::new()
                } else {
                    format!(", partitioned by {}", self.partition_by.join(", "))
                }
            ),
        );
        Ok(())
    }

    /// Before a batch of changes: the store checked, the partition's txn version read; None when
    /// every record of the batch is committed already (a replay), else the offset records start
    /// to count from.
    fn admit(&mut self, tp: &Tp, first: i64, last: i64, count: usize) -> Result<Option<i64>, Error> {
        self.check_store()?;
        if !self.versions.contains_key(tp) || self.stale.contains(tp) {
            let mut tps: Vec<Tp> = self.stale.iter().cloned().collect();
            if !tps.contains(tp) {
                tps.push(tp.clone());
            }
            self.load_versions(&tps)?;
        }
        let committed = self.versions.get(tp).copied().unwrap_or(-1);
        let window_next = self.next.get(tp).copied().unwrap_or(-1);
        let floor = committed.max(window_next);
        self.resends.check(tp, first, floor)?;
        if last < floor {
            self.host.count("already_written_records", count as u64);
            return Ok(None);
        }
        Ok(Some(floor))
    }

    /// A change's key object and row (upsert) or columns (patch), checked against the table: the
    /// reason to reject the record otherwise.
    fn change_of(
        &mut self,
        r: &picomq_sink::Record,
        op: ChangeOp,
        table: &Schema,
        payload_schema: &SchemaRef,
    ) -> Result<KeyedRow, String> {
        let text = r
            .key_json()
            .ok_or_else(|| "change event: the record has no row key".to_string())?;
        let key = match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(m)) if !m.is_empty() => m,
            _ => {
                return Err(format!(
                    "change event: the row key {} is not a JSON object",
                    String::from_utf8_lossy(text)
                ))
            }
        };
        let mut names: Vec<String> = key.keys().cloned().collect();
        names.sort();
        if let Some(why) = changes::key_problem(table, &names, &key) {
            return Err(format!("change event: {why}"));
        }
        match &self.key_columns {
            None => self.key_columns = Some(names),
            Some(k) if *k != names => {
                return Err(format!(
                    "change event: the row key has the fields {}, the earlier changes' keys {}: one table, one key",
                    names.join(", "),
                    k.join(", ")
                ))
            }
            Some(_) => {}
        }
        let row = match op {
            ChangeOp::Upsert | ChangeOp::Patch => {
                let text = r
                    .payload()
                    .ok_or_else(|| "change event: an upsert or patch without a row".to_string())?;
                let mut row = match serde_json::from_slice::<Value>(text) {
                    Ok(Value::Object(m)) => m,
                    _ => return Err("change event: the row is not a JSON object".to_string()),
                };
                // The key names the row: a row without the key's fields gets them.
                for (k, v) in &key {
                    row.entry(k.clone()).or_insert_with(|| v.clone());
                }
                if let Some(why) = changes::row_problem(table, payload_schema, &row, op == ChangeOp::Upsert) {
                    return Err(why);
                }
                Some(row)
            }
            _ => None,
        };
        Ok((key, row))
    }

    /// The window's changes as actions: the table's files that may hold a changed key are read,
    /// those holding one are removed and rewritten without its rows, with each key's final row
    /// (after a truncate every file is removed); the new files' adds.
    fn merge_window(&mut self) -> Result<Vec<Action>, Error> {
        if self.window.is_empty() {
            return Ok(Vec::new()); // only replays or rejected records: the txn actions alone
        }
        let schema = self.table_schema()?;
        let log_store = self.table.log_store();
        let views: Vec<LogicalFileView> = {
            use futures::TryStreamExt;
            let state = self.table.snapshot().map_err(|e| classify("reading the table", e))?;
            self.rt
                .block_on(state.snapshot().file_views(log_store.as_ref(), None).try_collect())
                .map_err(|e| classify("listing the table's files", e))?
        };
        if let Some(v) = views.iter().find(|v| v.deletion_vector_descriptor().is_some()) {
            return Err(Error::fatal(format!(
                "changes: the table's file {} has a deletion vector, which the sink does not read (it rewrites files whole)",
                v.path()
            )));
        }
        let key_columns = self.key_columns.clone().unwrap_or_default();
        let mut files = Vec::new();
        let mut removes = Vec::new();
        if self.window.truncated {
            removes.extend(views.iter().map(|v| v.remove_action(true)));
        } else if !key_columns.is_empty() {
            let keys: Vec<&Map<String, Value>> = self.window.keys.values().map(|s| &s.key).collect();
            let store = log_store.object_store(None);
            for (i, v) in views.iter().enumerate() {
                if !changes::may_hold(v.stats().as_deref(), &key_columns, &keys) {
                    continue;
                }
                let path = v.object_store_path();
                let bytes = self
                    .rt
                    .block_on(async {
                        use object_store::ObjectStoreExt;
                        store.get(&path).await?.bytes().await
                    })
                    .map_err(|e| classify(&format!("reading {path}"), DeltaTableError::ObjectStore { source: e }))?;
                let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|b| b.build())
                    .map_err(|e| Error::fatal(format!("reading the data file {path}: {e}")))?;
                for b in reader {
                    files.push((
                        i,
                        b.map_err(|e| Error::fatal(format!("reading the data file {path}: {e}")))?,
                    ));
                }
                self.host.count("read_files", 1);
            }
        }
        let merged = changes::merge(&schema, &key_columns, &self.window, &files)
            .map_err(|e| Error::fatal(format!("merging the change events: {e}")))?;
        removes.extend(merged.rewritten.iter().map(|&i| views[i].remove_action(true)));
        self.host.count("rewritten_files", removes.len() as u64);
        self.host.count("deleted_rows", merged.deleted_rows);
        let mut actions: Vec<Action> = removes.into_iter().map(Action::Remove).collect();
        if let Some(rows) = merged.rows {
            let writer = self.writer()?;
            writer.write(rows, deltalake_core::writer::WriteMode::Default)?;
            let adds = writer.flush()?;
            actions.extend(adds.into_iter().map(Action::Add));
        }
        Ok(actions)
    }

    fn fail_window(&mut self, e: &Error) {
        for (tp, n) in &self.next {
            self.resends.failed(tp, n - 1);
        }
        self.stale.extend(self.next.keys().cloned());
        self.next.clear();
        self.writer = None; // what it buffered is discarded
        for p in std::mem::take(&mut self.held) {
            p.fail(e);
        }
        self.window = changes::Window::default();
        self.held_records = 0;
        self.window_started = None;
    }
}

/// What `--check` refuses under `changes` (docs/sinks/delta.md, Change events): the options the
/// merge does not honour, and a definition mixing blocks with and without changes.
fn validate_changes(config: &Host) -> Vec<String> {
    let Some(blocks) = config.subscriptions() else {
        return Vec::new();
    };
    if !picomq_sink::has_changes(&blocks) {
        return Vec::new();
    }
    let mut problems = Vec::new();
    let why = "under changes (the sink merges change events by key into an existing, unpartitioned table: docs/sinks/delta.md, Change events)";
    if config.config_bool("schema_evolution") {
        problems.push(format!(
            "schema_evolution: not applied {why}; leave it out and add the columns to the table first"
        ));
    }
    if config.config_bool("create_table") {
        problems.push(format!(
            "create_table: not applied {why}; create the table with its key columns first"
        ));
    }
    if !config.config_list("partition_by").is_empty() {
        problems.push(format!("partition_by: not applied {why}"));
    }
    if config
        .config_string("time_column")
        .map(|c| !c.is_empty())
        .unwrap_or(false)
    {
        problems.push(format!("time_column: not applied {why}"));
    }
    if blocks.iter().any(|b| !b.has_changes()) {
        problems.push(
            "changes: every [[topics]] block of a Delta sink with changes needs them (the sink takes changes on the batches plane, plain records on the Arrow plane): write the other topics with another definition".to_string(),
        );
    }
    problems
}

export_sink!(DeltaSink);
