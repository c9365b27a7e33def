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

/// The URL of a direct connection to the database: behind a transaction
/// pooler `config.database_migrate_url` (required there, and read nowhere
/// else), else `config.database_url`.
pub fn direct_url(config: &crate::ServicesConfig) -> anyhow::Result<&str> {
    match (
        &config.database_migrate_url,
        config.database_transaction_pooler,
    ) {
        (_, false) => Ok(&config.database_url),
        (Some(url), true) => Ok(url),
        (None, true) => bail!(
            "behind a transaction pooler (TESSERA_DATABASE_POOLER=transaction), migrations, \
             index builds and the SQL console need a direct connection: set \
             TESSERA_DATABASE_MIGRATE_URL to the database's URL without the pooler"
        ),
    }
}

/// A small pool on the direct connection `url`, opened as its
/// connections are needed (migrations, index builds, the SQL console).
pub async fn direct_pool(url: &str) -> anyhow::Result<DatabaseConnection> {
    store_pg::connect(
        url,
        PoolOptions {
            max_connections: 4,
            ..PoolOptions::default()
        },
    )
    .await
    .context("cannot connect to TESSERA_DATABASE_MIGRATE_URL")
}

/// Applies pending migrations of the service schema.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    Migrator::up(db, None)
        .await
        .context("migrating the service schema")?;
    Ok(())
}
