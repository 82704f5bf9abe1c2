//! check_csi_node_plugins — the CSI node plugins the kubelet depends on, on one node (issue 30):
//! for every driver registered in the node's CSINode and every driver a CSI volume of a pod on
//! this node uses (`<kubelet-root>/pods/*/volumes/kubernetes.io~csi/*/vol_data.json`):
//!
//! - its registration socket under `<kubelet-root>/plugins_registry/` answers the kubelet's
//!   plugin-registration `GetInfo` (k8s.io/kubelet `pkg/apis/pluginregistration/v1`) naming it;
//! - its endpoint (GetInfo's `endpoint`, else `<kubelet-root>/plugins/<driver>/csi.sock`) answers
//!   CSI `Identity/Probe` (ready, or `ready` absent, which the CSI spec lets a CO take as ready)
//!   and `Identity/GetPluginInfo` with the same name, all within `--probe-timeout`;
//! - it is listed in the node's CSINode (storage.k8s.io/v1);
//! - its node-plugin pod on this node is Ready and not in CrashLoopBackOff.
//!
//! **Which pod is a driver's node plugin**: a pod bound to this node that mounts, as a hostPath,
//! the directory of the driver's endpoint socket (every node plugin must share that directory
//! with the kubelet: `plugins/<dir>/`, a `socket-dir` volume in csi-driver-host-path's,
//! Longhorn's and the other deploy manifests), or whose node-driver-registrar container's
//! `--kubelet-registration-path` is that endpoint. The directory name need not be the driver's
//! (csi-driver-host-path's is `plugins/csi-hostpath` for `hostpath.csi.k8s.io`), which is why the
//! endpoint — what the registrar told the kubelet — decides, not the name. A driver with no such
//! pod (one run by systemd, say) gets a note, not an alert.
//!
//! **API unreachable or forbidden**: the node-side calls are still made and reported (they need
//! no API); the answer is UNKNOWN with the reason, unless a node-side finding is worse (a socket
//! that does not answer stays CRITICAL: it needs no API to be known).
//!
//! The gRPC calls are made by `node::csi` (HTTP/2 by hand with an HPACK decoder crate; the cost
//! in the release program is in `docs/checks/check_csi_node_plugins.md`, "Limits").
#![forbid(unsafe_code)]

mod evaluate;
mod gather;

pub use evaluate::{evaluate, Api, Data, DriverCalls, PodView, Policy, Registration};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "check_csi_node_plugins",
    version,
    mut_arg("warning", |a| a.help("Range on the number of unhealthy drivers (WARNING or CRITICAL findings) for WARNING; with -w/-c the count decides the state instead of each finding's own")),
    mut_arg("critical", |a| a.help("Range on the number of unhealthy drivers for CRITICAL")),
    about = "Alert on CSI node plugins the kubelet cannot use: unregistered drivers, sockets that do not answer, drivers missing from CSINode, unready plugin pods",
    long_about = "Alert on CSI node plugins the kubelet cannot use.\n\n\
For every CSI driver in this node's CSINode (storage.k8s.io/v1) and every driver a CSI volume of a \
pod on this node uses (vol_data.json under the kubelet root): its registration socket in \
<kubelet-root>/plugins_registry/ must answer the kubelet's plugin-registration GetInfo; its \
endpoint (GetInfo's, else <kubelet-root>/plugins/<driver>/csi.sock) must answer CSI \
Identity/Probe and GetPluginInfo within --probe-timeout; the driver must be listed in the \
CSINode; its node-plugin pod on this node (the pod that mounts the directory of the endpoint as a \
hostPath, or whose node-driver-registrar registers that endpoint) must be Ready and not in \
CrashLoopBackOff. CRITICAL: a driver used by a volume or listed in CSINode that is not \
registered, a registration or driver socket that is missing, refuses or does not answer in time, \
a driver missing from CSINode, an unready or crash-looping plugin pod. WARNING: a driver whose \
Probe says it is not ready yet. Sockets are connected to only beneath the kubelet root, never \
through a symbolic link. No drivers and no CSI volumes is OK and says so. The API unreachable or \
forbidden is UNKNOWN with the reason, the socket calls still reported (a CRITICAL among them stays \
CRITICAL).\n\n\
Exit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    /// How long one plugin's sockets may take to answer their gRPC calls (GetInfo, then Probe and
    /// GetPluginInfo), capped by what is left of -t; must be greater than 0
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = plugin::args::positive_duration)]
    pub probe_timeout: Duration,

    #[command(flatten)]
    pub api: kube::ApiArgs,

    #[command(flatten)]
    pub node: kube::NodeArg,

    /// `--host-root` (container mode: the kubelet root and its sockets are reached through it).
    #[command(flatten)]
    pub host: node::HostRootArg,
}

impl Opts {
    pub fn policy(&self) -> Policy {
        Policy {
            probe_timeout: self.probe_timeout,
            thresholds: self.thresholds.thresholds(),
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "CSI_NODE_PLUGINS";
    const BINARY: &'static str = "check_csi_node_plugins";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = gather::gather(self, ctx)?;
        Ok(evaluate(&d, &self.policy()))
    }
}

#[cfg(test)]
mod tests;
