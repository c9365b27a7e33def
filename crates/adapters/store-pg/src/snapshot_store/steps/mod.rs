//! One snapshot step run in the apply's transaction, one file per kind of
//! thing a snapshot holds. Names are turned into ids here, where the
//! earlier steps' creations are visible; a name that nothing has is
//! refused on the snapshot's path to it.

mod functions;
mod grants;
mod memo;
mod roles;
mod settings;
mod tables;
mod views;
mod workflows;

use crate::db::Txn;
use kernel::{FieldError, StoreError};
use snapshot::Operation;
use uuid::Uuid;

use crate::query::Query;
use crate::schema_store::alter::change_column;
use crate::{PgStore, execute, rows, stmt};

pub(super) use grants::create_grants;
pub(super) use memo::Memo;

/// Runs one step; answers the SQL of a schema step. With `dry` (a diff),
/// nothing takes a lock another session could wait on: a table that
/// exists gets no DDL (it is planned and checked against the catalog),
/// new tables are made without their foreign keys, no event trigger is
/// set, no schema lock is taken, and no row of the service tables that
/// exists is changed or deleted. New rows (roles, resources, workflows,
/// DataViews, grants) are written, and rolled back with the diff, so that
/// later steps find the names; what earlier steps would change in rows
/// that exist (settings, a DataView's columns) is kept in the [`Memo`].
pub(super) async fn run(
    store: &PgStore,
    txn: &Txn,
    operation: &Operation,
    memo: &mut Memo,
    dry: bool,
) -> Result<Option<String>, StoreError> {
    // Grants run one after another with nothing changing between them;
    // anything else may change what the memo holds.
    if !matches!(operation, Operation::CreateGrant(..)) {
        memo.forget_lookups();
    }
    match operation {
        Operation::PutRole(role) => roles::put(store, txn, role, dry).await.map(|()| None),
        // A diff deletes nothing: no later step needs a row gone.
        Operation::DropRole(_)
        | Operation::DropWorkflow(_)
        | Operation::DropDataView(_)
        | Operation::DropDashboard(_)
        | Operation::DropGrant(_)
            if dry =>
        {
            Ok(None)
        }
        Operation::DropRole(name) => delete(txn, roles::DROP, name).await,
        Operation::CreateTable(table, path) => {
            tables::create(store, txn, table, path, dry).await.map(Some)
        }
        Operation::DropTable(schema, table) => {
            tables::drop(txn, (schema, table), dry).await.map(Some)
        }
        Operation::AddColumn(schema, table, column, path) => {
            tables::add_column(store, txn, (schema, table), column, path, dry)
                .await
                .map(Some)
        }
        Operation::AlterColumn(schema, table, column, patch, path) => {
            let change = schema::ColumnChange::Alter(patch.clone());
            Ok(Some(
                change_column(txn, (schema, table, column), &change, !dry)
                    .await
                    .map_err(within(path))?
                    .sql(),
            ))
        }
        Operation::DropColumn(schema, table, column) => Ok(Some(
            change_column(
                txn,
                (schema, table, column),
                &schema::ColumnChange::Drop,
                !dry,
            )
            .await?
            .sql(),
        )),
        Operation::CreateIndex(schema, table, index, path) => {
            tables::create_index(txn, (schema, table), index, path, dry)
                .await
                .map(Some)
        }
        Operation::DropIndex(schema, name) => {
            tables::drop_index(txn, (schema, name), dry).await.map(Some)
        }
        Operation::RegisterResource(schema, table) => tables::register(store, txn, (schema, table))
            .await
            .map(|()| None),
        Operation::Expose(resource, _) => tables::expose(txn, resource, dry).await.map(|()| None),
        Operation::RegisterFunction(function, path) => {
            functions::register(store, txn, function, path)
                .await
                .map(|()| None)
        }
        Operation::ExposeFunction(function, path) => functions::expose(txn, function, path, dry)
            .await
            .map(|()| None),
        Operation::PutWorkflow(workflow, path) => {
            workflows::put(store, txn, workflow, path, dry, memo)
                .await
                .map(|()| None)
        }
        Operation::DropWorkflow(slug) => delete(txn, workflows::DROP, slug).await,
        Operation::PutDataView(view, _, sources) => {
            views::put_dataview(store, txn, (view, sources), dry, memo)
                .await
                .map(|()| None)
        }
        Operation::DropDataView(slug) => delete(txn, views::DROP_DATAVIEW, slug).await,
        Operation::PutDashboard(dashboard, path) => {
            views::put_dashboard(store, txn, dashboard, path, dry, memo)
                .await
                .map(|()| None)
        }
        Operation::DropDashboard(slug) => delete(txn, views::DROP_DASHBOARD, slug).await,
        Operation::CreateGrant(grant, path) => create_grants(store, txn, &[(grant, path)], memo)
            .await
            .map(|()| None),
        Operation::DropGrant(grant) => grants::drop(txn, grant).await.map(|()| None),
        Operation::SetSetting(key, value) => settings::set(store, txn, key, value, dry, memo)
            .await
            .map(|()| None),
    }
}

/// Deletes the row `sql` names by `$1` = `key`.
async fn delete(txn: &Txn, sql: &str, key: &str) -> Result<Option<String>, StoreError> {
    execute(txn, sql, vec![key.into()]).await?;
    Ok(None)
}

/// `at` for a store refusal that is a field's.
fn within(path: &str) -> impl Fn(StoreError) -> StoreError + '_ {
    move |e| match e {
        StoreError::Invalid(f) => snapshot::at(path, f).into(),
        other => other,
    }
}

/// The id `sql` (over `$1`) finds, or a refusal at `path`.
async fn id_of(txn: &Txn, sql: &str, name: &str, path: &str) -> Result<Uuid, StoreError> {
    let row = txn.fetch_optional(stmt(sql, [name.into()])).await?;
    match row {
        Some(r) => rows::column(&r, "id"),
        None => Err(FieldError::new(
            path.to_owned(),
            format!("names {name}, which neither the snapshot nor this instance has"),
        )
        .into()),
    }
}

/// A role's id by its name.
const ROLE_ID: &str = "SELECT id FROM svc.roles WHERE lower(name) = lower($1)";
/// A registered table's id by `schema.table`.
const RESOURCE_ID: &str =
    "SELECT id FROM svc.resources WHERE schema_name || '.' || table_name = $1";
/// A registered function's id by `schema.function`.
const FUNCTION_ID: &str =
    "SELECT id FROM svc.functions WHERE schema_name || '.' || function_name = $1";
/// A workflow's id by its slug.
const WORKFLOW_ID: &str = "SELECT id FROM svc.workflows WHERE slug = $1";
/// A DataView's id by its slug.
const DATAVIEW_ID: &str = "SELECT id FROM svc.dataviews WHERE slug = $1";
/// An active user's id by email.
const USER_ID: &str = "SELECT id FROM svc.users WHERE lower(email) = lower($1) AND active";
