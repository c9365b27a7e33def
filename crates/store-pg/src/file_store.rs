//! File records read without grants: whether a file is PUBLIC, and what a
//! download sends.

use async_trait::async_trait;
use files::{FileStore, StoredFile};
use kernel::StoreError;
use sea_orm::ConnectionTrait as _;
use uuid::Uuid;

use crate::{PgStore, map_err, stmt};

#[async_trait]
impl FileStore for PgStore {
    async fn stored_file(&self, id: Uuid) -> Result<Option<StoredFile>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT id, name, content_type, size, sha256, visibility = 'PUBLIC' AS public, \
                        owner_id, created_at FROM svc.files WHERE id = $1",
                [id.into()],
            ))
            .await
            .map_err(map_err)?;
        row.map(|r| {
            let size: i64 = r.try_get("", "size").map_err(map_err)?;
            Ok(StoredFile {
                id: r.try_get("", "id").map_err(map_err)?,
                name: r.try_get("", "name").map_err(map_err)?,
                content_type: r.try_get("", "content_type").map_err(map_err)?,
                size: u64::try_from(size).unwrap_or_default(),
                sha256: r.try_get("", "sha256").map_err(map_err)?,
                public: r.try_get("", "public").map_err(map_err)?,
                owner_id: r.try_get("", "owner_id").map_err(map_err)?,
                created_at: r.try_get("", "created_at").map_err(map_err)?,
            })
        })
        .transpose()
    }
}
