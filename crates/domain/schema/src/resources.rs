//! Resources (tables exposed to the Data API), the schema store and the
//! service that runs definitions through it.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::{Clock, Code, ErrorCode, FieldError, StoreError, new_id};
use permissions::Principal;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::functions::{Function, Routine};
use crate::plan::{self, ColumnInput, ColumnPatch, IndexInput, IndexPlan, Plan, TableInput};

/// Methods a resource may be exposed for.
pub const METHODS: [&str; 4] = ["GET", "POST", "PATCH", "DELETE"];

/// A table registered for the Data API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Resource id.
    pub id: Uuid,
    /// Schema of the table.
    pub schema: String,
    /// The table.
    pub table: String,
    /// Methods the Data API answers for it (empty: hidden).
    pub exposed_methods: Vec<String>,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// A table as the catalog describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// Table name.
    pub name: String,
    /// Its resource, when registered.
    pub resource_id: Option<Uuid>,
    /// Columns with types and constraints, as built by the database.
    pub columns: Value,
    /// Its indexes, the primary key's included.
    pub indexes: Value,
    /// Its own foreign keys.
    pub foreign_keys: Value,
    /// Other tables' foreign keys pointing at it.
    pub referenced_by: Value,
}

impl TableInfo {
    /// The named column's description.
    pub fn column(&self, name: &str) -> Option<&Value> {
        self.columns
            .as_array()?
            .iter()
            .find(|c| c["name"].as_str() == Some(name))
    }
}

/// A change of one column of an existing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnChange {
    /// Rename, retype, or change its constraints.
    Alter(ColumnPatch),
    /// Drop it (its grants' column lists lose it).
    Drop,
}

/// Persistence of tables and resources. Changes run their plan, the resource
/// record and the audit entry in one transaction.
#[async_trait]
pub trait SchemaStore: Send + Sync + 'static {
    /// Confirms the plan's facts and runs it; with `execute` registers the
    /// table as a hidden resource and commits, without it rolls everything back.
    async fn create_table(
        &self,
        plan: &Plan,
        resource_id: Uuid,
        execute: bool,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// The columns of an existing table; `None` when there is no such table.
    async fn table_columns(
        &self,
        schema: &str,
        table: &str,
    ) -> Result<Option<Vec<String>>, StoreError>;
    /// Confirms and runs an added column; answers the table's resource id.
    async fn add_column(&self, plan: &Plan, event: AuditEvent) -> Result<Uuid, StoreError>;
    /// Drops a table with its resource; false when there is no such table.
    async fn drop_table(
        &self,
        schema: &str,
        table: &str,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// The tables of a schema.
    async fn tables(&self, schema: &str) -> Result<Vec<TableInfo>, StoreError>;
    /// One table; `None` when there is no such table.
    async fn table(&self, schema: &str, table: &str) -> Result<Option<TableInfo>, StoreError>;
    /// Renames a table; its resource, DataViews and workflows follow.
    async fn rename_table(
        &self,
        schema: &str,
        table: &str,
        name: &str,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Plans a column change from the catalog and runs it; with `execute`
    /// commits, without it rolls back. Answers the SQL.
    async fn change_column(
        &self,
        target: (&str, &str, &str),
        change: &ColumnChange,
        execute: bool,
        event: AuditEvent,
    ) -> Result<String, StoreError>;
    /// Plans an index over a table (its name free).
    async fn plan_index(
        &self,
        schema: &str,
        table: &str,
        input: &IndexInput,
    ) -> Result<IndexPlan, StoreError>;
    /// Builds a planned index concurrently and records it.
    async fn build_index(&self, plan: IndexPlan, event: AuditEvent) -> Result<(), StoreError>;
    /// Drops an index of a table concurrently.
    async fn drop_index(
        &self,
        target: (&str, &str, &str),
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Every resource.
    async fn resources(&self) -> Result<Vec<Resource>, StoreError>;
    /// One resource.
    async fn resource(&self, id: Uuid) -> Result<Option<Resource>, StoreError>;
    /// Registers an existing table (hidden); conflict when registered, NotFound when missing.
    async fn register(&self, resource: Resource, event: AuditEvent)
    -> Result<Resource, StoreError>;
    /// Sets the exposed methods.
    async fn expose(
        &self,
        id: Uuid,
        methods: Vec<String>,
        event: AuditEvent,
    ) -> Result<Option<Resource>, StoreError>;
    /// The routines of that name in that schema, as the catalog has them.
    async fn routines(&self, schema: &str, name: &str) -> Result<Vec<Routine>, StoreError>;
    /// Every registered function.
    async fn functions(&self) -> Result<Vec<Function>, StoreError>;
    /// One registered function.
    async fn function(&self, id: Uuid) -> Result<Option<Function>, StoreError>;
    /// Registers a function (hidden); a conflict when it is registered.
    async fn register_function(
        &self,
        function: Function,
        event: AuditEvent,
    ) -> Result<Function, StoreError>;
    /// Sets a function's exposed methods.
    async fn expose_function(
        &self,
        id: Uuid,
        methods: Vec<String>,
        event: AuditEvent,
    ) -> Result<Option<Function>, StoreError>;
}

/// Failures of schema administration.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A field is wrong.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ErrorCode for SchemaError {
    fn code(&self) -> Code {
        match self {
            SchemaError::Invalid(e) => e.code(),
            SchemaError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            SchemaError::Invalid(e) => e.message(),
            SchemaError::Store(e) => e.message(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            SchemaError::Invalid(e) => e.field(),
            SchemaError::Store(e) => e.field(),
        }
    }
}

/// A table named in a path: a name that cannot exist is not found.
fn existing(schema: &str, table: &str) -> Result<(String, String), StoreError> {
    let schema = plan::schema_name(schema).map_err(|_| StoreError::NotFound)?;
    let table = plan::identifier(table, "table").map_err(|_| StoreError::NotFound)?;
    Ok((schema, table))
}

/// Schema administration for administrators.
#[derive(Clone)]
pub struct SchemaService {
    pub(crate) store: Arc<dyn SchemaStore>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl SchemaService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn SchemaStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// Creates a table (and its schema) as a hidden resource; answers the resource id.
    pub async fn create_table(
        &self,
        caller: &Principal,
        schema: &str,
        input: &TableInput,
        ip: Option<String>,
    ) -> Result<(Uuid, Plan), SchemaError> {
        let plan = plan::create_table(schema, input)?;
        let id = new_id();
        let event = AuditEvent::new(
            caller.actor(),
            "schema.table_create",
            Some(format!("resource:{id}")),
            ip,
        )
        .with_details(json!({ "schema": plan.schema, "table": plan.table, "sql": plan.sql() }));
        self.store.create_table(&plan, id, true, event).await?;
        Ok((id, plan))
    }

    /// Validates a definition as create would, and answers the SQL create would run.
    pub async fn preview_table(
        &self,
        caller: &Principal,
        schema: &str,
        input: &TableInput,
    ) -> Result<String, SchemaError> {
        let plan = plan::create_table(schema, input)?;
        let event = AuditEvent::new(caller.actor(), "schema.table_preview", None, None);
        self.store
            .create_table(&plan, new_id(), false, event)
            .await?;
        Ok(plan.sql())
    }

    /// Adds one column to an existing table; answers its resource id.
    pub async fn add_column(
        &self,
        caller: &Principal,
        schema: &str,
        table: &str,
        input: &ColumnInput,
        ip: Option<String>,
    ) -> Result<Uuid, SchemaError> {
        let schema = plan::schema_name(schema)?;
        let table = plan::identifier(table, "table").map_err(|_| StoreError::NotFound)?;
        let existing = self
            .store
            .table_columns(&schema, &table)
            .await?
            .ok_or(StoreError::NotFound)?;
        let plan = plan::add_column(&schema, &table, input, &existing)?;
        let event = AuditEvent::new(
            caller.actor(),
            "schema.column_add",
            Some(format!("table:{schema}.{table}")),
            ip,
        )
        .with_details(json!({ "column": input.name, "sql": plan.sql() }));
        Ok(self.store.add_column(&plan, event).await?)
    }

    /// Drops a table, its resource and its exposure.
    pub async fn drop_table(
        &self,
        caller: &Principal,
        schema: &str,
        table: &str,
        ip: Option<String>,
    ) -> Result<(), SchemaError> {
        let schema = plan::schema_name(schema).map_err(|_| StoreError::NotFound)?;
        let table = plan::identifier(table, "table").map_err(|_| StoreError::NotFound)?;
        let event = AuditEvent::new(
            caller.actor(),
            "schema.table_drop",
            Some(format!("table:{schema}.{table}")),
            ip,
        );
        if self.store.drop_table(&schema, &table, event).await? {
            Ok(())
        } else {
            Err(StoreError::NotFound.into())
        }
    }

    /// The tables of a schema.
    pub async fn tables(&self, schema: &str) -> Result<Vec<TableInfo>, SchemaError> {
        let schema = plan::schema_name(schema)?;
        Ok(self.store.tables(&schema).await?)
    }

    /// One table of an application schema.
    pub async fn table(&self, schema: &str, table: &str) -> Result<TableInfo, SchemaError> {
        let (schema, table) = existing(schema, table)?;
        Ok(self
            .store
            .table(&schema, &table)
            .await?
            .ok_or(StoreError::NotFound)?)
    }

    /// Renames a table; answers it as the list shows it.
    pub async fn rename_table(
        &self,
        caller: &Principal,
        (schema, table): (&str, &str),
        name: &str,
        ip: Option<String>,
    ) -> Result<TableInfo, SchemaError> {
        let (schema, table) = existing(schema, table)?;
        let name = plan::identifier(name, "name")?;
        let event = AuditEvent::new(
            caller.actor(),
            "schema.table_rename",
            Some(format!("table:{schema}.{table}")),
            ip,
        )
        .with_details(json!({ "name": name }));
        self.store
            .rename_table(&schema, &table, &name, event)
            .await?;
        self.table(&schema, &name).await
    }

    /// Changes or drops a column (with `execute`), or answers the SQL it
    /// would run (without). A change answers the column as the list shows it.
    pub async fn change_column(
        &self,
        caller: &Principal,
        (schema, table, column): (&str, &str, &str),
        change: &ColumnChange,
        execute: bool,
        ip: Option<String>,
    ) -> Result<(String, Option<Value>), SchemaError> {
        let (schema, table) = existing(schema, table)?;
        let column = plan::identifier(column, "column").map_err(|_| StoreError::NotFound)?;
        let action = match change {
            ColumnChange::Alter(_) => "schema.column_alter",
            ColumnChange::Drop => "schema.column_drop",
        };
        let event = AuditEvent::new(
            caller.actor(),
            action,
            Some(format!("table:{schema}.{table}")),
            ip,
        )
        .with_details(json!({ "column": column }));
        let target = (schema.as_str(), table.as_str(), column.as_str());
        let sql = self
            .store
            .change_column(target, change, execute, event)
            .await?;
        let ColumnChange::Alter(patch) = change else {
            return Ok((sql, None));
        };
        if !execute {
            return Ok((sql, None));
        }
        let name = patch.name.as_deref().unwrap_or(&column);
        let described = self.table(&schema, &table).await?.column(name).cloned();
        Ok((sql, described))
    }

    /// The indexes of a table.
    pub async fn indexes(&self, schema: &str, table: &str) -> Result<Value, SchemaError> {
        Ok(self.table(schema, table).await?.indexes)
    }

    /// Builds an index concurrently (with `execute`) and answers it, or
    /// answers the SQL it would run.
    pub async fn create_index(
        &self,
        caller: &Principal,
        (schema, table): (&str, &str),
        input: &IndexInput,
        execute: bool,
        ip: Option<String>,
    ) -> Result<(String, Option<Value>), SchemaError> {
        let (schema, table) = existing(schema, table)?;
        let plan = self.store.plan_index(&schema, &table, input).await?;
        let sql = format!("{};", plan.sql);
        if !execute {
            return Ok((sql, None));
        }
        let name = plan.name.clone();
        let event = AuditEvent::new(
            caller.actor(),
            "schema.index_create",
            Some(format!("table:{schema}.{table}")),
            ip,
        )
        .with_details(json!({ "name": name, "sql": sql }));
        self.store.build_index(plan, event).await?;
        let indexes = self.table(&schema, &table).await?.indexes;
        let built = indexes
            .as_array()
            .and_then(|all| all.iter().find(|i| i["name"].as_str() == Some(&name)))
            .cloned();
        Ok((sql, built))
    }

    /// Drops an index of a table.
    pub async fn drop_index(
        &self,
        caller: &Principal,
        (schema, table, name): (&str, &str, &str),
        ip: Option<String>,
    ) -> Result<(), SchemaError> {
        let (schema, table) = existing(schema, table)?;
        let name = plan::identifier(name, "name").map_err(|_| StoreError::NotFound)?;
        let event = AuditEvent::new(
            caller.actor(),
            "schema.index_drop",
            Some(format!("table:{schema}.{table}")),
            ip,
        )
        .with_details(json!({ "name": name }));
        Ok(self
            .store
            .drop_index((&schema, &table, &name), event)
            .await?)
    }

    /// Every resource.
    pub async fn resources(&self) -> Result<Vec<Resource>, SchemaError> {
        Ok(self.store.resources().await?)
    }

    /// One resource.
    pub async fn resource(&self, id: Uuid) -> Result<Resource, SchemaError> {
        Ok(self.store.resource(id).await?.ok_or(StoreError::NotFound)?)
    }

    /// Registers a table created outside the service, hidden.
    pub async fn register(
        &self,
        caller: &Principal,
        schema: &str,
        table: &str,
        ip: Option<String>,
    ) -> Result<Resource, SchemaError> {
        let resource = Resource {
            id: new_id(),
            schema: plan::schema_name(schema)?,
            table: plan::identifier(table, "table")?,
            exposed_methods: Vec::new(),
            created_at: self.clock.now(),
        };
        let event = AuditEvent::new(
            caller.actor(),
            "resource.register",
            Some(format!("resource:{}", resource.id)),
            ip,
        )
        .with_details(json!({ "schema": resource.schema, "table": resource.table }));
        Ok(self.store.register(resource, event).await?)
    }

    /// Sets the methods a resource is exposed for (a subset of GET, POST, PATCH, DELETE).
    pub async fn expose(
        &self,
        caller: &Principal,
        id: Uuid,
        methods: &[String],
        ip: Option<String>,
    ) -> Result<Resource, SchemaError> {
        let chosen = chosen_methods(methods, &METHODS, "must be GET, POST, PATCH or DELETE")?;
        let event = AuditEvent::new(
            caller.actor(),
            "resource.expose",
            Some(format!("resource:{id}")),
            ip,
        )
        .with_details(json!({ "exposedMethods": chosen }));
        Ok(self
            .store
            .expose(id, chosen, event)
            .await?
            .ok_or(StoreError::NotFound)?)
    }
}

/// `methods` upper-cased, each once, in the order of `known`; one not in
/// `known` is refused with `message`.
pub(crate) fn chosen_methods(
    methods: &[String],
    known: &[&str],
    message: &'static str,
) -> Result<Vec<String>, FieldError> {
    let mut chosen: Vec<String> = Vec::new();
    for (i, m) in methods.iter().enumerate() {
        let m = m.to_ascii_uppercase();
        if !known.contains(&m.as_str()) {
            return Err(FieldError::new(format!("exposedMethods[{i}]"), message));
        }
        if !chosen.contains(&m) {
            chosen.push(m);
        }
    }
    chosen.sort_by_key(|m| known.iter().position(|k| k == m));
    Ok(chosen)
}
