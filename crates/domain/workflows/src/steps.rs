//! Data steps through the Data API's own service, as the run's user: grants,
//! row filters, column masks, `$USER` and `$PERIOD` apply exactly as there.

use std::sync::Arc;

use async_trait::async_trait;
use data::{Caller, DataError, DataService, ListParams, Target, until_current};
use kernel::{Code, ErrorCode};
use permissions::{Credential, Plane, Principal};
use serde_json::{Value, json};

use crate::engine::{RunUser, StepData};
use crate::run::RunError;
use crate::store::WorkflowStore;

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

    /// Runs `step` on `resource` as the run user, read afresh, and again
    /// while the shared state changes under it (each statement checks its
    /// versions, so a stale attempt wrote nothing); the answer as JSON.
    async fn as_run_user(
        &self,
        user: RunUser,
        resource: &str,
        step: DataStep<'_>,
    ) -> Result<Value, RunError> {
        let (schema, name) = table(resource);
        let target = Target::exposed(schema, name);
        let answer = until_current(
            || async move {
                let (principal, version) = match self.caller(user).await {
                    Ok(caller) => caller,
                    Err(refusal) => return Ok(Err(refusal)),
                };
                let caller = Caller {
                    principal: &principal,
                    zone_header: None,
                    ip: None,
                };
                step.run(&self.data, caller, version, target).await.map(Ok)
            },
            DataError::is_stale,
        )
        .await;
        parsed(&answer.map_err(|e| refused(&e))??)
    }
}

/// What a data step asks of the Data API.
#[derive(Clone, Copy)]
enum DataStep<'a> {
    Query(&'a ListParams),
    Insert(&'a Value),
    Update(&'a str, &'a Value),
    Delete(&'a str),
}

impl DataStep<'_> {
    /// Runs the step as `caller`, resolved at `version`; the answer as JSON text.
    async fn run(
        self,
        data: &DataService,
        caller: Caller<'_>,
        version: i64,
        target: Target<'_>,
    ) -> Result<String, DataError> {
        match self {
            DataStep::Query(params) => {
                Ok(data.list_as(caller, version, target, params).await?.rows)
            }
            DataStep::Insert(body) => data.create_as(caller, version, target, body).await,
            DataStep::Update(key, body) => data.update_as(caller, version, target, key, body).await,
            DataStep::Delete(key) => {
                data.delete_as(caller, version, target, key).await?;
                Ok("null".to_owned())
            }
        }
    }
}

/// A refusal as the step's error: the user's own code where it has one
/// (a write hook's, a function's hint), else the error's.
fn refused(error: &impl ErrorCode) -> RunError {
    let code = error.code_text().unwrap_or(error.code().as_str());
    RunError::new(code, error.message())
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
        self.as_run_user(user, resource, DataStep::Query(&params))
            .await
    }

    async fn insert(&self, user: RunUser, resource: &str, body: &Value) -> Result<Value, RunError> {
        self.as_run_user(user, resource, DataStep::Insert(body))
            .await
    }

    async fn update(
        &self,
        user: RunUser,
        resource: &str,
        key: &str,
        body: &Value,
    ) -> Result<Value, RunError> {
        self.as_run_user(user, resource, DataStep::Update(key, body))
            .await
    }

    async fn delete(&self, user: RunUser, resource: &str, key: &str) -> Result<Value, RunError> {
        self.as_run_user(user, resource, DataStep::Delete(key))
            .await?;
        Ok(json!({ "deleted": true }))
    }
}
