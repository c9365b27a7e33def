//! A back-office job over the database of `TESSERA_DATABASE_URL`, with no
//! HTTP server:
//!
//! - `services-only report`: prints, one JSON line each, the rows of
//!   `TESSERA_REPORT_TABLE` (`schema.table`) that the owner of
//!   `TESSERA_REPORT_TOKEN` may read;
//! - `services-only invite <email>`: invites a person as the administrator
//!   of `TESSERA_ADMIN_TOKEN` and sends the email (over `TESSERA_SMTP_URL`)
//!   before it exits;
//! - `services-only schedule <slug> <cron>`: publishes a scheduled workflow
//!   as that administrator and runs it until Ctrl-C.

use std::sync::Arc;
use std::time::{Duration, Instant};

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
            let deadline = Instant::now() + Duration::from_secs(30);
            while services.operations().await?.outbox_waiting > 0 {
                if Instant::now() > deadline {
                    bail!("the invitation is still in the outbox after 30 s");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            workers.stop(GRACE).await?;
            println!("invited {email}");
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
            tokio::signal::ctrl_c().await?;
            workers.stop(GRACE).await?;
        }
        _ => bail!("usage: services-only [report | invite <email> | schedule <slug> <cron>]"),
    }
    Ok(())
}
