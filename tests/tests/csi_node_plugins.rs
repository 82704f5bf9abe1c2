//! check_csi_node_plugins against real gRPC servers and the real kube-apiserver.
//!
//! The servers are `csi-fixture` (tests/csi-plugins, built from the Go module proxy by
//! `tests/csi-plugins/build`): grpc-go serving the kubelet plugin-registration service from
//! k8s.io/kubelet's generated bindings (as node-driver-registrar serves it) and the CSI Identity
//! service from the CSI spec's generated bindings, each on a unix socket in a temporary kubelet
//! root laid out as the kubelet's (`plugins_registry/<driver>-reg.sock`,
//! `plugins/<dir>/csi.sock`, `pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json`). The
//! CSINode, Node and node-plugin pod are created through the real API (the pod's Ready condition
//! written through the status subresource, as the kubelet writes it); the check runs as the
//! identity deploy/rbac.yaml grants to.
//!
//! `hostile_*` alone use a loopback fake (see [`Hostile`]): a socket that sends garbage, never
//! answers or floods frames is a fault no real gRPC server produces on demand.

use e2e::control_plane::{ControlPlane, User};
use e2e::{Cmd, Output};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const NAME: &str = "CSI_NODE_PLUGINS";
const BIN: &str = "check_csi_node_plugins";

fn cp() -> &'static ControlPlane {
    ControlPlane::with_rbac()
}

/// The fixture program, built once per test process.
fn fixture() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = e2e::workspace_root();
        let out = Command::new(root.join("tests/csi-plugins/build"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run tests/csi-plugins/build");
        assert!(out.status.success(), "tests/csi-plugins/build failed");
        let dir = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(dir.trim()).join("csi-fixture")
    })
    .clone()
}

/// A running fixture server; killed (and continued first, if stopped) when dropped.
struct Server {
    child: Child,
}

impl Server {
    /// Start `csi-fixture MODE ARGS` and wait for its "serving PATH" line (it listens then).
    fn start(mode: &str, args: &[&str]) -> Server {
        let mut child = Command::new(fixture())
            .arg(mode)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start csi-fixture");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("serving "), "csi-fixture {mode}: {line:?}");
        Server { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGSTOP, and wait until the kernel shows the process stopped.
    fn stop(&self) {
        signal(self.pid(), "STOP");
        let stat = format!("/proc/{}/stat", self.pid());
        e2e::fuse::wait_until("the driver to be stopped", Duration::from_secs(10), || {
            std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('T')))
                .unwrap_or(false)
        });
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        signal(self.pid(), "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: i32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// A kubelet root with one node plugin: its registrar and driver running, a pod's CSI volume
/// using it, and (through the API) its Node, CSINode and Ready node-plugin pod.
struct Node {
    root: tempfile::TempDir,
    name: String,
    driver_name: String,
    driver: Option<Server>,
    _registrar: Option<Server>,
    pod: String,
    ns: String,
}

impl Node {
    fn root(&self) -> &Path {
        self.root.path()
    }

    fn endpoint(&self) -> PathBuf {
        self.root().join("plugins/csi-hostpath/csi.sock")
    }

    fn new(cp: &ControlPlane, in_csinode: bool) -> Node {
        let root = tempfile::Builder::new()
            .prefix("kubelet-csi-")
            .tempdir_in("/tmp")
            .unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("plugins_registry")).unwrap();
        std::fs::create_dir_all(r.join("plugins/csi-hostpath")).unwrap();
        let name = ControlPlane::unique("worker-csi");
        let driver_name = format!("{}.hostpath.csi.k8s.io", ControlPlane::unique("d"));
        let endpoint = r.join("plugins/csi-hostpath/csi.sock");
        let driver = Server::start(
            "driver",
            &[
                "--socket",
                endpoint.to_str().unwrap(),
                "--name",
                &driver_name,
            ],
        );
        let reg = r.join(format!("plugins_registry/{driver_name}-reg.sock"));
        let registrar = Server::start(
            "registrar",
            &[
                "--socket",
                reg.to_str().unwrap(),
                "--name",
                &driver_name,
                "--endpoint",
                endpoint.to_str().unwrap(),
            ],
        );
        // A pod's CSI volume using the driver.
        let vol = r.join("pods/0c5e1f8e-uid/volumes/kubernetes.io~csi/pvc-csi-1");
        std::fs::create_dir_all(vol.join("mount")).unwrap();
        std::fs::write(
            vol.join("vol_data.json"),
            json!({"driverName": driver_name, "specVolID": "pvc-csi-1", "volumeHandle": "h1",
                   "nodeName": name, "volumeLifecycleMode": "Persistent"})
            .to_string(),
        )
        .unwrap();
        cp.node(&name);
        let drivers = if in_csinode {
            json!([{"name": driver_name, "nodeID": name, "topologyKeys": null}])
        } else {
            json!([])
        };
        cp.create(
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name}, "spec": {"drivers": drivers}}),
        );
        let ns = cp.namespace("csi");
        let pod = "csi-hostpathplugin-0".to_string();
        cp.create(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": ns},
            "spec": {"nodeName": name, "containers": [
                {"name": "node-driver-registrar", "image": "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0",
                 "args": ["--csi-address=/csi/csi.sock",
                          format!("--kubelet-registration-path={}", endpoint.display())]},
                {"name": "hostpath", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.15.0"}],
              "volumes": [
                {"name": "socket-dir", "hostPath": {"path": r.join("plugins/csi-hostpath"), "type": "DirectoryOrCreate"}},
                {"name": "registration-dir", "hostPath": {"path": r.join("plugins_registry"), "type": "Directory"}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        Node {
            root,
            name,
            driver_name,
            driver: Some(driver),
            _registrar: Some(registrar),
            pod,
            ns,
        }
    }

    fn check_as(&self, cp: &ControlPlane, user: User, args: &[&str]) -> (Output, Duration) {
        let start = Instant::now();
        let out = Cmd::check(BIN)
            .without_host_credentials()
            .arg("--kubeconfig")
            .arg(cp.kubeconfig(user))
            .arg("--kubelet-root")
            .arg(self.root())
            .args(["--node", &self.name])
            .args(args)
            .run();
        (out, start.elapsed())
    }

    fn check(&self, cp: &ControlPlane, args: &[&str]) -> Output {
        self.check_as(cp, User::Checks, args).0
    }
}

#[test]
fn healthy_plugin_is_ok_naming_driver_socket_csinode_and_pod() {
    let cp = cp();
    let n = Node::new(cp, true);
    let out = n.check(cp, &["-v"]);
    out.assert_protocol(NAME).assert_status(NAME, 0);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} OK - 1 CSI driver on node {} registered and answering: {}",
            n.name, n.driver_name
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "[OK] {}: registered, {} answers Probe and GetPluginInfo, in CSINode {}, node-plugin pod {}/{} Ready; used by 1 volume on this node (pvc-csi-1)",
            n.driver_name,
            n.endpoint().display(),
            n.name,
            n.ns,
            n.pod
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("drivers"), Some(1.0));
    assert_eq!(out.perf("unhealthy_drivers"), Some(0.0));
    let out = n.check(cp, &["--format", "json"]);
    assert_eq!(out.signals(), vec![("csi_driver_ok".into(), "OK".into())]);
    let f = out.finding("csi_driver_ok");
    assert_eq!(f["subject"]["driver"], json!(n.driver_name));
    assert_eq!(f["subject"]["node"], json!(n.name));
}

#[test]
fn a_stopped_driver_is_critical_within_the_probe_timeout() {
    let cp = cp();
    let n = Node::new(cp, true);
    n.driver.as_ref().unwrap().stop();
    let (out, took) = n.check_as(cp, User::Checks, &["--probe-timeout", "1s"]);
    out.assert_protocol(NAME).assert_status(NAME, 2);
    assert!(
        out.stdout.contains(&format!(
            "[CRITICAL] {}: driver socket does not answer within --probe-timeout 1s (Probe on {}: no answer in time)",
            n.driver_name,
            n.endpoint().display()
        )),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("`kubectl -n {} delete pod {}`", n.ns, n.pod)),
        "{out:?}"
    );
    // The socket calls took the probe timeout, not more: the whole run (API calls, a process
    // start) stays well within -t.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let out = n.check(cp, &["--probe-timeout", "1s", "--format", "json"]);
    assert_eq!(
        out.signals(),
        vec![("csi_socket_unresponsive".into(), "CRITICAL".into())]
    );
    // Continued, it answers again.
    signal(n.driver.as_ref().unwrap().pid(), "CONT");
    n.check(cp, &[]).assert_status(NAME, 0);
}

#[test]
fn a_gone_driver_socket_is_critical() {
    let cp = cp();
    let mut n = Node::new(cp, true);
    drop(n.driver.take());
    std::fs::remove_file(n.endpoint()).unwrap();
    let out = n.check(cp, &[]);
    out.assert_protocol(NAME).assert_status(NAME, 2);
    assert!(
        out.stdout.contains(&format!(
            "[CRITICAL] {}: driver socket gone ({}: no such file)",
            n.driver_name,
            n.endpoint().display()
        )),
        "{out:?}"
    );
}

#[test]
fn a_driver_used_by_a_volume_but_not_registered_nor_in_csinode_is_critical() {
    let cp = cp();
    let n = Node::new(cp, true);
    let ghost = format!("{}.csi.example.com", ControlPlane::unique("ghost"));
    let vol = n
        .root()
        .join("pods/7d1e-uid/volumes/kubernetes.io~csi/pvc-ghost");
    std::fs::create_dir_all(vol.join("mount")).unwrap();
    std::fs::write(
        vol.join("vol_data.json"),
        json!({"driverName": ghost, "specVolID": "pvc-ghost"}).to_string(),
    )
    .unwrap();
    let out = n.check(cp, &[]);
    out.assert_protocol(NAME).assert_status(NAME, 2);
    assert!(
        out.first_line().contains(&format!(
            "1 of 2 CSI drivers on node {} with problems: {ghost}",
            n.name
        )),
        "{out:?}"
    );
    // Every finding, in JSON (the text answer is cut at --max-output).
    let out = n.check(cp, &["--format", "json"]);
    let v = out.json();
    let texts: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["signal"].as_str().unwrap().to_string(),
                f["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |signal: &str, text: &str| texts.iter().any(|(s, t)| s == signal && t == text);
    assert!(
        has(
            "csi_driver_unregistered",
            &format!(
                "{ghost}: not registered with the kubelet (no registration socket in {}/plugins_registry); used by 1 volume on this node (pvc-ghost)",
                n.root().display()
            )
        ),
        "{texts:?}"
    );
    assert!(
        has(
            "csi_driver_unregistered",
            &format!(
                "{ghost}: not in CSINode {}; used by 1 volume on this node (pvc-ghost)",
                n.name
            )
        ),
        "{texts:?}"
    );
    let unregistered = out.finding("csi_driver_unregistered");
    assert!(
        unregistered["next"]
            .as_str()
            .unwrap()
            .contains(&format!("`kubectl get csinode {} -o yaml`", n.name)),
        "{unregistered}"
    );
    // The healthy driver beside it stays OK.
    assert!(
        texts.iter().any(|(s, t)| s == "csi_driver_ok"
            && t.starts_with(&format!("{}: registered", n.driver_name))),
        "{texts:?}"
    );
}

#[test]
fn a_registered_driver_missing_from_csinode_is_critical() {
    let cp = cp();
    let n = Node::new(cp, false);
    let out = n.check(cp, &["--format", "json"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.signals(),
        vec![("csi_driver_unregistered".into(), "CRITICAL".into())]
    );
    let f = out.finding("csi_driver_unregistered");
    assert!(
        f["text"]
            .as_str()
            .unwrap()
            .contains(&format!("not in CSINode {}", n.name)),
        "{f}"
    );
}

#[test]
fn no_permission_is_unknown_with_the_socket_calls_still_reported() {
    let cp = cp();
    let n = Node::new(cp, true);
    // -v: the OK lines of the socket calls are shown beside the UNKNOWN.
    let (out, _) = n.check_as(cp, User::Nobody, &["-v"]);
    out.assert_protocol(NAME).assert_status(NAME, 3);
    assert!(out.first_line().contains("API not read"), "{out:?}");
    assert!(out.stdout.contains("403"), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "[OK] {}: registered, {} answers Probe",
            n.driver_name,
            n.endpoint().display()
        )),
        "{out:?}"
    );
    // A dead socket stays CRITICAL without the API.
    n.driver.as_ref().unwrap().stop();
    let (out, _) = n.check_as(cp, User::Nobody, &["--probe-timeout", "1s"]);
    out.assert_status(NAME, 2);
}

#[test]
fn nothing_registered_and_no_volumes_is_ok_saying_so() {
    let cp = cp();
    let root = tempfile::Builder::new()
        .prefix("kubelet-empty-")
        .tempdir_in("/tmp")
        .unwrap();
    let name = ControlPlane::unique("worker-empty");
    cp.node(&name);
    cp.create(
        &json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": name}, "spec": {"drivers": []}}),
    );
    let out = Cmd::check(BIN)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(cp.kubeconfig(User::Checks))
        .arg("--kubelet-root")
        .arg(root.path())
        .args(["--node", &name])
        .run();
    out.assert_protocol(NAME).assert_status(NAME, 0);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} OK - no CSI drivers registered and no CSI volumes on node {name} (CSINode lists none)"
        )),
        "{out:?}"
    );
}

#[test]
fn a_registration_socket_linked_out_of_the_kubelet_root_is_not_followed() {
    let cp = cp();
    let n = Node::new(cp, true);
    // Another daemon's socket outside the kubelet root, and a link to it planted in
    // plugins_registry/ (what a hostile plugin pod could write there).
    let outside = tempfile::Builder::new()
        .prefix("other-daemon-")
        .tempdir_in("/tmp")
        .unwrap();
    let other = outside.path().join("daemon.sock");
    let l = UnixListener::bind(&other).unwrap();
    l.set_nonblocking(true).unwrap();
    std::os::unix::fs::symlink(
        &other,
        n.root()
            .join("plugins_registry/evil.csi.example.com-reg.sock"),
    )
    .unwrap();
    let out = n.check(cp, &["--format", "json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let f = out.finding("csi_socket_refused");
    assert!(f["text"].as_str().unwrap().contains("symbolic link"), "{f}");
    // Nothing connected to the other daemon.
    assert!(l.accept().is_err(), "the check connected through the link");
}

/// A loopback fake registration socket for faults no real gRPC server produces on demand:
/// garbage, silence, an endless flood of frames. Says so: it is no gRPC server.
struct Hostile {
    _t: std::thread::JoinHandle<()>,
}

impl Hostile {
    fn serve(path: &Path, mode: &'static str) -> Hostile {
        let l = UnixListener::bind(path).unwrap();
        let t = std::thread::spawn(move || {
            // Serve a few connections, each bounded in time, then stop.
            for _ in 0..4 {
                let Ok((mut s, _)) = l.accept() else { return };
                std::thread::spawn(move || {
                    let until = Instant::now() + Duration::from_secs(20);
                    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 4096];
                    match mode {
                        "garbage" => {
                            let _ =
                                s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n\x00\xff\x13garbage");
                            let _ = s.read(&mut buf);
                        }
                        "silent" => {
                            while Instant::now() < until {
                                if let Ok(0) = s.read(&mut buf) {
                                    return;
                                }
                            }
                        }
                        "flood" => {
                            // Empty SETTINGS ACKs and PINGs, forever (until the peer goes).
                            let mut f = Vec::new();
                            for i in 0..512u32 {
                                f.extend_from_slice(&[0, 0, 8, 6, 0, 0, 0, 0, 0]);
                                f.extend_from_slice(&u64::from(i).to_be_bytes());
                            }
                            while Instant::now() < until {
                                if s.write_all(&f).is_err() {
                                    return;
                                }
                                let _ = s.read(&mut buf);
                            }
                        }
                        "huge-headers" => {
                            // A frame header announcing 16 MiB of HEADERS.
                            let _ = s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
                            let _ = s.write_all(&[0xff, 0xff, 0xff, 1, 4, 0, 0, 0, 1]);
                            let _ = s.write_all(&[0u8; 4096]);
                            let _ = s.read(&mut buf);
                        }
                        _ => unreachable!(),
                    }
                });
            }
        });
        Hostile { _t: t }
    }
}

#[test]
fn hostile_registration_sockets_get_a_bounded_answer() {
    let cp = cp();
    let n = Node::new(cp, true);
    for mode in ["garbage", "silent", "flood", "huge-headers"] {
        let d = format!("{mode}.hostile.example.com");
        let sock = n.root().join(format!("plugins_registry/{d}-reg.sock"));
        let _h = Hostile::serve(&sock, mode);
        let (out, took) = n.check_as(cp, User::Checks, &["--probe-timeout", "1s", "-t", "10"]);
        out.assert_protocol(NAME).assert_status(NAME, 2);
        assert!(
            out.stdout.contains(&format!(
                "[CRITICAL] {d}: registration socket {}",
                sock.display()
            )),
            "{mode}: {out:?}"
        );
        assert!(took < Duration::from_secs(8), "{mode}: took {took:?}");
        std::fs::remove_file(&sock).unwrap();
    }
}
