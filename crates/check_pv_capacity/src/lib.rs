//! check_pv_capacity: PersistentVolume filesystems filling up, bytes and inodes, named by claim,
//! with a days-to-full prediction from the check's own history (issue 31).
//!
//! A check of its own rather than a mode of check_ro_pvc_mounts: its thresholds are free space
//! (`check_disk`'s `-w 20%`), not a count of broken volumes, it keeps a history in the state
//! directory, and a full volume and a read-only one are different incidents with different
//! next steps; it shares the gathering (kubelet mounts → PV filesystems, the bounded probe, which
//! now also keeps `statvfs`) through `crates/node`.
//!
//! gather (`gather.rs`) → evaluate (`evaluate.rs`, pure; the fit in `history.rs`) → the plugin
//! runtime renders.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;
pub mod history;
pub mod limit;

pub use evaluate::{evaluate, evaluate_named, wanted, Policy};
pub use gather::{gather, group, NodeData, Volume};
pub use limit::Limit;

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use std::path::PathBuf;
use std::time::Duration;

const LONG_ABOUT: &str = "\
Alert on PersistentVolume filesystems filling up: bytes and inodes used per PV filesystem under \
the kubelet root(s), named by claim, and a days-to-full prediction from this check's own history.

Thresholds follow monitoring-plugins' check_disk: -w/-c on free space (of what a pod may write, \
f_bavail) as a percentage (-w 15%) or an amount (-w 2G; a plain number is MiB), -W/-K on free \
inodes (a percentage or a count); a monitoring-plugins range (10:, @0:5) is a range on the free \
percentage. The defaults are kubernetes-mixin's: CRITICAL under 3% free, \
WARNING under 15% free, for bytes and inodes alike.

With --state-dir every run keeps one sample per volume; a least-squares line over the samples of \
the last --predict-window (default 6h, as kubernetes-mixin's KubePersistentVolumeFillingUp) says \
when the volume fills up; WARNING when that is within --predict-within (default 4d). Volumes \
mounted read-only by design are measured but never judged full. A volume whose mount does not \
answer is UNKNOWN (check_ro_pvc_mounts and check_stale_csi_mounts say why).

Exit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.";

#[derive(Parser, Debug)]
#[command(
    name = "check_pv_capacity",
    version,
    about = "Alert on PersistentVolume filesystems filling up (bytes, inodes, days to full)",
    long_about = LONG_ABOUT,
    mut_arg("include", |a| a.help("Only volumes whose mount point or PV name matches REGEX (repeatable: any of them)")),
    mut_arg("exclude", |a| a.help("Skip volumes whose mount point or PV name matches REGEX, even when --include matches too (repeatable)"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// WARNING when a volume's free space is below this: a percentage (15%) or an amount (2G, 500M; a plain number is MiB); a range (10:, @0:5) is a range on the free percentage
    #[arg(short = 'w', long = "warning", value_name = "FREE", default_value = "15%", allow_hyphen_values = true, value_parser = limit::bytes)]
    pub warning: Limit,

    /// CRITICAL when a volume's free space is below this (as -w)
    #[arg(short = 'c', long = "critical", value_name = "FREE", default_value = "3%", allow_hyphen_values = true, value_parser = limit::bytes)]
    pub critical: Limit,

    /// WARNING when a volume's free inodes are below this: a percentage (15%) or a count; a range is on the free percentage
    #[arg(short = 'W', long = "iwarning", value_name = "FREE", default_value = "15%", allow_hyphen_values = true, value_parser = limit::inodes)]
    pub iwarning: Limit,

    /// CRITICAL when a volume's free inodes are below this (as -W)
    #[arg(short = 'K', long = "icritical", value_name = "FREE", default_value = "3%", allow_hyphen_values = true, value_parser = limit::inodes)]
    pub icritical: Limit,

    /// WARNING when the prediction says a volume fills up (bytes or inodes) within DURATION (0: no prediction)
    #[arg(long, value_name = "DURATION", default_value = "4d", value_parser = plugin::args::duration)]
    pub predict_within: Duration,

    /// The samples of the last DURATION make the prediction (a least-squares line)
    #[arg(long, value_name = "DURATION", default_value = "6h", value_parser = plugin::args::positive_duration)]
    pub predict_window: Duration,

    /// Keep each volume's samples here (the prediction needs it; without it only the thresholds apply)
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// At most this many volumes get their own perfdata value (the fullest first)
    #[arg(long, value_name = "N", default_value = "5")]
    pub perf_volumes: usize,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

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

    /// Names an operator knows: pods and claims of the volumes in non-OK findings
    #[command(flatten)]
    pub names: kube::checks::names::NamesArgs,
}

impl Opts {
    /// The decision's settings, from the options.
    pub fn policy(&self) -> Policy {
        Policy {
            warning: self.warning.clone(),
            critical: self.critical.clone(),
            iwarning: self.iwarning.clone(),
            icritical: self.icritical.clone(),
            predict_within: self.predict_within,
            predict_window: self.predict_window,
            perf_volumes: self.perf_volumes,
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "PV_CAPACITY";
    const BINARY: &'static str = "check_pv_capacity";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let policy = self.policy();
        let data = gather(self, &policy, ctx)?;
        let names = kube::checks::names::resolve(&self.names, &wanted(&data, &policy), ctx);
        ctx.stage("evaluating");
        Ok(evaluate_named(&data, &policy, &names))
    }
}

#[cfg(test)]
mod tests;
