use auth::CredentialKind;
use kernel::StoreError;
use sea_orm::QueryResult;

mod credentials;
mod email_codes;
#[macro_use]
mod gate;
mod links;
mod mfa;
mod passkeys;
mod statements;
mod tokens;
mod users;

use self::statements::{TAKE_ATTEMPT_SQL, credential_sql};
pub(crate) use self::statements::{claim_unverified, insert_session, insert_user};
use crate::query::Query;
use crate::{PgStore, rows, stmt, versions_of};

impl PgStore {
    /// The row of the credential resolver's query; the caches heed the
    /// versions it read.
    async fn credential_row(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
        with_user: bool,
    ) -> Result<QueryResult, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                credential_sql(kind, with_user),
                [hash.to_vec().into()],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        self.seen.observe(versions_of(&row, "v_")?);
        Ok(row)
    }

    /// Takes an attempt of `key` under `limit` per 60 s for every instance;
    /// answers the seconds to wait when refused.
    pub(crate) async fn take_rate_attempt(
        &self,
        key: &str,
        limit: u32,
    ) -> Result<Option<u64>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                TAKE_ATTEMPT_SQL,
                [key.into(), i64::from(limit).into()],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("the attempt statement answered no row".into()))?;
        let wait: i64 = rows::column(&row, "wait")?;
        Ok((wait > 0).then(|| u64::try_from(wait).unwrap_or(1)))
    }
}
