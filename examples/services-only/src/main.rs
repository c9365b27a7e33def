//! A back-office job over the database of `TESSERA_DATABASE_URL`, with no
//! HTTP server:
//!
//! - `services-only report`: prints, one JSON line each, the rows of
//!   `TESSERA_REPORT_TABLE` (`schema.table`) that the owner of
//!   `TESSERA_REPORT_TOKEN` may read;
//! - `services-only invite <email>`: invites a person as the administrator
//!   of `TESSERA_ADMIN_TOKEN`;
//! - `services-only schedule <slug> <cron>`: publishes a scheduled workflow
//!   as that administrator.
//!
//! The last two run the background workers until Ctrl-C: they send the
//! email (over `TESSERA_SMTP_URL`, else to the log) and run the schedule,
//! then hand what they hold over to other instances.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use services::{Services, ServicesConfig};

/// How long a stopping job gives its workers.
const GRACE: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).with_context(|| format!("{name} is not set"));
    let mut config = ServicesConfig::for_database(&env("TESSERA_DATABASE_URL")?);
    config.database_pool_size = 4;
    config.smtp_url = std::env::var("TESSERA_SMTP_URL").ok();
    let services = Services::start(&config, Arc::new(services::kernel::SystemClock)).await?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["report"] => {
            let table = env("TESSERA_REPORT_TABLE")?;
            let (schema, name) = table
                .split_once('.')
                .context("TESSERA_REPORT_TABLE is schema.table")?;
            let token = env("TESSERA_REPORT_TOKEN")?;
            for row in
                services_only_example::report(&services, &token, (schema, name), 1000).await?
            {
                println!("{row}");
            }
        }
        ["invite", email] => {
            let workers = services.start_workers()?;
            services_only_example::invite(&services, &env("TESSERA_ADMIN_TOKEN")?, email).await?;
            println!("invited {email}; the workers send the email; Ctrl-C stops");
            until_stopped(workers).await?;
        }
        ["schedule", slug, cron] => {
            let workers = services.start_workers()?;
            let id = services_only_example::schedule(
                &services,
                &env("TESSERA_ADMIN_TOKEN")?,
                slug,
                cron,
            )
            .await?;
            println!("workflow {id} runs at {cron}; Ctrl-C stops");
            until_stopped(workers).await?;
        }
        _ => bail!("usage: services-only [report | invite <email> | schedule <slug> <cron>]"),
    }
    Ok(())
}

/// Runs `workers` until Ctrl-C, then stops them.
async fn until_stopped(workers: services::Workers) -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    workers.stop(GRACE).await?;
    Ok(())
}
