//! One database per test, cloned from a template migrated once per migration set.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// Server URL of the test cluster (no database path).
fn server_url() -> String {
    std::env::var("TESSERA_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
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
        let template = format!("tessera_tmpl_{:016x}", migrations::FINGERPRINT);
        let admin = maintenance().await;
        // One process builds the template; the lock serialises the others.
        admin
            .execute_unprepared("SELECT pg_advisory_lock(7261737365726101)")
            .await
            .expect("lock");
        if !exists(&admin, &template).await {
            let building = format!("{template}_build");
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
                .await
                .expect("drop stale");
            admin
                .execute_unprepared(&format!("CREATE DATABASE {building}"))
                .await
                .expect("create template");
            let url = format!("{}/{building}", server_url());
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
            .execute_unprepared(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .await
            .expect("clone template");
        admin
            .execute_unprepared("SELECT pg_advisory_unlock(7261737365726101)")
            .await
            .expect("unlock");
        admin.close().await.expect("close");
        let url = format!("{}/{name}", server_url());
        Self { name, url }
    }

    /// A new empty database (no schema of Tessera's), as a new machine has
    /// before a restore.
    pub async fn empty() -> Self {
        let admin = maintenance().await;
        let name = format!("tessera_test_{}", uuid::Uuid::now_v7().simple());
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create database");
        admin.close().await.expect("close");
        let url = format!("{}/{name}", server_url());
        Self { name, url }
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
