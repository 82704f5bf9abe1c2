use crate::answer::{self, Answer, Finding};
use crate::rules::{self, LAYERS, RULES};
use crate::{chain, join};
use plugin::Status;
use serde_json::json;

fn f(check: &str, status: Status, signal: &str, subject: &[(&str, &str)]) -> Finding {
    Finding {
        check: check.into(),
        status,
        signal: signal.into(),
        subject: subject
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        text: format!("{signal} text"),
        next: Some(format!("step for {signal}")),
        runbook: Some(format!("docs/runbooks/{signal}.md")),
    }
}

fn answer(check: &str, findings: Vec<Finding>) -> Answer {
    let status = findings.iter().fold(Status::Ok, |s, f| s.worst(f.status));
    Answer {
        check: check.into(),
        status,
        summary: String::new(),
        not_applicable: false,
        findings,
    }
}

const C: Status = Status::Critical;
const W: Status = Status::Warning;
const PV: &str = "pvc-746b2837";

/// The storage cascade on one node: the iSCSI session of the PV is FREE, its disk went offline,
/// ext4 aborted its journal and remounted read-only, the pod's mount is read-only, and the pod
/// wedged in Terminating on it; elsewhere a Jiva replica crash-loops.
fn cascade() -> Vec<Answer> {
    let mount = format!("/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/{PV}/mount");
    vec![
        answer(
            "check_iscsi_sessions",
            vec![f(
                "check_iscsi_sessions",
                C,
                "session_recovery_timed_out",
                &[("session", "session3"), ("device", "sdc"), ("pv", PV)],
            )],
        ),
        answer(
            "check_storage_kernel_errors",
            vec![
                f(
                    "check_storage_kernel_errors",
                    C,
                    "scsi_offline",
                    &[("device", "sdc")],
                ),
                f(
                    "check_storage_kernel_errors",
                    C,
                    "journal_abort",
                    &[("device", "sdc"), ("pv", PV)],
                ),
                f(
                    "check_storage_kernel_errors",
                    C,
                    "remount_ro",
                    &[("device", "sdc"), ("pv", PV)],
                ),
            ],
        ),
        answer(
            "check_ro_pvc_mounts",
            vec![f(
                "check_ro_pvc_mounts",
                C,
                "emergency_ro",
                &[
                    ("device", "sdc"),
                    ("pv", PV),
                    ("namespace", "media"),
                    ("pod", "seerr-0"),
                    ("pvc", "config-seerr-0"),
                ],
            )],
        ),
        answer(
            "check_stuck_terminating",
            vec![f(
                "check_stuck_terminating",
                C,
                "stuck_terminating",
                &[
                    ("namespace", "media"),
                    ("pod", "seerr-0"),
                    ("mount", &mount),
                    ("node", "k8s03"),
                ],
            )],
        ),
        answer(
            "check_jiva_rep_crashloop",
            vec![
                f(
                    "check_jiva_rep_crashloop",
                    C,
                    "crashloop",
                    &[
                        ("pv", "pvc-coder"),
                        ("pod", "rep-1"),
                        ("namespace", "openebs"),
                    ],
                ),
                f(
                    "check_jiva_rep_crashloop",
                    W,
                    "degraded_redundancy",
                    &[("pv", "pvc-coder")],
                ),
            ],
        ),
    ]
}

#[test]
fn every_rule_goes_up_the_stack_so_chains_have_no_loops() {
    for r in RULES {
        for cause in r.cause.signals {
            for g in r.effect {
                for effect in g.signals {
                    let (a, b) = (rules::layer(cause).unwrap(), rules::layer(effect).unwrap());
                    assert!(
                        a < b,
                        "{cause} (layer {a}) → {effect} (layer {b}) goes down"
                    );
                }
            }
        }
    }
}

#[test]
fn every_signal_is_in_one_layer_and_has_its_runbook() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/runbooks");
    let mut seen = Vec::new();
    for g in LAYERS.iter().chain([&rules::POD_WAITING]) {
        for s in g.signals {
            assert!(
                root.join(format!("{s}.md")).is_file(),
                "no runbook for {s}: a rule names a signal no check has"
            );
        }
    }
    for g in LAYERS {
        for s in g.signals {
            assert!(!seen.contains(s), "{s} is in two layers");
            seen.push(*s);
        }
    }
    for s in rules::POD_WAITING.signals {
        assert!(rules::POD.signals.contains(s), "{s}");
    }
}

#[test]
fn the_cascade_is_one_chain_with_the_iscsi_session_as_its_root_and_jiva_another() {
    let t = join(cascade(), Some("k8s03"));
    assert_eq!(t.chains.len(), 2, "{}", t.text(false));
    let c = &t.chains[0];
    assert_eq!(c.status, Status::Critical);
    let root = &t.findings[c.roots[0]];
    assert_eq!(c.roots.len(), 1, "{}", t.text(false));
    assert_eq!(root.signal, "session_recovery_timed_out");
    let signals: Vec<&str> = c
        .members
        .iter()
        .map(|&i| t.findings[i].signal.as_str())
        .collect();
    for s in [
        "scsi_offline",
        "journal_abort",
        "remount_ro",
        "emergency_ro",
        "stuck_terminating",
    ] {
        assert!(signals.contains(&s), "{s} not in {signals:?}");
    }
    // Root first; then up the stack.
    assert_eq!(signals[0], "session_recovery_timed_out");
    let head = c.headline(&t.findings);
    assert!(
        head.starts_with("session_recovery_timed_out session3 → scsi_offline sdc → journal_abort sdc → remount_ro sdc → emergency_ro PVC media/config-seerr-0 → stuck_terminating pod media/seerr-0"),
        "{head}"
    );
    // The wedged pod is joined through the PV its mount names.
    let pod = c
        .members
        .iter()
        .find(|&&i| t.findings[i].signal == "stuck_terminating")
        .unwrap();
    let parent = c.parent(*pod, &t.findings).unwrap();
    assert_eq!(t.findings[parent.cause].signal, "emergency_ro");
    // Jiva: the crash loop is the root of the degraded volume, a chain of its own.
    let j = &t.chains[1];
    assert_eq!(t.findings[j.roots[0]].signal, "crashloop");
    assert_eq!(j.members.len(), 2);
    assert!(t.alone.is_empty());
    let text = t.text(false);
    assert!(
        text.starts_with("TRIAGE CRITICAL - 2 chains, 0 findings alone; 5 checks ran\n"),
        "{text}"
    );
    assert!(
        text.contains("  next: step for session_recovery_timed_out\n"),
        "{text}"
    );
    assert!(
        !text.contains("next: step for journal_abort"),
        "only the root's step: {text}"
    );
}

#[test]
fn the_stale_csi_mount_chain_reaches_the_stuck_pods_through_the_node_queue() {
    let stuck = |p: &str| {
        f(
            "check_stuck_scheduled",
            C,
            "stuck_no_status",
            &[("namespace", "ws"), ("pod", p), ("node", "worker-04")],
        )
    };
    let answers = vec![
        answer(
            "check_stale_csi_mounts",
            vec![
                f(
                    "check_stale_csi_mounts",
                    C,
                    "staging_pv_gone",
                    &[("pv", "pvc-81b6"), ("node", "worker-04")],
                ),
                f(
                    "check_stale_csi_mounts",
                    C,
                    "orphaned_mount",
                    &[("pv", "pvc-81b6"), ("node", "worker-04")],
                ),
            ],
        ),
        answer(
            "check_kubelet_nested_ops",
            vec![f(
                "check_kubelet_nested_ops",
                C,
                "volume_op_stuck",
                &[("pv", "pvc-81b6")],
            )],
        ),
        answer(
            "check_stuck_scheduled",
            vec![stuck("a"), stuck("b"), stuck("c")],
        ),
    ];
    let t = join(answers.clone(), Some("worker-04"));
    assert_eq!(t.chains.len(), 1, "{}", t.text(false));
    let c = &t.chains[0];
    assert_eq!(c.members.len(), 6);
    let roots: Vec<&str> = c
        .roots
        .iter()
        .map(|&i| t.findings[i].signal.as_str())
        .collect();
    assert_eq!(roots, ["staging_pv_gone", "orphaned_mount"]);
    assert_eq!(
        c.members[..2],
        c.roots[..],
        "the roots first, in their order"
    );
    assert_eq!(
        c.next(&t.findings),
        Some("step for staging_pv_gone"),
        "one step: the first root's"
    );
    let queue = t
        .findings
        .iter()
        .position(|f| f.signal == "volume_op_stuck")
        .unwrap();
    for (i, x) in t.findings.iter().enumerate() {
        if x.signal == "stuck_no_status" {
            let p = c.parent(i, &t.findings).unwrap();
            assert_eq!((p.cause, p.key), (queue, "node"));
        }
    }
    // Without knowing the node of the kubelet's log, the pods cannot be joined to it.
    let t = join(answers, None);
    assert_eq!(t.chains.len(), 1);
    assert_eq!(t.chains[0].members.len(), 3);
    assert_eq!(t.alone.len(), 3);
}

#[test]
fn findings_on_other_volumes_or_nodes_stand_alone_and_ok_ones_are_left_out() {
    let answers = vec![
        answer(
            "check_iscsi_sessions",
            vec![
                f(
                    "check_iscsi_sessions",
                    C,
                    "session_failed",
                    &[("session", "s1"), ("device", "sdb"), ("pv", "pv-a")],
                ),
                f(
                    "check_iscsi_sessions",
                    Status::Ok,
                    "session_ok",
                    &[("session", "s2"), ("device", "sdc"), ("pv", "pv-b")],
                ),
            ],
        ),
        answer(
            "check_ro_pvc_mounts",
            vec![f(
                "check_ro_pvc_mounts",
                C,
                "emergency_ro",
                &[("device", "sdc"), ("pv", "pv-b")],
            )],
        ),
        answer(
            "check_stuck_scheduled",
            vec![f(
                "check_stuck_scheduled",
                C,
                "stuck_no_status",
                &[("pod", "x"), ("node", "n2")],
            )],
        ),
        answer(
            "check_kubelet_nested_ops",
            vec![f(
                "check_kubelet_nested_ops",
                C,
                "volume_op_stuck",
                &[("pv", "pv-z"), ("node", "n1")],
            )],
        ),
    ];
    let t = join(answers, None);
    assert!(t.chains.is_empty(), "{}", t.text(false));
    assert_eq!(t.alone.len(), 4);
    assert!(t.findings.iter().all(|f| f.status != Status::Ok));
}

#[test]
fn a_device_name_joins_only_on_its_own_node() {
    let answers = vec![
        answer(
            "check_iscsi_sessions",
            vec![f(
                "check_iscsi_sessions",
                C,
                "session_failed",
                &[("session", "s3"), ("device", "sdc"), ("node", "k8s03")],
            )],
        ),
        answer(
            "check_storage_kernel_errors",
            vec![f(
                "check_storage_kernel_errors",
                C,
                "journal_abort",
                &[("device", "sdc"), ("node", "k8s02")],
            )],
        ),
    ];
    let t = join(answers.clone(), None);
    assert!(t.chains.is_empty(), "{}", t.text(false));
    let mut same = answers;
    same[1].findings[0]
        .subject
        .insert("node".into(), "k8s03".into());
    assert_eq!(join(same, None).chains.len(), 1);
}

#[test]
fn the_same_finding_twice_counts_once_at_its_worst() {
    let a = answer(
        "check_jiva_rep_crashloop",
        vec![f(
            "check_jiva_rep_crashloop",
            W,
            "degraded_redundancy",
            &[("pv", "p")],
        )],
    );
    let mut b = a.clone();
    b.findings[0].status = C;
    let t = join(vec![a, b], None);
    assert_eq!(t.findings.len(), 1);
    assert_eq!(t.findings[0].status, C);
}

#[test]
fn a_check_that_could_not_tell_is_named_and_counts_unless_not_installed() {
    let mut unknown = answer("check_watch_cache", vec![]);
    unknown.status = Status::Unknown;
    unknown.summary = "no Kubernetes credentials found".into();
    let t = join(
        vec![answer("check_ro_pvc_mounts", vec![]), unknown.clone()],
        None,
    );
    assert_eq!(t.status(), Status::Unknown);
    let text = t.text(false);
    assert!(text.contains("UNKNOWN: check_watch_cache"), "{text}");
    assert!(
        text.contains("[UNKNOWN] check_watch_cache: no Kubernetes credentials found"),
        "{text}"
    );
    let doc = json!({"check": "check_longhorn_volumes", "status": "UNKNOWN",
        "summary": "Longhorn is not installed on API server https://x: the API group longhorn.io is not served",
        "findings": []});
    let na = answer::parse(&doc).unwrap();
    assert!(na.not_applicable);
    let t = join(vec![answer("check_ro_pvc_mounts", vec![]), na], None);
    assert_eq!(t.status(), Status::Ok);
    assert!(
        t.status_line()
            .contains("not installed here: check_longhorn_volumes"),
        "{}",
        t.status_line()
    );
}

#[test]
fn answers_are_read_from_a_transcript_and_bad_ones_refused_with_the_line() {
    let doc = json!({"check": "check_stuck_terminating", "status": "CRITICAL", "summary": "s",
        "findings": [{"status": "CRITICAL", "signal": "stuck_terminating", "text": "t",
          "subject": {"pod": "p", "namespace": "n",
            "mount": "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-9/mount"}}]});
    let text =
        format!("━━━ 1/1 header ━━━\n$ check_stuck_terminating --format json\n{doc}\n(exit 2)\n");
    let a = answer::parse_all(&text).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(
        a[0].findings[0].subject["pv"], "pvc-9",
        "the PV of the pod's mount"
    );
    let err = answer::parse_all("x\n{\"check\": \"a\", \"status\": \"BAD\"}\n").unwrap_err();
    assert!(err.starts_with("line 2: a: no valid \"status\""), "{err}");
    let err = answer::parse_all("{not json\n").unwrap_err();
    assert!(err.starts_with("line 1: not JSON"), "{err}");
    let err = answer::parse_all(
        "{\"check\": \"a\", \"status\": \"OK\", \"findings\": [{\"signal\": \"x\"}]}",
    )
    .unwrap_err();
    assert!(
        err.contains("a finding without a valid \"status\""),
        "{err}"
    );
}

#[test]
fn json_output_carries_the_chains_with_their_links() {
    let t = join(cascade(), Some("k8s03"));
    let v = t.json();
    assert_eq!(v["status"], "CRITICAL");
    let c = &v["chains"][0];
    let root = c["roots"][0].as_u64().unwrap() as usize;
    assert_eq!(c["findings"][0]["id"], root);
    assert_eq!(c["findings"][0]["signal"], "session_recovery_timed_out");
    assert!(c["findings"][0]["caused_by"].as_array().unwrap().is_empty());
    let ro = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["signal"] == "emergency_ro")
        .unwrap();
    assert!(ro["caused_by"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["key"] == "device" && l["value"] == "sdc"));
    assert_eq!(c["next"], "step for session_recovery_timed_out");
    assert_eq!(v["checks"].as_array().unwrap().len(), 5);
}

#[test]
fn the_documented_table_is_the_code_s() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/triage.md"),
    )
    .unwrap();
    assert!(
        doc.contains(&rules::table_markdown()),
        "docs/triage.md must hold rules::table_markdown() verbatim:\n{}",
        rules::table_markdown()
    );
}

#[test]
fn a_chain_is_found_whatever_the_order_of_the_answers() {
    let mut a = cascade();
    a.reverse();
    let t = join(a, Some("k8s03"));
    assert_eq!(t.chains.len(), 2);
    assert_eq!(
        t.findings[t.chains[0].roots[0]].signal,
        "session_recovery_timed_out"
    );
    let _ = chain::links(&t.findings);
}

/// Run `sh -c SCRIPT` as if it were a check named by its first argument.
fn sh(scripts: &[&str], within: std::time::Duration) -> Vec<Answer> {
    let lines: Vec<Vec<String>> = scripts
        .iter()
        .map(|s| vec!["-c".to_string(), s.to_string()])
        .collect();
    crate::run::run_all(
        std::path::Path::new("/bin/sh"),
        &lines,
        std::time::Instant::now() + within,
    )
}

#[test]
fn a_check_that_does_not_answer_by_the_deadline_is_killed_and_named() {
    let t = std::time::Instant::now();
    // The second one answers at once; the first holds its stdout open past the deadline, and
    // so does the child it leaves behind (killed with its process group).
    let doc = r#"{"check":"check_x","status":"OK","summary":"fine","findings":[]}"#;
    let a = sh(
        &["sleep 60 & sleep 60", &format!("echo '{doc}'")],
        std::time::Duration::from_millis(1500),
    );
    let took = t.elapsed();
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].status, Status::Unknown);
    assert!(
        a[0].summary
            .starts_with("did not answer within the triage's -t"),
        "{}",
        a[0].summary
    );
    assert_eq!((a[1].check.as_str(), a[1].status), ("check_x", Status::Ok));
}

#[test]
fn a_check_that_prints_no_json_is_unknown_with_what_it_said() {
    let a = sh(
        &[
            "echo 'RO_PVC_MOUNTS UNKNOWN - usage'; exit 3",
            "echo oops >&2; exit 7",
            "head -c 20000000 /dev/zero",
        ],
        std::time::Duration::from_secs(20),
    );
    assert_eq!(a[0].status, Status::Unknown);
    assert_eq!(
        a[0].summary,
        "no JSON answer (exit 3): RO_PVC_MOUNTS UNKNOWN - usage"
    );
    assert_eq!(a[1].summary, "no JSON answer (exit 7): oops");
    assert_eq!(a[2].summary, "printed more than 16 MiB");
}
