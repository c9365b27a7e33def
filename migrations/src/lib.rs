//! Migrations of the service schema `svc`. Each migration is one SQL file in
//! `sql/`, run in a transaction.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

/// The migrations, oldest first: (name, SQL).
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "m0001_service_schema",
        include_str!("../sql/0001_service_schema.sql"),
    ),
    (
        "m0002_account_lifecycle",
        include_str!("../sql/0002_account_lifecycle.sql"),
    ),
    ("m0003_resources", include_str!("../sql/0003_resources.sql")),
    ("m0004_grants", include_str!("../sql/0004_grants.sql")),
    ("m0005_data_api", include_str!("../sql/0005_data_api.sql")),
    (
        "m0006_service_table_guards",
        include_str!("../sql/0006_service_table_guards.sql"),
    ),
    (
        "m0007_rate_limits",
        include_str!("../sql/0007_rate_limits.sql"),
    ),
    (
        "m0008_shared_state_versions",
        include_str!("../sql/0008_shared_state_versions.sql"),
    ),
    ("m0009_workflows", include_str!("../sql/0009_workflows.sql")),
    (
        "m0010_rate_limit_buckets",
        include_str!("../sql/0010_rate_limit_buckets.sql"),
    ),
    (
        "m0011_user_identities",
        include_str!("../sql/0011_user_identities.sql"),
    ),
    ("m0012_dataviews", include_str!("../sql/0012_dataviews.sql")),
    (
        "m0013_email_templates",
        include_str!("../sql/0013_email_templates.sql"),
    ),
    ("m0014_files", include_str!("../sql/0014_files.sql")),
    ("m0015_realtime", include_str!("../sql/0015_realtime.sql")),
    (
        "m0016_security_rules",
        include_str!("../sql/0016_security_rules.sql"),
    ),
    (
        "m0017_schema_evolution",
        include_str!("../sql/0017_schema_evolution.sql"),
    ),
    (
        "m0018_workflow_schedules",
        include_str!("../sql/0018_workflow_schedules.sql"),
    ),
    (
        "m0019_second_factors",
        include_str!("../sql/0019_second_factors.sql"),
    ),
    ("m0020_passkeys", include_str!("../sql/0020_passkeys.sql")),
    (
        "m0021_write_marks",
        include_str!("../sql/0021_write_marks.sql"),
    ),
    (
        "m0022_trust_third_round",
        include_str!("../sql/0022_trust_third_round.sql"),
    ),
    (
        "m0023_answers_and_dry_diffs",
        include_str!("../sql/0023_answers_and_dry_diffs.sql"),
    ),
    (
        "m0024_measured_rows",
        include_str!("../sql/0024_measured_rows.sql"),
    ),
    (
        "m0025_deferrable_service_keys",
        include_str!("../sql/0025_deferrable_service_keys.sql"),
    ),
    (
        "m0026_trust_fourth_round",
        include_str!("../sql/0026_trust_fourth_round.sql"),
    ),
    ("m0027_functions", include_str!("../sql/0027_functions.sql")),
    (
        "m0028_write_hooks",
        include_str!("../sql/0028_write_hooks.sql"),
    ),
];

/// A hash of every migration's name and text. Test databases are cloned from a
/// template named after it, so a changed migration gives a fresh template.
pub const FINGERPRINT: u64 = {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut m = 0;
    while m < MIGRATIONS.len() {
        let (name, sql) = MIGRATIONS[m];
        let parts = [name.as_bytes(), sql.as_bytes()];
        let mut p = 0;
        while p < parts.len() {
            let bytes = parts[p];
            let mut i = 0;
            while i < bytes.len() {
                hash ^= bytes[i] as u64;
                hash = hash.wrapping_mul(0x0100_0000_01b3);
                i += 1;
            }
            p += 1;
        }
        m += 1;
    }
    hash
};

struct SqlMigration {
    name: &'static str,
    sql: &'static str,
}

impl MigrationName for SqlMigration {
    fn name(&self) -> &str {
        self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for SqlMigration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(self.sql)
            .await?;
        Ok(())
    }
}

/// Runs the service schema migrations.
#[derive(Debug)]
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        MIGRATIONS
            .iter()
            .map(|(name, sql)| Box::new(SqlMigration { name, sql }) as Box<dyn MigrationTrait>)
            .collect()
    }

    fn migration_table_name() -> DynIden {
        "tessera_migrations".into_iden()
    }
}
