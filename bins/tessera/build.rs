//! Records the git revision the binary is built from, for `tessera --version`.

use std::path::Path;
use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let revision = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TESSERA_GIT_REVISION={revision}");
    // Build again when HEAD moves (a commit, a checkout), not on every build.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let head = Path::new(&dir).join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let reference = Path::new(&dir).join(branch);
            if reference.exists() {
                println!("cargo:rerun-if-changed={}", reference.display());
            }
        }
    }
}
