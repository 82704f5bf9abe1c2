//! From zero (issue 19): the README quickstart is two commands; the first, run verbatim in a fresh
//! clone, builds the suite and replays both incidents of docs/incidents.md, each of the nine
//! checks catching its part (non-OK, naming the incident's object), and leaves nothing behind.
//!
//! Build cost: the clone builds with `CARGO_TARGET_DIR` set to this workspace's target dir, so
//! the registry dependencies already built are reused; the workspace's own crates are rebuilt
//! (their sources are a fresh checkout at another path). The clone is of the committed `HEAD`.
//! The other tests run the replay binary of this build directly: file mode, and Ctrl-C cleanup.

use e2e::{need_root, need_tool, workspace_root, Cmd};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each check, its status-line name, and what of the incident its answer must name
/// (check_pv_capacity and check_volume_attachments have no scene: the incidents' record shows no
/// filling PV and no stranded or contested VolumeAttachment; check_csi_node_plugins has no scene:
/// the record shows no CSI node plugin that stopped answering).
const EXPECT: [(&str, &str, &[&str]); 10] = [
    (
        "check_longhorn_volumes",
        "LONGHORN_VOLUMES",
        &[
            "llmsafespaces/ws-b70553ae-data",
            "worker-04",
            "degraded for 3h",
        ],
    ),
    (
        "check_ro_pvc_mounts",
        "RO_PVC_MOUNTS",
        &["pvc-a634b9a3", "media/radarr-0"],
    ),
    (
        "check_stale_csi_mounts",
        "STALE_CSI_MOUNTS",
        &["pvc-81b676e6"],
    ),
    (
        "check_kubelet_nested_ops",
        "KUBELET_NESTED_OPS",
        &["pvc-81b676e6", "GetDeviceMountRefs"],
    ),
    (
        "check_stuck_scheduled",
        "STUCK_SCHEDULED",
        &["ws-b70553ae", "ws-ebafc5da", "ws-d048256b"],
    ),
    (
        "check_jiva_rep_crashloop",
        "JIVA_REP_CRASHLOOP",
        &["jiva-rep-1", "92 restarts"],
    ),
    (
        "check_iscsi_sessions",
        "ISCSI_SESSIONS",
        &["pvc-746b2837", "transport-offline"],
    ),
    (
        "check_storage_kernel_errors",
        "STORAGE_KERNEL_ERRORS",
        &["pvc-a634b9a3", "read-only"],
    ),
    (
        "check_watch_cache",
        "WATCH_CACHE",
        &["did not reflect a write"],
    ),
    (
        "check_stuck_terminating",
        "STUCK_TERMINATING",
        &["media/seerr-seerr-chart-0", "read-only file system"],
    ),
];

/// The commands of the README's Quickstart block, comments removed.
fn quickstart() -> Vec<String> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let qs = &readme[readme.find("## Quickstart").expect("a Quickstart section")..];
    let block = &qs[qs.find("```sh\n").expect("a sh block") + 6..];
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The replay's sections: check name → its text (from its header to the next).
fn sections(out: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("━━━ ") {
            let name = rest.split(' ').nth(1).unwrap_or("").to_string();
            v.push((name, String::new()));
        } else if let Some((_, text)) = v.last_mut() {
            text.push_str(l);
            text.push('\n');
        }
    }
    v
}

/// Every check reported its incident: a WARNING/CRITICAL status line right after its command
/// line, naming the incident's objects, and the incident line it reproduces.
fn assert_replayed(out: &str) {
    let secs = sections(out);
    for (check, name, objects) in EXPECT {
        let text = &secs
            .iter()
            .find(|(c, _)| c == check)
            .unwrap_or_else(|| panic!("no section for {check}:\n{out}"))
            .1;
        assert!(
            text.contains("reproduces: \""),
            "{check}: no incident line:\n{text}"
        );
        assert!(
            text.contains("docs/incidents.md#"),
            "{check}: no pointer:\n{text}"
        );
        let mut lines = text
            .lines()
            .skip_while(|l| !l.starts_with(&format!("$ {check} ")));
        lines
            .next()
            .unwrap_or_else(|| panic!("{check}: no command line:\n{text}"));
        let status = lines.next().unwrap_or("");
        assert!(
            status.starts_with(&format!("{name} CRITICAL - "))
                || status.starts_with(&format!("{name} WARNING - ")),
            "{check} did not catch its incident: {status:?}\n{text}"
        );
        for o in objects {
            assert!(text.contains(o), "{check}: {o:?} not named:\n{text}");
        }
        let code: i32 = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("(exit ")?.strip_suffix(')')?.parse().ok())
            .unwrap_or(-1);
        assert!(code == 1 || code == 2, "{check}: exit {code}:\n{text}");
    }
    assert!(
        out.contains("cleaned up: no mount, loop device, FUSE daemon, API server or file"),
        "{out}"
    );
}

/// The sandbox the replay named on its first line.
fn sandbox_of(out: &str) -> PathBuf {
    let first = out.lines().next().unwrap_or("");
    let p = first
        .rsplit(" in ")
        .next()
        .filter(|p| p.contains("k8s-storage-checks-replay."))
        .unwrap_or_else(|| panic!("no sandbox on the first line: {first:?}"));
    PathBuf::from(p)
}

/// Nothing of the replay is left: no mount anywhere (any mount namespace), no loop device backed
/// by its files, no process of its FUSE daemon, no files.
fn assert_nothing_left(sandbox: &Path) {
    let s = sandbox.to_string_lossy().into_owned();
    // Namespaces die asynchronously with their last process: wait for that, with a deadline.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mounted: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("mountinfo")).ok())
            .flat_map(|m| m.lines().map(String::from).collect::<Vec<_>>())
            .filter(|l| l.contains(&s))
            .collect();
        let loops = Cmd::new("losetup").arg("-a").run().stdout;
        let procs = e2e::fuse::processes_with(&s);
        if mounted.is_empty() && !loops.contains(&s) && procs.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "left behind: mounts {mounted:?}, loops {loops:?}, processes {procs:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!sandbox.exists(), "{} is left", sandbox.display());
}

#[test]
fn readme_quickstart_is_two_commands_and_ci_runs_the_second() {
    let cmds = quickstart();
    assert_eq!(
        cmds.len(),
        2,
        "the quickstart is exactly two commands: {cmds:?}"
    );
    assert_eq!(cmds[1], "cargo test --workspace");
    let ci = std::fs::read_to_string(workspace_root().join(".ci/run")).unwrap();
    assert_eq!(
        ci.lines().filter(|l| l.trim() == cmds[1]).count(),
        1,
        ".ci/run must run exactly the README's test command"
    );
    // No link out of the repository.
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    assert!(
        !readme.contains("../shared"),
        "README links outside the repository"
    );
}

#[test]
fn readme_quickstart_first_command_in_a_fresh_clone_replays_both_incidents() {
    let t = "readme_quickstart_first_command_in_a_fresh_clone_replays_both_incidents";
    if !need_root(t)
        || !need_tool(t, "git")
        || !need_tool(t, "bindfs")
        || !need_tool(t, "mkfs.ext4")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let first = quickstart().into_iter().next().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let clone = tmp.path().join("k8s-storage-checks");
    let out = Cmd::new("git")
        .args(["clone", "--quiet", "--no-hardlinks"])
        .arg(workspace_root())
        .arg(&clone)
        .run();
    assert_eq!(out.code, 0, "git clone: {out:?}");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    let out = Cmd::new("sh")
        .arg("-c")
        .arg(&first)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("KUBECONFIG")
        .current_dir(&clone)
        .run();
    assert_eq!(out.code, 0, "{first}: {out:?}");
    assert!(
        out.stdout.contains("mode: real kernel (root)"),
        "{}",
        out.stdout
    );
    assert_replayed(&out.stdout);
    // The real-kernel scenes: the ext4 error path and the stopped FUSE daemon.
    assert!(
        out.stdout.contains("trigger_fs_error written"),
        "{}",
        out.stdout
    );
    let stale = &sections(&out.stdout)
        .into_iter()
        .find(|(c, _)| c == "check_stale_csi_mounts")
        .unwrap()
        .1;
    assert!(stale.contains("hung pod mount"), "{stale}");
    assert_nothing_left(&sandbox_of(&out.stdout));
}

#[test]
fn without_the_kernel_the_replay_uses_files_and_says_so() {
    let out = Cmd::check("k8s-storage-checks-replay")
        .arg("--bin-dir")
        .arg(e2e::bin_dir())
        .arg("--files")
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("mode: file inputs"), "{}", out.stdout);
    assert_replayed(&out.stdout);
    assert_nothing_left(&sandbox_of(&out.stdout));
}

#[test]
fn ctrl_c_in_the_middle_leaves_nothing_behind() {
    let t = "ctrl_c_in_the_middle_leaves_nothing_behind";
    if !need_root(t) || !need_tool(t, "bindfs") || !need_tool(t, "mkfs.ext4") {
        return;
    }
    let _machine = e2e::shared();
    let mut child = Command::new(e2e::bin("k8s-storage-checks-replay"))
        .arg("--bin-dir")
        .arg(e2e::bin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let sandbox = sandbox_of(&first);
    // Once the second scene runs, the loop device, the mounts and the stopped FUSE daemon exist.
    for l in lines.by_ref() {
        if l.unwrap().starts_with("━━━ 2/") {
            break;
        }
    }
    let mi = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("mountinfo")).ok())
        .any(|m| m.contains(&*sandbox.to_string_lossy()));
    assert!(mi, "the replay's mounts should exist by now");
    // Keep reading (a closed pipe must not be what ends it).
    let drain = std::thread::spawn(move || lines.count());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    drain.join().unwrap();
    assert_nothing_left(&sandbox);
}
