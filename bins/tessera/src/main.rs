//! The `tessera` command: serve, migrate, administrator set-up and snapshots.

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
    /// Configuration snapshots against the configured database (no server
    /// needed; logs go to stderr).
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Prints the snapshot (or writes it to FILE).
    Export {
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Prints the steps that would make the database match FILE, one a line.
    Diff { file: PathBuf },
    /// Makes the database match FILE in one transaction; exits non-zero,
    /// having changed nothing, when refused.
    Apply {
        file: PathBuf,
        /// Runs steps that drop tables, columns, roles, grants or workflows,
        /// or change a type.
        #[arg(long)]
        allow_destructive: bool,
        /// Runs steps that give administrator power (a setting naming a
        /// role with admin access, a workflow that runs as an administrator).
        #[arg(long)]
        allow_admin_power: bool,
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

/// Logs to stdout, or to stderr when stdout carries the command's output.
fn init_tracing(filter: &str, to_stderr: bool) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let json = std::env::var("TESSERA_LOG_FORMAT").is_ok_and(|f| f == "json");
    match (json, to_stderr) {
        (true, true) => builder.json().with_writer(std::io::stderr).init(),
        (true, false) => builder.json().init(),
        (false, true) => builder.with_writer(std::io::stderr).init(),
        (false, false) => builder.init(),
    }
}

fn read_snapshot(file: &PathBuf) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))
}

fn print_step(step: &snapshot::StepReport) {
    let power = match &step.admin_power {
        Some(reason) => format!(" (gives administrator power: {reason})"),
        None => String::new(),
    };
    match &step.values {
        Some((old, new)) => println!(
            "{} {} {}: {old} -> {new}{power}",
            step.action, step.kind, step.name
        ),
        None => println!("{} {} {}{power}", step.action, step.kind, step.name),
    }
}

/// Runs a snapshot command; a refusal is an error naming its field.
async fn snapshot_command(services: &Services, command: SnapshotCommand) -> anyhow::Result<()> {
    use kernel::ErrorCode;
    let refused = |e: snapshot::SnapshotError| match e.field() {
        Some(field) => anyhow::anyhow!("refused ({}): {field}: {}", e.code().as_str(), e.message()),
        None => anyhow::anyhow!("refused ({}): {}", e.code().as_str(), e.message()),
    };
    let system = audit::Actor::SYSTEM;
    match command {
        SnapshotCommand::Export { output } => {
            let exported = services.snapshots.export().await.map_err(refused)?;
            let text = format!("{}\n", serde_json::to_string_pretty(&exported)?);
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{text}"),
            }
        }
        SnapshotCommand::Diff { file } => {
            let planned = services
                .snapshots
                .diff(system, &read_snapshot(&file)?, None)
                .await
                .map_err(refused)?;
            planned.steps.iter().for_each(print_step);
        }
        SnapshotCommand::Apply {
            file,
            allow_destructive,
            allow_admin_power,
        } => {
            let consent = snapshot::Consent {
                destructive: allow_destructive,
                admin_power: allow_admin_power,
            };
            let steps = services
                .snapshots
                .apply(system, &read_snapshot(&file)?, consent, None)
                .await
                .map_err(refused)?;
            steps.iter().for_each(print_step);
        }
    }
    Ok(())
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
    init_tracing(&config.log, matches!(cli.command, Command::Snapshot { .. }));
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
        Command::Snapshot { command } => snapshot_command(&services, command).await?,
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
