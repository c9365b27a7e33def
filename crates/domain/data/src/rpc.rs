//! Calls of database functions (API.md 18): `POST` and `GET
//! /api/rpc/{schema}/{function}` under the caller's `invoke` grants, with
//! the arguments checked by name against the function as it is now (the
//! call's statement checks that it still is).

use audit::AuditEvent;
use kernel::Versions;
use kernel::function::FunctionSignature;
use permissions::{Denied, Plane};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::callers::{Caller, DataRequest, Effect};
use crate::error::{DataError, payload_error};
use crate::service::DataService;

/// A registered function as a call needs it: cached per catalog version,
/// each call checking in its own statement that the versions and the
/// function's definition (`revision`) are still those it was read at.
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
    /// The catalog version it was read at.
    pub version: i64,
    /// Which definition of the function it describes (replacing the
    /// function in place changes it).
    pub revision: String,
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
    /// The values sent, by argument name and type, in the function's order.
    pub arguments: Vec<(String, String, &'a Value)>,
    /// The caller, set as `tessera.user_id`.
    pub user_id: Uuid,
    /// The caller's roles, set as `tessera.role_ids`.
    pub role_ids: &'a [Uuid],
    /// `data.max_answer_bytes`.
    pub max_answer_bytes: u64,
    /// The audit entry of a volatile call, written in its transaction.
    pub audit: Option<AuditEvent>,
    /// The shared state the call was planned on: it runs only while they
    /// are current ([`kernel::StoreError::Stale`] if not).
    pub versions: Versions,
    /// The function's definition it was planned on ([`Callable::revision`]).
    pub revision: &'a str,
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
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            self.call_as(caller, v, (schema, name), method, arguments)
                .await
        })
        .await
    }

    async fn call_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        (schema, name): (&str, &str),
        method: &str,
        arguments: &Map<String, Value>,
    ) -> Result<String, DataError> {
        // The description is cached: a refusal it decides (no such
        // function, an argument unknown or missing) is checked once more
        // against the function as it is now, which may have been replaced
        // in place. Its statement checks the description it was planned on.
        let mut fresh = false;
        let (callable, signature, values) = loop {
            let callable = self
                .store
                .callable(schema, name, fresh)
                .await
                .map_err(DataError::Store)?
                .filter(|f| !f.exposed_methods.is_empty())
                .ok_or(DataError::NotFound)?;
            let described = match callable.signature.clone() {
                Some(signature) => bound(&signature, arguments).map(|values| (signature, values)),
                None => Err(DataError::NotFound),
            };
            match described {
                Ok((signature, values)) => break (callable, signature, values),
                Err(_) if !fresh => fresh = true,
                Err(refused) => return Err(refused),
            }
        };
        let signature = &signature;
        // GET reads: a function that writes (replaced by a volatile one
        // since it was exposed for GET) is not called by it.
        let reads_only = signature.volatility.reads_only();
        let answers =
            |m: &str| callable.exposed_methods.iter().any(|e| e == m) && (reads_only || m != "GET");
        if !answers(method) {
            return Err(DataError::MethodNotAllowed {
                allowed: ["GET", "POST"]
                    .into_iter()
                    .filter(|m| answers(m))
                    .map(str::to_owned)
                    .collect(),
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
            arguments: values,
            user_id: principal.user_id,
            role_ids: &principal.role_ids,
            max_answer_bytes: settings.max_answer_bytes,
            audit,
            versions: Versions {
                auth: auth_version,
                catalog: callable.version,
                settings: settings.version,
            },
            revision: &callable.revision,
        };
        self.store.call(&call).await.map_err(DataError::Store)
    }
}

/// The values of `sent` by the arguments of `signature`, in its order:
/// an unknown name, or a missing argument without a default, is refused
/// with `field: "data.<name>"`.
fn bound<'a>(
    signature: &FunctionSignature,
    sent: &'a Map<String, Value>,
) -> Result<Vec<(String, String, &'a Value)>, DataError> {
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
            Some(value) => values.push((argument.name.clone(), argument.data_type.clone(), value)),
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
            values
                .iter()
                .map(|(n, _, _)| n.as_str())
                .collect::<Vec<_>>(),
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
