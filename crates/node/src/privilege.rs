//! Elevated privilege serves the node's own sources, never a path the caller chose.
//!
//! The mechanism lives in [`plugin::privilege`] (shared with `kube`, which opens `--kubeconfig`
//! and `--pods-json` the same way); this module keeps the names the node readers use. In short:
//! when a check runs with more privilege than its real user (`AT_SECURE`), the runtime lowers the
//! whole process to the caller's privilege before any check code runs; every path a user can name
//! is opened at the caller's level ([`open`]/[`read`]), and privilege is raised only around the
//! node's own default sources (the default kubelet roots, `/dev/kmsg`) with [`elevated_if`].

pub use plugin::privilege::{
    as_caller, elevated_if, open, open_with, read, secure as is_privileged, via_sudo,
};

/// True when the calling thread runs at the binary's own privilege (inside
/// [`elevated_if`] for a node's own source), or the process has no more privilege than its
/// caller: a failure now is not the boundary's doing.
pub fn elevated_now() -> bool {
    !is_privileged() || plugin::privilege::Level::current() == plugin::privilege::Level::own()
}

/// True when this process runs with `NoNewPrivs` set (`/proc/self/status`): its parent (a systemd
/// unit with `NoNewPrivileges=yes`, `setpriv --no-new-privs`, a container runtime) forbade gaining
/// privilege at exec, so the binary's file capabilities were not applied.
pub fn no_new_privs() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NoNewPrivs:").map(|v| v.trim() == "1"))
        })
        .unwrap_or(false)
}

/// What to do when a source needing `cap` (`CAP_DAC_READ_SEARCH`, `CAP_SYSLOG`) could not be read,
/// saying what actually failed: the privilege is not used for a path the caller named (`own`
/// false while privileged); file capabilities not applied under `NoNewPrivs`; else run as root
/// or grant it (`why`: what needs it).
pub fn advice(cap: &str, why: &str, own: bool) -> String {
    let root = nix::unistd::geteuid().is_root();
    // Under NoNewPrivs the kernel still marks the exec secure (the file has capabilities) but
    // grants none of them: nothing is permitted.
    if !root && no_new_privs() && plugin::privilege::permitted() == 0 {
        return format!(
            "this process runs with NoNewPrivs (set by its parent: a systemd unit with NoNewPrivileges=yes, setpriv --no-new-privs, a container runtime), so the binary's file capabilities ({cap}) were not applied at exec; remove NoNewPrivileges from the agent's unit, or run the check as root ({why})"
        );
    }
    if is_privileged() && !own {
        return format!(
            "this binary's {cap} serves the node's own default sources only, never a path given on the command line: leave the option at its default (or run as root)"
        );
    }
    format!("run as root or grant {cap} ({why})")
}
