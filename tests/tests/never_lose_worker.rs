//! Issue 27, finding 9: a worker outlives its parent. The check's work runs in a forked worker
//! (the watchdog, `crates/plugin/src/runtime/worker.rs`); a SIGKILL or SIGTERM sent to the
//! check's main PID alone (not its process group, as NRPE would) left the worker, blocked on a
//! FIFO given as an input file, reparented to init for good. The worker now asks the kernel for
//! SIGKILL when its parent ends (`PR_SET_PDEATHSIG`) and checks afterwards that the parent is
//! still the one that forked it.
//!
//! Each case: the check reads a FIFO; the test opens the FIFO's writing end once the worker has
//! it open (a non-blocking open for writing succeeds only then) and never writes, so the worker
//! is blocked in a read; the signal goes to the main PID; /proc must show no live worker before a
//! deadline (a reaped worker, or a zombie left to an init that does not reap, is no worker).

use e2e::bin;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The live children of `pid` (state not zombie/dead), from /proc/*/stat.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some((state, ppid)) = stat(p) {
            if ppid == pid && !matches!(state, 'Z' | 'X') {
                out.push(p);
            }
        }
    }
    out
}

/// (state, parent pid) of a process, None once it is gone.
fn stat(pid: i32) -> Option<(char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Alive: present in /proc and neither a zombie nor dead.
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(s, _)| !matches!(s, 'Z' | 'X'))
}

/// Poll `cond` every few milliseconds until it holds or `limit` passes.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Run `check args…` whose input is the FIFO `fifo`, wait until its worker holds the FIFO open,
/// send `sig` to the main PID alone, and assert that no worker is left.
fn worker_dies_with_its_parent(
    check: &str,
    args: &[&str],
    fifo: &Path,
    sig: nix::sys::signal::Signal,
) {
    let what = format!("{check} {} ({sig})", args.join(" "));
    let mut child = Command::new(bin(check))
        .args(args)
        // The watchdog must not be what ends the worker here.
        .args(["-t", "120"])
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let main = child.id() as i32;
    // The worker has the FIFO open for reading once a non-blocking open for writing succeeds
    // (ENXIO while there is no reader). Keeping this end open and silent blocks its read.
    let mut writer = None;
    let opened = wait_until(
        Duration::from_secs(30),
        || match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => {
                writer = Some(f);
                true
            }
            Err(_) => false,
        },
    );
    assert!(opened, "{what}: the check never opened its input FIFO");
    let workers = children(main);
    assert_eq!(workers.len(), 1, "{what}: one worker expected: {workers:?}");
    let worker = workers[0];
    assert!(alive(worker), "{what}: the worker ended before the signal");

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(main), sig).unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "{what}: the main process was not ended by {sig}: {status:?}"
    );
    let gone = wait_until(Duration::from_secs(5), || !alive(worker));
    if !gone {
        // Leave nothing behind for the next test, then fail.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(worker),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        gone,
        "{what}: the worker {worker} outlived its parent (state {:?}): finding 9 of issue 27",
        stat(worker)
    );
    drop(writer);
}

fn fifo(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    p
}

/// Finding 9: SIGKILL and SIGTERM to the main PID alone, with the worker blocked on a FIFO given
/// as `--pods-json`, `--log-file` and `--mountinfo`: no worker is left.
#[test]
fn finding_9_worker_outlives_its_parent() {
    use nix::sys::signal::Signal::{SIGKILL, SIGTERM};
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 3] = [
        ("check_stuck_scheduled", "--pods-json"),
        ("check_kubelet_nested_ops", "--log-file"),
        ("check_ro_pvc_mounts", "--mountinfo"),
    ];
    let kubelet = tmp.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
    let kubelet = kubelet.to_str().unwrap().to_string();
    for (i, (check, opt)) in cases.iter().enumerate() {
        for sig in [SIGKILL, SIGTERM] {
            let f = fifo(tmp.path(), &format!("in-{i}-{sig}"));
            let path = f.to_str().unwrap().to_string();
            let mut args = vec![*opt, path.as_str()];
            match *check {
                "check_stuck_scheduled" => args.extend(["--node", "k8s01"]),
                "check_ro_pvc_mounts" => args.extend(["--kubelet-root", &kubelet]),
                _ => {}
            }
            worker_dies_with_its_parent(check, &args, &f, sig);
        }
    }
}
