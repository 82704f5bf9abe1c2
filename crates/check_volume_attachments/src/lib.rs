//! check_volume_attachments — the attach/detach plane, cluster-wide or for one node (issue 30):
//! VolumeAttachments (storage.k8s.io/v1) held by a node that no longer exists or is NotReady,
//! attaches and detaches that do not finish (with the driver's `attachError`/`detachError`), and
//! the Multi-Attach errors that only `FailedAttachVolume` events show, each named as operators
//! know it: the claim (`namespace/pvc`), its PV, the pods that use it, the node.
//!
//! The Multi-Attach message formats are the attach/detach controller's (kubernetes
//! `pkg/controller/volume/attachdetach/reconciler/reconciler.go`, `reportMultiAttachError`, and
//! `generateVolumeMsg` in `pkg/volume/util/operationexecutor`).
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{
    evaluate, parse_multi_attach, Attachment, Data, MultiAttach, NodeState, PodUse, Policy,
};
pub use gather::{gather, NAMESPACES_MAX, OBJECTS_MAX};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "check_volume_attachments",
    version,
    about = "Alert on VolumeAttachments held by gone or NotReady nodes, attaches and detaches that do not finish, and Multi-Attach errors",
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this check reads nothing of the host, so it changes nothing)")),
    long_about = "Alert on VolumeAttachments held by gone or NotReady nodes, attaches and detaches that do not finish, and Multi-Attach errors.\n\n\
Reads VolumeAttachments (storage.k8s.io/v1), Nodes, FailedAttachVolume events, PersistentVolumes \
and the pods of the claims' namespaces, cluster-wide, or with --node the attachments to that node \
and the Multi-Attach errors of pods on it or of volumes held by it. CRITICAL: an attachment still \
attached to (or detaching from) a node that no longer exists; an attachment on a node NotReady \
(Ready False or Unknown) longer than --stuck-after; a pod that still waits on a Multi-Attach error \
(named with the node and the pods that hold the volume). WARNING: an attach (status.attached \
false) or a detach (deletion requested, still attached) pending longer than --stuck-after (or -w), \
with the driver's attachError/detachError; CRITICAL past -c. Findings name the claim \
(namespace/pvc), the PV, the pods using it and the node. No VolumeAttachment is OK and says \
\"0 VolumeAttachments\"; no permission or no API: UNKNOWN with the reason.\n\n\
Exit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
    mut_arg("warning", |a| a.help("A pending attach or detach older than this is WARNING (duration range; default: --stuck-after)").value_name("DURATION").value_parser(plugin::args::duration_range)),
    mut_arg("critical", |a| a.help("A pending attach or detach older than this is CRITICAL (duration range; default: never by age alone)").value_name("DURATION").value_parser(plugin::args::duration_range))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    /// Only the attachments to this node, and the Multi-Attach errors of its pods or of volumes
    /// it holds (default: all)
    #[arg(long, value_name = "NAME", help_heading = "Kubernetes API")]
    pub node: Option<String>,

    /// An attachment on a NotReady node is CRITICAL once the node has been NotReady this long;
    /// an attach or detach pending this long is WARNING (unless -w says otherwise)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = plugin::args::duration)]
    pub stuck_after: Duration,

    #[command(flatten)]
    pub api: kube::ApiArgs,

    /// `--host-root`: accepted in container mode like every check's (this cluster-wide check
    /// reads nothing of the host, so it changes nothing).
    #[command(flatten)]
    pub host: node::HostRootArg,
}

impl Opts {
    pub fn policy(&self) -> Policy {
        Policy {
            stuck_after: self.stuck_after,
            warning: self.thresholds.warning.clone(),
            critical: self.thresholds.critical.clone(),
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "VOLUME_ATTACHMENTS";
    const BINARY: &'static str = "check_volume_attachments";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = gather(self, ctx)?;
        Ok(evaluate(&d, &self.policy(), kube::time::now()))
    }
}

#[cfg(test)]
mod tests;
