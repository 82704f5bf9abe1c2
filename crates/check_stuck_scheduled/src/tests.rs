//! evaluate on in-memory pods: every rule has a test that fails when the rule breaks.

use super::*;
use kube::checks::stuck::LastEvent;
use kube::time::parse_rfc3339;
use kube::{Pod, Time};
use plugin::Status;

const NOW: &str = "2026-07-12T12:00:00Z";

fn now() -> Time {
    parse_rfc3339(NOW).unwrap()
}

fn opts(args: &[&str]) -> Opts {
    let mut v = vec!["check_stuck_scheduled"];
    v.extend_from_slice(args);
    Opts::try_parse_from(v).unwrap()
}

fn policy(args: &[&str]) -> Policy {
    opts(args).policy()
}

fn pod(json: &str) -> Pod {
    serde_json::from_str(json).unwrap()
}

/// A pending pod scheduled `mins` minutes before NOW, with the given status extras.
fn pending(name: &str, mins: i64, extra_status: &str) -> Pod {
    let t = kube::time::format_rfc3339(now() - mins * 60);
    pod(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"llmsafespaces","creationTimestamp":"{t}"}},
        "spec":{{"nodeName":"worker-04"}},
        "status":{{"phase":"Pending","conditions":[{{"type":"PodScheduled","status":"True","lastTransitionTime":"{t}"}}]{extra_status}}}}}"#
    ))
}

fn data(pods: &[Pod]) -> Data {
    Data {
        pods: pods.len(),
        found: pods.iter().filter_map(classify).collect(),
        scope: "on node worker-04".into(),
        ..Default::default()
    }
}

#[test]
fn no_status_rule_by_age() {
    let o = policy(&[]);
    for (mins, want) in [
        (4, Status::Ok),
        (6, Status::Warning),
        (11, Status::Critical),
    ] {
        let r = evaluate(&data(&[pending("ws-b70553ae", mins, "")]), &o, now());
        assert_eq!(r.status, want, "{mins} min: {r:?}");
    }
    let r = evaluate(&data(&[pending("ws-b70553ae", 11, "")]), &o, now());
    assert!(
        r.findings[0].text.contains(
            "llmsafespaces/ws-b70553ae on worker-04: scheduled 11m ago, no container status"
        ),
        "{:?}",
        r.findings
    );
    assert_eq!(r.perfdata[1].value, 1.0);
    assert_eq!(r.perfdata[2].value, 660.0);
    assert!(
        r.summary.starts_with(
            "1 of 1 pod on node worker-04 stuck after scheduling: llmsafespaces/ws-b70553ae (11m)"
        ),
        "{}",
        r.summary
    );
}

#[test]
fn creating_rule_needs_every_container_waiting() {
    let creating = r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}}],
        "initContainerStatuses":[{"name":"i","state":{"waiting":{"reason":"PodInitializing"}}}]"#;
    let p = pending("a", 30, creating);
    assert_eq!(classify(&p).unwrap().rule, Rule::Creating);
    assert_eq!(
        evaluate(&data(&[p]), &policy(&[]), now()).status,
        Status::Critical
    );
    // One container running, another still creating: not this check's business.
    let mixed = r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}},
        {"name":"b","state":{"running":{"startedAt":"2026-07-12T11:00:00Z"}}}]"#;
    assert!(classify(&pending("b", 30, mixed)).is_none());
    // Other waiting reasons (image pulls, crash loops) are other problems.
    let pull =
        r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ImagePullBackOff"}}}]"#;
    assert!(classify(&pending("c", 30, pull)).is_none());
}

/// A pod both Terminating and never started belongs to check_stuck_terminating (#21): one
/// pod, one alert.
#[test]
fn a_terminating_pod_is_left_to_check_stuck_terminating() {
    let mut p = pending("ws-b70553ae", 60, "");
    assert!(classify(&p).is_some());
    p.metadata.deletion_timestamp = Some(now() - 30);
    assert!(classify(&p).is_none());
    assert_eq!(
        evaluate(&data(&[p]), &policy(&[]), now()).status,
        Status::Ok
    );
}

#[test]
fn only_pending_and_scheduled_pods() {
    let mut p = pending("a", 60, "");
    p.status.phase = "Running".into();
    assert!(classify(&p).is_none());
    let mut p = pending("a", 60, "");
    p.status.conditions[0].status = "False".into();
    assert!(
        classify(&p).is_none(),
        "unschedulable pods are the scheduler's problem"
    );
    let mut p = pending("a", 60, "");
    p.status.conditions.clear();
    assert!(classify(&p).is_none());
}

#[test]
fn age_falls_back_to_creation_and_thresholds_apply() {
    let mut p = pending("a", 20, "");
    p.status.conditions[0].last_transition_time = None;
    let c = classify(&p).unwrap();
    assert_eq!(c.scheduled_at, Some(now() - 1200));
    // Custom thresholds.
    let o = policy(&["-w", "30m", "-c", "1h"]);
    assert_eq!(
        evaluate(&data(&[pending("a", 20, "")]), &o, now()).status,
        Status::Ok
    );
    assert_eq!(
        evaluate(&data(&[pending("a", 45, "")]), &o, now()).status,
        Status::Warning
    );
    // Clock skew: a future transition is age 0, not a huge number.
    assert_eq!(
        evaluate(&data(&[pending("a", -5, "")]), &policy(&[]), now()).status,
        Status::Ok
    );
}

#[test]
fn ok_summary_and_events_shown() {
    let o = policy(&[]);
    let r = evaluate(&data(&[pending("a", 2, "")]), &o, now());
    assert_eq!(r.status, Status::Ok);
    assert!(r.summary.contains("no pod stuck after scheduling (1 pod on node worker-04), 1 pending without containers for less than 5m"), "{}", r.summary);
    assert_eq!(
        r.perfdata.iter().map(|p| p.render()).collect::<Vec<_>>(),
        [
            "pods=1;;;0",
            "stuck_pods=0;;;0",
            "oldest_stuck=0s;300;600;0"
        ]
    );
    let mut d = data(&[pending("a", 20, ""), pending("b", 8, "")]);
    d.events.insert(
        "llmsafespaces/a".into(),
        LastEvent {
            reason: "FailedMount".into(),
            message: "MountVolume.MountDevice failed for volume \"pvc-81b676e6\"".into(),
            when: Some(now() - 60),
        },
    );
    let r = evaluate(&d, &o, now());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.findings.len(), 2);
    assert_eq!(r.findings[0].status, Status::Critical, "worst first");
    assert_eq!(
        r.findings[0].details,
        ["last FailedMount (1m ago): MountVolume.MountDevice failed for volume \"pvc-81b676e6\""]
    );
    assert_eq!(r.findings[1].status, Status::Warning);
}

#[test]
fn latest_volume_event_picks_newest_relevant() {
    let ev = |reason: &str, t: &str| -> kube::Event {
        serde_json::from_str(&format!(
            r#"{{"reason":"{reason}","message":"{reason} at {t}","lastTimestamp":"{t}"}}"#
        ))
        .unwrap()
    };
    let evs = [
        ev("FailedMount", "2026-07-12T10:00:00Z"),
        ev("FailedAttachVolume", "2026-07-12T11:00:00Z"),
        ev("Scheduled", "2026-07-12T11:30:00Z"),
    ];
    let e = latest_volume_event(&evs).unwrap();
    assert_eq!(
        (e.reason.as_str(), e.message.as_str()),
        (
            "FailedAttachVolume",
            "FailedAttachVolume at 2026-07-12T11:00:00Z"
        )
    );
    assert!(latest_volume_event(&evs[2..]).is_none());
}

#[test]
fn options() {
    assert!(Opts::try_parse_from(["x", "--all-nodes", "--node", "a"]).is_err());
    assert!(Opts::try_parse_from(["x", "-w", "abc"]).is_err());
    let o = opts(&["--namespace", "a", "--namespace", "b", "--node", "k8s03"]);
    let f = o.stuck.scope.filter(|| None).unwrap();
    assert_eq!(f.describe(), "on node k8s03 in namespaces a, b");
    // The shared options speak of this check's state.
    let help = <Opts as clap::CommandFactory>::command()
        .render_help()
        .to_string()
        // Wrapped at the terminal's width: compare the words.
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for h in [
        "Warn when a pod has been stuck longer than this",
        "Do not look up FailedMount/FailedAttachVolume events for stuck pods",
    ] {
        assert!(help.contains(h), "{h}: {help}");
    }
}

/// With a memory (--state-dir): the PV a stuck pod's volume event names (not an inline volume,
/// only for a pod with a claim) is recorded, and its earlier stuck spells are said.
#[test]
fn a_volume_whose_pods_keep_sticking_says_so() {
    use node::history::{Kind, Memory, Remembered};
    let with_claim = r#","volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data-a"}},{"name":"cfg","configMap":{"name":"x"}}]"#;
    let mk = |name: &str, mins: i64, vols: &str| {
        let mut p = pending(name, mins, "");
        let extra: kube::Pod = pod(&format!(r#"{{"spec":{{"nodeName":"worker-04"{vols}}}}}"#));
        p.spec.volumes = extra.spec.volumes;
        p
    };
    let mut d = data(&[
        mk("a", 20, with_claim),
        mk("b", 20, ""),
        mk("c", 1, with_claim),
    ]);
    let ev = |msg: &str| LastEvent {
        reason: "FailedMount".into(),
        message: msg.into(),
        when: Some(now() - 60),
    };
    d.events.insert(
        "llmsafespaces/a".into(),
        ev("MountVolume.MountDevice failed for volume \"pvc-81b676e6\" : rpc error; MountVolume.SetUp failed for volume \"cfg\" : x"),
    );
    // No claim: a name in its event is not taken for a PV.
    d.events.insert(
        "llmsafespaces/b".into(),
        ev("MountVolume.SetUp failed for volume \"pvc-other\""),
    );
    let p = policy(&[]);
    assert_eq!(stuck_pvs(&d, &p, now()), ["pvc-81b676e6"]);
    let day = 86_400_000;
    let t0 = 20_773 * day; // 2026-11-16
    let mut m = Memory::default();
    let seen = [("pvc-81b676e6".to_string(), Kind::Stuck)];
    m.record(t0, &seen);
    m.record(t0 + 1, &[]);
    m.record(t0 + 2 * day, &seen);
    let mut r = evaluate(&d, &p, now());
    recall(
        &mut r,
        &d,
        &Remembered {
            memory: m,
            now: t0 + 2 * day,
            notes: vec!["n".into()],
            kept: true,
        },
    );
    let a = r
        .findings
        .iter()
        .find(|f| f.subject.pod.as_deref() == Some("a"))
        .unwrap();
    assert!(
        a.text
            .ends_with("; its volume pvc-81b676e6: stuck 2 times in 30 days (last 2026-11-16)"),
        "{}",
        a.text
    );
    let b = r
        .findings
        .iter()
        .find(|f| f.subject.pod.as_deref() == Some("b"))
        .unwrap();
    assert!(!b.text.contains("times in"), "{}", b.text);
    assert_eq!(r.notes, ["n"]);
}

/// The memory of the volumes (`--state-dir`): the node's run and the cluster-wide run keep their
/// own files (the scopes themselves: kube's `PodScopeArgs::memory_scope`).
#[test]
fn each_scope_keeps_its_own_memory() {
    let id = |a: &[&str]| crate::gather::memory_id(&opts(a));
    assert_eq!(id(&[]), "stuck_scheduled");
    assert_eq!(id(&["--all-nodes"]), "stuck_scheduled_all_nodes");
    assert!(id(&["--namespace", "a"]).starts_with("stuck_scheduled."));
}
