//! check_longhorn_volumes — Longhorn volumes judged by Longhorn's own objects
//! (`volumes.longhorn.io`, `replicas.longhorn.io`, `engines.longhorn.io`), cluster-wide or for
//! the volumes attached to or having a replica on one node (issue 30).
//!
//! Field names and values are Longhorn's (longhorn-manager `k8s/pkg/apis/longhorn/v1beta2`:
//! `volume.go`, `replica.go`, `engine.go`; the engine condition `FilesystemReadOnly` from
//! longhorn-instance-manager `pkg/types`), read through the API version the server serves:
//! v1beta2, else v1beta1.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{evaluate, Data, Engine, Replica, Volume, Workload};
pub use gather::{gather, Cond, LhEngine, LhReplica, LhVolume};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use std::time::Duration;

/// The memory file's id (`<state-dir>/longhorn_volumes.volumes.json`; a run with `--node` keeps
/// its own, see [`node::history::scoped`]).
pub const CHECK_ID: &str = "longhorn_volumes";

/// The findings the memory of the volumes counts (`--state-dir`), by signal.
pub const MEMORY: &[(&str, node::history::Kind)] = &[
    ("longhorn_volume_degraded", node::history::Kind::Degraded),
    ("longhorn_no_healthy_replica", node::history::Kind::Degraded),
    ("longhorn_volume_faulted", node::history::Kind::Degraded),
    (
        "longhorn_filesystem_read_only",
        node::history::Kind::ReadOnly,
    ),
];

/// Longhorn's API group.
pub const GROUP: &str = "longhorn.io";
/// The versions read, preferred first: v1beta2 (Longhorn ≥ 1.3), v1beta1 (older).
pub const VERSIONS: &[&str] = &["v1beta2", "v1beta1"];

#[derive(Debug, Parser)]
#[command(
    name = "check_longhorn_volumes",
    version,
    about = "Alert on faulted, degraded, read-only or stuck Longhorn volumes, from Longhorn's own objects",
    mut_arg("warning", |a| a.help("Range of an attached volume's healthy replicas: outside it WARNING (e.g. `3:`; default: Longhorn's own `degraded`)")),
    mut_arg("critical", |a| a.help("Range of an attached volume's healthy replicas: outside it CRITICAL (e.g. `2:` pages at 1 healthy of 3; none healthy is always CRITICAL)")),
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this check reads nothing of the host, so it changes nothing)")),
    long_about = "Alert on faulted, degraded, read-only or stuck Longhorn volumes, from Longhorn's own objects.\n\n\
Reads volumes.longhorn.io, replicas.longhorn.io and engines.longhorn.io (API version v1beta2, else \
v1beta1), cluster-wide, or with --node the volumes attached to that node or with a replica or \
engine on it. CRITICAL: robustness faulted; attached with no healthy replica; the engine's \
FilesystemReadOnly condition; a workload pod Running while the volume is detached, attaching or \
detaching, unchanged longer than --stuck-after (the time of the volume's last status write). \
WARNING: robustness degraded (how long, healthy replicas of how many); a failed replica with no \
rebuild under way; robustness unknown while attached. -w/-c: ranges of an attached volume's \
healthy replicas (e.g. -w 3: -c 2:), escalating past Longhorn's own degraded. Findings name the claim (namespace/pvc), \
the workload pods, the node, the failed replica and its node, and Longhorn's condition messages. \
Longhorn not installed (no longhorn.io API), no volumes, or no permission: UNKNOWN with the reason."
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    /// Only the volumes attached to this node or with a replica or engine on it (default: all)
    #[arg(long, value_name = "NAME", help_heading = "Kubernetes API")]
    pub node: Option<String>,

    /// A volume detached, attaching or detaching while a workload pod runs is CRITICAL once its
    /// status has not changed for this long
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = plugin::args::duration)]
    pub stuck_after: Duration,

    #[command(flatten)]
    pub api: kube::ApiArgs,

    /// `--state-dir`: each volume's degraded and read-only spells, so a finding says how often
    /// in 30 days
    #[command(flatten)]
    pub state: node::history::StateDirArg,

    /// `--host-root`: accepted in container mode like every check's (this cluster-wide check
    /// reads nothing of the host, so it changes nothing).
    #[command(flatten)]
    pub host: node::HostRootArg,
}

impl Opts {
    /// The memory's id of this run: the cluster-wide run's, or one per `--node`.
    fn memory_id(&self) -> String {
        let scope = self
            .node
            .as_ref()
            .map(|n| format!("--node {n}"))
            .unwrap_or_default();
        node::history::scoped(CHECK_ID, &scope)
    }
}

impl Check for Opts {
    const NAME: &'static str = "LONGHORN_VOLUMES";
    const BINARY: &'static str = "check_longhorn_volumes";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = gather(self, ctx)?;
        let mut r = evaluate(
            &d,
            &self.thresholds.thresholds(),
            self.stuck_after,
            kube::time::now(),
        );
        // The memory of the volumes (--state-dir): how often each was degraded before.
        self.state.keep(&self.memory_id(), &mut r, MEMORY);
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
