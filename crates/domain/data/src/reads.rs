//! Reads: the list route's page, one row by key, and the page a role would
//! see (the Admin API's preview). The statement itself is built by the
//! store from the [`ListQuery`] assembled here.

use std::sync::Arc;

use kernel::filter::Filter;
use permissions::{Access, Action, Plane, Principal};

use crate::aggregate::{aggregates, group_by};
use crate::callers::{Caller, DataRequest, Effect};
use crate::checks::{key_of, masks, number, parse_filter, readable_columns, scoped, sort};
use crate::error::{DataError, query_error, read_error};
use crate::query::{AggregateQuery, Chunks, Context, Found, ListQuery, Predicate, Read};
use crate::select::{self, Item, Selection};
use crate::service::{DataService, Target, Via};
use crate::table::Table;

pub use kernel::page::{LIMIT_DEFAULT, LIMIT_MAX};

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
    /// `aggregate=alias:fn(column),...`.
    pub aggregate: Option<String>,
    /// `groupBy=a,b` (with `aggregate`).
    pub group_by: Option<String>,
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

/// The role a preview reads as ([`DataService::list_as_role`]).
#[derive(Debug, Clone, Copy)]
pub struct RoleSubject {
    /// The role's id.
    pub id: uuid::Uuid,
    /// Whether the role gives API access.
    pub api_access: bool,
}

impl RoleSubject {
    /// A member of this role alone as the Data API would see them, on the
    /// credential of `admin` (who asks for a preview): `$USER` stands for
    /// `user` (none: nobody), `$PERIOD` is cut in `zone` (none: the
    /// system's). Refused as the Data API would refuse such a member.
    pub fn member(
        self,
        user: Option<uuid::Uuid>,
        admin: &Principal,
        zone: Option<String>,
    ) -> Result<Principal, DataError> {
        let member = Principal {
            user_id: user.unwrap_or_default(),
            credential: admin.credential,
            role_ids: vec![self.id],
            api_access: self.api_access,
            admin: self.id == kernel::ADMINISTRATORS_ROLE_ID,
            timezone: zone,
        };
        member.authorize(Plane::Api, false)?;
        Ok(member)
    }
}

impl DataService {
    /// `GET /api/data/{schema}/{table}`: a page of rows.
    pub async fn list(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Reads, async |caller, v| {
            self.list_as(caller, v, target, params).await
        })
        .await
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
        let target = Target::exposed(table.0, table.1);
        self.as_caller(
            request,
            Plane::Admin,
            Effect::Reads,
            async |admin, version| {
                let member = role.member(user, admin.principal, None)?;
                let caller = Caller {
                    principal: &member,
                    ..admin
                };
                self.list_as(caller, version, target, params).await
            },
        )
        .await
    }

    /// `GET /api/data/{schema}/{table}/{pk}`: the row, as JSON text, with
    /// the columns and embeds of `select` (all readable columns: `None`).
    pub async fn get(
        &self,
        request: DataRequest<'_>,
        (schema, name): (&str, &str),
        key: &str,
        select: Option<&str>,
    ) -> Result<String, DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Reads, async |caller, v| {
            self.get_as(caller, v, target, key, select).await
        })
        .await
    }

    /// Lists rows as a caller resolved at auth version `auth_version`;
    /// [`kernel::StoreError::Stale`] when that is no longer current.
    pub async fn list_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        self.list_via(caller, auth_version, target, params, Via::Pool)
            .await
    }

    /// `GET /api/data/{schema}/{table}` with `Accept: text/csv`: the rows as
    /// CSV, every matching one unless `limit` is given, streamed; at most
    /// [`crate::EXPORTS_PER_CALLER`] at once per caller (429 past them).
    pub async fn export(
        &self,
        request: DataRequest<'_>,
        (schema, name): (&str, &str),
        params: &ListParams,
    ) -> Result<crate::Export, DataError> {
        let target = Target::exposed(schema, name);
        let all = params.limit.is_none();
        self.as_caller(request, Plane::Api, Effect::Reads, async |caller, v| {
            let slot = self
                .exports
                .take(caller.principal.user_id)
                .ok_or(DataError::TooManyExports(crate::EXPORTS_PER_CALLER))?;
            let chunks: Chunks = self
                .list_in(
                    caller,
                    v,
                    target,
                    params,
                    async |table, read, context, _| match read {
                        Read::List(query) if query.embeds.is_empty() => self
                            .store
                            .export(table, query, all, context)
                            .await
                            .map_err(read_error),
                        Read::Aggregate(_) => Err(query_error(
                            "aggregate",
                            "aggregates are answered in JSON only",
                        )),
                        _ => Err(query_error("select", "embeds are answered in JSON only")),
                    },
                )
                .await?;
            Ok(crate::Export::new(chunks, slot))
        })
        .await
    }

    /// [`DataService::list_as`] with its statement run where `via` says.
    pub(crate) async fn list_via(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        params: &ListParams,
        via: Via<'_>,
    ) -> Result<Page, DataError> {
        self.list_in(
            caller,
            auth_version,
            target,
            params,
            async |table, read, context, (limit, offset)| {
                let Found { json, total } = self.read_via(via, table, read, context).await?;
                Ok(Page {
                    rows: json.unwrap_or_else(|| "[]".to_owned()),
                    limit,
                    offset,
                    total,
                })
            },
        )
        .await
    }

    /// Plans a list read from `params` and has `answer` run it (with the
    /// page's limit and offset).
    async fn list_in<T>(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        params: &ListParams,
        answer: impl AsyncFnOnce(&Table, &Read<'_>, &Context, (u32, u64)) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let filter = params
            .filter
            .as_deref()
            .map(|raw| parse_filter(&table, &access, raw))
            .transpose()?;
        let limit = number(
            params.limit.as_deref(),
            "limit",
            LIMIT_DEFAULT,
            1,
            u64::from(LIMIT_MAX),
        )?;
        let offset = number(params.offset.as_deref(), "offset", 0, 0, i64::MAX as u64)?;
        let count = match params.count.as_deref() {
            None => false,
            Some("exact") => true,
            Some(_) => return Err(query_error("count", "must be exact")),
        };
        let seen = rows_seen_by(&table, &access, filter.as_ref());
        let read = match params.aggregate.as_deref() {
            Some(raw) => {
                if params.select.is_some() {
                    return Err(query_error("select", "does not go with aggregate"));
                }
                let aggregates = aggregates(&table, &access, raw)?;
                let group_by = group_by(&table, &access, params.group_by.as_deref(), &aggregates)?;
                let sort = crate::aggregate::sort(params.sort.as_deref(), &group_by, &aggregates)?;
                Some(AggregateQuery {
                    group_by,
                    aggregates,
                    predicate: seen.predicate.clone(),
                    masks: seen.masks.clone(),
                    sort,
                    limit,
                    offset,
                    count,
                })
            }
            None if params.group_by.is_some() => {
                return Err(query_error("groupBy", "goes with aggregate"));
            }
            None => None,
        };
        let items = params.select.as_deref().map(select::parse).transpose()?;
        let related = self.related(&table, items.as_deref()).await?;
        let read = match read {
            Some(aggregate) => Read::Aggregate(aggregate),
            None => {
                // Without `select`, the readable columns `seen` holds.
                let page = ListQuery {
                    sort: sort(&table, &access, params.sort.as_deref())?,
                    limit,
                    offset,
                    count,
                    ..seen
                };
                Read::List(match items.as_deref() {
                    Some(items) => {
                        let Selection { columns, embeds } =
                            select::build(&table, &access, items, &related, caller.principal, 0)?;
                        ListQuery {
                            select: columns,
                            embeds,
                            ..page
                        }
                    }
                    None => page,
                })
            }
        };
        let context = self.context(caller, auth_version, &table).await?;
        answer(&table, &read, &context, (limit, offset)).await
    }

    /// The related tables the embeds of `items` reach.
    async fn related(
        &self,
        table: &Arc<Table>,
        items: Option<&[Item]>,
    ) -> Result<select::Related, DataError> {
        match items {
            Some(items) if select::embeds_any(items) => {
                select::related(table, items, async |schema, name| {
                    self.store
                        .table(&schema, &name)
                        .await
                        .map_err(DataError::Store)
                })
                .await
            }
            _ => Ok(select::Related::new()),
        }
    }

    /// What `select` shows of each row; every readable column when absent.
    fn selection<'a>(
        &self,
        table: &'a Table,
        access: &Access<'a>,
        items: Option<&'a [Item]>,
        related: &'a select::Related,
        caller: Caller<'_>,
    ) -> Result<Selection<'a>, DataError> {
        match items {
            Some(items) => select::build(table, access, items, related, caller.principal, 0),
            None => Ok(Selection {
                columns: readable_columns(table, access),
                embeds: Vec::new(),
            }),
        }
    }

    /// Reads the row with primary key `key` as a caller resolved at auth
    /// version `auth_version`, as JSON text, with the columns and embeds of
    /// `select`.
    pub async fn get_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
        select: Option<&str>,
    ) -> Result<String, DataError> {
        self.get_via(caller, auth_version, target, (key, select), Via::Pool)
            .await
    }

    /// [`DataService::get_as`] with its statement run where `via` says.
    pub(crate) async fn get_via(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        (key, select): (&str, Option<&str>),
        via: Via<'_>,
    ) -> Result<String, DataError> {
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let items = select.map(select::parse).transpose()?;
        let related = self.related(&table, items.as_deref()).await?;
        let Selection { columns, embeds } =
            self.selection(&table, &access, items.as_deref(), &related, caller)?;
        let read = Read::One {
            predicate: scoped(None, &access, Some(key_of(&table, key)?)),
            select: columns,
            embeds,
        };
        let context = self.context(caller, auth_version, &table).await?;
        let found = self.read_via(via, &table, &read, &context).await?;
        found.json.ok_or(DataError::NotFound)
    }
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
        select: readable_columns(table, access),
        embeds: Vec::new(),
        predicate: scoped(filter.map(Predicate::Own), access, None),
        sort: Vec::new(),
        masks: masks(table, access),
        limit: LIMIT_MAX,
        offset: 0,
        count: false,
    }
}
