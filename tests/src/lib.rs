//! End-to-end harness: runs the release-built binaries as an operator would, against real things
//! (loop-device filesystems in a private mount namespace, FUSE daemons, NRPE, the test API server).
//!
//! - [`bin`] builds the release binaries once per test process (`./build-static`)
//!   and returns a binary's path; `E2E_BIN_DIR` points at prebuilt ones instead.
//! - [`run`] / [`Cmd`] run a binary and check the plugin protocol on its answer.
//! - [`need_root`] decides whether a privileged test can run: not root → `skipped: needs root`,
//!   but with `CI=true` a skip is a failure.
//! - [`Ns`] is a private mount namespace held open by a helper process: mounts made in it vanish
//!   when it is dropped (or when the test process dies), and loop devices attached by [`Ns::loop_fs`]
//!   detach themselves (autoclear).
//! - [`apiserver`] is a loopback HTTPS Kubernetes API server with its own CA, auth and faults.
//! - [`exclusive`] / [`shared`] ([`serial`]): the tests that change the machine run one at a time
//!   and never beside a test that makes mounts (every [`Ns`] holds [`shared`]).
//!
//! The tests themselves are one binary, `tests/main.rs`, one module per check and per concern.

pub mod apiserver;
pub mod control_plane;

pub mod logs;
pub mod longhorn;
pub mod serial;
pub mod sysfs;

pub use serial::{exclusive, shared};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The workspace root (parent of tests/).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Directory holding the release program, built once per test process by `./build-static
/// --no-install` (the one place that decides the release target: static musl when its target is
/// installed, else static glibc; it never installs a toolchain target from a test run), with
/// every check's name and the textfile runner's as a link to it: tests run the checks by their
/// names. `E2E_BIN_DIR` points at a prebuilt one instead.
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(d) = std::env::var("E2E_BIN_DIR") {
            return PathBuf::from(d);
        }
        let root = workspace_root();
        let out = Command::new("sh")
            .current_dir(&root)
            .args(["build-static", "--no-install", "--quiet"])
            .stderr(Stdio::inherit())
            .output()
            .expect("run ./build-static");
        assert!(out.status.success(), "./build-static failed");
        let stdout = String::from_utf8(out.stdout).expect("build-static prints a UTF-8 path");
        let dir = stdout
            .lines()
            .last()
            .expect("build-static prints the binaries' directory");
        PathBuf::from(dir)
    })
    .clone()
}

/// Path of a release binary of the suite: a check's name (a link to the one program), the
/// textfile runner's, or `k8s-storage-checks` itself.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} was not built", p.display());
    p
}

/// Copy an executable to `to` (mode and owner as `cp` leaves them) so that it can be run at once.
/// `std::fs::copy` writes through a descriptor of this process: a concurrently running test that
/// forks meanwhile holds that descriptor until its child execs, and an exec of the copy then
/// fails with ETXTBSY ("Text file busy"; seen in the full suite). `cp` writes in a process of its
/// own, which has ended with its descriptor when this returns.
pub fn copy_executable(from: &Path, to: &Path) {
    let out = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run cp");
    assert!(
        out.status.success(),
        "cp {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every check binary of the suite that exists in the workspace (crates/check_*).
pub fn all_checks() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(workspace_root().join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("check_"))
        .collect();
    v.sort();
    v
}

/// What a run printed and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn first_line(&self) -> &str {
        self.stdout.lines().next().unwrap_or("")
    }

    /// The status word of the first line (`OK`, `WARNING`, ...).
    pub fn status(&self) -> &str {
        self.first_line().split(' ').nth(1).unwrap_or("")
    }

    /// Assert the plugin protocol: exit code 0..3, `NAME STATUS - ...` first line whose status
    /// matches the exit code, at most one `|` in the whole output and only on the first line.
    pub fn assert_protocol(&self, name: &str) -> &Self {
        assert!(
            (0..=3).contains(&self.code),
            "exit code {} outside 0..3: {self:?}",
            self.code
        );
        let want = ["OK", "WARNING", "CRITICAL", "UNKNOWN"][self.code as usize];
        let prefix = format!("{name} {want} - ");
        assert!(
            self.first_line().starts_with(&prefix),
            "first line should start with {prefix:?}: {self:?}"
        );
        assert!(self.first_line().len() <= 1024, "first line over 1 KiB");
        for l in self.stdout.lines().skip(1) {
            assert!(!l.contains('|'), "a '|' outside the first line: {l:?}");
        }
        self
    }

    /// Assert exit code and status word together.
    pub fn assert_status(&self, name: &str, code: i32) -> &Self {
        self.assert_protocol(name);
        assert_eq!(self.code, code, "unexpected exit code: {self:?}");
        self
    }

    /// A `--format json` answer, parsed.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// (signal, status) of every finding of a `--format json` answer, sorted.
    pub fn signals(&self) -> Vec<(String, String)> {
        let v = self.json();
        let mut s: Vec<(String, String)> = v["findings"]
            .as_array()
            .unwrap_or_else(|| panic!("{self:?}"))
            .iter()
            .map(|f| {
                (
                    f["signal"].as_str().unwrap_or("").to_string(),
                    f["status"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        s.sort();
        s
    }

    /// The finding of `signal` in a `--format json` answer.
    pub fn finding(&self, signal: &str) -> serde_json::Value {
        self.json()["findings"]
            .as_array()
            .unwrap_or_else(|| panic!("{self:?}"))
            .iter()
            .find(|f| f["signal"] == signal)
            .cloned()
            .unwrap_or_else(|| panic!("no {signal}: {self:?}"))
    }

    /// A perfdata value by label from the first line.
    pub fn perf(&self, label: &str) -> Option<f64> {
        let (_, perf) = self.first_line().split_once(" | ")?;
        perf.split(' ').find_map(|item| {
            let (l, rest) = item.split_once('=')?;
            if l.trim_matches('\'') != label {
                return None;
            }
            let v: String = rest
                .split(';')
                .next()?
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
                .collect();
            v.parse().ok()
        })
    }
}

/// A command to run, with optional stdin and environment.
pub struct Cmd {
    cmd: Command,
    stdin: Option<Vec<u8>>,
}

impl Cmd {
    pub fn new(program: impl AsRef<std::ffi::OsStr>) -> Cmd {
        Cmd {
            cmd: Command::new(program),
            stdin: None,
        }
    }
    /// A suite binary by name.
    pub fn check(name: &str) -> Cmd {
        Cmd::new(bin(name))
    }
    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.cmd.arg(a);
        self
    }
    pub fn args<I, S>(mut self, a: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(a);
        self
    }
    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.cmd.env(k, v);
        self
    }
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cmd.current_dir(dir);
        self
    }
    pub fn env_remove(mut self, k: &str) -> Cmd {
        self.cmd.env_remove(k);
        self
    }
    /// No credentials from the test host's environment: no `$KUBECONFIG`, no in-cluster service
    /// host, no `~/.kube/config` (HOME points nowhere).
    pub fn without_host_credentials(self) -> Cmd {
        self.env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", "/nonexistent")
    }
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Cmd {
        self.stdin = Some(data.into());
        self
    }
    pub fn run(mut self) -> Output {
        let start = Instant::now();
        self.cmd
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.cmd.spawn().expect("spawn");
        if let Some(data) = self.stdin.take() {
            let mut si = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                let _ = si.write_all(&data);
            });
        }
        let out = child.wait_with_output().expect("wait");
        let out = Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: start.elapsed(),
        };
        // Issue 26: every non-OK finding of every check has a step of its own, in every format
        // and every test that runs a check: a `next:` line with only the runbook is a bug.
        if let Some(l) = out
            .stdout
            .lines()
            .find(|l| plugin::report::shows_missing_step(l))
        {
            panic!("a non-OK finding without a next step of its own: {l}\n{out:?}");
        }
        out
    }
}

/// Run a suite binary with arguments.
pub fn run<I, S>(name: &str, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Cmd::check(name).args(args).run()
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True when a privileged test may run. Not root: prints `skipped: needs root` and returns false,
/// unless `CI=true`, where a skip is a failure.
pub fn need_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: needs root, and with CI=true a skip is a failure");
    }
    println!("{test}: skipped: needs root");
    false
}

/// True when an external tool exists; with CI=true a missing tool is a failure (.ci/run installs it).
pub fn need_tool(test: &str, tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if found {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: needs {tool}, and with CI=true a skip is a failure");
    }
    println!("{test}: skipped: needs {tool}");
    false
}

/// A private mount namespace, held open by a helper process until dropped.
///
/// The holder is `unshare -m --propagation private cat`: it lives as long as its stdin pipe, so
/// the namespace (and every mount in it) goes away even when the test process dies. Commands run
/// inside with `nsenter -t <pid> -m`.
pub struct Ns {
    holder: Child,
    /// Background processes started in the namespace (FUSE daemons...), killed on drop.
    pids: Vec<i32>,
    /// No machine-changing test runs while a namespace exists (see [`serial`]); released after
    /// the namespace has ended.
    _machine: serial::Shared,
}

impl Ns {
    pub fn new() -> Ns {
        let machine = shared();
        let holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("unshare -m (needs root)");
        let ns = Ns {
            holder,
            pids: Vec::new(),
            _machine: machine,
        };
        // Wait until the holder is inside its own namespace: its mnt ns differs from ours.
        let mine = std::fs::read_link("/proc/self/ns/mnt").expect("own mnt ns");
        let path = format!("/proc/{}/ns/mnt", ns.pid());
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(theirs) = std::fs::read_link(&path) {
                if theirs != mine {
                    break;
                }
            }
            assert!(
                Instant::now() < until,
                "unshare did not enter a new namespace"
            );
            std::thread::yield_now();
        }
        ns
    }

    pub fn pid(&self) -> u32 {
        self.holder.id()
    }

    /// A command that runs inside the namespace.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Cmd {
        Cmd::new("nsenter")
            .arg("-t")
            .arg(self.pid().to_string())
            .arg("-m")
            .arg("--")
            .arg(program)
    }

    /// Run a suite binary inside the namespace.
    pub fn check(&self, name: &str) -> Cmd {
        self.cmd(bin(name))
    }

    /// Run a shell script inside the namespace; panics with its output if it fails.
    pub fn sh(&self, script: &str) -> Output {
        let out = self.cmd("sh").arg("-ec").arg(script).run();
        assert_eq!(out.code, 0, "script failed:\n{script}\n{out:?}");
        out
    }

    /// Run a shell script inside the namespace and return its output whatever it exits with.
    pub fn sh_any(&self, script: &str) -> Output {
        self.cmd("sh").arg("-c").arg(script).run()
    }

    /// Make a filesystem image of `size_mb` MiB with `mkfs_cmd` (e.g. `mkfs.ext4 -q -F`), attach it
    /// to a free loop device and mount that with `<opts>` at `mount_point` (created). Returns the
    /// loop device (`/dev/loopN`), which detaches itself when unmounted (autoclear).
    ///
    /// Not `mount -o loop`: that looks for an existing loop device over the same file and so
    /// touches the backing file of every loop device, which hangs while any of them sits on a
    /// stopped FUSE daemon (the D-state fault-matrix row makes exactly that).
    pub fn loop_fs(
        &self,
        image: &Path,
        size_mb: u32,
        mkfs_cmd: &str,
        opts: &str,
        mount_point: &Path,
    ) -> String {
        let o = if opts.is_empty() {
            String::new()
        } else {
            format!("-o {opts}")
        };
        let out = self.sh(&format!(
            "truncate -s {size_mb}M '{img}' && {mkfs_cmd} '{img}' >/dev/null && mkdir -p '{mp}' \
             && dev=$(losetup --find --show '{img}') \
             && {{ mount {o} \"$dev\" '{mp}' || {{ losetup -d \"$dev\"; exit 1; }}; }} \
             && losetup -d \"$dev\" && echo \"$dev\"",
            img = image.display(),
            mp = mount_point.display()
        ));
        out.stdout.trim().to_string()
    }

    /// Remember a background process to kill when the namespace is dropped.
    pub fn own(&mut self, pid: i32) {
        self.pids.push(pid);
    }
}

impl Default for Ns {
    fn default() -> Self {
        Ns::new()
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        for &p in &self.pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        // Closing the holder's stdin ends `cat`, which ends the namespace.
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// A kubelet root laid out like a real node's, in a temp directory.
pub struct KubeletTree {
    pub root: PathBuf,
}

impl KubeletTree {
    pub fn new(base: &Path) -> KubeletTree {
        let root = base.join("var/lib/kubelet");
        std::fs::create_dir_all(root.join("pods")).unwrap();
        std::fs::create_dir_all(root.join("plugins/kubernetes.io/csi")).unwrap();
        KubeletTree { root }
    }

    /// `pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`, with vol_data.json beside it.
    pub fn pod_csi_mount(&self, pod_uid: &str, pv: &str, driver: &str) -> PathBuf {
        let dir = self
            .root
            .join("pods")
            .join(pod_uid)
            .join("volumes/kubernetes.io~csi")
            .join(pv);
        std::fs::create_dir_all(dir.join("mount")).unwrap();
        let vd = serde_json::json!({
            "specVolID": pv, "volumeHandle": pv, "driverName": driver,
            "nodeName": "node-1", "attachmentID": format!("csi-{pv}"), "volumeLifecycleMode": "Persistent"
        });
        std::fs::write(dir.join("vol_data.json"), vd.to_string()).unwrap();
        dir.join("mount")
    }

    /// The pre-1.24 staging layout, which names the PV in the path itself:
    /// `plugins/kubernetes.io/csi/pv/<pv>/globalmount` (a path only: the test mounts there).
    pub fn legacy_staging_mount(&self, pv: &str) -> PathBuf {
        self.root
            .join("plugins/kubernetes.io/csi/pv")
            .join(pv)
            .join("globalmount")
    }

    /// `plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount` with vol_data.json.
    pub fn staging_mount(&self, driver: &str, handle: &str, sha256_hex: &str) -> PathBuf {
        let dir = self
            .root
            .join("plugins/kubernetes.io/csi")
            .join(driver)
            .join(sha256_hex);
        std::fs::create_dir_all(dir.join("globalmount")).unwrap();
        let vd = serde_json::json!({"driverName": driver, "volumeHandle": handle});
        std::fs::write(dir.join("vol_data.json"), vd.to_string()).unwrap();
        dir.join("globalmount")
    }
}

/// Write a JSON document (a `kubectl get -o json` list, a PV list...) to `dir/name`; its path, as
/// text for argument lists.
pub fn write_json(dir: &Path, name: &str, v: &serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p.to_str().expect("a UTF-8 temp path").to_string()
}

/// sha256 hex of a string via coreutils (the staging directory name of a volume handle).
pub fn sha256_hex(s: &str) -> String {
    let out = Cmd::new("sha256sum").stdin(s.as_bytes().to_vec()).run();
    out.stdout
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// A Debian bookworm root (minbase + nagios-nrpe-server + systemd + sudo), debootstrapped once and
/// cached under `<target>/container-emu/` (`E2E_DEBIAN_MIRROR` overrides the mirror). Shared by
/// the container-mode test (the NRPE image's base) and the package test (a fresh machine to
/// install the .deb on, through an overlay: the cache itself is never changed).
pub fn debian_nrpe_base() -> PathBuf {
    // One debootstrap at a time: the container-mode and package tests both ask for it.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    let dir = target.join("container-emu/debian-bookworm-nrpe");
    let stamp = "bookworm minbase nagios-nrpe-server,systemd,sudo";
    let stamp_file = dir.join(".k8s-storage-checks-base");
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s.trim() == stamp) {
        return dir;
    }
    let tmp = dir.with_extension("tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&dir);
    let mirror = std::env::var("E2E_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    eprintln!(
        "debootstrapping Debian bookworm + nagios-nrpe-server into {} (a few minutes, once)",
        dir.display()
    );
    let st = Command::new("debootstrap")
        .args([
            "--variant=minbase",
            "--include=nagios-nrpe-server,systemd,sudo",
            "bookworm",
        ])
        .arg(&tmp)
        .arg(&mirror)
        .stdin(Stdio::null())
        .status()
        .expect("run debootstrap");
    assert!(st.success(), "debootstrap failed (mirror {mirror})");
    std::fs::rename(&tmp, &dir).unwrap();
    std::fs::write(&stamp_file, stamp).unwrap();
    eprintln!("debootstrap done");
    dir
}

/// bindfs FUSE mounts with known daemons (dead and hung mounts).
pub mod fuse;

/// Real monitoring engines: daemons, the incidents' node, the shipped commands for it.
pub mod engines;
/// An Alertmanager webhook receiver on loopback.
pub mod webhook;

/// What writes a run's stdin, on a thread of its own ([`run_max_rss`]).
pub type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// Run the suite binary `name` with `args` under GNU time (`/usr/bin/time -f %M`), optionally
/// feeding its stdin from `feed` (written on a thread as the check reads), and return what it
/// printed and its peak RSS in KiB: the largest of the check process and the worker it forked
/// and reaped (`wait4`'s rusage covers waited-for descendants), mapped file pages included.
/// Measured from outside, never from this process: a child forked from the test carries the
/// test's own RSS in its high-water mark. (The same measure as fault_matrix's /dev/zero row.)
pub fn run_max_rss(name: &str, args: &[&str], feed: Option<Feed>) -> (Output, i64) {
    let f = tempfile::NamedTempFile::new().unwrap();
    let start = Instant::now();
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(f.path())
        .arg(bin(name))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent")
        .stdin(if feed.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn /usr/bin/time");
    let writer = feed.map(|feed| {
        let mut si = child.stdin.take().expect("stdin");
        std::thread::spawn(move || {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut si);
            feed(&mut w);
            let _ = w.flush();
        })
    });
    let out = child.wait_with_output().expect("wait");
    if let Some(w) = writer {
        let _ = w.join();
    }
    let text = std::fs::read_to_string(f.path()).unwrap();
    let kib = text
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no peak RSS from /usr/bin/time: {text:?}"));
    (
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: start.elapsed(),
        },
        kib,
    )
}
