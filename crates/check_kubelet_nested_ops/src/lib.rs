//! check_kubelet_nested_ops: the kubelet's volume operations failing with exponential backoff.
//!
//! gather (journal through journalctl, log files, stdin; resumable with `--state-dir`) →
//! evaluate (pure: per-volume aggregation, decisions) → report.

pub mod parse;

use clap::Parser;
use node::logs::{files, journal, scan, state, time, wrap};
use parse::Failure;
use plugin::{
    fmt_duration, Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds,
    Unknown, Uom,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kubelet's maximum durationBeforeRetry: 2m2s (2m0s in old releases).
pub const MAX_BACKOFF_MS: u64 = 122_000;
/// A backoff this long counts as "at the maximum" (covers the old 2m0s cap).
const AT_MAX_MS: u64 = 120_000;
/// A gap between two failures of a volume longer than its backoff plus this ends a streak.
const STREAK_GRACE_MS: i64 = 180_000;
/// Events kept per source in the state file.
const STATE_MAX_EVENTS: usize = 5000;

/// Units looked for when no `--journal-unit` is given (those present in the journal are read).
pub const DEFAULT_UNITS: &[&str] = &[
    "kubelet.service",
    "snap.microk8s.daemon-kubelite.service",
    "k3s.service",
    "k3s-agent.service",
];

const LONG_ABOUT: &str = "\
Reads the kubelet's log (journal or files) for failed volume operations: the
NestedPendingOperations lines 'Operation for ... failed. No retries permitted until ...
(durationBeforeRetry ...). Error: ...' (MountDevice, UnmountDevice/GetDeviceMountRefs, SetUp,
TearDown, Attach...). One stuck operation blocks every pod needing that volume on the node.
A kubelet run in a container logs through its runtime: Docker json-file lines
(/var/lib/docker/containers/<id>/<id>-json.log) and CRI lines (/var/log/pods/<ns>_<pod>_<uid>/
<container>/0.log, 'P' partial records joined with the next) are unwrapped per line.

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
    mut_arg("host_root", |a| a.help("Host root in container mode: the journal is read from <DIR>/var/log/journal (else <DIR>/run/log/journal), and klog/syslog local times are in the host zone (<DIR>/etc/localtime)"))
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

    /// Kubelet log file (repeatable; '-' reads stdin), e.g. `talosctl logs kubelet > file`, a Docker
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

    /// Warning range on the number of failing volumes (overrides the per-volume rules)
    #[arg(short = 'w', long, value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub warning: Option<Range>,

    /// Critical range on the number of failing volumes (overrides the per-volume rules)
    #[arg(short = 'c', long, value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub critical: Option<Range>,
}

/// What one source gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceInfo {
    pub name: String,
    pub bytes: u64,
    pub hits: u64,
    pub complete: bool,
    pub notes: Vec<String>,
}

/// Everything gathered: failures (from this run's reading and the kept state) and the sources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    pub failures: Vec<Failure>,
    pub sources: Vec<SourceInfo>,
    /// Each volume's run of failures as far back as any line read (this run's and, with
    /// --state-dir, earlier runs'): what tells the true age past the window and log rotation.
    pub streaks: Vec<Streak>,
}

/// The `durationBeforeRetry` of an operation's first failure (pkg/util/goroutinemap/
/// exponentialbackoff `initialDurationBeforeRetry`): a run that starts with it starts there.
pub const INITIAL_BACKOFF_MS: u64 = 500;

/// One volume's run of failures: gaps no longer than the backoff + grace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Streak {
    pub volume: String,
    /// The first failure seen of the run, and its backoff.
    pub start: i64,
    pub start_backoff_ms: u64,
    /// The last failure seen of the run, and its backoff.
    pub last: i64,
    pub last_backoff_ms: u64,
}

impl Streak {
    fn of(f: &Failure) -> Streak {
        Streak {
            volume: f.volume.clone(),
            start: f.t,
            start_backoff_ms: f.backoff_ms,
            last: f.t,
            last_backoff_ms: f.backoff_ms,
        }
    }
    /// A failure at `t` continues this run.
    fn reaches(&self, t: i64) -> bool {
        t <= self.last + self.last_backoff_ms as i64 + STREAK_GRACE_MS
    }
    /// The run is known from its first failure (the kubelet's first backoff), not from where the
    /// lines read begin.
    pub fn start_known(&self) -> bool {
        self.start_backoff_ms <= INITIAL_BACKOFF_MS
    }
}

/// Extend the runs of `prev` with `failures` (any order): per volume, the run in progress at its
/// latest failure (pure). Runs that ended before `since` are dropped.
pub fn streaks(prev: &[Streak], failures: &[Failure], since: i64, now: i64) -> Vec<Streak> {
    let mut by: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        if !state::from_future(f.t, now) {
            by.entry(f.volume.as_str()).or_default().push(f);
        }
    }
    let mut out: BTreeMap<String, Streak> = prev
        .iter()
        .filter(|s| !state::from_future(s.last, now))
        .map(|s| (s.volume.clone(), s.clone()))
        .collect();
    for (vol, mut evs) in by {
        evs.sort_by_key(|f| f.t);
        let mut cur = out.remove(vol);
        for f in evs {
            cur = Some(match cur {
                Some(mut s) if f.t >= s.start && s.reaches(f.t) => {
                    if f.t > s.last {
                        s.last = f.t;
                        s.last_backoff_ms = f.backoff_ms;
                    }
                    s
                }
                // Earlier than the run's start (lines read out of order, another source):
                // it starts the run earlier when the run reaches back to it.
                Some(mut s)
                    if f.t < s.start && f.t + f.backoff_ms as i64 + STREAK_GRACE_MS >= s.start =>
                {
                    s.start = f.t;
                    s.start_backoff_ms = f.backoff_ms;
                    s
                }
                Some(s) if f.t < s.start => s,
                _ => Streak::of(f),
            });
        }
        if let Some(s) = cur {
            out.insert(vol.to_string(), s);
        }
    }
    out.into_values()
        .filter(|s| s.last + s.last_backoff_ms as i64 + STREAK_GRACE_MS >= since)
        .collect()
}

/// Evaluation settings.
#[derive(Debug, Clone)]
pub struct Rules {
    pub window_ms: i64,
    pub stuck_ms: i64,
    pub thresholds: Thresholds,
}

impl Opts {
    pub fn rules(&self) -> Rules {
        Rules {
            window_ms: self.window.as_millis() as i64,
            stuck_ms: self.stuck.as_millis() as i64,
            thresholds: Thresholds::new(self.warning.clone(), self.critical.clone()),
        }
    }
    /// How far back failures matter: the window, or longer when --stuck is longer.
    fn lookback_ms(&self) -> i64 {
        self.window.max(self.stuck).as_millis() as i64
    }
}

/// One volume's failures, aggregated.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeState {
    pub volume: String,
    pub pv: Option<String>,
    pub ops: Vec<String>,
    pub pods: Vec<String>,
    pub failures_in_window: usize,
    pub first_in_window: i64,
    pub last: i64,
    pub backoff_ms: u64,
    /// Start of the current run of failures (gaps no longer than backoff + grace).
    pub streak_start: i64,
    /// The run's start is its first failure (else it began before the first line read: "at
    /// least").
    pub start_known: bool,
    /// Still failing now: the last failure is within its backoff + grace.
    pub active: bool,
    pub error: String,
    pub status: Status,
}

impl VolumeState {
    pub fn failing_for_ms(&self) -> i64 {
        self.last - self.streak_start
    }
    pub fn label(&self) -> &str {
        self.pv.as_deref().unwrap_or(&self.volume)
    }
    /// `12m13s`, or `at least 12m13s` when the run began before the lines read.
    pub fn failing_for(&self) -> String {
        let d = fmt_duration(secs(self.failing_for_ms()));
        if self.start_known {
            d
        } else {
            format!("at least {d}")
        }
    }

    /// What the finding is about: the PV, the CSI driver of the kubelet's unique volume name
    /// (`kubernetes.io/csi/<driver>^<handle>`), and the pod when exactly one is involved.
    pub fn subject(&self) -> plugin::Subject {
        let driver = self
            .volume
            .strip_prefix("kubernetes.io/csi/")
            .and_then(|r| r.split_once('^'))
            .map(|(d, _)| d);
        let pod = match self.pods.as_slice() {
            [p] => Some(p.as_str()),
            _ => None,
        };
        plugin::Subject::new()
            .maybe(plugin::Subject::pv, self.pv.as_deref())
            .maybe(plugin::Subject::driver, driver)
            .maybe(plugin::Subject::pod, pod)
    }
}

/// Aggregate failures per volume (pure); `known` runs (from every line read, and kept across
/// runs) carry a run's start past the lookback.
pub fn volumes(
    failures: &[Failure],
    known: &[Streak],
    rules: &Rules,
    now: i64,
) -> Vec<VolumeState> {
    let lookback = rules.window_ms.max(rules.stuck_ms);
    let mut by: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        // Ignore what is older than the lookback and what claims to be far in the future
        // (evaluate notes the latter).
        if f.t < now - lookback || state::from_future(f.t, now) {
            continue;
        }
        by.entry(f.volume.as_str()).or_default().push(f);
    }
    let mut out = Vec::new();
    for (vol, mut evs) in by {
        evs.sort_by_key(|f| f.t);
        evs.dedup_by(|a, b| a == b);
        let in_window: Vec<&&Failure> = evs
            .iter()
            .filter(|f| f.t >= now - rules.window_ms)
            .collect();
        if in_window.is_empty() {
            continue;
        }
        let mut streak_start = evs[0].t;
        let mut start_backoff = evs[0].backoff_ms;
        for w in evs.windows(2) {
            if w[1].t - w[0].t > w[0].backoff_ms as i64 + STREAK_GRACE_MS {
                streak_start = w[1].t;
                start_backoff = w[1].backoff_ms;
            }
        }
        // A known run that reaches this one's start began earlier.
        for k in known.iter().filter(|k| k.volume == vol) {
            if k.start < streak_start && k.reaches(streak_start) {
                streak_start = k.start;
                start_backoff = k.start_backoff_ms;
            }
        }
        let last = *evs.last().expect("non-empty");
        let active = now - last.t <= last.backoff_ms as i64 + STREAK_GRACE_MS;
        let mut ops: Vec<String> = Vec::new();
        let mut pods: Vec<String> = Vec::new();
        for f in &in_window {
            if !ops.contains(&f.op) {
                ops.push(f.op.clone());
            }
            if let Some(p) = &f.pod {
                if !pods.contains(p) {
                    pods.push(p.clone());
                }
            }
        }
        let pv = evs.iter().rev().find_map(|f| f.pv.clone());
        let mut v = VolumeState {
            volume: vol.to_string(),
            pv,
            ops,
            pods,
            failures_in_window: in_window.len(),
            first_in_window: in_window[0].t,
            last: last.t,
            backoff_ms: last.backoff_ms,
            streak_start,
            start_known: start_backoff <= INITIAL_BACKOFF_MS,
            active,
            error: last.error.clone(),
            status: Status::Warning,
        };
        if active && (v.failing_for_ms() > rules.stuck_ms || v.backoff_ms >= AT_MAX_MS) {
            v.status = Status::Critical;
        }
        out.push(v);
    }
    // Worst and longest first.
    out.sort_by_key(|v| (std::cmp::Reverse(v.status.rank()), -v.failing_for_ms()));
    out
}

fn secs(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Decide (pure): `now` in epoch ms.
pub fn evaluate(data: &Data, rules: &Rules, now: i64) -> Report {
    let vols = volumes(&data.failures, &data.streaks, rules, now);
    let failed_ops: usize = vols.iter().map(|v| v.failures_in_window).sum();
    let max_backoff = vols.iter().map(|v| v.backoff_ms).max().unwrap_or(0);
    let longest = vols.iter().map(|v| v.failing_for_ms()).max().unwrap_or(0);
    let by_rules = vols.iter().fold(Status::Ok, |a, v| a.worst(v.status));
    let overridden = rules.thresholds.warning.is_some() || rules.thresholds.critical.is_some();
    let status = if overridden {
        rules.thresholds.evaluate(vols.len() as f64)
    } else {
        by_rules
    };
    let window = fmt_duration(secs(rules.window_ms));
    let incomplete: Vec<&SourceInfo> = data.sources.iter().filter(|s| !s.complete).collect();
    let summary = if vols.is_empty() {
        format!("no failed volume operations in the last {window}")
    } else {
        let parts: Vec<String> = vols
            .iter()
            .take(3)
            .map(|v| {
                let mut s = format!("{} {}", v.label(), v.ops.join("/"));
                if v.active && v.failing_for_ms() > 0 {
                    s.push_str(&format!(" failing for {}", v.failing_for()));
                }
                if v.backoff_ms >= AT_MAX_MS && v.active {
                    s.push_str(" at max backoff");
                }
                s
            })
            .collect();
        let more = if vols.len() > 3 {
            format!(" and {} more volumes", vols.len() - 3)
        } else {
            String::new()
        };
        format!(
            "{} volume{} with failing operations in {window}: {}{more}",
            vols.len(),
            if vols.len() == 1 { "" } else { "s" },
            parts.join("; ")
        )
    };
    let mut report = Report::new(status, summary).unit("volume", "volumes");
    let future = data
        .failures
        .iter()
        .filter(|f| state::from_future(f.t, now))
        .count();
    if future > 0 {
        report = report.note(format!(
            "{future} failure line(s) dated more than 5m after now were ignored: the clock jumped back, or the log's times are in another time zone than this check's (klog times are local)"
        ));
    }
    if !incomplete.is_empty() {
        let names: Vec<&str> = incomplete.iter().map(|s| s.name.as_str()).collect();
        report = report.note(format!(
            "reading stopped at the deadline in {} (raise -t; with --state-dir the next run continues)",
            names.join(", ")
        ));
        if vols.is_empty() {
            report.status = Status::Unknown;
            report.summary = format!(
                "could not read all of {} before the deadline; no failures in what was read",
                names.join(", ")
            );
        }
    }
    for v in &vols {
        let st = if overridden {
            v.status.min_rank(status)
        } else {
            v.status
        };
        let mut text = format!(
            "{} {}: {} failure{} in {window}, last {}, backoff {}",
            v.label(),
            v.ops.join("/"),
            v.failures_in_window,
            if v.failures_in_window == 1 { "" } else { "s" },
            time::fmt_utc(v.last),
            fmt_duration(secs(v.backoff_ms as i64)),
        );
        if v.active {
            text.push_str(&format!(
                ", failing for {} (since {})",
                v.failing_for(),
                time::fmt_utc(v.streak_start)
            ));
        } else {
            text.push_str(", not seen failing since");
        }
        if !v.pods.is_empty() {
            text.push_str(&format!(", pods {}", v.pods.join(" ")));
        }
        let mut f = Finding::new(st, text)
            .signal(if v.status == Status::Critical {
                "volume_op_stuck"
            } else {
                "volume_op_failing"
            })
            .subject(v.subject())
            .detail(format!("error: {}", parse::shorten(&v.error, 600)));
        if v.pv.is_some() {
            f = f.detail(format!("volume {}", v.volume));
        }
        report = report.finding(f);
    }
    for s in &data.sources {
        report = report.finding(
            Finding::new(
                Status::Ok,
                format!(
                    "read {}: {} bytes, {} candidate line{}{}",
                    s.name,
                    s.bytes,
                    s.hits,
                    if s.hits == 1 { "" } else { "s" },
                    if s.complete {
                        ""
                    } else {
                        " (stopped at the deadline)"
                    }
                ),
            )
            .signal("log_source_read"),
        );
        for n in &s.notes {
            report = report.note(n.clone());
        }
    }
    let t = &rules.thresholds;
    report
        .perf(Perfdata::new("failed_operations", failed_ops as f64).min(0.0))
        .perf(
            Perfdata::new("failing_volumes", vols.len() as f64)
                .thresholds(t)
                .min(0.0),
        )
        .perf(
            Perfdata::new("max_backoff", max_backoff as f64 / 1000.0)
                .uom(Uom::Seconds)
                .min(0.0),
        )
        .perf(
            Perfdata::new("longest_failing", longest.max(0) as f64 / 1000.0)
                .uom(Uom::Seconds)
                .min(0.0),
        )
}

/// What a source keeps between runs.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SourceState {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub file: Option<files::FilePos>,
    #[serde(default)]
    pub failures: Vec<Failure>,
    /// Each volume's run of failures, kept past the lookback while it goes on (log rotation,
    /// runs longer than the window).
    #[serde(default)]
    pub streaks: Vec<Streak>,
}

const CHECK_ID: &str = "kubelet_nested_ops";

fn load_state(
    dir: Option<&Path>,
    source: &str,
    now: i64,
    notes: &mut Vec<String>,
) -> Option<(PathBuf, SourceState)> {
    let dir = dir?;
    let p = state::path(dir, CHECK_ID, source);
    match state::load::<SourceState>(&p) {
        Ok(s) => {
            let mut s = s.unwrap_or_default();
            let dropped = state::drop_future(&mut s.failures, now, |f| f.t);
            if dropped > 0 {
                notes.push(format!(
                    "state file {}: {dropped} kept failure(s) dated in the future were dropped (the clock was set back, or the state is not this node's)",
                    p.display(),
                ));
            }
            Some((p, s))
        }
        Err(e) => {
            notes.push(e);
            Some((p, SourceState::default()))
        }
    }
}

/// The failures worth keeping in the state: those of the lookback, none from the future (they
/// are never counted, and kept they would start counting once the clock reaches them).
fn keep(mut failures: Vec<Failure>, since: i64, now: i64) -> Vec<Failure> {
    failures.retain(|f| f.t >= since && !state::from_future(f.t, now));
    if failures.len() > STATE_MAX_EVENTS {
        failures.drain(..failures.len() - STATE_MAX_EVENTS);
    }
    failures
}

/// What a log source's format says: UNKNOWN when it holds complete lines and none of the first
/// ones is a kubelet log line, or nothing but a line over the cap (reading it as "no failures"
/// would answer OK after seeing nothing); a note when lines over the cap were cut.
pub fn format_verdict(name: &str, s: &scan::ScanStats) -> Result<Option<String>, Unknown> {
    let cap = plugin::fmt_bytes(scan::LINE_MAX as u64);
    if s.sampled > 0 && s.recognized == 0 {
        return Err(Unknown(format!(
            "{name} is not a kubelet log: none of its first {} lines has the shape of one (expected klog text `E0713 20:27:25.123456 2166 file.go:348] ...`, or kubelet JSON logging `{{\"ts\":...,\"msg\":...}}`, bare or behind a syslog/journal, CRI or Docker json-file prefix)",
            s.sampled
        )));
    }
    if s.overlong > 0 && s.sampled == 0 {
        return Err(Unknown(format!(
            "{name} is not a kubelet log: it holds a line longer than {cap} (the cap of one log line) and no complete line besides"
        )));
    }
    Ok((s.overlong > 0).then(|| {
        format!(
            "{name}: {} line(s) longer than {cap} (the cap of one log line) were cut",
            s.overlong
        )
    }))
}

/// Gather from every source. `read_deadline` is when reading must stop.
/// The zone of klog/syslog local times: `--tz`, else the host's (its /etc/localtime in container
/// mode), else this process's.
pub fn zone(opts: &Opts) -> Result<Box<dyn time::Tz + Send + Sync>, Unknown> {
    let host = node::Host::from_option(opts.host.host_root.as_deref());
    let zoneinfo = host.file("/usr/share/zoneinfo");
    if let Some(spec) = &opts.tz {
        return node::logs::tz::resolve(spec, &zoneinfo).map_err(Unknown);
    }
    if !host.is_local() {
        let lt = host.file("/etc/localtime");
        // A symlink into the host's zoneinfo (`/usr/share/zoneinfo/Europe/Berlin`) resolves in
        // the container's tree: follow it under the host root.
        let target = std::fs::read_link(&lt)
            .ok()
            .filter(|t| t.is_absolute())
            .map(|t| host.file(t))
            .unwrap_or(lt.clone());
        return match node::logs::tz::Zone::read(&target) {
            Ok(z) => Ok(Box::new(z)),
            Err(e) if lt.exists() => Err(Unknown(format!("the host's time zone: {e} (give --tz)"))),
            // No /etc/localtime on the host: it runs in UTC.
            Err(_) => Ok(Box::new(time::FixedTz(0))),
        };
    }
    Ok(Box::new(time::SystemTz))
}

pub fn gather(opts: &Opts, ctx: &Ctx, now: i64, read_deadline: Instant) -> Result<Data, Unknown> {
    let tz = zone(opts)?;
    let tz: &dyn time::Tz = tz.as_ref();
    let lookback = opts.lookback_ms();
    let mut data = Data::default();
    let journal_dir = opts.journal_dir.clone().or_else(|| {
        // The persistent journal, else the volatile one (Storage=volatile/auto without /var/log/journal).
        opts.host.host_root.as_ref().map(|r| {
            let persistent = r.join("var/log/journal");
            if persistent.is_dir() {
                persistent
            } else {
                r.join("run/log/journal")
            }
        })
    });
    // Journal.
    let units: Vec<String> = if !opts.journal_unit.is_empty() {
        opts.journal_unit.clone()
    } else if opts.log_file.is_empty() {
        ctx.stage("listing the journal's units (journalctl -F _SYSTEMD_UNIT)");
        let present = journal::field_values(
            &opts.journalctl,
            journal_dir.as_deref(),
            "_SYSTEMD_UNIT",
            read_deadline,
        )
        .map_err(Unknown)?;
        let found: Vec<String> = DEFAULT_UNITS
            .iter()
            .filter(|u| present.iter().any(|p| p == *u))
            .map(|u| u.to_string())
            .collect();
        if found.is_empty() {
            return Err(Unknown(format!(
                "no kubelet unit in the journal{} (looked for {}); name it with --journal-unit or read files with --log-file",
                journal_dir
                    .as_ref()
                    .map(|d| format!(" at {}", d.display()))
                    .unwrap_or_default(),
                DEFAULT_UNITS.join(", ")
            )));
        }
        found
    } else {
        Vec::new()
    };
    if !units.is_empty() {
        let name = format!(
            "journal{} {}",
            journal_dir
                .as_ref()
                .map(|d| format!(" {}", d.display()))
                .unwrap_or_default(),
            units.join(",")
        );
        ctx.stage(format!("reading {name} (journalctl)"));
        let mut notes = Vec::new();
        let st = load_state(opts.state_dir.as_deref(), &name, now, &mut notes);
        let mut failures = st
            .as_ref()
            .map(|(_, s)| s.failures.clone())
            .unwrap_or_default();
        let cursor = st.as_ref().and_then(|(_, s)| s.cursor.clone());
        let q = journal::Query {
            journalctl: &opts.journalctl,
            directory: journal_dir.as_deref(),
            units: &units,
            after_cursor: cursor.as_deref(),
            since_ms: Some(now - lookback),
            needles: parse::NEEDLES,
            deadline: read_deadline,
        };
        let r = journal::read(&q, |e| {
            if let Some(f) = parse::parse_line(e.message.as_bytes(), Some(e.realtime_ms), now, tz) {
                failures.push(f);
            }
        })
        .map_err(|e| Unknown(format!("{name}: {e}")))?;
        notes.extend(r.notes);
        let prev_streaks = st
            .as_ref()
            .map(|(_, s)| s.streaks.as_slice())
            .unwrap_or(&[]);
        let runs = streaks(prev_streaks, &failures, now - lookback, now);
        let failures = keep(failures, now - lookback, now);
        if let Some((p, _)) = &st {
            let s = SourceState {
                cursor: r.last_cursor.clone(),
                file: None,
                failures: failures.clone(),
                streaks: runs.clone(),
            };
            if let Err(e) = state::save(p, &s) {
                // A refused directory was already named when loading.
                if !notes.contains(&e) {
                    notes.push(e);
                }
            }
        }
        ctx.debug(format!(
            "{name}: {} bytes, {} candidates, cursor {:?}",
            r.stats.bytes_read, r.stats.hits, r.last_cursor
        ));
        data.failures.extend(failures);
        data.streaks.extend(runs);
        data.sources.push(SourceInfo {
            name,
            bytes: r.stats.bytes_read,
            hits: r.stats.hits,
            complete: r.stats.complete,
            notes,
        });
    }
    // Files and stdin.
    for path in &opts.log_file {
        let mut failures = Vec::new();
        let mut notes = Vec::new();
        // Lines wrapped by a container runtime (Docker json-file, CRI) are unwrapped per line, a
        // partial line joined with the next; the runtime's timestamp is the entry's time.
        let mut joiner = wrap::Joiner::new();
        let on_logical = |l: wrap::Logical, out: &mut Vec<Failure>| {
            if let Some(f) = parse::parse_line(l.text.as_bytes(), l.time_ms, now, tz) {
                out.push(f);
            }
        };
        let on_hit = |line: &[u8], out: &mut Vec<Failure>, joiner: &mut wrap::Joiner| {
            joiner.feed(line, |l| on_logical(l, out))
        };
        if path.as_os_str() == "-" {
            ctx.stage("reading stdin");
            let o = scan::Scan {
                needles: parse::NEEDLES,
                deadline: Some(read_deadline),
                consume_partial_tail: true,
                recognize: Some(parse::is_log_line),
            };
            let stdin = std::io::stdin();
            let mut lock = stdin.lock();
            let s = scan::scan_follow(
                &mut lock,
                &o,
                |l| on_hit(l, &mut failures, &mut joiner),
                |_| {},
            )
            .map_err(|e| Unknown(format!("cannot read stdin: {}", node::errtext(&e))))?;
            notes.extend(format_verdict("stdin", &s)?);
            joiner.finish(|l| on_logical(l, &mut failures));
            data.streaks
                .extend(streaks(&[], &failures, now - lookback, now));
            data.failures.extend(keep(failures, now - lookback, now));
            data.sources.push(SourceInfo {
                name: "stdin".into(),
                bytes: s.bytes_read,
                hits: s.hits,
                complete: s.complete,
                notes,
            });
            continue;
        }
        let name = path.display().to_string();
        ctx.stage(format!("reading {name}"));
        let st = load_state(
            opts.state_dir.as_deref(),
            &format!("file:{name}"),
            now,
            &mut notes,
        );
        let mut kept = st
            .as_ref()
            .map(|(_, s)| s.failures.clone())
            .unwrap_or_default();
        let prev = st.as_ref().and_then(|(_, s)| s.file);
        let o = scan::Scan {
            needles: parse::NEEDLES,
            deadline: Some(read_deadline),
            consume_partial_tail: false,
            recognize: Some(parse::is_log_line),
        };
        let r = files::read(path, prev.as_ref(), &o, |l| {
            on_hit(l, &mut failures, &mut joiner)
        })
        .map_err(Unknown)?;
        notes.extend(format_verdict(&name, &r.stats)?);
        // A partial piece that ends what is written so far is parsed as far as it goes (the
        // needle and the operation key are in the first piece); its rest comes alone next run.
        joiner.finish(|l| on_logical(l, &mut failures));
        notes.extend(r.notes.clone());
        let prev_streaks = st
            .as_ref()
            .map(|(_, s)| s.streaks.as_slice())
            .unwrap_or(&[]);
        let runs = streaks(prev_streaks, &failures, now - lookback, now);
        kept.extend(failures);
        let kept = keep(kept, now - lookback, now);
        if let Some((p, _)) = &st {
            let s = SourceState {
                cursor: None,
                file: Some(r.pos),
                failures: kept.clone(),
                streaks: runs.clone(),
            };
            if let Err(e) = state::save(p, &s) {
                // A refused directory was already named when loading.
                if !notes.contains(&e) {
                    notes.push(e);
                }
            }
        }
        ctx.debug(format!(
            "{name}: read {} bytes, now at offset {}, {} candidates",
            r.stats.bytes_read,
            // (after a rotation the bytes consumed include the old file's: no "from" offset)
            r.pos.offset,
            r.stats.hits
        ));
        data.failures.extend(kept);
        data.streaks.extend(runs);
        data.sources.push(SourceInfo {
            name,
            bytes: r.stats.bytes_read,
            hits: r.stats.hits,
            complete: r.stats.complete,
            notes,
        });
    }
    Ok(data)
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
        let rem = ctx.remaining();
        let margin = (rem / 5).clamp(Duration::from_millis(100), Duration::from_secs(2));
        let read_deadline = Instant::now() + rem.saturating_sub(margin);
        let data = gather(self, ctx, now, read_deadline)?;
        Ok(evaluate(&data, &self.rules(), now))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_log_of_another_format_is_unknown() {
        let st = |sampled, recognized, overlong| scan::ScanStats {
            sampled,
            recognized,
            overlong,
            ..Default::default()
        };
        let e = format_verdict("f", &st(16, 0, 0)).unwrap_err();
        assert!(
            e.0.contains("f is not a kubelet log") && e.0.contains("klog"),
            "{e}"
        );
        let e = format_verdict("f", &st(0, 0, 1)).unwrap_err();
        assert!(
            e.0.contains("longer than 1 MiB (the cap of one log line)"),
            "{e}"
        );
        assert_eq!(
            format_verdict("f", &st(0, 0, 0)).unwrap(),
            None,
            "nothing yet"
        );
        assert_eq!(format_verdict("f", &st(3, 1, 0)).unwrap(), None);
        assert!(format_verdict("f", &st(3, 1, 2))
            .unwrap()
            .unwrap()
            .contains("2 line(s) longer than 1 MiB"));
    }
    use super::*;

    const MIN: i64 = 60_000;

    fn rules() -> Rules {
        Rules {
            window_ms: 15 * MIN,
            stuck_ms: 10 * MIN,
            thresholds: Thresholds::default(),
        }
    }

    fn fail(t: i64, vol: &str, backoff_ms: u64) -> Failure {
        Failure {
            t,
            volume: format!("kubernetes.io/csi/driver.longhorn.io^{vol}"),
            pv: Some(vol.to_string()),
            op: "UnmountDevice (GetDeviceMountRefs)".into(),
            pod: None,
            backoff_ms,
            error: "GetDeviceMountRefs check failed".into(),
        }
    }

    fn data(f: Vec<Failure>) -> Data {
        Data {
            failures: f,
            sources: vec![SourceInfo {
                name: "test".into(),
                complete: true,
                ..Default::default()
            }],
            streaks: Vec::new(),
        }
    }

    /// The kubelet's real schedule: 0.5s, 1s, 2s… doubling to 2m2s.
    fn schedule(start: i64, until: i64, vol: &str) -> Vec<Failure> {
        let mut v = Vec::new();
        let (mut t, mut b) = (start, 500u64);
        while t <= until {
            v.push(fail(t, vol, b));
            t += b as i64;
            b = (b * 2).min(MAX_BACKOFF_MS);
        }
        v
    }

    #[test]
    fn nothing_is_ok_with_zero_perfdata() {
        let r = evaluate(&data(vec![]), &rules(), 100 * MIN);
        assert_eq!(r.status, Status::Ok);
        assert!(r
            .summary
            .contains("no failed volume operations in the last 15m"));
        let labels: Vec<_> = r.perfdata.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "failed_operations",
                "failing_volumes",
                "max_backoff",
                "longest_failing"
            ]
        );
    }

    #[test]
    fn one_fresh_failure_warns() {
        let now = 100 * MIN;
        let r = evaluate(&data(vec![fail(now - MIN, "pvc-a", 500)]), &rules(), now);
        assert_eq!(r.status, Status::Warning);
        assert!(r.summary.contains("pvc-a"), "{}", r.summary);
    }

    #[test]
    fn failures_dated_in_the_future_are_ignored_with_a_note() {
        let now = 100 * MIN;
        let r = evaluate(
            &data(vec![
                fail(now + 60 * MIN, "pvc-tomorrow", 500),
                fail(now + 2 * MIN, "pvc-skew", 500),
            ]),
            &rules(),
            now,
        );
        // A little clock skew still counts; an hour ahead does not, but is not silent.
        assert_eq!(r.status, Status::Warning);
        assert!(r.summary.contains("pvc-skew") && !r.summary.contains("pvc-tomorrow"));
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("1 failure line(s) dated more than 5m after now")),
            "{:?}",
            r.notes
        );
        let r = evaluate(&data(vec![fail(now - MIN, "pvc-a", 500)]), &rules(), now);
        assert!(r.notes.iter().all(|n| !n.contains("after now")));
    }

    #[test]
    fn failures_outside_window_do_not_count() {
        let now = 100 * MIN;
        let r = evaluate(
            &data(vec![fail(now - 16 * MIN, "pvc-a", 500)]),
            &rules(),
            now,
        );
        assert_eq!(r.status, Status::Ok);
    }

    #[test]
    fn stuck_longer_than_stuck_is_critical() {
        let now = 100 * MIN;
        // Failing for 12 minutes with short backoffs only (not at the max).
        let f: Vec<_> = (0..=24)
            .map(|i| fail(now - 12 * MIN + i * 30_000, "pvc-b", 16_000))
            .collect();
        let r = evaluate(&data(f), &rules(), now);
        assert_eq!(r.status, Status::Critical);
        let v = volumes(&data(vec![]).failures, &[], &rules(), now);
        assert!(v.is_empty());
        // The first line read already had a 16s backoff: the run began before it.
        assert!(
            r.summary.contains("failing for at least 12m"),
            "{}",
            r.summary
        );
        // Only 8 minutes: WARNING.
        let f: Vec<_> = (0..=16)
            .map(|i| fail(now - 8 * MIN + i * 30_000, "pvc-b", 16_000))
            .collect();
        assert_eq!(evaluate(&data(f), &rules(), now).status, Status::Warning);
    }

    /// The Talos log of #21: GetDeviceMountRefs failing from 05:48 (the kubelet's first 500ms
    /// backoff) to 06:27 at 2m2s, read at 06:40 with the default 15m window. The age is the true
    /// one from every line read, not from the window's.
    #[test]
    fn age_is_from_every_line_read_and_at_least_when_unknown() {
        let t0 = 100 * 60 * MIN;
        let all = schedule(t0, t0 + 39 * MIN, "pvc-talos");
        let now = all.last().unwrap().t + 90_000;
        let known = streaks(&[], &all, now - 15 * MIN, now);
        assert_eq!(known.len(), 1);
        assert_eq!((known[0].start, known[0].start_known()), (t0, true));
        // What the window holds, with the run known from every line read.
        let in_lookback: Vec<Failure> = all
            .iter()
            .filter(|f| f.t >= now - 15 * MIN)
            .cloned()
            .collect();
        let mut d = data(in_lookback.clone());
        d.streaks = known.clone();
        let r = evaluate(&d, &rules(), now);
        assert!(
            r.summary.contains(
                "pvc-talos UnmountDevice (GetDeviceMountRefs) failing for 38m43s at max backoff"
            ),
            "{}",
            r.summary
        );
        // Without the earlier lines: the first line read is at 2m2s, so "at least".
        let r = evaluate(&data(in_lookback.clone()), &rules(), now);
        assert!(
            r.summary.contains("failing for at least 1"),
            "{}",
            r.summary
        );
        // A kept run that ended long before this one's start does not lengthen it.
        let mut old = known[0].clone();
        old.start -= 600 * MIN;
        old.last = old.start + MIN;
        let mut d = data(in_lookback);
        d.streaks = vec![old];
        let v = volumes(&d.failures, &d.streaks, &rules(), now);
        assert!(!v[0].start_known && v[0].streak_start > t0, "{v:?}");
    }

    /// Runs kept across runs of the check: extended by new lines, started earlier by earlier
    /// lines that reach them, replaced after a gap, dropped once ended before the lookback.
    #[test]
    fn streaks_extend_across_runs() {
        let a = schedule(0, 10 * MIN, "pvc-a");
        let (first, second) = a.split_at(a.len() / 2);
        let s1 = streaks(&[], first, -MIN, 5 * MIN);
        let s2 = streaks(&s1, second, 0, 11 * MIN);
        assert_eq!(s2, streaks(&[], &a, 0, 11 * MIN));
        assert_eq!((s2[0].start, s2[0].last), (0, a.last().unwrap().t));
        // A gap longer than backoff + grace: a new run.
        let later = vec![fail(s2[0].last + 30 * MIN, "pvc-a", 122_000)];
        let s3 = streaks(&s2, &later, 0, 60 * MIN);
        assert_eq!(s3[0].start, s2[0].last + 30 * MIN);
        assert!(!s3[0].start_known());
        // Ended before `since`: dropped.
        assert!(streaks(&s2, &[], 60 * MIN, 60 * MIN).is_empty());
        // From the future: ignored.
        let ghost = vec![fail(24 * 60 * MIN, "pvc-g", 500)];
        assert!(streaks(&[], &ghost, 0, MIN).is_empty());
    }

    #[test]
    fn max_backoff_is_critical_and_reported() {
        let now = 100 * MIN;
        // The real schedule reaches 2m2s after ~2 minutes; 6 minutes of it.
        let f = schedule(now - 6 * MIN, now, "pvc-c");
        let r = evaluate(&data(f), &rules(), now);
        assert_eq!(r.status, Status::Critical);
        assert!(r.summary.contains("at max backoff"));
        let p = r
            .perfdata
            .iter()
            .find(|p| p.label == "max_backoff")
            .unwrap();
        assert_eq!(p.value, 122.0);
        // The old 2m0s cap counts as the maximum too.
        let r = evaluate(
            &data(vec![fail(now - MIN, "pvc-d", 120_000)]),
            &rules(),
            now,
        );
        assert_eq!(r.status, Status::Critical);
    }

    #[test]
    fn a_gap_restarts_the_streak_and_recovered_volume_is_not_critical() {
        let now = 100 * MIN;
        // Failed 14 minutes ago at max backoff once, then nothing: not active any more.
        let r = evaluate(
            &data(vec![fail(now - 14 * MIN, "pvc-e", 122_000)]),
            &rules(),
            now,
        );
        assert_eq!(r.status, Status::Warning);
        // Two bursts 10 minutes apart: the streak is the second burst only.
        let mut f = vec![fail(now - 14 * MIN, "pvc-f", 500)];
        f.push(fail(now - MIN, "pvc-f", 500));
        let v = volumes(&f, &[], &rules(), now);
        assert_eq!(v[0].streak_start, now - MIN);
        assert_eq!(v[0].status, Status::Warning);
    }

    #[test]
    fn ranges_override_and_perfdata() {
        let now = 100 * MIN;
        let mut f = schedule(now - 6 * MIN, now, "pvc-c");
        f.push(fail(now - MIN, "pvc-a", 500));
        let mut r = rules();
        r.thresholds = Thresholds::new(
            Some(Range::parse("5").unwrap()),
            Some(Range::parse("10").unwrap()),
        );
        let rep = evaluate(&data(f.clone()), &r, now);
        assert_eq!(rep.status, Status::Ok);
        assert!(rep.findings.iter().all(|x| x.status == Status::Ok));
        let pv = |l: &str| rep.perfdata.iter().find(|p| p.label == l).unwrap().value;
        assert_eq!(pv("failing_volumes"), 2.0);
        assert_eq!(pv("failed_operations"), f.len() as f64);
        r.thresholds = Thresholds::new(Some(Range::parse("1").unwrap()), None);
        assert_eq!(evaluate(&data(f), &r, now).status, Status::Warning);
    }

    #[test]
    fn incomplete_read_without_failures_is_unknown() {
        let mut d = data(vec![]);
        d.sources[0].complete = false;
        let r = evaluate(&d, &rules(), 100 * MIN);
        assert_eq!(r.status, Status::Unknown);
        assert!(r.summary.contains("deadline"));
    }

    #[test]
    fn year_boundary_end_to_end_of_parse_and_evaluate() {
        // now = 2027-01-01 00:05 UTC; klog lines from Dec 31 23:58 (no year in the header, and no
        // parseable Go time) must land in the window.
        let now = time::days_from_civil(2027, 1, 1) * 86_400_000 + 5 * MIN;
        let line = r#"E1231 23:58:00.000000    2166 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/x^pvc-y podName: nodeName:}" failed. No retries permitted until (unparseable) (durationBeforeRetry 2m2s). Error: UnmountDevice failed for volume "pvc-y""#;
        let f = parse::parse_line(line.as_bytes(), None, now, &time::FixedTz(0)).unwrap();
        assert_eq!(f.t, now - 7 * MIN);
        let line2 = line.replace("E1231 23:58:00", "E0101 00:04:00");
        let f2 = parse::parse_line(line2.as_bytes(), None, now, &time::FixedTz(0)).unwrap();
        assert_eq!(f2.t, now - MIN);
        let mut all = vec![f, f2];
        for hm in ["E0101 00:00:00", "E0101 00:02:00"] {
            let l = line.replace("E1231 23:58:00", hm);
            all.push(parse::parse_line(l.as_bytes(), None, now, &time::FixedTz(0)).unwrap());
        }
        let r = evaluate(&data(all), &rules(), now);
        assert_eq!(r.status, Status::Critical);
        assert!(
            r.summary
                .contains("pvc-y UnmountDevice failing for at least 6m at max backoff"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn keep_drops_the_old_and_the_future() {
        let now = 100 * MIN;
        let kept = keep(
            vec![
                fail(now - 20 * MIN, "pvc-old", 500),
                fail(now - MIN, "pvc-a", 500),
                fail(now + MIN, "pvc-soon", 500),
                fail(now + 24 * 60 * MIN, "pvc-ghost", 500),
            ],
            now - 15 * MIN,
            now,
        );
        let pvs: Vec<_> = kept.iter().map(|f| f.pv.clone().unwrap()).collect();
        assert_eq!(pvs, ["pvc-a", "pvc-soon"]);
    }

    /// A kubelet run in a container: its lines reach the file wrapped by the runtime. Docker's
    /// json-file driver escapes the klog line into `"log"` (the operation key's quotes become
    /// `\"`); the CRI format prefixes time, stream and tag, and a `P` line continues in the
    /// next record, which does not hold the needle. Mixed in one file (a node moved from
    /// dockershim to containerd keeps both shapes in its collected logs), detected per line.
    #[test]
    fn gather_reads_docker_json_file_and_cri_wrapped_lines() {
        use clap::Parser;
        let dir = std::env::temp_dir().join(format!("nested-wrap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let now = time::now_ms();
        // The runtime's times (RFC 3339, UTC), 5 and 3 minutes ago.
        let rfc = |ms: i64| {
            let (y, mo, d) = time::civil_from_days(ms.div_euclid(86_400_000));
            let s = ms.rem_euclid(86_400_000) / 1000;
            format!(
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.123456789Z",
                s / 3600,
                s / 60 % 60,
                s % 60
            )
        };
        let klog = |pv: &str, backoff: &str| {
            format!(
                r#"E1203 06:02:55.123456    2166 nestedpendingoperations.go:348] Operation for "{{volumeName:kubernetes.io/csi/driver.longhorn.io^{pv} podName: nodeName:}}" failed. No retries permitted until 2026-12-03 06:04:57.123456789 +0000 UTC m=+8812235.211760637 (durationBeforeRetry {backoff}). Error: GetDeviceMountRefs check failed for volume "{pv}" (UniqueName: "kubernetes.io/csi/driver.longhorn.io^{pv}") on node "node-1" : the device mount path "/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/0716/globalmount" is still mounted by other references [/var/lib/kubelet/pods/0d6a/volumes/kubernetes.io~csi/{pv}/mount]"#
            )
        };
        let docker = serde_json::json!({
            "log": format!("{}\n", klog("pvc-docker", "1m4s")),
            "stream": "stderr",
            "time": rfc(now - 5 * MIN),
        })
        .to_string();
        assert!(
            docker.contains(r#"Operation for \"{volumeName"#),
            "{docker}"
        );
        let cri_full = format!(
            "{} stderr F {}",
            rfc(now - 3 * MIN),
            klog("pvc-cri", "2m2s")
        );
        let long = klog("pvc-partial", "32s");
        let (head, tail) = long.split_at(long.find("still mounted").unwrap());
        let t = rfc(now - 2 * MIN);
        let content = format!(
            "{docker}\n{{\"log\":\"I1203 06:00:00.000000    2166 kubelet.go:1] noise\\n\",\"stream\":\"stderr\",\"time\":\"{t}\"}}\n{cri_full}\n{t} stderr P {head}\n{t} stderr F {tail}\n{t} stderr F I1203 06:00:00.000000 2166 x.go:1] after\n"
        );
        let log = dir.join("0.log");
        std::fs::write(&log, content).unwrap();
        let opts = Opts::try_parse_from([
            "check_kubelet_nested_ops",
            "--log-file",
            log.to_str().unwrap(),
        ])
        .unwrap();
        let ctx = Ctx::for_test(Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(5);
        let d = gather(&opts, &ctx, now, deadline).unwrap();
        let got: Vec<(String, i64, u64)> = d
            .failures
            .iter()
            .map(|f| (f.pv.clone().unwrap(), f.t, f.backoff_ms))
            .collect();
        let at = |ago: i64| (now - ago).div_euclid(1000) * 1000 + 123;
        // The runtime's time is the entry's (the klog header's 06:02:55 is ignored).
        assert_eq!(
            got,
            [
                ("pvc-docker".to_string(), at(5 * MIN), 64_000),
                ("pvc-cri".to_string(), at(3 * MIN), 122_000),
                ("pvc-partial".to_string(), at(2 * MIN), 32_000)
            ]
        );
        // The joined line keeps the references, which were in the second piece.
        assert!(d.failures[2]
            .error
            .ends_with("still mounted by other references [/var/lib/kubelet/pods/0d6a/volumes/kubernetes.io~csi/pvc-partial/mount]"));
        assert_eq!(d.failures[0].op, "UnmountDevice (GetDeviceMountRefs)");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The zone of klog times: --tz first; in container mode the host's /etc/localtime (a copy,
    /// or a symlink into the host's zoneinfo, resolved under the host root), UTC without one.
    #[test]
    fn zone_of_klog_times() {
        use clap::Parser;
        let kolkata = std::path::Path::new("/usr/share/zoneinfo/Asia/Kolkata");
        let host = std::env::temp_dir().join(format!("nested-tz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&host);
        std::fs::create_dir_all(host.join("etc")).unwrap();
        let opts = |extra: &[&str]| {
            let mut a = vec![
                "check_kubelet_nested_ops",
                "--host-root",
                host.to_str().unwrap(),
            ];
            a.extend_from_slice(extra);
            Opts::try_parse_from(a).unwrap()
        };
        // No /etc/localtime on the host: UTC.
        assert_eq!(zone(&opts(&[])).unwrap().offset_at(0), 0);
        // --tz wins.
        assert_eq!(
            zone(&opts(&["--tz", "+08:00"])).unwrap().offset_at(0),
            8 * 3600
        );
        assert!(zone(&opts(&["--tz", "../../etc/shadow"])).is_err());
        if !kolkata.exists() {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("needs tzdata");
            }
            eprintln!("skipped: no tzdata");
            return;
        }
        // A copy of the host's zone file.
        std::fs::copy(kolkata, host.join("etc/localtime")).unwrap();
        assert_eq!(zone(&opts(&[])).unwrap().offset_at(1_800_000_000), 19800);
        // A symlink into the host's zoneinfo: followed under the host root, not in ours.
        std::fs::remove_file(host.join("etc/localtime")).unwrap();
        std::fs::create_dir_all(host.join("usr/share/zoneinfo/Asia")).unwrap();
        std::fs::copy(kolkata, host.join("usr/share/zoneinfo/Asia/Kolkata")).unwrap();
        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/Asia/Kolkata",
            host.join("etc/localtime"),
        )
        .unwrap();
        assert_eq!(zone(&opts(&[])).unwrap().offset_at(1_800_000_000), 19800);
        // An IANA name is read from the host's zoneinfo in container mode.
        assert_eq!(
            zone(&opts(&["--tz", "Asia/Kolkata"])).unwrap().offset_at(0),
            19800
        );
        // Garbage where the zone should be: UNKNOWN naming it.
        std::fs::remove_file(host.join("etc/localtime")).unwrap();
        std::fs::write(host.join("etc/localtime"), "not a zone").unwrap();
        let e = zone(&opts(&[])).err().unwrap();
        assert!(e.0.contains("TZif") && e.0.contains("--tz"), "{}", e.0);
        std::fs::remove_dir_all(&host).unwrap();
    }

    /// A state file holding a failure from tomorrow beside a real one: the ghost is dropped with a
    /// note and never saved again (it would start counting once the clock reaches it).
    #[test]
    fn gather_drops_kept_failures_from_the_future() {
        use clap::Parser;
        let dir = std::env::temp_dir().join(format!("nested-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("kubelet.log");
        std::fs::write(
            &log,
            "I0713 20:27:25.123456    2166 kubelet.go:1] no failure here\n",
        )
        .unwrap();
        let st = dir.join("state");
        let opts = Opts::try_parse_from([
            "check_kubelet_nested_ops",
            "--log-file",
            log.to_str().unwrap(),
            "--state-dir",
            st.to_str().unwrap(),
        ])
        .unwrap();
        let now = time::now_ms();
        let sp = state::path(&st, CHECK_ID, &format!("file:{}", log.display()));
        state::save(
            &sp,
            &SourceState {
                cursor: None,
                file: None,
                failures: vec![
                    fail(now - MIN, "pvc-real", 2000),
                    fail(now + 24 * 60 * MIN, "pvc-ghost", 2000),
                ],
                streaks: Vec::new(),
            },
        )
        .unwrap();
        let ctx = Ctx::for_test(Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(5);
        let d = gather(&opts, &ctx, now, deadline).unwrap();
        let pvs: Vec<_> = d.failures.iter().map(|f| f.pv.clone().unwrap()).collect();
        assert_eq!(pvs, ["pvc-real"]);
        assert!(
            d.sources[0]
                .notes
                .iter()
                .any(|n| n.contains("1 kept failure(s) dated in the future were dropped")),
            "{:?}",
            d.sources
        );
        let saved: SourceState = state::load(&sp).unwrap().unwrap();
        assert_eq!(saved.failures.len(), 1);
        assert_eq!(saved.failures[0].pv.as_deref(), Some("pvc-real"));
        // The next run: the real failure is still known, and nothing is said about the state.
        let d = gather(&opts, &ctx, now, deadline).unwrap();
        assert_eq!(d.failures.len(), 1);
        assert!(d.sources[0].notes.is_empty(), "{:?}", d.sources);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
