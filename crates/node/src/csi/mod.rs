//! The CSI node plugins the kubelet depends on, seen from the node: the registration sockets
//! under `<kubelet-root>/plugins_registry/`, the drivers the node's CSI volumes use (their
//! `vol_data.json`), and bounded-time gRPC calls to both sockets — the kubelet's
//! plugin-registration `GetInfo` and CSI `Identity/Probe` and `Identity/GetPluginInfo`.
//!
//! - [`socket`]: connecting only beneath a kubelet root, never through a link;
//! - [`grpc`]: one unary gRPC call over HTTP/2 (h2c) on a unix socket, by hand, with an HPACK
//!   decoder crate (`loona-hpack`, the maintained fork of `hpack`). Measured cost in the release
//!   program (`cargo build --release -p k8s-storage-checks`, x86_64 glibc): 8 264 160 bytes
//!   without check_csi_node_plugins, 8 584 640 with it (+313 KiB for the whole check: this module,
//!   the decoder, the check's evaluation, options and help). `h2` + `tokio` (and `tonic`/`prost`)
//!   would bring an async runtime into a suite of blocking checks for three unary calls of empty
//!   requests and tiny answers;
//! - [`proto`]: the answers' protobuf messages, decoded by hand.
//!
//! Every call runs on a thread of its own and is waited for until its deadline at most (a socket
//! whose backlog is full blocks `connect(2)`, which has no timeout of its own): a call that has
//! not answered by then is a [`Failure::Timeout`] and its thread is left behind (the check exits
//! soon after, as the mount probes do).

pub mod grpc;
pub mod proto;
pub mod socket;

use crate::host::Host;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The kubelet's plugin-registration directory, under its root.
pub const REGISTRY_DIR: &str = "plugins_registry";

/// At most this many entries of `plugins_registry/` are looked at.
pub const SOCKETS_MAX: usize = 256;

/// At most this many CSI pod volumes are read.
pub const MOUNTS_MAX: usize = 50_000;

/// `/pluginregistration.Registration/GetInfo` (k8s.io/kubelet pkg/apis/pluginregistration/v1).
pub const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
/// `/csi.v1.Identity/Probe`.
pub const PROBE: &str = "/csi.v1.Identity/Probe";
/// `/csi.v1.Identity/GetPluginInfo`.
pub const GET_PLUGIN_INFO: &str = "/csi.v1.Identity/GetPluginInfo";

/// The default endpoint of a driver: `<root>/plugins/<driver>/csi.sock`.
pub fn default_endpoint(root: &Path, driver: &str) -> PathBuf {
    root.join("plugins").join(driver).join("csi.sock")
}

/// A CSI volume of a pod on this node: `<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountUse {
    pub root: PathBuf,
    pub pod_uid: String,
    /// The volume's directory name (the PV name for a PV).
    pub volume: String,
    /// `driverName` of its vol_data.json.
    pub driver: String,
}

/// Why a call did not answer as it should.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The socket is not there.
    Missing(String),
    /// Not connected to, by the rules of [`socket`] (a link, outside the root, not a socket).
    Refused(String),
    /// Connecting failed (nobody listens: ECONNREFUSED).
    Unreachable(String),
    /// No answer within the probe timeout.
    Timeout(String),
    /// An answer, but an error (gRPC status, broken protocol, garbled message).
    Error(String),
}

impl Failure {
    pub fn text(&self) -> &str {
        match self {
            Failure::Missing(s)
            | Failure::Refused(s)
            | Failure::Unreachable(s)
            | Failure::Timeout(s)
            | Failure::Error(s) => s,
        }
    }
}

impl From<socket::SocketError> for Failure {
    fn from(e: socket::SocketError) -> Failure {
        match e {
            socket::SocketError::Missing(s) => Failure::Missing(s),
            socket::SocketError::Refused(s) => Failure::Refused(s),
            socket::SocketError::Failed(s) => Failure::Unreachable(s),
        }
    }
}

impl From<grpc::CallError> for Failure {
    fn from(e: grpc::CallError) -> Failure {
        match e {
            grpc::CallError::Timeout(s) => Failure::Timeout(s),
            e => Failure::Error(e.to_string()),
        }
    }
}

/// The sockets in each root's `plugins_registry/` (sockets, and links — which are then refused
/// when called, visibly — in name order), at most [`SOCKETS_MAX`]. A root without the directory
/// has none.
pub fn registration_sockets(
    host: &Host,
    roots: &[PathBuf],
) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let mut out = Vec::new();
    for r in roots {
        let dir = r.join(REGISTRY_DIR);
        let rd = match std::fs::read_dir(host.mount_path(&dir)) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(crate::args::privilege_text(host, &dir, &e))
            }
            Err(e) => return Err(format!("{}: {}", dir.display(), plugin::errtext(&e))),
        };
        let mut names = Vec::new();
        for e in rd.flatten().take(SOCKETS_MAX) {
            use std::os::unix::fs::FileTypeExt;
            let Ok(t) = e.file_type() else { continue };
            if t.is_socket() || t.is_symlink() {
                names.push(e.file_name());
            }
        }
        names.sort();
        out.extend(names.into_iter().map(|n| (r.clone(), dir.join(n))));
    }
    Ok(out)
}

/// The CSI pod volumes of each root and the driver each uses (vol_data.json), at most
/// [`MOUNTS_MAX`]; a vol_data.json that cannot be read is returned as an error text beside.
pub fn mount_uses(host: &Host, roots: &[PathBuf]) -> (Vec<MountUse>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for r in roots {
        let pods = r.join("pods");
        let Ok(rd) = std::fs::read_dir(host.mount_path(&pods)) else {
            continue;
        };
        for pod in rd.flatten() {
            let uid = pod.file_name().to_string_lossy().into_owned();
            let csi = pods.join(&uid).join("volumes/kubernetes.io~csi");
            let vols = match std::fs::read_dir(host.mount_path(&csi)) {
                Ok(v) => v,
                // A pod without CSI volumes.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    errors.push(format!(
                        "cannot read {}: {}",
                        csi.display(),
                        plugin::errtext(&e)
                    ));
                    continue;
                }
            };
            for v in vols.flatten() {
                if out.len() >= MOUNTS_MAX {
                    errors.push(format!(
                        "more than {MOUNTS_MAX} CSI pod volumes: the rest not read"
                    ));
                    return (out, errors);
                }
                let volume = v.file_name().to_string_lossy().into_owned();
                let mount = csi.join(&volume).join("mount");
                match crate::kubelet::read_vol_data(host, &mount) {
                    Ok(Some(d)) => {
                        if let Some(driver) = d.driver_name.filter(|d| !d.is_empty()) {
                            out.push(MountUse {
                                root: r.clone(),
                                pod_uid: uid.clone(),
                                volume,
                                driver,
                            })
                        }
                    }
                    Ok(None) => {}
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    (out, errors)
}

/// One call on a fresh connection to `path`, all before `deadline`.
fn call(
    host: &Host,
    roots: &[PathBuf],
    path: &Path,
    method: &str,
    deadline: Instant,
    what: &str,
) -> Result<Vec<u8>, Failure> {
    let mut s = socket::connect_beneath(path, roots, |p| host.mount_path(p))?;
    Ok(grpc::unary(&mut s, method, &[], deadline, what)?)
}

/// What a registration socket answered.
pub fn get_info(
    host: &Host,
    roots: &[PathBuf],
    sock: &Path,
    deadline: Instant,
) -> Result<proto::PluginInfo, Failure> {
    let what = format!("GetInfo on {}", sock.display());
    let b = call(host, roots, sock, GET_INFO, deadline, &what)?;
    proto::plugin_info(&b).map_err(|e| Failure::Error(format!("{what}: {e}")))
}

/// What a driver's endpoint answered: `Probe`, then `GetPluginInfo`.
pub fn identity(
    host: &Host,
    roots: &[PathBuf],
    endpoint: &Path,
    deadline: Instant,
) -> Result<(proto::Probe, proto::GetPluginInfo), Failure> {
    let what = format!("Probe on {}", endpoint.display());
    let b = call(host, roots, endpoint, PROBE, deadline, &what)?;
    let probe = proto::probe(&b).map_err(|e| Failure::Error(format!("{what}: {e}")))?;
    let what = format!("GetPluginInfo on {}", endpoint.display());
    let b = call(host, roots, endpoint, GET_PLUGIN_INFO, deadline, &what)?;
    let info = proto::get_plugin_info(&b).map_err(|e| Failure::Error(format!("{what}: {e}")))?;
    Ok((probe, info))
}

/// Run each job on a thread of its own and wait for all until `deadline`; a job that has not
/// finished by then is `None` (its thread is left behind).
pub fn bounded<T: Send + 'static>(
    jobs: Vec<Box<dyn FnOnce() -> T + Send>>,
    deadline: Instant,
) -> Vec<Option<T>> {
    let n = jobs.len();
    let (tx, rx) = mpsc::channel();
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        // No thread: that job stays None (reported as not answered).
        let _ = std::thread::Builder::new()
            .name(format!("csi-probe-{i}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = tx.send((i, job()));
            });
    }
    drop(tx);
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut got = 0;
    while got < n {
        let left = plugin::deadline::remaining(deadline);
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok((i, v)) => {
                out[i] = Some(v);
                got += 1;
            }
            Err(_) => break,
        }
        if Instant::now() >= deadline {
            // Take what has already arrived, then stop waiting.
            while let Ok((i, v)) = rx.try_recv() {
                out[i] = Some(v);
            }
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_waits_no_longer_than_the_deadline() {
        let start = Instant::now();
        let (hold, wait) = mpsc::channel::<()>();
        let jobs: Vec<Box<dyn FnOnce() -> u32 + Send>> = vec![
            Box::new(|| 1),
            Box::new(move || {
                let _ = wait.recv();
                2
            }),
        ];
        let r = bounded(jobs, start + Duration::from_millis(300));
        assert_eq!(r, vec![Some(1), None]);
        assert!(start.elapsed() < Duration::from_secs(2));
        drop(hold);
    }

    #[test]
    fn mount_uses_read_vol_data() {
        let root = std::env::temp_dir().join(format!("node-csi-mounts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let v = root.join("pods/uid-1/volumes/kubernetes.io~csi/pvc-1");
        std::fs::create_dir_all(v.join("mount")).unwrap();
        std::fs::write(
            v.join("vol_data.json"),
            r#"{"driverName":"a.csi.example.com","specVolID":"pvc-1"}"#,
        )
        .unwrap();
        let w = root.join("pods/uid-2/volumes/kubernetes.io~csi/pvc-2");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::write(w.join("vol_data.json"), "garbage").unwrap();
        let (uses, errors) = mount_uses(&Host::local(), std::slice::from_ref(&root));
        assert_eq!(uses.len(), 1);
        assert_eq!(uses[0].driver, "a.csi.example.com");
        assert_eq!(uses[0].pod_uid, "uid-1");
        assert_eq!(uses[0].volume, "pvc-1");
        assert_eq!(errors.len(), 1, "{errors:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
