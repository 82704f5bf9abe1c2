//! Real monitoring engines end to end (Nagios 4, Icinga 2, node_exporter + Prometheus +
//! Alertmanager): the daemons a test starts and always stops, and one node with the incidents'
//! faults that can be injected and removed again.
//!
//! - [`Daemon`] starts a process in its own process group with its output in a log file; dropping
//!   it kills the whole group (TERM, then KILL), so nothing outlives the test, even on failure.
//! - [`Node`] is a Kubernetes node as the checks see it, in a private mount namespace: a real ext4
//!   PV (staging + pod bind mount, like a CSI driver), a real FUSE (bindfs) PV under the kubelet
//!   root, a kubelet log file, and the loopback API server with this node's pods and PVs.
//!   [`Incident`] injects one incident's fault into it and removes it.
//! - [`nrpe_commands`] renders the shipped `nrpe.d` file for the node's layout the way the Ansible
//!   role does (plugin directory, kubeconfig, state directory, kubelet root, `--node`, extra
//!   arguments), so the engines call the shipped command lines.
//! - [`Intervals`] are the engines' timing: the test's short ones, or the documented defaults
//!   scaled down (one minute becomes one second) for `bench/time_to_alert`.
//! - [`report`] records a measured time to alert for the bench.
//!
//! Side by side: an engine test takes [`crate::shared`], not [`crate::exclusive`], so it runs
//! beside other tests, another engine test's too. Everything it makes is its own: temp dirs, its
//! daemons on free loopback ports with every path under its dir, its loop devices and FUSE mounts
//! in a private mount namespace, its own loopback API server. Its kernel log checks read its own
//! record file, or the real /dev/kmsg with every other loop device excluded; a stopped FUSE
//! daemon's stuck probes are its own (the D-state test is exclusive, so it never counts them).
//! `bench/time_to_alert` runs them one at a time (`--test-threads=1`) for its measurements.

use crate::apiserver::{ApiServer, KubeAuth, KubeCa};
use crate::{bin, Cmd, KubeletTree, Ns};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Kubernetes node name of the test node.
pub const NODE: &str = "worker-04";
/// The ext4 PV of the radarr incident and its claim.
pub const EXT4_PV: &str = "pvc-a634b9a3-5d1e-4c1b-8a2f-0c0ffee00001";
pub const EXT4_UID: &str = "8e1f6a2c-4b1d-4c3e-9f0a-a634b9a30001";
pub const EXT4_NS: &str = "media";
pub const EXT4_PVC: &str = "radarr-config";
pub const EXT4_POD: &str = "radarr-0";
/// The FUSE PV (a dying CSI node plugin's mount).
pub const FUSE_PV: &str = "pvc-81b676e6-0d3c-4f5e-9a1b-2c3d4e5f6a7b";
pub const FUSE_UID: &str = "3f1c9a2b-5d6e-4f70-8a9b-0c1d2e3f4a5c";
pub const FUSE_NS: &str = "llmsafespaces";
pub const FUSE_PVC: &str = "ws-7f2a-home";
pub const FUSE_POD: &str = "ws-7f2a";
/// The PV whose kubelet volume operation keeps failing (stale CSI mount incident).
pub const LOG_PV: &str = "pvc-0716a7ba-9e8d-4c7b-a6f5-e4d3c2b1a090";
/// The pod stuck after scheduling.
pub const STUCK_NS: &str = "llmsafespaces";
pub const STUCK_POD: &str = "ws-b70553ae";
const DRIVER: &str = "jiva.csi.openebs.io";
const FUSE_DRIVER: &str = "driver.longhorn.io";

/// A free TCP port on the loopback interface.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Poll `cond` every 100 ms until it holds; returns how long that took. Panics with `what` and
/// the `context` it is given after `limit`.
pub fn wait_for(
    what: &str,
    limit: Duration,
    mut cond: impl FnMut() -> bool,
    context: impl Fn() -> String,
) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            panic!(
                "timed out after {limit:?} waiting for {what}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A daemon started by a test: its own process group, output in `log`. Dropping it kills the
/// group (TERM, then KILL after 5 s) and reaps the leader.
pub struct Daemon {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn start(name: &str, mut cmd: Command, log: &Path) -> Daemon {
        let out = std::fs::File::create(log).expect("daemon log");
        let err = out.try_clone().unwrap();
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Daemon {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Panics (with the daemon's log) when it has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!(
                "{} exited ({st}):\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// True when no process of the group is left.
    fn group_gone(&self) -> bool {
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        kill(Pid::from_raw(-self.pid()), None).is_err()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let pg = Pid::from_raw(-self.pid());
        let _ = kill(pg, Signal::SIGTERM);
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let _ = self.child.try_wait();
            if self.group_gone() || Instant::now() > until {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = kill(pg, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// The engines' timing. Nagios runs with `interval_length=1`, so its intervals are the same numbers
/// as in production, in seconds instead of minutes; the others are scaled the same way.
#[derive(Debug, Clone, Copy)]
pub struct Intervals {
    /// Nagios/Icinga `check_interval`, seconds.
    pub check: u32,
    /// `retry_interval`, seconds.
    pub retry: u32,
    /// `max_check_attempts`.
    pub attempts: u32,
    /// Textfile timer / runner interval, seconds.
    pub textfile: u32,
    /// Prometheus scrape and evaluation interval, seconds.
    pub scrape: u32,
    /// What a minute of the rules' `for:` becomes, seconds.
    pub rule_minute: u32,
    pub name: &'static str,
}

impl Intervals {
    /// The documented defaults (docs/deploy/time-to-alert.md) scaled 1/60: check_interval 5m,
    /// retry_interval 1m, max_check_attempts 3, textfile timer 1m, scrape/evaluation 1m.
    pub const DOCUMENTED: Intervals = Intervals {
        check: 5,
        retry: 1,
        attempts: 3,
        textfile: 1,
        scrape: 1,
        rule_minute: 1,
        name: "documented/60",
    };
    /// The tests' own: short, so that all engine tests take a few minutes at most.
    pub const TEST: Intervals = Intervals {
        check: 2,
        retry: 1,
        attempts: 3,
        textfile: 1,
        scrape: 1,
        rule_minute: 1,
        name: "test",
    };

    /// `ENGINES_INTERVALS=documented` selects the documented ones (bench/time_to_alert).
    pub fn from_env() -> Intervals {
        match std::env::var("ENGINES_INTERVALS").as_deref() {
            Ok("documented") => Intervals::DOCUMENTED,
            _ => Intervals::TEST,
        }
    }
}

/// Append one measurement to `$TIME_TO_ALERT_OUT` (JSON lines) when set, and print it.
pub fn report(engine: &str, incident: Incident, iv: Intervals, what: &str, secs: f64) {
    let line = json!({
        "engine": engine, "incident": incident.name(), "check": incident.check(),
        "intervals": iv.name, "what": what, "seconds": (secs * 100.0).round() / 100.0,
    });
    println!("time to alert: {line}");
    if let Ok(p) = std::env::var("TIME_TO_ALERT_OUT") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("TIME_TO_ALERT_OUT");
        writeln!(f, "{line}").unwrap();
    }
}

/// The incidents an engine must page for, each raising one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// radarr/seerr: ext4 under a PV driven into its error path (errors=remount-ro).
    Ext4ReadOnly,
    /// worker-04: the FUSE daemon behind a CSI pod mount killed (ENOTCONN).
    FuseDead,
    /// worker-04: `GetDeviceMountRefs check failed` at max backoff in the kubelet's log.
    KubeletBackoff,
    /// workspace pods: scheduled, never started.
    StuckScheduled,
}

impl Incident {
    pub const ALL: [Incident; 4] = [
        Incident::Ext4ReadOnly,
        Incident::FuseDead,
        Incident::KubeletBackoff,
        Incident::StuckScheduled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Incident::Ext4ReadOnly => "ext4 PV read-only (errors=remount-ro)",
            Incident::FuseDead => "FUSE daemon of a CSI mount killed",
            Incident::KubeletBackoff => "kubelet volume op at max backoff",
            Incident::StuckScheduled => "pod stuck after scheduling",
        }
    }

    /// The check that must alert.
    pub fn check(self) -> &'static str {
        match self {
            Incident::Ext4ReadOnly => "check_ro_pvc_mounts",
            Incident::FuseDead => "check_stale_csi_mounts",
            Incident::KubeletBackoff => "check_kubelet_nested_ops",
            Incident::StuckScheduled => "check_stuck_scheduled",
        }
    }

    /// What the alert's output must name.
    pub fn names(self) -> &'static str {
        match self {
            Incident::Ext4ReadOnly => EXT4_PVC,
            Incident::FuseDead => FUSE_PV,
            Incident::KubeletBackoff => LOG_PV,
            Incident::StuckScheduled => STUCK_POD,
        }
    }
}

/// The checks the engines run (one service each).
pub const CHECKS: [&str; 4] = [
    "check_ro_pvc_mounts",
    "check_stale_csi_mounts",
    "check_kubelet_nested_ops",
    "check_stuck_scheduled",
];

/// Every check of the suite: the engines instantiate a service for each (node and cluster ones).
pub const ALL_CHECKS: [&str; 12] = [
    "check_ro_pvc_mounts",
    "check_pv_capacity",
    "check_stale_csi_mounts",
    "check_kubelet_nested_ops",
    "check_storage_kernel_errors",
    "check_iscsi_sessions",
    "check_stuck_scheduled",
    "check_stuck_terminating",
    "check_jiva_rep_crashloop",
    "check_watch_cache",
    "check_volume_attachments",
    "check_csi_node_plugins",
];

/// The log checks' `--window` on the test node (the role's `k8s_storage_checks_log_window`,
/// `15m` by default): a kubelet failure alerts at once and its alert clears one window after the
/// last failure, so the test makes that window short instead of waiting 15 minutes.
pub const LOG_WINDOW: &str = "30s";
/// [`LOG_WINDOW`] as a duration.
pub const LOG_AGE_OUT: Duration = Duration::from_secs(30);

/// A Kubernetes node as the checks see it (see the module doc). Everything lives under `work`
/// (0755, so the NRPE daemon's `nagios` user can read it) and in the private mount namespace.
pub struct Node {
    pub work: tempfile::TempDir,
    pub ns: Ns,
    pub tree: KubeletTree,
    pub api: ApiServer,
    pub kubeconfig: PathBuf,
    pub plugin_dir: PathBuf,
    pub state_dir: PathBuf,
    pub kubelet_log: PathBuf,
    ext4_staging: PathBuf,
    ext4_publish: PathBuf,
    ext4_dev: String,
    ext4_gen: u32,
    fuse_src: PathBuf,
    fuse_mount: PathBuf,
    fuse_pid: i32,
    log_injected_at: Option<i64>,
    /// Further ext4 PVs added by [`Node::add_volume`].
    extra: Vec<ExtraVolume>,
}

/// One more ext4 PV of another pod on the node ([`Node::add_volume`]).
struct ExtraVolume {
    pv: String,
    uid: String,
    ns: String,
    pvc: String,
    pod: String,
    staging: PathBuf,
    publish: PathBuf,
    dev: String,
    gen: u32,
}

fn pod(ns: &str, name: &str, uid: &str, claim: &str) -> Value {
    let t = crate::apiserver::fixtures::ago(86400);
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns,"uid":uid,"labels":{"app":name},"creationTimestamp":t},
        "spec":{"nodeName":NODE,"containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":claim}}]},
        "status":{"phase":"Running","conditions":[
            {"lastTransitionTime":t,"status":"True","type":"PodScheduled"},
            {"lastTransitionTime":t,"status":"True","type":"Ready"}],
            "containerStatuses":[{"name":"main","ready":true,"restartCount":0,"started":true,
                "image":"x","state":{"running":{"startedAt":t}},"lastState":{}}]}})
}

fn pv(name: &str, ns: &str, claim: &str, driver: &str) -> Value {
    json!({"apiVersion":"v1","kind":"PersistentVolume",
        "metadata":{"name":name,"uid":format!("uid-{name}")},
        "spec":{"capacity":{"storage":"5Gi"},"accessModes":["ReadWriteOnce"],
            "claimRef":{"apiVersion":"v1","kind":"PersistentVolumeClaim","namespace":ns,"name":claim,"uid":"y"},
            "csi":{"driver":driver,"volumeHandle":name,"fsType":"ext4"},
            "persistentVolumeReclaimPolicy":"Delete","storageClassName":"standard"},
        "status":{"phase":"Bound"}})
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Node {
    /// A healthy node: every check answers OK.
    pub fn new() -> Node {
        let work = tempfile::tempdir().unwrap();
        chmod(work.path(), 0o755);
        let w = work.path();
        let tree = KubeletTree::new(&w.join("node"));
        let ns = Ns::new();

        // The plugin directory: copies of the release binaries (like `make install PLUGINDIR=`).
        let plugin_dir = w.join("plugins");
        std::fs::create_dir_all(&plugin_dir).unwrap();
        for c in ALL_CHECKS
            .iter()
            .chain(["k8s-storage-checks-textfile"].iter())
        {
            crate::copy_executable(&bin(c), &plugin_dir.join(c));
            chmod(&plugin_dir.join(c), 0o755);
        }
        // The checks' state directory, owned by the agent's user.
        let state_dir = w.join("state");
        std::fs::create_dir_all(&state_dir).unwrap();
        let chown = Cmd::new("chown").arg("nagios:nagios").arg(&state_dir).run();
        assert_eq!(chown.code, 0, "{chown:?}");
        chmod(&state_dir, 0o750);

        // The API server: this node's pods and their PVs.
        let api = ApiServer::start();
        api.set(
            "pods",
            vec![
                pod(EXT4_NS, EXT4_POD, EXT4_UID, EXT4_PVC),
                pod(FUSE_NS, FUSE_POD, FUSE_UID, FUSE_PVC),
            ],
        );
        api.set(
            "persistentvolumes",
            vec![
                pv(EXT4_PV, EXT4_NS, EXT4_PVC, DRIVER),
                pv(FUSE_PV, FUSE_NS, FUSE_PVC, FUSE_DRIVER),
            ],
        );
        let kc = api.kubeconfig(KubeCa::Inline, KubeAuth::Token("engines-t0ken".into()));
        let kubeconfig = w.join("kubeconfig");
        std::fs::copy(&kc, &kubeconfig).unwrap();
        chmod(&kubeconfig, 0o644);

        // A kubelet log with ordinary lines and no volume failure.
        let kubelet_log = w.join("kubelet.log");
        let now = crate::logs::now_secs();
        let mut text = String::new();
        for i in 0..3 {
            text.push_str(
                &json!({"ts": (now - 300 + i) as f64 * 1000.0, "caller": "kubelet/kubelet.go:2468",
                    "msg": "SyncLoop (PLEG): event for pod", "v": 2})
                .to_string(),
            );
            text.push('\n');
        }
        std::fs::write(&kubelet_log, text).unwrap();
        chmod(&kubelet_log, 0o644);

        // The ext4 PV: staging globalmount and the pod's bind mount of it.
        let ext4_staging = tree.staging_mount(DRIVER, EXT4_PV, &crate::sha256_hex(EXT4_PV));
        let ext4_publish = tree.pod_csi_mount(EXT4_UID, EXT4_PV, DRIVER);
        // The FUSE PV: a pod publish mount served by a bindfs daemon.
        let fuse_src = w.join("fuse-backing");
        let fuse_mount = tree.pod_csi_mount(FUSE_UID, FUSE_PV, FUSE_DRIVER);
        let mut node = Node {
            work,
            ns,
            tree,
            api,
            kubeconfig,
            plugin_dir,
            state_dir,
            kubelet_log,
            ext4_staging,
            ext4_publish,
            ext4_dev: String::new(),
            ext4_gen: 0,
            fuse_src,
            fuse_mount,
            fuse_pid: 0,
            log_injected_at: None,
            extra: Vec::new(),
        };
        node.api.set("pods", node.healthy_pods());
        node.mount_ext4();
        // The FUSE PV's backing store is a small tmpfs of its own: the PV's capacity is the
        // test's, not that of whatever disk the test machine has (a full CI disk made
        // check_pv_capacity warn for it).
        std::fs::create_dir_all(&node.fuse_src).unwrap();
        node.ns.sh(&format!(
            "mount -t tmpfs -o size=16m,mode=0755 k8s-storage-checks-fuse-backing '{}'",
            node.fuse_src.display()
        ));
        node.start_fuse();
        node
    }

    fn healthy_pods(&self) -> Vec<Value> {
        let mut v = vec![
            pod(EXT4_NS, EXT4_POD, EXT4_UID, EXT4_PVC),
            pod(FUSE_NS, FUSE_POD, FUSE_UID, FUSE_PVC),
        ];
        for x in &self.extra {
            v.push(pod(&x.ns, &x.pod, &x.uid, &x.pvc));
        }
        // One healthy Jiva replica on another node, for the cluster-wide check_jiva_rep_crashloop.
        v.push(crate::apiserver::fixtures::jiva_replica(
            FUSE_PV,
            0,
            "worker-01",
            86400,
            crate::apiserver::fixtures::Rep::Healthy,
        ));
        v
    }

    /// One more healthy ext4 PV, of pod `ns/pod` (claim `pvc`), staged and bound into the pod
    /// like the first, and known to the API. Returns its index for [`Node::fail_volume`].
    pub fn add_volume(&mut self, ns: &str, pod_name: &str, pvc: &str) -> usize {
        let n = self.extra.len() + 2;
        let pv_name = format!("pvc-0000000{n}-5d1e-4c1b-8a2f-0c0ffee0000{n}");
        let uid = format!("0000000{n}-4b1d-4c3e-9f0a-a634b9a3000{n}");
        let staging = self
            .tree
            .staging_mount(DRIVER, &pv_name, &crate::sha256_hex(&pv_name));
        let publish = self.tree.pod_csi_mount(&uid, &pv_name, DRIVER);
        self.extra.push(ExtraVolume {
            pv: pv_name.clone(),
            uid,
            ns: ns.into(),
            pvc: pvc.into(),
            pod: pod_name.into(),
            staging,
            publish,
            dev: String::new(),
            gen: 0,
        });
        let i = self.extra.len() - 1;
        self.mount_extra(i);
        self.api
            .add("persistentvolumes", vec![pv(&pv_name, ns, pvc, DRIVER)]);
        self.api.set("pods", self.healthy_pods());
        i
    }

    /// The PV name of an added volume.
    pub fn volume_pv(&self, i: usize) -> &str {
        &self.extra[i].pv
    }

    fn mount_extra(&mut self, i: usize) {
        self.extra[i].gen += 1;
        let (staging, publish) = (self.extra[i].staging.clone(), self.extra[i].publish.clone());
        let img = self
            .work
            .path()
            .join(format!("extra-{i}-{}.img", self.extra[i].gen));
        let dev = self
            .ns
            .loop_fs(&img, 32, "mkfs.ext4 -q -F", "errors=remount-ro", &staging);
        self.ns.sh(&format!(
            "mount --bind '{}' '{}'",
            staging.display(),
            publish.display()
        ));
        self.extra[i].dev = dev.trim_start_matches("/dev/").to_string();
    }

    /// Drive an added volume's ext4 into its error path (read-only), like [`Incident::Ext4ReadOnly`].
    pub fn fail_volume(&mut self, i: usize) {
        std::fs::write(
            format!("/sys/fs/ext4/{}/trigger_fs_error", self.extra[i].dev),
            "k8s-storage-checks engines test",
        )
        .unwrap();
    }

    /// Unmount, check and mount an added volume again (a fresh filesystem).
    pub fn repair_volume(&mut self, i: usize) {
        let x = &self.extra[i];
        self.ns.sh(&format!(
            "umount '{}' && umount '{}'",
            x.publish.display(),
            x.staging.display()
        ));
        self.mount_extra(i);
    }

    /// A fresh ext4 image mounted at the staging path and bound into the pod (what the CSI
    /// driver does on NodeStage/NodePublish).
    fn mount_ext4(&mut self) {
        self.ext4_gen += 1;
        let img = self.work.path().join(format!("ext4-{}.img", self.ext4_gen));
        let dev = self.ns.loop_fs(
            &img,
            32,
            "mkfs.ext4 -q -F",
            "errors=remount-ro",
            &self.ext4_staging,
        );
        self.ns.sh(&format!(
            "mount --bind '{}' '{}'",
            self.ext4_staging.display(),
            self.ext4_publish.display()
        ));
        self.ext4_dev = dev.trim_start_matches("/dev/").to_string();
    }

    /// bindfs (allow_other: the agent's user must reach it) at the FUSE PV's pod mount.
    fn start_fuse(&mut self) {
        std::fs::create_dir_all(&self.fuse_src).unwrap();
        std::fs::write(self.fuse_src.join("data"), "workspace\n").unwrap();
        let out = self.ns.sh(&format!(
            "bindfs -f -o allow_other '{s}' '{m}' </dev/null >/dev/null 2>&1 & echo $!",
            s = self.fuse_src.display(),
            m = self.fuse_mount.display()
        ));
        let pid: i32 = out.stdout.trim().parse().expect("bindfs pid");
        self.ns.own(pid);
        self.fuse_pid = pid;
        crate::fuse::wait_until(
            "bindfs to mount the FUSE PV",
            Duration::from_secs(10),
            || crate::fuse::is_mounted(&self.ns, &self.fuse_mount),
        );
    }

    /// Inject an incident's fault.
    pub fn inject(&mut self, i: Incident) {
        match i {
            Incident::Ext4ReadOnly => {
                // The kernel's own ext4 error path: with errors=remount-ro the filesystem stops
                // writes (emergency_ro from 6.15, super `ro` up to 6.11).
                std::fs::write(
                    format!("/sys/fs/ext4/{}/trigger_fs_error", self.ext4_dev),
                    "k8s-storage-checks engines test",
                )
                .unwrap();
            }
            Incident::FuseDead => crate::fuse::kill_daemon(self.fuse_pid),
            Incident::KubeletBackoff => {
                // The kubelet retrying an UnmountDevice at its maximum backoff (2m2s), the last
                // failure now.
                let now = crate::logs::now_secs();
                let last = now;
                let mut text = String::new();
                for k in [2, 1, 0] {
                    let t = last - 122 * k;
                    let msg = crate::logs::nested_op_msg(
                        t,
                        FUSE_DRIVER,
                        LOG_PV,
                        "",
                        122_000,
                        &crate::logs::mount_refs_err(FUSE_DRIVER, LOG_PV, NODE),
                    );
                    text.push_str(&crate::logs::json_line(t, &msg));
                    text.push('\n');
                }
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&self.kubelet_log)
                    .unwrap();
                f.write_all(text.as_bytes()).unwrap();
                self.log_injected_at = Some(now);
            }
            Incident::StuckScheduled => {
                let mut pods = self.healthy_pods();
                pods.push(crate::apiserver::fixtures::scheduled_no_status(
                    STUCK_NS,
                    STUCK_POD,
                    NODE,
                    11 * 60,
                ));
                self.api.set("pods", pods);
            }
        }
    }

    /// Remove an incident's fault the way an operator (or time) does.
    pub fn clear(&mut self, i: Incident) {
        match i {
            // The volume is unmounted, checked and mounted again: a fresh filesystem on a fresh
            // loop device (no error recorded).
            Incident::Ext4ReadOnly => {
                self.ns.sh(&format!(
                    "umount '{}' && umount '{}'",
                    self.ext4_publish.display(),
                    self.ext4_staging.display()
                ));
                self.mount_ext4();
            }
            // The node plugin restarts: the dead mount is lazily unmounted and served again.
            Incident::FuseDead => {
                self.ns
                    .sh(&format!("umount -l '{}'", self.fuse_mount.display()));
                self.start_fuse();
            }
            // The kubelet stops failing: the last failure leaves the window (nothing to do but
            // wait; see LOG_AGE_OUT).
            Incident::KubeletBackoff => {}
            Incident::StuckScheduled => self.api.set("pods", self.healthy_pods()),
        }
    }

    /// Seconds until the kubelet failure lines leave the window (0 when not injected).
    pub fn log_age_out_left(&self) -> Duration {
        match self.log_injected_at {
            Some(t) => {
                let left = t + LOG_AGE_OUT.as_secs() as i64 - crate::logs::now_secs();
                Duration::from_secs(left.max(0) as u64)
            }
            None => Duration::ZERO,
        }
    }

    /// The arguments the Ansible role adds for this node's layout (`k8s_storage_checks_kubelet_roots`,
    /// `_node_name`, the installed kubeconfig for the node checks that take one, `_extra_args`).
    fn role_args(&self, check: &str) -> Vec<String> {
        let root = self.tree.root.to_str().unwrap().to_string();
        let kc = self.kubeconfig.to_str().unwrap().to_string();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match check {
            "check_ro_pvc_mounts" => s(&["--kubelet-root", &root, "--kubeconfig", &kc]),
            "check_stale_csi_mounts" => {
                s(&["--kubelet-root", &root, "--kubeconfig", &kc, "--node", NODE])
            }
            "check_kubelet_nested_ops" => s(&["--log-file", self.kubelet_log.to_str().unwrap()]),
            "check_stuck_scheduled" => s(&["--node", NODE]),
            _ => Vec::new(),
        }
    }

    /// The shipped nrpe.d command lines for this node: the file's own paths replaced by this
    /// node's (plugin dir, kubeconfig, state dir), the log window by [`LOG_WINDOW`] (all role
    /// variables) and the role's per-node arguments appended.
    pub fn nrpe_commands(&self) -> BTreeMap<String, String> {
        let text =
            std::fs::read_to_string(crate::workspace_root().join("nrpe.d/k8s-storage-checks.cfg"))
                .unwrap();
        let mut out = BTreeMap::new();
        for (name, line) in nrpe_commands(&text) {
            if !CHECKS.contains(&name.as_str()) {
                continue;
            }
            if name == "check_kubelet_nested_ops" {
                assert!(line.contains(" --window 15m "), "{line}");
            }
            let line = line
                .replace(" --window 15m ", &format!(" --window {LOG_WINDOW} "))
                .replace(
                    "/usr/lib/nagios/plugins/",
                    &format!("{}/", self.plugin_dir.display()),
                )
                .replace(
                    "/etc/k8s-storage-checks/kubeconfig",
                    self.kubeconfig.to_str().unwrap(),
                )
                .replace(
                    "/var/lib/k8s-storage-checks",
                    self.state_dir.to_str().unwrap(),
                );
            assert!(
                line.starts_with(self.plugin_dir.to_str().unwrap()),
                "{name}: {line}"
            );
            // Temp paths without spaces or shell characters: no quoting needed.
            let extra = self.role_args(&name).join(" ");
            out.insert(name, format!("{line} {extra}"));
        }
        assert_eq!(out.len(), CHECKS.len(), "nrpe.d lacks a command: {out:?}");
        out
    }

    /// What the checks beyond the four incidents' need to answer OK: a kmsg record file with one
    /// harmless record (returned) and the watch-cache canary ConfigMap served through a healthy
    /// watch cache (the healthy Jiva replica is among the pods).
    /// A kubelet root with no CSI plugin and no CSI volume (check_csi_node_plugins' quiet node).
    fn no_csi_root(&self) -> PathBuf {
        let dir = self.work.path().join("kubelet-no-csi");
        std::fs::create_dir_all(dir.join("plugins_registry")).unwrap();
        chmod(&dir, 0o755);
        chmod(&dir.join("plugins_registry"), 0o755);
        dir
    }

    fn quiet_fixtures(&self) -> PathBuf {
        let kmsg = self.work.path().join("kmsg.txt");
        std::fs::write(
            &kmsg,
            "6,1,1000,-;EXT4-fs (loop0): mounted filesystem with ordered data mode\n",
        )
        .unwrap();
        chmod(&kmsg, 0o644);
        let store = crate::apiserver::watchcache::ConfigMapStore::new();
        store.put(
            "kube-system",
            "k8s-storage-checks-canary",
            json!({"purpose": "canary"}),
        );
        self.api
            .configmaps(&store, crate::apiserver::watchcache::CacheMode::Healthy);
        kmsg
    }

    /// Every command of the shipped nrpe.d file, as the role renders it for this node: the four of
    /// [`Node::nrpe_commands`] plus the other node checks (check_storage_kernel_errors on a kmsg
    /// record file with one harmless record, check_iscsi_sessions on this machine's sysfs, which
    /// has no session, check_stuck_terminating against the API) and the three cluster-wide ones
    /// (check_jiva_rep_crashloop with one healthy replica, check_watch_cache with its canary
    /// ConfigMap served through a healthy watch cache, check_volume_attachments with no
    /// VolumeAttachment: "0 VolumeAttachments"), all OK: the engines instantiate every
    /// shipped service, and these must stay quiet while the four incidents come and go.
    pub fn nrpe_commands_all(&self) -> BTreeMap<String, String> {
        let mut out = self.nrpe_commands();
        let text =
            std::fs::read_to_string(crate::workspace_root().join("nrpe.d/k8s-storage-checks.cfg"))
                .unwrap();
        let kmsg = self.quiet_fixtures();
        let root = self.tree.root.to_str().unwrap().to_string();
        for (name, line) in nrpe_commands(&text) {
            // Longhorn does not run on the engines' cluster (that check is UNKNOWN there).
            if out.contains_key(&name) || name == "check_longhorn_volumes" {
                continue;
            }
            let extra = match name.as_str() {
                "check_storage_kernel_errors" => {
                    format!("--kubelet-root {root} --kmsg {}", kmsg.display())
                }
                "check_iscsi_sessions" => format!("--kubelet-root {root}"),
                // Its shipped thresholds: every PV here is a filesystem of the test's own.
                "check_pv_capacity" => format!("--kubelet-root {root}"),
                "check_stuck_terminating" => format!("--node {NODE} --kubelet-root {root}"),
                // No CSI plugin on the engines' node: a kubelet root of its own without any
                // (OK, "no CSI drivers registered and no CSI volumes"; the test tree's FUSE
                // volume is check_stale_csi_mounts' incident, not a plugin's).
                "check_csi_node_plugins" => {
                    format!(
                        "--node {NODE} --kubelet-root {}",
                        self.no_csi_root().display()
                    )
                }
                _ => String::new(),
            };
            let line = line
                .replace(
                    "/usr/lib/nagios/plugins/",
                    &format!("{}/", self.plugin_dir.display()),
                )
                .replace(
                    "/etc/k8s-storage-checks/kubeconfig",
                    self.kubeconfig.to_str().unwrap(),
                )
                .replace(
                    "/var/lib/k8s-storage-checks",
                    self.state_dir.to_str().unwrap(),
                );
            out.insert(name, format!("{line} {extra}"));
        }
        out
    }

    /// Set up [`Node::quiet_fixtures`] for an engine that runs the checks itself (Icinga 2).
    pub fn quiet_cluster(&self) {
        self.quiet_fixtures();
    }

    /// The shipped CheckCommands' custom variables for this node (Icinga 2).
    pub fn icinga_vars(&self, check: &str) -> Vec<(String, Value)> {
        let cmd = format!("k8s_{}", check.trim_start_matches("check_"));
        let root = json!([self.tree.root]);
        let kc = json!(self.kubeconfig);
        let v = |k: &str, val: Value| (format!("{cmd}_{k}"), val);
        let node_kc = ("k8s_storage_node_kubeconfig".to_string(), kc.clone());
        let mut vars = match check {
            "check_ro_pvc_mounts" => vec![v("kubelet_root", root), node_kc],
            // The shipped thresholds: every PV here is a filesystem of the test's own.
            "check_pv_capacity" => vec![
                v("kubelet_root", root),
                v("state_dir", json!(self.state_dir)),
                node_kc,
            ],
            "check_stale_csi_mounts" => {
                vec![v("kubelet_root", root), v("node", json!(NODE)), node_kc]
            }
            "check_kubelet_nested_ops" => vec![
                v("log_file", json!([self.kubelet_log])),
                v("window", json!(LOG_WINDOW)),
                v("state_dir", json!(self.state_dir)),
            ],
            "check_stuck_scheduled" => vec![v("node", json!(NODE))],
            "check_storage_kernel_errors" => vec![
                v("kubelet_root", root),
                v("kmsg", json!(self.work.path().join("kmsg.txt"))),
                v("state_dir", json!(self.state_dir)),
            ],
            "check_iscsi_sessions" => vec![v("kubelet_root", root)],
            "check_stuck_terminating" => vec![v("node", json!(NODE)), v("kubelet_root", root)],
            "check_csi_node_plugins" => vec![
                v("node", json!(NODE)),
                v("kubelet_root", json!([self.no_csi_root()])),
            ],
            _ => Vec::new(),
        };
        // The memory of the volumes (issue 32) in this node's state directory, as on a node the
        // role installed, never the test host's /var/lib.
        if matches!(
            check,
            "check_ro_pvc_mounts"
                | "check_stuck_scheduled"
                | "check_stuck_terminating"
                | "check_jiva_rep_crashloop"
                | "check_longhorn_volumes"
        ) {
            vars.push(v("state_dir", json!(self.state_dir)));
        }
        vars.push(("k8s_storage_kubeconfig".into(), kc));
        vars
    }

    /// The runner's `--check` lines for the textfile path (the role's wrapper runs the same
    /// command lines as NRPE, with `--format prometheus` added).
    pub fn textfile_checks(&self) -> Vec<String> {
        self.nrpe_commands()
            .into_iter()
            .map(|(name, line)| {
                let args = line.split_once(' ').map(|x| x.1).unwrap_or("");
                format!("{name} {args}")
            })
            .collect()
    }
}

impl Default for Node {
    fn default() -> Self {
        Node::new()
    }
}

/// `command[name]=line` entries of an nrpe.d file.
pub fn nrpe_commands(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("command["))
        .filter_map(|l| l.split_once("]="))
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect()
}

/// A CA, NRPE's server certificate and the monitoring server's client certificate (what the
/// Ansible role generates), made with the real `openssl`, readable by the `nagios` user.
pub struct NrpeTls {
    pub dir: PathBuf,
}

impl NrpeTls {
    pub fn generate(dir: &Path) -> NrpeTls {
        std::fs::create_dir_all(dir).unwrap();
        let ossl = |args: &[&str]| {
            let o = Cmd::new("openssl").args(args.iter().copied()).run();
            assert_eq!(o.code, 0, "openssl {args:?}: {o:?}");
        };
        let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec![
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=k8s-storage-checks NRPE CA",
        ];
        ca.extend(ec);
        let (cak, cac) = (p("ca.key"), p("ca.crt"));
        ca.extend(["-keyout", &cak, "-out", &cac]);
        ossl(&ca);
        for (name, cn) in [("nrpe", NODE), ("client", "nagios")] {
            let (key, csr, crt) = (
                p(&format!("{name}.key")),
                p(&format!("{name}.csr")),
                p(&format!("{name}.crt")),
            );
            let subj = format!("/CN={cn}");
            let mut req = vec!["req", "-subj", &subj, "-keyout", &key, "-out", &csr];
            req.extend(ec);
            ossl(&req);
            ossl(&[
                "x509",
                "-req",
                "-days",
                "2",
                "-in",
                &csr,
                "-CA",
                &cac,
                "-CAkey",
                &cak,
                "-CAcreateserial",
                "-out",
                &crt,
            ]);
        }
        let chown = Cmd::new("chown")
            .args(["-R", "nagios:nagios"])
            .arg(dir)
            .run();
        assert_eq!(chown.code, 0, "{chown:?}");
        chmod(dir, 0o750);
        NrpeTls {
            dir: dir.to_path_buf(),
        }
    }

    /// `check_nrpe`'s certificate options: `-C client.crt -K client.key -A ca.crt`.
    pub fn client_args(&self) -> Vec<String> {
        let p = |n: &str| self.dir.join(n).to_str().unwrap().to_string();
        vec![
            "-C".into(),
            p("client.crt"),
            "-K".into(),
            p("client.key"),
            "-A".into(),
            p("ca.crt"),
        ]
    }

    /// The shipped `nrpe.d/k8s-storage-checks-tls.cfg` with its certificate paths replaced by
    /// these.
    pub fn nrpe_settings(&self) -> String {
        let text = std::fs::read_to_string(
            crate::workspace_root().join("nrpe.d/k8s-storage-checks-tls.cfg"),
        )
        .unwrap();
        let out = text.replace(
            "/etc/nagios/k8s-storage-checks/",
            &format!("{}/", self.dir.display()),
        );
        assert!(out.contains("ssl_client_certs=2"), "{out}");
        out
    }
}

/// The NRPE daemon on a loopback port serving `commands`, as `nagios`, inside the node's mount
/// namespace (where its PVs are mounted), with the shipped TLS settings (client certificates
/// required) when `tls` is given.
pub fn start_nrpe(
    node: &Node,
    commands: &BTreeMap<String, String>,
    port: u16,
    tls: Option<&NrpeTls>,
) -> Daemon {
    let dir = node.work.path().join("nrpe");
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    let mut cfg = format!(
        "server_address=127.0.0.1\nserver_port={port}\nallowed_hosts=127.0.0.1\n\
         dont_blame_nrpe=0\nallow_bash_command_substitution=0\ndebug=0\n\
         command_timeout=60\nconnection_timeout=300\ndisable_syslog=1\n"
    );
    if let Some(t) = tls {
        cfg.push_str(&t.nrpe_settings());
    }
    for (n, c) in commands {
        cfg.push_str(&format!("command[{n}]={c}\n"));
    }
    let path = dir.join("nrpe.cfg");
    std::fs::write(&path, cfg).unwrap();
    chmod(&path, 0o644);
    let mut cmd = Command::new("nsenter");
    cmd.args(["-t", &node.ns.pid().to_string(), "-m", "--", "setpriv"])
        .args([
            "--reuid",
            "nagios",
            "--regid",
            "nagios",
            "--init-groups",
            "--",
            "/usr/sbin/nrpe",
            "-c",
        ])
        .arg(&path)
        .arg("-f");
    let mut d = Daemon::start("nrpe", cmd, &dir.join("nrpe.log"));
    let check_nrpe = "/usr/lib/nagios/plugins/check_nrpe";
    let client = tls.map(|t| t.client_args()).unwrap_or_default();
    wait_for(
        "nrpe to answer",
        Duration::from_secs(30),
        || {
            d.assert_running();
            let v = Cmd::new(check_nrpe)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .args(client.iter())
                .run();
            v.code == 0 && v.stdout.starts_with("NRPE v")
        },
        String::new,
    );
    d
}

/// One notification as `nagios/k8s-storage-notify --append` records it: what the on-call person
/// receives.
#[derive(Debug, Clone)]
pub struct Page {
    /// PROBLEM, RECOVERY, ACKNOWLEDGEMENT, …
    pub kind: String,
    pub host: String,
    pub service: String,
    pub state: String,
    pub subject: String,
    /// The status line, the long output, the runbook line (and a note when filtered).
    pub body: String,
}

/// The notifications recorded in `file` so far.
pub fn pages(file: &Path) -> Vec<Page> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out = Vec::new();
    let mut cur: Option<(Vec<String>, String, String)> = None;
    for l in text.lines() {
        if let Some(h) = l.strip_prefix("=== ") {
            if h == "end" {
                if let Some((f, subject, body)) = cur.take() {
                    if f.len() == 5 {
                        out.push(Page {
                            kind: f[1].clone(),
                            host: f[2].clone(),
                            service: f[3].clone(),
                            state: f[4].clone(),
                            subject,
                            body,
                        });
                    }
                }
            } else {
                cur = Some((
                    h.split('\t').map(str::to_string).collect(),
                    String::new(),
                    String::new(),
                ));
            }
        } else if let Some((_, subject, body)) = cur.as_mut() {
            if subject.is_empty() {
                if let Some(s) = l.strip_prefix("Subject: ") {
                    *subject = s.to_string();
                    continue;
                }
            }
            body.push_str(l);
            body.push('\n');
        }
    }
    out
}

/// The shipped notification script (`nagios/k8s-storage-notify`).
pub fn notify_script() -> PathBuf {
    crate::workspace_root().join("nagios/k8s-storage-notify")
}

/// The storage cascade of the incident (issue 32) on the engines' node, for the chain tests:
/// the iSCSI session under the node's disk `sdc` failed (state FREE after its recovery timeout,
/// the disk transport-offline), the kernel's errors on it (the connection error, the recovery
/// timeout, the offline device, the journal abort, the remount read-only), the read-only PV
/// ([`Incident::Ext4ReadOnly`], the real kernel's ext4 error path) and the pod wedged in
/// Terminating on that PV.
///
/// The iSCSI session is an iSCSI sysfs tree with the kernel's layout ([`crate::sysfs`]: this
/// kernel has no iSCSI transport to fail), given to check_iscsi_sessions as `--sys`; the kernel's
/// records are appended, timestamped now, to the kmsg record file check_storage_kernel_errors
/// reads (`--kmsg`, the node's quiet one), as the kernel wrote them in the incident.
pub struct Cascade {
    sysfs: crate::sysfs::Sysfs,
    session: crate::sysfs::Session,
    kmsg: PathBuf,
    seq: u64,
    wedged: bool,
}

impl Cascade {
    /// The healthy session (LOGGED_IN, its disk running); call after the node's quiet fixtures
    /// exist ([`Node::nrpe_commands_all`] or [`Node::quiet_cluster`]).
    pub fn new(node: &Node) -> Cascade {
        let base = node.work.path().join("iscsi");
        std::fs::create_dir_all(&base).unwrap();
        chmod(&base, 0o755);
        let sysfs = crate::sysfs::Sysfs::new(&base);
        let session = crate::sysfs::Session::new(3, "iqn.2016-09.com.openebs.jiva:pvc-a634b9a3")
            .recovery_tmo("300")
            .disk(0, "sdc", "8:32", "running");
        sysfs.add(&session);
        let kmsg = node.work.path().join("kmsg.txt");
        assert!(kmsg.exists(), "the node's quiet kmsg file first");
        Cascade {
            sysfs,
            session,
            kmsg,
            seq: 100,
            wedged: false,
        }
    }

    /// The `--sys` of check_iscsi_sessions.
    pub fn sys(&self) -> PathBuf {
        self.sysfs.root.clone()
    }

    fn session_state(&self, state: &str, disk: &str) {
        std::fs::write(
            self.sysfs.session_attrs(&self.session).join("state"),
            format!("{state}\n"),
        )
        .unwrap();
        std::fs::write(
            self.sysfs.lun_dir(&self.session, 0).join("state"),
            format!("{disk}\n"),
        )
        .unwrap();
    }

    /// The session failed: FREE after its recovery timeout, the disk transport-offline.
    pub fn fail_session(&self) {
        self.session_state("FREE", "transport-offline");
    }

    /// The session logged in again, the disk running.
    pub fn repair_session(&self) {
        self.session_state("LOGGED_IN", "running");
    }

    /// The kernel's records of the cascade, timestamped now (CLOCK_MONOTONIC, as /dev/kmsg).
    pub fn kernel_errors(&mut self) {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
        let usec = now.tv_sec() as u64 * 1_000_000 + now.tv_nsec() as u64 / 1000;
        let mut text = String::new();
        for (prio, line) in [
            (3, " connection3:0: detected conn error (1020)"),
            (3, " session3: session recovery timed out after 300 secs"),
            (3, "sd 3:0:0:0: rejecting I/O to offline device"),
            (3, "Aborting journal on device sdc-8."),
            (2, "EXT4-fs (sdc): Remounting filesystem read-only"),
        ] {
            self.seq += 1;
            text.push_str(&format!(
                "{prio},{},{usec},-;{line}\n SUBSYSTEM=block\n DEVICE=b8:32\n",
                self.seq
            ));
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.kmsg)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// The ext4 PV's pod wedged in Terminating: deleted 41 minutes ago with a 30 s grace period.
    pub fn wedge_pod(&mut self, node: &Node) {
        let mut wedged = node.healthy_pods();
        let p = wedged
            .iter_mut()
            .find(|p| p["metadata"]["name"] == EXT4_POD)
            .expect("the ext4 PV's pod");
        p["metadata"]["deletionTimestamp"] = json!(crate::apiserver::fixtures::ago(41 * 60 - 30));
        p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        p["spec"]["terminationGracePeriodSeconds"] = json!(30);
        node.api.set("pods", wedged);
        self.wedged = true;
    }

    /// The wedged pod's delete completed and its StatefulSet made it again: the healthy pods.
    pub fn release_pod(&mut self, node: &Node) {
        if std::mem::take(&mut self.wedged) {
            node.api.set("pods", node.healthy_pods());
        }
    }
}
