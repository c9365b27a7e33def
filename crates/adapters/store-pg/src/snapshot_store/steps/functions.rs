//! A snapshot's registered functions: the function must be in this
//! database, one of its name, registrable as the resources route says.

use crate::db::Txn;
use kernel::{FieldError, StoreError, new_id};
use snapshot::Function;

use crate::schema_store::functions::routines;
use crate::{PgStore, execute};

/// The description of the one function `function` names, refused on
/// `path` (`functions[i]`) when the database lacks it or it does not
/// register.
async fn described(
    txn: &Txn,
    function: &Function,
    path: &str,
) -> Result<kernel::function::FunctionSignature, StoreError> {
    let at = |e: FieldError| StoreError::from(snapshot::at(path, e));
    let schema = schema::schema_name(&function.schema).map_err(at)?;
    let name = schema::identifier(&function.function, "function").map_err(at)?;
    let found = routines(txn, &schema, &name).await?;
    if found.is_empty() {
        return Err(FieldError::new(
            format!("{path}.function"),
            format!(
                "names {}, a function this database does not have",
                function.qualified()
            ),
        )
        .into());
    }
    schema::registrable(found).map_err(at)
}

/// Registers the function, hidden.
pub(super) async fn register(
    store: &PgStore,
    txn: &Txn,
    function: &Function,
    path: &str,
) -> Result<(), StoreError> {
    described(txn, function, path).await?;
    execute(
        txn,
        "INSERT INTO svc.functions (id, schema_name, function_name, created_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        vec![
            new_id().into(),
            function.schema.clone().into(),
            function.function.clone().into(),
            store.now().into(),
        ],
    )
    .await?;
    Ok(())
}

/// Sets the methods the function is exposed for: POST, and GET when it
/// reads only; a diff only checks them.
pub(super) async fn expose(
    txn: &Txn,
    function: &Function,
    path: &str,
    dry: bool,
) -> Result<(), StoreError> {
    let signature = described(txn, function, path).await?;
    let methods = schema::function_methods(Some(&signature), &function.exposed_methods)
        .map_err(|e| StoreError::from(snapshot::at(path, e)))?;
    if dry {
        return Ok(());
    }
    execute(
        txn,
        "UPDATE svc.functions SET exposed_methods = $3 WHERE schema_name = $1 AND function_name = $2",
        vec![
            function.schema.clone().into(),
            function.function.clone().into(),
            methods.into(),
        ],
    )
    .await?;
    Ok(())
}
