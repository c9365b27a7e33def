//! Finds PostgreSQL at the configured address, or starts a throwaway cluster
//! under `target/` with the machine's `initdb` and `pg_ctl`.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{Result, run};

/// The server URL (no database) that tasks use.
fn server_url() -> String {
    if let Ok(url) = std::env::var("TESSERA_TEST_PG_URL") {
        return url;
    }
    let database = std::env::var("TESSERA_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/tessera".into());
    match database.rsplit_once('/') {
        Some((server, _)) if server.contains("://") && !server.ends_with('/') => server.to_owned(),
        _ => database,
    }
}

/// `host:port` of a `postgres://user@host:port` URL.
pub(crate) fn host_port(url: &str) -> (String, u16) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host_port.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().unwrap_or(5432)),
        None => (host_port.to_owned(), 5432),
    }
}

fn answers(host: &str, port: u16) -> bool {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok())
}

/// The directory holding `initdb` and `pg_ctl`: PATH, else the newest Debian install.
fn pg_bin() -> Result<PathBuf> {
    if Command::new("pg_ctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let out = Command::new("sh")
            .args(["-c", "command -v pg_ctl"])
            .output()
            .map_err(|e| e.to_string())?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if let Some(dir) = path.parent() {
            return Ok(dir.to_owned());
        }
    }
    newest_debian_bin()
}

/// The newest Debian install's programs (`/usr/lib/postgresql/<n>/bin`).
fn newest_debian_bin() -> Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| {
            "PostgreSQL is not running and no initdb was found (install PostgreSQL)".to_string()
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no initdb under /usr/lib/postgresql".into())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A command for a PostgreSQL tool, run as `postgres` when we are root
/// (initdb refuses to run as root).
fn pg_command(bin: &Path, tool: &str, as_postgres: bool) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    }
}

/// A new cluster in `data`: trust authentication, UTF-8, no fsync.
fn initdb(bin: &Path, as_postgres: bool, data: &Path) -> Result {
    run(pg_command(bin, "initdb", as_postgres)
        .arg("-D")
        .arg(data)
        .args([
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        ]))
}

/// The workspace's root folder.
pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

/// Makes sure PostgreSQL answers at the configured address; answers its server URL.
pub fn ensure() -> Result<String> {
    let url = server_url();
    let (host, port) = host_port(&url);
    if answers(&host, port) {
        return Ok(url);
    }
    if !matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1") {
        return Err(format!("PostgreSQL at {host}:{port} does not answer"));
    }
    eprintln!(
        "xtask: nothing answers at {host}:{port}; starting a throwaway cluster under target/"
    );
    let bin = pg_bin()?;
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    let base = target.join("tessera-pg");
    let data = base.join("data");
    let as_postgres = is_root();
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    if as_postgres {
        run(Command::new("chown").args(["-R", "postgres"]).arg(&base))?;
        // The cluster lives under target/; postgres must be able to reach it.
        let mut dir = base.parent().map(Path::to_owned);
        while let Some(d) = dir {
            let _ = Command::new("chmod").arg("o+x").arg(&d).status();
            dir = d.parent().map(Path::to_owned);
        }
    }
    if !data.join("PG_VERSION").exists() {
        initdb(&bin, as_postgres, &data)?;
    }
    let options = format!(
        "-p {port} -c listen_addresses={host} -k {} -c fsync=off -c max_connections=300",
        base.display()
    );
    run(pg_command(&bin, "pg_ctl", as_postgres)
        .arg("-D")
        .arg(&data)
        .args(["-l"])
        .arg(base.join("postgres.log"))
        .args(["-o", &options, "-w", "start"]))?;
    if answers(&host, port) {
        Ok(url)
    } else {
        Err(format!(
            "the throwaway cluster did not come up; see {}",
            base.join("postgres.log").display()
        ))
    }
}

/// A primary and a streaming replica of it (`pg_basebackup`), each a
/// throwaway cluster on a free port under the system's temporary folder,
/// with `pg_stat_statements` loaded; both stopped and removed when dropped.
pub struct Replicated {
    bin: PathBuf,
    as_postgres: bool,
    base: PathBuf,
    /// `postgres://postgres@127.0.0.1:<port>` of the primary.
    pub primary: String,
    /// The same of the replica.
    pub replica: String,
}

impl Replicated {
    /// Creates and starts both.
    pub fn start() -> Result<Self> {
        // `pg_ctl` may be on PATH without `pg_basebackup` beside it (a
        // wrapper): then the newest Debian install's programs.
        let bin = match pg_bin()? {
            bin if bin.join("pg_basebackup").exists() => bin,
            _ => newest_debian_bin()?,
        };
        let as_postgres = is_root();
        let base = std::env::temp_dir().join(format!("tessera-replicated-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
        if as_postgres {
            run(Command::new("chown").args(["-R", "postgres"]).arg(&base))?;
        }
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| e.to_string())
        };
        let (primary, replica) = (free()?, free()?);
        initdb(&bin, as_postgres, &base.join("primary"))?;
        let pair = Self {
            bin,
            as_postgres,
            base,
            primary: format!("postgres://postgres@127.0.0.1:{primary}"),
            replica: format!("postgres://postgres@127.0.0.1:{replica}"),
        };
        pair.start_one("primary", primary)?;
        run(pg_command(&pair.bin, "pg_basebackup", as_postgres)
            .args(["-h", "127.0.0.1", "-p", &primary.to_string()])
            .args(["-U", "postgres", "-R", "-X", "stream", "--no-sync", "-D"])
            .arg(pair.base.join("replica")))?;
        pair.start_one("replica", replica)?;
        Ok(pair)
    }

    fn start_one(&self, name: &str, port: u16) -> Result {
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=300 \
             -c shared_preload_libraries=pg_stat_statements",
            self.base.display()
        );
        run(pg_command(&self.bin, "pg_ctl", self.as_postgres)
            .arg("-D")
            .arg(self.base.join(name))
            .arg("-l")
            .arg(self.base.join(format!("{name}.log")))
            .args(["-o", &options, "-w", "start"]))
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        for name in ["replica", "primary"] {
            let _ = pg_command(&self.bin, "pg_ctl", self.as_postgres)
                .args(["-m", "immediate", "stop", "-D"])
                .arg(self.base.join(name))
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}
