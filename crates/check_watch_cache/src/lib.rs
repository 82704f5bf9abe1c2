//! check_watch_cache — an API server whose watch cache stopped following writes.
//!
//! The incident (pvek8s-storage-cascade, chain 1): under a write burst the kine feed between
//! dqlite and one node's kube-apiserver broke; its watch cache froze. Writes kept succeeding, but
//! every read served from the cache (`resourceVersion=0`, what reflectors and most controllers
//! use) returned stale objects. Twice it took humans over five hours to notice.
//!
//! The check writes a canary — a fresh nonce in an annotation of one ConfigMap (merge-patch; with
//! `--create` the ConfigMap is created when missing) — then reads that ConfigMap back with
//! `resourceVersion=0` from every API server (`--apiserver`, repeatable; default: the kubeconfig's
//! server), polling with a short growing interval until the nonce shows or `--deadline` passes.
//! The lag is the time from the write's answer to the answer of the first read that showed it.
//!
//! CRITICAL: a server's cache did not show the write within `--deadline` (or lagged beyond `-c`);
//! WARNING: lag beyond `-w`; UNKNOWN: the write (or every read) failed.

use clap::Parser;
use kube::{ApiArgs, ApiError, Client, Config};
use plugin::{
    fmt_duration, fmt_num, Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status,
    Thresholds, Unknown, Uom,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The annotation that carries the nonce.
pub const ANNOTATION: &str = "k8s-storage-checks/canary-nonce";
/// Time -t must leave beyond --deadline: the write before the wait and the last read after it.
pub const T_MARGIN: Duration = Duration::from_secs(2);
/// First pause between two RV=0 reads; it grows by half each time up to [`POLL_MAX`].
pub const POLL_FIRST: Duration = Duration::from_millis(50);
pub const POLL_MAX: Duration = Duration::from_secs(1);

#[derive(Debug, Parser)]
#[command(
    name = "check_watch_cache",
    version,
    about = "Alert when an API server's watch cache stops reflecting writes",
    long_about = "Alert when an API server's watch cache stops reflecting writes.\n\n\
Writes a fresh nonce into an annotation of one ConfigMap, chosen by --namespace and --name and \
created when missing if --create is given, then reads it back with resourceVersion=0 — served from the API server's watch \
cache — until the nonce shows or --deadline passes. With --apiserver (repeatable) every API server \
of an HA control plane is read separately (same credentials and CA as the kubeconfig); the write \
goes to the first. CRITICAL when a cache did not show the write within --deadline, WARNING when \
it lagged more than -w. This is the only check of the suite that writes: RBAC get+patch on that \
one ConfigMap, plus create for --create.\n\n\
The default --deadline of 5s fits the suite's usual -t (10s, NRPE's 8s); -t must exceed --deadline by 2s. \
NRPE's command_timeout (default 60s) must exceed -t. A -w that would alert only above -c is lowered to \
half of -c (with a note), so WARNING can fire.",
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this cluster-level check reads nothing of the host, so it changes nothing)"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Warn when a watch cache lags a write by more than this (duration range)
    #[arg(short = 'w', long = "warning", value_name = "DURATION", default_value = "2s", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub warning: Range,

    /// Critical when a watch cache lags a write by more than this (duration range; default: the --deadline value)
    #[arg(short = 'c', long = "critical", value_name = "DURATION", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub critical: Option<Range>,

    /// How long to wait for each cache to show the write before CRITICAL
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = plugin::args::positive_duration)]
    pub deadline: Duration,

    /// Namespace of the canary ConfigMap
    #[arg(long, value_name = "NS", default_value = "kube-system")]
    pub namespace: String,

    /// Name of the canary ConfigMap
    #[arg(long, value_name = "NAME", default_value = "k8s-storage-checks-canary")]
    pub name: String,

    /// Create the canary ConfigMap when it does not exist (needs RBAC create on configmaps)
    #[arg(long)]
    pub create: bool,

    /// An API server to read back from, e.g. https://10.0.0.3:16443 (repeatable: one per
    /// control-plane node; default: the kubeconfig's server). Credentials and CA come from the
    /// kubeconfig; the write goes to the first.
    #[arg(long, value_name = "URL")]
    pub apiserver: Vec<String>,

    #[command(flatten)]
    pub api: ApiArgs,

    /// `--host-root`: accepted in container mode like every check's (this cluster-level check
    /// reads nothing of the host, so it changes nothing).
    #[command(flatten)]
    pub host: node::HostRootArg,
}

/// What became of the RV=0 reads of one API server.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The nonce showed; `lag` from the write's answer to that read's answer.
    Seen { lag: Duration, reads: u32 },
    /// The cache still served an older canary when the deadline passed.
    Stale {
        waited: Duration,
        reads: u32,
        /// The nonce the cache still showed (None: no annotation at all).
        last: Option<String>,
        /// The cache did not even have the ConfigMap (404 after it was created).
        missing: bool,
        /// Reads that failed meanwhile (transport errors, 5xx).
        errors: u32,
        last_error: Option<String>,
    },
    /// No read of this server answered usefully.
    Failed { error: String, reads: u32 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerResult {
    pub server: String,
    /// Perfdata label (see [`labels`]).
    pub label: String,
    pub outcome: Outcome,
}

/// Everything gathered.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    /// `namespace/name` of the canary.
    pub canary: String,
    /// The server the write went to.
    pub written_via: String,
    /// The ConfigMap was created by this run (`--create`).
    pub created: bool,
    pub nonce: String,
    pub servers: Vec<ServerResult>,
}

/// Perfdata labels for the servers: `watch_cache_lag` for one server; for several
/// `watch_cache_lag_<host>` (host sanitised: `10.0.0.3` → `10_0_0_3`), `_<host>_<port>` when hosts
/// repeat, `_<n>` (1-based position) if even that collides.
pub fn labels(servers: &[String]) -> Vec<String> {
    const BASE: &str = "watch_cache_lag";
    if servers.len() <= 1 {
        return servers.iter().map(|_| BASE.to_string()).collect();
    }
    let safe = |s: &str| {
        let mut o = String::new();
        for c in s.chars() {
            if c.is_ascii_alphanumeric() {
                o.push(c.to_ascii_lowercase());
            } else if !o.ends_with('_') {
                o.push('_');
            }
        }
        o.trim_matches('_').to_string()
    };
    let hostport = |s: &str| {
        let rest = s.split_once("://").map(|(_, r)| r).unwrap_or(s);
        let hp = rest.split('/').next().unwrap_or(rest);
        let (host, port) = match hp.rsplit_once(':') {
            Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
            _ => (hp, ""),
        };
        (safe(host.trim_matches(['[', ']'])), safe(port))
    };
    let unique = |v: &[String]| {
        v.iter().all(|l| !l.is_empty()) && {
            let mut s = v.to_vec();
            s.sort();
            s.dedup();
            s.len() == v.len()
        }
    };
    let hosts: Vec<String> = servers.iter().map(|s| hostport(s).0).collect();
    if unique(&hosts) {
        return hosts.iter().map(|h| format!("{BASE}_{h}")).collect();
    }
    let hps: Vec<String> = servers
        .iter()
        .map(|s| {
            let (h, p) = hostport(s);
            format!("{h}_{p}")
        })
        .collect();
    if unique(&hps) {
        return hps.iter().map(|h| format!("{BASE}_{h}")).collect();
    }
    (1..=servers.len()).map(|i| format!("{BASE}_{i}")).collect()
}

fn secs(d: Duration) -> String {
    fmt_num((d.as_secs_f64() * 1000.0).round() / 1000.0) + "s"
}

impl Opts {
    /// The thresholds in force, and a note when -w had to be lowered: a plain `-w X` at or above
    /// a plain `-c Y` (by default the --deadline) could never raise WARNING, so it becomes Y/2.
    fn thresholds_noted(&self) -> (Thresholds, Option<String>) {
        let crit = self
            .critical
            .clone()
            .unwrap_or_else(|| Range::above(self.deadline.as_secs_f64()));
        let plain = |r: &Range| match (r.start, r.end, r.inside) {
            (Some(0.0), Some(e), false) => Some(e),
            _ => None,
        };
        if let (Some(w), Some(c)) = (plain(&self.warning), plain(&crit)) {
            if w >= c {
                let lowered = Range::above(c / 2.0);
                let note = format!(
                    "-w {} is not below the critical lag {} (-c or --deadline): WARNING uses {}",
                    plugin::args::duration_range_text(&self.warning),
                    plugin::args::duration_range_text(&crit),
                    plugin::args::duration_range_text(&lowered),
                );
                return (Thresholds::new(Some(lowered), Some(crit)), Some(note));
            }
        }
        (
            Thresholds::new(Some(self.warning.clone()), Some(crit)),
            None,
        )
    }

    /// The Role that lets the check do its write and reads, for RBAC hints.
    pub fn rbac_hint(&self) -> String {
        let mut s = format!(
            "the canary needs a Role in namespace {} with rules: [{{apiGroups: [\"\"], resources: [\"configmaps\"], resourceNames: [\"{}\"], verbs: [\"get\", \"patch\"]}}",
            self.namespace, self.name
        );
        if self.create {
            s.push_str(", {apiGroups: [\"\"], resources: [\"configmaps\"], verbs: [\"create\"]} (create cannot be limited by resourceNames)");
        }
        s.push_str("] bound to the checks' identity");
        s
    }

    fn path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/configmaps/{}",
            self.namespace, self.name
        )
    }
}

/// Decide. Pure.
pub fn evaluate(d: &Data, o: &Opts) -> Report {
    let (th, lowered) = o.thresholds_noted();
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
        let (ns, _) = d.canary.split_once('/').unwrap_or(("", ""));
        findings.push(
            Finding::new(status, text).signal(signal).subject(
                plugin::Subject::new()
                    .namespace(ns)
                    .server(s.server.as_str()),
            ),
        );
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
        r = r.perf(p.uom(Uom::Seconds).thresholds(&th).min(0.0));
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

/// A nonce no earlier run wrote: wall-clock nanoseconds and the pid.
fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:09}-{}",
        t.as_secs(),
        t.subsec_nanos(),
        std::process::id()
    )
}

fn annotation(v: &Value) -> Option<String> {
    v["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(|s| s.to_string())
}

/// Retry a failed read? Only when the failure may pass (no answer, throttling, server errors).
fn retryable(e: &ApiError) -> bool {
    match e.status {
        None => true,
        Some(s) => s == 429 || s >= 500,
    }
}

impl Opts {
    /// The canary write: PATCH, or POST when missing and `--create`. Returns whether it created.
    fn write(&self, client: &Client, nonce: &str) -> Result<bool, Unknown> {
        let patch = json!({"metadata": {"annotations": {ANNOTATION: nonce}}}).to_string();
        let path = self.path();
        let do_patch = || {
            client.send::<Value>(
                "PATCH",
                &path,
                &[],
                Some(("application/merge-patch+json", patch.as_bytes())),
            )
        };
        let forbidden = |e: &ApiError, verb: &str, what: &str| {
            Unknown(format!(
                "API server {} refused to {verb} the canary ConfigMap {}/{} (HTTP 403: {}): {}",
                client.server(),
                self.namespace,
                self.name,
                if e.message.is_empty() {
                    what
                } else {
                    &e.message
                },
                self.rbac_hint()
            ))
        };
        match do_patch() {
            Ok(_) => Ok(false),
            Err(e) if e.status == Some(403) => Err(forbidden(&e, "patch", "forbidden")),
            Err(e) if e.status == Some(404) && !self.create => Err(Unknown(format!(
                "canary ConfigMap {}/{} does not exist on {}: run once with --create (needs RBAC create) \
                 or create it: kubectl -n {} create configmap {}",
                self.namespace,
                self.name,
                client.server(),
                plugin::shell_quote(&self.namespace),
                plugin::shell_quote(&self.name)
            ))),
            Err(e) if e.status == Some(404) => {
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                        "labels": {"app.kubernetes.io/managed-by": "k8s-storage-checks"},
                        "annotations": {ANNOTATION: nonce}},
                    "data": {"purpose": "canary of check_watch_cache: annotated with a fresh nonce every run, read back with resourceVersion=0"}})
                .to_string();
                let created = client.send::<Value>(
                    "POST",
                    &format!("/api/v1/namespaces/{}/configmaps", self.namespace),
                    &[],
                    Some(("application/json", body.as_bytes())),
                );
                match created {
                    Ok(_) => Ok(true),
                    // Created meanwhile by another run: patch it after all.
                    Err(e) if e.status == Some(409) => do_patch().map(|_| false).map_err(|e| e.error),
                    Err(e) if e.status == Some(403) => Err(forbidden(&e, "create", "forbidden")),
                    Err(e) if e.status == Some(404) => Err(Unknown(format!(
                        "cannot create the canary ConfigMap: namespace {} does not exist on {} ({})",
                        self.namespace,
                        client.server(),
                        e.message
                    ))),
                    Err(e) => Err(e.error),
                }
            }
            Err(e) => Err(e.error),
        }
    }

    /// Poll one server with RV=0 reads until the nonce shows or `until` passes.
    fn poll(&self, client: &Client, nonce: &str, written: Instant, until: Instant) -> Outcome {
        let path = self.path();
        let (mut reads, mut errors) = (0u32, 0u32);
        let (mut last, mut last_error, mut answered, mut missing) = (None, None, false, false);
        // The object was just written: a 404 for it from the cache is the cache lagging (the
        // ConfigMap was created by this run), unlike a 404 for the whole resource (wrong URL).
        let gone = format!("\"{}\" not found", self.name);
        let mut pause = POLL_FIRST;
        loop {
            reads += 1;
            match client.send::<Value>("GET", &path, &[("resourceVersion", "0")], None) {
                Ok(v) => {
                    let seen = annotation(&v);
                    if seen.as_deref() == Some(nonce) {
                        return Outcome::Seen {
                            lag: written.elapsed(),
                            reads,
                        };
                    }
                    answered = true;
                    missing = false;
                    last = seen;
                }
                Err(e) if e.status == Some(404) && e.message.contains(&gone) => {
                    answered = true;
                    missing = true;
                }
                Err(e) if retryable(&e) => {
                    errors += 1;
                    last_error = Some(e.error.0);
                }
                Err(e) => {
                    let mut error = e.error.0;
                    if e.status == Some(403) {
                        error = format!("{error}; {}", self.rbac_hint());
                    }
                    return Outcome::Failed { error, reads };
                }
            }
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep(pause.min(until - now)); // back-off between polls, bounded by the deadline
            pause = (pause * 3 / 2).min(POLL_MAX);
        }
        if answered {
            Outcome::Stale {
                waited: written.elapsed(),
                reads,
                last,
                missing,
                errors,
                last_error,
            }
        } else {
            Outcome::Failed {
                error: last_error.unwrap_or_else(|| "no answer".into()),
                reads,
            }
        }
    }

    /// All I/O: the write, then the RV=0 reads of every server (one thread each).
    pub fn gather(&self, ctx: &Ctx) -> Result<Data, Unknown> {
        let t = self.common.timeout.duration;
        if t < self.deadline + T_MARGIN {
            return Err(Unknown(format!(
                "-t {} leaves no room for --deadline {}: give -t {} or more (and keep NRPE's \
                 command_timeout above it), or a shorter --deadline",
                fmt_duration(t),
                fmt_duration(self.deadline),
                fmt_duration(self.deadline + T_MARGIN).trim_end_matches('s')
            )));
        }
        let cfg = kube::config(&self.api, ctx)?;
        let servers: Vec<String> = if self.apiserver.is_empty() {
            vec![cfg.server.clone()]
        } else {
            self.apiserver
                .iter()
                .map(|s| s.trim().trim_end_matches('/').to_string())
                .collect()
        };
        let config_for = |server: &str| Config {
            server: server.to_string(),
            ..cfg.clone()
        };
        let writer = Client::new(&config_for(&servers[0]), ctx.deadline())?;
        ctx.debug(format!("kube config: {}", writer.description));
        let nonce = nonce();
        ctx.stage(format!(
            "writing the canary {}/{} via {}",
            self.namespace, self.name, servers[0]
        ));
        let created = self.write(&writer, &nonce);
        for l in writer.requests() {
            ctx.debug(l);
        }
        let created = created?;
        let written = Instant::now();
        let until = written + self.deadline;
        // A read may still be under way at `until`; give it a little, within -t.
        let read_deadline = ctx.deadline().min(until + T_MARGIN / 2);
        let clients = servers
            .iter()
            .map(|s| Client::new(&config_for(s), read_deadline))
            .collect::<Result<Vec<_>, _>>()?;
        ctx.stage(format!(
            "waiting for the watch cache of {} to reflect the canary write (RV=0 reads)",
            if servers.len() == 1 {
                servers[0].clone()
            } else {
                format!("{} API servers", servers.len())
            }
        ));
        let outcomes: Vec<Outcome> = std::thread::scope(|sc| {
            let handles: Vec<_> = clients
                .iter()
                .map(|c| sc.spawn(|| self.poll(c, &nonce, written, until)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or(Outcome::Failed {
                        error: "internal error: reader thread failed".into(),
                        reads: 0,
                    })
                })
                .collect()
        });
        for c in &clients {
            let reqs = c.requests();
            ctx.debug(format!(
                "{}: {} RV=0 reads{}",
                c.server(),
                reqs.len(),
                reqs.last()
                    .map(|l| format!(", last {l}"))
                    .unwrap_or_default()
            ));
        }
        let labels = labels(&servers);
        Ok(Data {
            canary: format!("{}/{}", self.namespace, self.name),
            written_via: servers[0].clone(),
            created,
            nonce,
            servers: servers
                .into_iter()
                .zip(labels)
                .zip(outcomes)
                .map(|((server, label), outcome)| ServerResult {
                    server,
                    label,
                    outcome,
                })
                .collect(),
        })
    }
}

impl Check for Opts {
    const NAME: &'static str = "WATCH_CACHE";
    const BINARY: &'static str = "check_watch_cache";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = self.gather(ctx)?;
        Ok(evaluate(&d, self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        Opts::try_parse_from(std::iter::once("check_watch_cache").chain(args.iter().copied()))
            .unwrap()
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
        let r = evaluate(&data(vec![(A, seen(120))]), &opts(&[]));
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
        let r = evaluate(&data(vec![(A, seen(3_000))]), &opts(&[]));
        assert_eq!(r.status, Status::Warning);
        assert!(r.summary.contains("lagged 3s (> 2s)"), "{}", r.summary);
        let r = evaluate(&data(vec![(A, seen(3_000))]), &opts(&["-w", "4s"]));
        assert_eq!(r.status, Status::Ok);
        let r = evaluate(&data(vec![(A, seen(3_000))]), &opts(&["-c", "2.5s"]));
        assert_eq!(r.status, Status::Critical);
        // -c defaults to --deadline: a read that answered after it is CRITICAL too.
        let r = evaluate(&data(vec![(A, seen(6_000))]), &opts(&[]));
        assert_eq!(r.status, Status::Critical);
        let r = evaluate(
            &data(vec![(A, seen(11_000))]),
            &opts(&["--deadline", "10s"]),
        );
        assert_eq!(r.status, Status::Critical);
    }

    #[test]
    fn a_warning_at_or_above_the_critical_lag_is_lowered_with_a_note() {
        // --deadline 2s makes -c 2s; the default -w 2s could then never fire.
        let o = opts(&["--deadline", "2s"]);
        let r = evaluate(&data(vec![(A, seen(1_500))]), &o);
        assert_eq!(r.status, Status::Warning, "{r:?}");
        assert_eq!(r.perfdata[0].render(), "watch_cache_lag=1.5s;1;2;0");
        assert!(
            r.notes.iter().any(|n| n
                == "-w 2s is not below the critical lag 2s (-c or --deadline): WARNING uses 1s"),
            "{:?}",
            r.notes
        );
        let r = evaluate(
            &data(vec![(A, seen(500))]),
            &opts(&["-w", "9s", "-c", "4s"]),
        );
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.perfdata[0].render(), "watch_cache_lag=0.5s;2;4;0");
        // A sane pair is left alone, without a note.
        let r = evaluate(&data(vec![(A, seen(500))]), &opts(&[]));
        assert!(
            r.notes.iter().all(|n| !n.contains("is not below")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn not_reflected_is_critical_with_the_wait_as_lag() {
        let r = evaluate(&data(vec![(A, stale(30))]), &opts(&[]));
        assert_eq!(r.status, Status::Critical);
        assert!(
            r.summary.contains("did not reflect a write after 30s"),
            "{}",
            r.summary
        );
        assert_eq!(r.perfdata[0].value, 30.0);
        assert!(r.findings[0].text.contains("older nonce 0.1-9"));
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
            &opts(&[]),
        );
        assert_eq!(r.status, Status::Unknown);
        assert_eq!(r.perfdata.len(), 1);
        assert_eq!(r.perfdata[0].render(), "watch_cache_lag=U;2;5;0");
        assert!(r.findings[0].text.contains("connection refused"));
    }

    #[test]
    fn several_servers_name_the_bad_one_and_get_a_label_each() {
        let r = evaluate(&data(vec![(A, seen(50)), (B, stale(30))]), &opts(&[]));
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
        let r = evaluate(&data(vec![(A, seen(50)), (B, seen(80))]), &opts(&[]));
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
            h.contains(
                "resourceNames: [\"k8s-storage-checks-canary\"], verbs: [\"get\", \"patch\"]"
            ),
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
        let e = o
            .gather(&Ctx::for_test(Duration::from_secs(10)))
            .unwrap_err();
        assert!(!e.0.contains("leaves no room"), "{e}");
        let o = opts(&[
            "-t",
            "10",
            "--deadline",
            "30s",
            "--kubeconfig",
            "/nonexistent",
        ]);
        let e = o
            .gather(&Ctx::for_test(Duration::from_secs(10)))
            .unwrap_err();
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
        let e = o
            .gather(&Ctx::for_test(Duration::from_secs(10)))
            .unwrap_err();
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
        assert!(
            !retryable(&e(Some(403))) && !retryable(&e(Some(404))) && !retryable(&e(Some(401)))
        );
    }
}
