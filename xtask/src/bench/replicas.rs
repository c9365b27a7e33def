//! `cargo xtask bench replicas`: the peer workload's list route on an
//! instance with one streaming replica against an instance on the primary
//! alone, same database, same run, alternating. On two shared cores the
//! replica cannot add capacity (it shares the CPU), so what is reported is
//! what a replica is for (issue 58): the primary's own work per read
//! (`pg_stat_statements` total time over the reads; target: at most 20%
//! of a read's without replicas) and the caller's p50 at one connection
//! (target: within 15% of the primary-only instance's).

use std::path::Path;

use super::{
    ADMIN_EMAIL, ADMIN_PASSWORD, DATA_DURATION, Measured, PEER_PATH, free_port, login, millis,
    peer_token, psql_value, request, rps, start_server, start_server_with, wrk, wrk_with,
};
use crate::{Result, pg};

const DATABASE: &str = "tessera_bench_replicas";
/// Alternating rounds of the two instances.
const ROUNDS: usize = 3;

/// Runs the benchmark and prints its table.
pub fn replicas() -> Result {
    let pair = pg::Replicated::start()?;
    let database = format!("{}/{DATABASE}", pair.primary);
    let replica = format!("{}/{DATABASE}", pair.replica);
    let (_alone, alone) = start_server(&database)?;
    let admin = login(alone, ADMIN_EMAIL, ADMIN_PASSWORD)?;
    let token = peer_token(&database, alone, &admin)?;
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let (_replicated, replicated) = start_server_with(
        &database,
        &[
            ("TESSERA_DATABASE_READ_URLS", Path::new(&replica)),
            ("TESSERA_METRICS_BIND", Path::new(&metrics)),
        ],
    )?;
    psql_value(
        &database,
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
    )?;
    // The primary's statement time in this database since the last call.
    let primary_ms = || -> Result<f64> {
        let total = psql_value(
            &database,
            &format!(
                "SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements \
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{DATABASE}')"
            ),
        )?;
        psql_value(&database, "SELECT pg_stat_statements_reset()")?;
        total
            .parse()
            .map_err(|e| format!("pg_stat_statements: {e}"))
    };
    let seconds: f64 = DATA_DURATION
        .trim_end_matches('s')
        .parse()
        .map_err(|e| format!("DATA_DURATION: {e}"))?;
    let commits = |url: &str| -> Result<f64> {
        psql_value(
            url,
            &format!("SELECT xact_commit FROM pg_stat_database WHERE datname = '{DATABASE}'"),
        )?
        .parse()
        .map_err(|e| format!("pg_stat_database: {e}"))
    };
    println!(
        "\nread replicas: {PEER_PATH} (the peer workload), one streaming replica on this machine"
    );
    println!(
        "wrk -t2 -c16 -d{DATA_DURATION}, {ROUNDS} alternating rounds after a 3 s warm-up each"
    );
    wrk(alone, PEER_PATH, &token, "3s", None)?;
    wrk(replicated, PEER_PATH, &token, "3s", None)?;
    println!(
        "{:<34} {:>10} {:>9} {:>9} {:>8}",
        "run", "req/s", "p50", "p99", "non-2xx"
    );
    let (mut alone_runs, mut replicated_runs) = (Vec::new(), Vec::new());
    let (mut on_primary, mut on_replica) = (0.0, 0.0);
    // The primary's statement time and the reads served, per instance.
    let (mut alone_work, mut replicated_work) = ((0.0, 0.0), (0.0, 0.0));
    for round in 1..=ROUNDS {
        primary_ms()?;
        let measured = wrk(alone, PEER_PATH, &token, DATA_DURATION, None)?;
        alone_work.0 += primary_ms()?;
        alone_work.1 += rps(&measured) * seconds;
        print_run(&format!("primary alone, round {round}"), &measured);
        alone_runs.push(measured);
        let before = (commits(&database)?, commits(&replica)?);
        let measured = wrk(replicated, PEER_PATH, &token, DATA_DURATION, None)?;
        replicated_work.0 += primary_ms()?;
        replicated_work.1 += rps(&measured) * seconds;
        // Statistics reach pg_stat_database within a second of each commit.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        on_primary += commits(&database)? - before.0;
        on_replica += commits(&replica)? - before.1;
        print_run(&format!("with the replica, round {round}"), &measured);
        replicated_runs.push(measured);
    }
    let per_read = |(ms, reads): (f64, f64)| ms / reads * 1000.0;
    println!(
        "the primary's statement time per read: {:.1} us alone, {:.1} us with the replica ({:.1}%; target at most 20%)",
        per_read(alone_work),
        per_read(replicated_work),
        per_read(replicated_work) / per_read(alone_work) * 100.0
    );
    let median_p50 = |runs: &[Measured]| {
        let mut p50: Vec<f64> = runs.iter().map(|m| millis(&m.1)).collect();
        p50.sort_by(f64::total_cmp);
        p50[p50.len() / 2]
    };
    let mean_rps = |runs: &[Measured]| runs.iter().map(rps).sum::<f64>() / runs.len() as f64;
    let (alone_p50, replicated_p50) = (median_p50(&alone_runs), median_p50(&replicated_runs));
    println!(
        "primary alone: {:.0} req/s, p50 {alone_p50:.2} ms; with the replica: {:.0} req/s, p50 {replicated_p50:.2} ms ({:+.1}%)",
        mean_rps(&alone_runs),
        mean_rps(&replicated_runs),
        (replicated_p50 / alone_p50 - 1.0) * 100.0
    );
    // One connection: no queue, so p50 is the added round trip itself.
    let single = |port: u16| wrk_with(port, PEER_PATH, &token, "10s", None, "1", "1");
    let (alone_one, replicated_one) = (single(alone)?, single(replicated)?);
    print_run("primary alone, one connection", &alone_one);
    print_run("with the replica, one connection", &replicated_one);
    println!(
        "one connection: p50 {:.2} ms alone, {:.2} ms with the replica ({:+.1}%; target within 15%)",
        millis(&alone_one.1),
        millis(&replicated_one.1),
        (millis(&replicated_one.1) / millis(&alone_one.1) - 1.0) * 100.0
    );
    let total = on_primary + on_replica;
    println!(
        "statements while the instance with the replica ran: primary {on_primary:.0} ({:.0}%), replica {on_replica:.0} ({:.0}%)",
        on_primary / total * 100.0,
        on_replica / total * 100.0
    );
    let (_, scraped) = request(
        metrics
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or(0),
        "GET",
        "/metrics",
        None,
        None,
    )?;
    for line in scraped.lines().filter(|l| {
        l.starts_with("tessera_database_reads_total") || l.starts_with("tessera_replica_")
    }) {
        println!("  {line}");
    }
    Ok(())
}

fn print_run(name: &str, (rps, p50, p99, non_2xx): &Measured) {
    println!("{name:<34} {rps:>10} {p50:>9} {p99:>9} {non_2xx:>8}");
}
