//! evaluate on in-memory data (parsed from JSON as the API sends it where a conversion is
//! involved): every rule has a test.

use super::*;
use kube::time::{format_rfc3339, parse_rfc3339};
use kube::Time;
use plugin::Status;
use serde_json::json;
use std::time::Duration;

const PV: &str = "pvc-81b676e6-4f0c-4c4e-9d55-2f4a1d0b7c11";

fn now() -> Time {
    parse_rfc3339("2026-07-25T20:30:00Z").unwrap()
}

fn ago(s: i64) -> String {
    format_rfc3339(now() - s)
}

fn va(name: &str, node: &str, attached: bool, created_ago: i64) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "creationTimestamp": ago(created_ago)},
        "spec": {"attacher": "driver.longhorn.io", "nodeName": node,
                 "source": {"persistentVolumeName": PV}},
        "status": {"attached": attached}
    })
}

fn att(v: serde_json::Value) -> Attachment {
    serde_json::from_value::<kube::VolumeAttachment>(v)
        .unwrap()
        .into()
}

fn node(name: &str, ready: &str, since_ago: i64) -> (String, NodeState) {
    let n: kube::Node = serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": ago(86400)},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastTransitionTime": ago(since_ago)}]}
    }))
    .unwrap();
    (name.to_string(), NodeState::from(&n))
}

fn pod(name: &str, node: &str, phase: &str) -> PodUse {
    let p: kube::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "media", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "config"}}]},
        "status": {"phase": phase}
    }))
    .unwrap();
    PodUse::of(&p).unwrap()
}

fn data(atts: Vec<serde_json::Value>) -> Data {
    Data {
        attachments: atts.into_iter().map(att).collect(),
        nodes: [
            node("worker-04", "True", 86400),
            node("worker-05", "True", 86400),
        ]
        .into_iter()
        .collect(),
        claims: [(PV.to_string(), "media/config".to_string())]
            .into_iter()
            .collect(),
        pods: vec![pod("radarr-0", "worker-04", "Running")],
        multi_attach: Vec::new(),
        node: None,
    }
}

fn policy() -> Policy {
    Policy {
        stuck_after: Duration::from_secs(300),
        warning: None,
        critical: None,
    }
}

fn signals(r: &Report) -> Vec<(&'static str, Status)> {
    r.findings.iter().map(|f| (f.signal, f.status)).collect()
}

fn perf(r: &Report, label: &str) -> f64 {
    r.perfdata
        .iter()
        .find(|p| p.label == label)
        .unwrap_or_else(|| panic!("no {label}"))
        .value
}

#[test]
fn a_healthy_attachment_is_ok_and_named_by_its_claim_and_pods() {
    let d = data(vec![va("csi-aaa", "worker-04", true, 3600)]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(signals(&r), vec![("attachment_ok", Status::Ok)]);
    assert_eq!(
        r.findings[0].text,
        format!("PVC media/config ({PV}): VolumeAttachment csi-aaa attached to node worker-04 (Ready); used by pod media/radarr-0 (Running on worker-04)")
    );
    assert!(
        r.summary
            .starts_with("1 VolumeAttachment cluster-wide (1 attached)"),
        "{}",
        r.summary
    );
    let s = &r.findings[0].subject;
    assert_eq!(
        (
            s.node.as_deref(),
            s.pv.as_deref(),
            s.namespace.as_deref(),
            s.pvc.as_deref(),
            s.driver.as_deref()
        ),
        (
            Some("worker-04"),
            Some(PV),
            Some("media"),
            Some("config"),
            Some("driver.longhorn.io")
        )
    );
    assert_eq!(perf(&r, "attachments"), 1.0);
}

#[test]
fn no_attachment_is_ok_and_says_zero() {
    let d = data(vec![]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary.starts_with("0 VolumeAttachments cluster-wide"),
        "{}",
        r.summary
    );
    let d = Data {
        node: Some("worker-05".into()),
        ..data(vec![va("csi-aaa", "worker-04", true, 3600)])
    };
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary
            .starts_with("0 VolumeAttachments on node worker-05"),
        "{}",
        r.summary
    );
}

#[test]
fn a_node_name_that_is_no_node_is_unknown() {
    let d = Data {
        node: Some("worker-9".into()),
        ..data(vec![va("csi-aaa", "worker-04", true, 3600)])
    };
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Unknown);
    assert!(r.summary.contains("no node 'worker-9'"), "{}", r.summary);
    assert!(r.summary.contains("worker-04, worker-05"), "{}", r.summary);
}

#[test]
fn attached_to_a_gone_node_is_critical() {
    let d = data(vec![va("csi-aaa", "worker-09", true, 3600)]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        signals(&r),
        vec![("attachment_node_gone", Status::Critical)]
    );
    let f = &r.findings[0];
    assert!(
        f.text
            .contains("still attached to node worker-09, which no longer exists"),
        "{}",
        f.text
    );
    let next = f.next.as_deref().unwrap();
    assert!(
        next.contains("`kubectl describe volumeattachment csi-aaa`"),
        "{next}"
    );
    assert!(
        next.contains("`kubectl delete volumeattachment csi-aaa`"),
        "{next}"
    );
    assert_eq!(perf(&r, "node_gone"), 1.0);
    // --node of a gone node that an attachment names is no unknown name.
    let d = Data {
        node: Some("worker-09".into()),
        ..d
    };
    assert_eq!(evaluate(&d, &policy(), now()).status, Status::Critical);
}

#[test]
fn not_ready_past_stuck_after_is_critical_and_within_is_ok() {
    let mut d = data(vec![va("csi-aaa", "worker-04", true, 86400)]);
    d.nodes.extend([node("worker-04", "Unknown", 600)]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(
        signals(&r),
        vec![("attachment_node_not_ready", Status::Critical)]
    );
    let f = &r.findings[0];
    assert!(
        f.text.contains("attached to node worker-04, which is NotReady (Ready=Unknown NodeStatusUnknown: Kubelet stopped posting node status.) for 10m"),
        "{}",
        f.text
    );
    assert!(f.next.as_deref().unwrap().contains(
        "`kubectl taint nodes worker-04 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`"
    ));
    d.nodes.extend([node("worker-04", "False", 60)]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.findings[0].text.contains("within --stuck-after 5m"),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn attach_pending_warns_past_stuck_after_and_is_critical_past_c() {
    let mut v = va("csi-bbb", "worker-05", false, 900);
    v["status"]["attachError"] = json!({"time": ago(800), "message": "rpc error: code = DeadlineExceeded desc = context deadline exceeded"});
    let d = data(vec![v]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(signals(&r), vec![("attach_pending", Status::Warning)]);
    let f = &r.findings[0];
    assert_eq!(
        f.text,
        format!("PVC media/config ({PV}): VolumeAttachment csi-bbb: attach to node worker-05 pending for 15m, attachError: rpc error: code = DeadlineExceeded desc = context deadline exceeded; used by pod media/radarr-0 (Running on worker-04) (past --stuck-after 5m)")
    );
    assert!(f
        .next
        .as_deref()
        .unwrap()
        .contains("`kubectl get csinode worker-05 -o yaml`"));
    assert_eq!(perf(&r, "oldest_pending"), 900.0);
    let c = Policy {
        critical: Some(plugin::args::duration_range("10m").unwrap()),
        ..policy()
    };
    let r = evaluate(&d, &c, now());
    assert_eq!(signals(&r), vec![("attach_pending", Status::Critical)]);
    assert!(
        r.findings[0].text.ends_with("(past -c 10m)"),
        "{}",
        r.findings[0].text
    );
    // Younger than --stuck-after: OK, saying so.
    let d = data(vec![va("csi-bbb", "worker-05", false, 60)]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(signals(&r), vec![("attachment_ok", Status::Ok)]);
    assert!(
        r.findings[0].text.contains("no attachError yet"),
        "{}",
        r.findings[0].text
    );
    // -w replaces --stuck-after for the pending ones.
    let w = Policy {
        warning: Some(plugin::args::duration_range("30s").unwrap()),
        ..policy()
    };
    assert_eq!(evaluate(&d, &w, now()).status, Status::Warning);
}

#[test]
fn detach_pending_names_the_detach_error() {
    let mut v = va("csi-ccc", "worker-04", true, 86400);
    v["metadata"]["deletionTimestamp"] = json!(ago(1200));
    v["status"]["detachError"] =
        json!({"time": ago(60), "message": "volume is still published on the node"});
    let d = data(vec![v]);
    let r = evaluate(&d, &policy(), now());
    assert_eq!(signals(&r), vec![("detach_pending", Status::Warning)]);
    let f = &r.findings[0];
    assert!(
        f.text.contains("detach from node worker-04 pending for 20m, detachError: volume is still published on the node"),
        "{}",
        f.text
    );
    assert_eq!(perf(&r, "detach_pending"), 1.0);
}

#[test]
fn multi_attach_messages_parse_as_the_controller_writes_them() {
    assert_eq!(
        parse_multi_attach(&format!("Multi-Attach error for volume \"{PV}\" Volume is already used by pod(s) radarr-0, radarr-1")),
        Some((PV.to_string(), vec!["radarr-0".into(), "radarr-1".into()], 0))
    );
    assert_eq!(
        parse_multi_attach(&format!("Multi-Attach error for volume \"{PV}\" Volume is already used by pod(s) radarr-0 and 2 pod(s) in different namespaces")),
        Some((PV.to_string(), vec!["radarr-0".into()], 2))
    );
    assert_eq!(
        parse_multi_attach(&format!("Multi-Attach error for volume \"{PV}\" Volume is already used by 3 pod(s) in different namespaces")),
        Some((PV.to_string(), vec![], 3))
    );
    assert_eq!(
        parse_multi_attach(&format!("Multi-Attach error for volume \"{PV}\" Volume is already exclusively attached to one node and can't be attached to another")),
        Some((PV.to_string(), vec![], 0))
    );
    assert_eq!(
        parse_multi_attach("AttachVolume.Attach failed for volume \"x\" : timed out"),
        None
    );
}

fn multi(d: &mut Data, waiting_phase: &str) {
    d.pods.push(pod("radarr-1", "worker-05", waiting_phase));
    let e: kube::Event = serde_json::from_value(json!({
        "metadata": {"name": "radarr-1.17a", "namespace": "media"},
        "involvedObject": {"kind": "Pod", "namespace": "media", "name": "radarr-1", "uid": "uid-radarr-1"},
        "reason": "FailedAttachVolume", "type": "Warning",
        "message": format!("Multi-Attach error for volume \"{PV}\" Volume is already used by pod(s) radarr-0"),
        "lastTimestamp": ago(120)
    }))
    .unwrap();
    d.multi_attach.push(MultiAttach::of(&e).unwrap());
}

#[test]
fn multi_attach_names_the_waiting_pod_and_the_node_and_pods_that_hold_it() {
    let mut d = data(vec![va("csi-aaa", "worker-04", true, 3600)]);
    multi(&mut d, "Pending");
    let r = evaluate(&d, &policy(), now());
    assert_eq!(r.status, Status::Critical);
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "multi_attach")
        .unwrap();
    assert_eq!(
        f.text,
        format!("pod media/radarr-1 waits on node worker-05: Multi-Attach error for PVC media/config ({PV}), held on node worker-04 by pod media/radarr-0 (event 2m ago)")
    );
    assert_eq!(f.subject.pod.as_deref(), Some("radarr-1"));
    assert_eq!(f.subject.node.as_deref(), Some("worker-05"));
    let next = f.next.as_deref().unwrap();
    for c in [
        "`kubectl -n media describe pod radarr-1`",
        "`kubectl describe volumeattachment csi-aaa`",
        "`kubectl -n media get pod radarr-0 -o wide`",
    ] {
        assert!(next.contains(c), "{next}");
    }
    assert_eq!(perf(&r, "multi_attach"), 1.0);
    // Both nodes see it with --node; a third does not.
    for (n, st) in [
        ("worker-04", Status::Critical),
        ("worker-05", Status::Critical),
    ] {
        let d = Data {
            node: Some(n.into()),
            ..d.clone()
        };
        assert_eq!(evaluate(&d, &policy(), now()).status, st, "{n}");
    }
    let mut d3 = Data {
        node: Some("worker-06".into()),
        ..d.clone()
    };
    d3.nodes.extend([node("worker-06", "True", 60)]);
    assert_eq!(evaluate(&d3, &policy(), now()).status, Status::Ok);
}

#[test]
fn a_multi_attach_error_no_pod_waits_on_any_more_is_over() {
    for phase in ["Running", "Succeeded"] {
        let mut d = data(vec![va("csi-aaa", "worker-04", true, 3600)]);
        multi(&mut d, phase);
        assert_eq!(evaluate(&d, &policy(), now()).status, Status::Ok, "{phase}");
    }
    // The pod is gone, or another pod of the same name (a new UID) took its place.
    let mut d = data(vec![va("csi-aaa", "worker-04", true, 3600)]);
    multi(&mut d, "Pending");
    d.pods.last_mut().unwrap().uid = "uid-new".into();
    assert_eq!(evaluate(&d, &policy(), now()).status, Status::Ok);
    d.pods.pop();
    assert_eq!(evaluate(&d, &policy(), now()).status, Status::Ok);
}
