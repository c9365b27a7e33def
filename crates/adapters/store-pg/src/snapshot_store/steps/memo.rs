//! What one run of steps remembers: ids and columns found during a run of
//! grants, and what a diff's earlier steps would change.

use crate::db::Txn;
use kernel::{FieldError, StoreError};
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use super::id_of;
use crate::schema_store::alter::facts;

/// Ids and table columns found during a run of grant steps; in a diff,
/// what earlier steps would change in rows that exist (a diff changes
/// none): settings, and DataViews' output columns.
#[derive(Default)]
pub(crate) struct Memo {
    ids: std::collections::HashMap<(&'static str, String), Uuid>,
    columns: std::collections::HashMap<String, Vec<String>>,
    /// Settings as a diff's earlier steps would set them.
    pub(super) settings: Map<String, Json>,
    /// DataViews (by slug) with the output columns a diff's earlier steps
    /// give them.
    pub(super) view_columns: std::collections::HashMap<String, Vec<String>>,
}

impl Memo {
    /// Forgets the ids and columns found, which any step but a grant may
    /// change.
    pub(super) fn forget_lookups(&mut self) {
        self.ids.clear();
        self.columns.clear();
    }

    /// The id `sql` finds for `name`, looked up once per run of grants.
    pub(super) async fn id(
        &mut self,
        txn: &Txn,
        sql: &'static str,
        name: &str,
        path: &str,
    ) -> Result<Uuid, StoreError> {
        if let Some(id) = self.ids.get(&(sql, name.to_owned())) {
            return Ok(*id);
        }
        let id = id_of(txn, sql, name, path).await?;
        self.ids.insert((sql, name.to_owned()), id);
        Ok(id)
    }

    /// The columns of the table `resource`, read once per run of grants.
    pub(super) async fn columns(
        &mut self,
        txn: &Txn,
        resource: &str,
        path: &str,
    ) -> Result<Vec<String>, StoreError> {
        if let Some(columns) = self.columns.get(resource) {
            return Ok(columns.clone());
        }
        let (schema, table) = resource.split_once('.').unwrap_or_default();
        let columns: Vec<String> = facts(txn, schema, table)
            .await
            .map_err(|_| FieldError::new(format!("{path}.resource"), "names no table"))?
            .columns
            .into_iter()
            .map(|c| c.name)
            .collect();
        self.columns.insert(resource.to_owned(), columns.clone());
        Ok(columns)
    }
}
