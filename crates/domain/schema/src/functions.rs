//! Database functions registered as resources of kind `function` (API.md
//! 18): the rules of their registration and exposure. How they are called
//! is the `data` crate's.

use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::function::FunctionSignature;
use kernel::{FieldError, StoreError, new_id};
use permissions::Principal;
use serde_json::json;
use uuid::Uuid;

use crate::plan;
use crate::resources::{Resource, SchemaError, SchemaService, chosen_methods};

/// Methods a function may be exposed for; GET only when it reads only.
pub const FUNCTION_METHODS: [&str; 2] = ["GET", "POST"];

/// A database function registered for the Data API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Resource id.
    pub id: Uuid,
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub name: String,
    /// Its description as the database has it now; `None` when no single
    /// function of that name is there any more (dropped, or overloaded
    /// since), and calls answer 404.
    pub signature: Option<FunctionSignature>,
    /// Methods the Data API answers for it (empty: hidden).
    pub exposed_methods: Vec<String>,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// What a routine is, by `pg_proc.prokind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutineKind {
    /// A function: the only kind registered.
    Function,
    /// A procedure.
    Procedure,
    /// An aggregate.
    Aggregate,
    /// A window function.
    Window,
}

impl RoutineKind {
    /// From `pg_proc.prokind`.
    pub fn from_code(code: &str) -> Self {
        match code {
            "p" => Self::Procedure,
            "a" => Self::Aggregate,
            "w" => Self::Window,
            _ => Self::Function,
        }
    }
}

/// A routine of a schema, as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routine {
    /// What it is.
    pub kind: RoutineKind,
    /// Its description.
    pub signature: FunctionSignature,
}

/// A resource of either kind, as `/admin/api/resources` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceEntry {
    /// A table.
    Table(Resource),
    /// A function.
    Function(Function),
}

/// The one function `routines` (all of one name, at least one) names,
/// refused on `function` as API.md 18 says: overloads, other kinds and
/// unnamed arguments.
pub fn registrable(routines: Vec<Routine>) -> Result<FunctionSignature, FieldError> {
    let mut routines = routines.into_iter();
    let (Some(routine), None) = (routines.next(), routines.next()) else {
        return Err(FieldError::new(
            "function",
            "has overloads: register a name that names one function",
        ));
    };
    let kind = match routine.kind {
        RoutineKind::Function => None,
        RoutineKind::Procedure => Some("is a procedure: only functions are called"),
        RoutineKind::Aggregate => Some("is an aggregate: only plain functions are called"),
        RoutineKind::Window => Some("is a window function: only plain functions are called"),
    };
    if let Some(message) = kind {
        return Err(FieldError::new("function", message));
    }
    if routine
        .signature
        .arguments
        .iter()
        .any(|a| a.name.is_empty())
    {
        return Err(FieldError::new(
            "function",
            "has an argument without a name: calls pass arguments by name",
        ));
    }
    Ok(routine.signature)
}

/// The methods a function of `signature` may be exposed for, of
/// `methods`, in their order: POST, and GET when it reads only (refused on
/// `exposedMethods[i]`).
pub fn function_methods(
    signature: Option<&FunctionSignature>,
    methods: &[String],
) -> Result<Vec<String>, FieldError> {
    let chosen = chosen_methods(methods, &FUNCTION_METHODS, "must be GET or POST")?;
    let reads_only = signature.is_some_and(|s| s.volatility.reads_only());
    if let Some(i) = methods.iter().position(|m| m.eq_ignore_ascii_case("GET"))
        && !reads_only
    {
        return Err(FieldError::new(
            format!("exposedMethods[{i}]"),
            "GET calls immutable or stable functions only: this one is volatile",
        ));
    }
    Ok(chosen)
}

impl SchemaService {
    /// Registers an existing database function, hidden.
    pub async fn register_function(
        &self,
        caller: &Principal,
        schema: &str,
        name: &str,
        ip: Option<String>,
    ) -> Result<Function, SchemaError> {
        let schema = plan::schema_name(schema)?;
        let name = plan::identifier(name, "function")?;
        let routines = self.store.routines(&schema, &name).await?;
        if routines.is_empty() {
            return Err(StoreError::NotFound.into());
        }
        let signature = registrable(routines)?;
        let function = Function {
            id: new_id(),
            schema,
            name,
            signature: Some(signature),
            exposed_methods: Vec::new(),
            created_at: self.clock.now(),
        };
        let event = AuditEvent::new(
            caller.actor(),
            "resource.register",
            Some(format!("resource:{}", function.id)),
            ip,
        )
        .with_details(json!({ "schema": function.schema, "function": function.name }));
        Ok(self.store.register_function(function, event).await?)
    }

    /// Every resource, tables first.
    pub async fn entries(&self) -> Result<Vec<ResourceEntry>, SchemaError> {
        let tables = self.store.resources().await?;
        let functions = self.store.functions().await?;
        Ok(tables
            .into_iter()
            .map(ResourceEntry::Table)
            .chain(functions.into_iter().map(ResourceEntry::Function))
            .collect())
    }

    /// One resource of either kind.
    pub async fn entry(&self, id: Uuid) -> Result<ResourceEntry, SchemaError> {
        if let Some(function) = self.store.function(id).await? {
            return Ok(ResourceEntry::Function(function));
        }
        Ok(ResourceEntry::Table(self.resource(id).await?))
    }

    /// Sets the methods a resource of either kind is exposed for: a
    /// function takes POST, and GET when it reads only.
    pub async fn expose_entry(
        &self,
        caller: &Principal,
        id: Uuid,
        methods: &[String],
        ip: Option<String>,
    ) -> Result<ResourceEntry, SchemaError> {
        let Some(function) = self.store.function(id).await? else {
            return Ok(ResourceEntry::Table(
                self.expose(caller, id, methods, ip).await?,
            ));
        };
        let chosen = function_methods(function.signature.as_ref(), methods)?;
        let event = AuditEvent::new(
            caller.actor(),
            "resource.expose",
            Some(format!("resource:{id}")),
            ip,
        )
        .with_details(json!({ "exposedMethods": chosen }));
        Ok(ResourceEntry::Function(
            self.store
                .expose_function(id, chosen, event)
                .await?
                .ok_or(StoreError::NotFound)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use kernel::function::{FunctionArgument, FunctionReturns, Volatility};

    use super::*;

    fn routine(kind: RoutineKind, argument: &str) -> Routine {
        Routine {
            kind,
            signature: FunctionSignature {
                arguments: vec![FunctionArgument {
                    name: argument.into(),
                    data_type: "integer".into(),
                    has_default: false,
                }],
                returns: FunctionReturns {
                    data_type: "integer".into(),
                    set: false,
                },
                volatility: Volatility::Stable,
            },
        }
    }

    fn refusal(routines: Vec<Routine>) -> String {
        match registrable(routines) {
            Err(e) => format!("{}: {}", e.field, e.message),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn one_plain_function_with_named_arguments_registers() {
        assert!(registrable(vec![routine(RoutineKind::Function, "n")]).is_ok());
        let two = vec![
            routine(RoutineKind::Function, "n"),
            routine(RoutineKind::Function, "m"),
        ];
        assert!(refusal(two).starts_with("function: has overloads"));
        assert!(refusal(vec![routine(RoutineKind::Procedure, "n")]).contains("procedure"));
        assert!(refusal(vec![routine(RoutineKind::Aggregate, "n")]).contains("aggregate"));
        assert!(refusal(vec![routine(RoutineKind::Function, "")]).contains("without a name"));
    }
}
