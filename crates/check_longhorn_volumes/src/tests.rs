//! evaluate on in-memory Longhorn objects (parsed from JSON as the API sends them): every rule
//! has a test.

use super::*;
use kube::time::{format_rfc3339, parse_rfc3339};
use kube::Time;
use plugin::Status;
use serde_json::json;
use std::time::Duration;

const VOL: &str = "pvc-81b676e6-4f0c-4c4e-9d55-2f4a1d0b7c11";

fn now() -> Time {
    parse_rfc3339("2026-07-25T20:30:00Z").unwrap()
}

fn ago(s: i64) -> String {
    format_rfc3339(now() - s)
}

fn volume(state: &str, robustness: &str, pod_status: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": VOL, "namespace": "longhorn-system",
            "managedFields": [{"manager":"longhorn-manager","operation":"Update","subresource":"status","time": ago(3600)}]},
        "spec": {"numberOfReplicas": 3, "nodeID": if state == "detached" { "" } else { "worker-04" }},
        "status": {"state": state, "robustness": robustness,
            "currentNodeID": if state == "attached" { "worker-04" } else { "" },
            "lastDegradedAt": if robustness == "degraded" { ago(7200) } else { String::new() },
            "kubernetesStatus": {"pvName": VOL, "namespace": "media", "pvcName": "config",
                "workloadsStatus": [{"podName":"radarr-0","podStatus":pod_status,"workloadName":"radarr","workloadType":"StatefulSet"}]},
            "conditions": [{"type":"Scheduled","status":"True"}]}
    })
}

fn replica(i: usize, node: &str, failed: bool) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("{VOL}-r-{i}"), "namespace": "longhorn-system"},
        "spec": {"volumeName": VOL, "nodeID": node, "healthyAt": ago(86400),
            "failedAt": if failed { ago(1800) } else { String::new() }},
        "status": {"currentState": if failed { "stopped" } else { "running" }}
    })
}

fn engine(modes: &[(usize, &str)], ro: bool) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> = modes
        .iter()
        .map(|(i, m)| (format!("{VOL}-r-{i}"), json!(m)))
        .collect();
    json!({
        "metadata": {"name": format!("{VOL}-e-0"), "namespace": "longhorn-system"},
        "spec": {"volumeName": VOL, "nodeID": "worker-04"},
        "status": {"currentState": "running", "replicaModeMap": m,
            "conditions": [{"type":"FilesystemReadOnly","status": if ro {"True"} else {"False"},
                "reason": if ro {"DetectedReadOnly"} else {""}, "message": if ro {"The volume is read-only"} else {""}}]}
    })
}

fn data(v: serde_json::Value, rs: Vec<serde_json::Value>, es: Vec<serde_json::Value>) -> Data {
    let p = |x: serde_json::Value| x;
    Data {
        version: "v1beta2".into(),
        volumes: vec![serde_json::from_value::<LhVolume>(p(v)).unwrap().into()],
        replicas: rs
            .into_iter()
            .map(|r| serde_json::from_value::<LhReplica>(r).unwrap().into())
            .collect(),
        engines: es
            .into_iter()
            .map(|e| serde_json::from_value::<LhEngine>(e).unwrap().into())
            .collect(),
        scope: "cluster-wide".into(),
        total_volumes: 1,
    }
}

fn healthy_set() -> Data {
    data(
        volume("attached", "healthy", "Running"),
        vec![
            replica(0, "worker-01", false),
            replica(1, "worker-02", false),
            replica(2, "worker-04", false),
        ],
        vec![engine(&[(0, "RW"), (1, "RW"), (2, "RW")], false)],
    )
}

fn eval(d: &Data) -> plugin::Report {
    evaluate(
        d,
        &plugin::Thresholds::new(None, None),
        Duration::from_secs(300),
        now(),
    )
}

fn signals(r: &plugin::Report) -> Vec<(&'static str, Status)> {
    r.findings.iter().map(|f| (f.signal, f.status)).collect()
}

#[test]
fn a_healthy_volume_is_ok_and_named_by_its_claim() {
    let r = eval(&healthy_set());
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(signals(&r), vec![("longhorn_volume_ok", Status::Ok)]);
    let f = &r.findings[0];
    assert!(f.text.starts_with(&format!("PVC media/config ({VOL}): attached, robustness healthy on worker-04, 3/3 replicas healthy; pod media/radarr-0 Running (StatefulSet radarr)")), "{}", f.text);
    assert_eq!(f.subject.pvc.as_deref(), Some("config"));
    assert_eq!(f.subject.namespace.as_deref(), Some("media"));
    assert_eq!(f.subject.node.as_deref(), Some("worker-04"));
}

#[test]
fn faulted_is_critical() {
    let mut d = healthy_set();
    d.volumes[0].robustness = "faulted".into();
    d.volumes[0].state = "detached".into();
    d.volumes[0].node.clear();
    d.volumes[0].workloads[0].status = "Pending".into();
    let r = eval(&d);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_faulted", Status::Critical)]
    );
    assert!(r.findings[0]
        .next_line()
        .is_some_and(|l| l.starts_with("`kubectl -n longhorn-system get volumes.longhorn.io")));
}

#[test]
fn attached_without_a_healthy_replica_is_critical_and_names_the_replicas() {
    let d = data(
        volume("attached", "degraded", "Running"),
        vec![replica(0, "worker-01", true), replica(1, "worker-02", true)],
        vec![engine(&[(0, "ERR"), (1, "ERR")], false)],
    );
    let r = eval(&d);
    assert_eq!(r.status, Status::Critical);
    let s = signals(&r);
    assert!(
        s.contains(&("longhorn_no_healthy_replica", Status::Critical)),
        "{s:?}"
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "longhorn_no_healthy_replica")
        .unwrap();
    assert!(
        f.details[0].contains(&format!("replica {VOL}-r-0 on worker-01 (failed at")),
        "{:?}",
        f.details
    );
    assert!(f.details[0].contains("mode ERR"), "{:?}", f.details);
}

#[test]
fn read_only_filesystem_is_critical_with_the_engine_node_and_the_pods() {
    let mut d = healthy_set();
    d.engines =
        vec![
            serde_json::from_value::<LhEngine>(engine(&[(0, "RW"), (1, "RW"), (2, "RW")], true))
                .unwrap()
                .into(),
        ];
    let r = eval(&d);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        signals(&r),
        vec![("longhorn_filesystem_read_only", Status::Critical)]
    );
    let f = &r.findings[0];
    assert!(
        f.text
            .contains("FilesystemReadOnly DetectedReadOnly: The volume is read-only"),
        "{}",
        f.text
    );
    let next = f.next_line().unwrap();
    assert!(
        next.contains("`kubectl cordon worker-04`; `kubectl -n media delete pod radarr-0`"),
        "{next}"
    );
    assert!(!next.contains('|'));
}

#[test]
fn detached_while_its_pod_runs_is_critical_after_stuck_after_only() {
    let d = data(
        volume("detached", "unknown", "Running"),
        vec![replica(0, "worker-01", false)],
        vec![],
    );
    let r = eval(&d);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_stuck", Status::Critical)]
    );
    assert!(
        r.findings[0]
            .text
            .contains("detached while media/radarr-0 runs (unchanged 1h"),
        "{}",
        r.findings[0].text
    );
    // The status was written 1h ago: with --stuck-after 2h it is not yet stuck.
    let r = evaluate(
        &d,
        &plugin::Thresholds::new(None, None),
        Duration::from_secs(7200),
        now(),
    );
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // A detached volume with no running pod is not stuck (robustness unknown is normal then).
    let d = data(
        volume("detached", "unknown", "Pending"),
        vec![replica(0, "worker-01", false)],
        vec![],
    );
    assert_eq!(eval(&d).status, Status::Ok);
}

#[test]
fn attaching_too_long_is_critical() {
    let d = data(
        volume("attaching", "unknown", "Running"),
        vec![replica(0, "worker-01", false)],
        vec![],
    );
    let r = eval(&d);
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_stuck", Status::Critical)]
    );
}

#[test]
fn degraded_warns_with_how_long_and_how_many() {
    let d = data(
        volume("attached", "degraded", "Running"),
        vec![
            replica(0, "worker-01", false),
            replica(1, "worker-02", false),
            replica(2, "worker-03", true),
        ],
        vec![engine(&[(0, "RW"), (1, "RW"), (2, "ERR")], false)],
    );
    let r = eval(&d);
    assert_eq!(r.status, Status::Warning);
    let s = signals(&r);
    assert!(
        s.contains(&("longhorn_volume_degraded", Status::Warning)),
        "{s:?}"
    );
    assert!(
        s.contains(&("longhorn_replica_failed", Status::Warning)),
        "{s:?}"
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "longhorn_volume_degraded")
        .unwrap();
    assert!(
        f.text.ends_with("degraded for 2h, 2 of 3 replicas healthy"),
        "{}",
        f.text
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "longhorn_replica_failed")
        .unwrap();
    assert_eq!(f.subject.node.as_deref(), Some("worker-03"));
    assert!(
        f.text.contains(&format!("replica {VOL}-r-2 on worker-03")),
        "{}",
        f.text
    );
}

#[test]
fn a_failed_replica_being_rebuilt_is_only_degraded() {
    let d = data(
        volume("attached", "degraded", "Running"),
        vec![
            replica(0, "worker-01", false),
            replica(1, "worker-02", false),
            replica(2, "worker-03", true),
        ],
        vec![engine(&[(0, "RW"), (1, "RW"), (3, "WO")], false)],
    );
    let r = eval(&d);
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_degraded", Status::Warning)]
    );
    assert!(
        r.findings[0].text.ends_with(", rebuilding"),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn unknown_robustness_while_attached_warns() {
    let mut d = healthy_set();
    d.volumes[0].robustness = "unknown".into();
    assert_eq!(
        signals(&eval(&d)),
        vec![("longhorn_robustness_unknown", Status::Warning)]
    );
}

#[test]
fn no_volumes_is_unknown_and_node_narrows() {
    let mut d = healthy_set();
    d.only_node("worker-02");
    assert_eq!(d.volumes.len(), 1, "a replica on worker-02");
    let mut d = healthy_set();
    d.only_node("worker-09");
    let r = eval(&d);
    assert_eq!(r.status, Status::Unknown);
    assert!(r.summary.contains("the cluster's only Longhorn volume is not attached to or with a replica on node worker-09"), "{}", r.summary);
    let mut d = healthy_set();
    d.volumes.clear();
    d.total_volumes = 0;
    assert_eq!(eval(&d).status, Status::Unknown);
}

#[test]
fn every_non_ok_finding_has_a_next_line_without_a_pipe() {
    for (state, rob, pod, failed, ro) in [
        ("attached", "faulted", "Running", true, false),
        ("attached", "degraded", "Running", true, true),
        ("detaching", "unknown", "Running", false, false),
        ("attached", "unknown", "Running", false, false),
    ] {
        let d = data(
            volume(state, rob, pod),
            vec![
                replica(0, "worker-01", failed),
                replica(1, "worker-02", false),
            ],
            vec![engine(
                &[(0, if failed { "ERR" } else { "RW" }), (1, "RW")],
                ro,
            )],
        );
        let r = eval(&d);
        assert_ne!(r.status, Status::Ok);
        for f in r.findings.iter().filter(|f| f.status != Status::Ok) {
            let next = f.next_line().unwrap_or_else(|| panic!("{f:?}"));
            assert!(!next.contains('|'), "{next}");
        }
    }
}

#[test]
fn options_parse() {
    let o = Opts::try_parse_from([
        "check_longhorn_volumes",
        "--node",
        "worker-04",
        "--stuck-after",
        "10m",
    ])
    .unwrap();
    assert_eq!(o.node.as_deref(), Some("worker-04"));
    assert_eq!(o.stuck_after, Duration::from_secs(600));
    // The memory of the volumes: a node's run keeps its own, the cluster-wide run the usual file.
    let id = o.memory_id();
    assert!(
        id.starts_with("longhorn_volumes.") && id.len() == 33,
        "{id}"
    );
    let all = Opts::try_parse_from(["check_longhorn_volumes"]).unwrap();
    assert_eq!(all.memory_id(), "longhorn_volumes");
}

#[test]
fn healthy_replica_ranges_escalate() {
    let d = data(
        volume("attached", "degraded", "Running"),
        vec![
            replica(0, "worker-01", false),
            replica(1, "worker-02", true),
            replica(2, "worker-03", true),
        ],
        vec![engine(&[(0, "RW"), (1, "ERR"), (2, "ERR")], false)],
    );
    let o = Opts::try_parse_from(["check_longhorn_volumes", "-c", "2:"]).unwrap();
    let r = evaluate(
        &d,
        &o.thresholds.thresholds(),
        Duration::from_secs(300),
        now(),
    );
    assert_eq!(r.status, Status::Critical, "{r:?}");
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "longhorn_volume_degraded")
        .unwrap();
    assert_eq!(f.status, Status::Critical);
    assert!(
        f.text.contains("1 of 3 replicas healthy (outside -c 2:)"),
        "{}",
        f.text
    );
    // Longhorn healthy, but -w 4: asks for more than the volume has.
    let o = Opts::try_parse_from(["check_longhorn_volumes", "-w", "4:"]).unwrap();
    let r = evaluate(
        &healthy_set(),
        &o.thresholds.thresholds(),
        Duration::from_secs(300),
        now(),
    );
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_degraded", Status::Warning)]
    );
    assert!(
        r.findings[0]
            .text
            .contains("short of replicas, 3 of 3 replicas healthy (outside -w 4:)"),
        "{}",
        r.findings[0].text
    );
}

/// Issue 26, count nouns: one healthy volume with one replica and one engine is said so.
#[test]
fn one_volume_replica_and_engine_are_said_in_the_singular() {
    let d = data(
        volume("attached", "healthy", "Running"),
        vec![replica(0, "worker-04", false)],
        vec![engine(&[(0, "RW")], false)],
    );
    let r = eval(&d);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.summary.starts_with("1 Longhorn volume healthy ")
            && r.summary.ends_with(" (1 replica, 1 engine)"),
        "{}",
        r.summary
    );
    let r = eval(&healthy_set());
    assert!(
        r.summary.starts_with("1 Longhorn volume healthy ")
            && r.summary.ends_with(" (3 replicas, 1 engine)"),
        "{}",
        r.summary
    );
}

/// Issue 26, count nouns: a volume of one replica short of a range is "1 of 1 replica healthy".
#[test]
fn one_wanted_replica_is_said_in_the_singular() {
    let mut v = volume("attached", "healthy", "Running");
    v["spec"]["numberOfReplicas"] = json!(1);
    let d = data(
        v,
        vec![replica(0, "worker-04", false)],
        vec![engine(&[(0, "RW")], false)],
    );
    let o = Opts::try_parse_from(["check_longhorn_volumes", "-w", "2:"]).unwrap();
    let r = evaluate(
        &d,
        &o.thresholds.thresholds(),
        Duration::from_secs(300),
        now(),
    );
    assert_eq!(
        signals(&r),
        vec![("longhorn_volume_degraded", Status::Warning)]
    );
    assert!(
        r.findings[0]
            .text
            .contains("short of replicas, 1 of 1 replica healthy (outside -w 2:)"),
        "{}",
        r.findings[0].text
    );
}

/// The memory of the volumes (--state-dir) counts a degraded volume by its PV; a second spell
/// is said on its finding.
#[test]
fn a_volume_degraded_again_says_how_often() {
    use node::history::{annotate, seen_in, Kind, Memory, Remembered};
    let d = data(
        volume("attached", "degraded", "Running"),
        vec![
            replica(0, "worker-01", false),
            replica(1, "worker-02", false),
            replica(2, "worker-03", true),
        ],
        vec![engine(&[(0, "RW"), (1, "RW"), (2, "ERR")], false)],
    );
    let mut r = eval(&d);
    let seen = seen_in(&r, crate::MEMORY);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].1, Kind::Degraded);
    let day = 86_400_000;
    let t0 = 20_773 * day; // 2026-11-16
    let mut m = Memory::default();
    m.record(t0, &seen);
    m.record(t0 + 1, &[]);
    m.record(t0 + 3 * day, &seen);
    let rem = Remembered {
        memory: m,
        now: t0 + 3 * day,
        ..Default::default()
    };
    annotate(&mut r, crate::MEMORY, &rem);
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "longhorn_volume_degraded")
        .unwrap();
    assert!(
        f.text
            .ends_with("2 of 3 replicas healthy; degraded 2 times in 30 days (last 2026-11-16)"),
        "{}",
        f.text
    );
}
