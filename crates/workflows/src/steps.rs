//! Data steps through the Data API's own service, as the run's user: grants,
//! row filters, column masks, `$USER` and `$PERIOD` apply exactly as there.

use std::sync::Arc;

use async_trait::async_trait;
use data::{Caller, DataError, DataService, ListParams, Op};
use kernel::{Code, ErrorCode, StoreError};
use permissions::{Credential, Plane, Principal};
use serde_json::{Value, json};

use crate::engine::{RunUser, StepData};
use crate::run::RunError;
use crate::store::WorkflowStore;

/// Steps planned again when shared state changes under them.
const STALE_RETRIES: usize = 3;

/// [`StepData`] over the Data API service.
pub struct DataSteps {
    data: DataService,
    store: Arc<dyn WorkflowStore>,
}

impl DataSteps {
    /// Data steps through `data`, reading run users from `store`.
    pub fn new(data: DataService, store: Arc<dyn WorkflowStore>) -> Self {
        Self { data, store }
    }

    /// The run user as a caller, read afresh, with the auth version read.
    async fn caller(&self, user: RunUser) -> Result<(Principal, i64), RunError> {
        let record = self
            .store
            .run_user(user.user_id)
            .await
            .map_err(|e| refused(&e))?
            .filter(|r| r.active)
            .ok_or_else(|| {
                RunError::new(
                    Code::PermissionDenied.as_str(),
                    "The run's user is inactive or deleted",
                )
            })?;
        let principal = Principal {
            user_id: user.user_id,
            credential: Credential::Run { id: user.run_id },
            role_ids: record.role_ids,
            api_access: record.api_access,
            admin: record.admin,
            timezone: record.timezone,
        };
        principal
            .authorize(Plane::Api, false)
            .map_err(|e| refused(&e))?;
        Ok((principal, record.auth_version))
    }

    /// Runs `op` on `resource` as the run user, read afresh, and again
    /// while the shared state changes under it (each statement checks its
    /// versions, so a stale attempt wrote nothing); the answer as JSON.
    async fn as_run_user(
        &self,
        user: RunUser,
        resource: &str,
        op: Op<'_>,
    ) -> Result<Value, RunError> {
        let (schema, name) = table(resource);
        for _ in 0..STALE_RETRIES {
            let (principal, version) = self.caller(user).await?;
            let caller = Caller {
                principal: &principal,
                zone_header: None,
                ip: None,
            };
            match self.data.run_as(caller, version, schema, name, op).await {
                Err(DataError::Store(StoreError::Stale)) => continue,
                Err(e) => return Err(refused(&e)),
                Ok(answer) => return parsed(&answer.into_json()),
            }
        }
        Err(refused(&StoreError::Stale))
    }
}

fn refused(error: &impl ErrorCode) -> RunError {
    RunError::new(error.code().as_str(), error.message())
}

fn table(resource: &str) -> (&str, &str) {
    resource.split_once('.').unwrap_or(("", resource))
}

fn parsed(json: &str) -> Result<Value, RunError> {
    serde_json::from_str(json).map_err(|_| RunError::new(Code::Internal.as_str(), "Internal error"))
}

#[async_trait]
impl StepData for DataSteps {
    async fn query(
        &self,
        user: RunUser,
        resource: &str,
        filter: Option<&Value>,
        sort: Option<String>,
        limit: Option<String>,
    ) -> Result<Value, RunError> {
        let params = ListParams {
            filter: filter.map(Value::to_string),
            sort,
            limit,
            ..ListParams::default()
        };
        self.as_run_user(user, resource, Op::List(&params)).await
    }

    async fn insert(&self, user: RunUser, resource: &str, body: &Value) -> Result<Value, RunError> {
        self.as_run_user(user, resource, Op::Create { body }).await
    }

    async fn update(
        &self,
        user: RunUser,
        resource: &str,
        key: &str,
        body: &Value,
    ) -> Result<Value, RunError> {
        self.as_run_user(user, resource, Op::Update { key, body })
            .await
    }

    async fn delete(&self, user: RunUser, resource: &str, key: &str) -> Result<Value, RunError> {
        self.as_run_user(user, resource, Op::Delete { key }).await?;
        Ok(json!({ "deleted": true }))
    }
}
