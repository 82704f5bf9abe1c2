//! check_stale_csi_mounts end to end: real mounts (bindfs FUSE with dead and stopped daemons,
//! loop ext4, tmpfs) in a private mount namespace under a temporary kubelet root, the release
//! binary run inside the namespace, the cluster view from kubectl-shaped JSON files and, for the
//! API classes, from the real kube-apiserver (`e2e::control_plane`: pods, PVs and
//! VolumeAttachments created through the API with their statuses, the real 403).

use e2e::apiserver::KubeCa;
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::fuse::{bindfs, kill_daemon, processes_with, stop_daemon};
use e2e::{need_root, need_tool, sha256_hex, Cmd, KubeletTree, Ns, Output};
use std::path::{Path, PathBuf};

const NAME: &str = "STALE_CSI_MOUNTS";
const BIN: &str = "check_stale_csi_mounts";
/// The node name KubeletTree writes into vol_data.json.
const NODE: &str = "node-1";
const DRIVER: &str = "driver.longhorn.io";

struct Env {
    ns: Ns,
    tree: KubeletTree,
    tmp: tempfile::TempDir,
}

fn env(test: &str, tools: &[&str]) -> Option<Env> {
    if !need_root(test) || !tools.iter().all(|t| need_tool(test, t)) {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(tmp.path());
    Some(Env {
        ns: Ns::new(),
        tree,
        tmp,
    })
}

impl Env {
    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `kubectl get pods -A -o json`-shaped file: (uid, node) pairs.
    fn pods_json(&self, pods: &[(&str, &str)]) -> PathBuf {
        let items: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, (uid, node))| {
                serde_json::json!({"apiVersion":"v1","kind":"Pod",
                    "metadata":{"name":format!("pod-{i}"),"namespace":"ws","uid":uid},
                    "spec":{"nodeName":node,"containers":[{"name":"c","image":"x"}]},
                    "status":{"phase":"Running"}})
            })
            .collect();
        let p = self.path("pods.json");
        std::fs::write(
            &p,
            serde_json::json!({"apiVersion":"v1","kind":"List","items":items}).to_string(),
        )
        .unwrap();
        p
    }

    /// `kubectl get pv,volumeattachments -o json`-shaped file: PV names and (pv, node) attachments.
    fn pvs_json(&self, pvs: &[&str], attachments: &[(&str, &str)]) -> PathBuf {
        let mut items: Vec<_> = pvs
            .iter()
            .map(|pv| {
                serde_json::json!({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":pv},
                    "spec":{"csi":{"driver":DRIVER,"volumeHandle":pv},"capacity":{"storage":"1Gi"}},
                    "status":{"phase":"Bound"}})
            })
            .collect();
        for (i, (pv, node)) in attachments.iter().enumerate() {
            items.push(
                serde_json::json!({"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment",
                "metadata":{"name":format!("csi-{i}")},
                "spec":{"attacher":DRIVER,"nodeName":node,"source":{"persistentVolumeName":pv}},
                "status":{"attached":true}}),
            );
        }
        let p = self.path("pvs.json");
        std::fs::write(
            &p,
            serde_json::json!({"apiVersion":"v1","kind":"List","items":items}).to_string(),
        )
        .unwrap();
        p
    }

    fn staging(&self, handle: &str) -> PathBuf {
        self.tree.staging_mount(DRIVER, handle, &sha256_hex(handle))
    }

    fn tmpfs(&self, mp: &Path) {
        self.ns.sh(&format!(
            "mkdir -p '{m}' && mount -t tmpfs tmpfs '{m}'",
            m = mp.display()
        ));
    }

    fn bind(&self, from: &Path, to: &Path) {
        self.ns.sh(&format!(
            "mkdir -p '{t}' && mount --bind '{f}' '{t}'",
            f = from.display(),
            t = to.display()
        ));
    }

    /// The check in the namespace, with no credentials from the test host's environment.
    fn check(&self) -> Cmd {
        self.ns.check(BIN).without_host_credentials()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.check()
            .arg("--kubelet-root")
            .arg(&self.tree.root)
            .arg("--node")
            .arg(NODE)
            .args(args)
            .run()
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn finding<'a>(out: &'a Output, status: &str, contains: &str) -> &'a str {
    let prefix = format!("[{status}] ");
    out.stdout
        .lines()
        .find(|l| l.starts_with(&prefix) && l.contains(contains))
        .unwrap_or_else(|| panic!("no {prefix}finding with {contains:?}: {out:?}"))
}

#[test]
fn dead_fuse_daemon_is_a_corrupted_mount_enotconn() {
    let Some(mut e) = env(
        "dead_fuse_daemon_is_a_corrupted_mount_enotconn",
        &["bindfs"],
    ) else {
        return;
    };
    let mp = e.tree.pod_csi_mount("u-dead", "pvc-dead", DRIVER);
    let src = e.path("src-dead");
    let pid = bindfs(&mut e.ns, &src, &mp);
    let out = e.run(&[]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().contains("API cross-checks skipped"),
        "{out:?}"
    );

    kill_daemon(pid);
    let out = e.run(&[]);
    out.assert_status(NAME, 2);
    let line = finding(&out, "CRITICAL", "corrupted pod mount");
    assert!(line.contains(s(&mp)) && line.contains("ENOTCONN"), "{line}");
    // The finding names PV, driver, pod, device and what to do.
    assert!(
        out.stdout.contains(
            "pv pvc-dead (from path), driver driver.longhorn.io, pod uid u-dead, device "
        ),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("next: restart the CSI node plugin of driver.longhorn.io: `kubectl -n longhorn-system delete pod -l app=longhorn-csi-plugin --field-selector "),
        "{out:?}"
    );
    assert_eq!(out.perf("stale_mounts"), Some(1.0));
    assert_eq!(out.perf("csi_mounts"), Some(1.0));
    assert!(
        out.first_line().contains("API cross-checks skipped"),
        "{out:?}"
    );
}

#[test]
fn stopped_fuse_daemon_is_hung_answers_within_timeout_and_leaves_no_probe() {
    let test = "stopped_fuse_daemon_is_hung_answers_within_timeout_and_leaves_no_probe";
    let Some(mut e) = env(test, &["bindfs"]) else {
        return;
    };
    let mp = e.staging("pvc-hung");
    let src = e.path("src-hung");
    let pid = bindfs(&mut e.ns, &src, &mp);
    stop_daemon(pid);
    // A marker only this run's command line (and its forked probes') carries.
    let marker = format!("no-such-mount-{}-hung", std::process::id());
    let out = e.run(&["-t", "6", "--probe-timeout", "1s", "--exclude", &marker]);
    out.assert_status(NAME, 2);
    assert!(!out.first_line().contains("timed out"), "{out:?}");
    assert!(out.elapsed < std::time::Duration::from_secs(6), "{out:?}");
    let line = finding(&out, "CRITICAL", "hung staging mount");
    assert!(
        line.contains(s(&mp)) && line.ends_with("no answer in 1s"),
        "{line}"
    );
    assert_eq!(out.perf("hung_mounts"), Some(1.0));
    assert!(
        out.stdout.contains("pv pvc-hung (from volumeHandle)"),
        "{out:?}"
    );
    // No probe process of that run is still around.
    assert_eq!(processes_with(&marker), Vec::<i32>::new());

    // A probe timeout longer than -t is capped by the time left: still the mount's own answer,
    // not the watchdog's "timed out".
    let out = e.run(&["-t", "3", "--probe-timeout", "30s", "--exclude", &marker]);
    out.assert_status(NAME, 2);
    assert!(!out.first_line().contains("timed out"), "{out:?}");
    assert_eq!(out.perf("hung_mounts"), Some(1.0));
    let line = finding(&out, "CRITICAL", "hung staging mount");
    assert!(
        line.contains("no answer in ") && !line.contains("in 30s"),
        "{line}"
    );
    assert_eq!(processes_with(&marker), Vec::<i32>::new());
    // The daemon is SIGKILLed when e.ns drops (it owns the pid), even if an assert failed.
}

#[test]
fn twenty_hung_mounts_are_probed_at_once_within_timeout() {
    let test = "twenty_hung_mounts_are_probed_at_once_within_timeout";
    let Some(mut e) = env(test, &["bindfs"]) else {
        return;
    };
    let mut pids = Vec::new();
    let mut uids = Vec::new();
    for i in 0..20 {
        let uid = format!("u-hung-{i}");
        let mp = e.tree.pod_csi_mount(&uid, &format!("pvc-h{i}"), DRIVER);
        let src = e.path(&format!("src-{i}"));
        pids.push(bindfs(&mut e.ns, &src, &mp));
        uids.push(uid);
    }
    for &p in &pids {
        stop_daemon(p);
    }
    let pods: Vec<(&str, &str)> = uids.iter().map(|u| (u.as_str(), NODE)).collect();
    let pods = e.pods_json(&pods);
    let marker = format!("no-such-mount-{}-twenty", std::process::id());
    // Sequential probes would need 20 × 2s; the watchdog would answer "timed out" at 5s.
    let out = e.run(&[
        "-t",
        "5",
        "--probe-timeout",
        "2s",
        "--pods-json",
        s(&pods),
        "--exclude",
        &marker,
    ]);
    out.assert_status(NAME, 2);
    assert!(!out.first_line().contains("timed out"), "{out:?}");
    assert!(out.elapsed < std::time::Duration::from_secs(5), "{out:?}");
    assert_eq!(out.perf("hung_mounts"), Some(20.0), "{out:?}");
    assert_eq!(out.perf("stale_mounts"), Some(20.0));
    assert_eq!(out.perf("orphaned_mounts"), Some(0.0));
    assert!(
        out.first_line()
            .contains("20 of 20 CSI mounts stale: 20 hung"),
        "{out:?}"
    );
    assert_eq!(processes_with(&marker), Vec::<i32>::new());
}

#[test]
fn healthy_loop_ext4_staging_and_pod_mount_are_ok() {
    let Some(e) = env(
        "healthy_loop_ext4_staging_and_pod_mount_are_ok",
        &["mkfs.ext4"],
    ) else {
        return;
    };
    let staging = e.staging("pvc-good");
    e.ns.loop_fs(&e.path("good.img"), 16, "mkfs.ext4 -q -F", "", &staging);
    let pod = e.tree.pod_csi_mount("u-good", "pvc-good", DRIVER);
    e.bind(&staging, &pod);
    let pods = e.pods_json(&[("u-good", NODE), ("u-other", "node-2")]);
    let pvs = e.pvs_json(&["pvc-good"], &[("pvc-good", NODE)]);
    let out = e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs), "-v"]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .starts_with("STALE_CSI_MOUNTS OK - 2 CSI mounts healthy |"),
        "{out:?}"
    );
    assert_eq!(out.perf("csi_mounts"), Some(2.0));
    assert_eq!(out.perf("stale_mounts"), Some(0.0));
    // -v lists the healthy mounts; the staging PV was found through the pod mount on its device.
    finding(&out, "OK", "healthy staging mount");
    assert!(
        out.stdout.contains("pv pvc-good (from pod mount)"),
        "{out:?}"
    );
    assert!(out.stdout.contains("pod ws/pod-0 (uid u-good)"), "{out:?}");

    // The same without a cluster view: OK, but the summary says what was not checked.
    let out = e.run(&[]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("API cross-checks skipped (no Kubernetes credentials"),
        "{out:?}"
    );
}

#[test]
fn unpublished_staging_mount_is_a_warning() {
    let Some(e) = env("unpublished_staging_mount_is_a_warning", &[]) else {
        return;
    };
    let staging = e.staging("pvc-idle");
    e.tmpfs(&staging);
    let pods = e.pods_json(&[("u-x", NODE)]);
    let pvs = e.pvs_json(&["pvc-idle"], &[("pvc-idle", NODE)]);
    let out = e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs)]);
    out.assert_status(NAME, 1);
    let line = finding(&out, "WARNING", "unpublished staging mount");
    assert!(
        line.contains(s(&staging)) && line.contains("PV pvc-idle"),
        "{line}"
    );
    assert_eq!(out.perf("stale_mounts"), Some(1.0));
    // -w/-c on the stale count replace the class states.
    e.run(&[
        "--pods-json",
        s(&pods),
        "--pvs-json",
        s(&pvs),
        "-w",
        "1",
        "-c",
        "2",
    ])
    .assert_status(NAME, 0);
}

#[test]
fn orphaned_pod_mount_is_critical() {
    let Some(e) = env("orphaned_pod_mount_is_critical", &[]) else {
        return;
    };
    let staging = e.staging("pvc-orph");
    e.tmpfs(&staging);
    let live = e.tree.pod_csi_mount("u-live", "pvc-orph", DRIVER);
    e.bind(&staging, &live);
    let gone = e.tree.pod_csi_mount("u-gone", "pvc-orph", DRIVER);
    e.bind(&staging, &gone);
    // u-gone exists, but on another node; u-live runs here.
    let pods = e.pods_json(&[("u-live", NODE), ("u-gone", "node-2")]);
    let pvs = e.pvs_json(&["pvc-orph"], &[("pvc-orph", NODE)]);
    let out = e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs)]);
    out.assert_status(NAME, 2);
    let line = finding(&out, "CRITICAL", "orphaned pod mount");
    assert!(
        line.contains(s(&gone)) && line.contains("runs on node node-2"),
        "{line}"
    );
    assert!(
        out.stdout.contains(&format!(
            "next: on {NODE}: `sudo umount {}`",
            plugin::shell_quote(&gone.to_string_lossy())
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("orphaned_mounts"), Some(1.0));
    assert_eq!(out.perf("stale_mounts"), Some(1.0));
    assert_eq!(out.perf("csi_mounts"), Some(3.0));

    // Absent from the list altogether (pods of every node, read from stdin).
    let pods = std::fs::read_to_string(e.pods_json(&[("u-live", NODE)])).unwrap();
    let out = e
        .check()
        .args([
            "--kubelet-root",
            s(&e.tree.root),
            "--node",
            NODE,
            "--pods-json",
            "-",
        ])
        .stdin(pods)
        .run();
    out.assert_status(NAME, 2);
    assert!(
        finding(&out, "CRITICAL", "orphaned").contains("pod u-gone is not a pod of node node-1")
    );
    assert!(
        out.first_line().contains("PV cross-check skipped"),
        "{out:?}"
    );

    // A wrong --node would make every pod mount orphaned: UNKNOWN instead.
    let pods = e.pods_json(&[("u-live", NODE)]);
    let out = e
        .check()
        .args([
            "--kubelet-root",
            s(&e.tree.root),
            "--node",
            "not-this-node",
            "--pods-json",
            s(&pods),
        ])
        .run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("give --node"), "{out:?}");
}

#[test]
fn staging_mount_of_a_deleted_pv_is_critical() {
    let Some(e) = env("staging_mount_of_a_deleted_pv_is_critical", &[]) else {
        return;
    };
    // The incident: the PV is deleted, a pod mount still pins the staging mount.
    let staging = e.staging("pvc-81b676e6");
    e.tmpfs(&staging);
    let pod = e.tree.pod_csi_mount("u-ws", "pvc-81b676e6", DRIVER);
    e.bind(&staging, &pod);
    let pods = e.pods_json(&[("u-ws", NODE)]);
    let pvs = e.pvs_json(&["pvc-other"], &[("pvc-other", NODE)]);
    let out = e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs)]);
    out.assert_status(NAME, 2);
    let line = finding(&out, "CRITICAL", "stale staging mount");
    assert!(
        line.contains(s(&staging)) && line.contains("PV pvc-81b676e6 no longer exists"),
        "{line}"
    );
    assert!(
        out.stdout.contains("next: restart the kubelet on "),
        "{out:?}"
    );
    assert_eq!(out.perf("stale_mounts"), Some(1.0));

    // The PV exists but is attached to another node only.
    let pvs = e.pvs_json(&["pvc-81b676e6"], &[("pvc-81b676e6", "node-2")]);
    let out = e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs)]);
    out.assert_status(NAME, 2);
    assert!(finding(&out, "CRITICAL", "stale staging mount")
        .contains("no VolumeAttachment of PV pvc-81b676e6 to node node-1"));

    // Attached here: healthy.
    let pvs = e.pvs_json(&["pvc-81b676e6"], &[("pvc-81b676e6", NODE)]);
    e.run(&["--pods-json", s(&pods), "--pvs-json", s(&pvs)])
        .assert_status(NAME, 0);
}

#[test]
fn without_read_access_to_the_kubelet_root_it_is_unknown_naming_the_capability() {
    let test = "without_read_access_to_the_kubelet_root_it_is_unknown_naming_the_capability";
    let Some(e) = env(test, &["setpriv"]) else {
        return;
    };
    e.tmpfs(&e.tree.pod_csi_mount("u-1", "pvc-1", DRIVER));
    std::fs::set_permissions(
        e.tree.root.join("pods"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    let out =
        e.ns.cmd("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ])
            .arg(e2e::bin(BIN))
            .args(["--kubelet-root", s(&e.tree.root)])
            .run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("CAP_DAC_READ_SEARCH"), "{out:?}");
    assert!(out.first_line().contains("EACCES"), "{out:?}");
}

#[test]
fn bad_input_is_unknown() {
    // No mounts needed: garbled documents and wrong paths never pass silently.
    let tmp = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(tmp.path());
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"items\": [").unwrap();
    let root = tree.root.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--pods-json", bad.to_str().unwrap()],
            "not a JSON document",
        ),
        (vec!["--pvs-json", "/nonexistent/pvs.json"], "ENOENT"),
        (
            vec!["--pods-json", "-", "--pvs-json", "-"],
            "cannot both read stdin",
        ),
        (
            vec!["--mountinfo", bad.to_str().unwrap()],
            "garbled mount table",
        ),
    ] {
        let out = e2e::run(
            BIN,
            [&["--kubelet-root", root, "--node", NODE][..], &args].concat(),
        );
        out.assert_status(NAME, 3);
        assert!(out.first_line().contains(want), "{args:?}: {out:?}");
    }
    let out = e2e::run(BIN, ["--kubelet-root", "/nonexistent/kubelet"]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("--kubelet-root /nonexistent/kubelet"),
        "{out:?}"
    );
    let out = e2e::run(BIN, ["--probe-timeout", "0"]);
    out.assert_status(NAME, 3);
    // No CSI mounts at all: OK, and it says where it looked.
    let out = e2e::run(BIN, ["--kubelet-root", root]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains(&format!("no CSI mounts under {root}")),
        "{out:?}"
    );
}

fn api_pod(ns: &str, name: &str, node: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns},
        "spec":{"nodeName":node,"containers":[{"name":"c","image":"x"}]},
        "status":{"phase":"Running"}})
}

fn api_pv(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":name},
        "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
            "csi":{"driver":DRIVER,"volumeHandle":name}},
        "status":{"phase":"Bound"}})
}

fn api_va(pv: &str, node: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment",
        "metadata":{"name":format!("csi-{pv}")},
        "spec":{"attacher":DRIVER,"nodeName":node,"source":{"persistentVolumeName":pv}},
        "status":{"attached":true}})
}

/// The incident through the real API: the PV deleted, the pod gone, its mount pinning the
/// staging mount; a healthy volume beside it. Then the API refusing, and no credentials at all.
#[test]
fn api_path_finds_the_incident_and_its_failures_are_not_a_silent_ok() {
    let Some(e) = env(
        "api_path_finds_the_incident_and_its_failures_are_not_a_silent_ok",
        &[],
    ) else {
        return;
    };
    let cp = ControlPlane::with_rbac();
    let ns = cp.namespace("llmsafespaces");
    // PV names are cluster-wide: this test's own.
    let pv_dead = ControlPlane::unique("pvc-81b676e6");
    let pv_live = ControlPlane::unique("pvc-live");
    let pv_x = ControlPlane::unique("pvc-x");
    cp.create_all(&[
        api_pod(&ns, "ws-live", NODE),
        api_pod(&ns, "ws-elsewhere", "node-2"),
        api_pv(&pv_live),
        api_va(&pv_live, NODE),
        api_va(&pv_x, "node-2"),
    ]);
    // The kubelet's directories are named by the pods' UIDs, which the server assigned.
    let uid = cp.get("pod", Some(&ns), "ws-live")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let dead = e.staging(&pv_dead);
    e.tmpfs(&dead);
    let gone = e
        .tree
        .pod_csi_mount("0e0e0e0e-dead-4000-8000-000000000000", &pv_dead, DRIVER);
    e.bind(&dead, &gone);
    let live_staging = e.staging(&pv_live);
    e.tmpfs(&live_staging);
    let live = e.tree.pod_csi_mount(&uid, &pv_live, DRIVER);
    e.bind(&live_staging, &live);

    let token = cp.token(User::Checks);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Checks));
    let args = ["--kubeconfig", s(&kc), "-vv"];
    let out = e.run(&args);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("csi_mounts"), Some(4.0));
    assert_eq!(out.perf("stale_mounts"), Some(2.0));
    assert_eq!(out.perf("orphaned_mounts"), Some(1.0));
    assert!(
        out.first_line()
            .contains("2 of 4 CSI mounts stale: 1 orphaned pod mount, 1 staging of deleted PV"),
        "{out:?}"
    );
    assert!(finding(&out, "CRITICAL", "orphaned pod mount").contains(s(&gone)));
    assert!(finding(&out, "CRITICAL", "stale staging mount")
        .contains(&format!("PV {pv_dead} no longer exists")));
    assert!(
        out.stdout
            .contains(&format!("pod {ns}/ws-live (uid {uid})")),
        "{out:?}"
    );
    assert!(
        !out.stdout.contains(&token),
        "a secret in the output: {out:?}"
    );
    // Only this node's pods were asked for (the server's audit log).
    let want = format!("spec.nodeName={NODE}");
    let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";
    assert!(
        cp.requests(sa, "/api/v1/pods")
            .iter()
            .any(|r| r.q("fieldSelector") == Some(want.as_str())),
        "{:?}",
        cp.requests(sa, "/api/v1/pods")
    );

    // The API refuses the PV list (an identity granted all but PVs, refused by the real
    // authorizer): the local part alone is all healthy, which must not read OK.
    let user = cp.user_with_rules(
        &serde_json::json!([{"apiGroups":[""],"resources":["pods","nodes"],"verbs":["list","get"]},
            {"apiGroups":["storage.k8s.io"],"resources":["volumeattachments"],"verbs":["list"]}]),
        &["list", "pods", "-A"],
    );
    let kc2 = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user));
    let out = e.run(&["--kubeconfig", s(&kc2), "-vv"]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains("API cross-checks failed"),
        "{out:?}"
    );
    assert!(out.first_line().contains("403"), "{out:?}");

    // No credentials anywhere and none asked for: the local checks run, the summary says so.
    let out = e.run(&[]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("API cross-checks skipped (no Kubernetes credentials"),
        "{out:?}"
    );
}
