//! The database functions of a role's Data document (API.md 18): each
//! exposed function the role may invoke, with its arguments typed.

use kernel::function::FunctionSignature;
use schema::{Function, ResourceEntry};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::openapi_data::{answer, envelope, errors_schema, pascal};

/// The JSON schema of a value of the PostgreSQL type `data_type` as
/// `format_type` writes it; `None` for a row type (an object).
fn type_schema(data_type: &str) -> Option<Value> {
    if let Some(element) = data_type.strip_suffix("[]") {
        let items = type_schema(element).unwrap_or_else(|| json!({ "type": "object" }));
        return Some(json!({ "type": ["array", "null"], "items": items }));
    }
    let base = data_type.split('(').next().unwrap_or(data_type).trim();
    let (kind, format) = match base {
        "smallint" | "integer" | "bigint" => ("integer", None),
        "numeric" | "real" | "double precision" => ("number", None),
        "boolean" => ("boolean", None),
        "uuid" => ("string", Some("uuid")),
        "date" => ("string", Some("date")),
        "timestamp without time zone" | "timestamp with time zone" => ("string", Some("date-time")),
        "json" | "jsonb" => return Some(json!({ "description": base })),
        "text"
        | "character varying"
        | "character"
        | "citext"
        | "name"
        | "time without time zone"
        | "time with time zone"
        | "interval"
        | "inet"
        | "cidr" => ("string", None),
        _ => return None,
    };
    let mut schema = json!({ "type": [kind, "null"], "description": data_type });
    if let Some(format) = format {
        schema["format"] = json!(format);
    }
    Some(schema)
}

/// The columns of `TABLE(a integer, b text)` as object properties.
fn table_columns(data_type: &str) -> Option<Value> {
    let inner = data_type.strip_prefix("TABLE(")?.strip_suffix(')')?;
    let properties: Map<String, Value> = inner
        .split(", ")
        .filter_map(|column| column.split_once(' '))
        .map(|(name, column_type)| {
            let schema = type_schema(column_type).unwrap_or_else(|| json!({}));
            (name.trim_matches('"').to_owned(), schema)
        })
        .collect();
    Some(json!({ "type": "object", "properties": properties }))
}

/// The schema of a call's `data`.
fn result_schema(signature: &FunctionSignature) -> Value {
    let returns = &signature.returns;
    if returns.is_void() {
        return json!({ "type": "null" });
    }
    let one = table_columns(&returns.data_type)
        .or_else(|| type_schema(&returns.data_type))
        .unwrap_or_else(|| json!({ "type": ["object", "null"], "description": returns.data_type }));
    if returns.set {
        json!({ "type": "array", "items": one })
    } else {
        one
    }
}

/// The schema of an argument's value.
fn argument_schema(data_type: &str) -> Value {
    type_schema(data_type).unwrap_or_else(|| json!({ "description": data_type }))
}

/// `POST`/`GET /api/rpc/{schema}/{function}` of each exposed function
/// `role` holds `invoke` on (every exposed one for administrators).
pub(super) fn describe_functions(
    entries: &[ResourceEntry],
    invocable: &[Uuid],
    admin: bool,
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
) {
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    let functions = entries.iter().filter_map(|entry| match entry {
        ResourceEntry::Function(f) if admin || invocable.contains(&f.id) => Some(f),
        _ => None,
    });
    for function in functions {
        let Function {
            schema,
            name,
            signature: Some(signature),
            exposed_methods,
            ..
        } = function
        else {
            continue;
        };
        let subject = format!("call{}{}", pascal(schema), pascal(name));
        let mut item = Map::new();
        let properties: Map<String, Value> = signature
            .arguments
            .iter()
            .map(|a| (a.name.clone(), argument_schema(&a.data_type)))
            .collect();
        let required: Vec<&str> = signature
            .arguments
            .iter()
            .filter(|a| !a.has_default)
            .map(|a| a.name.as_str())
            .collect();
        let responses = json!({
            "200": answer("The function's result", envelope(result_schema(signature))),
            "400": answer("A bad argument (field data.<argument>), FUNCTION_RAISED, FUNCTION_FAILED or QUERY_TIMEOUT", error.clone()),
            "401": answer("No valid credential", error.clone()),
            "403": answer("No invoke grant", error.clone()),
            "404": answer("Not registered or hidden", error.clone()),
            "405": answer("Not exposed for this method", error.clone()),
            "409": answer("A unique or foreign key conflict inside the function", error.clone()),
        });
        let summary = format!("Call {schema}.{name} ({})", signature.volatility.as_str());
        for method in exposed_methods {
            let operation = if method == "POST" {
                let input = json!({ "type": "object", "properties": properties,
                    "required": required, "additionalProperties": false });
                json!({ "operationId": subject, "summary": summary,
                    "requestBody": { "required": true, "content": { "application/json": { "schema": envelope(input) } } },
                    "responses": responses })
            } else {
                let parameters: Vec<Value> = signature.arguments.iter().map(|a| json!({
                    "name": a.name, "in": "query", "required": !a.has_default,
                    "schema": argument_schema(&a.data_type),
                    "description": format!("{}: JSON-decoded when it parses as JSON, else a string", a.data_type),
                })).collect();
                json!({ "operationId": format!("{subject}Get"), "summary": summary,
                    "parameters": parameters, "responses": responses })
            };
            item.insert(method.to_ascii_lowercase(), operation);
        }
        if !item.is_empty() {
            schemas.entry("Errors").or_insert_with(errors_schema);
            paths.insert(format!("/api/rpc/{schema}/{name}"), Value::Object(item));
        }
    }
}

#[cfg(test)]
mod tests {
    use kernel::function::{FunctionReturns, Volatility};

    use super::*;

    fn returning(data_type: &str, set: bool) -> Value {
        result_schema(&FunctionSignature {
            arguments: Vec::new(),
            returns: FunctionReturns {
                data_type: data_type.into(),
                set,
            },
            volatility: Volatility::Stable,
        })
    }

    #[test]
    fn results_are_typed_as_the_call_answers_them() {
        assert_eq!(returning("void", false), json!({ "type": "null" }));
        assert_eq!(
            returning("integer", false)["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            returning("orders", true)["items"]["type"],
            json!(["object", "null"])
        );
        let table = returning("TABLE(id integer, total numeric)", true);
        assert_eq!(
            table["items"]["properties"]["total"]["type"],
            json!(["number", "null"])
        );
        assert_eq!(
            returning("text[]", false)["items"]["type"],
            json!(["string", "null"])
        );
    }
}
