//! check_kubelet_nested_ops: the kubelet's volume operations failing with exponential backoff.
//!
//! The kubelet says only in its log that one stuck operation blocks every pod needing that volume
//! on the node. Phases: [`gather`] (journal, files, stdin; resumable with `--state-dir`) →
//! [`evaluate()`] with a [`Policy`] built from the options (pure: per-volume aggregation over
//! runs of failures, [`streak`]; words in `text`) → rendered by `plugin`.
#![forbid(unsafe_code)]

pub mod acc;
pub mod evaluate;
pub mod gather;
mod next;
pub mod parse;
pub mod streak;
#[cfg(test)]
mod tests;
mod text;
pub mod volume;

pub use acc::{Folded, MAX_VOLUMES};
pub use evaluate::{evaluate, volumes, Policy};
pub use gather::{format_verdict, gather, zone, Data, SourceInfo, SourceState, DEFAULT_UNITS};
pub use parse::Failure;
pub use streak::{streaks, Streak, INITIAL_BACKOFF_MS};
pub use volume::{VolumeState, MAX_BACKOFF_MS};

use clap::Parser;
use node::logs::time;
use plugin::{Check, CommonArgs, Ctx, Report, Status, Unknown};
use std::path::PathBuf;
use std::time::Duration;

const LONG_ABOUT: &str = "\
Reads the kubelet's log (journal or files) for failed volume operations: the
NestedPendingOperations lines 'Operation for ... failed. No retries permitted until ...
(durationBeforeRetry ...). Error: ...' (MountDevice, UnmountDevice/GetDeviceMountRefs, SetUp,
TearDown, Attach...). One stuck operation blocks every pod needing that volume on the node.
A kubelet run in a container logs through its runtime: Docker json-file lines
(/var/lib/docker/containers/<id>/<id>-json.log) and CRI lines (/var/log/pods/<ns>_<pod>_<uid>/
<container>/0.log, 'P' partial records joined with the next) are unwrapped per line.
Logs as operators have them are read too: grep -n/-H output, a line pasted without its header,
backticks, journalctl -o short-precise and -o json, Talos json_lines (talos-time) and talosctl's
'<node>: ' prefix (Talos: /var/log/kubelet.log from v1.13, `k8s-storage-checks receive-logs`
for machine.logging.destinations, or `talosctl logs kubelet | ... --log-file -`). Every record
recognised anywhere is judged; UNKNOWN only when nothing in the input is a kubelet record; -v
says how many lines could not be read.

WARNING: a volume operation failed within --window.
CRITICAL: a volume has kept failing for longer than --stuck, or its retry backoff sits at the
kubelet's maximum (2m2s). -w/-c ranges on the number of failing volumes override both.

Without --state-dir every run reads the window (the journal from the window start, files whole). With
--state-dir the journal cursor and each file's inode+offset are kept (one file per source,
written atomically), so a big log is read once, and the failures of the window are kept too.";

#[derive(Debug, Clone, Parser)]
#[command(
    name = "check_kubelet_nested_ops",
    version,
    about = "Alert on kubelet volume operations stuck in exponential backoff",
    long_about = LONG_ABOUT,
    mut_arg("host_root", |a| a.help("Host root in container mode: the journal is read from <DIR>/var/log/journal (else <DIR>/run/log/journal), and klog/syslog local times are in the host zone (<DIR>/etc/localtime)")),
    mut_arg("warning", |a| a.help("Warning range on the number of failing volumes (overrides the per-volume rules)")),
    mut_arg("critical", |a| a.help("Critical range on the number of failing volumes (overrides the per-volume rules)"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Journal unit of the kubelet (repeatable). Default: those of kubelet.service,
    /// snap.microk8s.daemon-kubelite.service, k3s.service, k3s-agent.service present in the journal
    /// (the journal is not read by default when --log-file is given)
    #[arg(long = "journal-unit", value_name = "UNIT")]
    pub journal_unit: Vec<String>,

    /// Journal directory, given to journalctl as --directory, for a host journal mounted into a container
    #[arg(long = "journal-dir", value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,

    /// The journalctl binary
    #[arg(long, value_name = "PATH", default_value = "journalctl")]
    pub journalctl: PathBuf,

    /// Kubelet log file (repeatable; '-' reads stdin), e.g. Talos's /var/log/kubelet.log (v1.13+),
    /// the receive-logs kubelet.log, `talosctl -n <ip> logs kubelet` on stdin, a Docker
    /// json-file log (/var/lib/docker/containers/<id>/<id>-json.log) or a CRI log
    /// (/var/log/pods/<ns>_<pod>_<uid>/kubelet/0.log)
    #[arg(long = "log-file", value_name = "PATH")]
    pub log_file: Vec<PathBuf>,

    /// Only failures of the last DURATION count
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = plugin::args::duration)]
    pub window: Duration,

    /// CRITICAL when a volume has kept failing for longer than this
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = plugin::args::duration)]
    pub stuck: Duration,

    /// Keep the read position (journal cursor, file inode+offset) and recent failures here
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    #[command(flatten)]
    pub host: node::HostRootArg,

    /// Time zone of klog/syslog headers (local time without a zone): UTC, +08:00, an IANA name
    /// (Europe/Berlin) or a TZif file [default: the host's zone: TZ and /etc/localtime, or
    /// <HOST_ROOT>/etc/localtime in container mode]
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,

    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,
}

impl Opts {
    /// The policy of this run, from the options.
    pub fn policy(&self) -> Policy {
        Policy {
            window_ms: self.window.as_millis() as i64,
            stuck_ms: self.stuck.as_millis() as i64,
            thresholds: self.thresholds.thresholds(),
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "KUBELET_NESTED_OPS";
    const BINARY: &'static str = "check_kubelet_nested_ops";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.log_file.iter().any(|p| p.as_os_str() == "-")
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        if self.window.is_zero() {
            return Err(Unknown("--window must be greater than 0".into()));
        }
        let now = time::now_ms();
        // Stop reading early enough to answer before the watchdog does.
        let read_deadline = plugin::deadline::ANSWER_RESERVE.deadline(ctx.remaining());
        let data = gather(self, ctx, now, read_deadline)?;
        let mut report = evaluate(&data, &self.policy());
        // The next step names the node: the kubelet's error says which, else this host.
        let host = self.host.host().hostname();
        for f in report
            .findings
            .iter_mut()
            .filter(|f| f.status != Status::Ok)
        {
            if f.next.is_none() {
                f.next = Some(next::step(f, host.as_deref()));
            }
        }
        Ok(report)
    }
}
