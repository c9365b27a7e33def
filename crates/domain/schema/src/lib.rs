//! Schema administration: table definitions, their validation, the DDL they
//! become, and the resources that expose tables and database functions.

mod expr;
mod functions;
mod plan;
mod resources;
mod usage;

pub use expr::Refused;
pub use functions::{
    FUNCTION_METHODS, Function, ResourceEntry, Routine, RoutineKind, function_methods, registrable,
};
pub use plan::{
    ColumnFacts, ColumnInput, ColumnPatch, Confirm, ForeignKeyInput, INDEX_METHODS, IndexInput,
    IndexPlan, Plan, TableFacts, TableInput, add_column, alter_column, create_index, create_table,
    drop_column, drop_index, fk_index_name, identifier, rename_table, schema_name,
};
pub use resources::*;
pub use usage::{Usage, rename_resource};
