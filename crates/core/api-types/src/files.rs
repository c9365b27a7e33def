//! Files.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// A file's record (columns the caller's grants mask are null).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// File id.
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
