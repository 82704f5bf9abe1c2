//! Issue 32, one page per chain, on the Prometheus path: the real node_exporter (textfile) +
//! Prometheus + Alertmanager of `engines_prometheus` (stock timings scaled 1/60, the shipped rules,
//! route and inhibit rules), and the storage cascade on one node: an iSCSI session FREE with its
//! disk transport-offline (an iSCSI sysfs tree of the kernel's layout: this kernel has no iSCSI
//! transport), the real kernel's ext4 error path on that disk (a loop device: its journal aborts
//! and the filesystem goes read-only, as /dev/kmsg and the mount table show), the read-only PV,
//! and its pod wedged in Terminating (from the API).
//!
//! The root comes first, as in the incident (the session times out before its disk's I/O fails):
//! its alert pages. Then the rest of the chain fires in Prometheus and reaches Alertmanager, which
//! shows every dependent alert suppressed (inhibitedBy the root, or by a lower dependent), and the
//! receiver gets nothing more: exactly one notification for the chain, the root cause's. A pod
//! alert that resolves while held back is never notified. When the root resolves, the lowest
//! dependents still firing (the filesystem's errors) are notified at their group's next flush, not
//! lost, while what they cause stays held; when those age out of the kernel log's window, the
//! read-only PV, still read-only, is notified in turn: recovery releases the chain in order.
//!
//! The stale-CSI incident likewise (its own test): the dead CSI mount pages, the kubelet's backoff
//! on that PV and the three pods its queue holds are held back, then released in that order.
//!
//! Alertmanager flushes a group `group_wait` after its first alert: a sentinel alert posted after
//! the dependents reached Alertmanager is notified after their groups' first flush, so its arrival
//! at the receiver is the moment by which a notification of theirs would have arrived.

use crate::engines_prometheus::{
    alertmanager_config, http_get, label, prom_query, scaled_group_interval, Stack, ALERTMANAGER,
    NODE_EXPORTER, PROMETHEUS,
};
use e2e::engines::{wait_for, Intervals, Node, EXT4_NS, EXT4_POD, EXT4_PV, EXT4_UID, NODE};
use e2e::sysfs::{Session, Sysfs};
use e2e::webhook::Webhook;
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The Jiva target name prefix (the PV's name follows it).
const JIVA_IQN: &str = "iqn.2016-09.com.openebs.jiva:";
/// The kernel-error check's window (the role's k8s_storage_checks_log_window): long enough for
/// the scenario until the root's recovery, short enough that the filesystem errors age out after.
const KERNEL_WINDOW_SECS: u64 = 75;
const SENTINEL: &str = "K8sStorageTestSentinel";

/// `\bloop(?:…)\b` matching every loop device name but `name` (the machine's other loop devices
/// are other tests', not the incident's); no spaces (the runner splits its `--check` lines on them).
fn other_loops(name: &str) -> String {
    let n = name.trim_start_matches("loop");
    let k = n.len();
    let mut alts = vec![format!("\\d{{{},}}", k + 1)];
    if k > 1 {
        alts.push(format!("\\d{{1,{}}}", k - 1));
    }
    for (i, d) in n.char_indices() {
        let others: String = ('0'..='9').filter(|c| *c != d).collect();
        let rest = if k - i - 1 > 0 {
            format!("\\d{{{}}}", k - i - 1)
        } else {
            String::new()
        };
        alts.push(format!("{}[{others}]{rest}", &n[..i]));
    }
    format!("\\bloop(?:{})\\b", alts.join("|"))
}

/// The runner's `--check` lines: the shipped nrpe.d command lines of the four checks of the
/// chain, with this node's paths and the role's per-node arguments (kubelet root, kubeconfig,
/// `--node`), the kernel log check on the real /dev/kmsg limited to this volume's loop device.
fn cascade_checks(node: &Node, sys: &Path, state_root: &Path, dev: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(workspace_root().join("nrpe.d/k8s-storage-checks.cfg")).unwrap();
    let cmds = e2e::engines::nrpe_commands(&text);
    let root = node.tree.root.display().to_string();
    let kc = node.kubeconfig.display().to_string();
    let mut out = Vec::new();
    for name in [
        "check_iscsi_sessions",
        "check_storage_kernel_errors",
        "check_ro_pvc_mounts",
        "check_stuck_terminating",
    ] {
        let line = cmds[name]
            .replace(
                " --window 15m ",
                &format!(" --window {KERNEL_WINDOW_SECS}s "),
            )
            .replace(
                "/etc/k8s-storage-checks/kubeconfig",
                node.kubeconfig.to_str().unwrap(),
            )
            // Root's own state directory: the runner runs the checks as root here, and a root
            // run refuses one another user owns (the role's sudo mode does the same).
            .replace("/var/lib/k8s-storage-checks", state_root.to_str().unwrap());
        let args = line.split_once(' ').map(|x| x.1).unwrap_or("").to_string();
        let extra = match name {
            "check_iscsi_sessions" => {
                format!("--kubelet-root {root} --kubeconfig {kc} --sys {}", sys.display())
            }
            "check_storage_kernel_errors" => format!(
                "--kubelet-root {root} --kubeconfig {kc} --node {NODE} --exclude-pattern {} --exclude-pattern blocked\\sfor\\smore\\sthan\\s\\d+\\sseconds",
                other_loops(dev)
            ),
            "check_ro_pvc_mounts" => format!("--kubelet-root {root} --kubeconfig {kc} --node {NODE}"),
            "check_stuck_terminating" => format!("--node {NODE} --kubelet-root {root}"),
            _ => unreachable!(),
        };
        out.push(format!("{name} {args} {extra}"));
    }
    out
}

/// The radarr pod of the engines' node (as `e2e::engines` serves it), wedged in Terminating when
/// `deleted_secs_ago` is given: deleted with its grace period long past.
fn radarr_pod(deleted_secs_ago: Option<i64>) -> Value {
    let ago = e2e::apiserver::fixtures::ago;
    let t = ago(86400);
    let mut p = json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":EXT4_POD,"namespace":EXT4_NS,"uid":EXT4_UID,"labels":{"app":EXT4_POD},"creationTimestamp":t},
        "spec":{"nodeName":NODE,"terminationGracePeriodSeconds":30,"containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":e2e::engines::EXT4_PVC}}]},
        "status":{"phase":"Running","conditions":[
            {"lastTransitionTime":t,"status":"True","type":"PodScheduled"},
            {"lastTransitionTime":t,"status":"True","type":"Ready"}],
            "containerStatuses":[{"name":"main","ready":true,"restartCount":0,"started":true,
                "image":"x","state":{"running":{"startedAt":t}},"lastState":{}}]}});
    if let Some(s) = deleted_secs_ago {
        p["metadata"]["deletionTimestamp"] = json!(ago(s - 30));
        p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    }
    p
}

fn fuse_pod() -> Value {
    use e2e::engines::{FUSE_NS, FUSE_POD, FUSE_PVC, FUSE_UID};
    let t = e2e::apiserver::fixtures::ago(86400);
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":FUSE_POD,"namespace":FUSE_NS,"uid":FUSE_UID,"labels":{"app":FUSE_POD},"creationTimestamp":t},
        "spec":{"nodeName":NODE,"containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":FUSE_PVC}}]},
        "status":{"phase":"Running","conditions":[
            {"lastTransitionTime":t,"status":"True","type":"PodScheduled"},
            {"lastTransitionTime":t,"status":"True","type":"Ready"}],
            "containerStatuses":[{"name":"main","ready":true,"restartCount":0,"started":true,
                "image":"x","state":{"running":{"startedAt":t}},"lastState":{}}]}})
}

/// Alertmanager's alerts (active, suppressed), as its API v2 lists them.
fn am_alerts(port: u16) -> Vec<Value> {
    http_get(&format!("http://127.0.0.1:{port}/api/v2/alerts"))
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// Prometheus's firing alerts (the ALERTS series).
fn firing(port: u16) -> Vec<Value> {
    prom_query(port, "ALERTS{alertstate=\"firing\"}")
        .unwrap_or_default()
        .into_iter()
        .map(|r| json!({"labels": r["metric"]}))
        .collect()
}

/// A finding alert of `check` (K8sStorageFinding{Critical,Warning,Unknown}; not the pod alerts
/// made from its findings' names).
fn is_check(a: &Value, check: &str) -> bool {
    label(a, "check") == check
        && matches!(
            label(a, "alertname"),
            "K8sStorageFindingCritical" | "K8sStorageFindingWarning" | "K8sStorageFindingUnknown"
        )
}

/// The webhook's alerts, the sentinel left out.
fn notified(hook: &Webhook) -> Vec<Value> {
    hook.alerts()
        .into_iter()
        .filter(|a| label(a, "alertname") != SENTINEL)
        .collect()
}

/// Post the sentinel alert to Alertmanager (see the module doc).
fn post_sentinel(am: u16) {
    let sentinel = json!([{"labels": {"alertname": SENTINEL, "node": "sentinel"}}]);
    let post = Cmd::new("curl")
        .args([
            "-sS",
            "--fail",
            "--max-time",
            "5",
            "-H",
            "Content-Type: application/json",
            "-d",
        ])
        .arg(sentinel.to_string())
        .arg(format!("http://127.0.0.1:{am}/api/v2/alerts"))
        .run();
    assert_eq!(post.code, 0, "{post:?}");
}

fn set_iscsi(sysfs: &Sysfs, s: &Session, state: &str, conn: &str, lun: &str) {
    std::fs::write(sysfs.session_attrs(s).join("state"), format!("{state}\n")).unwrap();
    std::fs::write(sysfs.conn_attrs(s).join("state"), format!("{conn}\n")).unwrap();
    std::fs::write(sysfs.lun_dir(s, 0).join("state"), format!("{lun}\n")).unwrap();
}

#[test]
fn prometheus_alertmanager_page_once_per_chain_for_the_storage_cascade() {
    let t = "prometheus_alertmanager_page_once_per_chain_for_the_storage_cascade";
    if !need_root(t)
        || !need_tool(t, NODE_EXPORTER)
        || !need_tool(t, PROMETHEUS)
        || !need_tool(t, "promtool")
        || !need_tool(t, ALERTMANAGER)
        || !need_tool(t, "amtool")
        || !need_tool(t, "curl")
        || !need_tool(t, "bindfs")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let node = Node::new();
    let hook = Webhook::start();
    let w = node.work.path().to_path_buf();

    // The PV's disk: the loop device under its pod's mount.
    let publish = node.tree.root.join(format!(
        "pods/{EXT4_UID}/volumes/kubernetes.io~csi/{EXT4_PV}/mount"
    ));
    let out = node.ns.sh(&format!(
        "findmnt -n -o SOURCE,MAJ:MIN --target '{}'",
        publish.display()
    ));
    let mut words = out.stdout.split_whitespace();
    let dev = words
        .next()
        .expect("the PV's source")
        .trim_start_matches("/dev/")
        .to_string();
    let majmin = words.next().expect("its maj:min").to_string();
    assert!(dev.starts_with("loop"), "{out:?}");
    // Its iSCSI session, logged in: the Jiva target of the PV, the disk its LUN.
    let sysfs = Sysfs::new(&w.join("iscsi"));
    let session = Session::new(3, &format!("{JIVA_IQN}{EXT4_PV}"))
        .portal("10.152.183.41", 3260)
        .disk(0, &dev, &majmin, "running");
    sysfs.add(&session);
    let state_root = w.join("state-root");
    std::fs::create_dir_all(&state_root).unwrap();
    let checks = cascade_checks(&node, &sysfs.root, &state_root, &dev);
    let stack = Stack::start_with(&node, iv, &hook, checks);
    let (prom, am) = (stack.prom_port, stack.am_port);
    let ctx = || {
        format!(
            "{}\nalertmanager: {:#}",
            stack.context(&hook),
            Value::Array(am_alerts(am))
        )
    };
    let limit = Duration::from_secs(60);
    let gi = Duration::from_secs_f64(scaled_group_interval(iv));
    let chain_checks = [
        "check_iscsi_sessions",
        "check_storage_kernel_errors",
        "check_ro_pvc_mounts",
        "check_stuck_terminating",
    ];

    // A healthy node (older records of this loop device age out of the window first).
    let took = wait_for(
        "the four checks scraped as OK",
        limit + Duration::from_secs(KERNEL_WINDOW_SECS),
        || {
            let s = stack.statuses();
            chain_checks
                .iter()
                .all(|c| s.iter().any(|(n, v)| n == c && *v == 0.0))
        },
        ctx,
    );
    println!("the four checks scraped as OK: {took:?}");
    assert!(
        notified(&hook).is_empty(),
        "paged on a healthy node: {}",
        ctx()
    );

    // 1. The root: the session times out (FREE, connection down, its disk transport-offline).
    set_iscsi(&sysfs, &session, "FREE", "down", "transport-offline");
    let took = wait_for(
        "the iSCSI session's alert at the receiver",
        limit,
        || {
            notified(&hook)
                .iter()
                .any(|a| a["status"] == "firing" && is_check(a, "check_iscsi_sessions"))
        },
        ctx,
    );
    println!("the iSCSI session's alert at the receiver: {took:?}");
    let root = notified(&hook)
        .into_iter()
        .find(|a| is_check(a, "check_iscsi_sessions"))
        .unwrap();
    assert_eq!(
        label(&root, "alertname"),
        "K8sStorageFindingCritical",
        "{root:#}"
    );
    assert_eq!(label(&root, "session"), "session3", "{root:#}");
    assert_eq!(label(&root, "pv"), EXT4_PV, "{root:#}");
    let root_fp = root["fingerprint"].as_str().unwrap().to_string();
    let chain = root["annotations"]["chain"].as_str().unwrap_or("");
    assert!(
        chain.starts_with("Layer: iSCSI session.") && chain.contains("holds back"),
        "{root:#}"
    );

    // 2. What it causes: the disk's I/O fails (the kernel's ext4 error path: journal aborted,
    // read-only), and the pod using the volume, deleted, stays Terminating.
    let trigger = Instant::now();
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks chains test",
    )
    .unwrap();
    node.api
        .set("pods", vec![radarr_pod(Some(41 * 60)), fuse_pod()]);
    // Every dependent fires in Prometheus and is held back in Alertmanager.
    let dependents = [
        "check_storage_kernel_errors",
        "check_ro_pvc_mounts",
        "check_stuck_terminating",
    ];
    let took = wait_for(
        "the dependents firing in Prometheus and suppressed in Alertmanager",
        limit,
        || {
            let f = firing(prom);
            let a = am_alerts(am);
            dependents.iter().all(|c| {
                f.iter().any(|x| is_check(x, c))
                    && a.iter().filter(|x| is_check(x, c)).count() > 0
                    && a.iter().filter(|x| is_check(x, c)).all(|x| {
                        x["status"]["state"] == "suppressed"
                            && x["status"]["inhibitedBy"]
                                .as_array()
                                .is_some_and(|v| !v.is_empty())
                    })
            }) && a
                .iter()
                .any(|x| label(x, "alertname") == "K8sStorageFindingPod")
        },
        ctx,
    );
    println!("the dependents firing in Prometheus and suppressed in Alertmanager: {took:?}");
    let held = am_alerts(am);
    // The stuck pod is held by the volume's findings through their pod alert (its own labels
    // carry no PV); that alert is itself held behind its finding's.
    let stuck = held
        .iter()
        .find(|x| is_check(x, "check_stuck_terminating"))
        .unwrap();
    assert_eq!(label(stuck, "pod"), EXT4_POD, "{stuck:#}");
    let pod_alerts: Vec<&Value> = held
        .iter()
        .filter(|x| label(x, "alertname") == "K8sStorageFindingPod" && label(x, "pod") == EXT4_POD)
        .collect();
    assert!(
        stuck["status"]["inhibitedBy"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| pod_alerts.iter().any(|p| p["fingerprint"] == *f)),
        "the stuck pod is held by its volume's pod alerts: {stuck:#}\n{pod_alerts:#?}"
    );
    for p in held
        .iter()
        .filter(|x| label(x, "alertname") == "K8sStorageFindingPod")
    {
        assert_eq!(p["status"]["state"], "suppressed", "{p:#}");
    }
    // The root is not held back.
    let r = held
        .iter()
        .find(|x| x["fingerprint"] == root_fp.as_str())
        .expect("the root in Alertmanager");
    assert_eq!(r["status"]["state"], "active", "{r:#}");
    // By the sentinel's notification, every dependent group has had its first flush.
    post_sentinel(am);
    let took = wait_for(
        "the sentinel at the receiver",
        limit,
        || {
            hook.alerts()
                .iter()
                .any(|a| label(a, "alertname") == SENTINEL)
        },
        ctx,
    );
    println!("the sentinel at the receiver: {took:?}");
    let sent = notified(&hook);
    assert!(
        sent.iter().all(|a| a["fingerprint"] == root_fp.as_str()),
        "one notification per chain, the root's; also notified: {:#?}\n{}",
        sent.iter()
            .filter(|a| a["fingerprint"] != root_fp.as_str())
            .collect::<Vec<_>>(),
        ctx()
    );
    println!(
        "chain held behind its root after {:?} ({} alerts in Alertmanager)",
        started.elapsed(),
        held.len()
    );

    // 3. A dependent that resolves while held back is never notified: the pod is gone.
    node.api.set("pods", vec![radarr_pod(None), fuse_pod()]);
    let took = wait_for(
        "the stuck pod's alert resolved",
        limit,
        || {
            !firing(prom)
                .iter()
                .any(|x| is_check(x, "check_stuck_terminating"))
                && !am_alerts(am)
                    .iter()
                    .any(|x| is_check(x, "check_stuck_terminating"))
        },
        ctx,
    );
    println!("the stuck pod's alert resolved: {took:?}");

    // 4. The root recovers: the session logs in again. Its resolution is notified; the
    // filesystem's errors, still in the kernel log's window, are now the chain's lowest firing
    // alerts and are notified at their group's next flush, not lost; what they cause (the
    // remount, the read-only PV) stays held behind them.
    let seen = notified(&hook).len();
    set_iscsi(&sysfs, &session, "LOGGED_IN", "up", "running");
    let took = wait_for(
        "the root's resolution and the filesystem errors' notification",
        limit + gi,
        || {
            let n = notified(&hook);
            let new = &n[seen..];
            new.iter()
                .any(|a| a["fingerprint"] == root_fp.as_str() && a["status"] == "resolved")
                && new
                    .iter()
                    .any(|a| a["status"] == "firing" && is_check(a, "check_storage_kernel_errors"))
        },
        ctx,
    );
    println!("the root's resolution and the filesystem errors' notification: {took:?}");
    assert!(
        trigger.elapsed() < Duration::from_secs(KERNEL_WINDOW_SECS),
        "the scenario outlasted the kernel log window ({KERNEL_WINDOW_SECS}s): the errors may have aged out before the root recovered"
    );
    let ro_held = am_alerts(am)
        .into_iter()
        .filter(|x| is_check(x, "check_ro_pvc_mounts"))
        .collect::<Vec<_>>();
    assert!(
        !ro_held.is_empty() && ro_held.iter().all(|x| x["status"]["state"] == "suppressed"),
        "the read-only PV is held behind the filesystem errors: {ro_held:#?}"
    );
    assert!(
        !notified(&hook)
            .iter()
            .any(|a| is_check(a, "check_ro_pvc_mounts")),
        "the read-only PV paged while its cause fires: {}",
        ctx()
    );

    // 5. The filesystem errors age out of the window (the volume stays read-only): the
    // read-only PV is notified in its turn.
    let took = wait_for(
        "the read-only PV's notification once the kernel errors aged out",
        Duration::from_secs(KERNEL_WINDOW_SECS) + limit + gi,
        || {
            notified(&hook)
                .iter()
                .any(|a| a["status"] == "firing" && is_check(a, "check_ro_pvc_mounts"))
        },
        ctx,
    );
    println!("the read-only PV's notification once the kernel errors aged out: {took:?}");
    let all = notified(&hook);
    assert!(
        !all.iter().any(|a| is_check(a, "check_stuck_terminating")
            || label(a, "alertname") == "K8sStorageFindingPod"),
        "the pod resolved while held back, and the pod alerts never page: {}",
        ctx()
    );
    println!("chains test took {:?}", started.elapsed());
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(stack);
    drop(hook);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The kubelet retrying the UnmountDevice of `pv` at its maximum backoff, the last failure now
/// (three failures 2m2s apart), appended to the node's kubelet log.
fn kubelet_backoff(node: &Node, pv: &str) {
    let now = e2e::logs::now_secs();
    let mut text = String::new();
    for k in [2, 1, 0] {
        let t = now - 122 * k;
        let msg = e2e::logs::nested_op_msg(
            t,
            FUSE_DRIVER,
            pv,
            "",
            122_000,
            &e2e::logs::mount_refs_err(FUSE_DRIVER, pv, NODE),
        );
        text.push_str(&e2e::logs::json_line(t, &msg));
        text.push('\n');
    }
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&node.kubelet_log)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

const FUSE_DRIVER: &str = "driver.longhorn.io";
/// The workspace pods stuck after scheduling (the stale-CSI incident's three).
const STUCK_PODS: [&str; 3] = ["ws-b70553ae", "ws-ebafc5da", "ws-d048256b"];

/// The stale-CSI incident on one node: the CSI mount of a volume goes stale (its FUSE daemon
/// killed), the kubelet's volume operation on it stays in backoff, and the node's queue holds the
/// set-up of three new pods (stuck after scheduling). Only the stale mount pages; the kubelet's
/// alert (same PV) and the pods' (the kubelet's queue: the same node) are held back. When the
/// mount is served again, the kubelet's backoff (still in its log window) pages next while the
/// pods stay held behind it; when it ages out, the pods (still stuck) page.
#[test]
fn prometheus_alertmanager_page_once_per_chain_for_the_stale_csi_mount() {
    let t = "prometheus_alertmanager_page_once_per_chain_for_the_stale_csi_mount";
    if !need_root(t)
        || !need_tool(t, NODE_EXPORTER)
        || !need_tool(t, PROMETHEUS)
        || !need_tool(t, "promtool")
        || !need_tool(t, ALERTMANAGER)
        || !need_tool(t, "amtool")
        || !need_tool(t, "curl")
        || !need_tool(t, "bindfs")
    {
        return;
    }
    use e2e::engines::{Incident, FUSE_PV, LOG_AGE_OUT, STUCK_NS};
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let hook = Webhook::start();
    // The engines' four checks with the shipped command lines (stale mounts, the kubelet's log,
    // pods stuck after scheduling, read-only volumes), as the role renders them with the node's
    // name set (k8s_storage_checks_node_name): the read-only check gets `--node` too.
    let checks: Vec<String> = node
        .textfile_checks()
        .into_iter()
        .map(|c| {
            if c.starts_with("check_ro_pvc_mounts ") {
                format!("{c} --node {NODE}")
            } else {
                c
            }
        })
        .collect();
    let stack = Stack::start_with(&node, iv, &hook, checks);
    let (prom, am) = (stack.prom_port, stack.am_port);
    let ctx = || {
        format!(
            "{}\nalertmanager: {:#}",
            stack.context(&hook),
            Value::Array(am_alerts(am))
        )
    };
    let limit = Duration::from_secs(60);
    let gi = Duration::from_secs_f64(scaled_group_interval(iv));
    let took = wait_for(
        "every check scraped as OK",
        limit,
        || {
            let s = stack.statuses();
            e2e::engines::CHECKS
                .iter()
                .all(|c| s.iter().any(|(n, v)| n == c && *v == 0.0))
        },
        ctx,
    );
    println!("every check scraped as OK: {took:?}");

    // 1. The root: the volume's CSI mount goes stale.
    node.inject(Incident::FuseDead);
    let took = wait_for(
        "the stale mount's alert at the receiver",
        limit,
        || {
            notified(&hook)
                .iter()
                .any(|a| a["status"] == "firing" && is_check(a, "check_stale_csi_mounts"))
        },
        ctx,
    );
    println!("the stale mount's alert at the receiver: {took:?}");
    let root = notified(&hook)
        .into_iter()
        .find(|a| is_check(a, "check_stale_csi_mounts"))
        .unwrap();
    assert_eq!(label(&root, "pv"), FUSE_PV, "{root:#}");
    let root_fp = root["fingerprint"].as_str().unwrap().to_string();
    // The dead mount is the chain's root as two checks see it (the stale CSI mount, and the
    // read-only check's I/O error on it): one layer, one PV, one node, so one group of the shipped
    // route (a second alert joining a group that already paged is sent at its next flush).
    let roots = || -> Vec<String> {
        notified(&hook)
            .iter()
            .filter(|a| {
                label(a, "pv") == FUSE_PV && label(a, "alertname") == "K8sStorageFindingCritical"
            })
            .filter(|a| {
                is_check(a, "check_stale_csi_mounts")
                    || (is_check(a, "check_ro_pvc_mounts")
                        && label(a, "signal") == "mount_io_error")
            })
            .map(|a| a["fingerprint"].as_str().unwrap_or("").to_string())
            .collect()
    };

    // 2. The kubelet cannot unmount it and backs off; then the node's queue holds three new
    // pods (their alerts are held by the kubelet's, which must fire first: Alertmanager
    // decides at each group's flush).
    kubelet_backoff(&node, FUSE_PV);
    let took = wait_for(
        "the kubelet's alert firing and suppressed",
        limit,
        || {
            am_alerts(am).iter().any(|x| {
                is_check(x, "check_kubelet_nested_ops")
                    && label(x, "alertname") == "K8sStorageFindingCritical"
                    && x["status"]["state"] == "suppressed"
            })
        },
        ctx,
    );
    println!("the kubelet's alert firing and suppressed: {took:?}");
    let mut pods = vec![radarr_pod(None), fuse_pod()];
    for p in STUCK_PODS {
        pods.push(e2e::apiserver::fixtures::scheduled_no_status(
            STUCK_NS,
            p,
            NODE,
            11 * 60,
        ));
    }
    node.api.set("pods", pods.clone());
    let took = wait_for(
        "the kubelet's and the pods' alerts firing and suppressed",
        limit,
        || {
            let f = firing(prom);
            let a = am_alerts(am);
            let held = |c: &str, n: usize| {
                f.iter().filter(|x| is_check(x, c)).count() == n
                    && a.iter().filter(|x| is_check(x, c)).count() == n
                    && a.iter().filter(|x| is_check(x, c)).all(|x| {
                        x["status"]["state"] == "suppressed"
                            && x["status"]["inhibitedBy"]
                                .as_array()
                                .is_some_and(|v| !v.is_empty())
                    })
            };
            held("check_kubelet_nested_ops", 1) && held("check_stuck_scheduled", STUCK_PODS.len())
        },
        ctx,
    );
    println!("the kubelet's and the pods' alerts firing and suppressed: {took:?}");
    post_sentinel(am);
    wait_for(
        "the sentinel at the receiver",
        limit,
        || {
            hook.alerts()
                .iter()
                .any(|a| label(a, "alertname") == SENTINEL)
        },
        ctx,
    );
    let root_fps = roots();
    let sent = notified(&hook);
    assert!(
        sent.iter()
            .all(|a| root_fps.contains(&a["fingerprint"].as_str().unwrap_or("").to_string())),
        "only the chain's root (the dead mount) notified; also notified: {:#?}\n{}",
        sent.iter()
            .filter(|a| !root_fps.contains(&a["fingerprint"].as_str().unwrap_or("").to_string()))
            .collect::<Vec<_>>(),
        ctx()
    );
    println!(
        "{} notifications for the stale CSI chain, all of its root",
        hook.bodies()
            .iter()
            .filter(|b| b["commonLabels"]["alertname"] != SENTINEL)
            .count()
    );

    // 3. The mount is served again (the node plugin restarted) while the kubelet still retries:
    // the kubelet's backoff pages now, the pods stay held behind it (the node's queue).
    kubelet_backoff(&node, FUSE_PV);
    let retried = Instant::now();
    let seen = notified(&hook).len();
    node.clear(Incident::FuseDead);
    let took = wait_for(
        "the stale mount's resolution and the kubelet's notification",
        limit + gi,
        || {
            let n = notified(&hook);
            let new = &n[seen..];
            new.iter()
                .any(|a| a["fingerprint"] == root_fp.as_str() && a["status"] == "resolved")
                && new
                    .iter()
                    .any(|a| a["status"] == "firing" && is_check(a, "check_kubelet_nested_ops"))
        },
        ctx,
    );
    println!("the stale mount's resolution and the kubelet's notification: {took:?}");
    assert!(
        retried.elapsed() < LOG_AGE_OUT,
        "the kubelet's failures aged out of the window before the mount recovered"
    );
    assert!(
        !notified(&hook)
            .iter()
            .any(|a| is_check(a, "check_stuck_scheduled")),
        "the pods paged while the kubelet's queue holds them: {}",
        ctx()
    );

    // 4. The kubelet's failures age out of its log window; the pods, still stuck, page.
    let took = wait_for(
        "the stuck pods' notification once the kubelet's failures aged out",
        LOG_AGE_OUT + limit + gi,
        || {
            notified(&hook)
                .iter()
                .filter(|a| a["status"] == "firing" && is_check(a, "check_stuck_scheduled"))
                .count()
                >= STUCK_PODS.len()
        },
        ctx,
    );
    println!("the stuck pods' notification once the kubelet's failures aged out: {took:?}");
    println!("stale CSI chain test took {:?}", started.elapsed());
    node.api.set("pods", pods[..2].to_vec());
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(stack);
    drop(hook);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The shipped inhibit rules with the shipped route and the stock configuration are a valid
/// Alertmanager configuration (amtool check-config, as an operator checks a change).
#[test]
fn the_shipped_inhibit_rules_with_the_route_pass_amtool_check_config() {
    let t = "the_shipped_inhibit_rules_with_the_route_pass_amtool_check_config";
    if !need_tool(t, "amtool") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("alertmanager.yml");
    let text = alertmanager_config("http://127.0.0.1:9/alerts", Intervals::TEST);
    assert!(text.contains("K8sStorageFindingPod"), "{text}");
    std::fs::write(&cfg, &text).unwrap();
    let out = Cmd::new("amtool").arg("check-config").arg(&cfg).run();
    assert_eq!(out.code, 0, "{out:?}\n{text}");
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let n = v["inhibit_rules"].as_sequence().unwrap().len();
    assert!(n > 20, "{n}");
    assert!(
        out.stdout.contains(&format!(" - {n} inhibit rules")),
        "{out:?}"
    );
}
