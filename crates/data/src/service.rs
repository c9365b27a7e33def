//! The Data API's rules: resolve the caller and the table, check the request
//! against the caller's access (see `checks`), and hand the store one scoped
//! statement, guarded so that nothing is answered or written on stale state.

use std::sync::Arc;

use audit::AuditEvent;
use auth::{AuthService, CredentialLookup};
use kernel::filter::Filter;
use kernel::{Clock, StoreError, Versions};
use permissions::{Access, Action, Denied, Plane, Principal, zone};
use serde_json::{Map, Value, json};

use crate::callers::KnownCallers;
use crate::checks::{
    checked_columns, cover, key_of, masks, number, parse_filter, readable_columns, scoped, select,
    sort,
};
use crate::error::{DataError, payload_error, query_error, read_error};
use crate::query::{
    Change, Context, DataStore, Found, ListQuery, Output, Predicate, Read, Shown, Write,
};
use crate::table::Table;

pub use kernel::page::{LIMIT_DEFAULT, LIMIT_MAX};

/// Requests planned again when the shared state changes under them, before
/// answering 503.
const STALE_RETRIES: usize = 3;

/// A request as it arrives: the bearer secret, resolved by the request's own
/// statement, and where the request comes from.
#[derive(Debug, Clone, Copy)]
pub struct DataRequest<'a> {
    /// The `Authorization: Bearer` secret.
    pub bearer: &'a str,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
    /// The client address, for the audit log.
    pub ip: Option<&'a str>,
}

impl<'a> DataRequest<'a> {
    /// The request as made by `principal`.
    fn caller<'p>(&self, principal: &'p Principal) -> Caller<'p>
    where
        'a: 'p,
    {
        Caller {
            principal,
            zone_header: self.zone_header,
            ip: self.ip,
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

/// The role a preview reads as ([`DataService::list_as_role`]).
#[derive(Debug, Clone, Copy)]
pub struct RoleSubject {
    /// The role's id.
    pub id: uuid::Uuid,
    /// Whether the role gives API access.
    pub api_access: bool,
}

/// The table an operation runs on.
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    schema: &'a str,
    name: &'a str,
    exposure: Exposure,
}

impl<'a> Target<'a> {
    fn new(schema: &'a str, name: &'a str, exposure: Exposure) -> Self {
        Self {
            schema,
            name,
            exposure,
        }
    }
}

/// Whether the table must be exposed for the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exposure {
    /// The Data API's routes: hidden tables are 404, unexposed methods 405.
    Required,
    /// A route of the table's own.
    Bypassed,
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

/// A page of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The rows, as the text of a JSON array.
    pub rows: String,
    /// The page size asked for.
    pub limit: u32,
    /// The rows skipped.
    pub offset: u64,
    /// Every matching row, when counted (`count=exact`).
    pub total: Option<i64>,
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
    /// A service over `store`; `auth` resolves the credentials of requests.
    pub fn new(store: Arc<dyn DataStore>, clock: Arc<dyn Clock>, auth: AuthService) -> Self {
        Self {
            store,
            clock,
            auth,
            callers: Arc::default(),
        }
    }

    /// `GET /api/data/{schema}/{table}`: a page of rows.
    pub async fn list(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        self.as_bearer(request, schema, name, Op::List(params))
            .await?
            .page()
    }

    /// `GET /admin/api/roles/{id}/preview/{schema}/{table}`: the page the
    /// list route would answer a member of `role` alone, with `$USER`
    /// standing for `user` (none: nobody, so filters on `$USER` match no
    /// row). The bearer must be an administrator's on the Admin API.
    pub async fn list_as_role(
        &self,
        request: DataRequest<'_>,
        role: RoleSubject,
        user: Option<uuid::Uuid>,
        table: (&str, &str),
        params: &ListParams,
    ) -> Result<Page, DataError> {
        let op = Op::List(params);
        self.as_caller(
            request,
            Plane::Admin,
            |error| op.retried_after(error),
            async |admin, version| {
                let member = Principal {
                    user_id: user.unwrap_or_default(),
                    credential: admin.principal.credential,
                    role_ids: vec![role.id],
                    api_access: role.api_access,
                    admin: role.id == kernel::ADMINISTRATORS_ROLE_ID,
                    timezone: None,
                };
                member.authorize(Plane::Api, false)?;
                let caller = Caller {
                    principal: &member,
                    ..admin
                };
                self.run_as(caller, version, table.0, table.1, op)
                    .await?
                    .page()
            },
        )
        .await
    }

    /// `GET /api/data/{schema}/{table}/{pk}`: the row, as JSON text.
    pub async fn get(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
    ) -> Result<String, DataError> {
        self.as_bearer(request, schema, name, Op::Get { key })
            .await?
            .json()
    }

    async fn get_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
    ) -> Result<String, DataError> {
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let read = Read::One {
            predicate: scoped(None, &access, Some(key_of(&table, key)?)),
            select: select(&table, &access, None)?,
        };
        let context = self.context(caller, auth_version, &table).await?;
        let found = self
            .store
            .read(&table, &read, &context)
            .await
            .map_err(read_error)?;
        found.json.ok_or(DataError::NotFound)
    }

    /// Lists rows as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] when that is no longer current.
    async fn list_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let filter = params
            .filter
            .as_deref()
            .map(|raw| parse_filter(&table, &access, raw))
            .transpose()?;
        let query = ListQuery {
            select: select(&table, &access, params.select.as_deref())?,
            sort: sort(&table, &access, params.sort.as_deref())?,
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
            ..rows_seen_by(&table, &access, filter.as_ref())
        };
        let (limit, offset) = (query.limit, query.offset);
        let context = self.context(caller, auth_version, &table).await?;
        let Found { json, total } = self
            .store
            .read(&table, &Read::List(query), &context)
            .await
            .map_err(read_error)?;
        Ok(Page {
            rows: json.unwrap_or_else(|| "[]".to_owned()),
            limit,
            offset,
            total,
        })
    }

    /// `POST /api/data/{schema}/{table}`: one row (an object) or several (an
    /// array), in one transaction; the rows written as JSON text.
    pub async fn create(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        self.as_bearer(request, schema, name, Op::Create { body })
            .await?
            .json()
    }

    /// Inserts as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing written) when that is no longer current.
    async fn create_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        body: &Value,
    ) -> Result<String, DataError> {
        let table = self.open(target, "POST").await?;
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
        let returning = self.returning(caller.principal, &table);
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
                guard_admin_power: !caller.principal.admin,
                audit: self.audit(caller, &table, "data.create"),
            });
            run_keys = Some(keys);
        }
        let context = self.context(caller, auth_version, &table).await?;
        let written = self.write(&table, &writes, &context).await?;
        let mut rows = written.iter().flatten().map(|array| items(array));
        Ok(if single {
            rows.next().unwrap_or_default().to_owned()
        } else {
            format!("[{}]", rows.collect::<Vec<_>>().join(","))
        })
    }

    /// `PATCH /api/data/{schema}/{table}/{pk}`: the row changed, as JSON text.
    pub async fn update(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        self.as_bearer(request, schema, name, Op::Update { key, body })
            .await?
            .json()
    }

    /// Changes a row as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing written) when that is no longer current.
    async fn update_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        let table = self.open(target, "PATCH").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Update)?;
        let key = key_of(&table, key)?;
        let values: &Map<String, Value> = body
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
            returning: self.returning(caller.principal, &table),
            guard_admin_power: !caller.principal.admin,
            audit: self.audit(caller, &table, "data.update"),
        };
        let context = self.context(caller, auth_version, &table).await?;
        let written = self.write(&table, &[write], &context).await?;
        let row = written
            .into_iter()
            .flatten()
            .next()
            .ok_or(DataError::NotFound)?;
        Ok(items(&row).to_owned())
    }

    /// `DELETE /api/data/{schema}/{table}/{pk}`.
    pub async fn delete(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
    ) -> Result<(), DataError> {
        self.as_bearer(request, schema, name, Op::Delete { key })
            .await
            .map(drop)
    }

    /// Deletes a row as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing deleted) when that is no longer current.
    async fn delete_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
    ) -> Result<(), DataError> {
        let table = self.open(target, "DELETE").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Delete)?;
        let write = Write {
            change: Change::Delete {
                predicate: scoped(None, &access, Some(key_of(&table, key)?)),
            },
            check: None,
            returning: Shown::default(),
            guard_admin_power: !caller.principal.admin,
            audit: self.audit(caller, &table, "data.delete"),
        };
        let context = self.context(caller, auth_version, &table).await?;
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

    /// What a realtime subscription of `caller` to `schema.name` reads,
    /// refused as the list route refuses (403, 404, 405, and 400 for a
    /// `filter` naming a column the caller may not read). `caller` must be
    /// resolved afresh for this request: nothing here reads the database,
    /// so a remembered caller would admit a revoked credential.
    pub async fn watch(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        filter: Option<&str>,
    ) -> Result<Watch, DataError> {
        let target = Target::new(schema, name, Exposure::Required);
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let filter = filter
            .map(|raw| parse_filter(&table, &access, raw))
            .transpose()?;
        Ok(Watch {
            principal: caller.principal.clone(),
            table: table.clone(),
            filter,
        })
    }

    /// The registered table `schema.name` as the catalog holds it now.
    pub async fn table(&self, schema: &str, name: &str) -> Result<Option<Arc<Table>>, DataError> {
        self.store
            .table(schema, name)
            .await
            .map_err(DataError::Store)
    }

    /// Every registered table with its grants, for the per-role document.
    pub async fn tables(&self) -> Result<Vec<Arc<Table>>, DataError> {
        self.store.tables().await.map_err(DataError::Store)
    }

    /// Whether the caller may call `method` on the table at all (exposure,
    /// then a grant of its action), without the database when the caller is
    /// known: lets a route refuse before it reads the body. Methods other
    /// than the four of the Data API are 405 on exposed tables.
    pub async fn check_method(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        method: &str,
    ) -> Result<(), DataError> {
        self.as_bearer(request, schema, name, Op::Check { method })
            .await
            .map(drop)
    }

    async fn check_as(
        &self,
        caller: Caller<'_>,
        target: Target<'_>,
        method: &str,
    ) -> Result<(), DataError> {
        let table = self.open(target, method).await?;
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
        Access::evaluate(caller.principal, &table.scopes, action)?;
        Ok(())
    }

    /// Runs `op` on `schema.name` as `caller`, resolved at auth version
    /// `auth_version` (a workflow's data step); [`StoreError::Stale`], with
    /// nothing written, when that or the state it was planned on is no
    /// longer current.
    pub async fn run_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        schema: &str,
        name: &str,
        op: Op<'_>,
    ) -> Result<Answer, DataError> {
        let target = Target::new(schema, name, Exposure::Required);
        self.run_on(caller, auth_version, target, op).await
    }

    /// Runs `op` on `target` as `caller`, resolved at auth version `auth_version`.
    async fn run_on(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        op: Op<'_>,
    ) -> Result<Answer, DataError> {
        let v = auth_version;
        match op {
            Op::List(params) => self
                .list_as(caller, v, target, params)
                .await
                .map(Answer::Page),
            Op::Get { key } => self.get_as(caller, v, target, key).await.map(Answer::Json),
            Op::Create { body } => self
                .create_as(caller, v, target, body)
                .await
                .map(Answer::Json),
            Op::Update { key, body } => self
                .update_as(caller, v, target, key, body)
                .await
                .map(Answer::Json),
            Op::Delete { key } => self
                .delete_as(caller, v, target, key)
                .await
                .map(|()| Answer::Done),
            Op::Check { method } => self
                .check_as(caller, target, method)
                .await
                .map(|()| Answer::Done),
        }
    }

    /// Runs `op` as the caller the bearer stands for. A credential resolved
    /// before is answered in one round trip: `op`'s statement checks that the
    /// caller, the table and the settings it was planned on are still
    /// current. When they are not, or the remembered caller is refused, the
    /// credential is resolved afresh (which brings every cache up to date)
    /// and `op` planned again, so nothing is ever answered, written or
    /// refused on stale state.
    async fn as_bearer(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        op: Op<'_>,
    ) -> Result<Answer, DataError> {
        self.as_caller(
            request,
            Plane::Api,
            |error| op.retried_after(error),
            async |caller, version| self.run_as(caller, version, schema, name, op).await,
        )
        .await
    }

    /// Runs `op` on a service table that routes of its own stand in front of
    /// (`svc.files` behind `/api/files`) as `caller`, resolved at auth
    /// version `auth_version`: the Data API's grants, row filters, masks and
    /// audit, whether or not the table is exposed.
    pub async fn run_behind_route(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        schema: &str,
        name: &str,
        op: Op<'_>,
    ) -> Result<Answer, DataError> {
        let target = Target::new(schema, name, Exposure::Bypassed);
        self.run_on(caller, auth_version, target, op).await
    }

    /// Runs `run` as the caller the bearer stands for on `plane`, with the
    /// Data API's rules: a remembered caller first, planned again on a fresh
    /// one after a failure `retried` accepts or a stale statement. Reads of
    /// other kinds (DataViews) share it. Only callers of the Data API plane
    /// are remembered.
    pub async fn as_caller<T>(
        &self,
        request: DataRequest<'_>,
        plane: Plane,
        retried: impl Fn(&DataError) -> bool,
        run: impl AsyncFn(Caller<'_>, i64) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        let lookup = CredentialLookup::of(request.bearer);
        let remembered = match plane {
            Plane::Api => self.callers.get(&lookup, self.clock.now()),
            Plane::Admin => None,
        };
        if let Some(known) = remembered {
            let caller = request.caller(&known.principal);
            match run(caller, known.version).await {
                Ok(answer) => return Ok(answer),
                Err(error) if !retried(&error) => return Err(error),
                Err(_) => {}
            }
        }
        self.as_current_caller(request, plane, run).await
    }

    /// Runs `run` as the caller the bearer stands for on `plane`, resolved
    /// afresh (never a remembered caller): for work whose statements do not
    /// check the caller's version, so that a revoked credential is refused.
    pub async fn as_current_caller<T>(
        &self,
        request: DataRequest<'_>,
        plane: Plane,
        run: impl AsyncFn(Caller<'_>, i64) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        let lookup = CredentialLookup::of(request.bearer);
        for _ in 0..STALE_RETRIES {
            let resolved = self.auth.resolve(request.bearer).await?;
            resolved.principal.authorize(plane, false)?;
            if plane == Plane::Api {
                self.callers.put(lookup, &resolved);
            }
            let caller = request.caller(&resolved.principal);
            match run(caller, resolved.versions.auth).await {
                Err(DataError::Store(StoreError::Stale)) => continue,
                answer => return answer,
            }
        }
        Err(DataError::Store(StoreError::Stale))
    }

    async fn open(&self, target: Target<'_>, method: &str) -> Result<Arc<Table>, DataError> {
        let table = self
            .store
            .table(target.schema, target.name)
            .await
            .map_err(DataError::Store)?
            .filter(|t| target.exposure == Exposure::Bypassed || !t.exposed_methods.is_empty())
            .ok_or(DataError::NotFound)?;
        if target.exposure == Exposure::Bypassed || table.exposes(method) {
            Ok(table)
        } else {
            Err(DataError::MethodNotAllowed {
                allowed: table.exposed_methods.clone(),
            })
        }
    }

    async fn context(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        table: &Table,
    ) -> Result<Context, DataError> {
        self.context_at(caller, auth_version, table.version).await
    }

    /// The variables of a statement, and the versions of the shared state it
    /// is planned on: the caller's at `auth_version`, the catalog at
    /// `catalog_version`, the settings as cached.
    pub async fn context_at(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        catalog_version: i64,
    ) -> Result<Context, DataError> {
        let (system, settings) = self
            .store
            .system_timezone()
            .await
            .map_err(DataError::Store)?;
        Ok(Context {
            user_id: caller.principal.user_id,
            now: self.clock.now(),
            zone: zone::caller_zone(
                caller.principal.timezone.as_deref(),
                system.as_deref(),
                caller.zone_header,
            ),
            versions: Versions {
                auth: auth_version,
                catalog: catalog_version,
                settings,
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

    /// How a write answers: the rows as the caller's read grants show them,
    /// the key columns alone where they show nothing.
    fn returning<'t>(&self, caller: &Principal, table: &'t Table) -> Shown<'t> {
        let keys: Vec<Output<'t>> = table
            .key_columns()
            .map(|column| Output { column, mask: None })
            .collect();
        match Access::evaluate(caller, &table.scopes, Action::Read) {
            Ok(read) => Shown {
                columns: readable_columns(table, &read),
                reach: read.row_filters(),
                keys,
            },
            Err(_) => Shown {
                columns: keys.clone(),
                reach: None,
                keys,
            },
        }
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

/// A realtime subscriber's view of one table ([`DataService::watch`]).
#[derive(Debug, Clone)]
pub struct Watch {
    /// The caller, as resolved when subscribing.
    pub principal: Principal,
    /// The table.
    pub table: Arc<Table>,
    /// The caller's own filter, checked against the table.
    pub filter: Option<Filter>,
}

/// The rows of `table` that `access` reads and that match the caller's own
/// `filter`, with every column it may read, as the list route shapes them
/// (masked cells null); no sort, the page at its largest. Realtime events
/// are shaped with it.
pub fn rows_seen_by<'t>(
    table: &'t Table,
    access: &Access<'t>,
    filter: Option<&'t Filter>,
) -> ListQuery<'t> {
    ListQuery {
        // Every readable column: no list of names to refuse.
        select: select(table, access, None).unwrap_or_default(),
        predicate: scoped(filter.map(Predicate::Own), access, None),
        sort: Vec::new(),
        masks: masks(table, access),
        limit: LIMIT_MAX,
        offset: 0,
        count: false,
    }
}

/// One request of the Data API on one table.
#[derive(Debug, Clone, Copy)]
pub enum Op<'r> {
    /// A page of rows.
    List(&'r ListParams),
    /// The row with this primary key.
    Get {
        /// The key, as in the path.
        key: &'r str,
    },
    /// Inserts the row (an object) or rows (an array).
    Create {
        /// The `data` of the body.
        body: &'r Value,
    },
    /// Changes columns of the row with this key.
    Update {
        /// The key, as in the path.
        key: &'r str,
        /// The `data` of the body.
        body: &'r Value,
    },
    /// Deletes the row with this key.
    Delete {
        /// The key, as in the path.
        key: &'r str,
    },
    /// Whether `method` may be called at all.
    Check {
        /// The HTTP method.
        method: &'r str,
    },
}

impl Op<'_> {
    /// Whether a failure with the remembered caller is tried again with the
    /// credential resolved afresh: after any failure of what changes
    /// nothing; for a write, unless the database itself refused or failed it
    /// after finding its versions current (a write is never sent twice).
    pub fn retried_after(&self, error: &DataError) -> bool {
        let writes = matches!(
            self,
            Op::Create { .. } | Op::Update { .. } | Op::Delete { .. }
        );
        match error {
            _ if !error.retried() => false,
            _ if !writes => true,
            DataError::Store(e) => matches!(e, StoreError::Stale),
            DataError::Check(_) => false,
            // Planned on the remembered state, before the database.
            _ => true,
        }
    }
}

/// What an [`Op`] answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A page of rows.
    Page(Page),
    /// The rows or row, as JSON text.
    Json(String),
    /// Done, with nothing to show.
    Done,
}

impl Answer {
    /// The answer's JSON text (a page's rows; `null` for nothing).
    pub fn into_json(self) -> String {
        match self {
            Answer::Page(page) => page.rows,
            Answer::Json(json) => json,
            Answer::Done => "null".to_owned(),
        }
    }

    fn page(self) -> Result<Page, DataError> {
        match self {
            Answer::Page(page) => Ok(page),
            other => Err(mismatch(&other)),
        }
    }

    fn json(self) -> Result<String, DataError> {
        match self {
            Answer::Json(json) => Ok(json),
            other => Err(mismatch(&other)),
        }
    }
}

fn mismatch(answer: &Answer) -> DataError {
    DataError::Store(StoreError::Internal(format!(
        "an operation answered {answer:?}"
    )))
}

/// The items of a JSON array's text (`[a,b]` gives `a,b`).
fn items(array: &str) -> &str {
    let text = array.trim();
    text.strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text)
}
