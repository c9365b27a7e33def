//! Files (`/api/files`): uploads streamed to object storage while hashed
//! (SHA-256) and counted against `files.max_bytes`, never held whole in
//! memory; records in `svc.files`, written and read through the Data API's
//! rules (grants, row filters, masks, audit) though the table stays hidden;
//! PUBLIC files read without a credential; downloads whole or by range.

mod blobs;
mod error;
mod kinds;
mod range;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use data::{Caller, DataError, DataRequest, DataService, Effect, Target};
use futures_util::stream::BoxStream;
use kernel::StoreError;
use permissions::Plane;
use serde::Deserialize;
use serde_json::json;
use settings::SettingsService;
use uuid::Uuid;

pub use blobs::{Blobs, BlobsConfig, S3Config, Upload};
pub use error::FileError;
pub use kinds::{is_active_content, sniff};
pub use range::{ByteRange, RangeRequest};

/// The table of the records, behind the routes of `/api/files`.
const TABLE: Target<'static> = Target::behind_route("svc", "files");

/// PRIVATE or PUBLIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Visibility {
    /// Read under grants on `svc.files`.
    Private,
    /// Read by anyone, without a credential.
    Public,
}

impl Visibility {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Visibility::Private => "PRIVATE",
            Visibility::Public => "PUBLIC",
        }
    }

    /// Parses `PRIVATE` or `PUBLIC`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "PRIVATE" => Some(Self::Private),
            "PUBLIC" => Some(Self::Public),
            _ => None,
        }
    }
}

/// A row of `svc.files` as the caller may read it (masked columns are null).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FileRecord {
    /// Id; also the object's key in storage.
    pub id: Uuid,
    /// The uploaded file's name.
    pub name: Option<String>,
    /// Its media type.
    pub content_type: Option<String>,
    /// Its length in bytes.
    pub size: Option<i64>,
    /// SHA-256 of its bytes, lower-case hex.
    pub sha256: Option<String>,
    /// PRIVATE or PUBLIC.
    pub visibility: Option<String>,
    /// The uploader.
    pub owner_id: Option<Uuid>,
    /// When it was uploaded.
    pub created_at: Option<DateTime<Utc>>,
}

/// What a download needs of a record, read without grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Id.
    pub id: Uuid,
    /// Name, for `Content-Disposition`.
    pub name: String,
    /// Media type.
    pub content_type: String,
    /// Length in bytes.
    pub size: u64,
    /// SHA-256, the ETag.
    pub sha256: String,
    /// Readable without a credential.
    pub public: bool,
    /// The uploader.
    pub owner_id: Option<Uuid>,
    /// When it was uploaded.
    pub created_at: DateTime<Utc>,
}

impl From<StoredFile> for FileRecord {
    fn from(file: StoredFile) -> Self {
        let visibility = if file.public {
            Visibility::Public
        } else {
            Visibility::Private
        };
        Self {
            id: file.id,
            name: Some(file.name),
            content_type: Some(file.content_type),
            size: i64::try_from(file.size).ok(),
            sha256: Some(file.sha256),
            visibility: Some(visibility.as_str().to_owned()),
            owner_id: file.owner_id,
            created_at: Some(file.created_at),
        }
    }
}

/// Reads records without grants: whether a file is PUBLIC, and how to send it.
#[async_trait::async_trait]
pub trait FileStore: Send + Sync + 'static {
    /// The record of `id`, if any.
    async fn stored_file(&self, id: Uuid) -> Result<Option<StoredFile>, StoreError>;
}

/// The bytes of a download.
pub struct Download {
    /// The file.
    pub file: StoredFile,
    /// The part sent: `None` for all of it.
    pub range: Option<ByteRange>,
    /// The bytes.
    pub body: BoxStream<'static, Result<bytes::Bytes, FileError>>,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("file", &self.file)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

/// An upload's caller, checked before any byte is read.
#[derive(Debug, Clone, Copy)]
pub struct UploadTicket {
    owner: Uuid,
    max_bytes: u64,
}

impl UploadTicket {
    /// `files.max_bytes` when the upload began.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

/// The files' rules.
#[derive(Clone)]
pub struct FileService {
    data: DataService,
    store: Arc<dyn FileStore>,
    blobs: Blobs,
    settings: SettingsService,
}

impl FileService {
    /// A service keeping bytes in `blobs` and records through `data`.
    pub fn new(
        data: DataService,
        store: Arc<dyn FileStore>,
        blobs: Blobs,
        settings: SettingsService,
    ) -> Self {
        Self {
            data,
            store,
            blobs,
            settings,
        }
    }

    /// Runs `op` on `svc.files` as the caller of `request`.
    async fn on_files<T>(
        &self,
        request: DataRequest<'_>,
        effect: Effect,
        op: impl AsyncFn(Caller<'_>, i64) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        self.data.as_caller(request, Plane::Api, effect, op).await
    }

    /// The record `id` as the caller of `request` may read it, as JSON text.
    async fn read_record(&self, request: DataRequest<'_>, id: &str) -> Result<String, DataError> {
        self.on_files(request, Effect::Reads, async |caller, v| {
            self.data.get_as(caller, v, TABLE, id, None).await
        })
        .await
    }

    /// Checks that the caller may create files (before the body is read).
    /// The caller is resolved afresh: that round trip also reads the shared
    /// versions, so the size limit comes from the settings of the moment
    /// (not a cache another instance's change has not reached yet), and a
    /// revoked credential streams no body.
    pub async fn begin(&self, request: DataRequest<'_>) -> Result<UploadTicket, FileError> {
        let owner = self
            .data
            .as_current_caller(request, Plane::Api, async |caller, _| {
                self.data.check_method_as(caller, TABLE, "POST").await?;
                Ok(caller.principal.user_id)
            })
            .await?;
        let max_bytes = self.settings.current().await?.files_max_bytes();
        Ok(UploadTicket { owner, max_bytes })
    }

    /// Starts storing the bytes of a file.
    pub async fn upload(&self, ticket: UploadTicket) -> Result<Upload, FileError> {
        self.blobs.start(kernel::new_id(), ticket.max_bytes).await
    }

    /// Records a finished upload as the caller's file; the stored bytes are
    /// removed when the record is refused (nothing is kept).
    pub async fn record(
        &self,
        request: DataRequest<'_>,
        ticket: UploadTicket,
        upload: Upload,
        name: &str,
        declared_type: Option<&str>,
        visibility: Visibility,
    ) -> Result<FileRecord, FileError> {
        let content_type = match kinds::content_type(declared_type, upload.head()) {
            Ok(content_type) => content_type,
            Err(error) => {
                self.blobs.discard(upload).await;
                return Err(error);
            }
        };
        let name = kinds::file_name(name);
        let stored = upload.finish().await?;
        let row = json!({
            "id": stored.id,
            "name": name,
            "content_type": content_type,
            "size": stored.size,
            "sha256": stored.sha256,
            "visibility": visibility.as_str(),
            "owner_id": ticket.owner,
        });
        let created = self
            .on_files(request, Effect::Writes, async |caller, v| {
                self.data.create_as(caller, v, TABLE, &row).await
            })
            .await;
        match created {
            Ok(json) => serde_json::from_str(&json)
                .map_err(|e| FileError::Store(StoreError::Internal(e.to_string()))),
            Err(error) => {
                self.blobs.remove(stored.id).await;
                Err(error.into())
            }
        }
    }

    /// Drops an upload that will not be recorded.
    pub async fn discard(&self, upload: Upload) {
        self.blobs.discard(upload).await;
    }

    /// The record of `id` as the caller may read it.
    pub async fn meta(&self, request: DataRequest<'_>, id: &str) -> Result<FileRecord, FileError> {
        let json = self.read_record(request, id).await?;
        serde_json::from_str(&json)
            .map_err(|e| FileError::Store(StoreError::Internal(e.to_string())))
    }

    /// The record of a PUBLIC file, for anyone.
    pub async fn public_meta(&self, id: &str) -> Result<Option<FileRecord>, FileError> {
        let Ok(id) = Uuid::parse_str(id) else {
            return Ok(None);
        };
        Ok(self
            .store
            .stored_file(id)
            .await?
            .filter(|f| f.public)
            .map(FileRecord::from))
    }

    /// The file `id` (whole or `range`): PUBLIC ones for anyone, others for a
    /// caller whose grants on `svc.files` let them read it (`request`
    /// `None`: no credential, 401).
    pub async fn download(
        &self,
        request: Option<DataRequest<'_>>,
        id: &str,
        range: RangeRequest,
    ) -> Result<Download, FileError> {
        let parsed = Uuid::parse_str(id).ok();
        let stored = match parsed {
            Some(id) => self.store.stored_file(id).await?,
            None => None,
        };
        let file = match (stored, request) {
            (Some(file), _) if file.public => file,
            (stored, Some(request)) => {
                self.read_record(request, id).await?;
                stored.ok_or(FileError::NotFound)?
            }
            (_, None) => return Err(FileError::CredentialRequired),
        };
        let range = range.resolve(file.size)?;
        let body = self.blobs.read(file.id, range, file.size).await?;
        Ok(Download { file, range, body })
    }

    /// Deletes the file `id` (delete grant on `svc.files`, row filters apply),
    /// record then bytes.
    pub async fn delete(&self, request: DataRequest<'_>, id: &str) -> Result<(), FileError> {
        self.on_files(request, Effect::Writes, async |caller, v| {
            self.data.delete_as(caller, v, TABLE, id).await
        })
        .await?;
        if let Ok(id) = Uuid::parse_str(id) {
            self.blobs.remove(id).await;
        }
        Ok(())
    }
}
