//! `cargo xtask bench console`: the admin console's weight, first load and
//! repeat visit. For each page: the bytes of its HTML, scripts and style
//! sheet as served (no compression); in headless Chromium (driven over
//! WebDriver by chromedriver) the time from navigation to the load event and
//! until the last of the page's API reads has answered, the median of
//! several loads with the browser's cache off (a first visit); and the bytes
//! a repeat visit transfers with the cache on (the assets, kept under their
//! version, come from it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{expose, free_port, fresh_server, json_string, median, post, request};
use crate::{Result, ensure_tool};

/// Loads of each page; the median is reported.
const LOADS: usize = 7;

/// The pages measured, with a table for the rows page.
const PAGES: [&str; 14] = [
    "/admin/",
    "/admin/tables",
    "/admin/rows/app/items",
    "/admin/people",
    "/admin/grants",
    "/admin/access",
    "/admin/settings",
    "/admin/audit",
    "/admin/workflows",
    "/admin/dataviews",
    "/admin/sql",
    "/admin/snapshot",
    "/admin/help/",
    "/admin/help/workflows",
];

/// Chromedriver, ended with every process of its group (the Chromium it
/// started and its helpers) when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// One WebDriver command; answers the body. Chromedriver keeps the
/// connection open after its answer, so the body is read by its length.
fn command(port: u16, method: &str, path: &str, body: &str) -> Result<String> {
    let failed = |e: std::io::Error| format!("chromedriver {method} {path}: {e}");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(failed)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(failed)?;
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).map_err(failed)?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).map_err(failed)?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(failed)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer).map_err(failed)?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    if !status.contains(" 200 ") {
        return Err(format!(
            "chromedriver {method} {path}: {} {answer}",
            status.trim()
        ));
    }
    Ok(answer)
}

/// Runs `script` in the page; answers its result as text (a string result
/// keeps its quotes off).
fn execute(port: u16, session: &str, script: &str) -> Result<String> {
    let body = format!("{{\"script\":{},\"args\":[]}}", quoted(script));
    let answer = command(
        port,
        "POST",
        &format!("/session/{session}/execute/sync"),
        &body,
    )?;
    let value = answer
        .split_once("\"value\":")
        .map(|(_, v)| v.trim_end_matches('}').trim())
        .unwrap_or_default();
    Ok(value.trim_matches('"').to_owned())
}

fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The bytes `path` and the scripts, style sheet and images it links
/// weigh as served, and all of them compressed with gzip (as a proxy
/// compressing them would send).
fn weight(port: u16, path: &str) -> Result<(usize, usize, usize)> {
    let (status, html) = request(port, "GET", path, None, None)?;
    if status != 200 {
        return Err(format!("GET {path}: {status}"));
    }
    let mut assets = 0;
    let mut compressed = gzipped(html.as_bytes())?;
    for piece in html.split(['"', '\'']) {
        if piece.starts_with("/admin/assets/")
            && (piece.ends_with(".js") || piece.ends_with(".css") || piece.ends_with(".svg"))
        {
            let body = request(port, "GET", piece, None, None)?.1;
            assets += body.len();
            compressed += gzipped(body.as_bytes())?;
        }
    }
    Ok((html.len(), assets, compressed))
}

/// The length of `bytes` compressed by `gzip -9`.
fn gzipped(bytes: &[u8]) -> Result<usize> {
    let mut gzip = Command::new("gzip")
        .arg("-9c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("gzip: {e}"))?;
    gzip.stdin
        .take()
        .ok_or("gzip: no stdin")?
        .write_all(bytes)
        .map_err(|e| format!("gzip: {e}"))?;
    let out = gzip.wait_with_output().map_err(|e| format!("gzip: {e}"))?;
    Ok(out.stdout.len())
}

/// The console's weight and first load, page by page.
pub fn console() -> Result {
    ensure_tool("chromedriver", &["chromium", "chromium-driver"])?;
    let (_server, port, _, admin) = fresh_server("tessera_bench_console")?;
    let table = r#"{"name":"items","columns":[{"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},{"name":"label","dataType":"text"}]}"#;
    let created = post(port, "/admin/api/schema/app/tables", &admin, table)?;
    let resource = json_string(&created, "resourceId").ok_or("no resource id")?;
    expose(port, &admin, &resource, r#"["GET","POST"]"#)?;
    let driver_port = free_port()?;
    let _driver = Driver(
        Command::new("chromedriver")
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("chromedriver: {e}"))?,
    );
    let capabilities = r#"{"capabilities":{"alwaysMatch":{"goog:chromeOptions":{"binary":"/usr/bin/chromium","args":["--headless","--no-sandbox","--disable-gpu","--disable-dev-shm-usage","--no-first-run","--window-size=1280,900"]}}}}"#;
    let mut created = Err("chromedriver did not answer".to_owned());
    for _ in 0..50 {
        created = command(driver_port, "POST", "/session", capabilities);
        if created.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let created = created?;
    let session = json_string(&created, "sessionId").ok_or("no WebDriver session")?;
    let go = |path: &str| {
        let url = format!("{{\"url\":\"http://127.0.0.1:{port}{path}\"}}");
        command(
            driver_port,
            "POST",
            &format!("/session/{session}/url"),
            &url,
        )
    };
    // The browser's cache, switched through the DevTools protocol.
    let cache = |disabled: bool| {
        command(
            driver_port,
            "POST",
            &format!("/session/{session}/goog/cdp/execute"),
            &format!(
                "{{\"cmd\":\"Network.setCacheDisabled\",\"params\":{{\"cacheDisabled\":{disabled}}}}}"
            ),
        )
    };
    command(
        driver_port,
        "POST",
        &format!("/session/{session}/goog/cdp/execute"),
        r#"{"cmd":"Network.enable","params":{}}"#,
    )?;
    go("/admin/auth/sign-in")?;
    execute(
        driver_port,
        &session,
        &format!("sessionStorage.setItem('tessera.session', '{admin}'); return 1;"),
    )?;
    println!("\n## Console: weight and first load (median of {LOADS}, loopback, release build)\n");
    println!(
        "| page | HTML bytes | scripts, CSS and icon bytes | all, gzip bytes | load event ms | last API answer ms | repeat visit, bytes transferred |"
    );
    println!("|---|---|---|---|---|---|---|");
    for page in PAGES {
        let (html, assets, compressed) = weight(port, page)?;
        let mut loaded = Vec::new();
        let mut answered = Vec::new();
        cache(true)?;
        for _ in 0..LOADS {
            go(page)?;
            // The page's reads start after the load event; give them time to end.
            std::thread::sleep(Duration::from_millis(600));
            let timings = execute(
                driver_port,
                &session,
                "const nav = performance.getEntriesByType('navigation')[0];
                 const reads = performance.getEntriesByType('resource').filter((r) => r.initiatorType === 'fetch');
                 const last = Math.max(nav.loadEventEnd, ...reads.map((r) => r.responseEnd));
                 return nav.loadEventEnd.toFixed(1) + ' ' + last.toFixed(1);",
            )?;
            let mut numbers = timings
                .split(' ')
                .map(|n| n.parse::<f64>().unwrap_or(f64::NAN));
            loaded.push(numbers.next().unwrap_or(f64::NAN));
            answered.push(numbers.next().unwrap_or(f64::NAN));
        }
        cache(false)?;
        go(page)?;
        go(page)?;
        std::thread::sleep(Duration::from_millis(600));
        let repeat = execute(
            driver_port,
            &session,
            "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                .reduce((sum, e) => sum + e.transferSize, 0);",
        )?;
        println!(
            "| {page} | {html} | {assets} | {compressed} | {:.1} | {:.1} | {repeat} |",
            median(&mut loaded),
            median(&mut answered)
        );
    }
    let _ = command(driver_port, "DELETE", &format!("/session/{session}"), "");
    Ok(())
}
