//! check_stuck_terminating: pods wedged in Terminating, where a failed volume teardown that is
//! never retried shows (the incidents: README's table).
//!
//! A pod is terminating when it has a `deletionTimestamp`. The API sets that to the time of the
//! delete request *plus* the grace period (`deletionGracePeriodSeconds`): it is the moment the
//! pod should be gone. The pod is **overdue** by `now - deletionTimestamp`, and WARNING/CRITICAL
//! when overdue longer than `--warning-after` (5m) / `--critical-after` (10m). Per wedged pod:
//! node, time since the delete request, the grace period, finalizers still present, and (API
//! only) the latest teardown failure among its events (`FailedKillPod`, `FailedUnmount`, or any
//! message with `UnmountVolume.TearDown failed`). When that message names a pod volume mount path
//! (`…/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`), a hint line gives the recovery step.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{
    classify, csi_pv_of, evaluate, failed_mount_path, is_teardown_failure, latest_teardown,
    pod_mounts, pod_pvs, stuck_pvs, Data, Policy, Teardown, Terminating, DEFAULT_GRACE,
};
pub use gather::{gather, remember, CHECK_ID};

use clap::Parser;
use kube::checks::stuck::StuckArgs;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};

#[derive(Debug, Parser)]
#[command(
    name = "check_stuck_terminating",
    version,
    about = "Alert on pods wedged in Terminating",
    long_about = "Alert on pods wedged in Terminating.\n\n\
A pod is terminating once it has a deletionTimestamp, which the API sets to the delete request \
plus the grace period: the moment the pod should be gone. It is wedged when it is still there \
longer than --warning-after or --critical-after past that moment (a volume teardown that failed \
and is never retried, a finalizer nobody removes, a kubelet that cannot kill a container).\n\n\
Reads pods on this node from the API (--all-nodes, --namespace to widen or narrow), or from \
`kubectl get pods -A -o json` output with --pods-json. For each wedged pod its finalizers and the \
latest FailedKillPod/FailedUnmount event are shown (--no-events to skip the event lookup). On \
the pods' own node the mount table tells which of a wedged pod's volumes are still mounted (by \
its UID under the kubelet root: events expire after an hour, mounts do not), and a hint gives the \
recovery step, paste-safe: umount them; elsewhere a failed unmount event naming a pod volume \
mount path gives it. A pod both Terminating and never started is reported here (saying it never started), not \
by check_stuck_scheduled.\n\nExit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."
,
    mut_arg("warning", |a| a.help("Warn when a pod is still there this long after its grace period ended (duration range)").visible_alias("warning-after")),
    mut_arg("critical", |a| a.help("Critical when a pod is still there this long after its grace period ended (duration range)").visible_alias("critical-after")),
    mut_arg("no_events", |a| a.help("Do not look up FailedKillPod/FailedUnmount events for wedged pods"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub stuck: StuckArgs,

    /// `--host-root`: in a container the node name comes from $NODE_NAME or the host's
    /// /etc/hostname, and the mount table is the host's.
    #[command(flatten)]
    pub host: node::HostRootArg,

    /// Where a wedged pod's volume mounts are looked up on this node
    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    /// `--state-dir`: each PV's stuck spells (a wedged pod's volumes, where known), so a finding
    /// says how often in 30 days
    #[command(flatten)]
    pub state: node::history::StateDirArg,
}

impl Opts {
    pub fn policy(&self) -> Policy {
        self.stuck.policy()
    }
}

impl Check for Opts {
    const NAME: &'static str = "STUCK_TERMINATING";
    const BINARY: &'static str = "check_stuck_terminating";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.stuck.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let now = kube::time::now();
        let mut d = gather(self, ctx, now)?;
        let policy = self.policy();
        // The stuck spells of the wedged pods' PVs (--state-dir).
        let pvs = stuck_pvs(&d, &policy, now);
        remember(self, &mut d, &pvs, ctx);
        Ok(evaluate(&d, &policy, now))
    }
}

#[cfg(test)]
mod tests;
