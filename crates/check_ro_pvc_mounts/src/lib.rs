//! check_ro_pvc_mounts: PersistentVolume filesystems that can no longer be written.
//!
//! gather (`gather.rs`) → evaluate (`evaluate.rs`, pure; the words in `text.rs`) → the plugin
//! runtime renders. A PV filesystem counts as read-only when the *filesystem* can no longer be
//! written, whatever way the running kernel shows it (see [`judge`]); a read-only *bind* (a
//! `readOnly: true` volume) is not an alarm.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;
mod text;

use evaluate::evaluate_shown;
pub use evaluate::{evaluate, evaluate_named, judge, read_only_pvs, signal_of, wanted, Verdict};
pub use gather::{gather, group, node_filesystems, remember, NodeData, NodeFs, Volume, CHECK_ID};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};

#[derive(Parser, Debug)]
#[command(
    name = "check_ro_pvc_mounts",
    version,
    about = "Alert on PersistentVolume filesystems that can no longer be written",
    long_about = "Alert on PersistentVolume filesystems that can no longer be written (ext4 remounted \
read-only or in emergency read-only, XFS shut down, volumes that no longer answer), without alarming \
on volumes mounted readOnly on purpose.\n\nExit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
    mut_arg("include", |a| a.help("Only mount points matching REGEX (repeatable: any of them)")),
    mut_arg("exclude", |a| a.help("Skip mount points matching REGEX, even when --include matches too (repeatable)")),
    mut_arg("warning", |a| a.help("Range on the number of read-only PV filesystems that raises WARNING").default_value("0")),
    mut_arg("critical", |a| a.help("Range on the number of read-only PV filesystems that raises CRITICAL").default_value("0"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub sys: node::SysArg,

    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub run_dir: node::RunDirArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    #[command(flatten)]
    pub filter: node::FilterArgs,

    #[command(flatten)]
    pub probe: node::ProbeTimeoutArg,

    /// `--state-dir`: each PV's read-only spells, so a finding says how often in 30 days
    #[command(flatten)]
    pub state: node::history::StateDirArg,

    /// Names an operator knows: pods and claims of the volumes in non-OK findings
    #[command(flatten)]
    pub names: kube::checks::names::NamesArgs,

    /// The node named in findings and next steps (`kubectl cordon NODE`) when the pods'
    /// `spec.nodeName` is not known
    #[command(flatten)]
    pub node: kube::NodeArg,
}

impl Check for Opts {
    const NAME: &'static str = "RO_PVC_MOUNTS";
    const BINARY: &'static str = "check_ro_pvc_mounts";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let mut data = gather(self, ctx)?;
        // Names only after the node's own work, and only for what will be reported.
        let names = kube::checks::names::resolve(&self.names, &wanted(&data), ctx);
        // The read-only spells of each PV (--state-dir), now that the names tell intent.
        let ro = read_only_pvs(&data, &names);
        remember(self, &mut data, &ro, ctx);
        ctx.stage("evaluating");
        let t = self.thresholds.thresholds();
        // OK volumes' findings only when the output prints them (-v, JSON).
        let ok_findings =
            self.common.verbose > 0 || self.common.format == plugin::render::Format::Json;
        let report = evaluate_shown(&data, &t, &names, ok_findings);
        // The worker exits as soon as the report is sent: freeing thousands of volumes' small
        // allocations one by one would be most of a large node's run time, for nothing.
        std::mem::forget(data);
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
