//! Where the table lives: the local filesystem (deltalake-core's own store) or S3 through
//! object_store's client, registered with delta-rs for s3:// without the AWS SDK crates. Commits
//! on S3 use conditional PUT (If-None-Match: *), which SeaweedFS, MinIO and AWS S3 honour, so no
//! lock service (DynamoDB) is needed.
use std::collections::HashMap;
use std::sync::{Arc, Once};

use deltalake_core::logstore::{
    default_logstore, logstore_factories, object_store_factories, LogStore, LogStoreFactory, ObjectStoreFactory,
    ObjectStoreRef, StorageConfig,
};
use deltalake_core::{DeltaResult, DeltaTable, DeltaTableBuilder, DeltaTableError, Path};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
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
    ]
}

pub fn validate(config: &Host) -> Vec<String> {
    let mut problems = Vec::new();
    let uri = config.config_string("table_uri").unwrap_or_default();
    let s3 = uri.starts_with("s3://") || uri.starts_with("s3a://");
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
    let s3 = uri.starts_with("s3://") || uri.starts_with("s3a://");
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
