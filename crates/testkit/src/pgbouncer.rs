//! Debian's PgBouncer in transaction mode in front of the test cluster, on
//! a free port, stopped when dropped: the pooler production databases sit
//! behind. It keeps no prepared statement of its own (1.18) and refuses
//! startup parameters it does not know, as a strict pooler does.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether the tests run through PgBouncer (`TESSERA_TEST_POOLER=transaction`).
pub fn through_pooler() -> bool {
    std::env::var("TESSERA_TEST_POOLER").is_ok_and(|mode| mode == "transaction")
}

/// A running PgBouncer.
pub struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of `host:port`, with
    /// at most `pool_size` server connections per database.
    pub fn start(host: &str, port: u16, pool_size: u32) -> Self {
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("tessera-pgbouncer-{listen}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("pgbouncer directory");
        let users = dir.join("users.txt");
        std::fs::write(
            &users,
            format!("\"postgres\" \"\"\n\"{}\" \"\"\n", crate::db::OWNER),
        )
        .expect("users file");
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {users}\npool_mode = transaction\n\
                 default_pool_size = {pool_size}\nmax_client_conn = 1000\n\
                 server_reset_query =\nlogfile = {log}\npidfile = {pid}\n",
                users = users.display(),
                log = dir.join("pgbouncer.log").display(),
                pid = dir.join("pgbouncer.pid").display(),
            ),
        )
        .expect("pgbouncer.ini");
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let mut command = Command::new(pgbouncer_bin());
        // PgBouncer refuses to run as root.
        if root {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status();
            assert!(status.is_ok_and(|s| s.success()), "chown of {dir:?}");
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts (Debian's `pgbouncer` package)");
        let bouncer = Self {
            child,
            port: listen,
            dir,
        };
        bouncer.wait_until_listening();
        bouncer
    }

    /// `direct` (a URL of the server behind) through the pooler: the same
    /// user and database.
    pub fn url_for(&self, direct: &str) -> String {
        let mut url = url::Url::parse(direct).expect("a database URL");
        url.set_host(Some("127.0.0.1")).expect("a host");
        url.set_port(Some(self.port)).expect("a port");
        url.to_string()
    }

    fn wait_until_listening(&self) {
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "pgbouncer did not listen; see {}",
                self.dir.join("pgbouncer.log").display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Debian installs it in `/usr/sbin`, often not on a user's PATH.
fn pgbouncer_bin() -> PathBuf {
    let debian = PathBuf::from("/usr/sbin/pgbouncer");
    match debian.exists() {
        true => debian,
        false => PathBuf::from("pgbouncer"),
    }
}
