//! check_stuck_scheduled: pods scheduled to a node that never got a single container running,
//! the visible sign of a kubelet whose volume work is wedged (the incidents: README's table).
//!
//! A pod is stuck when it is `Pending`, `PodScheduled=True`, and either
//! - **no-status**: it has no container and no init-container status at all (the kubelet never
//!   synced it), or
//! - **creating**: every container and init container still waits in `ContainerCreating` or
//!   `PodInitializing` (newer kubelets publish those statuses at once);
//!
//! for longer than the thresholds (`-w 5m -c 10m`), measured from the PodScheduled transition.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{
    classify, evaluate, event_pvs, is_volume_failure, latest_volume_event, recall, stuck_pvs,
    Candidate, Data, Policy, Rule,
};
pub use gather::{gather, remember, CHECK_ID};

use clap::Parser;
use kube::checks::stuck::StuckArgs;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};

#[derive(Debug, Parser)]
#[command(
    name = "check_stuck_scheduled",
    version,
    about = "Alert on pods scheduled to a node that never started a container",
    long_about = "Alert on pods scheduled to a node that never started a container.\n\n\
A pod is stuck when it is Pending with PodScheduled=True and has no container or init-container \
status at all, or all of its containers still wait in ContainerCreating/PodInitializing, for longer \
than the thresholds (measured from the PodScheduled transition). Typical cause: a CSI mount or \
attach that never completes, or a kubelet volume queue wedged by a stale mount. A pod that is \
also Terminating (deletionTimestamp set) is left to check_stuck_terminating, which says it never \
started.\n\n\
Reads pods on this node from the API (--all-nodes, --namespace to widen or narrow), or from \
`kubectl get pods -A -o json` output with --pods-json. For each stuck pod the latest \
FailedMount/FailedAttachVolume event is shown (--no-events to skip)."
,
    mut_arg("warning", |a| a.help("Warn when a pod has been stuck longer than this (duration range)")),
    mut_arg("critical", |a| a.help("Critical when a pod has been stuck longer than this (duration range)")),
    mut_arg("no_events", |a| a.help("Do not look up FailedMount/FailedAttachVolume events for stuck pods"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub stuck: StuckArgs,

    /// `--host-root`: in a container the default node name is $NODE_NAME or the host's
    /// /etc/hostname, not the pod's.
    #[command(flatten)]
    pub host: node::HostRootArg,

    /// `--state-dir`: each PV's stuck spells (the PVs a stuck pod's volume events name), so a
    /// finding says how often in 30 days
    #[command(flatten)]
    pub state: node::history::StateDirArg,
}

impl Opts {
    pub fn policy(&self) -> Policy {
        self.stuck.policy()
    }
}

impl Check for Opts {
    const NAME: &'static str = "STUCK_SCHEDULED";
    const BINARY: &'static str = "check_stuck_scheduled";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.stuck.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let now = kube::time::now();
        let d = gather(self, ctx, now)?;
        let policy = self.policy();
        let mut r = evaluate(&d, &policy, now);
        // The stuck spells of the stuck pods' PVs (--state-dir).
        if let Some(m) = remember(self, &stuck_pvs(&d, &policy, now), ctx) {
            recall(&mut r, &d, &m);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
