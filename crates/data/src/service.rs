//! The Data API's rules: resolve the table and the caller's access, check
//! every name and value against the table's real columns, and hand the store
//! one scoped query.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use audit::AuditEvent;
use auth::{AuthError, AuthService, CredentialLookup, Resolved};
use chrono::{DateTime, Utc};
use kernel::filter::{Filter, Op, Operand};
use kernel::{Clock, Code, ErrorCode, FieldError, StoreError, Versions};
use permissions::{Access, Action, Denied, Plane, Principal, zone};
use serde_json::{Map, Value, json};

use crate::query::{Change, Context, DataStore, ListQuery, Output, Predicate, Read, Write};
use crate::table::{Column, Kind, SERVICE_TABLES, Table};

/// A list read's answer: a list always answers, even with no rows.
fn listed(answer: Option<String>) -> Result<String, DataError> {
    answer.ok_or_else(|| {
        DataError::Store(StoreError::Internal(
            "the list read answered nothing".into(),
        ))
    })
}

/// Default page size.
const LIMIT_DEFAULT: u32 = 100;
/// Largest page size.
const LIMIT_MAX: u32 = 1000;

/// A read request: the bearer secret, resolved by the read itself.
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest<'a> {
    /// The `Authorization: Bearer` secret.
    pub bearer: &'a str,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
}

/// What a read asks for.
enum Shape<'a> {
    List(&'a ListParams),
    One(&'a str),
}

/// Most credentials remembered; past it the memory starts afresh.
const KNOWN_CALLERS_MAX: usize = 10_000;

/// Reads planned again when the shared state changes under them, before
/// answering 503.
const STALE_RETRIES: usize = 3;

/// A caller as its credential was last resolved.
#[derive(Debug, Clone)]
struct KnownCaller {
    principal: Principal,
    /// The auth version it was resolved at.
    version: i64,
    expires_at: DateTime<Utc>,
}

/// The caller each credential stood for when last resolved, so a read can be
/// answered without resolving it again while its auth version is current
/// (the read's own statement checks that).
#[derive(Debug, Default)]
struct KnownCallers(RwLock<HashMap<CredentialLookup, KnownCaller>>);

impl KnownCallers {
    /// The caller `lookup` stood for, unless its credential has expired since.
    fn get(&self, lookup: &CredentialLookup, now: DateTime<Utc>) -> Option<KnownCaller> {
        self.0
            .read()
            .ok()?
            .get(lookup)
            .filter(|known| known.expires_at > now)
            .cloned()
    }

    fn put(&self, lookup: CredentialLookup, resolved: &Resolved) {
        if let Ok(mut known) = self.0.write() {
            if known.len() >= KNOWN_CALLERS_MAX {
                known.clear();
            }
            known.insert(
                lookup,
                KnownCaller {
                    principal: resolved.principal.clone(),
                    version: resolved.versions.auth,
                    expires_at: resolved.expires_at,
                },
            );
        }
    }
}

/// Who is asking, and from where.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The authenticated caller.
    pub principal: &'a Principal,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
    /// The client address, for the audit log.
    pub ip: Option<&'a str>,
}

/// The list route's query parameters, as sent.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `select=a,b`.
    pub select: Option<String>,
    /// `filter=<JSON>`.
    pub filter: Option<String>,
    /// `sort=-a,b`.
    pub sort: Option<String>,
    /// `limit`.
    pub limit: Option<String>,
    /// `offset`.
    pub offset: Option<String>,
    /// `count=exact`.
    pub count: Option<String>,
}

/// Why a Data API request fails.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A query parameter is wrong.
    #[error("{}", .0.message)]
    Query(FieldError),
    /// The body is wrong.
    #[error("{}", .0.message)]
    Payload(FieldError),
    /// The credential is missing, unknown or expired.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// No grant allows it.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// No such (visible) table or row.
    #[error("not found")]
    NotFound,
    /// The table is not exposed for this method.
    #[error("this table is not exposed for this method")]
    MethodNotAllowed {
        /// The methods it is exposed for.
        allowed: Vec<String>,
    },
    /// A CHECK constraint failed; the message is the column's check message.
    #[error("{0}")]
    Check(String),
    /// The store failed or refused.
    #[error(transparent)]
    Store(StoreError),
}

impl ErrorCode for DataError {
    fn code(&self) -> Code {
        match self {
            DataError::Query(_) => Code::InvalidQuery,
            DataError::Payload(_) => Code::InvalidPayload,
            DataError::Auth(e) => e.code(),
            DataError::Denied(_) => Code::PermissionDenied,
            DataError::NotFound => Code::NotFound,
            DataError::MethodNotAllowed { .. } => Code::MethodNotAllowed,
            DataError::Check(_) => Code::CheckViolation,
            DataError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            DataError::Store(e) => e.message(),
            DataError::Auth(e) => e.message(),
            DataError::NotFound => "Not found".into(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            DataError::Query(e) | DataError::Payload(e) => Some(&e.field),
            DataError::Store(e) => e.field(),
            _ => None,
        }
    }
}

/// The Data API.
#[derive(Clone)]
pub struct DataService {
    store: Arc<dyn DataStore>,
    clock: Arc<dyn Clock>,
    auth: AuthService,
    callers: Arc<KnownCallers>,
}

impl DataService {
    /// A service over `store`; `auth` judges the credential records reads bring back.
    pub fn new(store: Arc<dyn DataStore>, clock: Arc<dyn Clock>, auth: AuthService) -> Self {
        Self {
            store,
            clock,
            auth,
            callers: Arc::default(),
        }
    }

    /// `GET /api/data/{schema}/{table}`: the `{ data, meta }` answer as JSON text.
    pub async fn list(
        &self,
        request: ReadRequest<'_>,
        schema: &str,
        name: &str,
        params: &ListParams,
    ) -> Result<String, DataError> {
        self.read(request, schema, name, Shape::List(params))
            .await
            .and_then(listed)
    }

    /// `GET /api/data/{schema}/{table}/{pk}`: the `{ data }` answer as JSON text.
    pub async fn get(
        &self,
        request: ReadRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
    ) -> Result<String, DataError> {
        let row = self
            .read(request, schema, name, Shape::One(key))
            .await?
            .ok_or(DataError::NotFound)?;
        Ok(format!("{{\"data\":{row}}}"))
    }

    /// Lists rows as a caller resolved at auth version `auth_version` (a
    /// workflow's data step); [`StoreError::Stale`] when that is no longer current.
    pub async fn list_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        schema: &str,
        name: &str,
        params: &ListParams,
    ) -> Result<String, DataError> {
        self.read_as(
            caller.principal,
            auth_version,
            caller.zone_header,
            schema,
            name,
            &Shape::List(params),
        )
        .await
        .and_then(listed)
    }

    /// Authenticates and reads. A credential resolved before is answered in
    /// one round trip: the read's statement checks that the caller, the
    /// table and the settings it was planned on are still current. When they
    /// are not, or the cached plan refuses, the credential is resolved afresh
    /// (which brings every cache up to date) and the read planned again, so
    /// nothing is ever answered or refused on stale state.
    async fn read(
        &self,
        request: ReadRequest<'_>,
        schema: &str,
        name: &str,
        shape: Shape<'_>,
    ) -> Result<Option<String>, DataError> {
        let lookup = CredentialLookup::of(request.bearer);
        if let Some(known) = self.callers.get(&lookup, self.clock.now())
            && let Ok(body) = self
                .read_as(
                    &known.principal,
                    known.version,
                    request.zone_header,
                    schema,
                    name,
                    &shape,
                )
                .await
        {
            return Ok(body);
        }
        for _ in 0..STALE_RETRIES {
            let resolved = self.auth.resolve(request.bearer).await?;
            resolved.principal.authorize(Plane::Api, false)?;
            self.callers.put(lookup, &resolved);
            match self
                .read_as(
                    &resolved.principal,
                    resolved.versions.auth,
                    request.zone_header,
                    schema,
                    name,
                    &shape,
                )
                .await
            {
                Err(DataError::Store(StoreError::Stale)) => continue,
                answer => return answer,
            }
        }
        Err(DataError::Store(StoreError::Stale))
    }

    /// Plans and runs a read as `caller`, resolved at auth version `auth_version`.
    async fn read_as(
        &self,
        caller: &Principal,
        auth_version: i64,
        zone_header: Option<&str>,
        schema: &str,
        name: &str,
        shape: &Shape<'_>,
    ) -> Result<Option<String>, DataError> {
        let table = self.open(schema, name, "GET").await?;
        let access = Access::evaluate(caller, &table.scopes, Action::Read)?;
        let filter;
        let read = match shape {
            Shape::List(params) => {
                filter = params
                    .filter
                    .as_deref()
                    .map(|raw| parse_filter(&table, &access, raw))
                    .transpose()?;
                Read::List(ListQuery {
                    select: select(&table, &access, params.select.as_deref())?,
                    predicate: scoped(filter.as_ref().map(Predicate::Own), &access, None),
                    sort: sort(&table, &access, params.sort.as_deref())?,
                    masks: table
                        .columns
                        .iter()
                        .filter_map(|column| {
                            access.column_filters(&column.name).map(|mask| Output {
                                column,
                                mask: Some(mask),
                            })
                        })
                        .collect(),
                    limit: number(
                        params.limit.as_deref(),
                        "limit",
                        LIMIT_DEFAULT,
                        1,
                        u64::from(LIMIT_MAX),
                    )?,
                    offset: number(params.offset.as_deref(), "offset", 0, 0, i64::MAX as u64)?,
                    count: match params.count.as_deref() {
                        None => false,
                        Some("exact") => true,
                        Some(_) => return Err(query_error("count", "must be exact")),
                    },
                })
            }
            Shape::One(key) => Read::One {
                predicate: scoped(None, &access, Some(key_of(&table, key)?)),
                select: select(&table, &access, None)?,
            },
        };
        let mut context = self.context(caller, zone_header).await?;
        context.versions.auth = auth_version;
        context.versions.catalog = table.version;
        self.store
            .read(&table, &read, &context)
            .await
            .map_err(read_error)
    }

    /// `POST /api/data/{schema}/{table}`: one row (an object) or several (an
    /// array), in one transaction; the `{ data }` answer as JSON text.
    pub async fn create(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        let table = self.open(schema, name, "POST").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Create)?;
        let (rows, single) = match body {
            Value::Object(row) => (vec![(row, String::new())], true),
            Value::Array(items) if items.is_empty() => {
                return Err(payload_error("data", "must hold at least one row"));
            }
            Value::Array(items) => (
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        item.as_object()
                            .map(|row| (row, format!("[{i}]")))
                            .ok_or_else(|| payload_error(format!("[{i}]"), "must be an object"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                false,
            ),
            _ => {
                return Err(payload_error(
                    "data",
                    "must be an object or an array of objects",
                ));
            }
        };
        let returning = self.returning(caller.principal, &table, &access);
        let mut writes: Vec<Write<'_>> = Vec::new();
        let mut run_keys: Option<Vec<&String>> = None;
        for (row, path) in &rows {
            let columns = checked_columns(&table, &access, row, path)?;
            let keys: Vec<&String> = row.keys().collect();
            if run_keys.as_ref() == Some(&keys)
                && let Some(Write {
                    change: Change::Insert { rows, .. },
                    ..
                }) = writes.last_mut()
            {
                rows.push(row);
                continue;
            }
            let narrowed = cover(&access, &columns, path)?;
            writes.push(Write {
                change: Change::Insert {
                    columns,
                    rows: vec![row],
                },
                check: narrowed.row_filters(),
                returning: returning.clone(),
                audit: self.audit(caller, &table, "data.create"),
            });
            run_keys = Some(keys);
        }
        let context = self.context(caller.principal, caller.zone_header).await?;
        let written = self.write(&table, &writes, &context).await?;
        let rows: Vec<&str> = written.iter().flatten().map(|array| items(array)).collect();
        Ok(if single {
            format!("{{\"data\":{}}}", rows.concat())
        } else {
            format!("{{\"data\":[{}]}}", rows.join(","))
        })
    }

    /// `PATCH /api/data/{schema}/{table}/{pk}`: the `{ data }` answer as JSON text.
    pub async fn update(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        key: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        let table = self.open(schema, name, "PATCH").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Update)?;
        let key = key_of(&table, key)?;
        let values = body
            .as_object()
            .ok_or_else(|| payload_error("data", "must be an object of columns"))?;
        if values.is_empty() {
            return Err(payload_error("data", "must set at least one column"));
        }
        let columns = checked_columns(&table, &access, values, "")?;
        let narrowed = cover(&access, &columns, "")?;
        let write = Write {
            change: Change::Update {
                columns,
                values,
                predicate: scoped(None, &narrowed, Some(key)),
            },
            check: narrowed.row_filters(),
            returning: self.returning(caller.principal, &table, &access),
            audit: self.audit(caller, &table, "data.update"),
        };
        let context = self.context(caller.principal, caller.zone_header).await?;
        let written = self.write(&table, &[write], &context).await?;
        let row = written
            .into_iter()
            .flatten()
            .next()
            .ok_or(DataError::NotFound)?;
        Ok(format!("{{\"data\":{}}}", items(&row)))
    }

    /// `DELETE /api/data/{schema}/{table}/{pk}`.
    pub async fn delete(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        key: &str,
    ) -> Result<(), DataError> {
        let table = self.open(schema, name, "DELETE").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Delete)?;
        let write = Write {
            change: Change::Delete {
                predicate: scoped(None, &access, Some(key_of(&table, key)?)),
            },
            check: None,
            returning: Vec::new(),
            audit: self.audit(caller, &table, "data.delete"),
        };
        let context = self.context(caller.principal, caller.zone_header).await?;
        match self
            .write(&table, &[write], &context)
            .await?
            .pop()
            .flatten()
        {
            Some(_) => Ok(()),
            None => Err(DataError::NotFound),
        }
    }

    /// Every registered table with its grants, for the per-role document.
    pub async fn tables(&self) -> Result<Vec<Arc<Table>>, DataError> {
        self.store.tables().await.map_err(DataError::Store)
    }

    /// Whether `caller` may call `method` on the table at all (exposure, then
    /// a grant of its action), without the database: lets a route refuse
    /// before it reads the body. Unknown methods are 405 on exposed tables.
    pub async fn check_method(
        &self,
        caller: &Principal,
        schema: &str,
        name: &str,
        method: &str,
    ) -> Result<(), DataError> {
        let table = self.open(schema, name, method).await?;
        let action = match method {
            "GET" => Action::Read,
            "POST" => Action::Create,
            "PATCH" => Action::Update,
            "DELETE" => Action::Delete,
            _ => {
                return Err(DataError::MethodNotAllowed {
                    allowed: table.exposed_methods.clone(),
                });
            }
        };
        Access::evaluate(caller, &table.scopes, action)?;
        Ok(())
    }

    async fn open(&self, schema: &str, name: &str, method: &str) -> Result<Arc<Table>, DataError> {
        let table = self
            .store
            .table(schema, name)
            .await
            .map_err(DataError::Store)?
            .filter(|t| !t.exposed_methods.is_empty())
            .ok_or(DataError::NotFound)?;
        if table.exposes(method) {
            Ok(table)
        } else {
            Err(DataError::MethodNotAllowed {
                allowed: table.exposed_methods.clone(),
            })
        }
    }

    async fn context(
        &self,
        caller: &Principal,
        zone_header: Option<&str>,
    ) -> Result<Context, DataError> {
        let (system, settings_version) = self
            .store
            .system_timezone()
            .await
            .map_err(DataError::Store)?;
        Ok(Context {
            user_id: caller.user_id,
            now: self.clock.now(),
            zone: zone::caller_zone(caller.timezone.as_deref(), system.as_deref(), zone_header),
            versions: Versions {
                settings: settings_version,
                ..Versions::default()
            },
        })
    }

    async fn write(
        &self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, DataError> {
        self.store
            .write(table, writes, context)
            .await
            .map_err(|e| match e {
                StoreError::CheckViolation { constraint } => DataError::Check(
                    table
                        .check_messages
                        .get(&constraint)
                        .cloned()
                        .unwrap_or_else(|| format!("A value breaks the rule {constraint}")),
                ),
                StoreError::RowDenied => DataError::Denied(Denied::NoGrant),
                other => DataError::Store(other),
            })
    }

    /// Columns a write answers with: what the caller may read or just wrote.
    fn returning<'t>(
        &self,
        caller: &Principal,
        table: &'t Table,
        write: &Access<'_>,
    ) -> Vec<Output<'t>> {
        let read = Access::evaluate(caller, &table.scopes, Action::Read).ok();
        table
            .columns
            .iter()
            .filter(|c| write.covers(&c.name) || read.as_ref().is_some_and(|r| r.covers(&c.name)))
            .map(|column| Output { column, mask: None })
            .collect()
    }

    fn audit(&self, caller: Caller<'_>, table: &Table, action: &'static str) -> AuditEvent {
        AuditEvent::new(
            caller.principal.actor(),
            action,
            Some(format!("resource:{}", table.resource_id)),
            caller.ip.map(str::to_owned),
        )
        .with_details(json!({ "schema": table.schema, "table": table.name }))
    }
}

/// The items of a JSON array's text (`[a, b]` gives `a, b`).
fn items(array: &str) -> &str {
    let text = array.trim();
    text.strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text)
}

fn query_error(
    field: impl Into<Cow<'static, str>>,
    message: impl Into<Cow<'static, str>>,
) -> DataError {
    DataError::Query(FieldError::new(field, message))
}

fn payload_error(
    field: impl Into<Cow<'static, str>>,
    message: impl Into<Cow<'static, str>>,
) -> DataError {
    DataError::Payload(FieldError::new(field, message))
}

/// A store failure of a read: a value the database could not parse is the query's fault.
fn read_error(err: StoreError) -> DataError {
    match err {
        StoreError::BadValue => query_error("filter", "a value does not fit its column's type"),
        other => DataError::Store(other),
    }
}

/// The caller's own condition, AND the grants' row filters, AND the key.
fn scoped<'a>(
    own: Option<Predicate<'a>>,
    access: &Access<'a>,
    key: Option<Predicate<'a>>,
) -> Predicate<'a> {
    Predicate::All(
        [key, own, Predicate::any_of(access.row_filters())]
            .into_iter()
            .flatten()
            .collect(),
    )
}

/// The grants that cover every column of a write; 400 when none covers them all.
fn cover<'a>(
    access: &Access<'a>,
    columns: &[&Column],
    path: &str,
) -> Result<Access<'a>, DataError> {
    access
        .covering(columns.iter().map(|c| c.name.as_str()))
        .ok_or_else(|| {
            payload_error(
                if path.is_empty() { "data" } else { path }.to_owned(),
                "no single grant of yours covers all these columns",
            )
        })
}

/// `select`: named columns, or every column the caller may read.
fn select<'t>(
    table: &'t Table,
    access: &Access<'t>,
    raw: Option<&str>,
) -> Result<Vec<Output<'t>>, DataError> {
    let output = |column: &'t Column| Output {
        column,
        mask: access.column_filters(&column.name),
    };
    let Some(raw) = raw else {
        return Ok(table
            .columns
            .iter()
            .filter(|c| access.covers(&c.name))
            .map(output)
            .collect());
    };
    let mut chosen: Vec<Output<'t>> = Vec::new();
    for name in raw.split(',').map(str::trim) {
        let column = readable(table, access, name, "select")?;
        if !chosen.iter().any(|o| o.column.name == name) {
            chosen.push(output(column));
        }
    }
    Ok(chosen)
}

/// A column the caller may read, or a 400 on `field`.
fn readable<'t>(
    table: &'t Table,
    access: &Access<'_>,
    name: &str,
    field: &'static str,
) -> Result<&'t Column, DataError> {
    let column = table
        .column(name)
        .ok_or_else(|| query_error(field, format!("{name} is not a column of the table")))?;
    if access.covers(name) {
        Ok(column)
    } else {
        Err(query_error(
            field,
            format!("{name} is not readable under your grants"),
        ))
    }
}

/// `sort=-a,b`: the primary key is appended so pages are stable.
fn sort<'t>(
    table: &'t Table,
    access: &Access<'_>,
    raw: Option<&str>,
) -> Result<Vec<(&'t Column, bool)>, DataError> {
    let mut keys: Vec<(&'t Column, bool)> = Vec::new();
    for part in raw.into_iter().flat_map(|r| r.split(',')).map(str::trim) {
        let (name, descending) = match part.strip_prefix('-') {
            Some(name) => (name, true),
            None => (part, false),
        };
        let column = readable(table, access, name, "sort")?;
        if !column.kind.is_comparable() {
            return Err(query_error("sort", format!("{name} cannot be sorted")));
        }
        if !keys.iter().any(|(c, _)| c.name == name) {
            keys.push((column, descending));
        }
    }
    for column in table.key_columns() {
        if !keys.iter().any(|(c, _)| c.name == column.name) {
            keys.push((column, false));
        }
    }
    Ok(keys)
}

fn number<T: TryFrom<u64> + Copy>(
    raw: Option<&str>,
    field: &'static str,
    default: T,
    min: u64,
    max: u64,
) -> Result<T, DataError> {
    let Some(raw) = raw else { return Ok(default) };
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| query_error(field, format!("must be a whole number from {min} to {max}")))
}

/// Parses the `filter` parameter and checks every column, operator and value.
fn parse_filter(table: &Table, access: &Access<'_>, raw: &str) -> Result<Filter, DataError> {
    let value: Value = serde_json::from_str(raw)
        .map_err(|_| query_error("filter", "must be a JSON filter object"))?;
    let filter = Filter::parse(&value, "filter").map_err(DataError::Query)?;
    check_filter(table, access, &filter)?;
    Ok(filter)
}

fn check_filter(table: &Table, access: &Access<'_>, filter: &Filter) -> Result<(), DataError> {
    match filter {
        Filter::And(items) | Filter::Or(items) => items
            .iter()
            .try_for_each(|f| check_filter(table, access, f)),
        Filter::Not(inner) => check_filter(table, access, inner),
        Filter::Condition {
            column,
            op,
            operand,
        } => {
            let col = readable(table, access, column, "filter")?;
            let bad = |why: &str| query_error("filter", format!("{column}: {why}"));
            match op {
                Op::IsNull => return Ok(()),
                Op::Like | Op::Ilike if !col.kind.is_text() => {
                    return Err(bad("like and ilike apply to text columns only"));
                }
                _ if !col.kind.is_comparable() => {
                    return Err(bad("this column's type only takes isNull"));
                }
                _ => {}
            }
            check_operand(col, operand).map_err(|why| bad(&why))
        }
    }
}

fn check_operand(column: &Column, operand: &Operand) -> Result<(), String> {
    match operand {
        Operand::Literal(value) if column.kind.accepts(value) => Ok(()),
        Operand::Literal(_) => Err(format!("the value must be {}", column.kind.describe())),
        Operand::Period(_) if column.kind.is_temporal() => Ok(()),
        Operand::Period(_) => {
            Err("$PERIOD values compare with date and timestamp columns only".into())
        }
        Operand::User(name) if user_column(name) => Ok(()),
        Operand::User(name) => Err(format!("$USER.{name} is not a readable user column")),
        Operand::List(items) => items
            .iter()
            .try_for_each(|item| check_operand(column, item)),
    }
}

/// Whether `$USER.<name>` may be used: the user columns the Data API shows.
pub fn user_column(name: &str) -> bool {
    SERVICE_TABLES
        .iter()
        .find(|(table, _)| *table == "users")
        .is_some_and(|(_, columns)| columns.contains(&name))
}

/// The primary key in the path; a value that does not parse as the key's type is an unknown id.
fn key_of<'a>(table: &'a Table, raw: &'a str) -> Result<Predicate<'a>, DataError> {
    if table.key.is_empty() {
        return Err(DataError::NotFound);
    }
    let parts: Vec<&str> = if table.key.len() == 1 {
        vec![raw]
    } else {
        raw.split(',').collect()
    };
    if parts.len() != table.key.len() {
        return Err(DataError::NotFound);
    }
    let pairs: Vec<(&Column, &str)> = table.key_columns().zip(parts).collect();
    let fits = |(column, text): &(&Column, &str)| match column.kind {
        Kind::Integer => text.parse::<i64>().is_ok(),
        Kind::Number => text.parse::<f64>().is_ok(),
        Kind::Uuid => uuid::Uuid::parse_str(text).is_ok(),
        Kind::Boolean => matches!(*text, "true" | "false"),
        _ => true,
    };
    if pairs.iter().all(fits) {
        Ok(Predicate::Key(pairs))
    } else {
        Err(DataError::NotFound)
    }
}

/// The columns of a row body, each known, writable, of the right kind and
/// covered by some grant.
fn checked_columns<'t>(
    table: &'t Table,
    access: &Access<'_>,
    row: &Map<String, Value>,
    path: &str,
) -> Result<Vec<&'t Column>, DataError> {
    row.iter()
        .map(|(name, value)| {
            // Paths are relative to the payload, as everywhere: `title`, `[2].title`.
            let field = || {
                if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                }
            };
            let column = table
                .column(name)
                .ok_or_else(|| payload_error(field(), "is not a column of the table"))?;
            if !column.writable {
                return Err(payload_error(field(), "is generated by the database"));
            }
            if !access.covers(name) {
                return Err(payload_error(field(), "is not writable under your grants"));
            }
            if !column.kind.accepts(value) {
                return Err(payload_error(
                    field(),
                    format!("must be {}", column.kind.describe()),
                ));
            }
            Ok(column)
        })
        .collect()
}

/// What one role may do with one exposed table, for its OpenAPI document.
#[derive(Debug)]
pub struct RoleView<'t> {
    /// The table.
    pub table: &'t Table,
    /// Each method the role may use, with the columns it reaches.
    pub methods: Vec<(&'static str, Vec<&'t Column>)>,
}

impl<'t> RoleView<'t> {
    /// The role's view of `table`; `None` when it may do nothing there.
    /// Members of Administrators (`admin`) may use every exposed method.
    pub fn of(table: &'t Table, role_id: uuid::Uuid, admin: bool) -> Option<Self> {
        let methods: Vec<(&'static str, Vec<&'t Column>)> = [
            ("GET", Action::Read),
            ("POST", Action::Create),
            ("PATCH", Action::Update),
            ("DELETE", Action::Delete),
        ]
        .into_iter()
        .filter(|(method, _)| table.exposes(method))
        .filter_map(|(method, action)| {
            let scopes: Vec<_> = table
                .scopes
                .iter()
                .filter(|s| s.role_id == role_id && s.action == action)
                .collect();
            if !admin && scopes.is_empty() {
                return None;
            }
            let columns = table
                .columns
                .iter()
                .filter(|c| admin || scopes.iter().any(|s| s.covers(&c.name)))
                .filter(|c| action == Action::Read || action == Action::Delete || c.writable)
                .collect();
            Some((method, columns))
        })
        .collect();
        (!methods.is_empty()).then_some(Self { table, methods })
    }
}
