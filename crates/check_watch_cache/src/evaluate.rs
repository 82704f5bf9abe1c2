//! The decision on what the reads saw: each server's lag against the thresholds, the summary.

use crate::{Data, Outcome, ANNOTATION};
use plugin::{fmt_duration, fmt_num, Finding, Perfdata, Report, Status, Thresholds, Uom};
use std::time::Duration;

/// What decides, from the options: the lag thresholds in force.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub thresholds: Thresholds,
    /// Why `-w` was lowered, when it was.
    pub lowered: Option<String>,
}

fn secs(d: Duration) -> String {
    fmt_num((d.as_secs_f64() * 1000.0).round() / 1000.0) + "s"
}

/// Decide. Pure.
pub fn evaluate(d: &Data, policy: &Policy) -> Report {
    let th = &policy.thresholds;
    let lowered = policy.lowered.clone();
    let mut worst = Status::Ok;
    let mut bad: Vec<String> = Vec::new();
    let mut findings = Vec::new();
    let mut perf = Vec::new();
    let mut max_lag: Option<Duration> = None;
    for s in &d.servers {
        let (status, text) = match &s.outcome {
            Outcome::Seen { lag, reads } => {
                let st = th.evaluate(lag.as_secs_f64());
                perf.push((s.label.clone(), Some(*lag)));
                max_lag = Some(max_lag.map_or(*lag, |m| m.max(*lag)));
                let what = match st {
                    Status::Ok => "reflected the write",
                    _ => "lagged: reflected the write only",
                };
                if st != Status::Ok {
                    bad.push(format!("{} lagged {}", s.server, secs(*lag)));
                }
                (
                    st,
                    format!(
                        "{}: watch cache {what} after {} ({reads} RV=0 read{})",
                        s.server,
                        secs(*lag),
                        if *reads == 1 { "" } else { "s" }
                    ),
                )
            }
            Outcome::Stale {
                waited,
                reads,
                last,
                missing,
                errors,
                last_error,
            } => {
                perf.push((s.label.clone(), Some(*waited)));
                bad.push(format!(
                    "{} did not reflect a write after {}",
                    s.server,
                    fmt_duration(*waited)
                ));
                let mut t = format!(
                    "{}: watch cache did not reflect a write after {} ({reads} RV=0 reads still served {}): frozen watch cache?",
                    s.server,
                    fmt_duration(*waited),
                    match (last, missing) {
                        (_, true) => "404: the cache does not have the ConfigMap yet".to_string(),
                        (Some(n), _) => format!("the older nonce {n}"),
                        (None, _) => "the canary without a nonce".to_string(),
                    }
                );
                if *errors > 0 {
                    t.push_str(&format!(
                        "; {errors} read{} failed, last: {}",
                        if *errors == 1 { "" } else { "s" },
                        last_error.as_deref().unwrap_or("?")
                    ));
                }
                (Status::Critical, t)
            }
            Outcome::Failed { error, reads } => {
                perf.push((s.label.clone(), None));
                bad.push(format!("{} could not be read", s.server));
                (
                    Status::Unknown,
                    format!(
                        "{}: RV=0 read failed ({reads} attempt{}): {error}",
                        s.server,
                        if *reads == 1 { "" } else { "s" }
                    ),
                )
            }
        };
        worst = worst.worst(status);
        let signal = match (&s.outcome, status) {
            (Outcome::Seen { .. }, Status::Ok) => "watch_cache_current",
            (Outcome::Seen { .. }, _) => "watch_cache_lag",
            (Outcome::Stale { .. }, _) => "watch_cache_stale",
            (Outcome::Failed { .. }, _) => "read_failed",
        };
        let (ns, name) = d.canary.split_once('/').unwrap_or(("", ""));
        let mut f = Finding::new(status, text).signal(signal).subject(
            plugin::Subject::new()
                .namespace(ns)
                .server(s.server.as_str()),
        );
        if status != Status::Ok {
            f = f.next(next_step(signal, &s.server, ns, name));
        }
        findings.push(f);
    }
    let n = d.servers.len();
    let summary = if d.servers.is_empty() {
        "no API server to read from".to_string()
    } else if bad.is_empty() {
        let lag = max_lag.map(secs).unwrap_or_default();
        if n == 1 {
            format!(
                "watch cache of {} reflected the canary write after {lag} ({})",
                d.servers[0].server, d.canary
            )
        } else {
            format!(
                "watch caches of all {n} API servers reflected the canary write within {lag} ({})",
                d.canary
            )
        }
    } else if n == 1 {
        let mut b = bad.remove(0);
        if worst == Status::Warning || worst == Status::Critical {
            b.push_str(&format!(
                " (> {})",
                (if worst == Status::Critical {
                    th.critical.as_ref()
                } else {
                    th.warning.as_ref()
                })
                .map(plugin::args::duration_range_text)
                .unwrap_or_else(|| "?".into())
            ));
        }
        format!("watch cache of {b} ({})", d.canary)
    } else {
        format!(
            "{} of {n} API servers: {} ({})",
            bad.len(),
            bad.join("; "),
            d.canary
        )
    };
    let status = if d.servers.is_empty() {
        Status::Unknown
    } else {
        worst
    };
    let mut r = Report::new(status, summary);
    for (label, v) in perf {
        // An unreachable server keeps its label, with the value U.
        let p = match v {
            Some(v) => Perfdata::new(label, (v.as_secs_f64() * 1000.0).round() / 1000.0),
            None => Perfdata::unknown(label),
        };
        r = r.perf(p.uom(Uom::Seconds).thresholds(th).min(0.0));
    }
    if let Some(n) = lowered {
        r = r.note(n);
    }
    for f in findings {
        r = r.finding(f);
    }
    r.sort_findings();
    r = r.note(format!(
        "canary {} ({}={}) {} via {}",
        d.canary,
        ANNOTATION,
        d.nonce,
        if d.created { "created" } else { "patched" },
        d.written_via
    ));
    r
}

/// The next step for a server whose watch cache lags, is stale, or cannot be read: what it
/// serves from its watch cache and from etcd, then the recovery (the incident's: restart that
/// API server; its watch cache is rebuilt from etcd).
fn next_step(signal: &str, server: &str, ns: &str, name: &str) -> String {
    use plugin::next::cmd;
    let quorum = cmd(&[
        "kubectl",
        "--server",
        server,
        "get",
        "configmap",
        "-n",
        ns,
        name,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let cached = cmd(&[
        "kubectl",
        "--server",
        server,
        "get",
        "--raw",
        &format!("/api/v1/namespaces/{ns}/configmaps?resourceVersion=0&fieldSelector=metadata.name={name}"),
    ]);
    if signal == "read_failed" {
        return format!(
            "see whether the server answers at all: {}; then what its watch cache serves: {cached}",
            cmd(&[
                "kubectl",
                "--server",
                server,
                "get",
                "--raw",
                "/readyz?verbose"
            ])
        );
    }
    // The node of that API server is not in the finding (the server is an address): NODE.
    let cordon = cmd(&["kubectl", "cordon", "NODE"]);
    let uncordon = cmd(&["kubectl", "uncordon", "NODE"]);
    format!(
        "compare etcd's copy, {quorum}, with the watch cache's, {cached}; a watch cache that stays \
         behind is fixed by restarting that API server, on its node after {cordon} (the restart \
         may move Jiva controllers): microk8s {} then {}, k3s {}, k0s {}, kubeadm {} (the \
         kubelet starts the static pod again), Talos {} then {} (ID: the kube-apiserver line's); once it is OK again: {uncordon}",
        cmd(&["sudo", "snap", "restart", "microk8s.daemon-k8s-dqlite"]),
        cmd(&["sudo", "snap", "restart", "microk8s.daemon-kubelite"]),
        cmd(&["sudo", "systemctl", "restart", "k3s"]),
        cmd(&["sudo", "systemctl", "restart", "k0scontroller"]),
        plugin::next::sh("sudo crictl stop $(sudo crictl ps --name kube-apiserver -q)"),
        cmd(&["talosctl", "-n", "NODE", "containers", "-k"]),
        plugin::next::sh("talosctl -n NODE restart -k ID"),
    )
}
