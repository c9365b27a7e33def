//! `cargo xtask bench related` (also run by `bench data`): the shapes of
//! API.md 13 on the peer table (`bench_items`, 100,000 rows) and a child
//! table of 1,000,000 notes (ten per item), each against its reference in
//! the same run: embeds against the plain list and a hand-written JSON join
//! in pgbench, an aggregate against the same GROUP BY in pgbench, a batch
//! against single inserts, CSV out and in against psql's `\copy`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{
    ADMIN_PASSWORD, CONNECTIONS, DATA_DURATION, PEER_ITEMS, THREADS, expose, fresh_server,
    json_string, login, pgbench, post, print_header, print_row, psql, rps, token, wrk,
};
use crate::{Result, run};

/// The child table: ten notes per item, indexed on the foreign key.
const NOTES: &str = "CREATE TABLE bench_notes (id bigint PRIMARY KEY, \
    item_id bigint NOT NULL REFERENCES bench_items (id), body text NOT NULL, amount int NOT NULL); \
    INSERT INTO bench_notes SELECT g, 1 + (g % 100000), 'note ' || g, g % 1000 FROM generate_series(1, 1000000) AS g; \
    CREATE INDEX bench_notes_item_id_idx ON bench_notes (item_id); \
    CREATE TABLE bench_imports (id bigint PRIMARY KEY, item_id bigint NOT NULL, body text NOT NULL, amount int NOT NULL); \
    CREATE TABLE bench_imports_copy (LIKE bench_imports INCLUDING ALL); \
    ANALYZE bench_notes";

/// The to-many embed's statement, written by hand: 100 items of owner 7,
/// each with its notes as a JSON array.
const TO_MANY_SQL: &str = "SELECT coalesce(json_agg(row_to_json(x)), '[]') FROM (\
    SELECT i.id, i.owner_id, i.title, i.price, i.created_at, \
    (SELECT coalesce(json_agg(row_to_json(n)), '[]') FROM (SELECT id, item_id, body, amount FROM bench_notes \
     WHERE item_id = i.id ORDER BY id LIMIT 100) n) AS notes \
    FROM bench_items i WHERE owner_id = 7 ORDER BY id LIMIT 100) x;\n";

/// Gives each wrk thread ids of its own (its Lua state starts afresh).
const THREAD_IDS: &str = "local threads = 0\nfunction setup(thread)\n  threads = threads + 1\n  \
    thread:set(\"counter\", threads * 100000000)\nend\n";

/// The aggregate's statement, written by hand.
const GROUP_SQL: &str = "SELECT coalesce(json_agg(row_to_json(x)), '[]') FROM (\
    SELECT owner_id, count(*) AS n, sum(price) AS total FROM bench_items \
    GROUP BY owner_id ORDER BY owner_id LIMIT 100) x;\n";

pub(super) fn related() -> Result {
    let (server, port, database, admin) = fresh_server("tessera_bench_related")?;
    psql(&database, PEER_ITEMS)?;
    psql(&database, NOTES)?;
    let mut resources = Vec::new();
    for (table, methods) in [
        ("bench_items", r#"["GET"]"#),
        ("bench_notes", r#"["GET","POST"]"#),
        ("bench_imports", r#"["GET","POST"]"#),
    ] {
        let made = post(
            port,
            "/admin/api/resources",
            &admin,
            &format!(r#"{{"schema":"public","table":"{table}"}}"#),
        )?;
        let id = json_string(&made, "id").ok_or(format!("no resource: {made}"))?;
        expose(port, &admin, &id, methods)?;
        resources.push(id);
    }
    let role = post(
        port,
        "/admin/api/roles",
        &admin,
        r#"{"name":"Related","apiAccess":true}"#,
    )?;
    let role = json_string(&role, "id").ok_or("no role id")?;
    for (resource, action) in [
        (&resources[0], "read"),
        (&resources[1], "read"),
        (&resources[1], "create"),
        (&resources[2], "create"),
    ] {
        post(
            port,
            "/admin/api/grants",
            &admin,
            &format!(r#"{{"roleId":"{role}","resourceId":"{resource}","action":"{action}"}}"#),
        )?;
    }
    post(
        port,
        "/admin/api/users",
        &admin,
        &format!(
            r#"{{"email":"related@example.com","password":"{ADMIN_PASSWORD}","emailVerified":true,"roleIds":["{role}"]}}"#
        ),
    )?;
    let bearer = token(
        port,
        &login(port, "related@example.com", ADMIN_PASSWORD)?,
        "API",
    )?;
    let dir = std::env::temp_dir().join(format!("tessera-bench-related-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let write = |name: &str, text: &str| -> Result<std::path::PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        Ok(path)
    };

    let plain = "/api/data/public/bench_notes?sort=id&limit=100";
    let to_one = "/api/data/public/bench_notes?sort=id&limit=100&select=*,item:item_id(*)";
    let to_many = "/api/data/public/bench_items?filter=%7B%22owner_id%22%3A%7B%22eq%22%3A7%7D%7D&sort=id&limit=100\
        &select=*,notes:public.bench_notes!item_id(*)";
    let grouped = "/api/data/public/bench_items?aggregate=n:count(),total:sum(price)&groupBy=owner_id&limit=100";
    for path in [plain, to_one, to_many, grouped] {
        let (status, body) = super::request(port, "GET", path, Some(&bearer), None)?;
        if status != 200 || body.len() < 100 {
            return Err(format!("{path}: {status} {body}"));
        }
    }
    print_header(DATA_DURATION);
    let seconds = DATA_DURATION.trim_end_matches('s');
    let measure = |path: &str| -> Result<super::Measured> {
        wrk(port, path, &bearer, "3s", None)?;
        wrk(port, path, &bearer, DATA_DURATION, None)
    };
    let plain_list = measure(plain)?;
    let one = measure(to_one)?;
    print_row("GET 100 notes (plain list)", &plain_list);
    print_row("GET 100 notes, each with its item (to-one embed)", &one);
    println!(
        "to-one embed / plain list: {:.0}% (PostgreSQL's own ratio for the two statements bounds it)",
        rps(&one) / rps(&plain_list) * 100.0
    );
    // The route against PostgreSQL running the very statement it sends.
    let statement = super::route_statement(&database, to_one, &bearer)?;
    let embed_sql = write("to_one.sql", &format!("{statement};\n"))?;
    let reference = pgbench(&database, &embed_sql, "3")
        .and_then(|_| pgbench(&database, &embed_sql, seconds))?;
    println!(
        "pgbench -M prepared -c{CONNECTIONS} -j{THREADS}, the route's statement for that page: {reference:.0} tps; \
         to-one embed at {:.0}% (target >= 70%)",
        rps(&one) / reference * 100.0
    );
    let many = measure(to_many)?;
    print_row(
        "GET 100 items of owner 7, each with its 10 notes (to-many embed)",
        &many,
    );
    let join = pgbench(&database, &write("to_many.sql", TO_MANY_SQL)?, "3")
        .and_then(|_| pgbench(&database, &write("to_many.sql", TO_MANY_SQL)?, seconds))?;
    println!(
        "pgbench -M prepared -c{CONNECTIONS} -j{THREADS}, the JSON join by hand: {join:.0} tps; to-many embed at {:.0}% (target >= 50%)",
        rps(&many) / join * 100.0
    );
    let groups = measure(grouped)?;
    print_row(
        "GET count and sum per owner over 100,000 items (aggregate)",
        &groups,
    );
    let group_by = pgbench(&database, &write("group.sql", GROUP_SQL)?, "3")
        .and_then(|_| pgbench(&database, &write("group.sql", GROUP_SQL)?, seconds))?;
    println!(
        "pgbench, the same GROUP BY: {group_by:.0} tps; aggregate at {:.0}% (target >= 90%)",
        rps(&groups) / group_by * 100.0
    );

    // CSV out of 1,000,000 rows, RSS sampled throughout; then psql's \copy.
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let rss = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (rss, sampling, pid) = (rss.clone(), sampling.clone(), server.0.id());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                rss.fetch_max(resident_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let before = resident_kib(server.0.id());
    let exported = dir.join("notes.csv");
    let started = Instant::now();
    run(Command::new("curl")
        .args(["-sS", "--fail", "-o"])
        .arg(&exported)
        .args([
            "-H",
            "Accept: text/csv",
            "-H",
            &format!("Authorization: Bearer {bearer}"),
        ])
        .arg(url("/api/data/public/bench_notes")))?;
    let out = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    let lines = std::fs::read_to_string(&exported)
        .map_err(|e| e.to_string())?
        .lines()
        .count();
    if lines != 1_000_001 {
        return Err(format!("the export has {lines} lines"));
    }
    let started = Instant::now();
    run(Command::new("psql")
        .args(["-X", "-q", &database, "-c"])
        .arg("\\copy (SELECT id, item_id, body, amount FROM bench_notes ORDER BY id) TO STDOUT CSV HEADER")
        .stdout(Stdio::null()))?;
    let copy_out = started.elapsed();
    println!(
        "\nCSV out of 1,000,000 notes: {:.2} s; psql \\copy TO STDOUT: {:.2} s; at {:.0}% of it (target >= 50%); \
         server RSS {} MiB before, at most {} MiB during (target < 100 MB)",
        out.as_secs_f64(),
        copy_out.as_secs_f64(),
        copy_out.as_secs_f64() / out.as_secs_f64() * 100.0,
        before / 1024,
        rss.load(Ordering::Relaxed) / 1024
    );

    // CSV in of the same 1,000,000 rows, then psql's \copy FROM.
    let started = Instant::now();
    let answer = Command::new("curl")
        .args(["-sS", "-X", "POST", "--data-binary"])
        .arg(format!("@{}", exported.display()))
        .args([
            "-H",
            "Content-Type: text/csv",
            "-H",
            &format!("Authorization: Bearer {bearer}"),
        ])
        .arg(url("/api/data/public/bench_imports"))
        .output()
        .map_err(|e| e.to_string())?;
    let into = started.elapsed();
    let text = String::from_utf8_lossy(&answer.stdout);
    if !text.contains("\"inserted\":1000000") {
        return Err(format!("the import answered {text}"));
    }
    let started = Instant::now();
    copy_from(&database, &exported)?;
    let copy_in = started.elapsed();
    println!(
        "CSV in of 1,000,000 notes with a create grant: {:.2} s; psql \\copy FROM: {:.2} s; at {:.0}% of it (target >= 35%)",
        into.as_secs_f64(),
        copy_in.as_secs_f64(),
        copy_in.as_secs_f64() / into.as_secs_f64() * 100.0
    );
    // A batch of 100 inserts against 100 single inserts, in rows per second.
    let single = write(
        "single.lua",
        &format!(
            "{THREAD_IDS}wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         request = function()\n  counter = counter + 1\n  \
         return wrk.format(nil, nil, nil, '{{\"data\":{{\"id\":' .. counter .. ',\"item_id\":1,\"body\":\"b\",\"amount\":1}}}}')\nend\n"
        ),
    )?;
    let batch = write(
        "batch.lua",
        &format!(
            "{THREAD_IDS}init = function(args)\n  counter = counter + 50000000\nend\n\
         wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         request = function()\n  local ops = {{}}\n  for i = 1, 100 do\n    counter = counter + 1\n    \
         ops[i] = '{{\"method\":\"POST\",\"path\":\"/api/data/public/bench_notes\",\"body\":{{\"data\":{{\"id\":' .. counter .. ',\"item_id\":1,\"body\":\"b\",\"amount\":1}}}}}}'\n  \
         end\n  return wrk.format(nil, nil, nil, '{{\"data\":[' .. table.concat(ops, ',') .. ']}}')\nend\n"
        ),
    )?;
    let singles = wrk(
        port,
        "/api/data/public/bench_notes",
        &bearer,
        DATA_DURATION,
        Some(&single),
    )?;
    let batches = wrk(port, "/api/batch", &bearer, DATA_DURATION, Some(&batch))?;
    print_row("POST one note (rows/s = req/s)", &singles);
    print_row(
        "POST /api/batch of 100 note inserts (rows/s = 100 x req/s)",
        &batches,
    );
    println!(
        "batch: {:.0} rows/s against {:.0} rows/s one by one: {:.1}x (target >= 5x)",
        rps(&batches) * 100.0,
        rps(&singles),
        rps(&batches) * 100.0 / rps(&singles)
    );

    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `\copy bench_imports_copy FROM file CSV HEADER`.
fn copy_from(database: &str, file: &Path) -> Result {
    run(Command::new("psql")
        .args(["-X", "-q", database, "-c"])
        .arg(format!(
            "\\copy bench_imports_copy FROM '{}' CSV HEADER",
            file.display()
        )))
}

/// The resident memory of process `pid`, in KiB (0 when unreadable).
fn resident_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}
