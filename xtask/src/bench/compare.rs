//! `cargo xtask bench compare`: two builds measured in one run. The build
//! `TESSERA_BENCH_BEFORE` names and the one `TESSERA_BENCH_SERVER` names
//! (else the workspace's) each serve a database of their own, seeded alike;
//! every scenario of the Data API benchmark (list, key read, POST, the
//! peer workload in variants A and B) and `/api/auth/me` with a session then runs in short wrk bursts,
//! alternating the two servers and which goes first, so a drift of the
//! host falls on both sides. Medians of each side and of the per-pair
//! ratios are printed. `TESSERA_BENCH_ONLY` (a part of a scenario's name)
//! and `TESSERA_BENCH_PAIRS` narrow or lengthen a run.

use std::path::Path;

use super::{
    CONNECTIONS, PEER_PATH, Result, RowsFixture, Server, THREADS, fresh_binary, insert_script,
    median, peer_token, psql, rps, seed_rows, server_binary, wrk,
};

/// Bursts per side and scenario (`TESSERA_BENCH_PAIRS` to change it).
const PAIRS: usize = 5;
/// The length of one burst.
const BURST: &str = "8s";

/// One side of the comparison: a server and what its scenarios need.
struct Side {
    _server: Server,
    port: u16,
    database: String,
    rows: RowsFixture,
    peer_token: String,
    /// The administrator's session.
    admin: String,
    /// The POST's wrk script.
    insert: std::path::PathBuf,
}

/// A request the scenarios send: path, bearer, wrk script.
type Shot<'a> = (String, &'a str, Option<&'a Path>);

/// A scenario: its name, and the request it sends to a side.
type Scenario = (&'static str, fn(&Side) -> Shot<'_>);

/// Starts `binary` on a fresh database `name` with the bench fixtures.
fn side(binary: &str, name: &str, dir: &Path) -> Result<Side> {
    let (server, port, database, admin) = fresh_binary(binary, name, &[])?;
    let rows = seed_rows(port, &database, &admin)?;
    let peer_token = peer_token(&database, port, &admin)?;
    let insert = dir.join(format!("{name}.lua"));
    insert_script(&insert, &rows.user)?;
    Ok(Side {
        _server: server,
        port,
        database,
        rows,
        peer_token,
        admin,
        insert,
    })
}

/// Runs the comparison.
pub fn compare() -> Result {
    let before = std::env::var("TESSERA_BENCH_BEFORE")
        .ok()
        .filter(|b| !b.is_empty())
        .ok_or("set TESSERA_BENCH_BEFORE to the binary of the build to compare against")?;
    let after = server_binary()?;
    let pairs = std::env::var("TESSERA_BENCH_PAIRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PAIRS);
    // `TESSERA_BENCH_ONLY=post` runs the scenarios whose name holds it.
    let only = std::env::var("TESSERA_BENCH_ONLY")
        .unwrap_or_default()
        .to_lowercase();
    let dir = std::env::temp_dir().join(format!("tessera-bench-cmp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sides = [
        side(&before, "tessera_bench_before", &dir)?,
        side(&after, "tessera_bench_after", &dir)?,
    ];
    println!("before: {before}\nafter:  {after}");
    println!(
        "wrk -t{THREADS} -c{CONNECTIONS} -d{BURST}, {pairs} bursts a side per scenario, alternating (and alternating which side goes first)\n"
    );
    println!(
        "{:<48} {:>12} {:>12} {:>9} {:>14}",
        "scenario", "before req/s", "after req/s", "medians", "pair ratios"
    );
    let scenarios: [Scenario; 6] = [
        ("GET 100 rows, $USER row filter, API token", |s| {
            (
                "/api/data/app/bench_rows?limit=100".into(),
                &s.rows.api_token,
                None,
            )
        }),
        ("GET one row by key, API token", |s| {
            (
                format!("/api/data/app/bench_rows/{}", s.rows.key),
                &s.rows.api_token,
                None,
            )
        }),
        ("POST one row, create grant checked", |s| {
            (
                "/api/data/app/bench_rows".into(),
                &s.rows.api_token,
                Some(&s.insert),
            )
        }),
        ("GET /api/auth/me, session", |s| {
            ("/api/auth/me".into(), &s.admin, None)
        }),
        ("peer workload, variant A", |s| {
            (PEER_PATH.into(), &s.peer_token, None)
        }),
        ("peer workload, variant B", |s| {
            (PEER_PATH.into(), &s.peer_token, None)
        }),
    ];
    for (name, shot) in scenarios {
        if !name.to_lowercase().contains(&only) {
            continue;
        }
        if name.ends_with('B') {
            for side in &sides {
                psql(
                    &side.database,
                    "CREATE INDEX IF NOT EXISTS bench_items_owner_id_id_idx ON bench_items (owner_id, id); ANALYZE bench_items",
                )?;
            }
        }
        let burst = |side: &Side, duration: &str| {
            let (path, bearer, script) = shot(side);
            wrk(side.port, &path, bearer, duration, script).map(|m| rps(&m))
        };
        for side in &sides {
            burst(side, "2s")?;
        }
        let (mut olds, mut news, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for pair in 0..pairs {
            let (old, new) = if pair % 2 == 0 {
                let old = burst(&sides[0], BURST)?;
                (old, burst(&sides[1], BURST)?)
            } else {
                let new = burst(&sides[1], BURST)?;
                (burst(&sides[0], BURST)?, new)
            };
            olds.push(old);
            news.push(new);
            ratios.push(new / old);
        }
        let (old, new) = (median(&mut olds), median(&mut news));
        println!(
            "{name:<48} {old:>12.0} {new:>12.0} {:>+8.1}% {:>+13.1}%",
            (new / old - 1.0) * 100.0,
            (median(&mut ratios) - 1.0) * 100.0
        );
        let list = |values: &[f64]| {
            values
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!("    bursts: before {}; after {}", list(&olds), list(&news));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
