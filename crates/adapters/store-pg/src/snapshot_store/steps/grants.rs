//! A snapshot's grants, checked as the grants route checks them.

use crate::db::Txn;
use kernel::filter::Filter;
use kernel::{FieldError, StoreError, new_id};
use serde_json::Value as Json;
use snapshot::Grant;

use super::views::view_outputs;
use super::{DATAVIEW_ID, FUNCTION_ID, Memo, RESOURCE_ID, ROLE_ID, WORKFLOW_ID};
use crate::{PgStore, execute};

/// A grant (its target, action and filter checked by the plan) with ids
/// for names, its filter's and columns' names found in the table or view,
/// as the row [`create_grants`] inserts.
async fn checked_grant(
    txn: &Txn,
    grant: &Grant,
    path: &str,
    memo: &mut Memo,
) -> Result<Json, StoreError> {
    let role = memo
        .id(txn, ROLE_ID, &grant.role, &format!("{path}.role"))
        .await?;
    let resource = match &grant.resource {
        Some(r) => Some(
            memo.id(txn, RESOURCE_ID, r, &format!("{path}.resource"))
                .await?,
        ),
        None => None,
    };
    let workflow = match &grant.workflow {
        Some(w) => Some(
            memo.id(txn, WORKFLOW_ID, w, &format!("{path}.workflow"))
                .await?,
        ),
        None => None,
    };
    let data_view = match &grant.data_view {
        Some(v) => Some(
            memo.id(txn, DATAVIEW_ID, v, &format!("{path}.dataView"))
                .await?,
        ),
        None => None,
    };
    let function = match &grant.function {
        Some(f) => Some(
            memo.id(txn, FUNCTION_ID, f, &format!("{path}.function"))
                .await?,
        ),
        None => None,
    };
    let known: Option<Vec<String>> = match (&grant.resource, &grant.data_view) {
        (Some(resource), _) => Some(memo.columns(txn, resource, path).await?),
        (None, Some(view)) => view_outputs(txn, memo, view).await?,
        _ => None,
    };
    if let Some(filter) = &grant.filter
        && let Some(known) = known.as_deref()
    {
        let parsed = Filter::parse(filter, "filter").map_err(|e| snapshot::at(path, e))?;
        if let Some(unknown) = parsed
            .columns()
            .into_iter()
            .find(|c| !known.iter().any(|k| k == c))
        {
            return Err(FieldError::new(
                format!("{path}.filter"),
                format!("{unknown} is not a column of the table or view"),
            )
            .into());
        }
    }
    if let Some(columns) = &grant.columns
        && let Some(table_columns) = known.as_deref()
        && let Some((i, _)) = columns
            .iter()
            .enumerate()
            .find(|(_, c)| !table_columns.contains(c))
    {
        return Err(FieldError::new(
            format!("{path}.columns[{i}]"),
            "is not a column of the table",
        )
        .into());
    }
    Ok(serde_json::json!({
        "id": new_id(), "role": role, "resource": resource, "workflow": workflow, "dataView": data_view,
        "function": function, "action": grant.action, "filter": grant.filter, "columns": grant.columns,
    }))
}

/// Checks grants and inserts them in one statement.
pub(crate) async fn create_grants(
    store: &PgStore,
    txn: &Txn,
    grants: &[(&Grant, &str)],
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let mut rows = Vec::with_capacity(grants.len());
    for (grant, path) in grants {
        rows.push(checked_grant(txn, grant, path, memo).await?);
    }
    execute(
        txn,
        "INSERT INTO svc.grants (id, role_id, resource_id, workflow_id, data_view_id, function_id, action, filter, columns, created_at) \
         SELECT (g ->> 'id')::uuid, (g ->> 'role')::uuid, (g ->> 'resource')::uuid, (g ->> 'workflow')::uuid, \
                (g ->> 'dataView')::uuid, (g ->> 'function')::uuid, g ->> 'action', nullif(g -> 'filter', 'null'::jsonb), \
                CASE WHEN jsonb_typeof(g -> 'columns') = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(g -> 'columns')) END, $2 \
         FROM jsonb_array_elements($1) AS g",
        vec![Json::Array(rows).into(), store.now().into()],
    )
    .await?;
    Ok(())
}

/// Deletes the grant of the same role, action, filter, columns and target.
pub(super) async fn drop(txn: &Txn, grant: &Grant) -> Result<(), StoreError> {
    execute(
        txn,
        "DELETE FROM svc.grants g USING svc.roles r WHERE r.id = g.role_id AND r.name = $1 AND g.action = $2 \
         AND g.filter IS NOT DISTINCT FROM $3 AND g.columns IS NOT DISTINCT FROM $4 \
         AND g.resource_id IS NOT DISTINCT FROM (SELECT id FROM svc.resources WHERE schema_name || '.' || table_name = $5) \
         AND g.workflow_id IS NOT DISTINCT FROM (SELECT id FROM svc.workflows WHERE slug = $6) \
         AND g.data_view_id IS NOT DISTINCT FROM (SELECT id FROM svc.dataviews WHERE slug = $7) \
         AND g.function_id IS NOT DISTINCT FROM (SELECT id FROM svc.functions WHERE schema_name || '.' || function_name = $8)",
        vec![
            grant.role.clone().into(),
            grant.action.clone().into(),
            grant.filter.clone().into(),
            grant.columns.clone().into(),
            grant.resource.clone().into(),
            grant.workflow.clone().into(),
            grant.data_view.clone().into(),
            grant.function.clone().into(),
        ],
    )
    .await?;
    Ok(())
}
