//! k8s-storage-checks-replay: the two incident reports (docs/incidents.md) replayed in a sandbox,
//! each check catching its part of them as an operator would see it, then each incident's triage.
//!
//!     k8s-storage-checks-replay --bin-dir DIR [--files] [--format nagios|json|prometheus] [--check-arg ARG]...
//!
//! As root, the node side is real: a private mount namespace (`unshare -m`) holding a kubelet
//! root laid out like the incident's microk8s nodes, a loop-device ext4 PV driven into the
//! kernel's own error path (`/sys/fs/ext4/<dev>/trigger_fs_error`), a deleted PV's staging mount
//! still pinned by a gone pod's mount, and a FUSE (bindfs) volume whose daemon is stopped.
//! Without root (or with `--files`) the same scenes come from files (`--mountinfo`, `--sys`,
//! `--kmsg`, `--log-file`) and it says so. What no machine here can be (an iSCSI initiator, a
//! kubelet's log, a Kubernetes API) always comes from files or from the loopback HTTPS API server
//! of the test harness (tests/src/apiserver.rs), serving the incidents' objects.
//!
//! Cleanup: mounts live in the namespace, which dies with its holder and the FUSE daemon; loop
//! devices are mounted with autoclear; the API server is a thread of this process. SIGINT,
//! SIGTERM and SIGHUP are caught by a thread that tears all of this down before exiting.

use e2e::apiserver::fixtures::{ago, jiva_replica, pod_event, running, scheduled_no_status, Rep};
use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::fuse::{bindfs, stop_daemon};
use e2e::logs::{klog_header, mount_refs_err, nested_op_msg, now_secs};
use e2e::sysfs::{mountinfo_line, Session, Sysfs};
use e2e::{Cmd, KubeletTree, Ns};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const KUBELET_REL: &str = "var/snap/microk8s/common/var/lib/kubelet";
const JIVA_DRIVER: &str = "jiva.csi.openebs.io";
const LONGHORN: &str = "driver.longhorn.io";
const JIVA_IQN: &str = "iqn.2016-09.com.openebs.jiva:";
const RADARR_PV: &str = "pvc-a634b9a3-0c8e-4b2f-8d6a-91e7f2c5b302";
const RADARR_UID: &str = "4d2a9e11-6c3b-4f1e-8a27-radarr000001";
const SEERR_PV: &str = "pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001";
const SEERR_UID: &str = "3c2b9f1e-5a7d-4e2f-9b1a-746b28370001";
const CODER_PV: &str = "pvc-8ecc1d40-7b3a-4e96-b1f8-5d2a6c9e0f77";
const DELETED_PV: &str = "pvc-81b676e6-2d4f-4c1a-9e3b-7f5a0c2d8e91";
const GONE_POD_UID: &str = "5d1f0c3a-8e2b-4d7f-a1c6-0b9e4f2a7d15";
const WS_PV: &str = "pvc-3c1e9a7b-4f2d-4b8e-9c6a-1d0e5f7b2a43";
/// Issue 30's Jiva volume read-only at its target while its pods all report Running.
const JIVA_RO_PV: &str = "pvc-2f7c5d1e-9b3a-4c8d-a6e2-0d4b7f1c9e35";

/// Pids to SIGKILL and a directory to remove when a signal ends the replay early.
static HOLDER: AtomicI32 = AtomicI32::new(0);
/// The sandbox namespace (`mnt:[…]`): every process in it is killed on a signal.
static NS_ID: Mutex<Option<PathBuf>> = Mutex::new(None);
static DAEMON: AtomicI32 = AtomicI32::new(0);
static SANDBOX: Mutex<Option<PathBuf>> = Mutex::new(None);
/// Set once a signal started the teardown: a failure of the main thread then waits for it.
static CLEANING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn usage() -> ! {
    eprintln!(
        "usage: k8s-storage-checks-replay --bin-dir DIR [--files] [--format nagios|json|prometheus] [--check-arg ARG]..."
    );
    std::process::exit(64)
}

fn main() {
    let mut bin_dir = None;
    let mut files = false;
    let mut format: Option<String> = None;
    let mut extra: Vec<OsString> = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--bin-dir") => {
                bin_dir = Some(PathBuf::from(args.next().unwrap_or_else(|| usage())))
            }
            Some("--files") => files = true,
            // Each check's answer in this format (tests/tests/next_steps.rs reads all three).
            Some("--format") => match args.next().and_then(|f| f.into_string().ok()) {
                Some(f) if ["nagios", "json", "prometheus"].contains(&f.as_str()) => {
                    format = Some(f)
                }
                _ => usage(),
            },
            // One more argument to every check (e.g. -vvv).
            Some("--check-arg") => extra.push(args.next().unwrap_or_else(|| usage())),
            Some("-h") | Some("--help") => {
                println!(
                    "{}",
                    include_str!("replay.rs")
                        .lines()
                        .take(3)
                        .map(|l| l.trim_start_matches("//!"))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                return;
            }
            _ => usage(),
        }
    }
    let bin_dir = bin_dir.unwrap_or_else(|| usage());
    // Absolute: the checks also run through nsenter.
    let bin_dir = std::fs::canonicalize(&bin_dir).unwrap_or(bin_dir);
    catch_signals();
    let real = !files && e2e::is_root() && have("unshare") && have("mkfs.ext4") && have("bindfs");
    let code = replay(&bin_dir, real, format.as_deref(), &extra);
    std::process::exit(code);
}

fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Block the terminating signals in every thread (children get a clean mask from std) and wait
/// for them on one thread that cleans up and exits.
fn catch_signals() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block().expect("block signals");
    // The main thread may fail while its namespace is torn down under it: it must not end the
    // process (panic = abort) before the teardown has finished.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CLEANING.load(Ordering::SeqCst) {
            loop {
                std::thread::park();
            }
        }
        default(info)
    }));
    std::thread::spawn(move || {
        let sig = set.wait().unwrap_or(Signal::SIGTERM);
        CLEANING.store(true, Ordering::SeqCst);
        eprintln!("\nreplay: {sig:?}: cleaning up");
        emergency_cleanup();
        std::process::exit(128 + sig as i32);
    });
}

fn emergency_cleanup() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for p in [&DAEMON, &HOLDER] {
        let pid = p.swap(0, Ordering::SeqCst);
        if pid > 0 {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    // Whatever else runs in the sandbox's namespace (a mount, a check, a probe) goes too: the
    // namespace and its mounts end with its last process.
    if let Some(id) = NS_ID.lock().ok().and_then(|mut d| d.take()) {
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if std::fs::read_link(e.path().join("ns/mnt")).is_ok_and(|l| l == id) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
    // The namespace (and its mounts) ends once its last process is gone; wait for that.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    if let Some(dir) = SANDBOX.lock().ok().and_then(|mut d| d.take()) {
        let needle = dir.to_string_lossy().into_owned();
        while std::time::Instant::now() < until
            && std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| m.contains(&needle))
        {
            std::thread::yield_now();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// One check run: what it replays, and how it is called.
struct Scene {
    check: &'static str,
    node: &'static str,
    /// The incident line it reproduces, quoted, and where it is in docs/incidents.md.
    quote: &'static str,
    source: &'static str,
    /// How the node side is made (real kernel, or files).
    how: String,
    args: Vec<OsString>,
    env: Vec<(&'static str, &'static str)>,
    in_ns: bool,
}

fn os<S: AsRef<std::ffi::OsStr>>(v: &[S]) -> Vec<OsString> {
    v.iter().map(|s| s.as_ref().to_os_string()).collect()
}

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

/// A pod with a PVC volume and a fixed UID.
fn pod_with_claim(mut p: Value, uid: &str, claim: &str) -> Value {
    p["metadata"]["uid"] = json!(uid);
    p["spec"]["volumes"] = json!([{"name":"config","persistentVolumeClaim":{"claimName":claim}}]);
    p
}

fn pv(name: &str, driver: &str, claim: Option<(&str, &str)>) -> Value {
    let mut v = json!({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":name},
        "spec":{"csi":{"driver":driver,"volumeHandle":name},"capacity":{"storage":"5Gi"},
            "accessModes":["ReadWriteOnce"]},
        "status":{"phase":"Bound"}});
    if let Some((ns, c)) = claim {
        v["spec"]["claimRef"] = json!({"kind":"PersistentVolumeClaim","namespace":ns,"name":c});
    }
    v
}

/// The seerr pod as the API showed it at 21:12: deleted at 20:32 with 30 s of grace, still there.
fn seerr_terminating() -> Value {
    let secs = 41 * 60;
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":"seerr-seerr-chart-0","namespace":"media","uid":SEERR_UID,
            "creationTimestamp":ago(3 * 86400),"deletionTimestamp":ago(secs - 30),
            "deletionGracePeriodSeconds":30,"labels":{"app":"seerr"},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"seerr-seerr-chart","uid":"z","controller":true}]},
        "spec":{"nodeName":"k8s03","terminationGracePeriodSeconds":30,
            "containers":[{"name":"main","image":"fallenbagel/jellyseerr:2.1"}],
            "volumes":[{"name":"config","persistentVolumeClaim":{"claimName":"config-seerr-0"}}]},
        "status":{"phase":"Running","conditions":[{"type":"Ready","status":"False","lastTransitionTime":ago(secs)}],
            "containerStatuses":[{"name":"main","ready":false,"restartCount":0,
                "state":{"terminated":{"exitCode":0,"reason":"Completed","finishedAt":ago(secs - 5)}}}]}})
}

/// Longhorn's view of the workspaces' Longhorn volume on worker-04 (issue 30: the incident record
/// has no Longhorn objects; this is what longhorn-manager shows for a volume that lost a replica):
/// attached on worker-04, degraded for 3 h, its replica on worker-04 failed and not rebuilding.
/// Served at longhorn.io/v1beta2 with the field names of Longhorn's CRDs.
fn longhorn_objects(s: &ApiServer) {
    use e2e::longhorn::{engine, replica, volume};
    let mut v = volume(
        WS_PV,
        "attached",
        "degraded",
        "worker-04",
        "llmsafespaces",
        "ws-b70553ae-data",
        "ws-b70553ae",
        "Running",
    );
    v["status"]["lastDegradedAt"] = json!(ago(3 * 3600));
    v["status"]["conditions"] = json!([{"type":"Scheduled","status":"False","reason":"ReplicaSchedulingFailure",
        "message":"insufficient storage on the nodes' disks for a new replica"}]);
    s.set("lh-volumes", vec![v]);
    s.set(
        "lh-replicas",
        vec![
            replica(WS_PV, 0, "worker-04", true),
            replica(WS_PV, 1, "worker-01", false),
            replica(WS_PV, 2, "worker-02", false),
        ],
    );
    s.set(
        "lh-engines",
        vec![engine(WS_PV, "worker-04", &[(1, "RW"), (2, "RW")], false)],
    );
    s.route(
        "/apis/longhorn.io",
        std::sync::Arc::new(|_r: &e2e::apiserver::Request, _c: &e2e::apiserver::Ctx| {
            e2e::apiserver::Response::json(
                200,
                &json!({"kind":"APIGroup","apiVersion":"v1","name":"longhorn.io",
                    "versions":[{"groupVersion":"longhorn.io/v1beta2","version":"v1beta2"}],
                    "preferredVersion":{"groupVersion":"longhorn.io/v1beta2","version":"v1beta2"}}),
            )
        }),
    );
    for (res, kind) in [
        ("volumes", "VolumeList"),
        ("replicas", "ReplicaList"),
        ("engines", "EngineList"),
    ] {
        let store = format!("lh-{res}");
        s.route(
            &format!("/apis/longhorn.io/v1beta2/{res}"),
            std::sync::Arc::new(
                move |r: &e2e::apiserver::Request, c: &e2e::apiserver::Ctx| {
                    e2e::apiserver::list_handler(r, c, &store, kind, &["metadata.name"])
                },
            ),
        );
    }
}

/// The loopback API server with both incidents' objects.
fn api_server() -> (
    ApiServer,
    PathBuf,
    std::sync::Arc<e2e::apiserver::watchcache::WatchCache>,
    String,
) {
    let s = ApiServer::start();
    let ws = |name: &str, days: i64| {
        scheduled_no_status("llmsafespaces", name, "worker-04", days * 86400)
    };
    let mut pods = vec![
        pod_with_claim(
            running("media", "radarr-0", "k8s02", 3 * 86400),
            RADARR_UID,
            "radarr-config",
        ),
        seerr_terminating(),
        ws("ws-b70553ae", 17),
        ws("ws-d048256b", 12),
        ws("ws-ebafc5da", 7),
        running(
            "llmsafespaces",
            "llmsafespaces-controller-7c9f5b6d4-x2k8p",
            "worker-04",
            30 * 86400,
        ),
        jiva_replica(CODER_PV, 0, "k8s01", 60 * 86400, Rep::Healthy),
        jiva_replica(
            CODER_PV,
            1,
            "k8s02",
            60 * 86400,
            Rep::CrashLoop {
                restarts: 92,
                unready_secs: 14 * 86400,
            },
        ),
        jiva_replica(CODER_PV, 2, "k8s03", 60 * 86400, Rep::Healthy),
    ];
    // Issue 30: a Jiva volume read-only at its target, its controller (with the 300 s
    // tolerations Kubernetes' admission gives) and replicas all Running and Ready.
    let mut ctrl = running(
        "openebs",
        &format!("{JIVA_RO_PV}-jiva-ctrl-7d9c8b6f4-kq2wz"),
        "k8s03",
        20 * 86400,
    );
    ctrl["metadata"]["labels"] = json!({"openebs.io/cas-type":"jiva",
        "openebs.io/component":"jiva-controller","openebs.io/persistent-volume":JIVA_RO_PV});
    ctrl["spec"]["tolerations"] = json!([
        {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},
        {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]);
    pods.push(ctrl);
    for (i, node) in ["k8s01", "k8s02", "k8s03"].into_iter().enumerate() {
        pods.push(jiva_replica(
            JIVA_RO_PV,
            i as u32,
            node,
            20 * 86400,
            Rep::Healthy,
        ));
    }
    s.set(
        "jivavolumes",
        vec![json!({"apiVersion":"openebs.io/v1","kind":"JivaVolume",
            "metadata":{"name":JIVA_RO_PV,"namespace":"openebs"},
            "spec":{"pv":JIVA_RO_PV,"capacity":"2Gi","accessType":"mount",
                "policy":{"target":{"replicationFactor":3}},"desiredReplicationFactor":3},
            "status":{"status":"RO","replicaCount":3,"phase":"Syncing","replicaStatus":[
                {"address":"tcp://10.1.1.21:9502","mode":"RW"},
                {"address":"tcp://10.1.2.34:9502","mode":"RW"},
                {"address":"tcp://10.1.3.47:9502","mode":"WO"}]}})],
    );
    // The JivaVolume CRD's API as a real server serves it: discovery, then the list.
    s.route(
        "/apis/openebs.io/v1",
        std::sync::Arc::new(|_req: &e2e::apiserver::Request, _ctx: &e2e::apiserver::Ctx| {
            e2e::apiserver::Response::json(
                200,
                &json!({"kind":"APIResourceList","apiVersion":"v1","groupVersion":"openebs.io/v1",
                    "resources":[{"name":"jivavolumes","singularName":"jivavolume","namespaced":true,
                        "kind":"JivaVolume","shortNames":["jv"],
                        "verbs":["delete","deletecollection","get","list","patch","create","update","watch"]}]}),
            )
        }),
    );
    s.route(
        "/apis/openebs.io/v1/namespaces/{ns}/jivavolumes",
        std::sync::Arc::new(|req: &e2e::apiserver::Request, ctx: &e2e::apiserver::Ctx| {
            let ns = req.param("ns").unwrap_or("").to_string();
            let items: Vec<Value> = ctx
                .objects("jivavolumes")
                .into_iter()
                .filter(|o| o["metadata"]["namespace"] == ns.as_str())
                .collect();
            e2e::apiserver::Response::json(
                200,
                &json!({"kind":"JivaVolumeList","apiVersion":"openebs.io/v1",
                    "metadata":{"resourceVersion":"1"},"items":items}),
            )
        }),
    );
    // The workspace pod whose volume's FUSE daemon hangs: claim it.
    pods[2]["spec"]["volumes"] =
        json!([{"name":"workspace","persistentVolumeClaim":{"claimName":"ws-b70553ae-data"}}]);
    let ws_uid = pods[2]["metadata"]["uid"]
        .as_str()
        .expect("fixture uid")
        .to_string();
    s.set("pods", pods);
    let teardown = format!(
        "UnmountVolume.TearDown failed for volume \"{SEERR_PV}\" (UniqueName: \"kubernetes.io/csi/{JIVA_DRIVER}^{SEERR_PV}\") pod \"{SEERR_UID}\" (UID: \"{SEERR_UID}\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = chmod /var/snap/microk8s/common/var/lib/kubelet/pods/{SEERR_UID}/volumes/kubernetes.io~csi/{SEERR_PV}/mount: read-only file system"
    );
    s.set(
        "events",
        vec![
            pod_event("media", "seerr-seerr-chart-0", "Killing", "Stopping container main", 41 * 60),
            pod_event("media", "seerr-seerr-chart-0", "FailedUnmount", &teardown, 40 * 60),
            pod_event("llmsafespaces", "ws-b70553ae", "FailedMount", &format!("MountVolume.MountDevice failed for volume \"{WS_PV}\" : rpc error: code = DeadlineExceeded desc = context deadline exceeded"), 600),
            pod_event("llmsafespaces", "ws-ebafc5da", "FailedMount", &format!("MountVolume.MountDevice failed for volume \"{WS_PV}\" : rpc error: code = DeadlineExceeded desc = context deadline exceeded"), 900),
        ],
    );
    // pvc-81b676e6 is gone from the API: deleted, its device mount left behind on worker-04.
    s.set(
        "persistentvolumes",
        vec![
            pv(RADARR_PV, JIVA_DRIVER, Some(("media", "radarr-config"))),
            pv(SEERR_PV, JIVA_DRIVER, Some(("media", "config-seerr-0"))),
            pv(
                CODER_PV,
                JIVA_DRIVER,
                Some(("coder", "coder-workspace-data")),
            ),
            pv(WS_PV, LONGHORN, Some(("llmsafespaces", "ws-b70553ae-data"))),
            pv(JIVA_RO_PV, JIVA_DRIVER, Some(("media", "prowlarr-config"))),
        ],
    );
    s.set(
        "volumeattachments",
        vec![json!({"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment",
            "metadata":{"name":"csi-ws-b70553ae"},
            "spec":{"attacher":LONGHORN,"nodeName":"worker-04","source":{"persistentVolumeName":WS_PV}},
            "status":{"attached":true}})],
    );
    // k8s03's watch cache after the ArgoCD sync burst: writes land, the cache never shows them.
    let store = ConfigMapStore::new();
    store.put(
        "kube-system",
        "k8s-storage-checks-canary",
        json!({"purpose": "canary"}),
    );
    let cache = s.configmaps(&store, CacheMode::Frozen);
    longhorn_objects(&s);
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("replay-token".into()));
    (s, kc, cache, ws_uid)
}

/// The kubelet's retry schedule of one failing operation: 500 ms doubling to 2m2s.
fn nested_ops_log(now: i64) -> String {
    let err = mount_refs_err(LONGHORN, DELETED_PV, "worker-04");
    let (mut t, mut b) = ((now - 17 * 60) * 1000, 500u64);
    let mut out = String::from("Flag --container-runtime has been deprecated\n");
    while t <= (now - 5) * 1000 {
        out += &klog_header(t / 1000);
        out += &nested_op_msg(t / 1000, LONGHORN, DELETED_PV, "", b, &err);
        out.push('\n');
        t += b as i64 + 50;
        b = (b * 2).min(122_000);
    }
    out
}

/// A 32 MiB ext4 image on a loop device mounted `errors=remount-ro` at `mp`; returns the device.
/// `losetup --find` and a plain mount, not `mount -o loop`: that one asks every loop device for
/// its backing file first, and hangs on one whose file sits on a dead FUSE mount. Detaching the
/// mounted device right away makes the kernel free it at the unmount (autoclear).
fn loop_ext4(ns: &Ns, image: &Path, mp: &Path) -> String {
    let out = ns.sh(&format!(
        "truncate -s 32M '{img}' && mkfs.ext4 -q -F '{img}' && dev=$(losetup --find --show '{img}') \
         && mkdir -p '{mp}' && mount -o errors=remount-ro \"$dev\" '{mp}' && losetup -d \"$dev\" && echo \"$dev\"",
        img = image.display(),
        mp = mp.display()
    ));
    out.stdout.trim().to_string()
}

/// /dev/kmsg opened at its end: what it reads next are the records written from now on.
fn kmsg_from_now() -> std::fs::File {
    use std::io::Seek;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open("/dev/kmsg")
        .expect("open /dev/kmsg");
    f.seek(std::io::SeekFrom::End(0)).expect("seek /dev/kmsg");
    f
}

/// Every record /dev/kmsg holds past `f`'s position, one line each (a record the ring overwrote
/// before it was read is skipped, as the kernel reports it).
fn kmsg_drain(f: &mut std::fs::File) -> String {
    use std::io::Read;
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("read /dev/kmsg: {e}"),
        }
    }
    out
}

/// kmsg records as /dev/kmsg returns them.
fn kmsg_rec(seq: u64, usec: u64, prio: u32, text: &str) -> String {
    format!("{prio},{seq},{usec},-;{text}\n SUBSYSTEM=block\n DEVICE=b8:32\n")
}

fn replay(bin_dir: &Path, real: bool, format: Option<&str>, extra: &[OsString]) -> i32 {
    for c in [
        "check_ro_pvc_mounts",
        "check_stale_csi_mounts",
        "check_kubelet_nested_ops",
        "check_stuck_scheduled",
        "check_jiva_rep_crashloop",
        "check_iscsi_sessions",
        "check_storage_kernel_errors",
        "check_watch_cache",
        "check_stuck_terminating",
        "k8s-storage-checks",
    ] {
        if !bin_dir.join(c).is_file() {
            eprintln!(
                "replay: {} is missing (build the suite first: ./build-static)",
                bin_dir.join(c).display()
            );
            return 3;
        }
    }
    let sandbox = tempfile::Builder::new()
        .prefix("k8s-storage-checks-replay.")
        .tempdir()
        .expect("temp dir");
    *SANDBOX.lock().unwrap() = Some(sandbox.path().to_path_buf());
    let base = sandbox.path();
    println!(
        "k8s-storage-checks: replaying the two incidents of docs/incidents.md in {}",
        base.display()
    );
    if real {
        println!("mode: real kernel (root): a private mount namespace, a loop-device ext4 PV driven into its error path, a FUSE volume whose daemon is stopped");
    } else {
        let why = if e2e::is_root() {
            "asked for with --files, or unshare/mkfs.ext4/bindfs missing"
        } else {
            "not root"
        };
        println!("mode: file inputs ({why}): the mount table, sysfs, kernel log and kubelet log the incidents' nodes had, given with --mountinfo, --sys, --kmsg and --log-file");
    }
    println!("API: a loopback HTTPS Kubernetes API server (this binary) serving the incidents' pods, PVs, events and a frozen watch cache");
    println!("(iSCSI sessions come from a sysfs tree and the kubelet log from a file in both modes: this machine has no iSCSI initiator and no kubelet)\n");

    let (api, kc, _cache, ws_uid) = api_server();
    let kc_s = kc.to_string_lossy().into_owned();
    // k8s02 is a microk8s node; worker-04 a Talos one (the kubelet's default root).
    let kubelet = base.join("k8s02").join(KUBELET_REL);
    let w04 = base.join("worker-04/var/lib/kubelet");
    let mut ns: Option<Ns> = None;
    let mut scenes = Vec::new();

    // ── Node k8s02: radarr's config volume, ext4 on an iSCSI disk, read-only after the abort.
    let tree = KubeletTree {
        root: kubelet.clone(),
    };
    let wtree = KubeletTree { root: w04.clone() };
    for r in [&kubelet, &w04] {
        std::fs::create_dir_all(r.join("pods")).unwrap();
        std::fs::create_dir_all(r.join("plugins/kubernetes.io/csi")).unwrap();
    }
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
    std::fs::create_dir_all(kubelet.join("plugins/kubernetes.io/csi")).unwrap();
    let (ro_args, kerr_args, kerr_how, ro_how, stale_args, stale_how);
    if real {
        let mut n = Ns::new();
        HOLDER.store(n.pid() as i32, Ordering::SeqCst);
        *NS_ID.lock().unwrap() = std::fs::read_link(format!("/proc/{}/ns/mnt", n.pid())).ok();
        // radarr's PV: staging globalmount of a loop ext4, bound into the pod.
        let handle = RADARR_PV;
        let staging = tree.staging_mount(JIVA_DRIVER, handle, &e2e::sha256_hex(handle));
        // The machine's kernel log is shared with every other test (loop devices are reused by
        // name): the records this replay counts are the ones written after it began, read from
        // /dev/kmsg (opened at its end now) once the error path has run.
        let mut since_start = kmsg_from_now();
        let dev = loop_ext4(&n, &base.join("radarr-config.img"), &staging);
        let publish = tree.pod_csi_mount(RADARR_UID, RADARR_PV, JIVA_DRIVER);
        n.sh(&format!(
            "mount --bind '{}' '{}'",
            staging.display(),
            publish.display()
        ));
        let name = dev.trim_start_matches("/dev/").to_string();
        // The kernel's own error path: ext4_error → jbd2 abort → errors=remount-ro.
        std::fs::write(
            format!("/sys/fs/ext4/{name}/trigger_fs_error"),
            "replay: iSCSI session recovery timed out after 120 secs (k8s02, radarr config)",
        )
        .expect("trigger_fs_error");
        let own_kmsg = base.join("k8s02-real.kmsg");
        write(&own_kmsg, &kmsg_drain(&mut since_start));
        // worker-04: the deleted PV's staging mount, pinned by the mount of a pod that is gone.
        let dead = wtree.staging_mount(LONGHORN, DELETED_PV, &e2e::sha256_hex(DELETED_PV));
        n.sh(&format!(
            "mount -t tmpfs -o size=1m replay '{}'",
            dead.display()
        ));
        let gone = wtree.pod_csi_mount(GONE_POD_UID, DELETED_PV, LONGHORN);
        n.sh(&format!(
            "mount --bind '{}' '{}'",
            dead.display(),
            gone.display()
        ));
        // ws-b70553ae's volume: its FUSE daemon stops answering (every stat of it hangs).
        let hung = wtree.pod_csi_mount(&ws_uid, WS_PV, LONGHORN);
        let pid = bindfs(&mut n, &base.join("ws-data"), &hung);
        DAEMON.store(pid, Ordering::SeqCst);
        stop_daemon(pid);
        ro_args = vec![];
        ro_how = format!("real kernel: loop ext4 {dev} at the PV's staging and pod mounts, /sys/fs/ext4/{name}/trigger_fs_error written");
        // The kernel log is the machine's: keep to this device (other loop devices' records,
        // left by test suites, are not the incident's).
        // Hung-task reports are the machine's too (a FUSE test elsewhere), not the incident's.
        kerr_args = os(&[
            "--window",
            "10m",
            "--kmsg",
            &own_kmsg.to_string_lossy(),
            "--exclude-pattern",
            &other_loops(&name),
            "--exclude-pattern",
            r"blocked for more than \d+ seconds",
        ]);
        kerr_how = format!("real kernel: the records /dev/kmsg gave after the replay began, {} (those of {dev}'s error path; other loop devices and hung-task reports of this machine left out)", own_kmsg.display());
        stale_args = os(&["--probe-timeout", "1s"]);
        stale_how = format!("real kernel: tmpfs staging mount of the deleted PV bound into a gone pod's directory; bindfs daemon {pid} stopped (SIGSTOP)");
        ns = Some(n);
    } else {
        let mut mi = String::from("22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw,errors=remount-ro\n");
        let staging = tree.staging_mount(JIVA_DRIVER, RADARR_PV, &e2e::sha256_hex(RADARR_PV));
        let publish = tree.pod_csi_mount(RADARR_UID, RADARR_PV, JIVA_DRIVER);
        // ext4 aborted: the superblock read-only under the rw mounts (kernel 5.4, the incident's).
        mi += &mountinfo_line(
            100,
            "8:32",
            &staging,
            "sdc",
            "ro,relatime,errors=remount-ro",
        );
        mi += &mountinfo_line(
            101,
            "8:32",
            &publish,
            "sdc",
            "ro,relatime,errors=remount-ro",
        );
        let sys = base.join("sys");
        let t = now_secs() - 45 * 60;
        write(&sys.join("fs/ext4/sdc/errors_count"), "3\n");
        write(&sys.join("fs/ext4/sdc/first_error_time"), &format!("{t}\n"));
        write(
            &sys.join("fs/ext4/sdc/last_error_time"),
            &format!("{}\n", t + 2),
        );
        write(&sys.join("block/sdc/ro"), "0\n");
        let mi_p = base.join("k8s02.mountinfo");
        write(&mi_p, &mi);
        ro_args = os(&[
            OsString::from("--mountinfo"),
            mi_p.clone().into(),
            "--sys".into(),
            sys.clone().into(),
        ]);
        ro_how = format!(
            "files: {} (super options ro under rw mounts), {}/fs/ext4/sdc/errors_count",
            mi_p.display(),
            sys.display()
        );
        let kmsg = base.join("k8s02.kmsg");
        let mut k = String::new();
        k += &kmsg_rec(1, 1_000_000, 6, "sd 3:0:0:0: [sdc] Attached SCSI disk");
        k += &kmsg_rec(
            2,
            2_000_000,
            3,
            " connection3:0: detected conn error (1020)",
        );
        k += &kmsg_rec(
            3,
            122_000_000,
            3,
            " session3: session recovery timed out after 120 secs",
        );
        k += &kmsg_rec(
            4,
            122_100_000,
            3,
            "sd 3:0:0:0: rejecting I/O to offline device",
        );
        k += &kmsg_rec(5, 122_200_000, 3, "Aborting journal on device sdc-8.");
        k += &kmsg_rec(
            6,
            122_300_000,
            2,
            "EXT4-fs (sdc): Remounting filesystem read-only",
        );
        write(&kmsg, &k);
        kerr_args = os(&[
            OsString::from("--window"),
            "0".into(),
            "--kmsg".into(),
            kmsg.clone().into(),
            "--mountinfo".into(),
            mi_p.clone().into(),
            "--sys".into(),
            sys.into(),
        ]);
        kerr_how = format!("files: {} (the kernel's records on k8s02)", kmsg.display());
        // worker-04's mount table: the deleted PV's staging mount and the gone pod's mount.
        let dead = wtree.staging_mount(LONGHORN, DELETED_PV, &e2e::sha256_hex(DELETED_PV));
        let gone = wtree.pod_csi_mount(GONE_POD_UID, DELETED_PV, LONGHORN);
        let mut w =
            String::from("22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw\n");
        w += &format!(
            "200 22 8:48 / {} rw,relatime shared:200 - ext4 /dev/longhorn/{DELETED_PV} rw\n",
            dead.display()
        );
        w += &format!(
            "201 22 8:48 / {} rw,relatime shared:200 - ext4 /dev/longhorn/{DELETED_PV} rw\n",
            gone.display()
        );
        let w_p = base.join("worker-04.mountinfo");
        write(&w_p, &w);
        stale_args = os(&[OsString::from("--mountinfo"), w_p.clone().into()]);
        stale_how = format!(
            "files: {} (no FUSE without root: the hung mount is left out)",
            w_p.display()
        );
    }
    scenes.push(Scene {
        check: "check_ro_pvc_mounts",
        node: "k8s02",
        quote: "EXT4 aborted its journal and remounted two volumes read-only: seerr's config volume (mounted on k8s03) and radarr's config volume (mounted on k8s02). radarr kept running on dead storage",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Executive Summary, Chain 2)",
        how: ro_how,
        args: [os(&["--kubelet-root"]), vec![kubelet.clone().into()], os(&["--kubeconfig", &kc_s, "-t", "20"]), ro_args].concat(),
        env: vec![],
        in_ns: real,
    });
    scenes.push(Scene {
        check: "check_stale_csi_mounts",
        node: "worker-04",
        quote: "a deleted Longhorn PV (pvc-81b676e6) left a stale device mount on worker-04, which blocked the kubelet's serialized NestedPendingOperations queue",
        source: "docs/incidents.md#2-stale-csi-mount-workspaces-stuck-pending (Summary)",
        how: stale_how,
        args: [os(&["--kubelet-root"]), vec![w04.clone().into()], os(&["--node", "worker-04", "--kubeconfig", &kc_s, "-t", "20"]), stale_args].concat(),
        env: vec![],
        in_ns: real,
    });
    let log = base.join("worker-04-kubelet.log");
    write(&log, &nested_ops_log(now_secs()));
    scenes.push(Scene {
        check: "check_kubelet_nested_ops",
        node: "worker-04",
        quote: "Kubelet logs: NestedPendingOperations: GetDeviceMountRefs check failed with exponential backoff",
        source: "docs/incidents.md#2-stale-csi-mount-workspaces-stuck-pending (Symptoms)",
        how: format!("file: {} (17 minutes of the kubelet's retries, 500ms doubling to 2m2s)", log.display()),
        args: [os(&["--log-file"]), vec![log.into()]].concat(),
        env: vec![("TZ", "UTC")],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_stuck_scheduled",
        node: "worker-04",
        quote: "Workspace pods (b70553ae, ebafc5da, d048256b) were stuck in Creating phase for 7–17 days ... Pod is Pending with PodScheduled=True but zero containers",
        source: "docs/incidents.md#2-stale-csi-mount-workspaces-stuck-pending (Summary, Symptoms)",
        how: "API: the workspace pods as the API server lists them".into(),
        args: os(&["--node", "worker-04", "--kubeconfig", &kc_s]),
        env: vec![],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_jiva_rep_crashloop",
        node: "cluster",
        quote: "the coder-workspace volume's replica 1 had crash-looped 92 times with a broken snapshot chain ... The volume ran the whole time on 2/3 replicas with no alert escalation",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Executive Summary, Chain 4)",
        how: "API: the openebs namespace's Jiva replica pods".into(),
        args: os(&["--kubeconfig", &kc_s]),
        env: vec![],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_jiva_rep_crashloop",
        node: "cluster",
        quote: "a Jiva volume gone read-only at the target while its replica and controller pods all report Running ... the cascade's structural mitigation — tolerationSeconds 600 for the jiva-ctrl pods — was \"planned but never implemented\"",
        source: "issue 30 (public issue trackers) and docs/incidents.md#1-pvek8s-storage-cascade (Chain 2)",
        how: "API: the JivaVolumes (Jiva's own status) and the Jiva controller's tolerations".into(),
        args: os(&[
            "--kubeconfig",
            &kc_s,
            "--jiva-status",
            "required",
            "--min-toleration",
            "600s",
        ]),
        env: vec![],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_longhorn_volumes",
        node: "worker-04",
        quote: "a deleted Longhorn PV (pvc-81b676e6) left a stale device mount on worker-04 ... (Longhorn's own objects were never looked at: here a workspace volume degraded, its worker-04 replica failed)",
        source: "docs/incidents.md#2-stale-csi-mount-workspaces-stuck-pending (Summary); the degraded volume is issue 30's scene, not in the record",
        how: "API: Longhorn's volumes, replicas and engines (longhorn.io/v1beta2) for worker-04".into(),
        args: os(&["--node", "worker-04", "--kubeconfig", &kc_s]),
        env: vec![],
        in_ns: false,
    });
    // check_pv_capacity has no scene: the record shows no filling PV.
    // check_volume_attachments has no scene: the record shows no stranded or contested
    // VolumeAttachment (its states are tests/tests/volume_attachments.rs's, on the real server).
    // check_csi_node_plugins has no scene: the record shows no CSI node plugin that stopped
    // answering (its states are tests/tests/csi_node_plugins.rs's, real gRPC servers).
    // ── k8s03's iSCSI sessions after the jiva-ctrl pods moved: sysfs as the kernel lays it out.
    let isys = Sysfs::new(&base.join("k8s03"));
    // k8s03's kubelet root inside the sandbox (a given --kubelet-root must exist).
    let k8s03_kubelet_dir = base.join("k8s03").join(KUBELET_REL);
    std::fs::create_dir_all(&k8s03_kubelet_dir).expect("create k8s03's kubelet root");
    let k8s03_kubelet_s = k8s03_kubelet_dir.to_string_lossy().into_owned();
    let k8s03_kubelet = k8s03_kubelet_s.as_str();
    isys.add(
        &Session::new(3, &format!("{JIVA_IQN}{SEERR_PV}"))
            .portal("10.152.183.41", 3260)
            .state("FREE")
            .conn_state(Some("down"))
            .recovery_tmo("120")
            .disk(0, "sdc", "8:32", "transport-offline"),
    );
    isys.add(
        &Session::new(5, &format!("{JIVA_IQN}{CODER_PV}"))
            .portal("10.152.183.43", 3260)
            .recovery_tmo("120")
            .disk(0, "sdd", "8:48", "running"),
    );
    let mut imi = String::from(
        "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw,errors=remount-ro\n",
    );
    for (i, (pvn, sd, mm, pod, opts)) in [
        (SEERR_PV, "sdc", "8:32", SEERR_UID, "ro,errors=remount-ro"),
        (
            CODER_PV,
            "sdd",
            "8:48",
            "9f0e6b2c-coder",
            "rw,errors=remount-ro",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let st = PathBuf::from(format!(
            "{k8s03_kubelet}/plugins/kubernetes.io/csi/{JIVA_DRIVER}/{}/globalmount",
            e2e::sha256_hex(pvn)
        ));
        let pb = PathBuf::from(format!(
            "{k8s03_kubelet}/pods/{pod}/volumes/kubernetes.io~csi/{pvn}/mount"
        ));
        imi += &mountinfo_line(100 + 2 * i as u32, mm, &st, sd, opts);
        imi += &mountinfo_line(101 + 2 * i as u32, mm, &pb, sd, opts);
    }
    let imi_p = base.join("k8s03.mountinfo");
    write(&imi_p, &imi);
    scenes.push(Scene {
        check: "check_iscsi_sessions",
        node: "k8s03",
        quote: "the target processes exited while initiators on other nodes held active sessions ... after the 120-second session recovery timeout the kernel marked the SCSI devices offline",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Chain 2)",
        how: format!("files: {} (iscsi_tcp sysfs layout), {}", isys.root.display(), imi_p.display()),
        args: [os(&["--sys"]), vec![isys.root.clone().into()], os(&["--mountinfo"]), vec![imi_p.clone().into()], os(&["--kubelet-root", k8s03_kubelet, "--kubeconfig", &kc_s])].concat(),
        env: vec![],
        in_ns: false,
    });
    // seerr's config volume on k8s03's sdc: the same abort, as the same files record it.
    let t = now_secs() - 44 * 60;
    write(&isys.root.join("fs/ext4/sdc/errors_count"), "2\n");
    write(
        &isys.root.join("fs/ext4/sdc/first_error_time"),
        &format!("{t}\n"),
    );
    write(
        &isys.root.join("fs/ext4/sdc/last_error_time"),
        &format!("{}\n", t + 1),
    );
    scenes.push(Scene {
        check: "check_ro_pvc_mounts",
        node: "k8s03",
        quote: "EXT4 aborted its journal and remounted two volumes read-only: seerr's config volume (mounted on k8s03) and radarr's config volume (mounted on k8s02)",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Executive Summary, Chain 2)",
        how: format!("files: {} (seerr's mounts on sdc read-only), {}/fs/ext4/sdc/errors_count", imi_p.display(), isys.root.display()),
        args: [os(&["--mountinfo"]), vec![imi_p.into()], os(&["--sys"]), vec![isys.root.clone().into()], os(&["--kubelet-root", k8s03_kubelet, "--node", "k8s03", "--kubeconfig", &kc_s])].concat(),
        env: vec![],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_storage_kernel_errors",
        node: "k8s02",
        quote: "after the 120-second session recovery timeout the kernel marked the SCSI devices offline, JBD2 aborted the ext4 journals, and both filesystems remounted read-only",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Chain 2)",
        how: kerr_how,
        args: [os(&["--kubelet-root"]), vec![kubelet.clone().into()], os(&["--node", "k8s02", "--kubeconfig", &kc_s]), kerr_args].concat(),
        env: vec![],
        in_ns: real,
    });
    scenes.push(Scene {
        check: "check_watch_cache",
        node: "k8s03",
        quote: "strike 2/2 - triggering remediation (CRITICAL - watch cache did not reflect a write after 30s ...)",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Key Error Signatures, Chain 1)",
        how: "API: the canary ConfigMap written, read back with resourceVersion=0 from a frozen watch cache (deadline 3s here, 30s on k8s03)".into(),
        args: os(&["--kubeconfig", &kc_s, "--deadline", "3s", "-t", "10"]),
        env: vec![],
        in_ns: false,
    });
    scenes.push(Scene {
        check: "check_stuck_terminating",
        node: "k8s03",
        quote: "seerr's manually-deleted pod wedged in Terminating because jiva-csi cannot chmod a read-only mount during teardown",
        source: "docs/incidents.md#1-pvek8s-storage-cascade (Executive Summary, Chain 3)",
        how: "API: the seerr pod (deleted 41 minutes ago) and its FailedUnmount event".into(),
        args: os(&["--node", "k8s03", "--kubeconfig", &kc_s]),
        env: vec![],
        in_ns: false,
    });

    let mut summary = Vec::new();
    let mut answers: Vec<(&str, &str, String)> = Vec::new();
    let total = scenes.len();
    for (i, sc) in scenes.iter().enumerate() {
        println!("━━━ {}/{total} {} — node {} ━━━", i + 1, sc.check, sc.node);
        println!("reproduces: \"{}\"", sc.quote);
        println!("       from {}", sc.source);
        println!("input: {}", sc.how);
        // As pasteable as the checks' own next steps: every word quoted for a shell (a regex
        // stays one word), the sandbox named by the variable the first line sets.
        let base_s = base.to_string_lossy().into_owned();
        let shown: Vec<String> = sc
            .args
            .iter()
            .map(|a| {
                let a = a.to_string_lossy();
                match a.strip_prefix(base_s.as_str()) {
                    Some(rest) => {
                        let q = plugin::shell_quote(rest);
                        if q == rest {
                            format!("$SANDBOX{rest}")
                        } else {
                            format!("\"$SANDBOX\"{q}")
                        }
                    }
                    None => plugin::shell_quote(&a),
                }
            })
            .collect();
        println!("$ {} {}", sc.check, shown.join(" "));
        let bin = bin_dir.join(sc.check);
        let make = |fmt: Option<&str>| {
            let mut cmd = match (&ns, sc.in_ns) {
                (Some(n), true) => n.cmd(&bin),
                _ => Cmd::new(&bin),
            };
            cmd = cmd
                .env_remove("KUBECONFIG")
                .env_remove("KUBERNETES_SERVICE_HOST")
                .env("HOME", "/nonexistent")
                .args(&sc.args);
            if let Some(f) = fmt {
                cmd = cmd.args(["--format", f]);
            }
            cmd = cmd.args(extra);
            for (k, v) in &sc.env {
                cmd = cmd.env(k, v);
            }
            cmd
        };
        let out = make(format).run();
        // What triage reads: the answer as JSON (the same run when that is the format asked).
        let json = if format == Some("json") {
            out.stdout.clone()
        } else {
            make(Some("json")).run().stdout
        };
        answers.push((sc.source, sc.node, json));
        print!("{}", out.stdout);
        if !out.stderr.trim().is_empty() {
            print!("{}", out.stderr);
        }
        println!("(exit {})\n", out.code);
        summary.push(format!(
            "  {:<28} {:<9} node {}",
            sc.check,
            out.status(),
            sc.node
        ));
    }
    println!("━━━ summary: each check against its part of the incidents ━━━");
    for l in &summary {
        println!("{l}");
    }
    println!();
    // One incident, one chain: each incident's answers joined (docs/triage.md).
    for (incident, node) in [
        ("#1-pvek8s-storage-cascade", "k8s03"),
        ("#2-stale-csi-mount", "worker-04"),
    ] {
        let input: String = answers
            .iter()
            .filter(|(source, _, _)| source.contains(incident))
            .map(|(_, _, json)| json.as_str())
            .collect();
        println!("━━━ triage of docs/incidents.md{incident}… (node {node}) ━━━");
        println!("$ k8s-storage-checks triage --from ANSWERS --node {node}");
        let mut cmd = Cmd::new(bin_dir.join("k8s-storage-checks"))
            .args(["triage", "--from", "-", "--node", node])
            .stdin(input.into_bytes());
        if format == Some("json") {
            cmd = cmd.args(["--format", "json"]);
        }
        let out = cmd.run();
        print!("{}", out.stdout);
        if !out.stderr.trim().is_empty() {
            print!("{}", out.stderr);
        }
        println!("(exit {})\n", out.code);
    }
    // Teardown, in order: FUSE daemon, namespace (its mounts, the loop device), API server, files.
    if let Some(n) = ns.take() {
        DAEMON.store(0, Ordering::SeqCst);
        HOLDER.store(0, Ordering::SeqCst);
        drop(n);
    }
    drop(api);
    let needle = base.to_string_lossy().into_owned();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| m.contains(&needle))
        && std::time::Instant::now() < until
    {
        std::thread::yield_now();
    }
    *SANDBOX.lock().unwrap() = None;
    drop(sandbox);
    println!(
        "cleaned up: no mount, loop device, FUSE daemon, API server or file of the replay is left"
    );
    0
}

/// A regex for every loop device but `name` (`loop7` → `\bloop(?:\d{2,}|[0-68-9])\b`): the
/// check has exclude patterns only, and regex-lite has no look-ahead.
fn other_loops(name: &str) -> String {
    let n = name.trim_start_matches("loop");
    let k = n.len();
    let mut alts = vec![format!("\\d{{{},}}", k + 1)];
    if k > 1 {
        alts.push(format!("\\d{{1,{}}}", k - 1));
    }
    for (i, d) in n.char_indices() {
        let others: String = ('0'..='9').filter(|c| *c != d).collect();
        alts.push(format!(
            "{}[{others}]{}",
            &n[..i],
            if k - i - 1 > 0 {
                format!("\\d{{{}}}", k - i - 1)
            } else {
                String::new()
            }
        ));
    }
    format!("\\bloop(?:{})\\b", alts.join("|"))
}
