//! Where data and metadata files live, for iceberg's FileIO: the local filesystem (iceberg's own
//! LocalFsStorage) or S3 through object_store's client (the one the Delta sink already builds;
//! iceberg-rust's own S3 backend would pull in OpenDAL). The catalog's FileIO properties
//! (`s3.endpoint`, `s3.access-key-id`…, from the table's config) come first, the sink's options
//! override them.
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage, StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// Builds [`Files`] for a catalog's FileIO, with the sink's S3 settings on top of the catalog's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FilesFactory {
    pub overrides: HashMap<String, String>,
}

#[typetag::serde]
impl StorageFactory for FilesFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let mut props = config.props().clone();
        props.extend(self.overrides.clone());
        Ok(Arc::new(Files {
            props,
            buckets: Arc::default(),
        }))
    }
}

impl FilesFactory {
    /// The sink's own handle on a table's storage (its FileIO's properties, the options on top):
    /// what iceberg's `Storage` cannot do, listing, is done through it.
    pub fn files(&self, config: &StorageConfig) -> Files {
        let mut props = config.props().clone();
        props.extend(self.overrides.clone());
        Files {
            props,
            buckets: Arc::default(),
        }
    }
}

/// A file found by [`Files::list`]: its location as the table names files, and when it was
/// written (the store's clock).
pub struct Listed {
    pub path: String,
    pub modified: SystemTime,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Files {
    props: HashMap<String, String>,
    #[serde(skip)]
    buckets: Arc<Mutex<HashMap<String, Arc<AmazonS3>>>>,
}

enum Where {
    Local,
    S3(Arc<AmazonS3>, Path),
}

fn io_error(what: &str, path: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Unexpected, format!("{what} {path}: {e}"))
}

impl Files {
    fn locate(&self, path: &str) -> Result<Where> {
        let rest = match path.split_once("://") {
            Some(("s3" | "s3a", rest)) => rest,
            Some(("file", _)) | None => return Ok(Where::Local),
            Some((scheme, _)) => {
                return Err(Error::new(
                    ErrorKind::FeatureUnsupported,
                    format!("{path}: the {scheme}:// scheme is not supported (file and s3 are)"),
                ))
            }
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        let store = {
            let mut buckets = self.buckets.lock().expect("bucket cache");
            match buckets.get(bucket) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(self.s3_client(bucket)?);
                    buckets.insert(bucket.to_string(), s.clone());
                    s
                }
            }
        };
        let key = Path::parse(key).map_err(|e| io_error("parsing", path, e))?;
        Ok(Where::S3(store, key))
    }

    /// Every file under the directory `location` (`s3://bucket/path`, `file:///path` or `/path`),
    /// at any depth.
    pub async fn list(&self, location: &str) -> Result<Vec<Listed>> {
        let location = location.trim_end_matches('/');
        match self.locate(location)? {
            Where::Local => {
                let root = location.strip_prefix("file://").unwrap_or(location);
                let mut found = Vec::new();
                list_local(std::path::Path::new(root), location, &mut found)?;
                Ok(found)
            }
            Where::S3(s, key) => {
                let (scheme, rest) = location.split_once("://").expect("an s3 location");
                let bucket = rest.split('/').next().unwrap_or(rest);
                let listed: Vec<_> = s
                    .list(Some(&key))
                    .try_collect()
                    .await
                    .map_err(|e| io_error("listing", location, e))?;
                Ok(listed
                    .into_iter()
                    .map(|m| Listed {
                        path: format!("{scheme}://{bucket}/{}", m.location),
                        modified: UNIX_EPOCH + Duration::from_millis(m.last_modified.timestamp_millis().max(0) as u64),
                    })
                    .collect())
            }
        }
    }

    fn s3_client(&self, bucket: &str) -> Result<AmazonS3> {
        let get = |k: &str| self.props.get(k).filter(|v| !v.is_empty());
        let mut b = AmazonS3Builder::new().with_bucket_name(bucket);
        if let Some(v) = get("s3.endpoint") {
            b = b.with_endpoint(v).with_allow_http(v.starts_with("http://"));
        }
        if let Some(v) = get("s3.region").or_else(|| get("client.region")) {
            b = b.with_region(v);
        }
        if let Some(v) = get("s3.access-key-id") {
            b = b.with_access_key_id(v);
        }
        if let Some(v) = get("s3.secret-access-key") {
            b = b.with_secret_access_key(v);
        }
        if let Some(v) = get("s3.session-token") {
            b = b.with_token(v);
        }
        // Path-style unless told otherwise: what S3-compatible stores on one host:port serve.
        let path_style = get("s3.path-style-access").map(|v| v != "false").unwrap_or(true);
        b = b.with_virtual_hosted_style_request(!path_style);
        b.build().map_err(|e| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("the S3 client for bucket {bucket}: {e}"),
            )
        })
    }
}

/// The files under `dir` (named `prefix/...`), recursively; a directory that is not there holds none.
fn list_local(dir: &std::path::Path, prefix: &str, found: &mut Vec<Listed>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("listing", prefix, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_error("listing", prefix, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}/{name}");
        let meta = entry.metadata().map_err(|e| io_error("listing", &path, e))?;
        if meta.is_dir() {
            list_local(&entry.path(), &path, found)?;
        } else {
            let modified = meta.modified().map_err(|e| io_error("listing", &path, e))?;
            found.push(Listed { path, modified });
        }
    }
    Ok(())
}

#[async_trait]
#[typetag::serde]
impl Storage for Files {
    async fn exists(&self, path: &str) -> Result<bool> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().exists(path).await,
            Where::S3(s, key) => match s.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(io_error("checking", path, e)),
            },
        }
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().metadata(path).await,
            Where::S3(s, key) => {
                let m = s
                    .head(&key)
                    .await
                    .map_err(|e| io_error("reading the metadata of", path, e))?;
                Ok(FileMetadata { size: m.size })
            }
        }
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().read(path).await,
            Where::S3(s, key) => {
                let r = s.get(&key).await.map_err(|e| io_error("reading", path, e))?;
                r.bytes().await.map_err(|e| io_error("reading", path, e))
            }
        }
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().reader(path).await,
            Where::S3(s, key) => Ok(Box::new(S3Read {
                store: s,
                key,
                path: path.to_string(),
            })),
        }
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().write(path, bs).await,
            Where::S3(s, key) => {
                s.put(&key, PutPayload::from(bs))
                    .await
                    .map_err(|e| io_error("writing", path, e))?;
                Ok(())
            }
        }
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().writer(path).await,
            // Multipart upload once the buffer passes its capacity, a single PUT below it.
            Where::S3(s, key) => Ok(Box::new(S3Write {
                writer: BufWriter::new(s, key),
                path: path.to_string(),
            })),
        }
    }

    async fn delete(&self, path: &str) -> Result<()> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().delete(path).await,
            Where::S3(s, key) => match s.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(io_error("deleting", path, e)),
            },
        }
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        match self.locate(path)? {
            Where::Local => LocalFsStorage::new().delete_prefix(path).await,
            Where::S3(s, key) => {
                let listed: Vec<_> = s
                    .list(Some(&key))
                    .try_collect()
                    .await
                    .map_err(|e| io_error("listing", path, e))?;
                for m in listed {
                    match s.delete(&m.location).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(io_error("deleting", m.location.as_ref(), e)),
                    }
                }
                Ok(())
            }
        }
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> Result<()> {
        while let Some(p) = paths.next().await {
            self.delete(&p).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

struct S3Read {
    store: Arc<AmazonS3>,
    key: Path,
    path: String,
}

#[async_trait]
impl FileRead for S3Read {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        self.store
            .get_range(&self.key, range)
            .await
            .map_err(|e| io_error("reading", &self.path, e))
    }
}

struct S3Write {
    writer: BufWriter,
    path: String,
}

#[async_trait]
impl FileWrite for S3Write {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        self.writer
            .write_all(&bs)
            .await
            .map_err(|e| io_error("writing", &self.path, e))
    }

    async fn close(&mut self) -> Result<()> {
        self.writer
            .shutdown()
            .await
            .map_err(|e| io_error("completing", &self.path, e))
    }
}
