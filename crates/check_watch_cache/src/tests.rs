//! evaluate on in-memory read outcomes, the labels, the options' rules.

use super::*;
use crate::gather::retryable;
use kube::ApiError;
use plugin::Status;

fn opts(args: &[&str]) -> Opts {
    Opts::try_parse_from(std::iter::once("check_watch_cache").chain(args.iter().copied())).unwrap()
}

fn policy(args: &[&str]) -> Policy {
    opts(args).policy()
}

fn data(outcomes: Vec<(&str, Outcome)>) -> Data {
    let servers: Vec<String> = outcomes.iter().map(|(s, _)| s.to_string()).collect();
    let labels = labels(&servers);
    Data {
        canary: "kube-system/k8s-storage-checks-canary".into(),
        written_via: servers.first().cloned().unwrap_or_default(),
        created: false,
        nonce: "1.0-1".into(),
        servers: outcomes
            .into_iter()
            .zip(labels)
            .map(|((s, outcome), label)| ServerResult {
                server: s.into(),
                label,
                outcome,
            })
            .collect(),
    }
}

fn seen(ms: u64) -> Outcome {
    Outcome::Seen {
        lag: Duration::from_millis(ms),
        reads: 2,
    }
}

fn stale(s: u64) -> Outcome {
    Outcome::Stale {
        waited: Duration::from_secs(s),
        reads: 30,
        last: Some("0.1-9".into()),
        missing: false,
        errors: 0,
        last_error: None,
    }
}

const A: &str = "https://10.0.0.1:16443";
const B: &str = "https://10.0.0.2:16443";

#[test]
fn defaults() {
    let o = opts(&[]);
    // One place for the deadline: the binary's 5s fits the suite's -t (10s; NRPE's 8s).
    assert_eq!(o.deadline, Duration::from_secs(5));
    assert_eq!(o.common.timeout.duration, Duration::from_secs(10));
    assert_eq!(o.namespace, "kube-system");
    assert_eq!(o.name, "k8s-storage-checks-canary");
    assert!(o.common.timeout.duration >= o.deadline + T_MARGIN);
    assert!(Opts::try_parse_from(["x", "--deadline", "0"]).is_err());
}

#[test]
fn small_lag_is_ok() {
    let r = evaluate(&data(vec![(A, seen(120))]), &policy(&[]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.summary.contains("reflected the canary write after 0.12s"),
        "{}",
        r.summary
    );
    assert_eq!(r.perfdata.len(), 1);
    assert_eq!(r.perfdata[0].label, "watch_cache_lag");
    assert_eq!(r.perfdata[0].value, 0.12);
    assert_eq!(r.perfdata[0].render(), "watch_cache_lag=0.12s;2;5;0");
}

#[test]
fn lag_over_w_warns_over_c_is_critical() {
    let r = evaluate(&data(vec![(A, seen(3_000))]), &policy(&[]));
    assert_eq!(r.status, Status::Warning);
    assert!(r.summary.contains("lagged 3s (> 2s)"), "{}", r.summary);
    let r = evaluate(&data(vec![(A, seen(3_000))]), &policy(&["-w", "4s"]));
    assert_eq!(r.status, Status::Ok);
    let r = evaluate(&data(vec![(A, seen(3_000))]), &policy(&["-c", "2.5s"]));
    assert_eq!(r.status, Status::Critical);
    // -c defaults to --deadline: a read that answered after it is CRITICAL too.
    let r = evaluate(&data(vec![(A, seen(6_000))]), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    let r = evaluate(
        &data(vec![(A, seen(11_000))]),
        &policy(&["--deadline", "10s"]),
    );
    assert_eq!(r.status, Status::Critical);
}

#[test]
fn a_warning_at_or_above_the_critical_lag_is_lowered_with_a_note() {
    // --deadline 2s makes -c 2s; the default -w 2s could then never fire.
    let o = policy(&["--deadline", "2s"]);
    let r = evaluate(&data(vec![(A, seen(1_500))]), &o);
    assert_eq!(r.status, Status::Warning, "{r:?}");
    assert_eq!(r.perfdata[0].render(), "watch_cache_lag=1.5s;1;2;0");
    assert!(
        r.notes
            .iter()
            .any(|n| n
                == "-w 2s is not below the critical lag 2s (-c or --deadline): WARNING uses 1s"),
        "{:?}",
        r.notes
    );
    let r = evaluate(
        &data(vec![(A, seen(500))]),
        &policy(&["-w", "9s", "-c", "4s"]),
    );
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.perfdata[0].render(), "watch_cache_lag=0.5s;2;4;0");
    // A sane pair is left alone, without a note.
    let r = evaluate(&data(vec![(A, seen(500))]), &policy(&[]));
    assert!(
        r.notes.iter().all(|n| !n.contains("is not below")),
        "{:?}",
        r.notes
    );
}

#[test]
fn not_reflected_is_critical_with_the_wait_as_lag() {
    let r = evaluate(&data(vec![(A, stale(30))]), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.contains("did not reflect a write after 30s"),
        "{}",
        r.summary
    );
    assert_eq!(r.perfdata[0].value, 30.0);
    assert!(r.findings[0].text.contains("older nonce 0.1-9"));
}

/// Issue 26: a stale or lagging watch cache's step says how to restart that API server on every
/// distribution, cordon first and uncordon after, each command pasteable as printed.
#[test]
fn a_stale_cache_step_restarts_the_api_server_per_distribution() {
    let r = evaluate(&data(vec![(A, stale(30)), (B, seen(9000))]), &policy(&[]));
    assert!(r.findings_without_step().is_empty(), "{:?}", r.findings);
    for f in r.findings.iter().filter(|f| f.status != Status::Ok) {
        let next = f.next.as_deref().unwrap();
        for want in [
            "`kubectl cordon NODE`",
            "`sudo snap restart microk8s.daemon-k8s-dqlite`",
            "`sudo snap restart microk8s.daemon-kubelite`",
            "`sudo systemctl restart k3s`",
            "`sudo systemctl restart k0scontroller`",
            "`sudo crictl stop $(sudo crictl ps --name kube-apiserver -q)`",
            "`talosctl -n NODE restart -k ID`",
            "`kubectl uncordon NODE`",
        ] {
            assert!(next.contains(want), "{want} not in {next}");
        }
        assert!(!next.contains("see the runbook"), "{next}");
        for c in plugin::next::commands(next) {
            assert!(plugin::next::is_pasteable(c), "{c}");
        }
    }
}

#[test]
fn failed_reads_are_unknown_and_keep_their_label_with_the_value_u() {
    let r = evaluate(
        &data(vec![(
            A,
            Outcome::Failed {
                error: "connection refused".into(),
                reads: 1,
            },
        )]),
        &policy(&[]),
    );
    assert_eq!(r.status, Status::Unknown);
    assert_eq!(r.perfdata.len(), 1);
    assert_eq!(r.perfdata[0].render(), "watch_cache_lag=U;2;5;0");
    assert!(r.findings[0].text.contains("connection refused"));
}

#[test]
fn several_servers_name_the_bad_one_and_get_a_label_each() {
    let r = evaluate(&data(vec![(A, seen(50)), (B, stale(30))]), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary
            .starts_with("1 of 2 API servers: https://10.0.0.2:16443 did not reflect"),
        "{}",
        r.summary
    );
    assert!(!r.summary.contains("10.0.0.1"), "{}", r.summary);
    let labels: Vec<_> = r.perfdata.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(
        labels,
        ["watch_cache_lag_10_0_0_1", "watch_cache_lag_10_0_0_2"]
    );
    assert_eq!(r.findings[0].status, Status::Critical);
    let r = evaluate(&data(vec![(A, seen(50)), (B, seen(80))]), &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary
            .contains("all 2 API servers reflected the canary write within 0.08s"),
        "{}",
        r.summary
    );
}

#[test]
fn labels_are_stable_and_safe() {
    let s = |v: &[&str]| labels(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    assert_eq!(s(&["https://k8s01:16443"]), ["watch_cache_lag"]);
    assert_eq!(
        s(&["https://K8S01.lan:16443", "https://k8s02.lan:16443/"]),
        ["watch_cache_lag_k8s01_lan", "watch_cache_lag_k8s02_lan"]
    );
    assert_eq!(
        s(&["https://127.0.0.1:1000", "https://127.0.0.1:2000"]),
        [
            "watch_cache_lag_127_0_0_1_1000",
            "watch_cache_lag_127_0_0_1_2000"
        ]
    );
    assert_eq!(
        s(&["https://[fd00::1]:6443", "https://[fd00::2]:6443"]),
        ["watch_cache_lag_fd00_1", "watch_cache_lag_fd00_2"]
    );
    assert_eq!(
        s(&["https://a:1", "https://a:1"]),
        ["watch_cache_lag_1", "watch_cache_lag_2"]
    );
}

#[test]
fn rbac_hint_is_the_exact_role() {
    let h = opts(&[]).rbac_hint();
    assert!(h.contains("namespace kube-system"), "{h}");
    assert!(
        h.contains("resourceNames: [\"k8s-storage-checks-canary\"], verbs: [\"get\", \"patch\"]"),
        "{h}"
    );
    assert!(!h.contains("create"), "{h}");
    let h = opts(&["--create", "--namespace", "monitoring", "--name", "c"]).rbac_hint();
    assert!(
        h.contains("namespace monitoring") && h.contains("resourceNames: [\"c\"]"),
        "{h}"
    );
    assert!(h.contains("verbs: [\"create\"]"), "{h}");
}

#[test]
fn short_t_is_refused_before_any_request() {
    let o = opts(&["-t", "10", "--kubeconfig", "/nonexistent"]);
    let e = gather(&o, &Ctx::for_test(Duration::from_secs(10))).unwrap_err();
    assert!(!e.0.contains("leaves no room"), "{e}");
    let o = opts(&[
        "-t",
        "10",
        "--deadline",
        "30s",
        "--kubeconfig",
        "/nonexistent",
    ]);
    let e = gather(&o, &Ctx::for_test(Duration::from_secs(10))).unwrap_err();
    assert!(
        e.0.contains("-t 10s leaves no room for --deadline 30s: give -t 32"),
        "{e}"
    );
    let o = opts(&[
        "-t",
        "10",
        "--deadline",
        "8s",
        "--kubeconfig",
        "/nonexistent",
    ]);
    let e = gather(&o, &Ctx::for_test(Duration::from_secs(10))).unwrap_err();
    assert!(!e.0.contains("leaves no room"), "{e}");
}

#[test]
fn retry_only_what_may_pass() {
    let e = |s| ApiError {
        status: s,
        message: String::new(),
        error: Unknown(String::new()),
    };
    assert!(retryable(&e(None)) && retryable(&e(Some(503))) && retryable(&e(Some(429))));
    assert!(!retryable(&e(Some(403))) && !retryable(&e(Some(404))) && !retryable(&e(Some(401))));
}
