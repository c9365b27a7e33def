//! `cargo xtask bench scale`: the list route and get-by-key as the table
//! grows (100 thousand, 1 million, 10 million rows) and as the catalog grows
//! (1,000 resources, 10,000 grants across 100 roles, the caller in 10 of
//! them). The per-request cost should stay flat; `count=exact` and deep
//! `offset` paging are measured beside keyset paging to show their curve.

use super::{
    Result, expose, fresh_server, json_string, member_token, memory_mb, patch, post, psql, request,
    role_granted, wrk,
};

/// Table sizes measured, in rows.
const SIZES: [u64; 3] = [100_000, 1_000_000, 10_000_000];
/// Distinct `grp` values: each holds one row in this many.
const GROUPS: u64 = 1_000;
/// How long each point runs.
const POINT: &str = "10s";
/// Resources, roles and grants of the large catalog.
const RESOURCES: usize = 1_000;
const ROLES: usize = 100;
const GRANTS_PER_ROLE: usize = 100;
/// Catalog roles the caller is a member of.
const CALLER_ROLES: usize = 10;

/// One measured point: what was measured, at which size, with which catalog.
struct Point {
    rows: u64,
    catalog: &'static str,
}

pub(super) fn scale() -> Result {
    let (server, port, database, admin) = fresh_server("tessera_bench_scale")?;
    let table = post(
        port,
        "/admin/api/schema/bench/tables",
        &admin,
        r#"{"name":"items","columns":[
        {"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},
        {"name":"grp","dataType":"integer","nullable":false},
        {"name":"title","dataType":"text","nullable":false}]}"#,
    )?;
    let resource = json_string(&table, "resourceId").ok_or(format!("no resource: {table}"))?;
    expose(port, &admin, &resource, r#"["GET"]"#)?;
    let role = role_granted(port, &admin, "Scale", &resource, &["read"], None)?;
    let (user, caller) = member_token(port, &admin, "scale@example.com", &role)?;
    psql(
        &database,
        "CREATE INDEX items_grp_idx ON bench.items (grp, id)",
    )?;

    println!(
        "\nwrk -t2 -c16 -d{POINT} per scenario, release build; RSS of the server after each point"
    );
    println!(
        "{:<11} {:<22} {:<44} {:>9} {:>9} {:>9} {:>8}",
        "rows", "catalog", "scenario", "req/s", "p50", "p99", "RSS MB"
    );
    let pid = server.0.id();
    let mut loaded = 0;
    for rows in SIZES {
        psql(
            &database,
            &format!(
                "INSERT INTO bench.items (grp, title) SELECT i % {GROUPS}, 'item ' || i \
                 FROM generate_series({}, {rows}) AS i",
                loaded + 1
            ),
        )?;
        psql(&database, "VACUUM ANALYZE bench.items")?;
        loaded = rows;
        measure(
            &Point {
                rows,
                catalog: "1 table, 1 grant",
            },
            port,
            &caller,
            pid,
        )?;
    }

    large_catalog(port, &admin, &database, &user, &role)?;
    measure(
        &Point {
            rows: loaded,
            catalog: "1,000 tables, 10k grants",
        },
        port,
        &caller,
        pid,
    )?;
    Ok(())
}

/// Measures the scenarios at one point and prints a line for each.
fn measure(point: &Point, port: u16, caller: &str, pid: u32) -> Result {
    let group = 7;
    let per_group = point.rows / GROUPS;
    // The last rows of the group: deep offset paging, and the keyset way there.
    let deep = per_group.saturating_sub(100);
    let last_ids = (deep * GROUPS) + group;
    let filter = |extra: &str| encode(&format!(r#"{{"grp":{{"eq":{group}}}{extra}}}"#));
    let list = format!(
        "/api/data/bench/items?filter={}&sort=id&limit=100",
        filter("")
    );
    let scenarios = [
        ("list, indexed filter, 100 rows".to_owned(), list.clone()),
        (
            "get by key".to_owned(),
            format!("/api/data/bench/items/{}", point.rows / 2),
        ),
        (
            "list + count=exact".to_owned(),
            format!("{list}&count=exact"),
        ),
        (
            format!("list, offset {deep}"),
            format!("{list}&offset={deep}"),
        ),
        (
            "list, keyset (id > last seen) to the same rows".to_owned(),
            format!(
                "/api/data/bench/items?filter={}&sort=id&limit=100",
                filter(&format!(r#","id":{{"gt":{last_ids}}}"#))
            ),
        ),
    ];
    for (name, path) in scenarios {
        let (status, body) = request(port, "GET", &path, Some(caller), None)?;
        if status != 200 {
            return Err(format!("{name}: {status} {body}"));
        }
        let (rps, p50, p99, non_2xx) = wrk(port, &path, caller, POINT, None)?;
        if non_2xx != "0" {
            return Err(format!("{name}: {non_2xx} answers were not 2xx"));
        }
        println!(
            "{:<11} {:<22} {:<44} {rps:>9} {p50:>9} {p99:>9} {:>8.1}",
            point.rows,
            point.catalog,
            name,
            memory_mb(pid, "VmRSS")
        );
    }
    Ok(())
}

/// Registers 999 more tables, creates 100 roles with 100 grants each, and
/// puts the caller in 10 of them.
fn large_catalog(port: u16, admin: &str, database: &str, user: &str, role: &str) -> Result {
    psql(
        database,
        &format!(
            "DO $$ BEGIN FOR i IN 1..{} LOOP \
             EXECUTE format('CREATE TABLE bench.t%s (id bigint PRIMARY KEY, owner uuid)', i); \
             END LOOP; END $$",
            RESOURCES - 1
        ),
    )?;
    let mut resources = Vec::with_capacity(RESOURCES);
    for i in 1..RESOURCES {
        let registered = post(
            port,
            "/admin/api/resources",
            admin,
            &format!(r#"{{"schema":"bench","table":"t{i}"}}"#),
        )?;
        resources.push(json_string(&registered, "id").ok_or(format!("no id: {registered}"))?);
    }
    let mut roles = vec![role.to_owned()];
    for r in 0..ROLES {
        let created = post(
            port,
            "/admin/api/roles",
            admin,
            &format!(r#"{{"name":"Catalog {r}","apiAccess":true}}"#),
        )?;
        let id = json_string(&created, "id").ok_or("no role id")?;
        for g in 0..GRANTS_PER_ROLE {
            let resource = &resources[(r * GRANTS_PER_ROLE + g) % resources.len()];
            let action = ["read", "create", "update", "delete"][g % 4];
            post(
                port,
                "/admin/api/grants",
                admin,
                &format!(
                    r#"{{"roleId":"{id}","resourceId":"{resource}","action":"{action}","filter":{{"owner":{{"eq":"$USER.id"}}}}}}"#
                ),
            )?;
        }
        if r < CALLER_ROLES {
            roles.push(id);
        }
    }
    let role_ids = roles
        .iter()
        .map(|id| format!("\"{id}\""))
        .collect::<Vec<_>>()
        .join(",");
    let path = format!("/admin/api/users/{user}");
    patch(
        port,
        &path,
        admin,
        &format!(r#"{{"roleIds":[{role_ids}]}}"#),
    )
    .map(drop)
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
