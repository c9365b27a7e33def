//! The `tessera` command: serve, migrate, and administrator set-up.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use base64::Engine;
use clap::{Parser, Subcommand};
use kernel::SystemClock;
use tessera::config::{Config, Overrides};
use tessera::{Application, Services};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "tessera",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TESSERA_GIT_REVISION"), ")"),
    about = "Self-hosted data-management backend over PostgreSQL"
)]
struct Cli {
    /// Optional TOML file with the same keys as the TESSERA_* variables.
    #[arg(
        long,
        env = "TESSERA_CONFIG",
        default_value = "tessera.toml",
        global = true
    )]
    config: PathBuf,
    #[command(flatten)]
    overrides: Overrides,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Migrates the database, then serves HTTP.
    Serve {
        /// When no administrator exists, create admin@localhost with a random
        /// password and print both once (used by `cargo xtask dev`).
        #[arg(long)]
        generate_admin: bool,
    },
    /// Only migrates the database.
    Migrate,
    /// Prints the Admin API's OpenAPI document (no database needed).
    Openapi,
    /// Administrator accounts.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Creates a verified administrator, or resets the password of the account with that email.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        password: String,
        #[arg(long)]
        name: Option<String>,
    },
}

fn init_tracing(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if std::env::var("TESSERA_LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn random_password() -> String {
    let mut bytes = [0u8; 18];
    rand::fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Openapi = cli.command {
        println!("{}", http::openapi_document().to_pretty_json()?);
        return Ok(());
    }
    let config = Config::resolve(cli.overrides, &cli.config)?;
    init_tracing(&config.log);
    let services = Services::start(&config.services(), Arc::new(SystemClock)).await?;
    match cli.command {
        Command::Openapi => {}
        Command::Migrate => {
            tracing::info!("migrations applied");
        }
        Command::Admin {
            command:
                AdminCommand::Create {
                    email,
                    password,
                    name,
                },
        } => {
            let user = services
                .accounts
                .ensure_admin(&email, &password, name)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("administrator {} ({}) is ready", user.email, user.id);
        }
        Command::Serve { generate_admin } => {
            if let Some((email, password)) = &config.bootstrap_admin {
                if let Some(created) = services.bootstrap_admin(email, password).await? {
                    tracing::info!(email = %created, "created the bootstrap administrator");
                }
            } else if generate_admin {
                let password = random_password();
                if let Some(email) = services
                    .bootstrap_admin("admin@localhost", &password)
                    .await?
                {
                    println!(
                        "\n  First start: created administrator\n    email:    {email}\n    password: {password}\n  (shown once; change it with PATCH /admin/api/users/{{id}})\n"
                    );
                }
            }
            let app = Application::build(&config, &services)?;
            tracing::info!(address = %config.bind, port = app.port(), "serving");
            app.run_until_stopped().await.context("server failed")?;
        }
    }
    Ok(())
}
