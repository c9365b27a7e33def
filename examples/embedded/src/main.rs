//! Runs the example host on 127.0.0.1:8090 with Tessera's configuration
//! from the same `TESSERA_*` variables and `tessera.toml` as the server.

use std::path::Path;

use tessera::config::{Config, Overrides};

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    // The host's tracing; Tessera's request spans and logs join it.
    tracing_subscriber::fmt().with_env_filter("info").init();
    let mut config = Config::resolve(Overrides::default(), Path::new("tessera.toml"))?;
    config.public_url = format!("http://127.0.0.1:8090{}", embedded_example::BASE_PATH);
    let host = embedded_example::start(&config, "127.0.0.1:8090").await?;
    tracing::info!(port = host.port, "host serving; Tessera under /backend");
    host.server.await?;
    // Email and workflow work still held goes back to the queue.
    host.tessera.stop().await;
    Ok(())
}
