//! The canary write and the RV=0 reads of every API server, polled until the nonce shows or the
//! deadline passes: plain [`Data`] for `evaluate`.

use crate::{Opts, ANNOTATION, POLL_FIRST, POLL_MAX, T_MARGIN};
use kube::{ApiError, Client, Config};
use plugin::{fmt_duration, Ctx, Unknown};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

/// A nonce no earlier run wrote: wall-clock nanoseconds and the pid.
pub(crate) fn nonce() -> String {
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

pub(crate) fn annotation(v: &Value) -> Option<String> {
    v["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(|s| s.to_string())
}

/// Retry a failed read? Only when the failure may pass (no answer, throttling, server errors).
pub(crate) fn retryable(e: &ApiError) -> bool {
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
}

/// All I/O: the write, then the RV=0 reads of every server (one thread each).
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let t = opts.common.timeout.duration;
    if t < opts.deadline + T_MARGIN {
        return Err(Unknown(format!(
            "-t {} leaves no room for --deadline {}: give -t {} or more (and keep NRPE's \
             command_timeout above it), or a shorter --deadline",
            fmt_duration(t),
            fmt_duration(opts.deadline),
            fmt_duration(opts.deadline + T_MARGIN).trim_end_matches('s')
        )));
    }
    // This check writes and reads through the API: there is no --pods-json to offer.
    let cfg = kube::config(&opts.api, ctx)
        .map_err(|e| Unknown(e.0.replace(" (or --pods-json FILE)", "")))?;
    let servers: Vec<String> = if opts.apiserver.is_empty() {
        vec![cfg.server.clone()]
    } else {
        opts.apiserver
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
        opts.namespace,
        opts.name,
        writer.server()
    ));
    let created = opts.write(&writer, &nonce);
    for l in writer.requests() {
        ctx.debug(l);
    }
    let created = created?;
    let written = Instant::now();
    let until = written + opts.deadline;
    // A read may still be under way at `until`; give it a little, within -t.
    let read_deadline = ctx.deadline().min(until + T_MARGIN / 2);
    let clients = servers
        .iter()
        .map(|s| Client::new(&config_for(s), read_deadline))
        .collect::<Result<Vec<_>, _>>()?;
    ctx.stage(format!(
        "waiting for the watch cache of {} to reflect the canary write (RV=0 reads)",
        if servers.len() == 1 {
            clients[0].server().to_string()
        } else {
            format!("{} API servers", servers.len())
        }
    ));
    let outcomes: Vec<Outcome> = std::thread::scope(|sc| {
        let handles: Vec<_> = clients
            .iter()
            .map(|c| sc.spawn(|| opts.poll(c, &nonce, written, until)))
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
    // Shown, labelled and reported by their redacted form (no userinfo or query string).
    let servers: Vec<String> = clients.iter().map(|c| c.server().to_string()).collect();
    let labels = labels(&servers);
    Ok(Data {
        canary: format!("{}/{}", opts.namespace, opts.name),
        written_via: writer.server().to_string(),
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
