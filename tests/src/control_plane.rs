//! The real Kubernetes control plane for the API checks' tests: `kube-apiserver` and etcd built
//! from the Go module proxy at the versions pinned in `tests/control-plane/go.mod`, started and
//! stopped by `tests/control-plane/up` / `down` (the one way, also for `bench/` and by hand).
//!
//! - [`ControlPlane::shared`]: one per test process, started on first use with `--owner <our
//!   pid>` (it stops when the test process ends, however it ends). Tests that share it keep to
//!   their own namespaces and their own node/PV names ([`ControlPlane::unique`]).
//! - [`ControlPlane::start`]: a private one, stopped on drop, for tests that change cluster-wide
//!   things (RBAC rules) or kill the datastore.
//!
//! Failing to build or start is a test failure carrying the servers' logs, never a skip: the
//! control plane is part of what `.ci/run` installs.
//!
//! - [`ControlPlane::start_with_watch_stall`]: a private one whose ConfigMaps reach etcd through
//!   a proxy that can stall the watch feed of the API server's watch cache ([`watch_stall`]).
//! - [`ControlPlane::audit`]: every request the server received (its audit log), to assert which
//!   requests a check made; [`ControlPlane::kubeconfig_with`]: kubeconfigs of every kind (token,
//!   token file, client certificates signed by the plane's CA, wrong CA, exec plugin, …).
//!
//! No controller-manager, scheduler or kubelet runs, which is what the incidents need: a pod
//! created with `spec.nodeName` stays Pending with no container status, a deleted pod holding a
//! finalizer stays Terminating. What those components would write (a pod's conditions and
//! container statuses) is written the way they write it: through the `status` subresource.

pub mod watch_stall;

use crate::apiserver::KubeCa;
use crate::Output;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A running control plane (see the module documentation).
pub struct ControlPlane {
    dir: PathBuf,
    /// Holds the directory of a private control plane (removed after `down`).
    _tmp: Option<tempfile::TempDir>,
    private: bool,
}

/// Identities `up` writes a kubeconfig for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum User {
    /// `admin`, group `system:masters`: sets up the objects.
    Admin,
    /// `system:serviceaccount:k8s-storage-checks:k8s-storage-checks`, the subject of
    /// `deploy/rbac.yaml`: what the checks run as.
    Checks,
    /// `nobody`: authenticated, granted nothing.
    Nobody,
}

impl User {
    fn file(self) -> &'static str {
        match self {
            User::Admin => "admin.kubeconfig",
            User::Checks => "checks.kubeconfig",
            User::Nobody => "nobody.kubeconfig",
        }
    }
}

fn script(name: &str) -> PathBuf {
    crate::workspace_root()
        .join("tests/control-plane")
        .join(name)
}

fn up(dir: &Path, owner: Option<u32>, up_args: &[String], apiserver_args: &[String]) {
    let mut cmd = Command::new(script("up"));
    cmd.arg(dir);
    if let Some(pid) = owner {
        // When the owner ends, stop the plane and remove DIR: a plane held in a static (the
        // shared one, watch_cache's stall plane) is never dropped, and its etcd data would stay.
        cmd.args(["--owner", &pid.to_string(), "--remove"]);
    }
    cmd.args(up_args);
    if !apiserver_args.is_empty() {
        cmd.arg("--").args(apiserver_args);
    }
    let t = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .expect("run tests/control-plane/up");
    assert!(
        out.status.success(),
        "tests/control-plane/up {} failed ({:?}): {}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "control plane up in {} ({:.1} s)",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
}

impl ControlPlane {
    /// The test process's shared control plane, started on first use.
    pub fn shared() -> &'static ControlPlane {
        static CP: OnceLock<ControlPlane> = OnceLock::new();
        CP.get_or_init(|| {
            let tmp = tempfile::Builder::new()
                .prefix("k8s-storage-checks-cp-")
                .tempdir()
                .expect("tempdir");
            // A static is never dropped: `up --owner … --remove` stops the processes when this
            // process ends, then removes the directory.
            let dir = tmp.keep();
            up(&dir, Some(std::process::id()), &[], &[]);
            ControlPlane {
                dir,
                _tmp: None,
                private: false,
            }
        })
    }

    /// A second API server of this control plane (its etcd, CA, keys and tokens: one cluster, as
    /// in an HA control plane), whose ConfigMaps reach etcd through a
    /// [`watch_stall::WatchStall`] proxy. Stopped on drop (this plane stays).
    pub fn start_peer_with_watch_stall(&self) -> (ControlPlane, watch_stall::WatchStall) {
        let proxy = watch_stall::WatchStall::start(self.dir.join("etcd-url"));
        let arg = format!("--etcd-servers-overrides=/configmaps#{}", proxy.url());
        let peer = Self::start_up(
            &["--peer-of".to_string(), self.dir.display().to_string()],
            |_| vec![arg],
        );
        (peer, proxy)
    }

    /// The shared control plane with `deploy/rbac.yaml` applied (once per process) and granted:
    /// what the checks run as ([`User::Checks`]) may do what the shipped RBAC allows.
    pub fn with_rbac() -> &'static ControlPlane {
        static APPLIED: OnceLock<()> = OnceLock::new();
        let cp = Self::shared();
        APPLIED.get_or_init(|| cp.apply_rbac());
        cp
    }

    /// Apply `deploy/rbac.yaml` and wait until the authorizer (which follows RBAC objects through
    /// a watch) grants the checks' identity its first and last permissions.
    pub fn apply_rbac(&self) {
        let rbac = std::fs::read_to_string(crate::workspace_root().join("deploy/rbac.yaml"))
            .expect("deploy/rbac.yaml");
        self.apply(&rbac);
        let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";
        self.wait_can(sa, &["list", "pods", "-A"]);
        self.wait_can(
            sa,
            &[
                "patch",
                "configmap/k8s-storage-checks-canary",
                "-n",
                "kube-system",
            ],
        );
    }

    /// Wait until `kubectl auth can-i ARGS --as user` says yes (20 s at most).
    pub fn wait_can(&self, user: &str, can_i: &[&str]) {
        let mut args = vec!["auth", "can-i"];
        args.extend(can_i);
        args.extend(["--as", user]);
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let out = self.kubectl_as(User::Admin, &args, None);
            if out.stdout.trim() == "yes" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{user} {can_i:?}: can-i still {out:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// A private control plane, stopped (and its directory removed) on drop.
    pub fn start() -> ControlPlane {
        Self::start_with(|_| Vec::new())
    }

    /// A private control plane whose ConfigMaps (and only they) go to etcd through a
    /// [`watch_stall::WatchStall`] proxy: stalled, the watch cache of ConfigMaps stops following
    /// etcd while reads and writes through etcd still succeed.
    pub fn start_with_watch_stall() -> (ControlPlane, watch_stall::WatchStall) {
        let mut proxy = None;
        let cp = Self::start_with(|dir| {
            let p = watch_stall::WatchStall::start(dir.join("etcd-url"));
            let arg = format!("--etcd-servers-overrides=/configmaps#{}", p.url());
            proxy = Some(p);
            vec![arg]
        });
        (cp, proxy.expect("proxy started"))
    }

    /// A private control plane with extra kube-apiserver arguments, from a function of DIR
    /// called before `up` (it may start something the API server is to connect to).
    pub fn start_with(args: impl FnOnce(&Path) -> Vec<String>) -> ControlPlane {
        Self::start_up(&[], args)
    }

    fn start_up(up_args: &[String], args: impl FnOnce(&Path) -> Vec<String>) -> ControlPlane {
        let tmp = tempfile::Builder::new()
            .prefix("k8s-storage-checks-cp-")
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let args = args(&dir);
        up(&dir, Some(std::process::id()), up_args, &args);
        ControlPlane {
            dir,
            _tmp: Some(tmp),
            private: true,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The API server's URL (`https://127.0.0.1:PORT`).
    pub fn server(&self) -> String {
        std::fs::read_to_string(self.dir.join("server"))
            .expect("DIR/server")
            .trim()
            .to_string()
    }

    /// The kubeconfig of one identity.
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir.join(user.file())
    }

    /// The pid of one of the servers (`etcd` or `kube-apiserver`).
    pub fn pid(&self, name: &str) -> i32 {
        std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    /// SIGSTOP one of the servers and wait until every one of its threads has stopped; returns
    /// its pid. A stop signal takes effect later than kill(2) returns: the kernel wakes one
    /// thread, and only when that thread runs does it stop the others — meanwhile they go on
    /// serving. On a loaded machine that took up to 70 ms (measured), and etcd answered the API
    /// server's reads in that window, so a check run "after" the stop could be served and say OK.
    pub fn stop_server(&self, name: &str) -> i32 {
        let pid = self.server_pid(name);
        kill(Pid::from_raw(pid), Signal::SIGSTOP).expect("SIGSTOP");
        crate::fuse::wait_until(
            &format!("every thread of {name} (pid {pid}) to stop"),
            Duration::from_secs(10),
            || {
                let s = thread_states(pid);
                !s.is_empty() && s.iter().all(|&c| c == 'T' || c == 't')
            },
        );
        pid
    }

    /// SIGCONT a server stopped by [`stop_server`](Self::stop_server) and wait until none of its
    /// threads is stopped.
    pub fn continue_server(&self, name: &str) {
        let pid = self.server_pid(name);
        kill(Pid::from_raw(pid), Signal::SIGCONT).expect("SIGCONT");
        crate::fuse::wait_until(
            &format!("every thread of {name} (pid {pid}) to run again"),
            Duration::from_secs(10),
            || thread_states(pid).iter().all(|&c| c != 'T' && c != 't'),
        );
    }

    /// SIGKILL one of the servers and wait until it is dead (a zombie or reaped): its sockets are
    /// closed.
    pub fn kill_server(&self, name: &str) {
        let pid = self.server_pid(name);
        kill(Pid::from_raw(pid), Signal::SIGKILL).expect("SIGKILL");
        crate::fuse::wait_until(
            &format!("{name} (pid {pid}) to die"),
            Duration::from_secs(10),
            || matches!(crate::fuse::proc_state(pid), None | Some('Z') | Some('X')),
        );
    }

    /// [`pid`](Self::pid), checked to be a live process of that name (not a stale pid file).
    fn server_pid(&self, name: &str) -> i32 {
        let pid = self.pid(name);
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_eq!(
            comm.trim_end(),
            name,
            "{}/{name}.pid: pid {pid} is not {name}",
            self.dir.display()
        );
        pid
    }

    /// A name no other test of this process (nor an earlier process: the pid is in it) uses.
    pub fn unique(prefix: &str) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// kubectl as `user`, with `stdin`; returns what it printed.
    pub fn kubectl_as(&self, user: User, args: &[&str], stdin: Option<&str>) -> Output {
        let mut c = crate::Cmd::new(self.dir.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig(user))
            .args(args)
            .env("HOME", &self.dir);
        if let Some(s) = stdin {
            c = c.stdin(s.as_bytes().to_vec());
        }
        c.run()
    }

    /// kubectl as admin; panics with its output when it fails.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl_as(User::Admin, args, stdin);
        assert_eq!(out.code, 0, "kubectl {args:?} failed: {out:?}");
        out.stdout
    }

    /// `kubectl apply -f -` of a YAML or JSON document (or several).
    pub fn apply(&self, doc: &str) {
        self.kubectl(&["apply", "-f", "-"], Some(doc));
    }

    /// Apply a CustomResourceDefinition and wait until its resources are served
    /// ([`Self::wait_crd_served`]).
    pub fn apply_crd(&self, doc: &str, name: &str) {
        self.apply(doc);
        self.wait_crd_served(name);
    }

    /// Wait (20 s at most) until the server reports the CRD `name` Established **and** its
    /// discovery documents list its resource: the group-version document of every served
    /// version, and the aggregated document at /apis that kubectl maps kinds by. Each is a
    /// controller of its own in the API server: under load Established can come first, and a
    /// kubectl started in between maps no kind ("ensure CRDs are installed first"). `kubectl
    /// wait` right after the apply can fail too, while the CRD has no conditions yet.
    pub fn wait_crd_served(&self, name: &str) {
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let out = self.kubectl_as(User::Admin, &["get", "crd", name, "-o", "json"], None);
            let crd: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
            let established = crd["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            let group = crd["spec"]["group"].as_str().unwrap_or("?");
            let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("?");
            let served = |v: &serde_json::Value| -> bool {
                let path = format!("/apis/{group}/{}", v["name"].as_str().unwrap_or("?"));
                let out = self.kubectl_as(User::Admin, &["get", "--raw", &path], None);
                out.code == 0 && out.stdout.contains(&format!("\"name\":\"{plural}\""))
            };
            let versions = crd["spec"]["versions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // The aggregator rebuilds /apis on its own queue after the group's APIService is
            // registered, so later than the group-version documents. `api-resources` reads it,
            // and refreshes the discovery cache every later kubectl of this server reads.
            let listed = || -> bool {
                let out = self.kubectl_as(
                    User::Admin,
                    &["api-resources", "--api-group", group, "-o", "name"],
                    None,
                );
                let want = format!("{plural}.{group}");
                out.code == 0 && out.stdout.lines().any(|l| l.trim() == want)
            };
            if established
                && !versions.is_empty()
                && versions.iter().filter(|v| v["served"] == true).all(served)
                && listed()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "CRD {name} not Established and served: {out:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// A namespace of its own for a test.
    pub fn namespace(&self, prefix: &str) -> String {
        let ns = Self::unique(prefix);
        self.kubectl(&["create", "namespace", &ns], None);
        ns
    }

    /// A Node object (what a kubelet would register; none runs here).
    pub fn node(&self, name: &str) {
        self.create(&serde_json::json!({"apiVersion":"v1","kind":"Node","metadata":{"name":name}}));
    }

    /// Create an object as the API receives it (status dropped by the server), then, when the
    /// document has a `status`, write it through the status subresource as the component that
    /// owns it would (kubelet, scheduler, PV controller). Server-set metadata (uid,
    /// resourceVersion, creationTimestamp, managedFields) is left to the server.
    pub fn create(&self, obj: &Value) {
        let mut obj = obj.clone();
        let mut status = obj.as_object_mut().and_then(|o| o.remove("status"));
        // The server computes a pod's QoS class, and it is immutable.
        if let Some(s) = status.as_mut().and_then(Value::as_object_mut) {
            s.remove("qosClass");
        }
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                m.remove(k);
            }
        }
        self.kubectl(&["create", "-f", "-"], Some(&obj.to_string()));
        if let Some(status) = status {
            self.patch_status(&obj, &status);
        }
    }

    /// Create many objects with one kubectl (one request each, no process each), then write
    /// the statuses of those that have one with one more kubectl (`replace --subresource=status`
    /// of the created objects, carrying the server's resourceVersion and QoS class).
    pub fn create_all(&self, objs: &[Value]) {
        let mut bare = Vec::new();
        let mut statuses = std::collections::BTreeMap::new();
        for o in objs {
            let mut o = o.clone();
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                for k in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "managedFields",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    m.remove(k);
                }
            }
            if let Some(st) = o.as_object_mut().and_then(|m| m.remove("status")) {
                let key = (
                    o["kind"].as_str().unwrap_or("").to_string(),
                    o["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    o["metadata"]["name"].as_str().unwrap_or("").to_string(),
                );
                statuses.insert(key, st);
            }
            bare.push(o);
        }
        let list = serde_json::json!({"apiVersion":"v1","kind":"List","items":bare});
        let created = self.kubectl(
            &["create", "-o", "json", "-f", "-"],
            Some(&list.to_string()),
        );
        if statuses.is_empty() {
            return;
        }
        // kubectl prints the created objects one JSON document after another (or as a List).
        let mut items: Vec<Value> = Vec::new();
        for doc in serde_json::Deserializer::from_str(&created).into_iter::<Value>() {
            let doc = doc.expect("kubectl create -o json");
            match doc["kind"].as_str() {
                Some("List") => items.extend(doc["items"].as_array().cloned().unwrap_or_default()),
                _ => items.push(doc),
            }
        }
        let mut updated = Vec::new();
        for mut o in items {
            let key = (
                o["kind"].as_str().unwrap_or("").to_string(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            );
            let Some(st) = statuses.get(&key) else {
                continue;
            };
            let qos = o["status"]["qosClass"].clone();
            o["status"] = st.clone();
            // Required in a ContainerStatus (kubectl validates); a kubelet always writes them.
            for list in ["containerStatuses", "initContainerStatuses"] {
                if let Some(a) = o["status"].get_mut(list).and_then(Value::as_array_mut) {
                    for c in a {
                        for k in ["image", "imageID"] {
                            if c.get(k).is_none() {
                                c[k] = serde_json::json!("");
                            }
                        }
                    }
                }
            }
            if !qos.is_null() {
                o["status"]["qosClass"] = qos;
            }
            updated.push(o);
        }
        let list = serde_json::json!({"apiVersion":"v1","kind":"List","items":updated});
        self.kubectl(
            &["replace", "--subresource=status", "-f", "-"],
            Some(&list.to_string()),
        );
    }

    /// Merge-patch `status` into an existing object through its status subresource.
    pub fn patch_status(&self, obj: &Value, status: &Value) {
        let kind = obj["kind"].as_str().expect("kind");
        let name = obj["metadata"]["name"].as_str().expect("metadata.name");
        let mut args = vec!["patch", kind, name, "--subresource=status", "--type=merge"];
        let ns = obj["metadata"]["namespace"].as_str();
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        let patch = serde_json::json!({ "status": status }).to_string();
        args.extend(["-p", &patch]);
        self.kubectl(&args, None);
    }

    /// The server's view of one object.
    pub fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Value {
        let mut args = vec!["get", kind, name, "-o", "json"];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        serde_json::from_str(&self.kubectl(&args, None)).expect("kubectl -o json")
    }
}

/// The credentials of a kubeconfig written by [`ControlPlane::kubeconfig_with`].
#[derive(Debug, Clone)]
pub enum Auth {
    /// `token:` inline, of one of the token-file users.
    Token(User),
    /// `tokenFile:` holding the token of one of the token-file users.
    TokenFile(User),
    /// A token the server does not know.
    WrongToken,
    /// `client-certificate-data`/`client-key-data`: a certificate for this user (CN) signed by
    /// the plane's CA.
    CertInline(String),
    /// `client-certificate`/`client-key` files (paths relative to the kubeconfig), likewise.
    CertFiles(String),
    /// A client certificate from a CA the server does not trust.
    CertUntrusted,
    /// An exec credential plugin (the checks do not support it).
    Exec,
}

fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl ControlPlane {
    /// The token of a token-file user.
    pub fn token(&self, user: User) -> String {
        let kc = std::fs::read_to_string(self.kubeconfig(user)).expect("kubeconfig");
        kc.lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .expect("token: line")
            .to_string()
    }

    /// A client certificate and key (PEM) for `user` (CN) in `groups` (O), signed by this
    /// plane's CA (`ca` = false: by a CA of its own the server does not trust).
    pub fn client_cert(&self, user: &str, groups: &[&str], ca: bool) -> (String, String) {
        let d = tempfile::tempdir().expect("tempdir");
        let p = |f: &str| d.path().join(f).to_str().unwrap().to_string();
        let mut subj = format!("/CN={user}");
        for g in groups {
            subj.push_str(&format!("/O={g}"));
        }
        let (ca_crt, ca_key) = if ca {
            let pki = self.dir.join("pki");
            (
                pki.join("ca.crt").to_str().unwrap().to_string(),
                pki.join("ca.key").to_str().unwrap().to_string(),
            )
        } else {
            openssl(&[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=rogue CA",
                "-keyout",
                &p("rca.key"),
                "-out",
                &p("rca.crt"),
            ]);
            (p("rca.crt"), p("rca.key"))
        };
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &subj,
            "-keyout",
            &p("c.key"),
            "-out",
            &p("c.csr"),
        ]);
        std::fs::write(
            p("c.ext"),
            "extendedKeyUsage=clientAuth
",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p("c.csr"),
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-set_serial",
            &format!(
                "{}",
                std::process::id() as u64 * 1000 + u64::from(Self::serial())
            ),
            "-days",
            "2",
            "-extfile",
            &p("c.ext"),
            "-out",
            &p("c.crt"),
        ]);
        (
            std::fs::read_to_string(p("c.crt")).unwrap(),
            std::fs::read_to_string(p("c.key")).unwrap(),
        )
    }

    fn serial() -> u32 {
        static N: AtomicU32 = AtomicU32::new(1);
        N.fetch_add(1, Ordering::Relaxed)
    }

    /// Bind `user` (a certificate's CN) to deploy/rbac.yaml's ClusterRole `k8s-storage-checks`
    /// (which must have been applied), and wait until the authorizer grants it.
    pub fn grant_checks_role(&self, user: &str) {
        let name = Self::unique("checks-user");
        self.kubectl(
            &[
                "create",
                "clusterrolebinding",
                &name,
                "--clusterrole=k8s-storage-checks",
                &format!("--user={user}"),
            ],
            None,
        );
        self.wait_can(user, &["list", "pods", "-A"]);
    }

    /// A user of its own (a certificate's CN) bound to a ClusterRole of its own with `rules`
    /// (JSON array of PolicyRules), granted once `kubectl auth can-i WAIT_FOR…` says yes.
    pub fn user_with_rules(&self, rules: &Value, wait_for: &[&str]) -> String {
        let name = Self::unique("test-user");
        self.apply(
            &serde_json::json!({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
                "metadata":{"name":name},"rules":rules})
            .to_string(),
        );
        self.kubectl(
            &[
                "create",
                "clusterrolebinding",
                &name,
                &format!("--clusterrole={name}"),
                &format!("--user={name}"),
            ],
            None,
        );
        self.wait_can(&name, wait_for);
        name
    }

    /// Write a kubeconfig for this plane (or for `server` instead of its URL) with the CA and
    /// credentials asked for. Besides the current context `test`, a context `other` uses a user
    /// without credentials (anonymous: this server refuses anonymous requests).
    pub fn kubeconfig_with(&self, server: Option<&str>, ca: KubeCa, auth: Auth) -> PathBuf {
        let n = Self::serial();
        let d = self.dir.join(format!("kc{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let ca_pem = std::fs::read_to_string(self.dir.join("pki/ca.crt")).unwrap();
        let server = server.map(String::from).unwrap_or_else(|| self.server());
        let mut cluster = format!("    server: {server}\n");
        match ca {
            KubeCa::Inline => cluster.push_str(&format!(
                "    certificate-authority-data: {}\n",
                b64(ca_pem.as_bytes())
            )),
            KubeCa::File => {
                std::fs::write(d.join("ca.crt"), &ca_pem).unwrap();
                cluster.push_str("    certificate-authority: ca.crt\n");
            }
            KubeCa::Wrong => {
                let (other, _) = self.client_cert("some-other-ca", &[], false);
                cluster.push_str(&format!(
                    "    certificate-authority-data: {}\n",
                    b64(other.as_bytes())
                ));
            }
            KubeCa::Insecure => cluster.push_str("    insecure-skip-tls-verify: true\n"),
            KubeCa::Missing => {}
        }
        let cert_inline = |c: String, k: String| {
            format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(c.as_bytes()),
                b64(k.as_bytes())
            )
        };
        let user = match auth {
            Auth::Token(u) => format!("    token: {}\n", self.token(u)),
            Auth::WrongToken => "    token: expired-0123456789abcdef\n".to_string(),
            Auth::TokenFile(u) => {
                std::fs::write(d.join("token"), format!("{}\n", self.token(u))).unwrap();
                format!("    tokenFile: {}\n", d.join("token").display())
            }
            Auth::CertInline(u) => {
                let (c, k) = self.client_cert(&u, &[], true);
                cert_inline(c, k)
            }
            Auth::CertFiles(u) => {
                let (c, k) = self.client_cert(&u, &[], true);
                std::fs::create_dir_all(d.join("pki")).unwrap();
                std::fs::write(d.join("pki/client.crt"), c).unwrap();
                std::fs::write(d.join("pki/client.key"), k).unwrap();
                "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n"
                    .to_string()
            }
            Auth::CertUntrusted => {
                let (c, k) = self.client_cert("intruder", &[], false);
                cert_inline(c, k)
            }
            Auth::Exec => "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [eks, get-token]\n".to_string(),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n{cluster}contexts:\n- name: test\n  context:\n    cluster: test\n    user: checks\n- name: other\n  context:\n    cluster: test\n    user: nobody\ncurrent-context: test\nusers:\n- name: checks\n  user:\n{user}- name: nobody\n  user: {{}}\n"
        );
        let p = d.join("config");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Every request the server has received so far, as audit events (JSON: `user.username`,
    /// `verb`, `requestURI` with its query, `objectRef`), in order. Written at stage
    /// RequestReceived, before the request is served: a check's requests are all here once it
    /// has exited.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The audit events of requests by `user` whose URI path is `path` (query ignored).
    pub fn requests(&self, user: &str, path: &str) -> Vec<AuditedRequest> {
        self.audit()
            .iter()
            .filter(|e| e["user"]["username"] == user)
            .filter_map(|e| {
                let uri = e["requestURI"].as_str()?;
                let (p, q) = uri.split_once('?').unwrap_or((uri, ""));
                (p == path).then(|| AuditedRequest {
                    verb: e["verb"].as_str().unwrap_or("").to_string(),
                    path: p.to_string(),
                    query: q
                        .split('&')
                        .filter(|kv| !kv.is_empty())
                        .map(|kv| {
                            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                            (pct_decode(k), pct_decode(v))
                        })
                        .collect(),
                    user: user.to_string(),
                })
            })
            .collect()
    }
}

/// One request from the audit log.
#[derive(Debug, Clone)]
pub struct AuditedRequest {
    /// The API verb: `list`, `get`, `patch`, `create`, `watch`, …
    pub verb: String,
    pub path: String,
    /// Query pairs, percent-decoded.
    pub query: Vec<(String, String)>,
    pub user: String,
}

impl AuditedRequest {
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The state letter (`R`, `S`, `T`, …) of every thread of `pid`; empty when it is gone.
fn thread_states(pid: i32) -> Vec<char> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|s| s.rsplit_once(')')?.1.trim_start().chars().next())
        .collect()
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.private {
            let _ = Command::new(script("down"))
                .arg(&self.dir)
                .stdin(Stdio::null())
                .status();
        }
    }
}
