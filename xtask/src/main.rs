//! Developer tasks: `cargo xtask <dev|test|lint|db-up|bench|openapi>`.
//!
//! Uses only the standard library so that it builds in seconds on a fresh machine.

mod bench;
mod lint;
mod pg;

use std::process::{Command, ExitCode};

/// A task failure, printed before exiting non-zero.
type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("dev") => dev(),
        Some("test") => test(),
        Some("lint") => lint::lint(),
        Some("db-up") => pg::ensure().map(|url| println!("PostgreSQL ready at {url}")),
        Some("bench") => bench::suite(args.get(1).map(String::as_str)),
        Some("openapi") => openapi(args.get(1).map_or("target/openapi", String::as_str)),
        Some("fuzz-api") => minutes(&args).and_then(fuzz_api),
        Some("soak") => minutes(&args).and_then(bench::soak),
        Some("release") => release(),
        _ => Err(
            "usage: cargo xtask <dev | test | lint | db-up | bench [auth | compare | console | data | files | peer | realtime | related | replicas | rows | scale | schema | views | webhooks | workflows] | soak --minutes N | fuzz-api --minutes N | release | openapi [dir]>".into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the release binary and prints where it is and what
/// `tessera --version` says (the version and the git revision).
fn release() -> Result {
    run(cargo().args(["build", "--release", "-p", "tessera"]))?;
    let binary = format!("{}/release/tessera", target_dir());
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("{binary}: {e}"))?;
    println!(
        "{binary}\n{}",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    Ok(())
}

/// Where cargo puts its builds.
fn target_dir() -> String {
    std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")))
}

/// Checks `deploy/tessera.service` with `systemd-analyze verify`, the
/// binary path pointed at the debug build: any complaint fails.
fn verify_unit() -> Result {
    ensure_tool("systemd-analyze", &["systemd"])?;
    let xtask_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let unit = std::fs::read_to_string(format!("{xtask_dir}/../deploy/tessera.service"))
        .map_err(|e| format!("deploy/tessera.service: {e}"))?;
    let dir = std::env::temp_dir().join(format!("tessera-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("tessera.service");
    let binary = format!("{}/debug/tessera", target_dir());
    std::fs::write(&path, unit.replace("/usr/local/bin/tessera", &binary))
        .map_err(|e| e.to_string())?;
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .map_err(|e| format!("systemd-analyze: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let complaints = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && complaints.trim().is_empty() {
        eprintln!("xtask: deploy/tessera.service verified");
        Ok(())
    } else {
        Err(format!(
            "systemd-analyze verify deploy/tessera.service: {complaints}"
        ))
    }
}

/// The `N` of `--minutes N` (default 10).
fn minutes(args: &[String]) -> Result<u64> {
    match args.iter().position(|a| a == "--minutes") {
        None => Ok(10),
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| "--minutes needs a whole number above 0".to_owned()),
    }
}

/// Runs the schemathesis test (`tests/api/fuzz.rs`) for `minutes`, shared
/// by the Admin document and the Data document.
fn fuzz_api(minutes: u64) -> Result {
    let server = pg::ensure()?;
    ensure_schemathesis()?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_secs());
    eprintln!("xtask: schemathesis seed {seed} (TESSERA_FUZZ_SEED={seed} repeats this run)");
    run(cargo()
        .args([
            "test",
            "-p",
            "tests",
            "--",
            "--exact",
            "fuzz::schemathesis_finds_nothing_in_either_document",
            "--nocapture",
        ])
        .env("TESSERA_TEST_PG_URL", server)
        .env("TESSERA_FUZZ_SECONDS", (minutes * 30).to_string())
        .env("TESSERA_FUZZ_SEED", seed.to_string()))
}

/// The API fuzz test drives schemathesis (PyPI), pinned.
fn ensure_schemathesis() -> Result {
    let found = Command::new("schemathesis").arg("--version").output();
    if found.is_ok_and(|o| {
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains(SCHEMATHESIS)
    }) {
        return Ok(());
    }
    eprintln!("xtask: installing schemathesis {SCHEMATHESIS} from PyPI");
    run(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        &format!("schemathesis=={SCHEMATHESIS}"),
    ]))
}

/// The schemathesis release the fuzz test is written against.
const SCHEMATHESIS: &str = "4.32.5";

/// Writes the Admin API's OpenAPI document to `dir/admin.json` for client
/// generators (the per-role Data documents come from a running server:
/// `GET /admin/api/openapi/data?role=<id>`, see docs/clients.md).
fn openapi(dir: &str) -> Result {
    let output = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "-p", "tessera", "--", "openapi"])
        .output()
        .map_err(|e| format!("cargo run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "tessera openapi failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    let path = format!("{dir}/admin.json");
    std::fs::write(&path, output.stdout).map_err(|e| format!("{path}: {e}"))?;
    eprintln!("xtask: wrote {path}");
    Ok(())
}

/// Runs a command, failing with its name when it does not succeed.
fn run(command: &mut Command) -> Result {
    let shown = format!("{command:?}");
    eprintln!("xtask: running {shown}");
    let status = command.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// Installs Debian `packages` when `tool` is not on the PATH.
fn ensure_tool(tool: &str, packages: &[&str]) -> Result {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output();
    if found.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!(
        "xtask: {tool} is missing; installing {} from Debian's packages",
        packages.join(", ")
    );
    let _ = Command::new("apt-get")
        .arg("update")
        .stdout(std::process::Stdio::null())
        .status();
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages))
}

/// The files tests run an S3 emulator: moto's server (PyPI).
fn ensure_s3_emulator() -> Result {
    let found = Command::new("python3")
        .args(["-c", "import moto.server"])
        .output();
    if found.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!("xtask: installing moto[server] from PyPI");
    run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "moto[server]==5.2.1"]))
}

/// The OpenAPI tests check both documents with openapi-spec-validator (PyPI)
/// and generate a TypeScript client with the versions pinned in
/// `clients/typescript/package-lock.json` (npm).
fn ensure_openapi_tools() -> Result {
    let found = Command::new("python3")
        .args(["-c", "import openapi_spec_validator"])
        .output();
    if !found.is_ok_and(|o| o.status.success()) {
        eprintln!("xtask: installing openapi-spec-validator from PyPI");
        run(Command::new("python3").args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "openapi-spec-validator==0.9.0",
        ]))?;
    }
    // `cargo run` sets the manifest directory at run time; the compiled-in one
    // may be another checkout sharing the build cache.
    let xtask_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    npm_ci(&format!("{xtask_dir}/../clients/typescript"))
}

/// Installs the npm packages pinned in `dir`'s package-lock.json.
fn npm_ci(dir: &str) -> Result {
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir))
}

/// The browser tests load axe-core (pinned in
/// `tests/browser-tools/package-lock.json`) into each console page.
fn ensure_browser_tools() -> Result {
    let xtask_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    npm_ci(&format!("{xtask_dir}/../tests/browser-tools"))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Serves on 127.0.0.1:8080 against PostgreSQL found or started here.
fn dev() -> Result {
    let server = pg::ensure()?;
    let url = std::env::var("TESSERA_DATABASE_URL").unwrap_or_else(|_| format!("{server}/tessera"));
    println!("The console: http://127.0.0.1:8080/admin/ (sign in there)");
    run(cargo()
        .args(["run", "-p", "tessera", "--", "serve", "--generate-admin"])
        .env("TESSERA_DATABASE_URL", url))
}

/// The test modules run a second time through PgBouncer in transaction
/// mode: the Data API, auth, tokens, workflows and hooks, functions,
/// realtime, CSV, the SQL console and several instances.
const POOLED_MODULES: &[&str] = &[
    "data",
    "related",
    "csv",
    "login",
    "account",
    "sessions",
    "tokens",
    "workflows",
    "workflow_constructs",
    "hooks",
    "rpc",
    "realtime",
    "instances",
    "processes",
    "replicas",
    "sql_console",
    "schema",
];

/// Format check, clippy, the layering check and every test.
fn test() -> Result {
    let server = pg::ensure()?;
    // The browser tests drive Debian's headless Chromium.
    ensure_tool("chromedriver", &["chromium", "chromium-driver"])?;
    // The pooler tests run Debian's PgBouncer in front of the cluster.
    ensure_tool("pgbouncer", &["pgbouncer"])?;
    ensure_browser_tools()?;
    ensure_openapi_tools()?;
    ensure_s3_emulator()?;
    ensure_schemathesis()?;
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    lint::lint()?;
    // The API reference builds without a warning.
    run(cargo()
        .args(["doc", "--no-deps", "--workspace"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    // The shutdown test drives the real binary.
    package()?;
    run(cargo().args(["build", "-p", "tessera"]))?;
    verify_unit()?;
    // The example app's browser test loads the library's built module.
    let client = build_js_client()?;
    let nextest = Command::new("cargo-nextest")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut tests = cargo();
    if nextest {
        tests.args(["nextest", "run", "--workspace"]);
    } else {
        tests.args(["test", "--workspace"]);
    }
    run(tests.env("TESSERA_TEST_PG_URL", &server))?;
    // The same tests again through PgBouncer in transaction mode.
    let mut pooled = cargo();
    if nextest {
        let filter = POOLED_MODULES
            .iter()
            .map(|module| format!("test(/^{module}::/)"))
            .collect::<Vec<_>>()
            .join(" | ");
        pooled.args(["nextest", "run", "-p", "tests", "-E", &filter]);
    } else {
        pooled.args(["test", "-p", "tests", "--"]);
        pooled.args(POOLED_MODULES.iter().map(|module| format!("{module}::")));
    }
    run(pooled
        .env("TESSERA_TEST_PG_URL", &server)
        .env("TESSERA_TEST_POOLER", "transaction"))?;
    // The library's own tests, against the binary just built.
    run(Command::new("npm")
        .args(["test"])
        .current_dir(&client)
        .env("TESSERA_BIN", format!("{}/debug/tessera", target_dir()))
        .env("TESSERA_TEST_PG_URL", server))
}

/// Installs `clients/js`'s pinned tools, type-checks the library strictly,
/// builds it (`dist/`) and type-checks the example app against it;
/// answers its folder.
fn build_js_client() -> Result<String> {
    let xtask_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let client = format!("{xtask_dir}/../clients/js");
    npm_ci(&client)?;
    for script in ["typecheck", "build"] {
        run(Command::new("npm")
            .args(["run", "--silent", script])
            .current_dir(&client))?;
    }
    // The example app, against the declarations just built.
    run(Command::new(format!("{client}/node_modules/.bin/tsc"))
        .args(["-p", "../../examples/notes-app"])
        .current_dir(&client))?;
    Ok(client)
}

/// The crates meant for the registry package without a warning (their
/// metadata is complete); nothing is uploaded.
fn package() -> Result {
    let mut command = cargo();
    command.args(["package", "--workspace", "--no-verify", "--allow-dirty"]);
    for private in [
        "tests",
        "xtask",
        "testkit",
        "embedded-example",
        "services-only-example",
    ] {
        command.args(["--exclude", private]);
    }
    eprintln!("xtask: running {command:?}");
    let output = command.output().map_err(|e| e.to_string())?;
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || log.contains("warning:") {
        return Err(format!("cargo package failed or warned:\n{log}"));
    }
    eprintln!("xtask: every published crate packages cleanly");
    Ok(())
}
