//! Getting the database ready: create it when missing, then migrate.

use anyhow::{Context, bail};
use migrations::Migrator;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use sea_orm_migration::MigratorTrait;
use store_pg::PoolOptions;

/// Creates the database named in `url` when it does not exist, connecting to
/// the `postgres` maintenance database of the same server.
pub async fn create_if_missing(url: &str) -> anyhow::Result<()> {
    let mut parsed = url::Url::parse(url).context("TESSERA_DATABASE_URL is not a valid URL")?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    if name.is_empty() {
        bail!("TESSERA_DATABASE_URL names no database");
    }
    if name == "postgres" {
        return Ok(());
    }
    parsed.set_path("/postgres");
    let admin = store_pg::connect(
        parsed.as_str(),
        PoolOptions {
            max_connections: 1,
            ..PoolOptions::default()
        },
    )
    .await
    .context("cannot reach PostgreSQL")?;
    let exists = admin
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT 1 AS one FROM pg_database WHERE datname = $1",
            [name.clone().into()],
        ))
        .await?
        .is_some();
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        match admin
            .execute_unprepared(&format!("CREATE DATABASE {quoted}"))
            .await
        {
            Ok(_) => tracing::info!(database = %name, "created database"),
            // Another instance may have created it in the meantime.
            Err(e) if e.to_string().contains("already exists") => {}
            Err(e) => return Err(e).context("cannot create the database"),
        }
    }
    admin.close().await?;
    Ok(())
}

/// Applies pending migrations of the service schema.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    Migrator::up(db, None)
        .await
        .context("migrating the service schema")?;
    Ok(())
}
