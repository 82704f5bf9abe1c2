//! The privilege boundary, tested as the attacker would try it (issue #16), on the real kernel.
//!
//! Each capability binary of the role (`ansible/roles/k8s_storage_checks/defaults/main.yml`,
//! `k8s_storage_checks_capabilities`) is copied with its real file capabilities (`setcap`) and run
//! through `setpriv` as `nobody`:
//! - `root:root 0755` (a wrong install), `nobody` outside every group: it refuses, naming the group;
//! - `root:<agent gid> 0750` with `nobody` in that group (the agent's situation): every path and
//!   setting `nobody` can choose (`--mountinfo`, `--kmsg`, `--log-file`, `--pods-json`,
//!   `--state-dir`, a kubeconfig and its `tokenFile`, `$KUBECONFIG`, a node's admin.conf) is read
//!   with `nobody`'s own privilege: no byte of a root-only file reaches the output, no listener
//!   receives a token; while the binary's own sources (/dev/kmsg, the default kubelet root) are
//!   still read with its privilege.

use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::{bin, need_root, need_tool, Cmd, Ns, Output};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The unprivileged attacker.
const NOBODY: u32 = 65534;
/// The agent's group in these tests: a gid no account uses (the kernel needs no /etc/group entry).
const AGENT_GID: u32 = 64_917;

/// (binary, capabilities) as the role grants them in caps mode.
fn role_capabilities() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(
        e2e::workspace_root().join("ansible/roles/k8s_storage_checks/defaults/main.yml"),
    )
    .unwrap();
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("k8s_storage_checks_capabilities:") {
            inside = true;
            continue;
        }
        if inside {
            let Some(item) = line.strip_prefix("  ") else {
                break;
            };
            let (name, caps) = item.split_once(':').unwrap();
            let caps = caps.trim().trim_start_matches('[').trim_end_matches(']');
            out.push((name.trim().to_string(), caps.replace(' ', "")));
        }
    }
    assert!(
        out.len() >= 3,
        "no capabilities found in the role's defaults: {out:?}"
    );
    out
}

/// A unique marker for the content of protected files.
fn marker(what: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("H1SECRET{what}{}x{n}", std::process::id())
}

/// A world-traversable scratch directory holding the binary copies and the attacker's files.
struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::Builder::new()
            .prefix("privilege-")
            .tempdir_in("/tmp")
            .unwrap();
        chmod(dir.path(), 0o755);
        Lab { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A copy of `name` owned root:`gid` with `mode` and the file capabilities `caps`.
    fn copy(&self, name: &str, caps: &str, gid: u32, mode: u32) -> PathBuf {
        let sub = self.path(&format!("bin-{gid}-{mode:o}"));
        std::fs::create_dir_all(&sub).unwrap();
        chmod(&sub, 0o755);
        let p = sub.join(name);
        e2e::copy_executable(&bin(name), &p);
        std::os::unix::fs::chown(&p, Some(0), Some(gid)).unwrap();
        chmod(&p, mode);
        let out = Cmd::new("setcap").arg(format!("{caps}=ep")).arg(&p).run();
        assert_eq!(out.code, 0, "setcap: {out:?}");
        p
    }

    /// A root-only (0600) file.
    fn secret(&self, name: &str, content: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, content).unwrap();
        chmod(&p, 0o600);
        p
    }

    /// A file anyone may read.
    fn public(&self, name: &str, content: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, content).unwrap();
        chmod(&p, 0o644);
        p
    }

    /// A kubelet root anyone may read, with nothing mounted under it.
    fn kubelet_root(&self) -> PathBuf {
        let r = self.path("kubelet");
        for d in ["pods", "plugins/kubernetes.io/csi"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for d in [
            "",
            "pods",
            "plugins",
            "plugins/kubernetes.io",
            "plugins/kubernetes.io/csi",
        ] {
            chmod(&r.join(d), 0o755);
        }
        r
    }
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `program` run by `nobody`: with `groups` as supplementary groups (none: no group at all).
fn as_nobody(program: &Path, groups: &[u32]) -> Cmd {
    as_nobody_in(None, program, groups)
}

fn as_nobody_in(ns: Option<&Ns>, program: &Path, groups: &[u32]) -> Cmd {
    let mut c = match ns {
        Some(ns) => ns.cmd("setpriv"),
        None => Cmd::new("setpriv"),
    };
    c = c.arg(format!("--reuid={NOBODY}"));
    c = c.arg(format!("--regid={NOBODY}"));
    c = if groups.is_empty() {
        c.arg("--clear-groups")
    } else {
        c.arg(format!(
            "--groups={}",
            groups
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ))
    };
    c.arg("--")
        .arg(program)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
}

fn service(binary: &str) -> String {
    binary.trim_start_matches("check_").to_uppercase()
}

/// No byte of the marker in stdout or stderr (and not its tell-tale prefix either).
fn assert_no_leak(out: &Output, secret: &str) {
    for s in [&out.stdout, &out.stderr] {
        assert!(!s.contains(secret), "protected content leaked: {out:?}");
        assert!(!s.contains("H1SECRET"), "protected content leaked: {out:?}");
    }
}

fn ok_to_run(test: &str) -> bool {
    need_root(test) && need_tool(test, "setcap") && need_tool(test, "setpriv")
}

#[test]
fn role_grants_capabilities_to_the_three_node_checks() {
    let caps = role_capabilities();
    let names: Vec<&str> = caps.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"check_ro_pvc_mounts"), "{caps:?}");
    assert!(names.contains(&"check_stale_csi_mounts"), "{caps:?}");
    assert!(names.contains(&"check_storage_kernel_errors"), "{caps:?}");
}

/// A wrong install (root:root 0755 with capabilities) lends nothing: the binary refuses a user
/// outside its file's group, in the requested format, exit 3.
#[test]
fn capability_binary_refuses_callers_outside_its_group() {
    let t = "capability_binary_refuses_callers_outside_its_group";
    if !ok_to_run(t) {
        return;
    }
    let lab = Lab::new();
    for (name, caps) in role_capabilities() {
        let p = lab.copy(&name, &caps, 0, 0o755);
        let svc = service(&name);
        let out = as_nobody(&p, &[]).run();
        out.assert_status(&svc, 3);
        assert!(
            out.first_line()
                .contains("refusing to run with elevated privilege")
                && out.first_line().contains("group 'root' (gid 0)")
                && out.first_line().contains("'nobody' (uid 65534)"),
            "{name}: {out:?}"
        );
        let out = as_nobody(&p, &[]).args(["--format", "json"]).run();
        assert_eq!(out.code, 3, "{out:?}");
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(v["status"], "UNKNOWN");
        assert!(v["summary"]
            .as_str()
            .unwrap()
            .contains("group 'root' (gid 0)"));
        // Another group that is not the file's does not help either.
        let out = as_nobody(&p, &[AGENT_GID]).run();
        assert!(
            out.first_line().contains("refusing to run"),
            "{name}: {out:?}"
        );
        // Owned by the agent's group: a member (supplementary or primary) is let through.
        let p = lab.copy(&name, &caps, AGENT_GID, 0o750);
        for out in [
            as_nobody(&p, &[AGENT_GID]).args(["-t", "3"]).run(),
            Cmd::new("setpriv")
                .arg(format!("--reuid={NOBODY}"))
                .arg(format!("--regid={AGENT_GID}"))
                .arg("--clear-groups")
                .arg("--")
                .arg(&p)
                .args(["-t", "3"])
                .run(),
        ] {
            out.assert_protocol(&svc);
            assert!(
                !out.stdout.contains("refusing to run"),
                "{name}: a member was refused: {out:?}"
            );
        }
    }
}

/// The agent's situation: user paths are read with the agent's own privilege. Root-only files
/// named by `--mountinfo`, `--kmsg`, `--log-file`, `--pods-json`, `--pvs-json` and `--state-dir`
/// are refused with EACCES, and nothing of them is shown.
#[test]
fn user_paths_are_read_with_the_callers_privilege() {
    let t = "user_paths_are_read_with_the_callers_privilege";
    if !ok_to_run(t) {
        return;
    }
    let lab = Lab::new();
    let root = lab.kubelet_root();
    let caps: std::collections::BTreeMap<String, String> =
        role_capabilities().into_iter().collect();
    let secret = marker("mi");
    // Garbled as a mount table: with privilege, the garbled-line message quoted its head.
    let mi = lab.secret("mountinfo", &format!("{secret} {secret}\n"));
    let root_arg = ["--kubelet-root", root.to_str().unwrap()];

    for name in ["check_ro_pvc_mounts", "check_stale_csi_mounts"] {
        let p = lab.copy(name, &caps[name], AGENT_GID, 0o750);
        let out = as_nobody(&p, &[AGENT_GID])
            .args(root_arg)
            .arg("--mountinfo")
            .arg(&mi)
            .args(["-t", "5"])
            .run();
        out.assert_status(&service(name), 3);
        assert!(
            out.first_line().contains(mi.to_str().unwrap())
                && out.first_line().contains("(EACCES)"),
            "{name}: the mount table should have been opened as the caller: {out:?}"
        );
        assert_no_leak(&out, &secret);
    }

    // --pods-json / --pvs-json (check_stale_csi_mounts).
    let p = lab.copy(
        "check_stale_csi_mounts",
        &caps["check_stale_csi_mounts"],
        AGENT_GID,
        0o750,
    );
    let pods_secret = marker("pods");
    let pods = lab.secret("pods.json", &format!("{{\"kind\":\"{pods_secret}\"}}"));
    for opt in ["--pods-json", "--pvs-json"] {
        let out = as_nobody(&p, &[AGENT_GID])
            .args(root_arg)
            .arg(opt)
            .arg(&pods)
            .args(["--node", "node-1", "-t", "5"])
            .run();
        out.assert_status("STALE_CSI_MOUNTS", 3);
        assert!(
            out.first_line()
                .contains(&format!("{opt} {}", pods.display()))
                && out.first_line().contains("(EACCES)"),
            "{opt}: {out:?}"
        );
        assert_no_leak(&out, &pods_secret);
    }

    // --kmsg (check_storage_kernel_errors, cap_syslog): a file of kmsg records.
    let p = lab.copy(
        "check_storage_kernel_errors",
        &caps["check_storage_kernel_errors"],
        AGENT_GID,
        0o750,
    );
    let kmsg_secret = marker("kmsg");
    let kmsg = lab.secret(
        "kmsg",
        &format!("3,1,1000,-;EXT4-fs error (device sdz): {kmsg_secret}\n"),
    );
    let out = as_nobody(&p, &[AGENT_GID])
        .arg("--kmsg")
        .arg(&kmsg)
        .args(["--window", "0", "-t", "5"])
        .run();
    out.assert_status("STORAGE_KERNEL_ERRORS", 3);
    assert!(out.first_line().contains(kmsg.to_str().unwrap()), "{out:?}");
    assert_no_leak(&out, &kmsg_secret);

    // --state-dir: a root-only directory whose state file holds the marker. The binary's own
    // /dev/kmsg is still read with its privilege (kernel.dmesg_restrict is set for the test).
    let state_secret = marker("state");
    let sd = lab.path("state");
    std::fs::create_dir_all(&sd).unwrap();
    chmod(&sd, 0o700);
    for i in 0..4 {
        std::fs::write(sd.join(format!("state{i}.json")), &state_secret).unwrap();
    }
    let restrict = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").unwrap();
    std::fs::write("/proc/sys/kernel/dmesg_restrict", "1").unwrap();
    let out = as_nobody(&p, &[AGENT_GID])
        .arg("--state-dir")
        .arg(&sd)
        // The machine's own kernel log may hold many findings: keep every note in view.
        .args(["--window", "0", "-t", "5", "-vv", "--max-output", "262144"])
        .run();
    std::fs::write("/proc/sys/kernel/dmesg_restrict", restrict.trim()).unwrap();
    out.assert_protocol("STORAGE_KERNEL_ERRORS");
    assert!(
        !out.stdout.contains("cannot read /dev/kmsg"),
        "the node's own /dev/kmsg must still be read with cap_syslog: {out:?}"
    );
    assert!(
        out.stdout.contains("Permission denied"),
        "the state directory should have been opened as the caller: {out:?}"
    );
    assert_no_leak(&out, &state_secret);
    assert!(
        std::fs::read_dir(&sd).unwrap().count() == 4,
        "nothing may be written into the root-only state directory"
    );

    // --log-file (check_kubelet_nested_ops): not a capability binary in the role; given
    // cap_dac_read_search by a wrong install it still reads the caller's path as the caller.
    let p = lab.copy(
        "check_kubelet_nested_ops",
        "cap_dac_read_search",
        AGENT_GID,
        0o750,
    );
    let log_secret = marker("log");
    let log = lab.secret(
        "kubelet.log",
        &format!("E0713 20:27:25.123456    2166 nestedpendingoperations.go:348] Operation for \"{{volumeName:kubernetes.io/csi/x^{log_secret} podName: nodeName:}}\" failed. No retries permitted until 2026-07-13 20:29:27.5 +0000 UTC m=+1.0 (durationBeforeRetry 2m2s). Error: {log_secret}\n"),
    );
    let out = as_nobody(&p, &[AGENT_GID])
        .arg("--log-file")
        .arg(&log)
        .args(["-t", "5"])
        .run();
    out.assert_status("KUBELET_NESTED_OPS", 3);
    assert!(out.stdout.contains("(EACCES)"), "{out:?}");
    assert_no_leak(&out, &log_secret);
}

/// A one-shot plain-HTTP listener: records every request it gets until told to stop.
struct Listener {
    port: u16,
    handle: std::thread::JoinHandle<Vec<String>>,
}

impl Listener {
    fn start() -> Listener {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let mut got = Vec::new();
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let req = String::from_utf8_lossy(&req).into_owned();
                if req.starts_with("QUIT") {
                    break;
                }
                let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nope","reason":"Forbidden","code":403}"#;
                let _ = write!(
                    c,
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                got.push(req);
            }
            got
        });
        Listener { port, handle }
    }

    /// Stop and return what it received.
    fn requests(self) -> Vec<String> {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.write_all(b"QUIT\r\n\r\n").unwrap();
        self.handle.join().unwrap()
    }
}

/// A kubeconfig for `server` whose user has `user_yaml` (indented 4 spaces), CA of `api`.
fn kubeconfig(api: &ApiServer, server: &str, user_yaml: &str) -> String {
    // The test server's own kubeconfig gives the CA data; only server and user change.
    let base = std::fs::read_to_string(api.kubeconfig(KubeCa::Inline, KubeAuth::None)).unwrap();
    base.replace(
        &format!("    server: {}\n", api.url()),
        &format!("    server: {server}\n"),
    )
    .replacen(
        "- name: checks\n  user:\n    {}\n",
        &format!("- name: checks\n  user:\n{user_yaml}"),
        1,
    )
}

/// A kubeconfig the attacker writes: `tokenFile` on a root-only file, server a plain-http
/// listener of theirs, or the test API server over https. The token is never read, and nothing
/// reaches the listener; plain http is refused unless --allow-insecure-http, and then no
/// credential is sent.
#[test]
fn attacker_kubeconfig_gets_no_token() {
    let t = "attacker_kubeconfig_gets_no_token";
    if !ok_to_run(t) {
        return;
    }
    let lab = Lab::new();
    let root = lab.kubelet_root();
    let caps: std::collections::BTreeMap<String, String> =
        role_capabilities().into_iter().collect();
    let p = lab.copy(
        "check_stale_csi_mounts",
        &caps["check_stale_csi_mounts"],
        AGENT_GID,
        0o750,
    );
    let api = ApiServer::start();
    let token = marker("token");
    api.add_token(&token, "system:admin");
    let token_file = lab.secret("token", &format!("{token}\n"));
    let user = format!("    tokenFile: {}\n", token_file.display());
    let run = |kc: &Path, extra: &[&str]| {
        as_nobody(&p, &[AGENT_GID])
            .args(["--kubelet-root", root.to_str().unwrap()])
            .arg("--kubeconfig")
            .arg(kc)
            .args(["--node", "node-1", "-t", "5"])
            .args(extra)
            .run()
    };

    // Plain http, not allowed: refused before any connection.
    let l = Listener::start();
    let kc = lab.public(
        "kc-http",
        &kubeconfig(&api, &format!("http://127.0.0.1:{}", l.port), &user),
    );
    let out = run(&kc, &[]);
    out.assert_status("STALE_CSI_MOUNTS", 3);
    assert!(
        out.stdout.contains("plain http: refused") && out.stdout.contains("--allow-insecure-http"),
        "{out:?}"
    );
    assert_no_leak(&out, &token);
    let got = l.requests();
    assert!(got.is_empty(), "the listener got: {got:?}");

    // Plain http, allowed: the request goes out without any credential.
    let l = Listener::start();
    let kc = lab.public(
        "kc-http2",
        &kubeconfig(&api, &format!("http://127.0.0.1:{}", l.port), &user),
    );
    let out = run(&kc, &["--allow-insecure-http"]);
    out.assert_protocol("STALE_CSI_MOUNTS");
    assert_no_leak(&out, &token);
    let got = l.requests();
    assert!(
        !got.is_empty(),
        "the allowed http request never came: {out:?}"
    );
    for r in &got {
        assert!(!r.contains(&token), "token sent over http: {r}");
        assert!(
            !r.to_ascii_lowercase().contains("authorization:"),
            "credential sent over http: {r}"
        );
    }

    // https to the real test server: the root-only tokenFile is opened as the caller: EACCES,
    // and no request is made.
    let kc = lab.public("kc-https", &kubeconfig(&api, &api.url(), &user));
    let out = run(&kc, &[]);
    out.assert_status("STALE_CSI_MOUNTS", 3);
    assert!(
        out.stdout
            .contains(&format!("cannot read token file {}", token_file.display()))
            && out.stdout.contains("(EACCES)"),
        "{out:?}"
    );
    assert_no_leak(&out, &token);
    assert!(
        api.requests().iter().all(|r| r.user.is_none()),
        "a request authenticated with the protected token: {:?}",
        api.requests()
    );

    // A root-only kubeconfig named by --kubeconfig: EACCES, nothing of it shown.
    let kc = lab.secret(
        "kc-secret",
        &kubeconfig(&api, &api.url(), &format!("    token: {token}\n")),
    );
    let out = run(&kc, &[]);
    out.assert_status("STALE_CSI_MOUNTS", 3);
    assert!(
        out.stdout.contains("cannot read kubeconfig") && out.stdout.contains("(EACCES)"),
        "{out:?}"
    );
    assert_no_leak(&out, &token);
    assert!(api.requests().is_empty(), "{:?}", api.requests());
}

/// `$KUBECONFIG` and the node's own credential files are never used by a privileged run, even
/// when they exist: a root-only kubeconfig in `$KUBECONFIG`, and a root-only
/// /etc/kubernetes/admin.conf (in a private mount namespace).
#[test]
fn no_discovered_credentials_while_privileged() {
    let t = "no_discovered_credentials_while_privileged";
    if !ok_to_run(t) {
        return;
    }
    // It makes an empty /etc/kubernetes on the machine for a while (the bind mount's target).
    let _machine = e2e::exclusive();
    let lab = Lab::new();
    let root = lab.kubelet_root();
    let caps: std::collections::BTreeMap<String, String> =
        role_capabilities().into_iter().collect();
    let p = lab.copy(
        "check_stale_csi_mounts",
        &caps["check_stale_csi_mounts"],
        AGENT_GID,
        0o750,
    );
    let api = ApiServer::start();
    let token = marker("admin");
    api.add_token(&token, "kubernetes-admin");
    let admin = kubeconfig(&api, &api.url(), &format!("    token: {token}\n"));

    // $KUBECONFIG → a root-only kubeconfig (and a readable one: not used either).
    let secret_kc = lab.secret("admin-env.conf", &admin);
    let open_kc = lab.public("open-env.conf", &admin);
    for kc in [&secret_kc, &open_kc] {
        let out = as_nobody(&p, &[AGENT_GID])
            .env("KUBECONFIG", kc)
            .args(["--kubelet-root", root.to_str().unwrap()])
            .args(["--node", "node-1", "-t", "5", "-vv"])
            .run();
        out.assert_protocol("STALE_CSI_MOUNTS");
        assert!(
            out.stdout.contains("more privilege than its caller"),
            "{}: {out:?}",
            kc.display()
        );
        assert_no_leak(&out, &token);
        assert!(api.requests().is_empty(), "{:?}", api.requests());
    }

    // /etc/kubernetes/admin.conf, root-only, in a private mount namespace.
    let etc = lab.path("etc-kubernetes");
    std::fs::create_dir_all(&etc).unwrap();
    let conf = etc.join("admin.conf");
    std::fs::write(&conf, &admin).unwrap();
    chmod(&conf, 0o600);
    // The mount point must exist; an empty /etc/kubernetes made here is removed afterwards.
    struct Rmdir(bool);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            if self.0 {
                let _ = std::fs::remove_dir("/etc/kubernetes");
            }
        }
    }
    let _made = Rmdir(std::fs::create_dir("/etc/kubernetes").is_ok());
    let ns = Ns::new();
    ns.sh(&format!(
        "mount --bind '{}' /etc/kubernetes && test -f /etc/kubernetes/admin.conf",
        etc.display()
    ));
    let out = as_nobody_in(Some(&ns), &p, &[AGENT_GID])
        .args(["--kubelet-root", root.to_str().unwrap()])
        .args(["--node", "node-1", "-t", "5", "-vv"])
        .run();
    out.assert_protocol("STALE_CSI_MOUNTS");
    assert!(
        out.stdout.contains("more privilege than its caller"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("admin.conf"), "{out:?}");
    assert_no_leak(&out, &token);
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    // Control: root (not privileged beyond its user) does discover it, which is what made the
    // capability dangerous.
    let out = ns
        .cmd(&p)
        .env_remove("KUBECONFIG")
        .args(["--kubelet-root", root.to_str().unwrap()])
        .args(["--node", "node-1", "-t", "5", "-vv"])
        .run();
    assert!(out.stdout.contains("admin.conf"), "{out:?}");
}

/// The binary's privilege still serves its own sources: the default kubelet root, root-only,
/// is looked into with cap_dac_read_search; the same root through a mount table the caller
/// names is not.
#[test]
fn own_kubelet_root_is_read_with_the_binarys_privilege() {
    let t = "own_kubelet_root_is_read_with_the_binarys_privilege";
    if !ok_to_run(t) {
        return;
    }
    let lab = Lab::new();
    let caps: std::collections::BTreeMap<String, String> =
        role_capabilities().into_iter().collect();
    let p = lab.copy(
        "check_ro_pvc_mounts",
        &caps["check_ro_pvc_mounts"],
        AGENT_GID,
        0o750,
    );
    let ns = Ns::new();
    // A root-only /var/lib/kubelet with one CSI volume mounted (a tmpfs) under it, on a tmpfs
    // over /var/lib in the namespace (the host's own /var/lib is not touched).
    ns.sh(
        "mount -t tmpfs -o mode=0755 varlib /var/lib && mkdir -m 0700 /var/lib/kubelet \
         && d=/var/lib/kubelet/pods/0b1c/volumes/kubernetes.io~csi/pvc-h1 && mkdir -p $d/mount \
         && echo '{\"specVolID\":\"pvc-h1\",\"volumeHandle\":\"pvc-h1\",\"driverName\":\"d.csi\"}' > $d/vol_data.json \
         && mount -t tmpfs -o mode=0700 pvc-h1 $d/mount",
    );
    let out = as_nobody_in(Some(&ns), &p, &[AGENT_GID])
        .args(["-t", "5", "--no-names"])
        .run();
    out.assert_status("RO_PVC_MOUNTS", 0);
    assert_eq!(out.perf("pv_mounts"), Some(1.0), "{out:?}");
    // The same node through a mount table the caller names (a copy of the node's own; the
    // default written as `--mountinfo /proc/self/mountinfo` is the node's own, issue 27 finding
    // 10): no privilege for it.
    let copy = lab.path("mountinfo-copy");
    ns.sh(&format!(
        "cat /proc/self/mountinfo > {0} && chmod 0644 {0}",
        copy.display()
    ));
    let out = as_nobody_in(Some(&ns), &p, &[AGENT_GID])
        .args(["-t", "5", "--no-names", "--mountinfo"])
        .arg(&copy)
        .run();
    out.assert_status("RO_PVC_MOUNTS", 3);
    assert!(out.first_line().contains("CAP_DAC_READ_SEARCH"), "{out:?}");
}
