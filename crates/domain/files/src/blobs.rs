//! Where the bytes live: a local folder or an S3-compatible bucket, through
//! `object_store`, one object per file named by its id.

use std::ops::Range;
use std::sync::Arc;

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt as _, WriteMultipart};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

use crate::error::FileError;
use crate::range::ByteRange;

/// Parts of an upload sent to an S3 store (its smallest part size).
const S3_PART_BYTES: usize = 5 * 1024 * 1024;
/// Parts of an upload written to a local folder.
const LOCAL_PART_BYTES: usize = 256 * 1024;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 2;
/// Bytes kept of a file's start, for its magic number.
pub(crate) const HEAD_BYTES: usize = 16;

/// An S3-compatible bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    /// The endpoint, such as `http://127.0.0.1:9000`; `None`: AWS.
    pub endpoint: Option<String>,
    /// The bucket.
    pub bucket: String,
    /// The region.
    pub region: String,
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
}

/// Where files are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobsConfig {
    /// A folder on the local disk (created when missing).
    Local(std::path::PathBuf),
    /// An S3-compatible bucket.
    S3(S3Config),
}

/// The store of the files' bytes.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    part_bytes: usize,
}

impl Blobs {
    /// Opens the storage `config` names.
    pub fn open(config: &BlobsConfig) -> Result<Self, String> {
        match config {
            BlobsConfig::Local(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                let store = LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| format!("cannot use {}: {e}", dir.display()))?
                    .with_automatic_cleanup(true);
                Ok(Self {
                    store: Arc::new(store),
                    part_bytes: LOCAL_PART_BYTES,
                })
            }
            BlobsConfig::S3(s3) => {
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(&s3.bucket)
                    .with_region(&s3.region)
                    .with_access_key_id(&s3.access_key_id)
                    .with_secret_access_key(&s3.secret_access_key);
                if let Some(endpoint) = &s3.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                let store = builder.build().map_err(|e| e.to_string())?;
                Ok(Self {
                    store: Arc::new(store),
                    part_bytes: S3_PART_BYTES,
                })
            }
        }
    }

    fn path(id: Uuid) -> Path {
        Path::from(id.to_string())
    }

    /// Starts the upload of file `id`, refused past `max_bytes`.
    pub(crate) async fn start(&self, id: Uuid, max_bytes: u64) -> Result<Upload, FileError> {
        let upload = self
            .store
            .put_multipart(&Self::path(id))
            .await
            .map_err(storage)?;
        Ok(Upload {
            id,
            writer: WriteMultipart::new_with_chunk_size(upload, self.part_bytes),
            hasher: Sha256::new(),
            size: 0,
            max_bytes,
            head: Vec::with_capacity(HEAD_BYTES),
        })
    }

    /// Abandons an upload: nothing of it is kept.
    pub(crate) async fn discard(&self, upload: Upload) {
        if let Err(error) = upload.writer.abort().await {
            tracing::warn!(file = %upload.id, %error, "an abandoned upload was not cleaned up");
        }
    }

    /// Removes the bytes of file `id` (gone already is fine).
    pub(crate) async fn remove(&self, id: Uuid) {
        match self.store.delete(&Self::path(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => tracing::warn!(file = %id, %error, "stored bytes were not removed"),
        }
    }

    /// The bytes of file `id` (`size` long), all or `range`.
    pub(crate) async fn read(
        &self,
        id: Uuid,
        range: Option<ByteRange>,
        size: u64,
    ) -> Result<BoxStream<'static, Result<bytes::Bytes, FileError>>, FileError> {
        if size == 0 {
            return Ok(futures_util::stream::empty().boxed());
        }
        let options = GetOptions {
            range: range.map(|r| {
                GetRange::Bounded(Range {
                    start: r.start,
                    end: r.end + 1,
                })
            }),
            ..GetOptions::default()
        };
        let found = self
            .store
            .get_opts(&Self::path(id), options)
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => FileError::NotFound,
                other => storage(other),
            })?;
        Ok(found
            .into_stream()
            .map(|part| part.map_err(storage))
            .boxed())
    }
}

fn storage(error: object_store::Error) -> FileError {
    FileError::Storage(error.to_string())
}

/// A file being stored: hashed and counted as its bytes arrive, written in
/// parts (a few in flight), refused past its size limit.
pub struct Upload {
    id: Uuid,
    writer: WriteMultipart,
    hasher: Sha256,
    size: u64,
    max_bytes: u64,
    head: Vec<u8>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("id", &self.id)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// A stored file's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) id: Uuid,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

impl Upload {
    /// Adds the next bytes; [`FileError::TooLarge`] past the limit (then
    /// discard the upload).
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), FileError> {
        self.size += bytes.len() as u64;
        if self.size > self.max_bytes {
            return Err(FileError::TooLarge(self.max_bytes));
        }
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        self.hasher.update(bytes);
        self.writer
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(storage)?;
        self.writer.write(bytes);
        Ok(())
    }

    /// The first bytes of the file.
    pub(crate) fn head(&self) -> &[u8] {
        &self.head
    }

    /// Completes the upload.
    pub(crate) async fn finish(self) -> Result<Stored, FileError> {
        let sha256 = self
            .hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.writer.finish().await.map_err(storage)?;
        Ok(Stored {
            id: self.id,
            size: self.size,
            sha256,
        })
    }
}
