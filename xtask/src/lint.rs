//! The layering check: which crate may depend on which, and three rules
//! read in the sources (file length, the clock, adapters apart).

use std::path::{Path, PathBuf};

use crate::{Result, cargo};

/// Crates that must stay free of the web framework and the ORM.
const DOMAIN_CRATES: &[&str] = &[
    "tessera-kernel",
    "tessera-settings",
    "tessera-auth",
    "tessera-oauth",
    "tessera-schema",
    "tessera-data",
    "tessera-workflows",
    "tessera-views",
    "tessera-realtime",
    "tessera-sql-console",
    "tessera-snapshot",
    "tessera-files",
    "tessera-mcp",
    "tessera-outbound",
    "tessera-permissions",
    "tessera-audit",
    "tessera-outbox",
    "tessera-scripts",
    "tessera-api-types",
    "tessera-mail",
];
const FORBIDDEN_IN_DOMAIN: &[&str] = &["actix-web", "sea-orm", "sqlx"];

/// The adapters: none depends on another (what two of them share is a
/// port in a domain crate).
const ADAPTERS: &[&str] = &["tessera-store-pg", "tessera-mail", "tessera-outbound"];

/// Further rules of the layering: a crate, and what may not appear among
/// its normal dependencies. Settings sit below sign-in and accounts; the
/// service bundle, and a host that uses it alone, link no web framework.
const LAYER_RULES: &[(&str, &[&str])] = &[
    ("tessera-settings", &["tessera-auth"]),
    ("tessera-services", &["actix-web", "tessera-http"]),
    ("services-only-example", &["actix-web", "tessera-http"]),
];

/// A library file longer than this (its tests left out) names its reason
/// in its first lines, after [`LONG_FILE_MARK`].
const MAX_LINES: usize = 600;
/// What a long file's first lines say before the reason it is long.
const LONG_FILE_MARK: &str = "Longer than 600 lines:";
/// The only library file that reads the system clock.
const CLOCK_FILE: &str = "crates/core/kernel/src/clock.rs";

/// Domain crates depend on neither actix-web nor sea-orm, no adapter
/// depends on another, each rule of [`LAYER_RULES`] holds, and the
/// library sources keep [`source_problems`]' rules.
pub(crate) fn lint() -> Result {
    let domain = DOMAIN_CRATES
        .iter()
        .map(|krate| (*krate, FORBIDDEN_IN_DOMAIN));
    let adapters = ADAPTERS.iter().map(|krate| (*krate, ADAPTERS));
    let rules = domain.chain(adapters).chain(LAYER_RULES.iter().copied());
    let mut problems = Vec::new();
    for (krate, forbidden) in rules {
        let tree = normal_dependencies(krate)?;
        for name in forbidden.iter().filter(|name| **name != krate) {
            if tree
                .lines()
                .any(|line| line.split_whitespace().next() == Some(name))
            {
                problems.push(format!("{krate} depends on {name}"));
            }
        }
    }
    problems.extend(source_problems(&crate::pg::workspace_root())?);
    if problems.is_empty() {
        eprintln!(
            "xtask: layering ok: {} stay free of {}; no adapter depends on another; {}; \
             no library file over {MAX_LINES} lines without its reason; no clock read outside {CLOCK_FILE}",
            DOMAIN_CRATES.join(", "),
            FORBIDDEN_IN_DOMAIN.join(", "),
            LAYER_RULES
                .iter()
                .map(|(krate, forbidden)| format!("{krate} of {}", forbidden.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        );
        Ok(())
    } else {
        Err(format!("layering broken: {}", problems.join("; ")))
    }
}

/// The rules read in the library sources (`crates/**/src` and `bins`,
/// the test kit and each file's `#[cfg(test)]` part left out): no file
/// over [`MAX_LINES`] lines without its reason, and no `Utc::now()`
/// outside [`CLOCK_FILE`].
fn source_problems(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for top in ["crates", "bins"] {
        rust_files(&root.join(top), &mut files)?;
    }
    let mut problems = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let in_tests = relative.starts_with("crates/testkit/")
            || !relative.contains("/src/")
            || relative.ends_with("/tests.rs")
            || relative.contains("/tests/");
        if in_tests {
            continue;
        }
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{relative}: {e}"))?;
        let library: Vec<&str> = text
            .lines()
            .take_while(|line| line.trim() != "#[cfg(test)]")
            .collect();
        let reasoned = library.iter().take(10).any(|l| l.contains(LONG_FILE_MARK));
        if library.len() > MAX_LINES && !reasoned {
            problems.push(format!(
                "{relative} has {} lines and no \"{LONG_FILE_MARK}\" reason in its first lines",
                library.len()
            ));
        }
        if relative != CLOCK_FILE
            && let Some(at) = library.iter().position(|l| l.contains("Utc::now()"))
        {
            problems.push(format!(
                "{relative}:{} reads the system clock (use the Clock)",
                at + 1
            ));
        }
    }
    Ok(problems)
}

/// Every `.rs` file under `dir`, `target` folders left out.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) -> Result {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, into)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
    Ok(())
}

/// The packages `krate` depends on, one per line, its dev-dependencies left out.
fn normal_dependencies(krate: &str) -> Result<String> {
    let output = cargo()
        .args([
            "tree", "-q", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "cargo tree -p {krate} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
