//! check_storage_kernel_errors: storage errors in the kernel log, mapped to the volumes they hit.
//!
//! gather (`gather.rs`: read /dev/kmsg, classify records with `classify.rs`, map devices to
//! mounts and PVs; resumable with `--state-dir`) → evaluate (`evaluate.rs`, pure: aggregation
//! per category and device, status) → the plugin runtime renders.
#![forbid(unsafe_code)]

pub mod classify;
mod evaluate;
mod gather;
mod next;
pub mod stdin;

pub use evaluate::{evaluate, evaluate_named, wanted, Data, Event, Holding, Policy};
pub use gather::{drop_future_events, gather, position_beyond_log, resolve, KmsgState};

use clap::Parser;
use node::logs::time;
use plugin::{Check, CommonArgs, Ctx, Report, Unknown};
use regex_lite::Regex;
use std::path::PathBuf;
use std::time::Duration;

const LONG_ABOUT: &str = "\
Reads the kernel log (/dev/kmsg, non-blocking, from the start of the ring buffer) for storage
errors and names the volumes they hit: ext4 errors, journal aborts, read-only remounts, XFS
shutdowns, corruption (XFS corruption, internal errors, failed log recovery) and lost writes (ext4
unwritten extents not converted, ext4 writeback refused, JBD2 file data flush errors, loop write
errors), block I/O errors (every status of the block layer: device offline, timeout, I/O,
critical medium/target, …), SCSI devices offline, iSCSI connection errors and session recovery
timeouts, NVMe controller resets and removals, disks whose capacity dropped to 0, NFS servers
not responding (cleared by the server's later `OK`) and file handles gone stale, btrfs errors
(also with the `state FLAGS` of 5.16+ kernels) and device error counters, hung tasks. Each
device is mapped through the mount table to its mount points and, under a kubelet root, to its
PersistentVolume (NVMe controllers to their namespaces, /dev/mapper names to dm-N, NFS servers
to their mounts).

CRITICAL: read-only remount, journal abort, XFS shutdown, btrfs error, corruption, lost writes,
SCSI device offline, block device offline, NVMe controller removed, NFS timed out (soft mount),
iSCSI session recovery timeout, a vanished disk still mounted, --critical-pattern. WARNING:
ext4 error, I/O error, block timeout, NVMe reset, disk vanished, NFS not responding, NFS file
handle changed, btrfs device errors, iSCSI connection error, hung task, --warning-pattern.
Only records of the last --window count (their monotonic time
mapped to the wall clock); with --state-dir only records newer than the last run's sequence
number are read (a reboot, seen by a new boot id, starts afresh) and the window's findings are
kept between runs. Only the kernel's own records count (not userspace writes to /dev/kmsg).";

#[derive(Debug, Clone, Parser)]
#[command(
    name = "check_storage_kernel_errors",
    version,
    about = "Alert on storage errors in the kernel log, mapped to the volumes they hit",
    long_about = LONG_ABOUT,
    mut_arg("warning", |a| a.help("Range on the number of storage-error records in the window for WARNING (with -w/-c the count decides the state instead of each record's kind)")),
    mut_arg("critical", |a| a.help("Range on the number of storage-error records in the window for CRITICAL"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// The kernel log: the kmsg device, a regular file holding kmsg records (e.g. the
    /// receive-logs kernel.log of a Talos node), or '-' for stdin: `talosctl [-n NODE] dmesg`
    /// lines or kmsg records (not resumed with --state-dir; devices not mapped to volumes)
    #[arg(long, value_name = "PATH")]
    pub kmsg: Option<PathBuf>,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub sys: node::SysArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    /// Only records of the last DURATION count (0: every record in the buffer)
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = plugin::args::duration)]
    pub window: Duration,

    /// Keep the last sequence number, the boot id and the window's findings here
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Extra regex for CRITICAL records (repeatable; used for records no built-in rule knows)
    #[arg(long = "critical-pattern", value_name = "REGEX", value_parser = plugin::args::regex)]
    pub critical_pattern: Vec<Regex>,

    /// Extra regex for WARNING records (repeatable; used for records no built-in rule knows)
    #[arg(long = "warning-pattern", value_name = "REGEX", value_parser = plugin::args::regex)]
    pub warning_pattern: Vec<Regex>,

    /// Ignore records matching this regex (repeatable; checked before every other rule)
    #[arg(long = "exclude-pattern", value_name = "REGEX", value_parser = plugin::args::regex)]
    pub exclude_pattern: Vec<Regex>,

    /// Names an operator knows: pods and claims of the volumes the errors hit
    #[command(flatten)]
    pub names: kube::checks::names::NamesArgs,

    /// The node named in findings and next steps
    #[command(flatten)]
    pub node: kube::NodeArg,
}

impl From<&Opts> for Policy {
    fn from(o: &Opts) -> Policy {
        Policy {
            window_ms: o.window.as_millis() as i64,
            thresholds: o.thresholds.thresholds(),
        }
    }
}

impl Opts {
    /// `--kmsg -`: the kernel log comes on stdin.
    pub fn reads_kmsg_stdin(&self) -> bool {
        self.kmsg.as_deref().is_some_and(|p| p.as_os_str() == "-")
    }
}

impl Check for Opts {
    const NAME: &'static str = "STORAGE_KERNEL_ERRORS";
    const BINARY: &'static str = "check_storage_kernel_errors";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin() || self.reads_kmsg_stdin()
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        if self.reads_kmsg_stdin() && self.names.reads_stdin() {
            return Err(Unknown(
                "--kmsg - and the names' '-' both read stdin: give one of them as a file".into(),
            ));
        }
        let deadline = plugin::deadline::ANSWER_RESERVE.deadline(ctx.remaining());
        let data = gather(self, ctx, deadline)?;
        let (policy, now) = (Policy::from(self), time::now_ms());
        // Names only after the kernel log is read, and only for the volumes the errors hit.
        let names =
            kube::checks::names::resolve(&self.names, &wanted(&data, policy.window_ms, now), ctx);
        Ok(evaluate_named(&data, &policy, now, &names))
    }
}

#[cfg(test)]
mod tests;
