//! `cargo xtask bench realtime`: 1,000 subscribers of one table on one
//! instance while 200 rows a second are written through the Data API: how
//! long a change takes from its write to each subscriber, whether every
//! subscriber got every change, and the server's memory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{expose, fresh_server, json_string, member_token, memory_mb, post, role_granted};
use crate::Result;

const SUBSCRIBERS: usize = 1000;
const WRITES_PER_SECOND: u64 = 200;
const SECONDS: u64 = 20;
const WRITERS: u64 = 4;

/// CPU seconds (user and system) process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces): utime is the
    // 14th field of the line, stime the 15th, in clock ticks (100 a second).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Microseconds since the epoch.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Opens one subscriber's stream and reads its headers.
fn subscribe(port: u16, token: &str) -> Result<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    // A thousand subscribers join one after the other.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "GET /api/realtime?subscribe=bench.changes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the stream closed before its headers".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    if !buffer.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "subscribing failed: {}",
            String::from_utf8_lossy(&buffer)
        ));
    }
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .map_err(|e| e.to_string())?;
    Ok(stream)
}

/// Answers the latency of every change read from `stream` (microseconds)
/// until `done`.
fn follow(mut stream: TcpStream, done: &AtomicBool) -> Result<Vec<u64>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut latencies =
        Vec::with_capacity(usize::try_from(WRITES_PER_SECOND * SECONDS).unwrap_or(0));
    while !done.load(Ordering::Relaxed) {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let arrived = now_us();
        buffer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buffer).into_owned();
        let mut consumed = 0;
        while let Some(end) = text[consumed..].find("\n\n") {
            let frame = &text[consumed..consumed + end];
            if let Some(sent) = json_string(frame, "note").and_then(|note| note.parse::<u64>().ok())
            {
                latencies.push(arrived.saturating_sub(sent));
            }
            consumed += end + 2;
        }
        buffer.drain(..consumed);
    }
    Ok(latencies)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Runs the benchmark and prints its figures.
pub fn realtime() -> Result {
    let (server, port, _database, admin) = fresh_server("tessera_bench_realtime")?;
    let table = post(
        port,
        "/admin/api/schema/bench/tables",
        &admin,
        r#"{"name":"changes","columns":[{"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},{"name":"note","dataType":"text","nullable":false}]}"#,
    )?;
    let resource = json_string(&table, "resourceId").ok_or(format!("no resource: {table}"))?;
    expose(port, &admin, &resource, r#"["GET","POST"]"#)?;
    let role = role_granted(port, &admin, "Followers", &resource, &["read"], None)?;
    let (_, token) = member_token(port, &admin, "follower@example.com", &role)?;
    // Every subscriber is the same user here.
    super::settings(
        port,
        &admin,
        &format!(
            r#"{{"realtime.max_subscribers_per_user":{}}}"#,
            SUBSCRIBERS + 10
        ),
    )?;
    let pid = server.0.id();
    // The sign-ins' hashing threads give their memory back after 2 s idle.
    std::thread::sleep(Duration::from_secs(3));
    let idle_mb = memory_mb(pid, "VmRSS:");

    let ready = Arc::new(Barrier::new(SUBSCRIBERS + 1));
    let done = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::with_capacity(SUBSCRIBERS);
    for _ in 0..SUBSCRIBERS {
        let (ready, done, failed, token) =
            (ready.clone(), done.clone(), failed.clone(), token.clone());
        let reader = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let stream = subscribe(port, &token);
                ready.wait();
                stream
                    .and_then(|stream| follow(stream, &done))
                    .unwrap_or_else(|error| {
                        if failed.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("xtask: a subscriber failed: {error}");
                        }
                        Vec::new()
                    })
            })
            .map_err(|e| e.to_string())?;
        readers.push(reader);
    }
    ready.wait();
    let subscribed_mb = memory_mb(pid, "VmRSS:");

    let started = Instant::now();
    let cpu_before = cpu_seconds(pid);
    let writes = WRITES_PER_SECOND * SECONDS;
    // Writers in parallel, each on its own schedule, so that a slow answer
    // does not lower the offered rate.
    let mut writers = Vec::with_capacity(WRITERS as usize);
    for w in 0..WRITERS {
        let admin = admin.clone();
        writers.push(std::thread::spawn(move || -> Result {
            for i in (w..writes).step_by(WRITERS as usize) {
                let due = started + Duration::from_micros(i * 1_000_000 / WRITES_PER_SECOND);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                post(
                    port,
                    "/api/data/bench/changes",
                    &admin,
                    &format!(r#"{{"note":"{}"}}"#, now_us()),
                )?;
            }
            Ok(())
        }));
    }
    let mut peak_mb = subscribed_mb;
    while writers.iter().any(|w| !w.is_finished()) {
        peak_mb = peak_mb.max(memory_mb(pid, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(500));
    }
    for writer in writers {
        writer.join().map_err(|_| "a writer panicked")??;
    }
    let wrote_in = started.elapsed();
    let server_cpu = cpu_seconds(pid) - cpu_before;
    std::thread::sleep(Duration::from_secs(3));
    peak_mb = peak_mb.max(memory_mb(pid, "VmRSS:"));
    done.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let mut complete = 0;
    for reader in readers {
        let got = reader.join().map_err(|_| "a subscriber panicked")?;
        if got.len() as u64 == writes {
            complete += 1;
        }
        latencies.extend(got);
    }
    latencies.sort_unstable();
    let failures = failed.load(Ordering::Relaxed);
    println!(
        "\nrealtime: {SUBSCRIBERS} subscribers of one table (one shared view), {writes} writes at {WRITES_PER_SECOND}/s through the Data API ({:.1} s), release build, {} cores",
        wrote_in.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "delivered {} of {} events; {complete} subscribers got every change; {failures} failed to subscribe",
        latencies.len(),
        writes * SUBSCRIBERS as u64
    );
    println!(
        "latency from the write's request to the event read: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 < 100 ms)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    println!(
        "server RSS: idle {idle_mb:.1} MB, {SUBSCRIBERS} subscribed {subscribed_mb:.1} MB, peak {peak_mb:.1} MB (target < 100 MB); server CPU {server_cpu:.1} s over the {:.1} s of writes",
        wrote_in.as_secs_f64()
    );
    if failures > 0 || complete < SUBSCRIBERS {
        return Err(format!(
            "{failures} subscribers failed, {} missed changes",
            SUBSCRIBERS - complete
        ));
    }
    Ok(())
}
