//! FUSE mounts for tests: a bindfs daemon in a namespace whose pid we know, so a test can kill it
//! (the mount answers ENOTCONN) or stop it (every stat of the mount hangs).

use crate::Ns;
use std::path::Path;
use std::time::{Duration, Instant};

/// Wait until `cond` holds, polling; panics with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True when `mount_point` is a mount point in the namespace.
pub fn is_mounted(ns: &Ns, mount_point: &Path) -> bool {
    let mi = std::fs::read_to_string(format!("/proc/{}/mountinfo", ns.pid())).unwrap_or_default();
    let want = mount_point.to_string_lossy().replace(' ', "\\040");
    mi.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// Mount `src` at `mount_point` with `bindfs -f` inside the namespace (both created). The daemon
/// stays in the foreground; its pid is returned and owned by `ns` (SIGKILLed when ns drops).
pub fn bindfs(ns: &mut Ns, src: &Path, mount_point: &Path) -> i32 {
    let out = ns.sh(&format!(
        "mkdir -p '{s}' '{m}' && bindfs -f '{s}' '{m}' </dev/null >/dev/null 2>&1 & echo $!",
        s = src.display(),
        m = mount_point.display()
    ));
    let pid: i32 = out.stdout.trim().parse().expect("bindfs pid");
    ns.own(pid);
    wait_until(
        &format!("bindfs to mount {}", mount_point.display()),
        Duration::from_secs(10),
        || is_mounted(ns, mount_point),
    );
    pid
}

/// The state letter of a process (`R`, `S`, `T`, `Z`, ...), `None` when it is gone.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// SIGKILL a FUSE daemon and wait until it is dead: its mount then answers ENOTCONN.
pub fn kill_daemon(pid: i32) {
    use nix::sys::signal::{kill, Signal};
    let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    wait_until(
        &format!("pid {pid} to die"),
        Duration::from_secs(10),
        || matches!(proc_state(pid), None | Some('Z') | Some('X')),
    );
}

/// SIGSTOP a FUSE daemon and wait until it is stopped: every request to its mount now hangs.
pub fn stop_daemon(pid: i32) {
    use nix::sys::signal::{kill, Signal};
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGSTOP).expect("SIGSTOP");
    wait_until(
        &format!("pid {pid} to stop"),
        Duration::from_secs(10),
        || proc_state(pid) == Some('T'),
    );
}

/// Pids of live processes whose command line contains `marker` (zombies have none).
pub fn processes_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                out.push(pid);
            }
        }
    }
    out
}
