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
//! No controller-manager, scheduler or kubelet runs, which is what the incidents need: a pod
//! created with `spec.nodeName` stays Pending with no container status, a deleted pod holding a
//! finalizer stays Terminating. What those components would write (a pod's conditions and
//! container statuses) is written the way they write it: through the `status` subresource.

use crate::Output;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

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

fn up(dir: &Path, owner: Option<u32>) {
    let mut cmd = Command::new(script("up"));
    cmd.arg(dir);
    if let Some(pid) = owner {
        cmd.args(["--owner", &pid.to_string()]);
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
            // A static is never dropped: the directory stays; `--owner` stops the processes.
            let dir = tmp.keep();
            up(&dir, Some(std::process::id()));
            ControlPlane {
                dir,
                _tmp: None,
                private: false,
            }
        })
    }

    /// A private control plane, stopped (and its directory removed) on drop.
    pub fn start() -> ControlPlane {
        let tmp = tempfile::Builder::new()
            .prefix("k8s-storage-checks-cp-")
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().to_path_buf();
        up(&dir, Some(std::process::id()));
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
