//! Prints, one JSON line each, the rows of `TESSERA_REPORT_TABLE`
//! (`schema.table`) that the owner of `TESSERA_REPORT_TOKEN` may read, over
//! the database of `TESSERA_DATABASE_URL`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use services::{Services, ServicesConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).with_context(|| format!("{name} is not set"));
    let config = ServicesConfig {
        database_url: env("TESSERA_DATABASE_URL")?,
        database_read_urls: Vec::new(),
        database_pool_size: 4,
        database_plan_cache_mode: services::store_pg::PoolOptions::default().plan_cache_mode,
        public_url: "http://127.0.0.1:8080".into(),
        listen_for_changes: false,
        workflow_lease: Duration::from_secs(30),
        files: services::files::BlobsConfig::Local("data/files".into()),
    };
    let services = Services::start(&config, Arc::new(services::kernel::SystemClock)).await?;
    let table = env("TESSERA_REPORT_TABLE")?;
    let (schema, name) = table
        .split_once('.')
        .context("TESSERA_REPORT_TABLE is schema.table")?;
    let token = env("TESSERA_REPORT_TOKEN")?;
    for row in services_only_example::report(&services, &token, (schema, name), 1000).await? {
        println!("{row}");
    }
    Ok(())
}
