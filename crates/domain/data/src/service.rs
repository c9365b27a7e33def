//! The Data API service: what every request shares (the table as the catalog
//! holds it now, the statement's variables and versions). Each kind of
//! request lives in its own file: who calls (`callers`), reads (`reads`),
//! writes (`writes`) and realtime subscriptions (`watch`).

use std::sync::Arc;

use tokio::sync::Mutex;

use auth::SignInService;
use kernel::{Clock, Versions};
use permissions::{Access, Action, Plane, zone};

use crate::callers::{Caller, DataRequest, Effect, KnownCallers};
use crate::error::DataError;
use crate::error::read_error;
use crate::query::{Context, DataStore, DataTransaction, Found, Read};
use crate::table::Table;

/// The Data API.
#[derive(Clone)]
pub struct DataService {
    pub(crate) store: Arc<dyn DataStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) auth: SignInService,
    pub(crate) callers: Arc<KnownCallers>,
    /// The CSV export streams each caller holds on this instance.
    pub(crate) exports: Arc<crate::exports::ExportSlots>,
    /// Runs write hooks, once wired ([`DataService::set_hooks`]).
    pub(crate) hooks: Arc<std::sync::OnceLock<Arc<dyn crate::hooks::WriteHooks>>>,
}

/// Where a request's statements run.
#[derive(Clone, Copy)]
pub(crate) enum Via<'x> {
    /// The pool, each statement on its own.
    Pool,
    /// A transaction that a batch's operations or an import's rows share.
    Transaction(&'x Mutex<Box<dyn DataTransaction>>),
    /// A transaction whose writes each run under a savepoint: one refused
    /// (on stale shared state, say) is undone and the transaction goes on
    /// (a hooked CSV import's rows).
    Savepoints(&'x Mutex<Box<dyn DataTransaction>>),
}

/// The table an operation runs on, and whether it must be exposed.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    schema: &'a str,
    name: &'a str,
    exposure: Exposure,
}

/// Whether the table must be exposed for the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exposure {
    /// The Data API's routes: hidden tables are 404, unexposed methods 405.
    Required,
    /// A route of the table's own.
    Bypassed,
}

impl<'a> Target<'a> {
    /// `schema.name` as the Data API's routes reach it: hidden tables are
    /// 404, methods it does not expose 405.
    pub const fn exposed(schema: &'a str, name: &'a str) -> Self {
        Self {
            schema,
            name,
            exposure: Exposure::Required,
        }
    }

    /// A service table that routes of its own stand in front of (`svc.files`
    /// behind `/api/files`): the Data API's grants, row filters, masks and
    /// audit, whether or not the table is exposed.
    pub const fn behind_route(schema: &'a str, name: &'a str) -> Self {
        Self {
            schema,
            name,
            exposure: Exposure::Bypassed,
        }
    }
}

impl DataService {
    /// A service over `store`; `auth` resolves the credentials of requests.
    pub fn new(store: Arc<dyn DataStore>, clock: Arc<dyn Clock>, auth: SignInService) -> Self {
        Self {
            store,
            clock,
            auth,
            callers: Arc::default(),
            exports: Arc::default(),
            hooks: Arc::default(),
        }
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

    /// Whether the bearer's caller may call `method` on the table at all,
    /// without the database when the caller is known
    /// ([`DataService::check_method_as`]).
    pub async fn check_method(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        method: &str,
    ) -> Result<(), DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Reads, async |caller, _| {
            self.check_method_as(caller, target, method).await
        })
        .await
    }

    /// Whether `caller` may call `method` on the table at all (exposure,
    /// then a grant of its action): lets a route refuse before it reads the
    /// body. Methods other than the four of the Data API are 405 on exposed
    /// tables.
    pub async fn check_method_as(
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

    /// The table of `target`, refused as the Data API refuses: 404 when it
    /// is unknown or hidden, 405 when it does not expose `method`.
    pub(crate) async fn open(
        &self,
        target: Target<'_>,
        method: &str,
    ) -> Result<Arc<Table>, DataError> {
        let bypassed = target.exposure == Exposure::Bypassed;
        let table = self
            .store
            .table(target.schema, target.name)
            .await
            .map_err(DataError::Store)?
            .filter(|t| bypassed || !t.exposed_methods.is_empty())
            .ok_or(DataError::NotFound)?;
        if bypassed || table.exposes(method) {
            Ok(table)
        } else {
            Err(DataError::MethodNotAllowed {
                allowed: table.exposed_methods.clone(),
            })
        }
    }

    /// Runs `read` where `via` says.
    pub(crate) async fn read_via(
        &self,
        via: Via<'_>,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Found, DataError> {
        match via {
            Via::Pool => self.store.read(table, read, context).await,
            Via::Transaction(txn) | Via::Savepoints(txn) => {
                txn.lock().await.read(table, read, context).await
            }
        }
        .map_err(read_error)
    }

    /// The variables of a statement on `table`, planned on the caller's
    /// state at `auth_version`.
    pub(crate) async fn context(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        table: &Table,
    ) -> Result<Context, DataError> {
        self.context_at(caller, auth_version, table.version).await
    }

    /// `data.max_answer_bytes`, as cached: the largest answer of a read.
    pub async fn max_answer_bytes(&self) -> Result<u64, DataError> {
        self.store
            .statement_settings()
            .await
            .map(|s| s.max_answer_bytes)
            .map_err(DataError::Store)
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
        let settings = self
            .store
            .statement_settings()
            .await
            .map_err(DataError::Store)?;
        Ok(Context {
            user_id: caller.principal.user_id,
            now: self.clock.now(),
            zone: zone::caller_zone(
                caller.principal.timezone.as_deref(),
                settings.timezone.as_deref(),
                caller.zone_header,
            ),
            versions: Versions {
                auth: auth_version,
                catalog: catalog_version,
                settings: settings.version,
            },
            max_answer_bytes: settings.max_answer_bytes,
        })
    }
}
