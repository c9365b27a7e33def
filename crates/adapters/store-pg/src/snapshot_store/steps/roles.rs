//! A snapshot's roles: Data API roles only, never administrator power.

use crate::db::Txn;
use kernel::{FieldError, StoreError, new_id};
use snapshot::Role;

use crate::{PgStore, execute};

/// Deletes a role by name (`$1`); a built-in role stays.
pub(super) const DROP: &str =
    "DELETE FROM svc.roles WHERE lower(name) = lower($1) AND NOT built_in";

/// Creates the role (its name checked by the plan), or (applying)
/// updates the one of that name.
pub(super) async fn put(
    store: &PgStore,
    txn: &Txn,
    role: &Role,
    dry: bool,
) -> Result<(), StoreError> {
    let (path, name) = (format!("roles.{}", role.name), role.name.trim().to_owned());
    let built_in =
        "SELECT EXISTS (SELECT 1 FROM svc.roles WHERE lower(name) = lower($1) AND built_in) AS ok";
    if crate::schema_store::scalar_bool(txn, built_in, vec![name.clone().into()]).await? {
        return Err(FieldError::new(path, "is a built-in role, which every instance has").into());
    }
    // Never administrator power: a snapshot's roles reach the Data API only.
    let on_taken = if dry {
        "DO NOTHING"
    } else {
        "DO UPDATE SET description = EXCLUDED.description, api_access = EXCLUDED.api_access"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.roles (id, name, description, api_access, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT ((lower(name))) {on_taken}"
        ),
        vec![
            new_id().into(),
            name.into(),
            role.description.clone().into(),
            role.api_access.into(),
            store.now().into(),
        ],
    )
    .await?;
    Ok(())
}
