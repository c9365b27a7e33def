//! File records read without grants: whether a file is PUBLIC, and what a
//! download sends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use files::{FileStore, StoredFile};
use kernel::StoreError;
use sea_orm::FromQueryResult;
use uuid::Uuid;

use crate::query::Query;
use crate::{PgStore, rows, stmt};

/// A file's record as a download reads it.
#[derive(FromQueryResult)]
struct FileRow {
    id: Uuid,
    name: String,
    content_type: String,
    size: i64,
    sha256: String,
    public: bool,
    owner_id: Option<Uuid>,
    created_at: DateTime<Utc>,
}

#[async_trait]
impl FileStore for PgStore {
    async fn stored_file(&self, id: Uuid) -> Result<Option<StoredFile>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT id, name, content_type, size, sha256, visibility = 'PUBLIC' AS public, \
                        owner_id, created_at FROM svc.files WHERE id = $1",
                [id.into()],
            ))
            .await?;
        row.map(|r| {
            let file = rows::row::<FileRow>(&r)?;
            Ok(StoredFile {
                id: file.id,
                name: file.name,
                content_type: file.content_type,
                size: u64::try_from(file.size).unwrap_or_default(),
                sha256: file.sha256,
                public: file.public,
                owner_id: file.owner_id,
                created_at: file.created_at,
            })
        })
        .transpose()
    }
}
