//! Calls of database functions (API.md 18): `POST` and `GET
//! /api/rpc/{schema}/{function}` under the caller's `invoke` grants, with
//! the arguments checked by name against the function as it is now.

use audit::AuditEvent;
use kernel::function::FunctionSignature;
use permissions::{Denied, Plane};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::callers::{Caller, DataRequest};
use crate::error::{DataError, payload_error};
use crate::service::DataService;

/// A registered function as a call needs it, read afresh for each call.
#[derive(Debug, Clone)]
pub struct Callable {
    /// Its resource id.
    pub id: Uuid,
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub name: String,
    /// Its description now; `None` when no single function of that name is
    /// there any more.
    pub signature: Option<FunctionSignature>,
    /// Methods the Data API answers for it (empty: hidden).
    pub exposed_methods: Vec<String>,
    /// The roles holding its `invoke` grant.
    pub invokers: Vec<Uuid>,
}

/// One call, checked: what the store runs in a transaction of its own.
#[derive(Debug)]
pub struct FunctionCall<'a> {
    /// The function.
    pub schema: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its description.
    pub signature: &'a FunctionSignature,
    /// The values sent, by argument name, in the function's order.
    pub arguments: Vec<(&'a str, &'a str, &'a Value)>,
    /// The caller, set as `tessera.user_id`.
    pub user_id: Uuid,
    /// The caller's roles, set as `tessera.role_ids`.
    pub role_ids: &'a [Uuid],
    /// `data.max_answer_bytes`.
    pub max_answer_bytes: u64,
    /// The audit entry of a volatile call, written in its transaction.
    pub audit: Option<AuditEvent>,
}

impl DataService {
    /// `POST`/`GET /api/rpc/{schema}/{function}`: the function's result as
    /// the text of its JSON (a scalar, an object, an array, or null).
    pub async fn call_function(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        method: &str,
        arguments: &Map<String, Value>,
    ) -> Result<String, DataError> {
        self.as_current_caller(request, Plane::Api, async |caller, _| {
            self.call_as(caller, schema, name, method, arguments).await
        })
        .await
    }

    async fn call_as(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        method: &str,
        arguments: &Map<String, Value>,
    ) -> Result<String, DataError> {
        let callable = self
            .store
            .callable(schema, name)
            .await
            .map_err(DataError::Store)?
            .filter(|f| !f.exposed_methods.is_empty())
            .ok_or(DataError::NotFound)?;
        let Some(signature) = callable.signature.as_ref() else {
            return Err(DataError::NotFound);
        };
        if !callable.exposed_methods.iter().any(|m| m == method) {
            return Err(DataError::MethodNotAllowed {
                allowed: callable.exposed_methods.clone(),
            });
        }
        let principal = caller.principal;
        if !principal.admin
            && !callable
                .invokers
                .iter()
                .any(|role| principal.role_ids.contains(role))
        {
            return Err(DataError::Denied(Denied::NoGrant));
        }
        let settings = self
            .store
            .statement_settings()
            .await
            .map_err(DataError::Store)?;
        let audit = (!signature.volatility.reads_only()).then(|| {
            AuditEvent::new(
                principal.actor(),
                "data.rpc",
                Some(format!("resource:{}", callable.id)),
                caller.ip.map(str::to_owned),
            )
            .with_details(
                serde_json::json!({ "schema": callable.schema, "function": callable.name }),
            )
        });
        let call = FunctionCall {
            schema: &callable.schema,
            name: &callable.name,
            signature,
            arguments: bound(signature, arguments)?,
            user_id: principal.user_id,
            role_ids: &principal.role_ids,
            max_answer_bytes: settings.max_answer_bytes,
            audit,
        };
        self.store.call(&call).await.map_err(DataError::Store)
    }
}

/// The values of `sent` by the arguments of `signature`, in its order:
/// an unknown name, or a missing argument without a default, is refused
/// with `field: "data.<name>"`.
fn bound<'a>(
    signature: &'a FunctionSignature,
    sent: &'a Map<String, Value>,
) -> Result<Vec<(&'a str, &'a str, &'a Value)>, DataError> {
    if let Some(unknown) = sent
        .keys()
        .find(|name| !signature.arguments.iter().any(|a| &a.name == *name))
    {
        return Err(payload_error(
            format!("data.{unknown}"),
            "is not an argument of the function",
        ));
    }
    let mut values = Vec::with_capacity(sent.len());
    for argument in &signature.arguments {
        match sent.get(&argument.name) {
            Some(value) => {
                values.push((argument.name.as_str(), argument.data_type.as_str(), value))
            }
            None if argument.has_default => {}
            None => {
                return Err(payload_error(
                    format!("data.{}", argument.name),
                    "is required: the argument has no default",
                ));
            }
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use kernel::ErrorCode;
    use kernel::function::{FunctionArgument, FunctionReturns, Volatility};
    use serde_json::json;

    use super::*;

    fn signature() -> FunctionSignature {
        let argument = |name: &str, has_default| FunctionArgument {
            name: name.into(),
            data_type: "integer".into(),
            has_default,
        };
        FunctionSignature {
            arguments: vec![argument("a", false), argument("b", true)],
            returns: FunctionReturns {
                data_type: "integer".into(),
                set: false,
            },
            volatility: Volatility::Stable,
        }
    }

    #[test]
    fn arguments_are_bound_by_name_and_defaults_may_be_left_out() {
        let signature = signature();
        let sent = json!({ "b": 2, "a": 1 });
        let values = bound(&signature, sent.as_object().unwrap()).unwrap();
        assert_eq!(
            values.iter().map(|(n, _, _)| *n).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let only_a = json!({ "a": 1 });
        assert_eq!(
            bound(&signature, only_a.as_object().unwrap())
                .unwrap()
                .len(),
            1
        );
        for (sent, field) in [
            (json!({ "b": 1 }), "data.a"),
            (json!({ "a": 1, "c": 1 }), "data.c"),
        ] {
            let refused = bound(&signature, sent.as_object().unwrap()).unwrap_err();
            assert_eq!(refused.field(), Some(field));
        }
    }
}
