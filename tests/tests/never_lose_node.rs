//! Never lose an alert, node side (issue 27): a clock set back, a state another user planted or
//! redirected, a source that yields nothing, inputs of millions of lines, and privilege advice
//! that names what actually failed. Each test is named after the finding it proves.

use e2e::logs::*;
use e2e::{Cmd, Output};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NESTED: &str = "KUBELET_NESTED_OPS";
const KERNEL: &str = "STORAGE_KERNEL_ERRORS";
/// One hour, in ms: how far the clock is set back.
const HOUR_MS: i64 = 3_600_000;

fn append(p: &Path, s: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

/// The one state file in `dir`.
fn state_file(dir: &Path) -> PathBuf {
    let v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(v.len(), 1, "one state file in {}: {v:?}", dir.display());
    v.into_iter().next().unwrap()
}

/// Shift every time of a state file by `ms`: the state as a run with the clock `ms` ahead wrote
/// it (then the clock was set back).
fn shift_state(sf: &Path, ms: i64) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(sf).unwrap()).unwrap();
    let shift = |x: &mut Value| {
        if let Some(t) = x.as_i64() {
            *x = json!(t + ms);
        }
    };
    for list in ["failures", "events"] {
        if let Some(a) = v[list].as_array_mut() {
            for e in a {
                shift(&mut e["t"]);
            }
        }
    }
    if let Some(a) = v["streaks"].as_array_mut() {
        for e in a {
            shift(&mut e["start"]);
            shift(&mut e["last"]);
        }
    }
    shift(&mut v["saved_ms"]);
    std::fs::write(sf, v.to_string()).unwrap();
}

/// A failure line of a volume stuck at the kubelet's maximum backoff (CRITICAL while active).
fn stuck_line(t: i64, pv: &str) -> String {
    let err = format!("MountVolume.MountDevice failed for volume \"{pv}\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^{pv}\") pod \"web-0\" (UID: \"u1\") : rpc error: code = DeadlineExceeded desc = context deadline exceeded");
    format!(
        "{}{}\n",
        klog_header(t),
        nested_op_msg(t, "driver.longhorn.io", pv, "u1", 122_000, &err)
    )
}

fn nested_run(log: &Path, st: &Path) -> Output {
    Cmd::check("check_kubelet_nested_ops")
        .env("TZ", "UTC")
        .args(["--journalctl", "/nonexistent/journalctl", "-v"])
        .arg("--log-file")
        .arg(log)
        .arg("--state-dir")
        .arg(st)
        .run()
}

/// Finding 1: a clock set back lost the alert for good: the kept failures, dated in the future,
/// were dropped, and the saved offset kept the log's lines from being read again (run 2 OK with
/// a note, run 3 OK without one). Now the log is read again from its start, once, and every
/// later run stays CRITICAL; each failure counts once.
#[test]
fn finding1_clock_set_back_keeps_the_alert() {
    let _ = e2e::bin_dir();
    for appended in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (log, st) = (dir.path().join("kubelet.log"), dir.path().join("state"));
        let now = now_secs();
        std::fs::write(
            &log,
            stuck_line(now - 250, "pvc-a") + &stuck_line(now - 125, "pvc-a"),
        )
        .unwrap();
        let label = if appended {
            "source timestamps behind the state's"
        } else {
            "saved state shifted into the future"
        };
        let out = nested_run(&log, &st);
        out.assert_status(NESTED, 2);
        // The clock was an hour ahead when the state was written; it is set back now.
        shift_state(&state_file(&st), HOUR_MS);
        let mut want_ops = 2.0;
        if appended {
            // Lines the kubelet wrote after the step: dated behind the state's.
            append(&log, &stuck_line(now - 5, "pvc-a"));
            want_ops = 3.0;
        }
        let out = nested_run(&log, &st);
        out.assert_status(NESTED, 2);
        assert!(
            out.stdout.contains("the clock was set back"),
            "{label}: {out:?}"
        );
        assert_eq!(
            out.perf("failed_operations"),
            Some(want_ops),
            "{label}: {out:?}"
        );
        let out = nested_run(&log, &st);
        out.assert_status(NESTED, 2);
        assert!(
            !out.stdout.contains("the clock was set back"),
            "{label}: said once: {out:?}"
        );
        assert_eq!(
            out.perf("failed_operations"),
            Some(want_ops),
            "{label}: {out:?}"
        );
    }
}

/// kmsg records as the device returns them.
fn rec(seq: u64, usec: u64, prio: u32, text: &str) -> String {
    format!("{prio},{seq},{usec},-;{text}\n SUBSYSTEM=block\n DEVICE=b8:32\n")
}

/// Finding 1, the kernel log: kept records dated in the future were dropped and the saved
/// sequence number kept them from being read again. Now the ring buffer (here a file of records)
/// is read again from its start, once.
#[test]
fn finding1_clock_set_back_keeps_the_kernel_alert() {
    let _ = e2e::bin_dir();
    for appended in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (f, st) = (dir.path().join("kmsg"), dir.path().join("state"));
        let kroot = dir.path().join("kubelet");
        std::fs::create_dir(&kroot).unwrap();
        std::fs::write(
            &f,
            rec(1, 1_000, 6, "sd 3:0:0:0: [sdc] Attached SCSI disk")
                + &rec(
                    2,
                    2_000,
                    2,
                    "EXT4-fs (sdc): Remounting filesystem read-only",
                ),
        )
        .unwrap();
        let run = || {
            Cmd::check("check_storage_kernel_errors")
                .arg("--kmsg")
                .arg(&f)
                .args(["--mountinfo", "/nonexistent-mountinfo"])
                .args(["--sys", "/nonexistent-sys", "--window", "0", "-v"])
                .arg("--kubelet-root")
                .arg(&kroot)
                .arg("--state-dir")
                .arg(&st)
                .run()
        };
        let out = run();
        out.assert_status(KERNEL, 2);
        shift_state(&state_file(&st), HOUR_MS);
        if appended {
            append(&f, &rec(3, 3_000, 6, "EXT4-fs (vda): mounted filesystem"));
        }
        let out = run();
        out.assert_status(KERNEL, 2);
        assert!(out.stdout.contains("the clock was set back"), "{out:?}");
        assert_eq!(out.perf("remount_ro"), Some(1.0), "{out:?}");
        let out = run();
        out.assert_status(KERNEL, 2);
        assert!(!out.stdout.contains("the clock was set back"), "{out:?}");
        assert_eq!(out.perf("remount_ro"), Some(1.0), "{out:?}");
    }
}

/// A tempdir every user may traverse (the agent and the attacker run as other users).
fn open_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn chown(p: &Path, uid: u32, follow: bool) {
    let r = if follow {
        std::os::unix::fs::chown(p, Some(uid), Some(uid))
    } else {
        std::os::unix::fs::lchown(p, Some(uid), Some(uid))
    };
    r.unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

/// check_kubelet_nested_ops on `log` with `--state-dir st`, as `uid` (None: as root).
fn nested_as(uid: Option<u32>, log: &Path, st: &Path) -> Output {
    let b = e2e::bin("check_kubelet_nested_ops");
    let c = match uid {
        Some(u) => Cmd::new("setpriv")
            .arg(format!("--reuid={u}"))
            .arg(format!("--regid={u}"))
            .args(["--clear-groups", "--"])
            .arg(b),
        None => Cmd::new(b),
    };
    c.env("TZ", "UTC")
        .args(["--journalctl", "/nonexistent/journalctl", "-v"])
        .arg("--log-file")
        .arg(log)
        .arg("--state-dir")
        .arg(st)
        .run()
}

/// Finding 2: in a /tmp-like sticky directory another user (nobody) planted the state file under
/// the name the agent will use, saying "read to the end, nothing failing": CRITICAL became OK.
/// Now a planted file (not the running user's) is ignored, and a directory others may write is
/// refused unless it is the agent's own: the log is read afresh, CRITICAL stays.
#[test]
fn finding2_planted_state_in_a_sticky_dir_keeps_the_alert() {
    use std::os::unix::fs::PermissionsExt;
    if !e2e::need_root("finding2_planted_state_in_a_sticky_dir_keeps_the_alert") {
        return;
    }
    let _ = e2e::bin_dir();
    let d = open_tempdir();
    let log = d.path().join("kubelet.log");
    let now = now_secs();
    std::fs::write(
        &log,
        stuck_line(now - 250, "pvc-a") + &stuck_line(now - 125, "pvc-a"),
    )
    .unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The attacker's forgery: the state a run would write (it only needs to stat the log),
    // with nothing failing.
    let private = d.path().join("private");
    nested_as(None, &log, &private).assert_status(NESTED, 2);
    let good = state_file(&private);
    let mut forged: Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
    forged["failures"] = json!([]);
    forged["streaks"] = json!([]);
    // (agent uid, label): root, whose own the sticky directory is; and an agent user it is not.
    for (agent, label) in [(None, "agent root"), (Some(4242u32), "agent uid 4242")] {
        let sticky = d.path().join(format!("sticky-{}", agent.unwrap_or(0)));
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let planted = sticky.join(good.file_name().unwrap());
        std::fs::write(&planted, forged.to_string()).unwrap();
        chown(&planted, 65534, true);
        for run in 1..=2 {
            let out = nested_as(agent, &log, &sticky);
            out.assert_status(NESTED, 2);
            let why = if agent.is_none() {
                "owned by uid 65534"
            } else {
                "sticky or not"
            };
            assert!(out.stdout.contains(why), "{label}, run {run}: {out:?}");
        }
    }
}

/// Restores fs.protected_symlinks when dropped.
struct ProtectedSymlinks(String);
impl ProtectedSymlinks {
    const PATH: &str = "/proc/sys/fs/protected_symlinks";
    fn off() -> ProtectedSymlinks {
        let was = std::fs::read_to_string(Self::PATH).unwrap();
        std::fs::write(Self::PATH, "0").unwrap();
        ProtectedSymlinks(was)
    }
}
impl Drop for ProtectedSymlinks {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, self.0.trim());
    }
}

/// Finding 8: a root run given `--state-dir <dir>/x/link/newdir`, `link → /etc` made by another
/// user, created `/etc/newdir` with a state file (with fs.protected_symlinks=0, which the test
/// sets for a moment and restores). Now the directory is walked with openat(O_NOFOLLOW) from `/`,
/// never through another user's directory or link: nothing is created, the alert stays.
#[test]
fn finding8_root_never_creates_state_dirs_through_another_users_link() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    if !e2e::need_root("finding8_root_never_creates_state_dirs_through_another_users_link") {
        return;
    }
    let _ = e2e::bin_dir();
    let d = open_tempdir();
    let log = d.path().join("kubelet.log");
    let now = now_secs();
    std::fs::write(
        &log,
        stuck_line(now - 250, "pvc-a") + &stuck_line(now - 125, "pvc-a"),
    )
    .unwrap();
    // Root's directory the link points at (the test's /etc).
    let etc = d.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    // A directory of nobody's with nobody's link in it; a sticky world-writable one with the same.
    let x = d.path().join("x");
    std::fs::create_dir(&x).unwrap();
    chown(&x, 65534, true);
    let sticky = d.path().join("sticky");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    for parent in [&x, &sticky] {
        let link = parent.join("link");
        symlink(&etc, &link).unwrap();
        chown(&link, 65534, false);
    }
    let _guard = e2e::exclusive();
    let _off = ProtectedSymlinks::off();
    for parent in [&x, &sticky] {
        let st = parent.join("link/newdir");
        let out = nested_as(None, &log, &st);
        out.assert_status(NESTED, 2);
        assert!(
            out.stdout.contains("refused") && out.stdout.contains("not followed")
                || out.stdout.contains("on its way"),
            "{}: {out:?}",
            st.display()
        );
        assert!(
            !etc.join("newdir").exists(),
            "{}: created through another user's link",
            st.display()
        );
    }
}
