//! Configuration: command-line flags and `TESSERA_*` variables over an
//! optional `tessera.toml`, over defaults.

use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;

/// The default database.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/tessera";
/// The default listen address.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// The default tracing filter.
pub const DEFAULT_LOG: &str = "info,sqlx=warn";
/// The default body size limit (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1_048_576;

/// Settings that flags or the environment may give.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// PostgreSQL URL (also DATABASE_URL).
    #[arg(long, env = "TESSERA_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Streaming replicas of that database serving reads, comma-separated
    /// PostgreSQL URLs (docs/operations.md, "Read replicas").
    #[arg(long, env = "TESSERA_DATABASE_READ_URLS")]
    pub database_read_urls: Option<String>,
    /// `transaction` when a transaction-mode pooler (PgBouncer, Supavisor,
    /// RDS Proxy) stands in front of the database; `none` (default)
    /// otherwise (docs/operations.md, "Connection poolers").
    #[arg(long, env = "TESSERA_DATABASE_POOLER")]
    pub database_pooler: Option<String>,
    /// A direct URL of the database (without the pooler), for migrations,
    /// index builds and the SQL console; required with a transaction pooler.
    #[arg(long, env = "TESSERA_DATABASE_MIGRATE_URL")]
    pub database_migrate_url: Option<String>,
    /// Listen address.
    #[arg(long, env = "TESSERA_BIND")]
    pub bind: Option<String>,
    /// Base of links in emails.
    #[arg(long, env = "TESSERA_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Administrator created at start when none exists.
    #[arg(long, env = "TESSERA_BOOTSTRAP_ADMIN_EMAIL")]
    pub bootstrap_admin_email: Option<String>,
    /// Password of the bootstrap administrator.
    #[arg(long, env = "TESSERA_BOOTSTRAP_ADMIN_PASSWORD", hide_env_values = true)]
    pub bootstrap_admin_password: Option<String>,
    /// Request body limit in bytes.
    #[arg(long, env = "TESSERA_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Comma-separated proxy addresses whose X-Forwarded-For is believed.
    #[arg(long, env = "TESSERA_TRUSTED_PROXIES")]
    pub trusted_proxies: Option<String>,
    /// SMTP server for outgoing email, e.g. `smtp://127.0.0.1:2525`; unset: emails are logged.
    #[arg(long, env = "TESSERA_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// Seconds a stopping instance (SIGTERM) gives in-flight requests and
    /// running workflow steps before it releases what is left (default 30).
    #[arg(long, env = "TESSERA_SHUTDOWN_GRACE_SECONDS")]
    pub shutdown_grace_seconds: Option<u64>,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`), e.g.
    /// `127.0.0.1:9464`; unset: no metrics.
    #[arg(long, env = "TESSERA_METRICS_BIND")]
    pub metrics_bind: Option<String>,
    /// Sender of outgoing email.
    #[arg(long, env = "TESSERA_SMTP_FROM")]
    pub smtp_from: Option<String>,
    /// Tracing filter, such as `info` or `tessera=debug`.
    #[arg(long, env = "TESSERA_LOG")]
    pub log: Option<String>,
    /// Drop cached state as soon as another instance announces a change
    /// (LISTEN/NOTIFY; default true). Off, behind a pooler that cannot
    /// LISTEN: cached state is still checked on every request.
    #[arg(long, env = "TESSERA_LISTEN_FOR_CHANGES")]
    pub listen_for_changes: Option<bool>,
    /// Seconds a workflow run stays leased to its instance without renewal;
    /// a run of a dead instance is resumed by another after it (default 30).
    #[arg(long, env = "TESSERA_WORKFLOW_LEASE_SECONDS")]
    pub workflow_lease_seconds: Option<u64>,
    /// Seconds a claimed email stays with its sender; an email of an
    /// instance that died while sending it goes out after it (default 60).
    #[arg(long, env = "TESSERA_OUTBOX_LEASE_SECONDS")]
    pub outbox_lease_seconds: Option<u64>,
    /// Most connections to PostgreSQL this instance holds (default 32).
    #[arg(long, env = "TESSERA_DATABASE_POOL_SIZE")]
    pub database_pool_size: Option<u32>,
    /// PostgreSQL's `plan_cache_mode` on every connection: `auto`,
    /// `force_generic_plan` (default) or `force_custom_plan`.
    #[arg(long, env = "TESSERA_DATABASE_PLAN_CACHE_MODE")]
    pub database_plan_cache_mode: Option<String>,
    /// Folder of uploaded files when no S3 bucket is set (default `data/files`
    /// under the working directory).
    #[arg(long, env = "TESSERA_FILES_DIR")]
    pub files_dir: Option<String>,
    /// S3-compatible endpoint of the files' bucket, e.g. `http://127.0.0.1:9000`
    /// (unset with a bucket: AWS).
    #[arg(long, env = "TESSERA_FILES_S3_ENDPOINT")]
    pub files_s3_endpoint: Option<String>,
    /// Bucket of uploaded files; set, files go to S3 instead of the folder.
    #[arg(long, env = "TESSERA_FILES_S3_BUCKET")]
    pub files_s3_bucket: Option<String>,
    /// Region of the bucket (default `us-east-1`).
    #[arg(long, env = "TESSERA_FILES_S3_REGION")]
    pub files_s3_region: Option<String>,
    /// Access key id for the bucket.
    #[arg(long, env = "TESSERA_FILES_S3_ACCESS_KEY_ID", hide_env_values = true)]
    pub files_s3_access_key_id: Option<String>,
    /// Secret access key for the bucket.
    #[arg(
        long,
        env = "TESSERA_FILES_S3_SECRET_ACCESS_KEY",
        hide_env_values = true
    )]
    pub files_s3_secret_access_key: Option<String>,
}

impl Overrides {
    fn or(self, other: Overrides) -> Overrides {
        Overrides {
            database_url: self.database_url.or(other.database_url),
            database_read_urls: self.database_read_urls.or(other.database_read_urls),
            database_pooler: self.database_pooler.or(other.database_pooler),
            database_migrate_url: self.database_migrate_url.or(other.database_migrate_url),
            bind: self.bind.or(other.bind),
            public_url: self.public_url.or(other.public_url),
            bootstrap_admin_email: self.bootstrap_admin_email.or(other.bootstrap_admin_email),
            bootstrap_admin_password: self
                .bootstrap_admin_password
                .or(other.bootstrap_admin_password),
            max_body_bytes: self.max_body_bytes.or(other.max_body_bytes),
            trusted_proxies: self.trusted_proxies.or(other.trusted_proxies),
            smtp_url: self.smtp_url.or(other.smtp_url),
            metrics_bind: self.metrics_bind.or(other.metrics_bind),
            shutdown_grace_seconds: self.shutdown_grace_seconds.or(other.shutdown_grace_seconds),
            smtp_from: self.smtp_from.or(other.smtp_from),
            log: self.log.or(other.log),
            listen_for_changes: self.listen_for_changes.or(other.listen_for_changes),
            workflow_lease_seconds: self.workflow_lease_seconds.or(other.workflow_lease_seconds),
            outbox_lease_seconds: self.outbox_lease_seconds.or(other.outbox_lease_seconds),
            database_pool_size: self.database_pool_size.or(other.database_pool_size),
            database_plan_cache_mode: self
                .database_plan_cache_mode
                .or(other.database_plan_cache_mode),
            files_dir: self.files_dir.or(other.files_dir),
            files_s3_endpoint: self.files_s3_endpoint.or(other.files_s3_endpoint),
            files_s3_bucket: self.files_s3_bucket.or(other.files_s3_bucket),
            files_s3_region: self.files_s3_region.or(other.files_s3_region),
            files_s3_access_key_id: self.files_s3_access_key_id.or(other.files_s3_access_key_id),
            files_s3_secret_access_key: self
                .files_s3_secret_access_key
                .or(other.files_s3_secret_access_key),
        }
    }
}

/// Default grace of a stopping instance, in seconds.
const DEFAULT_SHUTDOWN_GRACE_SECONDS: u64 = 30;

/// The configuration in force.
#[derive(Debug, Clone)]
pub struct Config {
    /// PostgreSQL URL.
    pub database_url: String,
    /// Streaming replicas serving reads.
    pub database_read_urls: Vec<String>,
    /// A transaction-mode pooler stands in front of the database.
    pub database_transaction_pooler: bool,
    /// A direct URL of the database, for what needs a session.
    pub database_migrate_url: Option<String>,
    /// Listen address (`host:port`; port 0 picks a free one).
    pub bind: String,
    /// Base of links in emails.
    pub public_url: String,
    /// Administrator created at start when none exists: (email, password).
    pub bootstrap_admin: Option<(String, String)>,
    /// Request body limit in bytes.
    pub max_body_bytes: usize,
    /// Proxies whose X-Forwarded-For is believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// SMTP server for outgoing email; `None` logs emails instead.
    pub smtp_url: Option<String>,
    /// Where `GET /metrics` listens; `None`: no metrics.
    pub metrics_bind: Option<String>,
    /// How long a stopping instance waits for requests and runs.
    pub shutdown_grace: std::time::Duration,
    /// Sender of outgoing email.
    pub smtp_from: String,
    /// Pause between two rounds of the email outbox worker.
    pub mail_poll: std::time::Duration,
    /// Tracing filter.
    pub log: String,
    /// Whether caches are dropped on change notifications (they are checked by version regardless).
    pub listen_for_changes: bool,
    /// How long a workflow run's lease lasts without renewal.
    pub workflow_lease: std::time::Duration,
    /// How long a claimed email stays with its sender.
    pub outbox_lease: std::time::Duration,
    /// How long a whole snapshot diff may run (30 s; not configurable).
    pub snapshot_diff_limit: std::time::Duration,
    /// Most connections to PostgreSQL this instance holds.
    pub database_pool_size: u32,
    /// How PostgreSQL plans the prepared statements of this instance.
    pub database_plan_cache_mode: kernel::store::PlanCacheMode,
    /// Where uploaded files are kept.
    pub files: files::BlobsConfig,
}

impl Config {
    /// What the services need of this configuration.
    pub fn services(&self) -> services::ServicesConfig {
        services::ServicesConfig {
            database_url: self.database_url.clone(),
            database_read_urls: self.database_read_urls.clone(),
            database_transaction_pooler: self.database_transaction_pooler,
            database_migrate_url: self.database_migrate_url.clone(),
            database_pool_size: self.database_pool_size,
            database_plan_cache_mode: self.database_plan_cache_mode,
            public_url: self.public_url.clone(),
            listen_for_changes: self.listen_for_changes,
            workflow_lease: self.workflow_lease,
            files: self.files.clone(),
            smtp_url: self.smtp_url.clone(),
            smtp_from: self.smtp_from.clone(),
            mail_poll: self.mail_poll,
            outbox_lease: self.outbox_lease,
            snapshot_diff_limit: self.snapshot_diff_limit,
        }
    }

    /// Resolves the configuration from `overrides` (flags and environment),
    /// then the TOML file at `file` when it exists, then defaults.
    pub fn resolve(overrides: Overrides, file: &Path) -> anyhow::Result<Self> {
        let from_file = if file.exists() {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            toml::from_str::<Overrides>(&text)
                .with_context(|| format!("parsing {}", file.display()))?
        } else {
            Overrides::default()
        };
        let env_fallback = Overrides {
            database_url: std::env::var("DATABASE_URL").ok().filter(|v| !v.is_empty()),
            ..Overrides::default()
        };
        let o = overrides.or(env_fallback).or(from_file);
        let defaults = services::ServicesConfig::for_database(DEFAULT_DATABASE_URL);
        let bind = o.bind.unwrap_or_else(|| DEFAULT_BIND.to_owned());
        let bootstrap_admin = match (o.bootstrap_admin_email, o.bootstrap_admin_password) {
            (Some(email), Some(password)) => Some((email, password)),
            (None, None) => None,
            _ => bail!(
                "TESSERA_BOOTSTRAP_ADMIN_EMAIL and TESSERA_BOOTSTRAP_ADMIN_PASSWORD go together"
            ),
        };
        let trusted_proxies = o
            .trusted_proxies
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse()
                    .with_context(|| format!("TESSERA_TRUSTED_PROXIES: `{s}` is not an IP address"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            database_url: o
                .database_url
                .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
            database_read_urls: o
                .database_read_urls
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .map(str::to_owned)
                .collect(),
            database_transaction_pooler: match o.database_pooler.as_deref().map(str::trim) {
                None | Some("" | "none") => false,
                Some("transaction") => true,
                Some(other) => anyhow::bail!(
                    "TESSERA_DATABASE_POOLER: `{other}` is neither `transaction` nor `none`"
                ),
            },
            database_migrate_url: o.database_migrate_url.filter(|url| !url.is_empty()),
            public_url: o
                .public_url
                .unwrap_or_else(|| format!("http://{bind}"))
                .trim_end_matches('/')
                .to_owned(),
            bind,
            bootstrap_admin,
            max_body_bytes: o.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
            trusted_proxies,
            smtp_url: o.smtp_url.filter(|u| !u.is_empty()),
            metrics_bind: o.metrics_bind.filter(|b| !b.is_empty()),
            shutdown_grace: std::time::Duration::from_secs(
                o.shutdown_grace_seconds
                    .unwrap_or(DEFAULT_SHUTDOWN_GRACE_SECONDS),
            ),
            smtp_from: o.smtp_from.unwrap_or(defaults.smtp_from),
            mail_poll: defaults.mail_poll,
            log: o.log.unwrap_or_else(|| DEFAULT_LOG.to_owned()),
            listen_for_changes: o.listen_for_changes.unwrap_or(true),
            workflow_lease: seconds(o.workflow_lease_seconds, defaults.workflow_lease),
            outbox_lease: seconds(o.outbox_lease_seconds, defaults.outbox_lease),
            snapshot_diff_limit: defaults.snapshot_diff_limit,
            database_pool_size: o
                .database_pool_size
                .unwrap_or(defaults.database_pool_size)
                .max(2),
            database_plan_cache_mode: match o.database_plan_cache_mode {
                Some(mode) => mode.parse().map_err(|e: String| anyhow::anyhow!(e))?,
                None => defaults.database_plan_cache_mode,
            },
            files: files_config(
                o.files_dir,
                o.files_s3_endpoint,
                o.files_s3_bucket,
                o.files_s3_region,
                o.files_s3_access_key_id,
                o.files_s3_secret_access_key,
            )?,
        })
    }

    /// A configuration for `database_url` with every other value at its default.
    pub fn for_database(database_url: &str) -> Self {
        let services = services::ServicesConfig::for_database(database_url);
        Self {
            database_url: services.database_url,
            database_read_urls: services.database_read_urls,
            database_transaction_pooler: services.database_transaction_pooler,
            database_migrate_url: services.database_migrate_url,
            bind: DEFAULT_BIND.to_owned(),
            public_url: format!("http://{DEFAULT_BIND}"),
            bootstrap_admin: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            trusted_proxies: Vec::new(),
            smtp_url: services.smtp_url,
            metrics_bind: None,
            shutdown_grace: std::time::Duration::from_secs(DEFAULT_SHUTDOWN_GRACE_SECONDS),
            smtp_from: services.smtp_from,
            mail_poll: services.mail_poll,
            log: DEFAULT_LOG.to_owned(),
            listen_for_changes: services.listen_for_changes,
            workflow_lease: services.workflow_lease,
            outbox_lease: services.outbox_lease,
            snapshot_diff_limit: services.snapshot_diff_limit,
            database_pool_size: services.database_pool_size,
            database_plan_cache_mode: services.database_plan_cache_mode,
            files: services.files,
        }
    }
}

/// `configured` seconds (at least one), else `default`.
fn seconds(configured: Option<u64>, default: std::time::Duration) -> std::time::Duration {
    configured.map_or(default, |s| std::time::Duration::from_secs(s.max(1)))
}

/// The files' storage: the bucket when one is named (with both keys), else the folder.
fn files_config(
    dir: Option<String>,
    endpoint: Option<String>,
    bucket: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
) -> anyhow::Result<files::BlobsConfig> {
    let Some(bucket) = bucket.filter(|b| !b.is_empty()) else {
        return Ok(files::BlobsConfig::Local(
            dir.unwrap_or_else(|| services::config::DEFAULT_FILES_DIR.to_owned())
                .into(),
        ));
    };
    let (Some(access_key_id), Some(secret_access_key)) = (access_key_id, secret_access_key) else {
        bail!(
            "TESSERA_FILES_S3_BUCKET needs TESSERA_FILES_S3_ACCESS_KEY_ID and TESSERA_FILES_S3_SECRET_ACCESS_KEY"
        );
    };
    Ok(files::BlobsConfig::S3(files::S3Config {
        endpoint: endpoint.filter(|e| !e.is_empty()),
        bucket,
        region: region.unwrap_or_else(|| "us-east-1".to_owned()),
        access_key_id,
        secret_access_key,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_file_and_overrides() {
        let missing = Path::new("/nonexistent/tessera.toml");
        let defaults = Config::resolve(Overrides::default(), missing).unwrap();
        assert_eq!(defaults.bind, DEFAULT_BIND);
        assert_eq!(defaults.public_url, "http://127.0.0.1:8080");
        assert_eq!(defaults.max_body_bytes, DEFAULT_MAX_BODY_BYTES);

        let file =
            std::env::temp_dir().join(format!("tessera-config-test-{}.toml", std::process::id()));
        std::fs::write(
            &file,
            "bind = \"0.0.0.0:9000\"\nmax_body_bytes = 10\ntrusted_proxies = \"10.0.0.1, ::1\"\n",
        )
        .unwrap();
        let flags = Overrides {
            bind: Some("127.0.0.1:7000".into()),
            ..Overrides::default()
        };
        let config = Config::resolve(flags, &file).unwrap();
        assert_eq!(
            config.bind, "127.0.0.1:7000",
            "flags and environment win over the file"
        );
        assert_eq!(config.max_body_bytes, 10);
        assert_eq!(config.trusted_proxies.len(), 2);

        std::fs::write(&file, "unknown_key = 1\n").unwrap();
        assert!(Config::resolve(Overrides::default(), &file).is_err());
        let half = Overrides {
            bootstrap_admin_email: Some("a@b.c".into()),
            ..Overrides::default()
        };
        assert!(Config::resolve(half, missing).is_err());
        std::fs::remove_file(&file).unwrap();

        assert_eq!(
            defaults.database_plan_cache_mode,
            kernel::store::PlanCacheMode::ForceGenericPlan
        );
        let auto = Overrides {
            database_plan_cache_mode: Some("auto".into()),
            ..Overrides::default()
        };
        assert_eq!(
            Config::resolve(auto, missing)
                .unwrap()
                .database_plan_cache_mode,
            kernel::store::PlanCacheMode::Auto
        );
        let nonsense = Overrides {
            database_plan_cache_mode: Some("fast".into()),
            ..Overrides::default()
        };
        assert!(Config::resolve(nonsense, missing).is_err());
    }
}
