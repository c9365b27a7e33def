//! Grants: what a role may do on a resource (read, create, update, delete),
//! a workflow (invoke) or a DataView (read), limited by an optional row
//! filter and, on a resource, a column list.

use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::filter::Filter;
use kernel::{Clock, FieldError, StoreError, new_id};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{PermissionsError, Principal};

/// An action a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// GET on a resource.
    Read,
    /// POST on a resource.
    Create,
    /// PATCH on a resource.
    Update,
    /// DELETE on a resource.
    Delete,
    /// Calling a workflow.
    Invoke,
}

impl Action {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Invoke => "invoke",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => Action::Read,
            "create" => Action::Create,
            "update" => Action::Update,
            "delete" => Action::Delete,
            "invoke" => Action::Invoke,
            _ => return None,
        })
    }
}

/// A grant.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// Grant id.
    pub id: Uuid,
    /// The role it is given to.
    pub role_id: Uuid,
    /// The resource (for read, create, update, delete).
    pub resource_id: Option<Uuid>,
    /// The workflow (for invoke).
    pub workflow_id: Option<Uuid>,
    /// The DataView (for read).
    pub data_view_id: Option<Uuid>,
    /// What it allows.
    pub action: Action,
    /// Rows it covers (filter language); `None`: all.
    pub filter: Option<Value>,
    /// Columns it covers; `None`: all.
    pub columns: Option<Vec<String>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Which grants to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrantQuery {
    /// Only this role's.
    pub role_id: Option<Uuid>,
    /// Only on this resource.
    pub resource_id: Option<Uuid>,
}

/// Persistence of grants.
#[async_trait]
pub trait GrantStore: Send + Sync + 'static {
    /// Grants matching `query`.
    async fn grants(&self, query: GrantQuery) -> Result<Vec<Grant>, StoreError>;
    /// What a resource is (a table with its columns, or a function);
    /// `None` when there is no such resource.
    async fn resource_target(
        &self,
        resource_id: Uuid,
    ) -> Result<Option<ResourceTarget>, StoreError>;
    /// The output columns of a DataView (published, else its draft); `None`
    /// when there is no such view.
    async fn data_view_columns(&self, view_id: Uuid) -> Result<Option<Vec<String>>, StoreError>;
    /// Stores a grant; an unknown role is an invalid `roleId`.
    async fn create_grant(&self, grant: Grant, event: AuditEvent) -> Result<Grant, StoreError>;
    /// Deletes a grant; false when there is none.
    async fn delete_grant(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
}

/// What a resource id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceTarget {
    /// A table, with its columns.
    Table(Vec<String>),
    /// A database function (API.md 18): its only action is invoke.
    Function,
}

/// Input of a new grant, before validation.
#[derive(Debug, Clone)]
pub struct NewGrant {
    /// The role.
    pub role_id: Uuid,
    /// The resource.
    pub resource_id: Option<Uuid>,
    /// The workflow.
    pub workflow_id: Option<Uuid>,
    /// The DataView.
    pub data_view_id: Option<Uuid>,
    /// `read`, `create`, `update`, `delete` or `invoke`.
    pub action: String,
    /// Row filter.
    pub filter: Option<Value>,
    /// Column list.
    pub columns: Option<Vec<String>>,
}

/// Grant administration.
#[derive(Clone)]
pub struct GrantService {
    store: Arc<dyn GrantStore>,
    clock: Arc<dyn Clock>,
}

impl GrantService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn GrantStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// Grants matching `query`.
    pub async fn grants(&self, query: GrantQuery) -> Result<Vec<Grant>, PermissionsError> {
        Ok(self.store.grants(query).await?)
    }

    /// Validates and stores a grant: the action fits its target, the filter
    /// parses and names only the table's (or the view's output) columns,
    /// the columns exist.
    pub async fn create(
        &self,
        caller: &Principal,
        input: NewGrant,
        ip: Option<String>,
    ) -> Result<Grant, PermissionsError> {
        let action = Action::parse(&input.action).ok_or_else(|| {
            FieldError::new("action", "must be read, create, update, delete or invoke")
        })?;
        let targets = [input.resource_id, input.workflow_id, input.data_view_id];
        if targets.iter().flatten().count() != 1 {
            return Err(FieldError::new(
                "resourceId",
                "give exactly one of resourceId, workflowId and dataViewId",
            )
            .into());
        }
        let columns = match (input.resource_id, input.workflow_id, input.data_view_id) {
            (Some(id), _, _) => match self
                .store
                .resource_target(id)
                .await?
                .ok_or_else(|| FieldError::new("resourceId", "no such resource"))?
            {
                ResourceTarget::Table(_) if action == Action::Invoke => {
                    return Err(FieldError::new(
                        "action",
                        "invoke applies to workflows and functions",
                    )
                    .into());
                }
                ResourceTarget::Table(columns) => Some(columns),
                ResourceTarget::Function => {
                    return self.create_function_grant(caller, input, action, ip).await;
                }
            },
            (_, Some(_), _) if action != Action::Invoke => {
                return Err(
                    FieldError::new("action", "a workflow grant's action is invoke").into(),
                );
            }
            (_, _, Some(_)) if action != Action::Read => {
                return Err(FieldError::new("action", "a DataView grant's action is read").into());
            }
            (_, _, Some(id)) => Some(
                self.store
                    .data_view_columns(id)
                    .await?
                    .ok_or_else(|| FieldError::new("dataViewId", "no such DataView"))?,
            ),
            _ => None,
        };
        if let Some(filter) = &input.filter {
            let parsed = Filter::parse(filter, "filter")?;
            let known = columns
                .as_ref()
                .ok_or_else(|| FieldError::new("filter", "workflow grants take no row filter"))?;
            if let Some(unknown) = parsed
                .columns()
                .into_iter()
                .find(|c| !known.iter().any(|k| k == c))
            {
                return Err(FieldError::new(
                    "filter",
                    format!("{unknown} is not a column of the table or view"),
                )
                .into());
            }
        }
        if input.columns.is_some() && input.resource_id.is_none() {
            return Err(FieldError::new("columns", "only resource grants take columns").into());
        }
        let chosen = match &input.columns {
            None => None,
            Some(list) => {
                let known = columns.as_deref().unwrap_or_default();
                if list.is_empty() {
                    return Err(FieldError::new(
                        "columns",
                        "must name at least one column (omit it for all)",
                    )
                    .into());
                }
                let mut chosen: Vec<String> = Vec::with_capacity(list.len());
                for (i, c) in list.iter().enumerate() {
                    if !known.contains(c) {
                        return Err(FieldError::new(
                            format!("columns[{i}]"),
                            "is not a column of the table",
                        )
                        .into());
                    }
                    if !chosen.contains(c) {
                        chosen.push(c.clone());
                    }
                }
                Some(chosen)
            }
        };
        self.store_grant(caller, input, action, chosen, ip).await
    }

    /// Stores a validated grant with its audit entry.
    async fn store_grant(
        &self,
        caller: &Principal,
        input: NewGrant,
        action: Action,
        columns: Option<Vec<String>>,
        ip: Option<String>,
    ) -> Result<Grant, PermissionsError> {
        let grant = Grant {
            id: new_id(),
            role_id: input.role_id,
            resource_id: input.resource_id,
            workflow_id: input.workflow_id,
            data_view_id: input.data_view_id,
            action,
            filter: input.filter,
            columns,
            created_at: self.clock.now(),
        };
        let event = AuditEvent::new(caller.actor(), "grant.create", Some(format!("grant:{}", grant.id)), ip).with_details(json!({
            "roleId": grant.role_id, "resourceId": grant.resource_id, "workflowId": grant.workflow_id, "dataViewId": grant.data_view_id, "action": action.as_str()
        }));
        Ok(self.store.create_grant(grant, event).await?)
    }

    /// Stores a grant on a function: it invokes, with no filter or columns.
    async fn create_function_grant(
        &self,
        caller: &Principal,
        input: NewGrant,
        action: Action,
        ip: Option<String>,
    ) -> Result<Grant, PermissionsError> {
        if action != Action::Invoke {
            return Err(FieldError::new("action", "a function grant's action is invoke").into());
        }
        if input.filter.is_some() {
            return Err(FieldError::new("filter", "function grants take no row filter").into());
        }
        if input.columns.is_some() {
            return Err(FieldError::new("columns", "function grants take no columns").into());
        }
        self.store_grant(caller, input, action, None, ip).await
    }

    /// Deletes a grant.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), PermissionsError> {
        let event = AuditEvent::new(
            caller.actor(),
            "grant.delete",
            Some(format!("grant:{id}")),
            ip,
        );
        if self.store.delete_grant(id, event).await? {
            Ok(())
        } else {
            Err(StoreError::NotFound.into())
        }
    }
}
