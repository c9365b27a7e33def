//! One database per test, cloned from a template migrated once per migration set.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// Server URL of the test cluster (no database path).
fn server_url() -> String {
    std::env::var("TESSERA_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

/// The role every test database belongs to and Tessera connects as: it owns
/// its database and nothing more (no superuser, no `CREATEDB`), as a
/// production deployment's role does.
pub const OWNER: &str = "tessera_test_owner";

/// `database`'s URL as [`OWNER`].
fn owner_url(database: &str) -> String {
    let mut url = url::Url::parse(&server_url()).expect("TESSERA_TEST_PG_URL is a URL");
    url.set_username(OWNER).expect("a user in the URL");
    url.set_password(None).expect("no password");
    url.set_path(database);
    url.to_string()
}

/// Creates [`OWNER`] unless it exists (under the template lock).
async fn ensure_owner(admin: &DatabaseConnection) {
    admin
        .execute_unprepared(&format!(
            "DO $$ BEGIN CREATE ROLE {OWNER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ))
        .await
        .expect("create the owner role");
}

async fn maintenance() -> DatabaseConnection {
    let options = store_options();
    let mut connect = sea_orm::ConnectOptions::new(format!("{}/postgres", server_url()));
    connect
        .max_connections(1)
        .min_connections(1)
        .sqlx_logging(false)
        .acquire_timeout(options);
    sea_orm::Database::connect(connect)
        .await
        .expect("PostgreSQL reachable for tests")
}

fn store_options() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

async fn exists(db: &DatabaseConnection, name: &str) -> bool {
    db.query_one_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT 1 AS one FROM pg_database WHERE datname = $1",
        [name.into()],
    ))
    .await
    .expect("pg_database readable")
    .is_some()
}

/// A uniquely named database, dropped (with force) when this value is dropped.
pub struct TestDatabase {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

impl TestDatabase {
    /// Clones a fresh database from the migrated template, creating the
    /// template first if no process has yet.
    pub async fn create() -> Self {
        let template = format!("tessera_owned_{:016x}", migrations::FINGERPRINT);
        let admin = maintenance().await;
        // One process builds the template; the lock serialises the others.
        admin
            .execute_unprepared("SELECT pg_advisory_lock(7261737365726101)")
            .await
            .expect("lock");
        ensure_owner(&admin).await;
        if !exists(&admin, &template).await {
            let building = format!("{template}_build");
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
                .await
                .expect("drop stale");
            admin
                .execute_unprepared(&format!("CREATE DATABASE {building} OWNER {OWNER}"))
                .await
                .expect("create template");
            // Migrated as the owner, so every object is the owner's.
            let url = owner_url(&building);
            let db = store_pg_connect(&url).await;
            tessera::database::migrate(&db)
                .await
                .expect("migrate template");
            db.close().await.expect("close template");
            admin
                .execute_unprepared(&format!("ALTER DATABASE {building} RENAME TO {template}"))
                .await
                .expect("rename template");
        }
        let name = format!("tessera_test_{}", uuid::Uuid::now_v7().simple());
        admin
            .execute_unprepared(&format!(
                "CREATE DATABASE {name} TEMPLATE {template} OWNER {OWNER}"
            ))
            .await
            .expect("clone template");
        admin
            .execute_unprepared("SELECT pg_advisory_unlock(7261737365726101)")
            .await
            .expect("unlock");
        admin.close().await.expect("close");
        let url = owner_url(&name);
        Self { name, url }
    }

    /// A new empty database (no schema of Tessera's), as a new machine has
    /// before a restore.
    pub async fn empty() -> Self {
        let admin = maintenance().await;
        ensure_owner(&admin).await;
        let name = format!("tessera_test_{}", uuid::Uuid::now_v7().simple());
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name} OWNER {OWNER}"))
            .await
            .expect("create database");
        admin.close().await.expect("close");
        let url = owner_url(&name);
        Self { name, url }
    }

    /// Its URL as the cluster's own administrator, for what only a role
    /// with `CREATEDB` may do (create the database when it is missing).
    pub fn superuser_url(&self) -> String {
        format!("{}/{}", server_url(), self.name)
    }

    /// Runs `sql` in this database (for arranging states no route can reach)
    /// and answers the first column of the first row as text, if any.
    pub async fn sql(&self, sql: &str) -> Option<String> {
        let db = store_pg_connect(&self.url).await;
        let row = db
            .query_one_raw(Statement::from_string(DbBackend::Postgres, sql.to_owned()))
            .await
            .expect("test SQL runs");
        db.close().await.expect("close");
        row.and_then(|r| r.try_get_by_index::<Option<String>>(0).ok().flatten())
    }

    /// Drops the database now, under anything still connected to it.
    pub async fn destroy(&self) {
        let admin = maintenance().await;
        admin
            .execute_unprepared(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await
            .expect("drop database");
        admin.close().await.expect("close");
    }
}

async fn store_pg_connect(url: &str) -> DatabaseConnection {
    let mut connect = sea_orm::ConnectOptions::new(url.to_owned());
    connect.max_connections(1).sqlx_logging(false);
    sea_orm::Database::connect(connect).await.expect("connect")
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Dropping runs outside the test's runtime, which may be shutting down.
        let dropper = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let admin = maintenance().await;
                let _ = admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
                let _ = admin.close().await;
            });
        });
        let _ = dropper.join();
    }
}
