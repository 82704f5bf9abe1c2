//! evaluate and the replica recognition on in-memory pods: every rule has a test.

use super::*;
use kube::time::{format_rfc3339, parse_rfc3339};
use kube::{Pod, Time};
use plugin::Status;

const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";

fn now() -> Time {
    parse_rfc3339("2026-07-25T20:30:00Z").unwrap()
}

fn opts(args: &[&str]) -> Opts {
    let mut v = vec!["check_jiva_rep_crashloop"];
    v.extend_from_slice(args);
    Opts::try_parse_from(v).unwrap()
}

fn ago(secs: i64) -> String {
    format_rfc3339(now() - secs)
}

/// A replica pod: healthy, or crash-looping with `restarts`, not ready for `unready` seconds.
fn pod(name: &str, labels: &str, crash: Option<(i64, i64)>) -> Pod {
    let (phase, cs, ready) = match crash {
        None => (
            "Running",
            format!(
                r#"{{"name":"jiva-replica","ready":true,"restartCount":0,"state":{{"running":{{"startedAt":"{}"}}}}}}"#,
                ago(86400 * 20)
            ),
            format!(
                r#"{{"type":"Ready","status":"True","lastTransitionTime":"{}"}}"#,
                ago(86400 * 20)
            ),
        ),
        Some((restarts, unready)) => (
            "Running",
            format!(
                r#"{{"name":"jiva-replica","ready":false,"restartCount":{restarts},"state":{{"waiting":{{"reason":"CrashLoopBackOff","message":"back-off 5m0s restarting failed container"}}}},
                "lastState":{{"terminated":{{"exitCode":1,"reason":"Error","finishedAt":"{}"}}}}}}"#,
                ago(120)
            ),
            format!(
                r#"{{"type":"Ready","status":"False","reason":"ContainersNotReady","lastTransitionTime":"{}"}}"#,
                ago(unready)
            ),
        ),
    };
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"openebs","labels":{{{labels}}}}},"spec":{{"nodeName":"k8s03"}},
        "status":{{"phase":"{phase}","conditions":[{ready}],"containerStatuses":[{cs}]}}}}"#
    ))
    .unwrap()
}

fn csi_labels() -> String {
    format!(
        r#""openebs.io/component":"jiva-replica","openebs.io/persistent-volume":"{PV}","openebs.io/cas-type":"jiva""#
    )
}

fn data(pods: &[Pod], o: &Opts) -> Data {
    Data {
        replicas: pods.iter().filter_map(|p| replica_of(p, o)).collect(),
        scope: "in namespace openebs".into(),
        ..Default::default()
    }
}

#[test]
fn the_incident_replica_pages() {
    let o = opts(&[]);
    let pods = [
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(
            &format!("{PV}-jiva-rep-1"),
            &csi_labels(),
            Some((92, 14 * 86400)),
        ),
        pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
    ];
    let r = evaluate(&data(&pods, &o), &o.policy(), now());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.summary, format!("{PV}-jiva-rep-1 crash-looping (92 restarts, unhealthy 14d); {PV}: 2/3 replicas healthy"));
    let perf: Vec<_> = r.perfdata.iter().map(|p| p.render()).collect();
    assert_eq!(
        perf,
        [
            "replicas=3;;;0",
            "crashlooping=1;0;;0",
            "max_restarts=92;3;10;0",
            "degraded_volumes=1;0;;0"
        ]
    );
    assert!(r.findings[0].text.contains(&format!("openebs/{PV}-jiva-rep-1 on k8s03: CrashLoopBackOff, 92 restarts, unhealthy 14d, last exit 1 (Error) 2m ago")), "{:?}", r.findings);
    let vol = r.findings.iter().find(|f| f.text.starts_with(PV)).unwrap();
    assert_eq!(vol.status, Status::Warning, "2/3 is degraded, not lost");
}

/// A crash-looping controller (the volume's iSCSI target) pages like a replica, is not
/// counted among the replicas, and every finding names the claim (#21).
#[test]
fn a_crashlooping_controller_is_as_bad_as_a_replica_and_findings_name_the_pvc() {
    let o = opts(&[]);
    let ctrl_labels = format!(
        r#""openebs.io/component":"jiva-controller","openebs.io/persistent-volume":"{PV}","openebs.io/cas-type":"jiva""#
    );
    let pods = [
        pod(
            &format!("{PV}-jiva-ctrl-7d9f8c6b5-x2k4p"),
            &ctrl_labels,
            Some((40, 3 * 3600)),
        ),
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
    ];
    let mut d = data(&pods, &o);
    assert!(d.replicas[0].controller && !d.replicas[1].controller);
    d.claims.insert(PV.into(), "media/config-seerr-0".into());
    let r = evaluate(&d, &o.policy(), now());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.starts_with(&format!(
            "controller {PV}-jiva-ctrl-7d9f8c6b5-x2k4p crash-looping (40 restarts"
        )),
        "{}",
        r.summary
    );
    let ctrl = &r.findings[0];
    assert!(
        ctrl.text.contains(&format!(
            "controller (iSCSI target) of PVC media/config-seerr-0 ({PV})"
        )),
        "{ctrl:?}"
    );
    assert!(ctrl.details[0].contains("iSCSI target"));
    // The three replicas are healthy: no degraded-volume finding.
    assert_eq!(r.perfdata[3].render(), "degraded_volumes=0;0;;0");
    // By name alone with Jiva labels (legacy controller), and not a random `-ctrl-` pod.
    let legacy = pod(
        &format!("{PV}-ctrl-5d8f9c7b6d-abcde"),
        &format!(
            r#""openebs.io/persistent-volume":"{PV}","openebs.io/persistent-volume-claim":"config-seerr-0""#
        ),
        None,
    );
    let rep = replica_of(&legacy, &o).unwrap();
    assert!(rep.controller);
    assert_eq!(rep.claim.as_deref(), Some("config-seerr-0"));
    assert!(replica_of(&pod("ingress-ctrl-5d8f9c7b6d-abcde", "", None), &o).is_none());
    // A degraded volume is named by its claim too.
    let pods = [
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(
            &format!("{PV}-jiva-rep-1"),
            &csi_labels(),
            Some((92, 14 * 86400)),
        ),
    ];
    let mut d = data(&pods, &o);
    d.claims.insert(PV.into(), "media/config-seerr-0".into());
    let r = evaluate(&d, &o.policy(), now());
    assert!(
        r.summary.contains(&format!(
            "PVC media/config-seerr-0 ({PV}): 1/2 replicas healthy"
        )),
        "{}",
        r.summary
    );
}

#[test]
fn found_by_name_alone_in_both_schemes() {
    let o = opts(&[]);
    for name in [
        format!("{PV}-jiva-rep-1"),
        format!("{PV}-rep-1-7d9c8b5f6-x2x4z"),
        format!("{PV}-rep-7d9c8b5f6-x2x4z"),
        format!("{PV}-rep-2-7d9c8b5f6"),
    ] {
        let r = replica_of(&pod(&name, "", None), &o)
            .unwrap_or_else(|| panic!("{name} not recognised"));
        assert_eq!(r.pv.as_deref(), Some(PV), "{name}");
    }
    for name in [
        format!("{PV}-jiva-ctrl-6b7c9d8f5-abcde"),
        format!("{PV}-ctrl-6b7c9d8f5-abcde"),
        "openebs-jiva-operator-5d8f7c9b6-qwert".to_string(),
        "jiva-csi-node-x7z9q".to_string(),
    ] {
        assert!(
            replica_of(&pod(&name, "", None), &o).is_none(),
            "{name} is not a replica"
        );
    }
    // Legacy label, name that fits no pattern: the label is enough; the PV comes from the label.
    let legacy =
        format!(r#""openebs.io/replica":"jiva-replica","openebs.io/persistent-volume":"{PV}""#);
    assert_eq!(
        replica_of(&pod("whatever", &legacy, None), &o)
            .unwrap()
            .pv
            .as_deref(),
        Some(PV)
    );
}

#[test]
fn thresholds_and_critical_after() {
    let o = opts(&[]);
    let single = |restarts, unready| {
        let p = pod(&format!("{PV}-jiva-rep-0"), "", Some((restarts, unready)));
        judge(&replica_of(&p, &o).unwrap(), &o.policy(), now()).0
    };
    assert_eq!(
        single(2, 300),
        Status::Warning,
        "crash-looping at all is WARNING"
    );
    assert_eq!(
        single(2, 31 * 60),
        Status::Critical,
        "unhealthy longer than --critical-after"
    );
    assert_eq!(single(11, 300), Status::Critical, "more than -c restarts");
    assert_eq!(single(10, 300), Status::Warning);
    let o2 = opts(&["-c", "50", "--critical-after", "2h"]);
    let p = pod(&format!("{PV}-jiva-rep-0"), "", Some((20, 3600)));
    assert_eq!(
        judge(&replica_of(&p, &o2).unwrap(), &o2.policy(), now()).0,
        Status::Warning
    );
}

#[test]
fn restarting_without_backoff_counts_only_when_recent_and_frequent() {
    let o = opts(&[]);
    let mut p = pod(&format!("{PV}-jiva-rep-0"), "", Some((5, 60)));
    // Running again right now (between crashes): no CrashLoopBackOff.
    p.status.container_statuses[0].state = Default::default();
    let r = replica_of(&p, &o).unwrap();
    assert!(!r.backoff);
    assert_eq!(
        judge(&r, &o.policy(), now()).0,
        Status::Warning,
        "5 restarts > -w 3, last 2m ago"
    );
    let o_hi = opts(&["-w", "5"]);
    assert_eq!(
        judge(&r, &o_hi.policy(), now()).0,
        Status::Ok,
        "not more than -w"
    );
    let o_window = opts(&["--restart-window", "1m"]);
    assert_eq!(
        judge(&r, &o_window.policy(), now()).0,
        Status::Ok,
        "last restart outside the window"
    );
}

#[test]
fn majority_rule_whatever_the_restart_counts() {
    let o = opts(&[]);
    let mut pods = vec![
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
    ];
    // Two replicas Pending (not scheduled, no restarts at all): no healthy majority.
    for p in &mut pods[1..] {
        p.status.phase = "Pending".into();
        p.status.container_statuses.clear();
        p.status.conditions.clear();
    }
    let r = evaluate(&data(&pods, &o), &o.policy(), now());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.summary, format!("{PV}: 1/3 replicas healthy"));
    assert_eq!(r.perfdata[1].value, 0.0, "nothing crash-looping");
    assert_eq!(r.perfdata[3].value, 1.0);
}

#[test]
fn healthy_volume_is_ok_and_listed_at_v() {
    let o = opts(&[]);
    let pods: Vec<_> = (0..3)
        .map(|i| pod(&format!("{PV}-jiva-rep-{i}"), &csi_labels(), None))
        .collect();
    let r = evaluate(&data(&pods, &o), &o.policy(), now());
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        r.summary,
        "3 replicas of 1 volume healthy in namespace openebs"
    );
    assert_eq!(r.findings.len(), 3);
    assert!(r.findings.iter().all(|f| f.status == Status::Ok));
    let r = evaluate(&data(&[], &o), &o.policy(), now());
    assert_eq!(
        (r.status, r.summary.as_str()),
        (Status::Unknown, "no Jiva replicas found in namespace openebs (labelled openebs.io/component=jiva-replica or openebs.io/replica=jiva-replica, or named <pv>-jiva-rep-<N> / <pv>-rep-…): give --namespace, --selector or --name-regex")
    );
}

#[test]
fn selector_and_name_regex_widen() {
    let o = opts(&[
        "--selector",
        "longhorn.io/component=instance-manager",
        "--name-regex",
        r"^(?P<pv>pvc-[0-9a-f-]+)-r-[0-9a-f]{8}$",
    ]);
    let lh = pod(
        "instance-manager-abc",
        r#""longhorn.io/component":"instance-manager""#,
        Some((15, 600)),
    );
    let r = replica_of(&lh, &o).unwrap();
    assert_eq!(r.pv, None);
    let named = pod("pvc-0a1b-r-1234abcd", "", None);
    assert_eq!(
        replica_of(&named, &o).unwrap().pv.as_deref(),
        Some("pvc-0a1b")
    );
    assert!(replica_of(&named, &opts(&[])).is_none());
    assert!(Opts::try_parse_from(["x", "--name-regex", "("]).is_err());
    assert!(Opts::try_parse_from(["x", "--selector", "a in b"]).is_err());
}

/// Issue 26, count nouns: one restart is "1 restart", in the finding and the summary.
#[test]
fn one_restart_is_said_in_the_singular() {
    let o = opts(&[]);
    let pods = [
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), Some((1, 300))),
    ];
    let r = evaluate(&data(&pods, &o), &o.policy(), now());
    assert!(
        r.summary
            .starts_with(&format!("{PV}-jiva-rep-1 crash-looping (1 restart, ")),
        "{}",
        r.summary
    );
    let texts: Vec<&str> = r.findings.iter().map(|f| f.text.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("CrashLoopBackOff, 1 restart, ")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("Ready, 0 restarts")),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t.contains("1 restarts")), "{texts:?}");
}

/// The memory of the volumes (--state-dir) counts a volume's degraded findings: a second spell
/// is said on the volume's finding, by its PV.
#[test]
fn a_volume_degraded_again_says_how_often() {
    use node::history::{annotate, seen_in, Kind, Memory, Remembered};
    let o = opts(&[]);
    let mut pods = vec![
        pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), None),
        pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
    ];
    pods[2].status.phase = "Pending".into();
    pods[2].status.container_statuses.clear();
    pods[2].status.conditions.clear();
    let mut r = evaluate(&data(&pods, &o), &o.policy(), now());
    let seen = seen_in(&r, MEMORY);
    assert_eq!(seen, [(PV.to_string(), Kind::Degraded)]);
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
    annotate(&mut r, MEMORY, &rem);
    let f = r
        .findings
        .iter()
        .find(|f| f.signal == "degraded_redundancy")
        .unwrap();
    assert!(
        f.text
            .ends_with("(degraded redundancy); degraded 2 times in 30 days (last 2026-11-16)"),
        "{}",
        f.text
    );
}

/// The memory of the volumes: the default replicas keep the usual file; other namespaces, a
/// selector or a name regex (other replicas, other volumes) their own.
#[test]
fn other_replicas_keep_their_own_memory() {
    assert_eq!(opts(&[]).scope(), "");
    assert_eq!(opts(&["--namespace", "openebs"]).scope(), "");
    assert_eq!(
        opts(&["--namespace", "jiva", "--namespace", "openebs"]).scope(),
        "--namespace jiva --namespace openebs"
    );
    assert_eq!(
        opts(&["--selector", "app=x", "--name-regex", "^r-"]).scope(),
        "--selector app=x --name-regex ^r-"
    );
}
