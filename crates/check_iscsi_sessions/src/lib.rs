//! check_iscsi_sessions: the initiator side of iSCSI volumes, read from sysfs.
//!
//! gather (`gather.rs`: sysfs, the device-usage map) → evaluate (`evaluate.rs` over all sessions,
//! `session.rs` for one; pure, every decision) → the plugin runtime renders. See `node::iscsi`
//! for the sysfs layout.
#![forbid(unsafe_code)]

mod evaluate;
mod gather;
mod next;
mod session;

pub use evaluate::{evaluate, evaluate_named, wanted, Policy};
pub use gather::{gather, Gathered};

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use regex_lite::Regex;

const LONG_ABOUT: &str = "\
Reads the Linux iSCSI transport class in sysfs (no iscsiadm, no iscsid) and checks every session,
its connections and its SCSI disks. Each disk is mapped through the mount table to its mount points
and, under a kubelet root, to the PersistentVolume it backs.

CRITICAL: a session not LOGGED_IN (FAILED = in recovery, FREE = recovery timed out); a connection
not up; a disk offline, transport-offline or deleted; fewer sessions than --min-sessions, or an
--expect-target with no logged-in session.
WARNING: a disk blocked (recovery in progress); a logged-in session without a disk; two sessions
to the same target and portal; recovery_tmo below --min-recovery-timeout.
UNKNOWN: an attribute the decision needs cannot be read (the file is named).";

#[derive(Parser, Debug)]
#[command(
    name = "check_iscsi_sessions",
    version,
    about = "iSCSI session, connection and disk health from sysfs",
    long_about = LONG_ABOUT,
    mut_arg("include", |a| a.help("Only check sessions whose target IQN matches REGEX (repeatable)")),
    mut_arg("exclude", |a| a.help("Skip sessions whose target IQN matches REGEX, even when --include matches too (repeatable)")),
    mut_arg("mountinfo", |a| a.help("Mount table that maps disks to mount points and PVs [default: /proc/self/mountinfo, or <host-root>/proc/1/mountinfo]")),
    mut_arg("warning", |a| a.help("Range on the number of unhealthy sessions for WARNING (with -w/-c the count decides the sessions' state; --min-sessions, --expect-target and doubled logins still alert)")),
    mut_arg("critical", |a| a.help("Range on the number of unhealthy sessions for CRITICAL"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub sys: node::SysArg,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    /// CRITICAL when fewer than N sessions exist
    #[arg(long, value_name = "N")]
    pub min_sessions: Option<u32>,

    /// CRITICAL unless a logged-in session's target IQN matches REGEX (repeatable)
    #[arg(long, value_name = "REGEX", value_parser = plugin::args::regex)]
    pub expect_target: Vec<Regex>,

    /// WARNING when a session's recovery_tmo (replacement_timeout) is below this (e.g. 300 or 5m); `off` always passes
    #[arg(long, value_name = "SECONDS", value_parser = plugin::args::seconds)]
    pub min_recovery_timeout: Option<u64>,

    #[command(flatten)]
    pub filter: node::FilterArgs,

    /// Names an operator knows: pods and claims of the volumes on unhealthy sessions
    #[command(flatten)]
    pub names: kube::checks::names::NamesArgs,
}

impl From<&Opts> for Policy {
    fn from(o: &Opts) -> Policy {
        Policy {
            min_sessions: o.min_sessions,
            expect_target: o.expect_target.clone(),
            min_recovery_timeout: o.min_recovery_timeout,
            include: o.filter.include.clone(),
            exclude: o.filter.exclude.clone(),
            thresholds: o.thresholds.thresholds(),
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "ISCSI_SESSIONS";
    const BINARY: &'static str = "check_iscsi_sessions";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin()
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let data = gather(self, ctx)?;
        let policy = Policy::from(self);
        // Names only after sysfs is read, and only for the volumes of unhealthy sessions.
        let names = kube::checks::names::resolve(&self.names, &wanted(&data, &policy), ctx);
        Ok(evaluate_named(&data, &policy, &names))
    }
}

#[cfg(test)]
mod tests;
