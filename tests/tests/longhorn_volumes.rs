//! check_longhorn_volumes against the real kube-apiserver with Longhorn's published CRDs
//! (v1.12.1, tests/fixtures/longhorn/crds.yaml) applied: volumes, replicas and engines created
//! through the API with their statuses through the status subresource, as longhorn-manager writes
//! them; the check runs as the identity deploy/rbac.yaml grants to. Each test has nodes of its
//! own and runs with `--node`, so the tests' volumes on the shared plane do not mix.

use e2e::apiserver::fixtures::ago;
use e2e::control_plane::{ControlPlane, User};
use e2e::longhorn::{self, engine, replica, volume};
use e2e::{Cmd, Output};
use serde_json::Value;
use std::sync::OnceLock;

const NAME: &str = "LONGHORN_VOLUMES";
const BIN: &str = "check_longhorn_volumes";

fn cp() -> &'static ControlPlane {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let cp = ControlPlane::with_rbac();
    INSTALLED.get_or_init(|| longhorn::install(cp));
    cp
}

fn check_as(cp: &ControlPlane, user: User, args: &[&str]) -> Output {
    Cmd::check(BIN)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(cp.kubeconfig(user))
        .args(args)
        .run()
}

/// A scene: the volume `vol` (attached to or wanted on `node`), its replicas and engine.
struct Scene {
    node: String,
    vol: String,
    others: [String; 2],
}

fn scene() -> Scene {
    Scene {
        node: ControlPlane::unique("worker-04"),
        vol: ControlPlane::unique("pvc-81b676e6"),
        others: [
            ControlPlane::unique("worker-01"),
            ControlPlane::unique("worker-02"),
        ],
    }
}

fn create(cp: &ControlPlane, objs: &[Value]) {
    for o in objs {
        cp.create(o);
    }
}

fn healthy(s: &Scene, state: &str, robustness: &str, pod_status: &str) -> Vec<Value> {
    vec![
        volume(
            &s.vol, state, robustness, &s.node, "media", "config", "radarr-0", pod_status,
        ),
        replica(&s.vol, 0, &s.others[0], false),
        replica(&s.vol, 1, &s.others[1], false),
        replica(&s.vol, 2, &s.node, false),
    ]
}

#[test]
fn a_healthy_volume_is_ok_and_named_by_its_claim() {
    let cp = cp();
    let s = scene();
    let mut objs = healthy(&s, "attached", "healthy", "Running");
    objs.push(engine(
        &s.vol,
        &s.node,
        &[(0, "RW"), (1, "RW"), (2, "RW")],
        false,
    ));
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node, "-v"]);
    out.assert_status(NAME, 0);
    assert!(
        out.stdout.contains(&format!(
            "[OK] PVC media/config ({}): attached, robustness healthy on {}, 3/3 replicas healthy; pod media/radarr-0 Running (StatefulSet radarr)",
            s.vol, s.node
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("volumes"), Some(1.0));
    // A replica's node alone selects the volume too.
    let out = check_as(cp, User::Checks, &["--node", &s.others[1]]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("volumes"), Some(1.0));
}

#[test]
fn faulted_is_critical() {
    let cp = cp();
    let s = scene();
    let objs = vec![
        volume(
            &s.vol, "detached", "faulted", &s.node, "media", "config", "radarr-0", "Pending",
        ),
        replica(&s.vol, 0, &s.node, true),
        replica(&s.vol, 1, &s.others[0], true),
    ];
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} CRITICAL - PVC media/config ({}): volume_faulted",
            s.vol
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "next: `kubectl -n longhorn-system get volumes.longhorn.io {} -o yaml`",
            s.vol
        )),
        "{out:?}"
    );
    let out = check_as(cp, User::Checks, &["--node", &s.node, "--format", "json"]);
    assert_eq!(
        out.signals(),
        vec![("longhorn_volume_faulted".into(), "CRITICAL".into())]
    );
}

#[test]
fn attached_with_no_healthy_replica_is_critical_naming_the_failed_replicas() {
    let cp = cp();
    let s = scene();
    let objs = vec![
        volume(
            &s.vol, "attached", "degraded", &s.node, "media", "config", "radarr-0", "Running",
        ),
        replica(&s.vol, 0, &s.others[0], true),
        replica(&s.vol, 1, &s.others[1], true),
        engine(&s.vol, &s.node, &[(0, "ERR"), (1, "ERR")], false),
    ];
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("0/3 replicas healthy; pod media/radarr-0 Running (StatefulSet radarr): attached with no healthy replica"), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "replica {}-r-0 on {} (failed at 2026-01-02T00:00:00Z, mode ERR, stopped)",
            s.vol, s.others[0]
        )),
        "{out:?}"
    );
    let out = check_as(cp, User::Checks, &["--node", &s.node, "--format", "json"]);
    let sig = out.signals();
    assert!(
        sig.contains(&("longhorn_no_healthy_replica".into(), "CRITICAL".into())),
        "{sig:?}"
    );
    assert!(
        sig.contains(&("longhorn_volume_degraded".into(), "WARNING".into())),
        "{sig:?}"
    );
}

#[test]
fn read_only_filesystem_is_critical_with_cordon_and_delete_on_the_right_node() {
    let cp = cp();
    let s = scene();
    let mut objs = healthy(&s, "attached", "healthy", "Running");
    objs.push(engine(
        &s.vol,
        &s.node,
        &[(0, "RW"), (1, "RW"), (2, "RW")],
        true,
    ));
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node]);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains("FilesystemReadOnly DetectedReadOnly: The volume is in read-only mode"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "`kubectl cordon {}`; `kubectl -n media delete pod radarr-0`",
            s.node
        )),
        "{out:?}"
    );
    let out = check_as(cp, User::Checks, &["--node", &s.node, "--format", "json"]);
    assert_eq!(
        out.signals(),
        vec![("longhorn_filesystem_read_only".into(), "CRITICAL".into())]
    );
    let v = out.json();
    assert_eq!(v["findings"][0]["subject"]["pvc"], "config", "{v}");
    assert_eq!(
        v["findings"][0]["subject"]["node"].as_str(),
        Some(s.node.as_str())
    );
}

#[test]
fn detached_while_the_pod_runs_is_critical_past_stuck_after() {
    let cp = cp();
    let s = scene();
    create(cp, &healthy(&s, "attaching", "unknown", "Running"));
    // Just written: within the default --stuck-after 5m.
    let out = check_as(cp, User::Checks, &["--node", &s.node, "-v"]);
    out.assert_status(NAME, 0);
    assert!(
        out.stdout.contains("attaching while media/radarr-0 runs"),
        "{out:?}"
    );
    let out = check_as(
        cp,
        User::Checks,
        &["--node", &s.node, "--stuck-after", "0s"],
    );
    out.assert_status(NAME, 2);
    assert!(out.first_line().contains("volume_stuck"), "{out:?}");
    assert!(
        out.stdout
            .contains("kubectl -n media describe pod radarr-0"),
        "{out:?}"
    );
    let s = scene();
    create(cp, &healthy(&s, "detached", "unknown", "Running"));
    let out = check_as(
        cp,
        User::Checks,
        &[
            "--node",
            &s.others[0],
            "--stuck-after",
            "0s",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        out.signals(),
        vec![("longhorn_volume_stuck".into(), "CRITICAL".into())]
    );
}

#[test]
fn degraded_warns_with_the_failed_replica_and_its_node() {
    let cp = cp();
    let s = scene();
    let mut objs = vec![
        volume(
            &s.vol, "attached", "degraded", &s.node, "media", "config", "radarr-0", "Running",
        ),
        replica(&s.vol, 0, &s.node, false),
        replica(&s.vol, 1, &s.others[0], false),
        replica(&s.vol, 2, &s.others[1], true),
        engine(&s.vol, &s.node, &[(0, "RW"), (1, "RW"), (2, "ERR")], false),
    ];
    objs[0]["status"]["lastDegradedAt"] = ago(7200).into();
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node]);
    out.assert_status(NAME, 1);
    assert!(
        out.stdout
            .contains("degraded for 2h, 2 of 3 replicas healthy"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "replica {}-r-2 on {} (failed at",
            s.vol, s.others[1]
        )),
        "{out:?}"
    );
    let out = check_as(cp, User::Checks, &["--node", &s.node, "--format", "json"]);
    let v = out.json();
    let failed = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["signal"] == "longhorn_replica_failed")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(
        failed["subject"]["node"].as_str(),
        Some(s.others[1].as_str())
    );
    assert_eq!(
        out.signals(),
        vec![
            ("longhorn_replica_failed".into(), "WARNING".into()),
            ("longhorn_volume_degraded".into(), "WARNING".into())
        ]
    );
    // Prometheus: one finding series per volume and signal.
    let out = check_as(
        cp,
        User::Checks,
        &["--node", &s.node, "--format", "prometheus"],
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("k8s_storage_check_finding{")
                && l.contains("signal=\"longhorn_volume_degraded\"")
                && l.contains(&format!("pv=\"{}\"", s.vol))),
        "{out:?}"
    );
}

#[test]
fn robustness_unknown_while_attached_warns() {
    let cp = cp();
    let s = scene();
    let mut objs = healthy(&s, "attached", "unknown", "Running");
    objs.push(engine(
        &s.vol,
        &s.node,
        &[(0, "RW"), (1, "RW"), (2, "RW")],
        false,
    ));
    create(cp, &objs);
    let out = check_as(cp, User::Checks, &["--node", &s.node, "--format", "json"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.signals(),
        vec![("longhorn_robustness_unknown".into(), "WARNING".into())]
    );
}

#[test]
fn no_volume_on_the_node_and_no_permission_are_unknown() {
    let cp = cp();
    let out = check_as(
        cp,
        User::Checks,
        &["--node", &ControlPlane::unique("worker-99")],
    );
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("Longhorn volumes is attached to or with a replica on node worker-99"),
        "{out:?}"
    );
    let out = check_as(cp, User::Nobody, &[]);
    out.assert_status(NAME, 3);
    assert!(
        out.stdout.contains("HTTP 403")
            && out.stdout.contains(
                "{apiGroups: [\"longhorn.io\"], resources: [\"volumes\"], verbs: [\"list\"]}"
            ),
        "{out:?}"
    );
}

#[test]
fn without_the_crds_it_is_unknown() {
    // Its own control plane: the shared one has the CRDs.
    let cp = ControlPlane::start();
    let out = check_as(&cp, User::Admin, &[]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains("Longhorn is not installed")
            && out.first_line().contains("volumes.longhorn.io"),
        "{out:?}"
    );
}
