//! Network namespaces for the agent's tests (a generator's and a server's, a container's):
//! whether they can be made here, and the `ip` steps that make them, each refusal a visible
//! skip.

use std::process::Command;

use crate::common;

/// Whether network namespaces can be made here (root, iproute2); says why not as a skip.
pub(crate) fn can_make() -> bool {
    if !root() {
        common::skip("network namespaces need root (id -u is not 0)");
        return false;
    }
    if !common::has_tool("ip", "-V") {
        common::skip("ip (iproute2) not installed");
        return false;
    }
    true
}

/// Runs `ip STEP` for each step in turn; false, said as a skip naming the step that failed
/// and `what` could not be set up, at the first that fails.
pub(crate) fn ip_steps(steps: &[Vec<&str>], what: &str) -> bool {
    for step in steps {
        let out = Command::new("ip").args(step).output().unwrap();
        if !out.status.success() {
            common::skip(format!(
                "cannot set up {what} here (ip {}: {})",
                step.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return false;
        }
    }
    true
}

/// Whether the tests run as root (network namespaces need it).
fn root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
