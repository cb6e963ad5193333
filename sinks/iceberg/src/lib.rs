//! picomq-connect's Apache Iceberg sink (`libpicomq_connector_iceberg_sink`), on the Rust SDK
//! (sdk/rust) and iceberg-rust (`iceberg`, `iceberg-catalog-rest`).
//!
//! - Arrow plane: each batch is imported zero-copy, conformed to the table's schema by column
//!   name (the SDK's `conform`: a value the table cannot hold rejects its record), split by the
//!   table's partition spec (identity, year/month/day/hour, bucket, truncate) and streamed into
//!   Parquet data files, one open file per partition value, rolled at `target_file_size`.
//! - A table per topic from the `table` template; the table must exist (Iceberg tables are
//!   created with their schema and partitioning by their owner).
//! - Exactly once: each commit is one `fast_append` snapshot whose summary carries the next
//!   offset of every topic-partition it holds and a commit id (src/offsets.rs). On assignment,
//!   on a partition's first batch and after any failed commit the sink reads those offsets from
//!   the table's snapshot ancestry and drops records below them, so records the runtime replays
//!   after a crash between the table commit and the offset commit are never appended twice.
//! - A write is pending until the commit that holds it succeeded: commits happen per table when
//!   its window reaches `commit_records` / `commit_bytes` / `max_open_files` / `commit_interval`,
//!   and on flush, revoke and shutdown. A commit asserts the snapshot its offsets were read from
//!   (`OnBase`): when another has landed since, the offsets are read again first; another commit
//!   of this app id holding the window's records (a killed run's, landing late) is not appended on
//!   again, other writers' snapshots are built on. A commit whose answer was lost is looked up by
//!   its commit id before anything is sent again.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use iceberg::arrow::{schema_to_arrow_schema, RecordBatchPartitionSplitter};
use iceberg::spec::DataFileFormat;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::{DataFileWriter, DataFileWriterBuilder};
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, DefaultLocationGenerator};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, Namespace, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::RestCatalogBuilder;
use iceberg_catalog_sql::SqlCatalogBuilder;
use parquet_58::basic::{Compression, ZstdLevel};
use parquet_58::file::properties::WriterProperties;
use picomq_sink::resend::Resends;
use picomq_sink::{
    export_sink, ArrowBatch, Call, Error, Host, LogLevel, OptionSpec, Pending, Sink, Stop, TopicPartition, PLANE_ARROW,
};

mod arrow58;
mod offsets;
mod orphans;
mod storage;

use offsets::Tp;

type FilesBuilder = DataFileWriterBuilder<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// The window's open data files: one writer for an unpartitioned table, a fan-out of one writer
/// per partition value otherwise. One per window: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Files {
    Unpartitioned(DataFileWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>),
    Partitioned {
        fanout: FanoutWriter<FilesBuilder>,
        splitter: RecordBatchPartitionSplitter,
        open: HashSet<String>,
    },
}

/// One destination table and its window (what the next commit will hold).
struct TableWindow {
    ident: TableIdent,
    table: Table,
    /// The snapshot the held partitions' offsets were read from (None: the table had none). A
    /// commit asserts it, so a snapshot that landed since is seen before records are appended.
    base: Option<i64>,
    /// The table's current schema as arrow-rs 59, field ids in the field metadata.
    schema: SchemaRef,
    files: Option<Files>,
    next: BTreeMap<Tp, i64>,
    held: Vec<Pending>,
    held_records: usize,
    held_bytes: usize,
    started: Option<Instant>,
}

pub struct IcebergSink {
    host: Host,
    /// The host's stop: ends the back-off of a table read riding out a catalog outage.
    stop: Stop,
    rt: tokio::runtime::Runtime,
    catalog: Box<dyn Catalog>,
    app_id: String,
    table_template: String,
    tables: HashMap<String, TableWindow>,
    /// The committed next offset of each partition as the table has it: records below are in.
    versions: HashMap<Tp, i64>,
    /// Partitions whose offsets must be read from their table again before the next batch.
    stale: HashSet<Tp>,
    /// Records of failed commits that must come again before later ones are taken.
    resends: Resends,
    props: WriterProperties,
    target_file_size: usize,
    commit_records: usize,
    commit_bytes: usize,
    max_open_files: usize,
    commit_interval: Duration,
    schema_evolution: bool,
    /// The tables' storage as the sink lists it (orphaned data files).
    files: Arc<storage::FilesFactory>,
    /// When this run started: its own files are never orphans to it.
    started: SystemTime,
    orphan_file_age: Duration,
    /// Tables whose orphaned data files this run has cleaned (once each, at its first commit).
    cleaned: HashSet<String>,
}

/// Maps an iceberg error to an outcome: a missing table or namespace, an invalid request or a
/// feature the writer lacks is fatal; the rest (I/O, 5xx, conflicts left after iceberg's own
/// retries) is retried by the runtime.
fn classify(what: &str, e: iceberg::Error) -> Error {
    let message = format!("{what}: {e}");
    if permanent(e.kind()) {
        Error::fatal(message)
    } else {
        Error::retry(message)
    }
}

fn permanent(kind: iceberg::ErrorKind) -> bool {
    use iceberg::ErrorKind as K;
    matches!(
        kind,
        K::TableNotFound | K::NamespaceNotFound | K::FeatureUnsupported | K::DataInvalid | K::PreconditionFailed
    )
}

/// How long a table read rides out a catalog that cannot be reached or answers 5xx (a restart, a
/// deploy), as object_store does for the data files; beyond it the write fails as a retry.
const CATALOG_READ_RETRY: Duration = Duration::from_secs(10);

/// Reads a table from the catalog, retrying what may pass (not a missing table, not an invalid
/// request) with a doubling back-off within CATALOG_READ_RETRY. A read changes nothing, so it is
/// safe to send again; the host's stop ends the wait at once.
fn load_table(
    rt: &tokio::runtime::Runtime,
    catalog: &dyn Catalog,
    stop: &Stop,
    ident: &TableIdent,
) -> iceberg::Result<Table> {
    let deadline = Instant::now() + CATALOG_READ_RETRY;
    let mut backoff = Duration::from_millis(100);
    loop {
        match rt.block_on(catalog.load_table(ident)) {
            Ok(table) => return Ok(table),
            Err(e) => {
                if permanent(e.kind()) || Instant::now() + backoff > deadline || stop.wait(backoff) {
                    return Err(e);
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// How many times a commit is rebuilt on snapshots of other writers that landed meanwhile.
const MAX_REBASES: usize = 10;

/// The catalog as a commit sees it: iceberg-rust reloads the table before each attempt (also
/// after a 409) and rebuilds the append on the snapshot it finds, asserting that one. A reload
/// that finds another snapshot than the base (the one the window's offsets were read from) fails
/// the commit instead, not retried, so the sink reads the offsets again before appending on it.
/// iceberg-rust 0.10 keeps `TransactionAction` to itself: this is the one place to check.
#[derive(Debug)]
struct OnBase<'a> {
    inner: &'a dyn Catalog,
    base: Option<i64>,
    moved: std::sync::Mutex<Option<Table>>,
}

impl<'a> OnBase<'a> {
    fn new(inner: &'a dyn Catalog, base: Option<i64>) -> Self {
        OnBase {
            inner,
            base,
            moved: std::sync::Mutex::new(None),
        }
    }

    /// The table as found when it had moved past the base.
    fn moved(&self) -> Option<Table> {
        self.moved.lock().expect("not poisoned").take()
    }
}

#[async_trait::async_trait]
impl Catalog for OnBase<'_> {
    async fn load_table(&self, ident: &TableIdent) -> iceberg::Result<Table> {
        let table = self.inner.load_table(ident).await?;
        let now = table.metadata().current_snapshot_id();
        if now == self.base {
            return Ok(table);
        }
        *self.moved.lock().expect("not poisoned") = Some(table);
        Err(iceberg::Error::new(
            iceberg::ErrorKind::CatalogCommitConflicts,
            format!(
                "{ident}: the table is at snapshot {now:?}, not at {:?} its offsets were read from",
                self.base
            ),
        )
        .with_retryable(false))
    }

    async fn update_table(&self, commit: iceberg::TableCommit) -> iceberg::Result<Table> {
        self.inner.update_table(commit).await
    }

    async fn list_namespaces(&self, parent: Option<&NamespaceIdent>) -> iceberg::Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }
    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }
    async fn get_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }
    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> iceberg::Result<bool> {
        self.inner.namespace_exists(namespace).await
    }
    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }
    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<()> {
        self.inner.drop_namespace(namespace).await
    }
    async fn list_tables(&self, namespace: &NamespaceIdent) -> iceberg::Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }
    async fn create_table(&self, namespace: &NamespaceIdent, creation: TableCreation) -> iceberg::Result<Table> {
        self.inner.create_table(namespace, creation).await
    }
    async fn drop_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.drop_table(table).await
    }
    async fn purge_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.purge_table(table).await
    }
    async fn table_exists(&self, table: &TableIdent) -> iceberg::Result<bool> {
        self.inner.table_exists(table).await
    }
    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> iceberg::Result<()> {
        self.inner.rename_table(src, dest).await
    }
    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> iceberg::Result<Table> {
        self.inner.register_table(table, metadata_location).await
    }
}

/// The table a topic's records go to: `{topic}` in the template, with the topic's dots as `_`
/// (a dot separates namespace levels).
fn table_name(template: &str, topic: &str) -> String {
    template.replace("{topic}", &topic.replace('.', "_"))
}

/// The SQL catalog's placeholder style for a database URL (iceberg-rust's names), or None when
/// the URL is not one of a database it can use.
fn sql_bind_style(uri: &str) -> Option<&'static str> {
    if uri.starts_with("sqlite:") {
        Some("QMark")
    } else if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
        Some("DollarNumeric")
    } else {
        None
    }
}

/// A URL with its password (`user:password@`) masked, for messages.
fn redact_url(uri: &str) -> String {
    match (uri.find("://"), uri.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &uri[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &uri[..scheme + 3], &uri[at..]),
                None => uri.to_string(),
            }
        }
        _ => uri.to_string(),
    }
}

fn parse_ident(name: &str) -> Result<TableIdent, Error> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return Err(Error::fatal(format!("table: '{name}' is not namespace.table")));
    }
    TableIdent::from_strs(parts).map_err(|e| Error::fatal(format!("table: '{name}': {e}")))
}

impl IcebergSink {
    fn log(&self, level: LogLevel, m: &str) {
        self.host.log(level, m)
    }

    /// The window of `name`'s table, loading the table the first time.
    fn window(&mut self, name: &str) -> Result<&mut TableWindow, Error> {
        if !self.tables.contains_key(name) {
            let ident = parse_ident(name)?;
            let table = load_table(&self.rt, self.catalog.as_ref(), &self.stop, &ident).map_err(|e| {
                if matches!(e.kind(), iceberg::ErrorKind::TableNotFound | iceberg::ErrorKind::NamespaceNotFound) {
                    Error::fatal(format!(
                        "table {name} does not exist in the catalog: the Iceberg sink appends to an existing table; create it with its schema and partition spec first ({e})"
                    ))
                } else {
                    classify(&format!("loading table {name}"), e)
                }
            })?;
            let schema = Self::arrow_schema(&table)?;
            self.log(
                LogLevel::Info,
                &format!(
                    "appending to the Iceberg table {name} at {} (snapshot {}), offsets under picomq.{}.*",
                    table.metadata().location(),
                    table
                        .metadata()
                        .current_snapshot_id()
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "none".into()),
                    self.app_id
                ),
            );
            self.tables.insert(
                name.to_string(),
                TableWindow {
                    ident,
                    base: table.metadata().current_snapshot_id(),
                    table,
                    schema,
                    files: None,
                    next: BTreeMap::new(),
                    held: Vec::new(),
                    held_records: 0,
                    held_bytes: 0,
                    started: None,
                },
            );
        }
        Ok(self.tables.get_mut(name).expect("inserted above"))
    }

    fn arrow_schema(table: &Table) -> Result<SchemaRef, Error> {
        let s58 = schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(|e| classify("the table's schema as Arrow", e))?;
        arrow58::schema_to_59(&s58).map_err(Error::fatal)
    }

    /// Reads the table again, then the committed offsets of `tps` and of every partition of the
    /// table whose offset is held: a newer snapshot may be another commit of this app id (a killed
    /// run's, landing late) holding any of them. An open window is committed first, on the
    /// snapshot its offsets were read from.
    fn load_versions(&mut self, name: &str, tps: &[Tp]) -> Result<(), Error> {
        self.window(name)?;
        let w = &self.tables[name];
        if !w.held.is_empty() || !w.next.is_empty() {
            // Its outcome completes its own writes (a failure marks its partitions stale).
            let _ = self.commit(name);
        }
        let ident = self.tables[name].ident.clone();
        let table = load_table(&self.rt, self.catalog.as_ref(), &self.stop, &ident)
            .map_err(|e| classify(&format!("reading table {name}"), e))?;
        let mut all: Vec<Tp> = self
            .versions
            .keys()
            .filter(|tp| table_name(&self.table_template, &tp.0) == name)
            .cloned()
            .collect();
        for tp in tps {
            if !all.contains(tp) {
                all.push(tp.clone());
            }
        }
        self.read_versions(name, &table, &all);
        let w = self.tables.get_mut(name).expect("loaded above");
        if w.table.metadata().current_schema_id() != table.metadata().current_schema_id() {
            w.schema = Self::arrow_schema(&table)?;
        }
        w.base = table.metadata().current_snapshot_id();
        w.table = table;
        Ok(())
    }

    /// Takes the committed offsets of `tps` from `table`'s snapshot summaries; returns the
    /// partitions whose offset rose past the one held (another commit of this app id).
    fn read_versions(&mut self, name: &str, table: &Table, tps: &[Tp]) -> Vec<Tp> {
        let found = offsets::committed(table.metadata(), &self.app_id, tps);
        let mut raised = Vec::new();
        for tp in tps {
            let v = found.get(tp).copied().unwrap_or(-1);
            self.stale.remove(tp);
            match self.versions.get(tp).copied() {
                Some(before) if v > before => {
                    self.host.count("raised_offsets", 1);
                    self.log(
                        LogLevel::Info,
                        &format!(
                            "{}[{}]: {name} holds records up to offset {v}, beyond the {before} read before: another commit of app id {} (a killed run's, landing late?); records below it are dropped",
                            tp.0, tp.1, self.app_id
                        ),
                    );
                    raised.push(tp.clone());
                }
                _ => self.log(
                    LogLevel::Debug,
                    &format!("{}[{}]: {name} holds records up to offset {v} (exclusive)", tp.0, tp.1),
                ),
            }
            self.versions.insert(tp.clone(), v);
        }
        raised
    }

    fn open_files(&self, w: &TableWindow) -> Result<Files, Error> {
        let metadata = w.table.metadata();
        let location = DefaultLocationGenerator::new(metadata).map_err(|e| classify("the table's data location", e))?;
        // A new name prefix per window: files of a window that failed never collide with a
        // later window's (they are left unreferenced, for the table's orphan-file cleanup).
        let names = DefaultFileNameGenerator::new(
            format!("picomq-{}-{}", self.app_id, uuid::Uuid::new_v4()),
            None,
            DataFileFormat::Parquet,
        );
        let parquet = ParquetWriterBuilder::new(self.props.clone(), metadata.current_schema().clone());
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            self.target_file_size,
            w.table.file_io().clone(),
            location,
            names,
        );
        let builder = DataFileWriterBuilder::new(rolling);
        let spec = metadata.default_partition_spec();
        if spec.is_unpartitioned() {
            let writer = self
                .rt
                .block_on(builder.build(None))
                .map_err(|e| classify("starting a data file", e))?;
            Ok(Files::Unpartitioned(writer))
        } else {
            let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
                metadata.current_schema().clone(),
                spec.clone(),
            )
            .map_err(|e| classify("the table's partition spec", e))?;
            Ok(Files::Partitioned {
                fanout: FanoutWriter::new(builder),
                splitter,
                open: HashSet::new(),
            })
        }
    }

    /// Commits `name`'s window (if it holds anything) and completes its writes with the outcome.
    fn commit(&mut self, name: &str) -> Result<(), Error> {
        let Some(w) = self.tables.get_mut(name) else {
            return Ok(());
        };
        if w.held.is_empty() && w.next.is_empty() {
            return Ok(());
        }
        let result = self.try_commit(name);
        let w = self.tables.get_mut(name).expect("committed above");
        let held = std::mem::take(&mut w.held);
        let next = std::mem::take(&mut w.next);
        let records = w.held_records;
        w.files = None;
        w.held_records = 0;
        w.held_bytes = 0;
        w.started = None;
        match &result {
            Ok(appended) => {
                if let Some(ms) = std::env::var("PICOMQ_ICEBERG_TEST_PAUSE_AFTER_COMMIT_MS")
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    // Test hook (sinks/iceberg/tests): hold the writes open after their table
                    // commit, so a test can kill the process before the offsets are committed.
                    std::thread::sleep(Duration::from_millis(ms));
                }
                for (tp, n) in next {
                    let v = self.versions.entry(tp).or_insert(n);
                    *v = (*v).max(n);
                }
                if *appended {
                    self.host.count("commits", 1);
                    self.host.count("written_records", records as u64);
                } else {
                    self.host.count("already_written_records", records as u64);
                }
                held.iter().for_each(|p| {
                    p.done();
                });
                if *appended && self.cleaned.insert(name.to_string()) {
                    self.clean_orphans(name);
                }
            }
            Err(e) => {
                // Whatever landed, the table's summaries say it: read them again first; the
                // window's records come again before any later ones are taken.
                for (tp, n) in &next {
                    self.resends.failed(tp, n - 1);
                }
                self.stale.extend(next.into_keys());
                self.log(LogLevel::Warn, &format!("commit to {name} failed: {e}"));
                held.iter().for_each(|p| {
                    p.fail(e);
                });
            }
        }
        result.map(|_| ())
    }

    /// Appends the window's files in one snapshot whose parent is the window's base (the snapshot
    /// its offsets were read from). Ok(false): another commit of this app id holds the whole
    /// window, nothing appended.
    fn try_commit(&mut self, name: &str) -> Result<bool, Error> {
        let app_id = self.app_id.clone();
        let w = self.tables.get_mut(name).expect("a window");
        let data_files = match w.files.take() {
            None => Vec::new(),
            Some(Files::Unpartitioned(mut writer)) => self
                .rt
                .block_on(writer.close())
                .map_err(|e| classify("closing the data files", e))?,
            Some(Files::Partitioned { fanout, .. }) => self
                .rt
                .block_on(fanout.close())
                .map_err(|e| classify("closing the data files", e))?,
        };
        if data_files.is_empty() {
            // Every record was a replay or rejected: nothing to append, nothing to record.
            return Ok(true);
        }
        let commit_id = uuid::Uuid::new_v4();
        let files = data_files.len();
        for _ in 0..MAX_REBASES {
            let w = self.tables.get_mut(name).expect("a window");
            let summary = offsets::summary_properties(&app_id, &commit_id.to_string(), &w.next);
            let tx = Transaction::new(&w.table);
            let append = tx
                .fast_append()
                .set_commit_uuid(commit_id)
                .set_snapshot_properties(summary)
                .add_data_files(data_files.clone());
            let tx = append.apply(tx).map_err(|e| classify("preparing the append", e))?;
            let catalog = OnBase::new(self.catalog.as_ref(), w.base);
            let committed = self.rt.block_on(tx.commit(&catalog));
            let moved = catalog.moved();
            let w = self.tables.get_mut(name).expect("a window");
            let e = match committed {
                Ok(table) => {
                    self.host.log(
                        LogLevel::Debug,
                        &format!(
                            "committed snapshot {} of {name}: {files} files",
                            table.metadata().current_snapshot_id().unwrap_or(-1)
                        ),
                    );
                    w.base = table.metadata().current_snapshot_id();
                    w.table = table;
                    return Ok(true);
                }
                Err(e) => e,
            };
            let Some(table) = moved else {
                return self.after_failed_commit(name, e, &commit_id.to_string());
            };
            if offsets::holds_commit(table.metadata(), &app_id, &commit_id.to_string(), 64) {
                // An earlier attempt of this commit landed and its answer was lost.
                self.host.log(
                    LogLevel::Info,
                    &format!("{name}: the commit whose answer was lost is in the table (commit id {commit_id})"),
                );
                w.base = table.metadata().current_snapshot_id();
                w.table = table;
                return Ok(true);
            }
            // Snapshots landed on the base: offsets of this app id in them are read before
            // anything is appended on top.
            let window: Vec<Tp> = w.next.keys().cloned().collect();
            let mut tps: Vec<Tp> = self
                .versions
                .keys()
                .filter(|tp| table_name(&self.table_template, &tp.0) == name)
                .cloned()
                .collect();
            tps.extend(window.iter().filter(|tp| !self.versions.contains_key(*tp)).cloned());
            let raised = self.read_versions(name, &table, &tps);
            let w = self.tables.get_mut(name).expect("a window");
            w.base = table.metadata().current_snapshot_id();
            w.table = table;
            let overlap: Vec<&Tp> = window.iter().filter(|tp| raised.contains(tp)).collect();
            if overlap.is_empty() {
                // Other writers' snapshots (or this app id's on other partitions): build on them.
                continue;
            }
            let covered = w
                .next
                .iter()
                .all(|(tp, n)| self.versions.get(tp).map(|v| v >= n).unwrap_or(false));
            if covered {
                self.log(
                    LogLevel::Info,
                    &format!(
                        "{name}: another commit of app id {app_id} holds every record of this window ({} partitions): nothing appended (its {files} files are orphans)",
                        window.len()
                    ),
                );
                return Ok(false);
            }
            // Part of the window is in the table: its records come again and the offsets just
            // read drop that part (the files hold it and cannot be cut).
            return Err(Error::retry(format!(
                "{name}: another commit of app id {app_id} landed since the offsets were read and holds part of this window ({}): the window is written again without it",
                overlap
                    .iter()
                    .map(|tp| format!("{}[{}] up to {}", tp.0, tp.1, self.versions[*tp]))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Err(Error::retry(format!(
            "{name}: other commits kept landing on the table ({MAX_REBASES} times) while this one was made"
        )))
    }

    /// A commit failed otherwise than on a moved base: its answer may be lost while it landed
    /// (timeout, 5xx), so the table is read again and searched for its commit id.
    fn after_failed_commit(&mut self, name: &str, e: iceberg::Error, commit_id: &str) -> Result<bool, Error> {
        let err = classify(&format!("committing to {name}"), e);
        let w = self.tables.get_mut(name).expect("a window");
        match load_table(&self.rt, self.catalog.as_ref(), &self.stop, &w.ident) {
            Ok(table) if offsets::holds_commit(table.metadata(), &self.app_id, commit_id, 64) => {
                self.host.log(
                    LogLevel::Info,
                    &format!(
                        "{name}: the commit whose answer was lost ({err}) is in the table (commit id {commit_id})"
                    ),
                );
                w.base = table.metadata().current_snapshot_id();
                w.table = table;
                Ok(true)
            }
            Ok(table) => {
                // The next batch reads the offsets (and the base) again: the window failed.
                w.table = table;
                Err(err)
            }
            Err(_) => Err(err),
        }
    }

    /// Removes this app id's data files of `name` that no snapshot references (src/orphans.rs),
    /// once, after this run's first commit to it. A failure is logged: it costs space, not data.
    fn clean_orphans(&mut self, name: &str) {
        let w = &self.tables[name];
        let before = self.started.min(
            SystemTime::now()
                .checked_sub(self.orphan_file_age)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        );
        let files = self.files.files(w.table.file_io().config());
        let took = Instant::now();
        let result = self
            .rt
            .block_on(orphans::listed(&files, &w.table, &self.app_id))
            .and_then(|listed| {
                // Read after the listing: what a commit referenced meanwhile is kept.
                let table = load_table(&self.rt, self.catalog.as_ref(), &self.stop, &w.ident)?;
                self.rt.block_on(orphans::remove(&files, &table, listed, before))
            });
        match result {
            Ok(c) => {
                self.host.count("orphan_files_removed", c.removed as u64);
                self.log(
                    if c.removed > 0 { LogLevel::Info } else { LogLevel::Debug },
                    &format!(
                        "{name}: removed {} orphaned data files of app id {} (no snapshot references them; {} of its files referenced, {} too recent) in {} ms",
                        c.removed,
                        self.app_id,
                        c.referenced,
                        c.recent,
                        took.elapsed().as_millis()
                    ),
                );
            }
            Err(e) => self.log(
                LogLevel::Warn,
                &format!("{name}: cleaning orphaned data files of app id {}: {e}", self.app_id),
            ),
        }
    }

    fn due(&self, w: &TableWindow) -> bool {
        let open = match &w.files {
            Some(Files::Partitioned { open, .. }) => open.len(),
            _ => 0,
        };
        w.held_records >= self.commit_records
            || w.held_bytes >= self.commit_bytes
            || open >= self.max_open_files
            || w.started.map(|t| t.elapsed() >= self.commit_interval).unwrap_or(false)
    }

    fn commit_all(&mut self) {
        let names: Vec<String> = self.tables.keys().cloned().collect();
        for n in names {
            let _ = self.commit(&n);
        }
    }

    /// A write failed mid-window: the window's files are abandoned and its writes retried.
    fn fail_window(&mut self, name: &str, e: &Error) {
        if let Some(w) = self.tables.get_mut(name) {
            let next = std::mem::take(&mut w.next);
            for (tp, n) in &next {
                self.resends.failed(tp, n - 1);
            }
            self.stale.extend(next.into_keys());
            w.files = None;
            for p in std::mem::take(&mut w.held) {
                p.fail(e);
            }
            w.held_records = 0;
            w.held_bytes = 0;
            w.started = None;
        }
    }

    /// Adds `fields` to `name`'s table as optional columns (one schema update commit), then takes
    /// the table's new schema. Another writer adding them first is fine: the table is re-read.
    fn evolve(&mut self, name: &str, fields: &[arrow::datatypes::FieldRef]) -> Result<(), Error> {
        let w = self.tables.get_mut(name).expect("a window");
        let mut update = Transaction::new(&w.table).update_schema();
        for f in fields {
            let dt58 = arrow58::data_type_to_58(f.data_type()).map_err(Error::fatal)?;
            let ty = iceberg::arrow::arrow_type_to_type(&dt58)
                .map_err(|e| classify(&format!("field '{}' as an Iceberg type", f.name()), e))?;
            update = update.add_column(iceberg::transaction::AddColumn::optional(f.name(), ty));
        }
        let tx = update
            .apply(Transaction::new(&w.table))
            .map_err(|e| classify("preparing the schema update", e))?;
        let added: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        let result = self.rt.block_on(tx.commit(self.catalog.as_ref()));
        let table = match result {
            Ok(t) => t,
            Err(e) => {
                let err = classify(&format!("adding columns {added:?} to {name}"), e);
                // Re-read: another writer may have added them, or the update may have landed.
                let t = load_table(&self.rt, self.catalog.as_ref(), &self.stop, &w.ident).map_err(|_| err.clone())?;
                let have = schema_to_arrow_schema(t.metadata().current_schema())
                    .map(|s| added.iter().all(|a| s.field_with_name(a).is_ok()));
                w.table = t;
                w.schema = Self::arrow_schema(&w.table)?;
                if have.unwrap_or(false) {
                    return Ok(());
                }
                return Err(err);
            }
        };
        self.log(
            LogLevel::Info,
            &format!(
                "{name}: added the optional columns {added:?} (schema {})",
                table.metadata().current_schema_id()
            ),
        );
        let w = self.tables.get_mut(name).expect("a window");
        w.schema = Self::arrow_schema(&table)?;
        w.table = table;
        Ok(())
    }

    /// Writes the kept rows (conformed, arrow 59) into the window's data files.
    fn write_rows(&mut self, name: &str, rows: RecordBatch) -> Result<(), Error> {
        if self.tables[name].files.is_none() {
            let files = self.open_files(&self.tables[name])?;
            self.tables.get_mut(name).expect("a window").files = Some(files);
        }
        let bytes = rows.get_array_memory_size();
        let batch = arrow58::batch_to_58(rows).map_err(Error::fatal)?;
        let w = self.tables.get_mut(name).expect("a window");
        let written = match w.files.as_mut().expect("opened above") {
            Files::Unpartitioned(writer) => self.rt.block_on(writer.write(batch)),
            Files::Partitioned { fanout, splitter, open } => splitter.split(&batch).and_then(|parts| {
                self.rt.block_on(async {
                    for (key, part) in parts {
                        open.insert(format!("{:?}", key.data()));
                        fanout.write(key, part).await?;
                    }
                    Ok(())
                })
            }),
        };
        written.map_err(|e| classify(&format!("writing data files of {name}"), e))?;
        w.held_bytes += bytes;
        Ok(())
    }
}

impl Sink for IcebergSink {
    const NAME: &'static str = "iceberg";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Appends Parquet data files to existing Apache Iceberg tables through a REST or SQL (SQLite, PostgreSQL) catalog (local filesystem or S3 storage), exactly once per topic-partition through offsets kept in snapshot summaries.";
    const NATIVE_PLANES: u32 = PLANE_ARROW;
    const MAX_IN_FLIGHT: u32 = 256;

    fn options() -> Vec<OptionSpec> {
        vec![
            OptionSpec::string("catalog_type").default_str("rest").allowed(&["rest", "sql"]).help(
                "`rest`: an Iceberg REST catalog; `sql`: iceberg-rust's SQL catalog in a SQLite or PostgreSQL database (the `iceberg_tables` layout pyiceberg's SqlCatalog and Java's JdbcCatalog use).",
            ),
            OptionSpec::string("catalog_uri").required().help(
                "rest: the catalog's base URL, e.g. http://127.0.0.1:8181; sql: the database URL, `sqlite:///path/catalog.db` or `postgres://user:password@host/db`.",
            ),
            OptionSpec::string("catalog_name").default_str("picomq").help(
                "The catalog's name: for `sql` the `catalog_name` column of the catalog's tables (the name pyiceberg's SqlCatalog or JdbcCatalog was given).",
            ),
            OptionSpec::string("warehouse").help(
                "rest: the catalog's warehouse (the REST `warehouse` property), if it needs one; sql: where new tables' files would go (`file:///path` or `s3://bucket/path`; the sink creates no table, so only what the catalog needs).",
            ),
            OptionSpec::string("catalog_token").secret().help("A bearer token for the catalog (the REST `token` property)."),
            OptionSpec::string("catalog_credential").secret().help("OAuth2 client credentials `client_id:client_secret` for the catalog (the REST `credential` property)."),
            OptionSpec::table("catalog_properties").help(
                "More REST catalog properties, passed as they are (e.g. { \"oauth2-server-uri\" = \"…\", \"scope\" = \"…\", \"prefix\" = \"…\" }).",
            ),
            OptionSpec::string("table").default_str("default.{topic}").help(
                "The destination table, `namespace.table` (nested namespaces `a.b.table`); `{topic}` is the record's topic with its dots as `_`. It must exist.",
            ),
            OptionSpec::string("app_id").help(
                "The namespace of this sink's keys in snapshot summaries (`picomq.<app_id>.offsets`); default: the definition's sink key. Two definitions writing one table need different ones.",
            ),
            OptionSpec::int("commit_records").default("100000").help("Commit a table's window once it holds this many records."),
            OptionSpec::byte_size("commit_bytes").default("134217728").help("Commit a table's window once it holds this many bytes of Arrow data."),
            OptionSpec::duration("commit_interval").default_str("10s").help("Commit a table's window at the latest this long after its first record."),
            OptionSpec::int("max_open_files").default("64").help(
                "Commit a partitioned table's window once it has this many partition values open (one open data file each).",
            ),
            OptionSpec::byte_size("target_file_size").default("134217728").help("Roll a data file at this size (a window may hold several per partition value)."),
            OptionSpec::string("compression").default_str("zstd").allowed(&["zstd", "snappy", "none"]).help("Parquet compression codec."),
            OptionSpec::int("row_group_records").default("1048576").help("Records per Parquet row group at most."),
            OptionSpec::boolean("dictionary").default("true").help("Parquet dictionary encoding."),
            OptionSpec::duration("orphan_file_age").default_str("1h").help(
                "At a run's first commit to a table, this app id's data files that no snapshot references (windows whose commit never happened) are removed when older than the run's start and than this: longer than any instance of the definition keeps a window open.",
            ),
            OptionSpec::boolean("schema_evolution").default("false").help(
                "Add payload fields the table does not have as new optional columns (a schema update committed before the records that bring them); otherwise a record carrying one is rejected.",
            ),
            OptionSpec::string("s3_endpoint").help("For s3:// table locations: the S3 endpoint (overrides the catalog's `s3.endpoint`)."),
            OptionSpec::string("s3_region").help("For s3:// table locations: the region (overrides the catalog's `s3.region`)."),
            OptionSpec::string("s3_access_key_id").secret().help("For s3:// table locations: the access key id (overrides the catalog's)."),
            OptionSpec::string("s3_secret_access_key").secret().help("For s3:// table locations: the secret access key."),
        ]
    }

    fn validate(config: &Host) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        let uri = config.config_string("catalog_uri").unwrap_or_default();
        if config.config_string("catalog_type").as_deref() == Some("sql") {
            if sql_bind_style(&uri).is_none() {
                problems.push(format!("catalog_uri: '{uri}' is not a sqlite:, postgres: or postgresql: database URL (catalog_type = \"sql\")"));
            }
        } else if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            problems.push(format!("catalog_uri: '{uri}' is not an http:// or https:// URL"));
        }
        if config
            .config_string("catalog_name")
            .map(|n| n.trim().is_empty())
            .unwrap_or(false)
        {
            problems.push("catalog_name: must not be empty".to_string());
        }
        let template = config.config_string("table").unwrap_or_default();
        if let Err(e) = parse_ident(&table_name(&template, "topic")) {
            problems.push(e.message);
        }
        for k in [
            "commit_records",
            "commit_bytes",
            "max_open_files",
            "target_file_size",
            "row_group_records",
        ] {
            if config.config_int(k) < 1 {
                problems.push(format!("{k}: must be at least 1"));
            }
        }
        let has = |k: &str| config.config_string(k).map(|v| !v.is_empty()).unwrap_or(false);
        if has("s3_access_key_id") != has("s3_secret_access_key") {
            problems.push("s3_access_key_id: needs s3_secret_access_key too (and the other way round)".to_string());
        }
        if let Some(json) = config.config_json("catalog_properties") {
            match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(serde_json::Value::Object(m)) => {
                    for (k, v) in m {
                        if !v.is_string() {
                            problems.push(format!("catalog_properties: '{k}' must be a string"));
                        }
                    }
                }
                Ok(serde_json::Value::Null) => {}
                _ => problems.push("catalog_properties: must be a table of strings".to_string()),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    fn open(host: Host) -> Result<Self, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("picomq-iceberg")
            .enable_all()
            .build()
            .map_err(|e| Error::fatal(format!("starting the I/O runtime: {e}")))?;
        let get = |k: &str| host.config_string(k).filter(|v| !v.is_empty());
        let uri = get("catalog_uri").unwrap_or_default();
        let mut props: HashMap<String, String> = HashMap::from([("uri".to_string(), uri.clone())]);
        if let Some(json) = host.config_json("catalog_properties") {
            if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(&json) {
                for (k, v) in m {
                    if let Some(s) = v.as_str() {
                        props.insert(k, s.to_string());
                    }
                }
            }
        }
        for (opt, prop) in [
            ("warehouse", "warehouse"),
            ("catalog_token", "token"),
            ("catalog_credential", "credential"),
        ] {
            if let Some(v) = get(opt) {
                props.insert(prop.to_string(), v);
            }
        }
        let mut overrides = HashMap::new();
        for (opt, prop) in [
            ("s3_endpoint", "s3.endpoint"),
            ("s3_region", "s3.region"),
            ("s3_access_key_id", "s3.access-key-id"),
            ("s3_secret_access_key", "s3.secret-access-key"),
        ] {
            if let Some(v) = get(opt) {
                overrides.insert(prop.to_string(), v);
            }
        }
        let files = Arc::new(storage::FilesFactory { overrides });
        let storage = files.clone();
        let catalog_name = get("catalog_name").unwrap_or_else(|| "picomq".to_string());
        let sql = host.config_string("catalog_type").as_deref() == Some("sql");
        let catalog: Box<dyn Catalog> = if sql {
            // The SQL catalog reads every property itself: the REST-only ones are not passed.
            props.remove("token");
            props.remove("credential");
            props.insert(
                "sql_bind_style".to_string(),
                sql_bind_style(&uri).unwrap_or("DollarNumeric").to_string(),
            );
            let c = rt
                .block_on(
                    SqlCatalogBuilder::default()
                        .with_storage_factory(files)
                        .with_runtime(iceberg::Runtime::new(&rt))
                        .load(&catalog_name, props),
                )
                .map_err(|e| Error::fatal(format!("catalog_uri: the SQL catalog at {}: {e}", redact_url(&uri))))?;
            Box::new(c)
        } else {
            let c = rt
                .block_on(
                    RestCatalogBuilder::default()
                        .with_storage_factory(files)
                        .with_runtime(iceberg::Runtime::new(&rt))
                        .load(&catalog_name, props),
                )
                .map_err(|e| Error::fatal(format!("catalog_uri: {e}")))?;
            Box::new(c)
        };
        let compression = match host.config_string("compression").as_deref() {
            Some("snappy") => Compression::SNAPPY,
            Some("none") => Compression::UNCOMPRESSED,
            _ => Compression::ZSTD(ZstdLevel::default()),
        };
        let props = WriterProperties::builder()
            .set_compression(compression)
            .set_max_row_group_row_count(Some(host.config_int("row_group_records").max(1) as usize))
            .set_dictionary_enabled(host.config_bool("dictionary"))
            .build();
        let app_id = get("app_id")
            .or_else(|| host.sink_key())
            .ok_or_else(|| Error::fatal("app_id: not set and the host gives no sink key"))?;
        let sink = IcebergSink {
            stop: host.stop_signal(),
            host,
            rt,
            catalog,
            app_id,
            table_template: host.config_string("table").unwrap_or_default(),
            tables: HashMap::new(),
            versions: HashMap::new(),
            stale: HashSet::new(),
            resends: Resends::default(),
            props,
            target_file_size: host.config_int("target_file_size").max(1) as usize,
            commit_records: host.config_int("commit_records").max(1) as usize,
            commit_bytes: host.config_int("commit_bytes").max(1) as usize,
            max_open_files: host.config_int("max_open_files").max(1) as usize,
            commit_interval: host.config_duration("commit_interval"),
            schema_evolution: host.config_bool("schema_evolution"),
            files: storage,
            started: SystemTime::now(),
            orphan_file_age: host.config_duration("orphan_file_age"),
            cleaned: HashSet::new(),
        };
        let kind = if sql { "SQL" } else { "REST" };
        sink.log(
            LogLevel::Info,
            &format!(
                "Iceberg {kind} catalog {}, tables {}, offsets under picomq.{}.*",
                redact_url(&uri),
                sink.table_template,
                sink.app_id
            ),
        );
        Ok(sink)
    }

    fn write_arrow(&mut self, batch: &mut ArrowBatch, call: &mut Call) -> Result<(), Error> {
        let tp: Tp = (batch.topic().to_string(), batch.partition());
        let offsets = batch.offsets().to_vec();
        if offsets.is_empty() {
            return Ok(());
        }
        let name = table_name(&self.table_template, &tp.0);
        self.window(&name)?;
        if !self.versions.contains_key(&tp) || self.stale.contains(&tp) {
            let mut tps: Vec<Tp> = self
                .stale
                .iter()
                .filter(|s| table_name(&self.table_template, &s.0) == name)
                .cloned()
                .collect();
            if !tps.contains(&tp) {
                tps.push(tp.clone());
            }
            self.load_versions(&name, &tps)?;
        }
        let committed = self.versions.get(&tp).copied().unwrap_or(-1);
        let window_next = self.tables[&name].next.get(&tp).copied().unwrap_or(-1);
        let floor = committed.max(window_next);
        self.resends.check(&tp, offsets[0], floor)?;
        let last = *offsets.last().expect("not empty");
        if offsets[0] < committed {
            // A replay: the summary of a snapshot of this app id holds these offsets.
            self.log(
                LogLevel::Info,
                &format!(
                    "{}[{}]: offsets {} to {} are in {name} already (snapshot summary of app id {}: up to {committed}): skipped",
                    tp.0,
                    tp.1,
                    offsets[0],
                    last.min(committed - 1),
                    self.app_id
                ),
            );
        }
        if last < floor {
            // Everything here is in the table (or in this window) already: a replay.
            self.host.count("already_written_records", offsets.len() as u64);
            return Ok(());
        }
        let imported = batch.take()?;
        let mut schema = self.tables[&name].schema.clone();
        let (mut conformed, mut problems) = picomq_sink::conform::conform(&imported, &schema, self.schema_evolution);
        if self.schema_evolution {
            let added: Vec<arrow::datatypes::FieldRef> = conformed
                .schema()
                .fields()
                .iter()
                .filter(|f| schema.field_with_name(f.name()).is_err())
                .cloned()
                .collect();
            if !added.is_empty() {
                // The window so far was written with the old schema: commit it, then the schema.
                let _ = self.commit(&name);
                self.evolve(&name, &added)?;
                schema = self.tables[&name].schema.clone();
                (conformed, problems) = picomq_sink::conform::conform(&imported, &schema, false);
            }
        }
        // Back to the table's nullability once the refused rows are gone.
        if let Some(rows) =
            picomq_sink::conform::rows_to_write(conformed, &problems, &offsets, floor, call, Some(schema))?
        {
            let kept = rows.num_rows();
            if let Err(e) = self.write_rows(&name, rows) {
                self.fail_window(&name, &e);
                return Err(e);
            }
            self.tables.get_mut(&name).expect("a window").held_records += kept;
        }
        let w = self.tables.get_mut(&name).expect("a window");
        w.next.insert(tp, last + 1);
        w.started.get_or_insert_with(Instant::now);
        w.held.push(call.pending());
        let held_everywhere: usize = self.tables.values().map(|w| w.held.len()).sum();
        if held_everywhere >= Self::MAX_IN_FLIGHT as usize {
            // The runtime sends nothing more until writes complete: every table commits.
            self.commit_all();
        } else if self.due(&self.tables[&name]) {
            // The commit completes this call's handle too: its outcome is the call's status.
            let _ = self.commit(&name);
        }
        Ok(())
    }

    fn flush(&mut self, _timeout: Duration) {
        self.commit_all();
    }

    fn partitions_assigned(&mut self, _block: u32, partitions: &[TopicPartition]) {
        let mut by_table: BTreeMap<String, Vec<Tp>> = BTreeMap::new();
        for p in partitions {
            by_table
                .entry(table_name(&self.table_template, &p.topic))
                .or_default()
                .push((p.topic.clone(), p.partition));
        }
        for (name, tps) in by_table {
            if let Err(e) = self.load_versions(&name, &tps) {
                // The first batch of each partition reads them again (and reports the error).
                self.stale.extend(tps);
                self.log(
                    LogLevel::Warn,
                    &format!("reading the committed offsets of {name} on assignment: {e}"),
                );
            }
        }
    }

    fn partitions_revoked(&mut self, _block: u32, partitions: &[TopicPartition]) {
        self.commit_all();
        for p in partitions {
            let tp = (p.topic.clone(), p.partition);
            self.resends.forget(&tp);
            self.versions.remove(&tp);
        }
    }

    fn close(mut self) {
        self.commit_all();
    }
}

export_sink!(IcebergSink);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_come_from_the_template_with_the_topics_dots_replaced() {
        assert_eq!(table_name("db.{topic}", "orders.eu"), "db.orders_eu");
        assert_eq!(table_name("lake.raw.events", "x"), "lake.raw.events");
        let ident = parse_ident("a.b.t").unwrap();
        assert_eq!(ident.name(), "t");
        assert_eq!(ident.namespace().as_ref(), &vec!["a".to_string(), "b".to_string()]);
        assert!(parse_ident("justatable").is_err());
        assert!(parse_ident("a..t").is_err());
    }
}
