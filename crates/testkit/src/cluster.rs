//! A PostgreSQL cluster of a test's own (the machine's `initdb` and
//! `pg_ctl`, run as `postgres` when the test runs as root), so the test may
//! stop and start it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster on a free loopback port; stopped and removed when dropped.
pub struct Cluster {
    bin: PathBuf,
    base: PathBuf,
    as_postgres: bool,
    port: u16,
}

impl Cluster {
    /// Creates and starts a cluster (trust authentication, no fsync).
    pub fn start() -> Self {
        let cluster = Self::empty();
        cluster.run(
            "initdb",
            &[
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
                "-D",
            ],
            Some(&cluster.data()),
        );
        cluster.up();
        cluster
    }

    /// A streaming replica of this cluster (`pg_basebackup` with its
    /// standby settings), started on a free port of its own; it serves
    /// reads (hot standby) and follows the primary from then on.
    pub fn replica(&self) -> Self {
        let replica = Self::empty();
        let port = self.port.to_string();
        replica.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-R",
                "-X",
                "stream",
                "--no-sync",
                "-D",
            ],
            Some(&replica.data()),
        );
        replica.up();
        replica
    }

    /// A directory for a cluster on a free port, nothing in it yet.
    fn empty() -> Self {
        let bin = pg_bin();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let base = std::env::temp_dir().join(format!("tessera-cluster-{port}"));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("cluster directory");
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&base)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chown of the cluster directory"
            );
        }
        Self {
            bin,
            base,
            as_postgres,
            port,
        }
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs `sql` in `database` and answers the first column of its first
    /// row as text.
    pub async fn sql(&self, database: &str, sql: &str) -> Option<String> {
        use sea_orm::ConnectionTrait;
        let mut connect = sea_orm::ConnectOptions::new(self.url(database));
        connect.max_connections(1).sqlx_logging(false);
        let db = sea_orm::Database::connect(connect).await.expect("connect");
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                sql.to_owned(),
            ))
            .await
            .expect("test SQL runs");
        db.close().await.expect("close");
        row.and_then(|r| r.try_get_by_index::<Option<String>>(0).ok().flatten())
    }

    /// Stops the server at once, as a crash or a fast restart does.
    pub fn down(&self) {
        let data = self.data();
        self.run("pg_ctl", &["-m", "fast", "-w", "stop", "-D"], Some(&data));
    }

    /// Starts the server again.
    pub fn up(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.base.display()
        );
        let log = self.base.join("postgres.log");
        let data = self.data();
        let mut command = self.command("pg_ctl");
        command
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-o", &options, "-w", "start"]);
        assert!(
            command.status().is_ok_and(|s| s.success()),
            "pg_ctl start; see {}",
            log.display()
        );
    }

    fn data(&self) -> PathBuf {
        self.base.join("data")
    }

    fn command(&self, tool: &str) -> Command {
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join(tool));
            command
        } else {
            Command::new(self.bin.join(tool))
        }
    }

    fn run(&self, tool: &str, args: &[&str], path: Option<&Path>) {
        let mut command = self.command(tool);
        command.args(args);
        if let Some(path) = path {
            command.arg(path);
        }
        let output = command.output().expect(tool);
        assert!(
            output.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-m", "immediate", "stop", "-D"])
            .arg(self.data())
            .output();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The directory of `initdb` and `pg_ctl`: the newest Debian install.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's programs under /usr/lib/postgresql")
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().expect("an initdb").1
}
