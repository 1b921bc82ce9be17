//! Records the git commit the binary is built from, for `tailscope --version`
//! (`TAILSCOPE_COMMIT`). Never fails the build: outside a git checkout of this project (a
//! source tarball, `cargo install` from a registry), or without git, the commit is "unknown".
//! A packager building from a tarball can name it with `TAILSCOPE_COMMIT=abc1234`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TAILSCOPE_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("TAILSCOPE_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => {
            // Without these, cargo would rerun this script on any change in the package (the
            // whole workspace, for the root package) and still miss a new commit.
            for file in head_files(&dir) {
                println!("cargo:rerun-if-changed={}", file.display());
            }
            commit_of(&dir)
        }
    };
    println!("cargo:rustc-env=TAILSCOPE_COMMIT={commit}");
}

/// The short hash of the commit checked out in `dir`, or "unknown" when `dir` is not the top
/// of a git checkout (a tarball unpacked inside another repository is not that repository's
/// commit) or git cannot be run.
pub fn commit_of(dir: &Path) -> String {
    let top = git(dir, &["rev-parse", "--show-toplevel"]);
    let same = |top: &str| match (Path::new(top).canonicalize(), dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match top {
        Some(top) if same(&top) => git(dir, &["rev-parse", "--short", "HEAD"])
            .filter(|hash| hash.chars().all(|c| c.is_ascii_hexdigit()) && !hash.is_empty())
            .unwrap_or_else(|| "unknown".into()),
        _ => "unknown".into(),
    }
}

/// The files whose change means another commit is checked out: HEAD, the branch it names,
/// and the packed refs (where a branch's commit lives after `git gc`). A worktree keeps its
/// HEAD in its own git dir and its branches in the common one. Only existing files: cargo
/// reruns the script on every build for a path that does not exist.
fn head_files(dir: &Path) -> Vec<PathBuf> {
    let path = |args: &[&str]| git(dir, args).map(|p| dir.join(p));
    let (Some(git_dir), Some(common)) = (
        path(&["rev-parse", "--git-dir"]),
        path(&["rev-parse", "--git-common-dir"]),
    ) else {
        return Vec::new();
    };
    let mut files = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        files.push(common.join(branch));
    }
    files.retain(|f| f.is_file());
    files
}

/// What `git ARGS` prints in `dir`, trimmed; none when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
