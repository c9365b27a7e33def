//! `cargo xtask bench pooler`: the list route and POST of `bench data`
//! through Debian's PgBouncer in transaction mode (the pooler mode on)
//! against the same on a direct connection, in one run on one database;
//! pgbench running the list route's SELECT on both paths beside them (what
//! the pooler itself costs).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{
    CONNECTIONS, DATA_DURATION, Measured, RowsFixture, THREADS, free_port, fresh_server,
    insert_script, pgbench_in, print_header, print_row, seed_rows, server_binary, start_binary,
    wrk,
};
use crate::{Result, ensure_tool, pg};

/// Runs the benchmark.
pub(super) fn pooler() -> Result {
    ensure_tool("pgbouncer", &["pgbouncer"])?;
    let (_direct, direct_port, database, admin) = fresh_server("tessera_bench_pooler")?;
    let RowsFixture {
        user, api_token, ..
    } = seed_rows(direct_port, &database, &admin)?;
    let (host, port) = pg::host_port(&pg::ensure()?);
    let bouncer = PgBouncer::start(&host, port)?;
    let through = format!(
        "postgres://postgres@127.0.0.1:{}/tessera_bench_pooler",
        bouncer.port
    );
    let env = [
        ("TESSERA_DATABASE_POOLER", Path::new("transaction")),
        ("TESSERA_DATABASE_MIGRATE_URL", Path::new(database.as_str())),
    ];
    let (_pooled, pooled_port) = start_binary(&server_binary()?, &through, &env)?;

    let dir = std::env::temp_dir().join(format!("tessera-bench-pooler-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let insert = dir.join("insert.lua");
    insert_script(&insert, &user)?;
    let script = dir.join("list.sql");
    std::fs::write(&script, list_select(&user)).map_err(|e| e.to_string())?;

    let list = "/api/data/app/bench_rows?limit=100";
    let mut rows: Vec<(&str, Measured)> = Vec::new();
    for (side, port) in [("direct", direct_port), ("pooler", pooled_port)] {
        // A short warm-up of each side (connections, caches).
        wrk(port, list, &api_token, "3s", None)?;
        rows.push((side, wrk(port, list, &api_token, DATA_DURATION, None)?));
        rows.push((
            side,
            wrk(
                port,
                "/api/data/app/bench_rows",
                &api_token,
                DATA_DURATION,
                Some(&insert),
            )?,
        ));
    }
    let seconds = DATA_DURATION.trim_end_matches('s');
    let direct_tps = pgbench_extended(&database, &script, seconds)?;
    let pooled_tps = pgbench_extended(&through, &script, seconds)?;
    let _ = std::fs::remove_dir_all(&dir);

    print_header(DATA_DURATION);
    let names = ["GET 100 rows, API token", "POST one row, API token"];
    for (i, (side, measured)) in rows.iter().enumerate() {
        print_row(&format!("{} ({side})", names[i % 2]), measured);
    }
    let rate = |m: &Measured| m.0.parse::<f64>().unwrap_or(0.0);
    for (i, name) in names.iter().enumerate() {
        let (direct, pooled) = (rate(&rows[i].1), rate(&rows[i + 2].1));
        println!(
            "{name}: pooler / direct {:.0}% (target: 80% or more)",
            pooled / direct.max(1.0) * 100.0
        );
    }
    println!(
        "\npgbench -M extended -c{CONNECTIONS} -j{THREADS} -T{DATA_DURATION}, the list route's SELECT: \
         direct {direct_tps:.0} TPS, through PgBouncer {pooled_tps:.0} TPS ({:.0}%)",
        pooled_tps / direct_tps.max(1.0) * 100.0
    );
    Ok(())
}

/// The list route's statement for `user`'s rows, values written in.
fn list_select(user: &str) -> String {
    format!(
        "SELECT json_build_object('data', coalesce(json_agg(\"x\"), '[]'::json))::text AS body \
         FROM (SELECT \"r\".\"id\", \"r\".\"owner_id\", \"r\".\"title\", \"r\".\"created_at\" \
         FROM \"app\".\"bench_rows\" AS \"r\" WHERE \"r\".\"owner_id\" = CAST('{user}' AS uuid) \
         ORDER BY \"r\".\"id\" ASC LIMIT 100 OFFSET 0) AS \"x\";\n"
    )
}

/// pgbench with unnamed statements (`-M extended`: one exchange each, as
/// a transaction pooler without prepared statements allows) on `database`.
fn pgbench_extended(database: &str, script: &Path, seconds: &str) -> Result<f64> {
    pgbench_in(database, script, (seconds, CONNECTIONS), "extended")
}

/// PgBouncer in transaction mode on a free port, stopped when dropped.
struct PgBouncer {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl PgBouncer {
    fn start(host: &str, port: u16) -> Result<Self> {
        let listen = free_port()?;
        let dir = std::env::temp_dir().join(format!("tessera-bench-pgbouncer-{listen}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let users = dir.join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").map_err(|e| e.to_string())?;
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {}\npool_mode = transaction\n\
                 default_pool_size = 40\nmax_client_conn = 1000\nserver_reset_query =\n",
                users.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let mut command = Command::new("/usr/sbin/pgbouncer");
        // PgBouncer refuses to run as root.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if root {
            Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status()
                .map_err(|e| e.to_string())?;
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting pgbouncer: {e}"))?;
        let bouncer = Self {
            child,
            port: listen,
            dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", listen)).is_ok() {
                return Ok(bouncer);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("pgbouncer did not listen".into())
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
