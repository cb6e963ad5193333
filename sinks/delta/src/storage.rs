//! Where the table lives: the local filesystem (deltalake-core's own store) or S3 through
//! object_store's client, registered with delta-rs for s3:// without the AWS SDK crates. Commits
//! on S3 use conditional PUT (If-None-Match: *), which SeaweedFS, MinIO and AWS S3 honour, so no
//! lock service (DynamoDB) is needed; a store that ignores the header would let two commits of one
//! log version replace each other, so the sink checks it once per start (check_conditional_writes)
//! unless s3_conditional_commits = false.
use std::collections::HashMap;
use std::sync::{Arc, Once};

use deltalake_core::logstore::{
    default_logstore, logstore_factories, object_store_factories, LogStore, LogStoreFactory, ObjectStoreFactory,
    ObjectStoreRef, StorageConfig,
};
use deltalake_core::{DeltaResult, DeltaTable, DeltaTableBuilder, DeltaTableError, Path};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use picomq_sink::{Error, Host, OptionSpec};
use url::Url;

pub fn options() -> Vec<OptionSpec> {
    vec![
        OptionSpec::string("s3_endpoint")
            .help("For s3:// tables: the endpoint URL of an S3-compatible store (SeaweedFS, MinIO); default: AWS."),
        OptionSpec::string("s3_region")
            .default_str("us-east-1")
            .help("For s3:// tables: the region."),
        OptionSpec::string("s3_access_key_id")
            .secret()
            .help("For s3:// tables: the access key id (default: the AWS_* environment)."),
        OptionSpec::string("s3_secret_access_key")
            .secret()
            .help("For s3:// tables: the secret access key."),
        OptionSpec::boolean("s3_allow_http")
            .default("false")
            .help("For s3:// tables: allow a plain http:// endpoint."),
        OptionSpec::boolean("s3_conditional_commits").default("true").help(
            "For s3:// tables: commits (_delta_log/<version>.json) are created with If-None-Match: *, and the store must refuse a second one of a version, so that a killed run's commit landing late never replaces a live run's. Checked once per start, before the first write (a probe object <table>/_picomq/conditional-write-probe put twice): a store that ignores If-None-Match stops the sink. false: not checked (commits still carry the header), for a store known to ignore it, accepting that such a late commit replaces a committed version and loses its rows (docs/sinks/delta.md, Late writes of a killed run).",
        ),
    ]
}

/// Whether `uri` names an s3:// table.
pub fn is_s3(uri: &str) -> bool {
    uri.starts_with("s3://") || uri.starts_with("s3a://")
}

/// The probe object, relative to the table's root: outside `_delta_log`, in a folder starting
/// with `_`, which Delta readers and VACUUM leave alone.
pub const PROBE: &str = "_picomq/conditional-write-probe";

/// Checks that the store under `store` (the table's root) refuses a second `If-None-Match: *`
/// PUT of one key, as the S3 sink does (sinks/s3/client.cpp): the probe object is PUT with
/// object_store's `PutMode::Create` (the mode delta-rs commits with); when that creates it, it is
/// PUT again, which must be refused (412, object_store's AlreadyExists). A refusal of the first PUT
/// (the probe of an earlier start) shows the same. `store_name` names the store in messages.
///
/// Fatal: a store that answers the second PUT with success, or refuses the header itself (400,
/// 501), or refuses the credentials. Anything else (5xx after object_store's own retries, a
/// timeout) is retryable: the runtime sends the batch again and the probe is made again.
pub async fn check_conditional_writes(store: Arc<dyn ObjectStore>, store_name: &str) -> Result<(), Error> {
    let path = Path::from(PROBE);
    let body: &'static [u8] = b"picomq-connect: a probe that the store honours If-None-Match: * (docs/sinks/delta.md)";
    let unsupported = |what: String| {
        Error::fatal(format!(
            "s3_conditional_commits: the store ({store_name}) {what}: it cannot refuse a second commit of one log version, so a killed run's commit that lands late would replace the commit a live run made of that version after its offsets were committed (its rows lost), and two writers' commits could replace each other. Use a store that honours If-None-Match (AWS S3, MinIO, SeaweedFS), or set s3_conditional_commits = false to write without that protection (docs/sinks/delta.md, \"Late writes of a killed run\")"
        ))
    };
    let failed = |attempt: &str, e: object_store::Error| -> Error {
        let text = e.to_string();
        match &e {
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                Error::fatal(format!("s3_conditional_commits: the probe PUT of {PROBE} ({attempt}): {text}"))
            }
            object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. } => {
                unsupported(format!("cannot create an object only if absent ({text})"))
            }
            // object_store keeps the status in the message of its request errors.
            _ if text.contains("status code: 501") || text.contains("status code: 400") => {
                unsupported(format!("refused If-None-Match: * on PUT ({text})"))
            }
            _ => Error::retry(format!(
                "s3_conditional_commits: checking that the store refuses a second conditional PUT ({attempt} PUT of {PROBE}): {text}"
            )),
        }
    };
    let put = || store.put_opts(&path, PutPayload::from_static(body), PutOptions::from(PutMode::Create));
    match put().await {
        // The probe of an earlier start is there and the store refused to replace it.
        Err(object_store::Error::AlreadyExists { .. }) => return Ok(()),
        Err(e) => return Err(failed("the first", e)),
        Ok(_) => {}
    }
    match put().await {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
        Ok(_) => Err(unsupported(format!(
            "ignores If-None-Match: * on PUT (a second conditional PUT of {PROBE} succeeded)"
        ))),
        Err(e) => Err(failed("the second", e)),
    }
}

pub fn validate(config: &Host) -> Vec<String> {
    let mut problems = Vec::new();
    let uri = config.config_string("table_uri").unwrap_or_default();
    let s3 = is_s3(&uri);
    if uri.contains("://") && !s3 && !uri.starts_with("file://") {
        problems.push(format!(
            "table_uri: '{uri}' is neither a local path, a file:// URL nor an s3:// URL"
        ));
    }
    let has = |k: &str| config.config_string(k).map(|v| !v.is_empty()).unwrap_or(false);
    if has("s3_access_key_id") != has("s3_secret_access_key") {
        problems.push("s3_access_key_id: needs s3_secret_access_key too (and the other way round)".to_string());
    }
    if let Some(endpoint) = config.config_string("s3_endpoint").filter(|e| !e.is_empty()) {
        if endpoint.starts_with("http://") && !config.config_bool("s3_allow_http") {
            problems.push(format!(
                "s3_endpoint: '{endpoint}' is plain http; set s3_allow_http = true to allow it"
            ));
        }
    }
    problems
}

struct S3Stores;

impl ObjectStoreFactory for S3Stores {
    fn parse_url_opts(&self, url: &Url, config: &StorageConfig) -> DeltaResult<(ObjectStoreRef, Path)> {
        let mut b = AmazonS3Builder::new().with_url(url.as_str());
        for (k, v) in &config.raw {
            // aws_* keys and the client's (allow_http) alike; others are not the store's.
            if let Ok(key) = k.parse::<AmazonS3ConfigKey>() {
                b = b.with_config(key, v);
            }
        }
        let store = b.build().map_err(|e| DeltaTableError::ObjectStore { source: e })?;
        let path = Path::parse(url.path()).map_err(|e| DeltaTableError::ObjectStore { source: e.into() })?;
        Ok((Arc::new(store), path))
    }
}

struct S3Logs;

impl LogStoreFactory for S3Logs {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        // The default log store commits with put-if-absent: S3 conditional PUT.
        Ok(default_logstore(prefixed_store, root_store, location, options))
    }
}

fn register_s3() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for scheme in ["s3://", "s3a://"] {
            let url = Url::parse(scheme).expect("a scheme URL");
            object_store_factories().insert(url.clone(), Arc::new(S3Stores));
            logstore_factories().insert(url, Arc::new(S3Logs));
        }
    });
}

/// Loads the existing table at `uri`. A missing table is fatal and says so, unless `create`: then
/// the table is returned unloaded (no version yet) with `false`, for the sink to create.
pub async fn load_table(host: &Host, uri: &str, create: bool) -> Result<(DeltaTable, bool), Error> {
    let s3 = is_s3(uri);
    let url = if s3 {
        register_s3();
        Url::parse(uri).map_err(|e| Error::fatal(format!("table_uri: '{uri}' is not a URL: {e}")))?
    } else {
        let path = uri.strip_prefix("file://").unwrap_or(uri);
        let abs = std::path::absolute(path).map_err(|e| Error::fatal(format!("table_uri: '{uri}': {e}")))?;
        if !abs.join("_delta_log").is_dir() && create {
            // The local store needs its root folder; the table itself is created by the first batch.
            std::fs::create_dir_all(&abs)
                .map_err(|e| Error::fatal(format!("table_uri: creating {}: {e}", abs.display())))?;
        } else if !abs.join("_delta_log").is_dir() {
            return Err(Error::fatal(format!(
                "table_uri: there is no Delta table at {} (no _delta_log folder): the sink appends to an existing table; create it with its schema first (or set create_table = true)",
                abs.display()
            )));
        }
        Url::from_directory_path(&abs)
            .map_err(|_| Error::fatal(format!("table_uri: '{uri}' is not an absolute path")))?
    };
    let mut storage = HashMap::new();
    if s3 {
        let get = |k: &str| host.config_string(k).filter(|v| !v.is_empty());
        if let Some(v) = get("s3_endpoint") {
            storage.insert("aws_endpoint".to_string(), v);
        }
        if let Some(v) = get("s3_region") {
            storage.insert("aws_region".to_string(), v);
        }
        if let Some(v) = get("s3_access_key_id") {
            storage.insert("aws_access_key_id".to_string(), v);
        }
        if let Some(v) = get("s3_secret_access_key") {
            storage.insert("aws_secret_access_key".to_string(), v);
        }
        if host.config_bool("s3_allow_http") {
            storage.insert("allow_http".to_string(), "true".to_string());
        }
        // Path-style requests: what S3-compatible stores on one host:port serve.
        storage.insert("aws_virtual_hosted_style_request".to_string(), "false".to_string());
    }
    let builder = DeltaTableBuilder::from_url(url.clone())
        .map_err(|e| Error::fatal(format!("table_uri: {e}")))?
        .with_storage_options(storage.clone());
    let unloaded = if create {
        let b = DeltaTableBuilder::from_url(url.clone())
            .map_err(|e| Error::fatal(format!("table_uri: {e}")))?
            .with_storage_options(storage.clone());
        Some(b.build().map_err(|e| Error::fatal(format!("table_uri: {e}")))?)
    } else {
        None
    };
    match builder.load().await {
        Ok(t) => Ok((t, true)),
        Err(DeltaTableError::NotATable(_)) if unloaded.is_some() => Ok((unloaded.unwrap(), false)),
        Err(DeltaTableError::NotATable(m)) => Err(Error::fatal(format!(
            "table_uri: there is no Delta table at {url} ({m}): the sink appends to an existing table; create it with its schema first (or set create_table = true)"
        ))),
        Err(e) => {
            let fatal = matches!(&e, DeltaTableError::ObjectStore { source: object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } | object_store::Error::NotFound { .. } });
            let m = format!("table_uri: loading the Delta table at {url}: {e}");
            Err(if fatal { Error::fatal(m) } else { Error::retry(m) })
        }
    }
}
