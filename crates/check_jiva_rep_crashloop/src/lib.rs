//! check_jiva_rep_crashloop — crash-looping OpenEBS Jiva replicas and volumes running on fewer
//! replicas than they should.
//!
//! A crash-looping replica leaves its volume on fewer copies without any alert (the incidents:
//! README's table): replicas are found by label *and* by either naming scheme (CSI
//! `<pv>-jiva-rep-N` StatefulSet pods, legacy `<pv>-rep-…` Deployment pods), and every volume is
//! judged by how many of its replicas are healthy.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;
pub mod status;

pub use evaluate::{evaluate, judge, Data, Policy, Replica};
pub use gather::{gather, replica_of};

use clap::Parser;
use kube::{ApiArgs, PodsJsonArg, Selector};
use plugin::{Check, CommonArgs, Ctx, Range, Report, Unknown};
use regex_lite::Regex;
use std::time::Duration;

/// Labels that mark a Jiva replica: jiva-operator (CSI) and legacy maya.
pub const REPLICA_LABELS: &[(&str, &str)] = &[
    ("openebs.io/component", "jiva-replica"),
    ("openebs.io/replica", "jiva-replica"),
];
/// Labels that mark a Jiva controller (the iSCSI target of the volume): jiva-operator and legacy.
pub const CONTROLLER_LABELS: &[(&str, &str)] = &[
    ("openebs.io/component", "jiva-controller"),
    ("openebs.io/controller", "jiva-controller"),
];
/// The label naming a replica's PV.
pub const PV_LABEL: &str = "openebs.io/persistent-volume";
/// The claim's name (without its namespace) on legacy (maya) pods.
pub const PVC_LABEL: &str = "openebs.io/persistent-volume-claim";
/// `<pv>-jiva-ctrl-<hash>-<id>`: jiva-operator's controller Deployment pods.
pub const CSI_CTRL_NAME: &str = r"^(?P<pv>.+)-jiva-ctrl-[a-z0-9]{5,10}-[a-z0-9]{5}$";
/// `<pv>-ctrl-<hash>-<id>`: legacy controller Deployment pods.
pub const LEGACY_CTRL_NAME: &str = r"^(?P<pv>.+)-ctrl-[a-z0-9]{5,10}-[a-z0-9]{5}$";
/// `<pv>-jiva-rep-<N>`: jiva-operator StatefulSet pods.
pub const CSI_NAME: &str = r"^(?P<pv>.+)-jiva-rep-(?P<n>\d+)$";
/// `<pv>-rep-<N>-<hash>[-<id>]` (one Deployment per replica, maya ≥ 1.10) and
/// `<pv>-rep-<hash>-<id>` (one Deployment for all replicas): legacy pods.
pub const LEGACY_NAME: &str = r"^(?P<pv>.+)-rep-(?:(?P<n>\d+)-)?[a-z0-9]{5,10}(?:-[a-z0-9]{5})?$";

#[derive(Debug, Parser)]
#[command(
    name = "check_jiva_rep_crashloop",
    version,
    about = "Alert on crash-looping OpenEBS Jiva replicas and volumes with degraded redundancy",
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this cluster-wide check reads nothing of the host, so it changes nothing)")),
    long_about = "Alert on crash-looping OpenEBS Jiva replicas and volumes with degraded redundancy.\n\n\
Replicas are the pods in --namespace labelled openebs.io/component=jiva-replica (jiva-operator) or \
openebs.io/replica=jiva-replica (legacy), or named <pv>-jiva-rep-<N> (StatefulSet) or \
<pv>-rep-[<N>-]<hash>[-<id>] (legacy Deployments). --selector and --name-regex add other workloads. \
Controllers (the volume's iSCSI target: openebs.io/component=jiva-controller, \
openebs.io/controller=jiva-controller, <pv>-jiva-ctrl-… or <pv>-ctrl-…) are judged like replicas: \
a crash-looping target is as bad as a crash-looping replica. Findings name the claim \
(namespace/pvc, from the PersistentVolumes' claimRef: API or --pvs-json).\n\n\
A replica is crash-looping when a container waits in CrashLoopBackOff, or restarted more than -w \
times with the last restart within --restart-window. That is WARNING, and CRITICAL once unhealthy \
longer than --critical-after or restarted more than -c times. Replicas are grouped by PV (label \
openebs.io/persistent-volume or the name): fewer healthy replicas than pods is WARNING, no healthy \
majority is CRITICAL.\n\n\
Jiva's own status (--jiva-status): each JivaVolume (openebs.io/v1) in --namespace. Target RO or \
Offline is CRITICAL even when every pod is Running; RW replicas at or below half the replication \
factor (quorum lost) CRITICAL; an ERR replica, fewer RW replicas than configured or another status \
WARNING. --min-toleration warns when a Jiva controller would be evicted by a node outage sooner \
than that (the cascade's mitigation, with check_iscsi_sessions --min-recovery-timeout).",
    mut_arg("warning", |a| a.help("Restart-count range: a replica whose count is outside it (default: above 3) and whose last restart was within --restart-window counts as crash-looping (full range grammar: `3:`, `@0:2`, `-w -10:-2`)").default_value("3")),
    mut_arg("critical", |a| a.help("Restart-count range: CRITICAL when a crash-looping replica's count is outside it (default: above 10)").default_value("10"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    /// Critical when a replica has been unhealthy (not Ready) longer than this
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = plugin::args::duration)]
    pub critical_after: Duration,

    /// How recent the last restart must be for -w to count it
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = plugin::args::duration)]
    pub restart_window: Duration,

    /// Namespace of the replicas (repeatable)
    #[arg(long, value_name = "NS", default_value = "openebs")]
    pub namespace: Vec<String>,

    /// Also watch pods matching this label selector (e.g. app=longhorn-replica)
    #[arg(long, value_name = "SELECTOR", value_parser = parse_selector)]
    pub selector: Option<Selector>,

    /// Also watch pods whose name matches this regex; a (?P<pv>…) group names the volume
    #[arg(long, value_name = "REGEX", value_parser = plugin::args::regex)]
    pub name_regex: Option<Regex>,

    /// Jiva's own status, the JivaVolume resources (openebs.io/v1) in --namespace: `auto` reads
    /// them when the API serves them (a note otherwise: legacy Jiva has none), `required` is
    /// UNKNOWN without them, `off` does not read them
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "required", "off"])]
    pub jiva_status: String,

    /// WARNING when a Jiva controller (the iSCSI target) tolerates the node.kubernetes.io/not-ready
    /// or unreachable NoExecute taint for less than this (e.g. 600s; Kubernetes adds 300s,
    /// jiva-operator's default policy 0s); off by default
    #[arg(long, value_name = "DURATION", value_parser = plugin::args::duration)]
    pub min_toleration: Option<Duration>,

    #[command(flatten)]
    pub api: ApiArgs,

    /// `--state-dir`: each volume's degraded and read-only spells, so a finding says how often
    /// in 30 days
    #[command(flatten)]
    pub state: node::history::StateDirArg,

    /// `--host-root`: accepted in container mode like every check's (this cluster-wide check
    /// reads nothing of the host, so it changes nothing).
    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub pods: PodsJsonArg,

    #[command(flatten)]
    pub pvs: kube::PvsJsonArg,
}

fn parse_selector(s: &str) -> Result<Selector, String> {
    Selector::parse(s)
}

/// The memory file's id (`<state-dir>/jiva_rep_crashloop.volumes.json`; a run with other
/// `--namespace`s, `--selector` or `--name-regex` keeps its own, see [`node::history::scoped`]).
pub const CHECK_ID: &str = "jiva_rep_crashloop";

/// The findings the memory of the volumes counts (`--state-dir`), by signal: Jiva's own status
/// and the replica pods' count alike.
pub const MEMORY: &[(&str, node::history::Kind)] = &[
    ("jiva_volume_degraded", node::history::Kind::Degraded),
    ("jiva_quorum_lost", node::history::Kind::Degraded),
    ("degraded_redundancy", node::history::Kind::Degraded),
    ("no_healthy_majority", node::history::Kind::Degraded),
    ("jiva_target_ro", node::history::Kind::ReadOnly),
];

impl Opts {
    pub fn policy(&self) -> Policy {
        Policy {
            // Both have a default (`mut_arg` above): never absent.
            warning: self
                .thresholds
                .warning
                .clone()
                .unwrap_or_else(|| Range::above(3.0)),
            critical: self
                .thresholds
                .critical
                .clone()
                .unwrap_or_else(|| Range::above(10.0)),
            critical_after: self.critical_after,
            restart_window: self.restart_window,
            min_toleration: self.min_toleration,
        }
    }

    /// The options that choose other replicas than the default's, as written (empty for the
    /// default `--namespace openebs` alone): the scope of the memory of the volumes.
    fn scope(&self) -> String {
        let mut parts = kube::args::namespaces_as_written(&self.namespace);
        if parts == ["--namespace openebs"] {
            parts.clear();
        }
        if let Some(s) = &self.selector {
            parts.push(format!("--selector {}", s.as_str()));
        }
        if let Some(r) = &self.name_regex {
            parts.push(format!("--name-regex {}", r.as_str()));
        }
        parts.join(" ")
    }
}

impl Check for Opts {
    const NAME: &'static str = "JIVA_REP_CRASHLOOP";
    const BINARY: &'static str = "check_jiva_rep_crashloop";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin() || self.pvs.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = gather(self, ctx)?;
        let mut r = evaluate(&d, &self.policy(), kube::time::now());
        // The memory of the volumes (--state-dir): how often each was degraded before.
        self.state.keep(
            &node::history::scoped(CHECK_ID, &self.scope()),
            &mut r,
            MEMORY,
        );
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
