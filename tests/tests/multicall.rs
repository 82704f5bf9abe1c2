//! The one program (`k8s-storage-checks`, issue 20): it runs the check it is called by (`argv[0]`)
//! or the one its first argument names, answers UNKNOWN for a name it does not have, and a copy
//! with file capabilities keeps, for the check it runs, only the capabilities that check needs:
//! read from the kernel (`/proc/PID/status`) while the check runs.

use e2e::{bin, bin_dir, need_root, need_tool, Cmd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const PROGRAM: &str = "k8s-storage-checks";
const CAP_DAC_READ_SEARCH: u64 = 1 << 2;
const CAP_SYSLOG: u64 = 1 << 34;
/// A group no account uses: the agent's group of these copies.
const AGENT_GID: u32 = 64_918;

#[test]
fn every_name_in_the_build_directory_runs_its_own_check() {
    let list = Cmd::new(bin(PROGRAM)).arg("--list").run();
    assert_eq!(list.code, 0, "{list:?}");
    let names: Vec<&str> = list
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    for c in e2e::all_checks() {
        assert!(names.contains(&c.as_str()), "{c} not in --list: {list:?}");
        // The build directory's name is a link to the program, and runs that check.
        let link = bin_dir().join(&c);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from(PROGRAM),
            "{}",
            link.display()
        );
        let help = Cmd::check(&c).arg("--help").run();
        assert_eq!(help.code, 3, "{help:?}");
        assert!(
            help.stdout.contains(&format!("Usage: {c} ")),
            "{c} --help is not its own: {help:?}"
        );
        // The same through the first argument: the same text.
        let first = Cmd::new(bin(PROGRAM)).args([&c, "--help"]).run();
        assert_eq!((first.code, &first.stdout), (3, &help.stdout), "{c}");
    }
    let runner = Cmd::check("k8s-storage-checks-textfile")
        .arg("--help")
        .run();
    assert!(runner.stdout.contains("--plugin-dir"), "{runner:?}");
    assert!(
        runner
            .stdout
            .contains("Usage: k8s-storage-checks-textfile "),
        "{runner:?}"
    );
    let sub = Cmd::new(bin(PROGRAM)).args(["textfile", "--help"]).run();
    assert!(sub.stdout.contains("--plugin-dir"), "{sub:?}");
    // The usage names the command as it was typed, not a bare `textfile`.
    assert!(
        sub.stdout.contains("Usage: k8s-storage-checks textfile "),
        "{sub:?}"
    );
}

#[test]
fn the_program_answers_for_itself_and_unknown_names_are_unknown() {
    let help = Cmd::new(bin(PROGRAM)).arg("--help").run();
    assert_eq!(help.code, 3, "{help:?}");
    for c in e2e::all_checks() {
        assert!(help.stdout.contains(&c), "{c}: {help:?}");
    }
    let v = Cmd::new(bin(PROGRAM)).arg("--version").run();
    assert_eq!(v.code, 3);
    assert_eq!(
        v.stdout,
        format!("{PROGRAM} {}\n", env!("CARGO_PKG_VERSION"))
    );
    for args in [&["check_nope", "-t", "5"][..], &["-w"][..], &[][..]] {
        let out = Cmd::new(bin(PROGRAM)).args(args).run();
        out.assert_status("K8S_STORAGE_CHECKS", 3);
    }
    let out = Cmd::new(bin(PROGRAM)).arg("check_nope").run();
    assert!(
        out.first_line().contains("no check named 'check_nope'")
            && out.first_line().contains("check_ro_pvc_mounts"),
        "{out:?}"
    );
    // A name like a check's that this version does not have (a stale link): UNKNOWN, and its
    // first argument is not taken for a name.
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("check_gone");
    std::os::unix::fs::symlink(bin(PROGRAM), &stale).unwrap();
    let out = Cmd::new(&stale).arg("check_watch_cache").run();
    out.assert_status("K8S_STORAGE_CHECKS", 3);
    assert!(
        out.first_line().contains("no check named 'check_gone'"),
        "{out:?}"
    );
}

/// CapPrm and CapEff of a process.
fn caps_of(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let v = s
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"));
        u64::from_str_radix(v.trim(), 16).unwrap()
    };
    (field("CapPrm:"), field("CapEff:"))
}

/// The children of a process (the check's forked worker).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `program args...` as `nobody` in the agent's group, its input file a FIFO: while the check
/// waits in open() for a writer, the kernel's view of its capabilities is read; then it gets an
/// empty input, and must answer within its -t.
fn caps_while_running(program: &Path, args: &[&str], fifo: &Path) -> ((u64, u64), (u64, u64)) {
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            &format!("--groups={AGENT_GID}"),
            "--",
        ])
        .arg(program)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Opening the FIFO for writing returns once the check has opened it for reading.
    let (tx, rx) = mpsc::channel();
    let f = fifo.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::OpenOptions::new().write(true).open(f));
    });
    let writer = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(w) => w.unwrap(),
        Err(_) => {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            // Unblock the opener thread.
            let _ = std::fs::File::open(fifo);
            panic!(
                "{} {args:?} never opened {}: {}{}",
                program.display(),
                fifo.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let parent = caps_of(pid);
    let workers = children_of(pid);
    assert_eq!(workers.len(), 1, "the check's worker: {workers:?}");
    let worker = caps_of(workers[0]);
    drop(writer);
    // Its end, waited for on a thread (the check's -t ends it; 30 s is the test's bound).
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the check did not end")
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!((0..=3).contains(&code), "exit {code}");
    assert!(!out.stdout.is_empty(), "no answer");
    (parent, worker)
}

/// A copy carrying both capabilities (a wrong install, or a first argument naming another check
/// than the copy's): each check keeps only its own, in the process and in its worker.
#[test]
fn a_copy_keeps_only_the_capabilities_of_the_check_it_runs() {
    let t = "a_copy_keeps_only_the_capabilities_of_the_check_it_runs";
    if !need_root(t) || !need_tool(t, "setcap") || !need_tool(t, "setpriv") {
        return;
    }
    let lab = tempfile::Builder::new()
        .prefix("multicall-")
        .tempdir_in("/tmp")
        .unwrap();
    chmod(lab.path(), 0o755);
    let fifo = lab.path().join("input");
    let mk = Cmd::new("mkfifo").arg(&fifo).run();
    assert_eq!(mk.code, 0, "{mk:?}");
    chmod(&fifo, 0o666);
    let copy = |name: &str| {
        let p = lab.path().join(name);
        e2e::copy_executable(&bin(PROGRAM), &p);
        std::os::unix::fs::chown(&p, Some(0), Some(AGENT_GID)).unwrap();
        chmod(&p, 0o750);
        let out = Cmd::new("setcap")
            .arg("cap_dac_read_search,cap_syslog=ep")
            .arg(&p)
            .run();
        assert_eq!(out.code, 0, "setcap: {out:?}");
        p
    };
    let program = copy(PROGRAM);
    let as_check = copy("check_ro_pvc_mounts");
    // An empty kubelet root anyone may read (the check looks for it before its mount table).
    let kubelet = lab.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
    chmod(&kubelet, 0o755);
    chmod(&kubelet.join("pods"), 0o755);
    let kubelet_s = kubelet.to_str().unwrap();
    let fifo_s = fifo.to_str().unwrap();
    let cases: [(&Path, Vec<&str>, u64); 3] = [
        // First argument: a check that needs nothing keeps nothing.
        (
            &program,
            vec![
                "check_stuck_scheduled",
                "--pods-json",
                fifo_s,
                "--node",
                "n1",
                "-t",
                "10",
            ],
            0,
        ),
        // First argument: the kubelet check keeps CAP_DAC_READ_SEARCH, not CAP_SYSLOG.
        (
            &program,
            vec![
                "check_ro_pvc_mounts",
                "--kubelet-root",
                kubelet_s,
                "--mountinfo",
                fifo_s,
                "-t",
                "10",
            ],
            CAP_DAC_READ_SEARCH,
        ),
        // The name it is called by: the same.
        (
            &as_check,
            vec![
                "--kubelet-root",
                kubelet_s,
                "--mountinfo",
                fifo_s,
                "-t",
                "10",
            ],
            CAP_DAC_READ_SEARCH,
        ),
    ];
    for (p, args, want) in cases {
        let (parent, worker) = caps_while_running(p, &args, &fifo);
        assert_eq!(
            parent.0,
            want,
            "{} {args:?}: permitted {:#x}",
            p.display(),
            parent.0
        );
        assert_eq!(worker.0, want, "{} {args:?}: worker", p.display());
        assert_eq!(parent.0 & CAP_SYSLOG, 0);
        // Nothing effective outside the node's own sources (lowered to the caller's level).
        assert_eq!(parent.1 & !want, 0, "{args:?}: effective {:#x}", parent.1);
    }
}
