//! check_watch_cache: an API server whose watch cache stopped following writes serves stale
//! objects to every cached read while writes still succeed (the incidents: README's table).
//!
//! The check writes a canary — a fresh nonce in an annotation of one ConfigMap (merge-patch; with
//! `--create` the ConfigMap is created when missing) — then reads that ConfigMap back with
//! `resourceVersion=0` from every API server (`--apiserver`, repeatable; default: the kubeconfig's
//! server), polling with a short growing interval until the nonce shows or `--deadline` passes.
//! The lag is the time from the write's answer to the answer of the first read that showed it.
//!
//! CRITICAL: a server's cache did not show the write within `--deadline` (or lagged beyond `-c`);
//! WARNING: lag beyond `-w`; UNKNOWN: the write (or every read) failed.
//!
//! [`Opts::gather`] (write, then RV=0 reads) → [`evaluate`] (pure, on [`Data`] and a [`Policy`]).
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{evaluate, Policy};
pub use gather::{gather, labels, Data, Outcome, ServerResult};

use clap::Parser;
use kube::ApiArgs;
use plugin::{Check, CommonArgs, Ctx, Range, Report, Thresholds, Unknown};
use std::time::Duration;

/// The annotation that carries the nonce.
pub const ANNOTATION: &str = "k8s-storage-checks/canary-nonce";
/// Time -t must leave beyond --deadline: the write before the wait and the last read after it.
pub const T_MARGIN: Duration = Duration::from_secs(2);
/// First pause between two RV=0 reads; it grows by half each time up to [`POLL_MAX`].
pub const POLL_FIRST: Duration = Duration::from_millis(50);
pub const POLL_MAX: Duration = Duration::from_secs(1);

/// `-w`'s default: a watch cache lagging a write by more than 2 s.
const WARNING_DEFAULT: &str = "2s";
const WARNING_DEFAULT_SECS: f64 = 2.0;

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
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this cluster-level check reads nothing of the host, so it changes nothing)")),
    mut_arg("warning", |a| a.help("Warn when a watch cache lags a write by more than this (duration range)").value_name("DURATION").default_value(WARNING_DEFAULT).value_parser(plugin::args::duration_range)),
    mut_arg("critical", |a| a.help("Critical when a watch cache lags a write by more than this (duration range; default: the --deadline value)").value_name("DURATION").value_parser(plugin::args::duration_range))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

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

impl Opts {
    /// The policy: the thresholds in force, and a note when -w had to be lowered: a plain `-w X`
    /// at or above a plain `-c Y` (by default the --deadline) could never raise WARNING, so it
    /// becomes Y/2.
    pub fn policy(&self) -> Policy {
        // -w always has a value (its default); the fallback only serves an Opts built by hand.
        let warning = self
            .thresholds
            .warning
            .clone()
            .unwrap_or_else(|| Range::above(WARNING_DEFAULT_SECS));
        let crit = self
            .thresholds
            .critical
            .clone()
            .unwrap_or_else(|| Range::above(self.deadline.as_secs_f64()));
        let plain = |r: &Range| match (r.start, r.end, r.inside) {
            (Some(0.0), Some(e), false) => Some(e),
            _ => None,
        };
        if let (Some(w), Some(c)) = (plain(&warning), plain(&crit)) {
            if w >= c {
                let lowered = Range::above(c / 2.0);
                let note = format!(
                    "-w {} is not below the critical lag {} (-c or --deadline): WARNING uses {}",
                    plugin::args::duration_range_text(&warning),
                    plugin::args::duration_range_text(&crit),
                    plugin::args::duration_range_text(&lowered),
                );
                return Policy {
                    thresholds: Thresholds::new(Some(lowered), Some(crit)),
                    lowered: Some(note),
                };
            }
        }
        Policy {
            thresholds: Thresholds::new(Some(warning), Some(crit)),
            lowered: None,
        }
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

    pub(crate) fn path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/configmaps/{}",
            self.namespace, self.name
        )
    }
}

impl Check for Opts {
    const NAME: &'static str = "WATCH_CACHE";
    const BINARY: &'static str = "check_watch_cache";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = gather(self, ctx)?;
        Ok(evaluate(&d, &self.policy()))
    }
}

#[cfg(test)]
mod tests;
