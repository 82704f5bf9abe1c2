//! The fault matrix (issue 10): every check × every fault it can meet, one table per fault family,
//! the same invariants asserted for every row:
//!
//! - exit code in 0..3, first line `NAME STATUS - summary` with the expected status and a phrase an
//!   operator understands; where a row pins them, phrases the long output must hold (notes,
//!   findings) and phrases it must not (a state entry that must never be reported);
//! - output safety: at most one `|`, only on the first line, no control characters, first line
//!   ≤ 1024 bytes, perfdata labels `^[a-z0-9_]+$` (hostile names rows exist to break this);
//! - no secret (the test token, the client key) in stdout or stderr, at -v, -vv and -vvv in turn;
//! - finished within `-t` plus a generous margin (a correctness bound, not a benchmark);
//! - no leftover process whose command line holds the row's unique marker (a forked check worker
//!   has its parent's command line), our own FUSE daemons excepted.
//!
//! The families:
//! - API faults (refused, slow, HTTP 401/403/404/500, truncated, garbage, dropped, wrong CA,
//!   expired client certificate) for every check that talks to the API;
//! - file and directory inputs (missing, unreadable, empty, truncated, huge, non-UTF-8) for every
//!   node check;
//! - hostile names, the clock jumping, /dev/kmsg without CAP_SYSLOG;
//! - FUSE faults (needs root and bindfs): check_ro_pvc_mounts and check_stale_csi_mounts over a
//!   hung (SIGSTOPped) and a killed (ENOTCONN) daemon under a kubelet pod volume path, and both
//!   beside a healthy one, run inside the mount namespace that holds them;
//! - state faults for the checks with `--state-dir` (check_kubelet_nested_ops,
//!   check_storage_kernel_errors): a state file garbled, empty, truncated, non-UTF-8, of another
//!   shape, a directory; a saved position past the end of the log, another inode, another boot,
//!   kept entries from tomorrow; a state dir missing, not writable (run as nobody), a file. The
//!   input holds a real failure, so each row proves the alert is not lost; each runs twice, and
//!   the second run proves the state was rewritten (or, when it cannot be, that nothing is stuck).
//!
//! Every row runs the RELEASE binary. Failures are collected so one run reports every broken row.

use e2e::apiserver::fixtures::{jiva_replica, kubectl_list, running, scheduled_no_status, Rep};
use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{unused_addr, ApiServer, Fault, KubeAuth, KubeCa};
use e2e::fuse::processes_with;
use e2e::{bin, Cmd, KubeletTree, Output};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The -t of every row.
const T: u64 = 3;
/// Margin over -t (process start, TLS, the renderer): generous on a shared 2-core machine.
const MARGIN: Duration = Duration::from_secs(3);
/// The bearer token of every kubeconfig: must never appear in any output.
const TOKEN: &str = "fm-S3cret-T0ken-7d41c9e2b5";
const NODE: &str = "fm-node-1";

/// One row of the matrix.
pub(crate) struct Row {
    label: String,
    bin: &'static str,
    name: &'static str,
    args: Vec<OsString>,
    /// Run as nobody (uid/gid 65534, no groups) through setpriv.
    nobody: bool,
    /// Run inside this mount namespace (holder pid).
    ns: Option<u32>,
    want: i32,
    /// Phrases the first line must contain (case-insensitive).
    phrases: Vec<&'static str>,
    /// Phrases the whole standard output must contain (case-insensitive): long output, notes.
    long: Vec<&'static str>,
    /// Phrases that must appear nowhere in the standard output (case-insensitive).
    absent: Vec<&'static str>,
    /// Extra secrets to grep for besides TOKEN.
    secrets: Vec<String>,
    /// Processes of ours that may match the marker (FUSE daemons).
    own_pids: Vec<i32>,
    /// Perfdata values must not be negative (clock rows).
    no_negative: bool,
    /// What leftover processes would carry on their command line (default: the longest temp
    /// path among the arguments).
    marker: Option<String>,
    /// The row's -t in seconds (default T).
    t: u64,
}

pub(crate) fn row(label: impl Into<String>, bin: &'static str, name: &'static str) -> Row {
    Row {
        label: label.into(),
        bin,
        name,
        args: Vec::new(),
        nobody: false,
        ns: None,
        want: 3,
        phrases: Vec::new(),
        long: Vec::new(),
        absent: Vec::new(),
        secrets: Vec::new(),
        own_pids: Vec::new(),
        no_negative: false,
        marker: None,
        t: T,
    }
}

impl Row {
    pub(crate) fn arg(mut self, a: impl Into<OsString>) -> Row {
        self.args.push(a.into());
        self
    }
    pub(crate) fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, a: I) -> Row {
        self.args.extend(a.into_iter().map(Into::into));
        self
    }
    pub(crate) fn expect(mut self, code: i32, phrases: &[&'static str]) -> Row {
        self.want = code;
        self.phrases = phrases.to_vec();
        self
    }
    fn nobody(mut self) -> Row {
        self.nobody = true;
        self
    }
    /// Phrases the long output (anywhere in stdout) must hold.
    pub(crate) fn long(mut self, phrases: &[&'static str]) -> Row {
        self.long.extend_from_slice(phrases);
        self
    }
    /// Phrases stdout must not hold.
    fn absent(mut self, phrases: &[&'static str]) -> Row {
        self.absent.extend_from_slice(phrases);
        self
    }
}

fn s(p: &Path) -> OsString {
    p.as_os_str().to_owned()
}

/// The checks' verbosity cycles through -v, -vv, -vvv so the secret grep covers every level.
fn verbosity(i: usize) -> &'static str {
    ["-v", "-vv", "-vvv"][i % 3]
}

fn marker(label: &str) -> String {
    let clean: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("fm-marker-{}-{clean}", std::process::id())
}

fn exec(r: &Row, i: usize) -> (Output, Vec<String>) {
    // The row's unique marker: a path in its arguments (per-row temp files, kubeconfigs).
    let mark = r.marker.clone().unwrap_or_else(|| {
        r.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .filter(|a| a.contains("/tmp/"))
            .max_by_key(|a| a.len())
            .unwrap_or_else(|| marker(&r.label))
    });
    let b = bin(r.bin);
    let mut cmd = match (r.ns, r.nobody) {
        (Some(pid), _) => Cmd::new("nsenter")
            .args(["-t", &pid.to_string(), "-m", "--"])
            .arg(&b),
        (None, true) => Cmd::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&b),
        (None, false) => Cmd::new(&b),
    };
    cmd = cmd
        .without_host_credentials()
        .args(["-t", &r.t.to_string(), verbosity(i)])
        .args(&r.args);
    let out = cmd.run();
    let mut errs = Vec::new();
    let first = out.first_line().to_string();
    let all = format!("{}{}", out.stdout, out.stderr);
    if !(0..=3).contains(&out.code) {
        errs.push(format!("exit code {} outside 0..3", out.code));
    }
    let want = ["OK", "WARNING", "CRITICAL", "UNKNOWN"]
        .get(r.want as usize)
        .copied()
        .unwrap_or("?");
    if r.want < 0 {
        // Not pinned: the protocol still holds.
        let w = ["OK", "WARNING", "CRITICAL", "UNKNOWN"]
            .get(out.code as usize)
            .copied()
            .unwrap_or("?");
        if !first.starts_with(&format!("{} {w} - ", r.name)) {
            errs.push(format!("first line is not {} {w} - ...", r.name));
        }
    } else if out.code != r.want || !first.starts_with(&format!("{} {want} - ", r.name)) {
        errs.push(format!("want {} {want} (exit {})", r.name, r.want));
    }
    let low = first.to_lowercase();
    for p in &r.phrases {
        if !low.contains(&p.to_lowercase()) {
            errs.push(format!("first line lacks {p:?}"));
        }
    }
    let all_low = out.stdout.to_lowercase();
    for p in &r.long {
        if !all_low.contains(&p.to_lowercase()) {
            errs.push(format!("output lacks {p:?}"));
        }
    }
    for p in &r.absent {
        if all_low.contains(&p.to_lowercase()) {
            errs.push(format!("output holds {p:?}"));
        }
    }
    // Output safety.
    if first.len() > 1024 {
        errs.push("first line over 1024 bytes".into());
    }
    if out.stdout.matches('|').count() > 1 {
        errs.push("more than one '|'".into());
    }
    if out.stdout.lines().skip(1).any(|l| l.contains('|')) {
        errs.push("'|' after the first line".into());
    }
    if out
        .stdout
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        errs.push("control character in stdout".into());
    }
    if let Some((_, perf)) = first.split_once(" | ") {
        for item in perf.split(' ').filter(|x| !x.is_empty()) {
            let (l, rest) = item.split_once('=').unwrap_or((item, ""));
            let l = l.trim_matches('\'');
            if l.is_empty()
                || !l
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
            {
                errs.push(format!("perfdata label {l:?}"));
            }
            if r.no_negative && rest.starts_with('-') {
                errs.push(format!("negative perfdata {item:?}"));
            }
        }
    }
    // Secrets.
    for sec in std::iter::once(TOKEN.to_string()).chain(r.secrets.iter().cloned()) {
        if all.contains(&sec) {
            errs.push(format!("secret {sec:.12}… in the output"));
        }
    }
    if out.elapsed > Duration::from_secs(r.t) + MARGIN {
        errs.push(format!(
            "took {:?}, over -t {}s + {MARGIN:?}",
            out.elapsed, r.t
        ));
    }
    let left: Vec<i32> = processes_with(&mark)
        .into_iter()
        .filter(|p| !r.own_pids.contains(p))
        .collect();
    if !left.is_empty() {
        errs.push(format!("leftover processes {left:?}"));
    }
    (out, errs)
}

/// Run every row, print the table, fail listing every broken row.
pub(crate) fn run_rows(rows: Vec<Row>) {
    let mut failed = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let (out, errs) = exec(r, i);
        println!(
            "{:<60} exit {} {:>6.2}s  {}",
            r.label,
            out.code,
            out.elapsed.as_secs_f64(),
            out.first_line()
        );
        if !errs.is_empty() {
            failed.push(format!(
                "{}: {}\n    stdout: {:?}\n    stderr: {:?}",
                r.label,
                errs.join("; "),
                out.stdout,
                out.stderr
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} rows broken:\n{}",
        failed.len(),
        rows.len(),
        failed.join("\n")
    );
}

/// A directory every user may traverse (tempdirs are 0700; the nobody rows need to get in).
fn open_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn write(dir: &Path, name: &str, data: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, data).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

// ---------------------------------------------------------------------------------------------
// API faults

#[derive(Clone, Copy, Debug)]
enum ApiFault {
    Refused,
    Slow,
    Http(u16),
    Truncated,
    Garbage,
    Dropped,
    WrongCa,
    ExpiredCert,
    /// One answer of 40 MiB whatever was asked (issue 16: a server that ignores `limit`).
    IgnoresLimit,
}

const API_FAULTS: &[(ApiFault, i32, &str)] = &[
    (ApiFault::Refused, 3, "refused"),
    (ApiFault::Slow, 3, "timed out"),
    (ApiFault::Http(401), 3, "401"),
    (ApiFault::Http(403), 3, "403"),
    (ApiFault::Http(404), 3, "404"),
    (ApiFault::Http(500), 3, "500"),
    (ApiFault::Truncated, 3, ""),
    (ApiFault::Garbage, 3, ""),
    (ApiFault::Dropped, 3, ""),
    (ApiFault::WrongCa, 3, "certificate"),
    (ApiFault::ExpiredCert, 3, ""),
    (ApiFault::IgnoresLimit, 3, "more than 32 MiB"),
];

/// A kubeconfig for `srv` with the fault applied (server side faults are armed on `srv`), and
/// the extra secrets it holds (the client key).
fn faulty_kubeconfig(srv: &ApiServer, f: ApiFault) -> (PathBuf, Vec<String>) {
    srv.heal();
    let tok = || KubeAuth::Token(TOKEN.into());
    match f {
        ApiFault::Refused => (
            srv.kubeconfig_for(&format!("https://{}", unused_addr()), KubeCa::Inline, tok()),
            vec![],
        ),
        ApiFault::WrongCa => (srv.kubeconfig(KubeCa::Wrong, tok()), vec![]),
        ApiFault::ExpiredCert => {
            let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::CertExpired("fm-expired".into()));
            // The base64 of the key is inline: its middle is a distinctive secret.
            let text = std::fs::read_to_string(&kc).unwrap();
            let key = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("client-key-data: "))
                .unwrap()
                .to_string();
            let mid = key[key.len() / 2..key.len() / 2 + 40].to_string();
            (kc, vec![mid])
        }
        other => {
            let kc = srv.kubeconfig(KubeCa::Inline, tok());
            srv.fail(match other {
                ApiFault::Slow => Fault::Slow(Duration::from_secs(T + 4)),
                ApiFault::Http(c) => Fault::Http(c),
                ApiFault::Truncated => Fault::Truncated,
                ApiFault::Garbage => Fault::Garbage,
                ApiFault::Dropped => Fault::Drop,
                ApiFault::IgnoresLimit => Fault::IgnoresLimit(40 << 20),
                _ => unreachable!(),
            });
            (kc, vec![])
        }
    }
}

/// Runs the API fault rows of one check: `setup` fills the server, `base` gives the arguments
/// besides --kubeconfig.
fn api_rows(
    bin: &'static str,
    name: &'static str,
    srv: &ApiServer,
    base: &[OsString],
    overrides: &[(&str, i32, &'static str)],
) {
    let mut failed = Vec::new();
    for (i, &(f, want, phrase)) in API_FAULTS.iter().enumerate() {
        let label = format!("{bin} api {f:?}");
        let (kc, secrets) = faulty_kubeconfig(srv, f);
        let fname = format!("{f:?}");
        let (want, phrase) = overrides
            .iter()
            .find(|(n, _, _)| *n == fname)
            .map(|&(_, w, p)| (w, p))
            .unwrap_or((want, phrase));
        let mut r = row(label, bin, name)
            .arg("--kubeconfig")
            .arg(s(&kc))
            .args(base.iter().cloned());
        r.want = want;
        if !phrase.is_empty() {
            r.phrases = vec![phrase];
        }
        r.secrets = secrets;
        if matches!(f, ApiFault::IgnoresLimit) {
            // 40 MiB through the test server's TLS (a debug build) on a loaded machine: the
            // cap must be reached within -t, so give the row room; it still must answer in it.
            r.t = 10;
        }
        let (out, errs) = exec(&r, i);
        println!(
            "{:<60} exit {} {:>6.2}s  {}",
            r.label,
            out.code,
            out.elapsed.as_secs_f64(),
            out.first_line()
        );
        if !errs.is_empty() {
            failed.push(format!(
                "{}: {}\n    stdout: {:?}\n    stderr: {:?}",
                r.label,
                errs.join("; "),
                out.stdout,
                out.stderr
            ));
        }
    }
    srv.heal();
    assert!(failed.is_empty(), "broken rows:\n{}", failed.join("\n"));
}

#[test]
fn api_faults_stuck_scheduled() {
    let srv = ApiServer::start();
    srv.set("pods", vec![running("media", "radarr-0", NODE, 86400)]);
    api_rows(
        "check_stuck_scheduled",
        "STUCK_SCHEDULED",
        &srv,
        &["--node".into(), NODE.into()],
        &[],
    );
}

#[test]
fn api_faults_jiva_rep_crashloop() {
    let srv = ApiServer::start();
    srv.set(
        "pods",
        vec![jiva_replica("pvc-fm1", 0, "k8s01", 86400, Rep::Healthy)],
    );
    api_rows(
        "check_jiva_rep_crashloop",
        "JIVA_REP_CRASHLOOP",
        &srv,
        &[],
        &[],
    );
}

#[test]
fn api_faults_longhorn_volumes() {
    let srv = ApiServer::start();
    for r in ["volumes", "replicas", "engines"] {
        srv.set(r, vec![]);
    }
    api_rows(
        "check_longhorn_volumes",
        "LONGHORN_VOLUMES",
        &srv,
        &[],
        // Its discovery answered 404: the API group is not served, Longhorn is not there.
        &[("Http(404)", 3, "Longhorn is not installed")],
    );
}

#[test]
fn api_faults_volume_attachments() {
    let srv = ApiServer::start();
    srv.set(
        "nodes",
        vec![serde_json::json!({"metadata": {"name": NODE},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})],
    );
    srv.set(
        "volumeattachments",
        vec![serde_json::json!({"metadata": {"name": "csi-fm1"},
            "spec": {"attacher": "csi.example.com", "nodeName": NODE,
                "source": {"persistentVolumeName": "pvc-fm1"}},
            "status": {"attached": true}})],
    );
    api_rows(
        "check_volume_attachments",
        "VOLUME_ATTACHMENTS",
        &srv,
        &[],
        &[],
    );
}

#[test]
fn api_faults_watch_cache() {
    let srv = ApiServer::start();
    let store = ConfigMapStore::new();
    store.put(
        "kube-system",
        "k8s-storage-checks-canary",
        serde_json::json!({"purpose": "canary"}),
    );
    srv.configmaps(&store, CacheMode::Healthy);
    api_rows(
        "check_watch_cache",
        "WATCH_CACHE",
        &srv,
        &["--deadline".into(), "1s".into()],
        &[("Http(404)", 3, "does not exist")],
    );
}

#[test]
fn api_faults_csi_node_plugins() {
    // A node without CSI plugins: every API fault must show (UNKNOWN with its reason), never an
    // OK about a CSINode it could not read.
    let d = open_tempdir();
    let tree = KubeletTree::new(d.path());
    let srv = ApiServer::start();
    srv.set("pods", vec![running("media", "radarr-0", NODE, 86400)]);
    api_rows(
        "check_csi_node_plugins",
        "CSI_NODE_PLUGINS",
        &srv,
        &[
            "--node".into(),
            NODE.into(),
            "--kubelet-root".into(),
            s(&tree.root),
        ],
        &[],
    );
}

#[test]
fn api_faults_stale_csi_mounts() {
    // A pod volume mount in a mountinfo file: deciding whether it is stale needs the API.
    let d = open_tempdir();
    let tree = KubeletTree::new(d.path());
    let mp = tree.pod_csi_mount("u-fm-1", "pvc-fm1", "csi.example.com");
    let mi = write(
        d.path(),
        "mountinfo",
        format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n{}",
            e2e::sysfs::mountinfo_line(30, "8:32", &mp, "sdc", "rw")
        ),
    );
    let srv = ApiServer::start();
    srv.set("pods", vec![running("media", "radarr-0", NODE, 86400)]);
    srv.set("persistentvolumes", vec![]);
    api_rows(
        "check_stale_csi_mounts",
        "STALE_CSI_MOUNTS",
        &srv,
        &[
            "--node".into(),
            NODE.into(),
            "--mountinfo".into(),
            s(&mi),
            "--kubelet-root".into(),
            s(&tree.root),
        ],
        &[],
    );
}

// ---------------------------------------------------------------------------------------------
// File and directory inputs

#[derive(Clone, Copy, Debug, PartialEq)]
enum FileFault {
    Missing,
    /// Mode 0600 owned by root, the check run as nobody.
    Unreadable,
    Empty,
    /// The good content cut in the middle of a line / record.
    Truncated,
    /// A 200 MB sparse file (NUL bytes, no newline).
    Huge,
    /// The good content with invalid UTF-8 bytes inside every line.
    NonUtf8,
    /// `/dev/zero`: endless NUL bytes from a character device (issue 16: memory must stay
    /// bounded, the answer a clear UNKNOWN within -t).
    DevZero,
    /// Random bytes with newlines: no record or line of any format.
    Garbage,
    /// A syslog-format kern.log full of EXT4 errors (what `--kmsg` must not silently read as
    /// "no records").
    SyslogKern,
}

const FILE_FAULTS: &[FileFault] = &[
    FileFault::Missing,
    FileFault::Unreadable,
    FileFault::Empty,
    FileFault::Truncated,
    FileFault::Huge,
    FileFault::NonUtf8,
    FileFault::DevZero,
    FileFault::Garbage,
    FileFault::SyslogKern,
];

/// The faulty version of `good` at `dir/name`.
fn faulty_file(dir: &Path, name: &str, good: &[u8], f: FileFault) -> PathBuf {
    let p = dir.join(name);
    match f {
        FileFault::Missing => {}
        FileFault::Unreadable => {
            std::fs::write(&p, good).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        FileFault::Empty => {
            write(dir, name, b"");
        }
        FileFault::Truncated => {
            write(dir, name, &good[..good.len() / 2]);
        }
        FileFault::Huge => {
            let fh = std::fs::File::create(&p).unwrap();
            fh.set_len(200 << 20).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            // Read it once here: the first read of a fresh sparse file fills the page cache with
            // zeros (0.4 s idle, over 2 s with both cores busy), which would otherwise be charged
            // to the check's -t and make the row depend on the machine's load.
            std::io::copy(&mut std::fs::File::open(&p).unwrap(), &mut std::io::sink()).unwrap();
        }
        FileFault::DevZero => return PathBuf::from("/dev/zero"),
        FileFault::Garbage => {
            // A fixed xorshift stream: reproducible, no line of any format.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let v: Vec<u8> = (0..200_000)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i % 97 == 96 {
                        b'\n'
                    } else {
                        (x >> 24) as u8
                    }
                })
                .collect();
            write(dir, name, v);
        }
        FileFault::SyslogKern => {
            let l = "Jul 13 20:28:05 k8s03 kernel: [1234567.891011] EXT4-fs error (device sdc): ext4_journal_check_start:83: comm radarr: Detected aborted journal\nJul 13 20:28:05 k8s03 kernel: [1234567.891012] EXT4-fs (sdc): Remounting filesystem read-only\n";
            write(dir, name, l.repeat(50));
        }
        FileFault::NonUtf8 => {
            let mut v = Vec::new();
            for l in good.split_inclusive(|&b| b == b'\n') {
                let mid = l.len() / 2;
                v.extend_from_slice(&l[..mid]);
                v.extend_from_slice(b"\xff\xfe\xc3\x28");
                v.extend_from_slice(&l[mid..]);
            }
            write(dir, name, v);
        }
    }
    p
}

/// The inputs every node check reads, good versions, in one open temp dir.
struct Inputs {
    dir: tempfile::TempDir,
    tree: KubeletTree,
    files: Vec<(&'static str, &'static str, Vec<u8>)>,
}

fn good_inputs() -> Inputs {
    let dir = open_tempdir();
    let tree = KubeletTree::new(dir.path());
    let mp = tree.pod_csi_mount("u-fm-1", "pvc-fm1", "csi.example.com");
    let mi = format!(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n{}",
        e2e::sysfs::mountinfo_line(30, "8:32", &mp, "sdc", "rw")
    );
    let pods = kubectl_list(vec![
        running("media", "radarr-0", NODE, 86400),
        scheduled_no_status("media", "stuck-0", NODE, 600),
        jiva_replica("pvc-fm1", 0, NODE, 86400, Rep::Healthy),
    ]);
    let pvs = kubectl_list(vec![]);
    let now = e2e::logs::now_secs();
    let log = format!(
        "{}{}\n",
        e2e::logs::klog_header(now - 60),
        e2e::logs::nested_op_msg(
            now - 60,
            "csi.example.com",
            "pvc-fm1",
            "u-fm-1",
            2000,
            "rpc error: code = DeadlineExceeded"
        )
    );
    // The journal abort is a minute old, inside the default --window 15m whatever the uptime (a
    // record cannot predate the boot: dated at boot + 2 ms, it was outside the window only on a
    // machine up for more than 15 minutes, and CI's fresh machine is not).
    let kmsg = format!(
        "6,1,{},-;sd 3:0:0:0: [sdc] Attached SCSI disk\n SUBSYSTEM=scsi\n3,2,{},-;Aborting journal on device sdc-8.\n",
        kmsg_usec_ago(600),
        kmsg_usec_ago(60)
    );
    std::fs::create_dir_all(dir.path().join("sys/class/iscsi_session")).unwrap();
    Inputs {
        files: vec![
            ("--mountinfo", "mountinfo", mi.into_bytes()),
            (
                "--pods-json",
                "pods.json",
                serde_json::to_vec_pretty(&pods).unwrap(),
            ),
            (
                "--pvs-json",
                "pvs.json",
                serde_json::to_vec_pretty(&pvs).unwrap(),
            ),
            ("--log-file", "kubelet.log", log.into_bytes()),
            ("--kmsg", "kmsg", kmsg.into_bytes()),
        ],
        dir,
        tree,
    }
}

// check_pv_capacity has no row yet (found by add_a_check.rs, issue 35): its --mountinfo and
// --state-dir faults are not in this matrix.
/// For each check: the file options it reads and its directory options.
const NODE_CHECKS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "check_ro_pvc_mounts",
        "RO_PVC_MOUNTS",
        &["--mountinfo"],
        &["--sys", "--kubelet-root"],
    ),
    (
        "check_stale_csi_mounts",
        "STALE_CSI_MOUNTS",
        &["--mountinfo", "--pods-json", "--pvs-json"],
        &["--kubelet-root"],
    ),
    (
        "check_kubelet_nested_ops",
        "KUBELET_NESTED_OPS",
        &["--log-file"],
        &["--state-dir"],
    ),
    (
        "check_storage_kernel_errors",
        "STORAGE_KERNEL_ERRORS",
        &["--kmsg", "--mountinfo"],
        &["--sys", "--kubelet-root", "--state-dir"],
    ),
    (
        "check_iscsi_sessions",
        "ISCSI_SESSIONS",
        &["--mountinfo"],
        &["--sys", "--kubelet-root"],
    ),
    (
        "check_stuck_scheduled",
        "STUCK_SCHEDULED",
        &["--pods-json"],
        &[],
    ),
    (
        "check_csi_node_plugins",
        "CSI_NODE_PLUGINS",
        &[],
        &["--kubelet-root"],
    ),
    (
        "check_jiva_rep_crashloop",
        "JIVA_REP_CRASHLOOP",
        &["--pods-json"],
        &[],
    ),
];

/// The full argument list of a check over `inp`, with `replace` = (option, path) swapped in.
fn node_args(bin: &str, inp: &Inputs, replace: Option<(&str, &Path)>) -> Vec<OsString> {
    let (_, _, files, dirs) = NODE_CHECKS.iter().find(|c| c.0 == bin).unwrap();
    let mut v: Vec<OsString> = Vec::new();
    let d = inp.dir.path();
    for o in files.iter().chain(dirs.iter()) {
        let good = match *o {
            "--sys" => d.join("sys"),
            "--kubelet-root" => inp.tree.root.clone(),
            "--state-dir" => d.join("state"),
            _ => {
                let (_, name, data) = inp.files.iter().find(|f| f.0 == *o).unwrap();
                write(d, name, data)
            }
        };
        let p = match replace {
            Some((ro, rp)) if ro == *o => rp.to_path_buf(),
            _ => good,
        };
        v.push((*o).into());
        v.push(p.into_os_string());
    }
    match bin {
        "check_stale_csi_mounts" | "check_stuck_scheduled" | "check_csi_node_plugins" => {
            v.extend(["--node".into(), NODE.into()]);
        }
        "check_kubelet_nested_ops" => {
            // No journal: the log file only.
            v.extend(["--journalctl".into(), "/nonexistent/journalctl".into()]);
        }
        _ => {}
    }
    v
}

/// Expected (exit code, phrase) of a file/dir fault row. A fault in a required input is a clear
/// UNKNOWN naming it; auxiliary inputs (kernel_errors' device-to-PV mapping, ro_pvc's block-device
/// flags, state directories) degrade to a correct answer from the main input: kernel_errors
/// still pages for the journal abort in its kernel log, named by device where the mapping fails.
fn expect_file(bin: &str, opt: &str, f: &str) -> (i32, &'static str) {
    let kernel_aux = bin == "check_storage_kernel_errors" && opt != "--kmsg";
    match (bin, opt, f) {
        // One validation of --kubelet-root for every check (node::KubeletRootArg).
        (_, "--kubelet-root", "dirMissing") => (3, "no such directory on this node"),
        _ if kernel_aux => (2, "journal aborted on sdc"),
        (_, "--state-dir", _) => (1, "failing operations"),
        ("check_ro_pvc_mounts", "--sys", _) => (0, "1 PV filesystem writable"),
        ("check_ro_pvc_mounts", "--kubelet-root", "dirEmpty") => (0, "no PV mounts"),
        ("check_stale_csi_mounts", "--kubelet-root", "dirEmpty") => (0, "no CSI mounts"),
        // No plugin and no volume on the node, and no API to read its CSINode: not an OK.
        ("check_csi_node_plugins", "--kubelet-root", "dirEmpty") => (3, "API not read"),
        // Without sessions, the mount table and kubelet root (session → PV mapping) are not needed.
        ("check_iscsi_sessions", "--kubelet-root" | "--mountinfo", _) => (0, "no iSCSI sessions"),
        (_, _, "Missing" | "dirMissing") => (3, "No such file or directory (ENOENT)"),
        (_, _, "Unreadable" | "dirUnreadable") => (3, "Permission denied (EACCES)"),
        ("check_iscsi_sessions", "--sys", "dirEmpty") => (3, "not a sysfs"),
        ("check_ro_pvc_mounts", "--mountinfo", "NonUtf8") => (0, "1 PV filesystem writable"),
        ("check_stale_csi_mounts", "--mountinfo", "NonUtf8") => (0, "no CSI mounts"),
        // Issue 16: a source that yields nothing parsable, or data past a cap, is not OK
        // (these rows answered OK before: a 200 MiB line, a garbage or syslog-format --kmsg).
        ("check_kubelet_nested_ops", "--log-file", "Huge" | "DevZero") => {
            (3, "the cap of one log line")
        }
        ("check_kubelet_nested_ops", "--log-file", "Garbage") => (3, "is not a kubelet log"),
        (
            "check_storage_kernel_errors",
            "--kmsg",
            "Huge" | "DevZero" | "Garbage" | "SyslogKern",
        ) => (3, "is not a kernel log"),
        (_, "--mountinfo", "Huge" | "DevZero") => (3, "the cap of a mount table"),
        // Issue 27, finding 4: a source that gave nothing is not OK.
        ("check_kubelet_nested_ops", "--log-file", "Empty") => (3, "gave nothing to read"),
        ("check_storage_kernel_errors", "--kmsg", "Empty") => (3, "gave no kernel log record"),
        ("check_kubelet_nested_ops", "--log-file", _) => (0, "no failed volume operations"),
        ("check_storage_kernel_errors", "--kmsg", _) => (0, "no storage errors"),
        (_, "--mountinfo", "Empty") => (3, "is empty: not a mount table"),
        (_, "--mountinfo", _) => (3, "garbled mount table"),
        (_, "--pods-json" | "--pvs-json", "Empty" | "Truncated") => (3, "JSON"),
        (_, "--pods-json" | "--pvs-json", _) => (3, "JSON"),
        _ => (-1, ""),
    }
}

#[test]
fn file_faults_every_node_check() {
    let mut rows = Vec::new();
    let mut keep = Vec::new();
    for &(bin, name, files, dirs) in NODE_CHECKS {
        for &opt in files.iter() {
            for &f in FILE_FAULTS {
                let inp = good_inputs();
                let good = &inp.files.iter().find(|x| x.0 == opt).unwrap().2;
                let p = faulty_file(
                    inp.dir.path(),
                    &format!("faulty{}", opt.replace('-', "_")),
                    good,
                    f,
                );
                let (want, phrase) = expect_file(bin, opt, &format!("{f:?}"));
                let mut r = row(format!("{bin} {opt} {f:?}"), bin, name).args(node_args(
                    bin,
                    &inp,
                    Some((opt, &p)),
                ));
                r.want = want;
                if !phrase.is_empty() {
                    r.phrases = vec![phrase];
                }
                r.nobody = f == FileFault::Unreadable;
                // /dev/zero is no marker of ours: the longest temp path among the arguments is.
                if f != FileFault::DevZero {
                    r.marker = Some(p.to_string_lossy().into_owned());
                }
                rows.push(r);
                keep.push(inp);
            }
        }
        for &opt in dirs.iter() {
            for f in ["Missing", "Unreadable", "Empty"] {
                let inp = good_inputs();
                let p = inp
                    .dir
                    .path()
                    .join(format!("faultydir{}", opt.replace('-', "_")));
                match f {
                    "Missing" => {}
                    "Unreadable" => {
                        std::fs::create_dir(&p).unwrap();
                        std::fs::write(p.join("x"), "x").unwrap();
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))
                            .unwrap();
                    }
                    _ => std::fs::create_dir(&p).unwrap(),
                }
                let (want, phrase) = expect_file(bin, opt, &format!("dir{f}"));
                let mut r = row(format!("{bin} {opt} dir {f}"), bin, name).args(node_args(
                    bin,
                    &inp,
                    Some((opt, &p)),
                ));
                r.want = want;
                if !phrase.is_empty() {
                    r.phrases = vec![phrase];
                }
                r.nobody = f == "Unreadable";
                r.marker = Some(p.to_string_lossy().into_owned());
                rows.push(r);
                keep.push(inp);
            }
        }
        // A kubelet root that does not exist.
        if dirs.contains(&"--kubelet-root") {
            let inp = good_inputs();
            let p = PathBuf::from("/nonexistent");
            let mut r = row(format!("{bin} --kubelet-root /nonexistent"), bin, name)
                .args(node_args(bin, &inp, Some(("--kubelet-root", &p))));
            // One validation for every check (node::KubeletRootArg): a mistyped root is
            // UNKNOWN, also where the roots only name what was found.
            (r.want, r.phrases) = (
                3,
                vec!["--kubelet-root /nonexistent: no such directory on this node"],
            );
            rows.push(r);
            keep.push(inp);
        }
    }
    run_rows(rows);
    drop(keep);
}

/// Run `bin args` with -t `T` and return (exit code, stdout, peak RSS in KiB), the peak measured
/// by GNU time: the largest of the check process and the worker it forked and reaped (`wait4`'s
/// rusage covers waited-for descendants), mapped file pages included. Not measured from this
/// process: a child forked from it carries this test's own RSS in its high-water mark.
pub(crate) fn run_measured(bin_name: &str, args: &[OsString]) -> (i32, String, i64) {
    run_measured_t(bin_name, args, T)
}

/// [`run_measured`] with `-t t` (through [`e2e::run_max_rss`], the one peak-RSS measure).
pub(crate) fn run_measured_t(bin_name: &str, args: &[OsString], t: u64) -> (i32, String, i64) {
    let t = t.to_string();
    let mut all: Vec<&str> = vec!["-t", &t];
    all.extend(
        args.iter()
            .map(|a| a.to_str().expect("UTF-8 test argument")),
    );
    let (out, kib) = e2e::run_max_rss(bin_name, &all, None);
    (out.code, out.stdout, kib)
}

/// Issue 16: every file input of every node check given `/dev/zero` (an endless source; before,
/// `--mountinfo /dev/zero` grew to ~3 GB until -t killed it), and the kubeconfig and token file
/// of the API checks, answers UNKNOWN naming what is wrong, within -t, with the worker's peak
/// RSS at most 64 MiB.
#[test]
fn dev_zero_inputs_stay_within_64_mib() {
    if !e2e::need_tool("dev_zero_inputs_stay_within_64_mib", "/usr/bin/time") {
        return;
    }
    // The time of each run is measured: build the binaries first, so that waiting for a build
    // another test started is not charged to the first check.
    let _ = e2e::bin_dir();
    const LIMIT_KIB: i64 = 64 * 1024;
    let mut failed = Vec::new();
    for &(bin_name, name, files, _) in NODE_CHECKS {
        for &opt in files.iter() {
            let inp = good_inputs();
            let args = node_args(bin_name, &inp, Some((opt, Path::new("/dev/zero"))));
            let (want, phrase) = expect_file(bin_name, opt, "DevZero");
            let t = std::time::Instant::now();
            let (code, out, kib) = run_measured(bin_name, &args);
            let took = t.elapsed();
            let first = out.lines().next().unwrap_or("").to_string();
            println!("{bin_name} {opt} /dev/zero: exit {code}, {kib} KiB peak, {took:?}: {first}");
            let ok = code == want
                && first.starts_with(&format!("{name} "))
                && first.to_lowercase().contains(&phrase.to_lowercase())
                && kib <= LIMIT_KIB
                && took <= Duration::from_secs(T) + MARGIN;
            if !ok {
                failed.push(format!(
                    "{bin_name} {opt} /dev/zero: exit {code} (want {want} {phrase:?}), {kib} KiB (cap {LIMIT_KIB}), {took:?}: {out:?}"
                ));
            }
        }
    }
    // The files the API checks read whole: a kubeconfig, and the tokenFile one names (before,
    // `--kubeconfig /dev/zero` grew to 5.7 GB in 5 s).
    let d = open_tempdir();
    let kc = write(
        d.path(),
        "kubeconfig",
        "apiVersion: v1\nclusters:\n- cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\n  name: c\ncontexts:\n- context: {cluster: c, user: u}\n  name: x\ncurrent-context: x\nusers:\n- name: u\n  user: {tokenFile: /dev/zero}\n",
    );
    for (bin_name, name, kubeconfig, phrase) in [
        (
            "check_stuck_scheduled",
            "STUCK_SCHEDULED",
            PathBuf::from("/dev/zero"),
            "cannot read kubeconfig /dev/zero: larger than 16 MiB",
        ),
        (
            "check_stuck_terminating",
            "STUCK_TERMINATING",
            kc,
            "cannot read token file /dev/zero: larger than 16 MiB",
        ),
    ] {
        let args: Vec<OsString> = vec![
            "--kubeconfig".into(),
            kubeconfig.clone().into(),
            "--all-nodes".into(),
        ];
        let t = std::time::Instant::now();
        let (code, out, kib) = run_measured(bin_name, &args);
        let took = t.elapsed();
        let first = out.lines().next().unwrap_or("").to_string();
        println!("{bin_name} --kubeconfig {kubeconfig:?}: exit {code}, {kib} KiB peak, {took:?}: {first}");
        if !(code == 3
            && first.starts_with(&format!("{name} UNKNOWN - "))
            && first.contains(phrase)
            && kib <= LIMIT_KIB
            && took <= Duration::from_secs(T) + MARGIN)
        {
            failed.push(format!(
                "{bin_name} --kubeconfig {kubeconfig:?}: exit {code} (want 3 {phrase:?}), {kib} KiB (cap {LIMIT_KIB}), {took:?}: {out:?}"
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Hostile names, the clock jumping, /dev/kmsg without permission

const EVIL: &str = "evil|name \"q\" 'x'\nnext\u{1b}[31m\u{7f}end";

#[test]
fn hostile_names_clock_and_kmsg_permission() {
    let d = open_tempdir();
    let dp = d.path();
    let mut rows = Vec::new();
    let now = e2e::logs::now_secs();

    // Pods with hostile names (JSON strings may carry newlines, pipes, escapes).
    let pods = write(
        dp,
        "evil-pods.json",
        serde_json::to_vec(&kubectl_list(vec![
            scheduled_no_status(EVIL, EVIL, NODE, 3600),
            jiva_replica(EVIL, 0, NODE, 86400, Rep::Healthy),
        ]))
        .unwrap(),
    );
    rows.push(
        row(
            "stuck_scheduled hostile pod names",
            "check_stuck_scheduled",
            "STUCK_SCHEDULED",
        )
        .args(["--node", NODE, "--pods-json"])
        .arg(s(&pods))
        .expect(2, &["stuck after scheduling"]),
    );
    rows.push(
        row(
            "jiva hostile PV names",
            "check_jiva_rep_crashloop",
            "JIVA_REP_CRASHLOOP",
        )
        .arg("--pods-json")
        .arg(s(&pods))
        .expect(0, &["healthy"]),
    );
    // The clock jumping: pods created tomorrow.
    let future = write(
        dp,
        "future-pods.json",
        serde_json::to_vec(&kubectl_list(vec![
            scheduled_no_status("media", "from-tomorrow", NODE, -86400),
            jiva_replica("pvc-future", 0, NODE, -86400, Rep::Healthy),
        ]))
        .unwrap(),
    );
    for (b, n) in [
        ("check_stuck_scheduled", "STUCK_SCHEDULED"),
        ("check_jiva_rep_crashloop", "JIVA_REP_CRASHLOOP"),
    ] {
        let mut r = row(format!("{b} pods created tomorrow"), b, n)
            .args(["--node", NODE, "--pods-json"])
            .arg(s(&future))
            .expect(
                0,
                &[if b == "check_stuck_scheduled" {
                    "no pod stuck"
                } else {
                    "healthy"
                }],
            );
        if b == "check_jiva_rep_crashloop" {
            r.args.drain(0..2);
        }
        r.no_negative = true;
        rows.push(r);
    }
    // Mount paths with escapes (\040 space, \012 newline, \174 '|', \377 non-UTF-8) mounted ro.
    let tree = KubeletTree::new(&dp.join("k"));
    let evil_dir = format!(
        "{}/pods/u-evil/volumes/kubernetes.io~csi/pvc-a\\174b\\040c\\012d\\377\\042q/mount",
        tree.root.display()
    );
    let mi = write(
        dp,
        "evil-mountinfo",
        format!("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n40 1 8:48 / {evil_dir} rw,relatime - ext4 /dev/sdd rw,emergency_ro\n"),
    );
    rows.push(
        row(
            "ro_pvc hostile mount path",
            "check_ro_pvc_mounts",
            "RO_PVC_MOUNTS",
        )
        .args(["--mountinfo"])
        .arg(s(&mi))
        .args(["--sys", "/nonexistent-sys", "--kubelet-root"])
        .arg(s(&tree.root))
        .expect(2, &["read-only"]),
    );
    rows.push(
        row(
            "stale_csi hostile mount path",
            "check_stale_csi_mounts",
            "STALE_CSI_MOUNTS",
        )
        .args(["--mountinfo"])
        .arg(s(&mi))
        .args(["--node", NODE, "--pods-json"])
        .arg(s(&pods))
        .arg("--pvs-json")
        .arg(s(&write(
            dp,
            "pvs.json",
            serde_json::to_vec(&kubectl_list(vec![])).unwrap(),
        )))
        .arg("--kubelet-root")
        .arg(s(&tree.root))
        .expect(2, &["orphaned"]),
    );
    // Kubelet log lines: hostile PV name with non-UTF-8 bytes; lines dated tomorrow.
    let mut log = Vec::new();
    log.extend_from_slice(e2e::logs::klog_header(now - 30).as_bytes());
    log.extend_from_slice(
        e2e::logs::nested_op_msg(now - 30, "csi.example.com", "pvc-a|b q", "u-1", 4000, "x")
            .as_bytes(),
    );
    log.extend_from_slice(b" \xff\xfe bytes\n");
    let evil_log = write(dp, "evil.log", &log);
    let future_log = write(
        dp,
        "future.log",
        format!(
            "{}{}\n",
            e2e::logs::klog_header(now + 86400),
            e2e::logs::nested_op_msg(now + 86400, "csi.example.com", "pvc-f", "u-2", 4000, "x")
        ),
    );
    for (label, p, future) in [
        ("hostile", &evil_log, false),
        ("dated tomorrow", &future_log, true),
    ] {
        let mut r = row(
            format!("kubelet_nested_ops log {label}"),
            "check_kubelet_nested_ops",
            "KUBELET_NESTED_OPS",
        )
        .args(["--journalctl", "/nonexistent/journalctl", "--log-file"])
        .arg(s(p))
        .expect(
            if future { 0 } else { 1 },
            &[if future {
                "no failed volume operations"
            } else {
                "failing operations"
            }],
        );
        r.no_negative = future;
        rows.push(r);
    }
    // Kernel log records with hostile device names and invalid UTF-8.
    let kmsg = write(
        dp,
        "evil-kmsg",
        b"3,1,1000,-;EXT4-fs (sd|x \"q\"\xff): Remounting filesystem read-only\n",
    );
    rows.push(
        row(
            "kernel_errors hostile record",
            "check_storage_kernel_errors",
            "STORAGE_KERNEL_ERRORS",
        )
        .arg("--kmsg")
        .arg(s(&kmsg))
        .args([
            "--window",
            "0",
            "--sys",
            "/nonexistent-sys",
            "--kubelet-root",
        ])
        // A kubelet root that exists (a given one must), with nothing in it.
        .arg(s(&tree.root))
        .arg("--mountinfo")
        .arg(s(&mi))
        .expect(0, &["(1 record read)"]),
    );
    // /dev/kmsg without CAP_SYSLOG (kernel.dmesg_restrict=1 here).
    let restrict = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").unwrap_or_default();
    if e2e::is_root() && restrict.trim() == "1" {
        let mut r = row(
            "kernel_errors /dev/kmsg as nobody",
            "check_storage_kernel_errors",
            "STORAGE_KERNEL_ERRORS",
        )
        .args(["--kmsg", "/dev/kmsg"])
        .expect(3, &["CAP_SYSLOG"])
        .nobody();
        r.marker = Some(marker(&r.label));
        rows.push(r);
    } else {
        println!("kmsg permission row: skipped: needs root and kernel.dmesg_restrict=1");
    }
    run_rows(rows);
}

// ---------------------------------------------------------------------------------------------
// FUSE faults under a kubelet pod volume path: a hung daemon (SIGSTOP: every stat hangs), a killed
// daemon (ENOTCONN), and both beside a healthy volume.

const FUSE_DRIVER: &str = "fuse.csi.example.com";

/// A pod whose uid is `uid`, running on NODE (so its volume mounts are not orphaned).
fn pod_with_uid(name: &str, uid: &str) -> serde_json::Value {
    let mut p = running("media", name, NODE, 86400);
    p["metadata"]["uid"] = uid.into();
    p
}

#[test]
fn fuse_faults_mount_checks() {
    let test = "fuse_faults_mount_checks";
    if !e2e::need_root(test) || !e2e::need_tool(test, "bindfs") {
        return;
    }
    let d = open_tempdir();
    let dp = d.path();
    let mut ns = e2e::Ns::new();
    // One kubelet root per scenario: each row sees only its own volumes.
    let mut daemons = Vec::new();
    let mut volume = |ns: &mut e2e::Ns, tree: &KubeletTree, uid: &str, pv: &str| -> i32 {
        let mp = tree.pod_csi_mount(uid, pv, FUSE_DRIVER);
        let pid = e2e::fuse::bindfs(ns, &dp.join(format!("src-{pv}")), &mp);
        daemons.push(pid);
        pid
    };
    let hung = KubeletTree::new(&dp.join("hung"));
    let dead = KubeletTree::new(&dp.join("dead"));
    let mixed = KubeletTree::new(&dp.join("mixed"));
    let p_hung = volume(&mut ns, &hung, "u-fm-hung", "pvc-fm-hung");
    let p_dead = volume(&mut ns, &dead, "u-fm-dead", "pvc-fm-dead");
    let p_mix_hung = volume(&mut ns, &mixed, "u-fm-mix-hung", "pvc-fm-mix-hung");
    let p_mix_dead = volume(&mut ns, &mixed, "u-fm-mix-dead", "pvc-fm-mix-dead");
    volume(&mut ns, &mixed, "u-fm-mix-ok", "pvc-fm-mix-ok");
    for p in [p_hung, p_mix_hung] {
        e2e::fuse::stop_daemon(p);
    }
    for p in [p_dead, p_mix_dead] {
        e2e::fuse::kill_daemon(p);
    }
    let pods = write(
        dp,
        "pods.json",
        serde_json::to_vec(&kubectl_list(
            [
                "u-fm-hung",
                "u-fm-dead",
                "u-fm-mix-hung",
                "u-fm-mix-dead",
                "u-fm-mix-ok",
            ]
            .iter()
            .map(|u| pod_with_uid(&format!("pod-{u}"), u))
            .collect(),
        ))
        .unwrap(),
    );
    let pvs = write(
        dp,
        "pvs.json",
        serde_json::to_vec(&kubectl_list(vec![])).unwrap(),
    );

    // (scenario, kubelet root, ro_pvc expectation, stale_csi expectation); each is
    // (first-line phrases, long-output phrases). Every one is CRITICAL.
    type Want = (&'static [&'static str], &'static [&'static str]);
    let scenarios: [(&str, &KubeletTree, Want, Want); 3] = [
        (
            "hung FUSE volume",
            &hung,
            (
                &["1 of 1 PV filesystem read-only: pvc-fm-hung"],
                &["the mount point does not answer (no answer in 1s)"],
            ),
            (
                &["1 of 1 CSI mount stale: 1 hung"],
                &[
                    "hung pod mount",
                    "no answer in 1s",
                    "next: restart the CSI node plugin of ",
                ],
            ),
        ),
        (
            "killed FUSE daemon",
            &dead,
            (
                &["1 of 1 PV filesystem read-only: pvc-fm-dead"],
                &["stat of the mount point fails: ENOTCONN"],
            ),
            (
                &["1 of 1 CSI mount stale: 1 corrupted"],
                &[
                    "corrupted pod mount",
                    "ENOTCONN",
                    "next: restart the CSI node plugin of ",
                ],
            ),
        ),
        (
            "hung + killed + healthy FUSE volumes",
            &mixed,
            (
                &[
                    "2 of 3 PV filesystems read-only",
                    "pvc-fm-mix-hung",
                    "pvc-fm-mix-dead",
                ],
                &[
                    "does not answer (no answer in 1s)",
                    "ENOTCONN",
                    "pvc-fm-mix-ok is writable",
                ],
            ),
            (
                &["2 of 3 CSI mounts stale: 1 corrupted, 1 hung"],
                &["hung pod mount", "corrupted pod mount", "healthy pod mount"],
            ),
        ),
    ];
    let mut rows = Vec::new();
    for (what, tree, ro_want, stale_want) in scenarios {
        for (bin, name, (first, long)) in [
            ("check_ro_pvc_mounts", "RO_PVC_MOUNTS", ro_want),
            ("check_stale_csi_mounts", "STALE_CSI_MOUNTS", stale_want),
        ] {
            let label = format!("{bin} {what}");
            // The marker rides on the command line as an --exclude that matches no mount: the
            // check and its forked worker (same command line) carry it, the FUSE daemons do not.
            let mark = marker(&label);
            let mut r = row(label, bin, name)
                .arg("--kubelet-root")
                .arg(s(&tree.root))
                .args(["--probe-timeout", "1s", "--exclude", &mark])
                .expect(2, first)
                .long(long);
            if bin == "check_stale_csi_mounts" {
                r = r
                    .args(["--node", NODE, "--pods-json"])
                    .arg(s(&pods))
                    .arg("--pvs-json")
                    .arg(s(&pvs));
            }
            assert!(r.args.iter().any(|a| a.to_str() == Some(mark.as_str())));
            r.marker = Some(mark);
            r.ns = Some(ns.pid());
            r.own_pids = daemons.clone();
            rows.push(r);
        }
    }
    run_rows(rows);
    // The stopped daemons are SIGKILLed when `ns` drops (it owns their pids), even after a failed
    // assertion; the mounts live in its namespace only, so the temp dir is removed afterwards.
    drop(ns);
}

// ---------------------------------------------------------------------------------------------
// State files under --state-dir (check_kubelet_nested_ops, check_storage_kernel_errors)

#[derive(Clone, Copy, Debug, PartialEq)]
enum StateFault {
    /// Random bytes instead of JSON.
    Garbage,
    Empty,
    /// The good state cut in the middle.
    Truncated,
    /// The good state with invalid UTF-8 inside its first string.
    NonUtf8,
    /// Valid JSON of another shape.
    WrongShape,
    /// A saved position past the end of the log: a file offset beyond its size, a kernel
    /// sequence number beyond the newest record. Nothing kept.
    PositionBeyondEnd,
    /// The saved file identity is another inode (the file was replaced). Nothing kept.
    InodeMismatch,
    /// Another boot id in the kernel state. Nothing kept.
    OtherBoot,
    /// A kept failure / record dated tomorrow, beside the real one.
    FutureEvents,
    /// The state file's path is a directory.
    FileIsDir,
    /// --state-dir does not exist (nor its parent).
    DirMissing,
    /// --state-dir is a root-owned 0755 directory, the check run as nobody.
    DirNotWritable,
    /// --state-dir is a regular file.
    DirIsFile,
}

const STATE_FAULTS: &[StateFault] = &[
    StateFault::Garbage,
    StateFault::Empty,
    StateFault::Truncated,
    StateFault::NonUtf8,
    StateFault::WrongShape,
    StateFault::PositionBeyondEnd,
    StateFault::InodeMismatch,
    StateFault::OtherBoot,
    StateFault::FutureEvents,
    StateFault::FileIsDir,
    StateFault::DirMissing,
    StateFault::DirNotWritable,
    StateFault::DirIsFile,
];

/// What the notes of every state fault say: none may be left in the run after the state was
/// rewritten.
const STATE_NOTES: &[&str] = &[
    "is unreadable",
    "starting afresh",
    "was truncated",
    "was replaced",
    "rebooted",
    "beyond the end",
    "the clock was set back",
    "cannot read state",
    "cannot write state",
    "cannot create the directory",
];

/// One of the two checks with --state-dir, over an input holding one real failure.
struct StateCheck {
    bin: &'static str,
    name: &'static str,
    short: &'static str,
    /// The real status and phrase of the input, with or without state.
    want: i32,
    phrase: &'static str,
    /// What a kept entry dated tomorrow names (must never be reported).
    ghost: &'static str,
}

const STATE_CHECKS: &[StateCheck] = &[
    StateCheck {
        bin: "check_kubelet_nested_ops",
        name: "KUBELET_NESTED_OPS",
        short: "nested",
        want: 1,
        phrase: "1 volume with failing operations in 15m: pvc-fm-state MountDevice",
        ghost: "pvc-fm-ghost",
    },
    StateCheck {
        bin: "check_storage_kernel_errors",
        name: "STORAGE_KERNEL_ERRORS",
        short: "kernel",
        want: 2,
        phrase: "journal aborted on sdc",
        ghost: "fmghostdisk",
    },
];

/// A kernel monotonic timestamp (µs) `ago` seconds back. /proc/uptime is CLOCK_BOOTTIME, the
/// same as the monotonic clock the check maps records with unless the machine was suspended.
pub(crate) fn kmsg_usec_ago(ago: u64) -> u64 {
    let up = std::fs::read_to_string("/proc/uptime").expect("/proc/uptime");
    let secs: f64 = up.split_whitespace().next().unwrap().parse().unwrap();
    ((secs - ago as f64).max(1.0) * 1e6) as u64
}

/// Writes the check's input into `dir`; returns its arguments without --state-dir and the input
/// file.
fn state_inputs(c: &StateCheck, dir: &Path) -> (Vec<OsString>, PathBuf) {
    if c.short == "nested" {
        let now = e2e::logs::now_secs();
        let log = write(
            dir,
            "kubelet.log",
            format!(
                "{}\n",
                e2e::logs::json_line(
                    now - 60,
                    &e2e::logs::nested_op_msg(
                        now - 60,
                        "csi.example.com",
                        "pvc-fm-state",
                        "u-fm-1",
                        2000,
                        "MountVolume.MountDevice failed for volume \"pvc-fm-state\" (UniqueName: \"kubernetes.io/csi/csi.example.com^pvc-fm-state\") pod \"radarr-0\" (UID: \"u-fm-1\") : rpc error: code = DeadlineExceeded"
                    )
                )
            ),
        );
        let args = vec![
            "--journalctl".into(),
            "/nonexistent/journalctl".into(),
            "--log-file".into(),
            s(&log),
        ];
        (args, log)
    } else {
        let kmsg = write(
            dir,
            "kmsg",
            format!(
                "6,1,{},-;sd 3:0:0:0: [sdc] Attached SCSI disk\n SUBSYSTEM=scsi\n3,2,{},-;Aborting journal on device sdc-8.\n",
                kmsg_usec_ago(600),
                kmsg_usec_ago(60)
            ),
        );
        let mi = write(dir, "mountinfo", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n");
        let args = vec![
            "--kmsg".into(),
            s(&kmsg),
            "--mountinfo".into(),
            s(&mi),
            "--sys".into(),
            "/nonexistent-sys".into(),
            // A kubelet root that exists (a given one must), with nothing in it.
            "--kubelet-root".into(),
            s(&{
                let k = dir.join("kubelet-empty");
                std::fs::create_dir_all(&k).unwrap();
                k
            }),
        ];
        (args, kmsg)
    }
}

/// The one state file in `dir`.
fn the_state_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one state file in {}: {files:?}",
        dir.display()
    );
    files.into_iter().next().unwrap()
}

/// Turn the good state at `sf` into the faulty one.
fn corrupt_state(c: &StateCheck, f: StateFault, sf: &Path, input: &Path) {
    use serde_json::{json, Value};
    let good = std::fs::read(sf).unwrap();
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    let nested = c.short == "nested";
    let tomorrow_ms = (e2e::logs::now_secs() + 86400) * 1000;
    let bytes: Vec<u8> = match f {
        StateFault::Garbage => b"\x00\x17\x9c\xfe garbage {[ \x01\x02 \xde\xad\xbe\xef".to_vec(),
        StateFault::Empty => Vec::new(),
        StateFault::Truncated => good[..good.len() / 2].to_vec(),
        StateFault::NonUtf8 => {
            let at = good.iter().position(|&b| b == b'"').unwrap() + 1;
            [&good[..at], b"\xff\xfe\xc3\x28", &good[at..]].concat()
        }
        StateFault::WrongShape => br#"{"last_seq": -1, "failures": {}, "file": "x"}"#.to_vec(),
        StateFault::PositionBeyondEnd if nested => {
            let size = std::fs::metadata(input).unwrap().len();
            v["file"]["offset"] = json!(size + 1_000_000);
            v["failures"] = json!([]);
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::PositionBeyondEnd => {
            v["last_seq"] = json!(4_000_000_000u64);
            v["events"] = json!([]);
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::InodeMismatch => {
            let ino = v["file"]["ino"].as_u64().unwrap();
            v["file"]["ino"] = json!(ino + 1_000_003);
            v["failures"] = json!([]);
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::OtherBoot => {
            v["boot_id"] = json!("00000000-0000-0000-0000-000000000000");
            v["events"] = json!([]);
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::FutureEvents if nested => {
            let mut ghost = v["failures"][0].clone();
            ghost["t"] = json!(tomorrow_ms);
            ghost["volume"] = json!("kubernetes.io/csi/csi.example.com^pvc-fm-ghost");
            ghost["pv"] = json!("pvc-fm-ghost");
            v["failures"].as_array_mut().unwrap().push(ghost);
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::FutureEvents => {
            v["events"].as_array_mut().unwrap().push(json!({
                "seq": 1, "t": tomorrow_ms, "category": "remount_ro",
                "device": {"Block": "fmghostdisk"},
                "text": "EXT4-fs (fmghostdisk): Remounting filesystem read-only"
            }));
            serde_json::to_vec(&v).unwrap()
        }
        StateFault::FileIsDir => {
            std::fs::remove_file(sf).unwrap();
            std::fs::create_dir(sf).unwrap();
            return;
        }
        StateFault::DirMissing | StateFault::DirNotWritable | StateFault::DirIsFile => {
            unreachable!()
        }
    };
    std::fs::write(sf, bytes).unwrap();
}

/// What the first run after the fault must say beside its real status.
fn state_fault_notes(c: &StateCheck, f: StateFault) -> &'static [&'static str] {
    let nested = c.short == "nested";
    match f {
        StateFault::Garbage
        | StateFault::Empty
        | StateFault::Truncated
        | StateFault::NonUtf8
        | StateFault::WrongShape => &["is unreadable", "starting afresh"],
        StateFault::PositionBeyondEnd if nested => &["was truncated", "read from its start"],
        StateFault::PositionBeyondEnd => &["beyond the end of the kernel log", "read afresh"],
        StateFault::InodeMismatch => &["was replaced (rotated)", "read the new one from its start"],
        StateFault::OtherBoot => &["rebooted", "read afresh"],
        StateFault::FutureEvents => &["the clock was set back", "dated after now dropped"],
        StateFault::FileIsDir => &["cannot read state file", "Is a directory"],
        StateFault::DirMissing => &[],
        StateFault::DirNotWritable => &["cannot write state file", "Permission denied (EACCES)"],
        StateFault::DirIsFile => &["cannot read state file", "Not a directory"],
    }
}

/// The state rewritten by the runs of a fault's rows: the position at the end of the input and
/// only the real failure kept.
fn assert_state_rewritten(c: &StateCheck, label: &str, state: &Path, input: &Path) {
    let sf = the_state_file(state);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&sf).unwrap())
        .unwrap_or_else(|e| panic!("{label}: state {} not rewritten: {e}", sf.display()));
    // One field of every kept entry.
    let kept = |list: &str, field: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[field].as_str().unwrap_or("").to_string())
            .collect()
    };
    if c.short == "nested" {
        let size = std::fs::metadata(input).unwrap().len();
        assert_eq!(v["file"]["offset"], size, "{label}: {v}");
        assert_eq!(kept("failures", "pv"), ["pvc-fm-state"], "{label}: {v}");
    } else {
        assert_eq!(v["last_seq"], 2, "{label}: {v}");
        assert_eq!(
            kept("events", "category"),
            ["journal_abort"],
            "{label}: {v}"
        );
    }
}

#[test]
fn state_faults_nested_ops_and_kernel_errors() {
    // Only the unwritable --state-dir rows need root (to run as nobody); the rest run anyway.
    let root = e2e::need_root("state_faults_nested_ops_and_kernel_errors, unwritable --state-dir");
    let d = open_tempdir();
    let mut rows = Vec::new();
    // (check, fault, state dir, input) of the rows whose state must be rewritten.
    let mut rewritten = Vec::new();
    let mut unwritable = Vec::new();
    for c in STATE_CHECKS {
        for &f in STATE_FAULTS {
            let applies = match f {
                StateFault::InodeMismatch => c.short == "nested",
                StateFault::OtherBoot => c.short == "kernel",
                StateFault::DirNotWritable => root,
                _ => true,
            };
            if !applies {
                continue;
            }
            let label = format!("{} state {f:?}", c.bin);
            let rd = d.path().join(format!("{}-{f:?}", c.short));
            std::fs::create_dir_all(&rd).unwrap();
            std::fs::set_permissions(&rd, std::fs::Permissions::from_mode(0o755)).unwrap();
            let (base, input) = state_inputs(c, &rd);
            let state = match f {
                StateFault::DirMissing => rd.join("no/such/state"),
                _ => rd.join("state"),
            };
            match f {
                StateFault::DirMissing => {}
                StateFault::DirNotWritable => {
                    std::fs::create_dir(&state).unwrap();
                    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
                StateFault::DirIsFile => {
                    write(&rd, "state", "not a directory\n");
                }
                _ => {
                    // A good state from a first run, then the fault.
                    let out = Cmd::new(bin(c.bin))
                        .args(&base)
                        .arg("--state-dir")
                        .arg(&state)
                        .run();
                    assert_eq!(out.code, c.want, "{label}: priming run: {out:?}");
                    corrupt_state(c, f, &the_state_file(&state), &input);
                }
            }
            let persists = matches!(
                f,
                StateFault::FileIsDir | StateFault::DirNotWritable | StateFault::DirIsFile
            );
            let mark = state.to_string_lossy().into_owned();
            let mk = |label: String| {
                let mut r = row(label, c.bin, c.name)
                    .args(base.iter().cloned())
                    .arg("--state-dir")
                    .arg(s(&state))
                    .expect(c.want, &[])
                    .absent(&[c.ghost]);
                r.phrases = vec![c.phrase];
                r.nobody = f == StateFault::DirNotWritable;
                r.marker = Some(mark.clone());
                r
            };
            rows.push(mk(label.clone()).long(state_fault_notes(c, f)));
            // A second run: the state was rewritten (or, when it cannot be, the same answer and
            // the same note: never stuck on UNKNOWN, never a lost alert).
            let second = mk(format!("{label} (second run)"));
            rows.push(if persists {
                second.long(state_fault_notes(c, f))
            } else if c.short == "nested" {
                // Resumed at the saved offset: nothing read, the failure known from the state.
                second
                    .absent(STATE_NOTES)
                    .long(&["0 bytes, 0 candidate lines"])
            } else {
                second.absent(STATE_NOTES)
            });
            if f == StateFault::DirNotWritable {
                unwritable.push(state.clone());
            } else if !persists {
                rewritten.push((c, label, state, input));
            }
        }
    }
    run_rows(rows);
    for (c, label, state, input) in &rewritten {
        assert_state_rewritten(c, label, state, input);
    }
    for state in &unwritable {
        let left: Vec<_> = std::fs::read_dir(state).unwrap().flatten().collect();
        assert!(
            left.is_empty(),
            "nobody wrote into {}: {left:?}",
            state.display()
        );
    }
}

/// Plant, as `uid`, a symlink at `name` in `dir` pointing at `target` (lchown: the link is the
/// other user's, as if that user had made it).
fn plant(dir: &Path, name: &str, target: &Path, uid: u32) {
    let l = dir.join(name);
    std::os::unix::fs::symlink(target, &l).unwrap();
    std::os::unix::fs::lchown(&l, Some(uid), Some(uid)).unwrap();
}

/// Every name the old writer used or a guesser would try: the final name and
/// `.<final>.tmp.<pid>` for the next few hundred PIDs.
fn plant_everywhere(dir: &Path, final_name: &str, target_final: &Path, target_tmp: &Path) {
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    plant(dir, final_name, target_final, 65534);
    for pid in last + 1..last + 600 {
        plant(dir, &format!(".{final_name}.tmp.{pid}"), target_tmp, 65534);
    }
}

/// Root-owned files a planted link points at, with their content and mtime.
struct Targets {
    files: Vec<(PathBuf, Vec<u8>, std::time::SystemTime)>,
}

impl Targets {
    fn new(dir: &Path, names: &[&str]) -> Targets {
        let files = names
            .iter()
            .map(|n| {
                let p = dir.join(n);
                let body = format!("root-only {n} {}\n", std::process::id()).into_bytes();
                std::fs::write(&p, &body).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
                let m = std::fs::metadata(&p).unwrap().modified().unwrap();
                (p, body, m)
            })
            .collect();
        Targets { files }
    }
    fn assert_untouched(&self, label: &str) {
        for (p, body, m) in &self.files {
            let md = std::fs::symlink_metadata(p).unwrap();
            assert!(md.is_file(), "{label}: {} replaced", p.display());
            assert_eq!(
                &std::fs::read(p).unwrap(),
                body,
                "{label}: {} written",
                p.display()
            );
            assert_eq!(
                md.modified().unwrap(),
                *m,
                "{label}: {} touched",
                p.display()
            );
            assert_eq!(md.len(), body.len() as u64, "{label}: {}", p.display());
        }
    }
}

/// Issue 16: a root run writing its state into a directory where another user planted symlinks
/// at every name it can guess leaves the symlinks' targets untouched. A directory that user owns
/// (the NRPE user's, a sudo-mode run as root) is refused with a note, the alert still reported;
/// a root-owned sticky world-writable one (like /tmp) is used, the planted links replaced, never
/// followed, and the symlinked state file ignored on reading.
#[test]
fn state_writes_cannot_be_redirected() {
    use std::os::unix::fs::MetadataExt;
    if !e2e::need_root("state_writes_cannot_be_redirected") {
        return;
    }
    let d = open_tempdir();
    for c in STATE_CHECKS {
        let rd = d.path().join(c.short);
        std::fs::create_dir_all(&rd).unwrap();
        let (base, _input) = state_inputs(c, &rd);
        // The state file's name, from a run into a scratch directory.
        let scratch = rd.join("scratch");
        let out = Cmd::new(bin(c.bin))
            .args(&base)
            .arg("--state-dir")
            .arg(&scratch)
            .run();
        assert_eq!(out.code, c.want, "{}: priming run: {out:?}", c.bin);
        let final_name = the_state_file(&scratch)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let secret = rd.join("secret");
        std::fs::create_dir(&secret).unwrap();
        let targets = Targets::new(&secret, &["final", "tmp"]);

        // 1. The other user's own directory: refused, nothing read or written through it.
        let theirs = rd.join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        plant_everywhere(
            &theirs,
            &final_name,
            &targets.files[0].0,
            &targets.files[1].0,
        );
        let planted = std::fs::read_dir(&theirs).unwrap().count();
        for i in 0..2 {
            let out = Cmd::new(bin(c.bin))
                .args(&base)
                .args(["-t", "10"])
                .arg("--state-dir")
                .arg(&theirs)
                .run();
            let label = format!("{} into a directory of uid 65534, run {i}", c.bin);
            assert_eq!(out.code, c.want, "{label}: the alert is kept: {out:?}");
            assert!(
                out.first_line()
                    .to_lowercase()
                    .contains(&c.phrase.to_lowercase()),
                "{label}: {out:?}"
            );
            assert!(
                out.stdout.contains("refused") && out.stdout.contains("owned by uid 65534"),
                "{label}: the refusal is named: {out:?}"
            );
            targets.assert_untouched(&label);
            assert_eq!(
                std::fs::read_dir(&theirs).unwrap().count(),
                planted,
                "{label}: nothing created in the refused directory"
            );
        }

        // 2. A root-owned sticky world-writable directory with the same links (made by uid 65534).
        let sticky = rd.join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        plant_everywhere(
            &sticky,
            &final_name,
            &targets.files[0].0,
            &targets.files[1].0,
        );
        for i in 0..2 {
            let out = Cmd::new(bin(c.bin))
                .args(&base)
                .args(["-t", "10"])
                .arg("--state-dir")
                .arg(&sticky)
                .run();
            let label = format!("{} into a sticky 1777 directory, run {i}", c.bin);
            assert_eq!(out.code, c.want, "{label}: {out:?}");
            assert!(
                out.first_line()
                    .to_lowercase()
                    .contains(&c.phrase.to_lowercase()),
                "{label}: {out:?}"
            );
            if i == 0 {
                assert!(
                    out.stdout.contains("is a symbolic link: ignored"),
                    "{label}: the planted state link is named: {out:?}"
                );
            } else {
                assert!(!out.stdout.contains("symbolic link"), "{label}: {out:?}");
            }
            targets.assert_untouched(&label);
            let st = std::fs::symlink_metadata(sticky.join(&final_name)).unwrap();
            assert!(
                st.is_file() && st.uid() == 0,
                "{label}: the state is root's own regular file"
            );
        }
        // No temp file left behind, every planted temp link still a link.
        for e in std::fs::read_dir(&sticky).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name != final_name {
                assert!(
                    e.file_type().unwrap().is_symlink(),
                    "{}: stray {name}",
                    c.bin
                );
            }
        }
    }
}

/// Tasks in D state that are probe threads of our mount checks (the thread is named `probe`; its
/// own `exe` link names the binary even after the rest of its process exited) whose command line
/// holds `only` (a test's own run directory: other tests of the binary may have probes of their
/// own stuck on their stopped FUSE daemons; "" for all of them). The thread's own `cmdline` still
/// reads after its process's main thread exited: the thread keeps the memory map.
fn stuck_probe_tasks(only: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if p.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        for t in std::fs::read_dir(p.path().join("task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let tp = t.path();
            let comm = std::fs::read_to_string(tp.join("comm")).unwrap_or_default();
            if comm.trim() != "probe" {
                continue;
            }
            let stat = std::fs::read_to_string(tp.join("stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next());
            if state != Some(Some('D')) {
                continue;
            }
            let exe = std::fs::read_link(tp.join("exe")).unwrap_or_default();
            let exe = exe.to_string_lossy();
            let cmdline = std::fs::read(tp.join("cmdline")).unwrap_or_default();
            if !String::from_utf8_lossy(&cmdline).contains(only) {
                continue;
            }
            // The one program runs every check: the check is the name it was started by.
            let argv0 =
                String::from_utf8_lossy(cmdline.split(|b| *b == 0).next().unwrap_or_default())
                    .into_owned();
            if argv0.ends_with("check_ro_pvc_mounts") || argv0.ends_with("check_stale_csi_mounts") {
                out.push(format!("{} ({exe})", tp.display()));
            }
        }
    }
    out
}

/// Undo the D-state scenario whatever happened: let the FUSE daemon run again (the stuck I/O
/// completes), wait for the stuck tasks to go, unmount the filesystem, detach the loop device.
struct DStateScenario<'a> {
    ns: &'a e2e::Ns,
    /// The test's run directory: the stuck tasks waited for are those with it on their command line.
    run: String,
    daemon: i32,
    mount: PathBuf,
    loop_dev: String,
}

impl Drop for DStateScenario<'_> {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        let _ = kill(nix::unistd::Pid::from_raw(self.daemon), Signal::SIGCONT);
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !stuck_probe_tasks(&self.run).is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.ns
            .sh_any(&format!("umount '{}'", self.mount.display()));
        self.ns.sh_any(&format!("losetup -d '{}'", self.loop_dev));
    }
}

/// Issue 16: a probe stuck in uninterruptible I/O cannot be killed; ten runs against such a
/// device must not leave ten stuck tasks. The device: a loop device over a file on a FUSE
/// (bindfs) mount whose daemon is then SIGSTOPped, ext4 on it, mounted at a kubelet pod volume
/// path in a private mount namespace; the journal flushed (a remount read-only and back: jbd2 no
/// longer pins the directory blocks) and the page cache dropped, so that the probe's readdir needs
/// the device (its thread then waits in D state in ext4_read_bh, which no signal ends). Five runs of each mount
/// check share one run directory: afterwards at most one probe task of ours is stuck, and the
/// later runs say "still hung since" instead of probing.
#[test]
fn d_state_probes_do_not_pile_up() {
    let test = "d_state_probes_do_not_pile_up";
    if !e2e::need_root(test) || !e2e::need_tool(test, "bindfs") {
        return;
    }
    // A stuck device stalls whatever touches it (a `mount -o loop` scanning loop devices, a global
    // sync): no machine-changing test beside it, and no test with mounts of its own meanwhile.
    let _machine = e2e::exclusive();
    // Those tests' probes on their stopped daemons end when their namespaces go (deadline).
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !stuck_probe_tasks("").is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        stuck_probe_tasks("").is_empty(),
        "stuck probe tasks before the test: {:?}",
        stuck_probe_tasks("")
    );
    let d = open_tempdir();
    let dp = d.path();
    let mut ns = e2e::Ns::new();
    let tree = KubeletTree::new(&dp.join("k"));
    let mp = tree.pod_csi_mount("u-fm-dstate", "pvc-fm-dstate", "csi.example.com");
    let fuse = dp.join("fuse");
    let daemon = e2e::fuse::bindfs(&mut ns, &dp.join("backing"), &fuse);
    let img = fuse.join("disk.img");
    let out = ns.sh(&format!(
        "truncate -s 64M '{img}' && mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 '{img}' && \
         L=$(losetup -f --show '{img}') && mount -o noatime \"$L\" '{mp}' && \
         mkdir '{mp}/data' && for i in $(seq 200); do echo $i > '{mp}/data/f'$i; done && sync && \
         mount -o remount,ro '{mp}' && mount -o remount,rw '{mp}' && echo \"$L\"",
        img = img.display(),
        mp = mp.display()
    ));
    let loop_dev = out.stdout.trim().lines().last().unwrap().to_string();
    let run = dp.join("run");
    let scenario = DStateScenario {
        ns: &ns,
        run: run.to_string_lossy().into_owned(),
        daemon,
        mount: mp.clone(),
        loop_dev,
    };
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o750)).unwrap();
    let pods = write(
        dp,
        "pods.json",
        serde_json::to_vec(&kubectl_list(vec![pod_with_uid(
            "pod-u-fm-dstate",
            "u-fm-dstate",
        )]))
        .unwrap(),
    );
    let pvs = write(
        dp,
        "pvs.json",
        serde_json::to_vec(&kubectl_list(vec![])).unwrap(),
    );

    e2e::fuse::stop_daemon(daemon);
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").unwrap();
    let mut outs = Vec::new();
    for i in 0..10 {
        let stale = i % 2 == 1;
        let mut c = ns
            .check(if stale {
                "check_stale_csi_mounts"
            } else {
                "check_ro_pvc_mounts"
            })
            .args(["-t", "6", "--probe-timeout", "1s"])
            .arg("--kubelet-root")
            .arg(&tree.root)
            .arg("--run-dir")
            .arg(&run);
        if stale {
            c = c
                .args(["--node", NODE, "--pods-json"])
                .arg(&pods)
                .arg("--pvs-json")
                .arg(&pvs);
        }
        let o = c.run();
        println!(
            "run {i}: exit {} {:.2}s {}",
            o.code,
            o.elapsed.as_secs_f64(),
            o.first_line()
        );
        outs.push(o);
    }
    let own = run.to_string_lossy().into_owned();
    let stuck = stuck_probe_tasks(&own);
    println!("stuck probe tasks after ten runs: {stuck:?}");
    let markers: Vec<_> = std::fs::read_dir(&run).unwrap().flatten().collect();
    drop(scenario);
    drop(ns);
    // The device really was stuck: the first probe hung and its task is in D state (else this
    // test proves nothing).
    assert_eq!(outs[0].code, 2, "{:?}", outs[0]);
    assert!(
        outs[0].stdout.contains("does not answer (no answer in 1s)"),
        "{:?}",
        outs[0]
    );
    assert_eq!(stuck.len(), 1, "one stuck task per stuck device: {stuck:?}");
    assert_eq!(markers.len(), 1, "one marker: {markers:?}");
    for (i, o) in outs.iter().enumerate().skip(1) {
        assert_eq!(o.code, 2, "run {i}: {o:?}");
        assert!(
            o.stdout.contains("still hung since") && o.stdout.contains("not probed again"),
            "run {i}: {o:?}"
        );
        assert!(
            o.elapsed < Duration::from_secs(6) + MARGIN,
            "run {i}: {o:?}"
        );
    }
    assert!(
        stuck_probe_tasks(&own).is_empty(),
        "stuck probe tasks left after the daemon ran again: {:?}",
        stuck_probe_tasks(&own)
    );
}
