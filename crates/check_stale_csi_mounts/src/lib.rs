//! check_stale_csi_mounts: CSI mounts that wedge the kubelet's volume queue (corrupted, hung,
//! orphaned, stale or unpublished), found by probing every CSI mount under the kubelet root and
//! cross-checking it with the pods, PVs and VolumeAttachments of the API.
//!
//! [`gather`] (mount table, vol_data.json, cluster view, bounded-time probes) → [`evaluate`]
//! (pure, on [`Data`] and a [`Policy`]) → rendering by `plugin`; the text of findings is in
//! `text`.
#![forbid(unsafe_code)]

pub mod cluster;
mod evaluate;
mod gather;
pub mod identity;
pub mod problem;
mod text;

pub use cluster::ClusterView;
pub use evaluate::{evaluate, Policy};
pub use gather::{api_budget, gather, probe_budget, CsiMount, Data, MAX_PARALLEL};
pub use identity::{identify, selected, Identity};
pub use problem::{problems, Problem};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};

const LONG_ABOUT: &str = "\
Find the CSI mounts that deadlock the kubelet.

Every CSI mount under the kubelet root(s) - staging (globalmount, both path schemes), pod publish \
mounts and block volumeDevices - is probed (stat, statfs, readdir) concurrently, a probe that does \
not answer being abandoned, and classified:
  corrupted   the probe fails with ENOTCONN, ESTALE, EIO, EACCES or EHOSTDOWN     CRITICAL
  hung        no answer within --probe-timeout                                  CRITICAL
  orphaned    a pod mount whose pod is not a pod of this node                   CRITICAL
  stale       a staging mount whose PV is gone or has no VolumeAttachment here  CRITICAL
  unpublished a staging mount no pod mount shares (device or PV)                WARNING
The pod and PV cross-checks need the cluster view: from the API (credentials: --kubeconfig or \
the usual lookup), or from --pods-json (kubectl get pods -A -o json) and --pvs-json (kubectl get \
pv,volumeattachments,csidrivers -o json). Without credentials the summary says the cross-checks were skipped; a failing API is \
UNKNOWN unless a mount is worse. -w/-c ranges on the number of stale mounts replace the per-class \
states.";

#[derive(Parser, Debug)]
#[command(
    name = "check_stale_csi_mounts",
    version,
    about = "Find corrupted, hung, orphaned and stale CSI mounts under the kubelet root",
    long_about = LONG_ABOUT,
    mut_arg("pods_json", |a| a.help("Pods as `kubectl get pods -A -o json` prints them (all nodes are fine) instead of the API; `-` reads stdin")),
    mut_arg("pvs_json", |a| a.help("PVs, and VolumeAttachments/CSIDrivers in the same List, as `kubectl get pv,volumeattachments,csidrivers -o json` prints them, instead of the API; `-` reads stdin")),
    mut_arg("include", |a| a.help("Check only mounts whose mount point, PV or driver matches REGEX (repeatable)")),
    mut_arg("exclude", |a| a.help("Skip mounts whose mount point, PV or driver matches REGEX (repeatable)")),
    mut_arg("warning", |a| a.help("Range on the number of stale mounts for WARNING (with -w/-c the count decides the state)")),
    mut_arg("critical", |a| a.help("Range on the number of stale mounts for CRITICAL"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    #[command(flatten)]
    pub probe: node::ProbeTimeoutArg,

    #[command(flatten)]
    pub api: kube::ApiArgs,

    #[command(flatten)]
    pub node: kube::NodeArg,

    /// `--host-root` (container mode: the mount table and mount points are read through it).
    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub pods: kube::PodsJsonArg,

    #[command(flatten)]
    pub pvs: kube::PvsJsonArg,

    #[command(flatten)]
    pub filter: node::FilterArgs,

    #[command(flatten)]
    pub run_dir: node::RunDirArg,
}

impl Opts {
    pub fn policy(&self) -> Policy {
        Policy {
            thresholds: self.thresholds.thresholds(),
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "STALE_CSI_MOUNTS";
    const BINARY: &'static str = "check_stale_csi_mounts";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin() || self.pvs.reads_stdin()
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let data = gather(self, ctx)?;
        Ok(evaluate(&data, &self.policy()))
    }
}

#[cfg(test)]
mod tests;
