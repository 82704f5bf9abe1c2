//! check_storage_kernel_errors: storage errors in the kernel log, mapped to the volumes they hit.
//!
//! gather (read /dev/kmsg, classify records, resolve devices to mounts and PVs; resumable with
//! `--state-dir`) → evaluate (pure: aggregation per category and device, status) → report.

pub mod classify;

use clap::Parser;
use classify::{Category, Device, Patterns};
use kube::names::{Names, Wanted};
use node::logs::{kmsg, state, time};
use node::Host;
use plugin::{
    Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds, Unknown,
};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LONG_ABOUT: &str = "\
Reads the kernel log (/dev/kmsg, non-blocking, from the start of the ring buffer) for storage
errors and names the volumes they hit: ext4 errors, journal aborts, read-only remounts, XFS
shutdowns, corruption (XFS corruption, internal errors, failed log recovery) and lost writes (ext4
unwritten extents not converted, ext4 writeback refused, JBD2 file data flush errors, loop write
errors), block I/O errors, SCSI devices offline, iSCSI connection errors and session recovery
timeouts, hung tasks. Each device is mapped through the mount table to its mount points and,
under a kubelet root, to its PersistentVolume.

CRITICAL: read-only remount, journal abort, XFS shutdown, corruption, lost writes, SCSI device
offline, iSCSI session recovery timeout, --critical-pattern. WARNING: ext4 error, I/O error, iSCSI connection error,
hung task, --warning-pattern. Only records of the last --window count (their monotonic time
mapped to the wall clock); with --state-dir only records newer than the last run's sequence
number are read (a reboot, seen by a new boot id, starts afresh) and the window's findings are
kept between runs. Only the kernel's own records count (not userspace writes to /dev/kmsg).";

#[derive(Debug, Clone, Parser)]
#[command(
    name = "check_storage_kernel_errors",
    version,
    about = "Alert on storage errors in the kernel log, mapped to the volumes they hit",
    long_about = LONG_ABOUT
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// The kernel log: the kmsg device, or a regular file holding kmsg records
    #[arg(long, value_name = "PATH")]
    pub kmsg: Option<PathBuf>,

    /// Range on the number of storage-error records in the window for WARNING (with -w/-c the
    /// count decides the state instead of each record's kind)
    #[arg(short = 'w', long = "warning", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub warning: Option<Range>,

    /// Range on the number of storage-error records in the window for CRITICAL
    #[arg(short = 'c', long = "critical", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub critical: Option<Range>,

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
    pub names: kube::NamesArgs,
}

/// One classified record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub seq: u64,
    /// Wall time (epoch ms) mapped from the monotonic timestamp.
    pub t: i64,
    pub category: String,
    #[serde(default)]
    pub device: Option<Device>,
    pub text: String,
}

/// What a device holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holding {
    /// Block devices behind it (for SCSI addresses and iSCSI sessions: their disks).
    pub disks: Vec<String>,
    /// (mount point, PV name if the mount is a kubelet volume).
    pub mounts: Vec<(PathBuf, Option<String>)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    pub events: Vec<Event>,
    pub holdings: BTreeMap<Device, Holding>,
    pub records: u64,
    pub overwritten: u64,
    pub complete: bool,
    pub notes: Vec<String>,
}

/// The pod UID in a kubelet pod volume path (`…/pods/<uid>/volumes/…`, `…/volumeDevices/…`).
pub fn pod_uid_of(mount_point: &Path) -> Option<String> {
    let parts: Vec<&str> = mount_point
        .iter()
        .map(|c| c.to_str().unwrap_or(""))
        .collect();
    parts.windows(3).find_map(|w| {
        (w[0] == "pods" && (w[2] == "volumes" || w[2] == "volumeDevices") && !w[1].is_empty())
            .then(|| w[1].to_string())
    })
}

/// What a device's finding is about: the block device (or the one disk behind a SCSI address
/// or iSCSI session), the iSCSI session, and the PV, claim, pod and mount point when the device
/// holds exactly one PV.
fn device_subject(dev: Option<&Device>, data: &Data, names: &Names) -> plugin::Subject {
    let Some(dev) = dev else {
        return plugin::Subject::new();
    };
    let h = data.holdings.get(dev);
    let (pvs, uids) = h.map(held).unwrap_or_default();
    let mut s = match pvs.as_slice() {
        [pv] => names.subject(pv, uids.iter().map(String::as_str)),
        _ => plugin::Subject::new(),
    };
    s = match dev {
        Device::Block(b) => s.device(b.as_str()),
        Device::Scsi(_) | Device::IscsiSession(_) => match h.map(|h| h.disks.as_slice()) {
            Some([one]) => s.device(one.as_str()),
            _ => s,
        },
    };
    if let Device::IscsiSession(n) = dev {
        s = s.session(format!("session{n}"));
    }
    // The one mount, else the first mount of the one PV.
    let mount = h.and_then(|h| match h.mounts.as_slice() {
        [(mp, _)] => Some(mp),
        ms => ms
            .iter()
            .find(|(_, p)| p.is_some() && p.as_deref() == s.pv.as_deref())
            .map(|(mp, _)| mp),
    });
    match mount {
        Some(mp) => s.mount(mp.to_string_lossy()),
        None => s,
    }
}

/// PVs and pod UIDs of what a device holds.
fn held(h: &Holding) -> (Vec<&str>, Vec<String>) {
    let mut pvs: Vec<&str> = Vec::new();
    for p in h.mounts.iter().filter_map(|(_, pv)| pv.as_deref()) {
        if !pvs.contains(&p) {
            pvs.push(p);
        }
    }
    let mut uids: Vec<String> = h
        .mounts
        .iter()
        .filter_map(|(mp, _)| pod_uid_of(mp))
        .collect();
    uids.sort();
    uids.dedup();
    (pvs, uids)
}

/// Events that count: in the window, each record once.
fn counted(data: &Data, window_ms: i64, now: i64) -> impl Iterator<Item = &Event> {
    let mut seen = BTreeSet::new();
    data.events.iter().filter(move |e| {
        !(window_ms > 0 && e.t < now - window_ms) && seen.insert((e.seq, e.text.as_str()))
    })
}

/// The volumes and pods whose names the report needs: those hit by a counted record (every
/// finding of this check is an alert). Pure.
pub fn wanted(data: &Data, window_ms: i64, now: i64) -> Wanted {
    let mut w = Wanted::default();
    for e in counted(data, window_ms, now) {
        if Category::from_label(&e.category).is_none() {
            continue;
        }
        if let Some(h) = e.device.as_ref().and_then(|d| data.holdings.get(d)) {
            let (pvs, uids) = held(h);
            for pv in pvs {
                w.add(pv, uids.iter().map(String::as_str));
            }
        }
    }
    w
}

/// Aggregate and decide (pure), without names. `now`: epoch ms; `window_ms` 0 = everything.
pub fn evaluate(data: &Data, window_ms: i64, now: i64) -> Report {
    evaluate_named(data, window_ms, now, &Names::default())
}

/// Aggregate and decide (pure), volumes named with what `names` knows (its notes are added).
pub fn evaluate_named(data: &Data, window_ms: i64, now: i64, names: &Names) -> Report {
    evaluate_with(data, window_ms, now, names, &Thresholds::default())
}

/// As [`evaluate_named`], with -w/-c ranges on the number of storage-error records in the
/// window: when one is given, that count decides the state instead of each record's kind.
pub fn evaluate_with(
    data: &Data,
    window_ms: i64,
    now: i64,
    names: &Names,
    thresholds: &Thresholds,
) -> Report {
    type Key = (Category, Option<Device>);
    let mut groups: BTreeMap<Key, Vec<&Event>> = BTreeMap::new();
    let mut counts: BTreeMap<Category, u64> = BTreeMap::new();
    for e in counted(data, window_ms, now) {
        let Some(cat) = Category::from_label(&e.category) else {
            continue;
        };
        *counts.entry(cat).or_default() += 1;
        groups.entry((cat, e.device.clone())).or_default().push(e);
    }
    let describe = |d: &Option<Device>| -> String {
        let Some(d) = d else {
            return "unknown device".into();
        };
        let Some(h) = data.holdings.get(d) else {
            return d.to_string();
        };
        let mut s = d.to_string();
        if !h.disks.is_empty() && !matches!(d, Device::Block(_)) {
            s.push_str(&format!(" ({})", h.disks.join(",")));
        }
        let (pvs_u, uids) = held(h);
        if !pvs_u.is_empty() {
            let named: Vec<String> = pvs_u
                .iter()
                .map(|pv| names.volume(pv, uids.iter().map(String::as_str)))
                .collect();
            s.push_str(&format!(" → {}", named.join(",")));
        } else if let Some((mp, _)) = h.mounts.first() {
            s.push_str(&format!(" → {}", mp.display()));
        }
        s
    };
    let mut findings = Vec::new();
    let mut status = Status::Ok;
    let mut ordered: Vec<(&Key, &Vec<&Event>)> = groups.iter().collect();
    ordered.sort_by_key(|((c, _), evs)| {
        (
            std::cmp::Reverse(c.status().rank()),
            std::cmp::Reverse(evs.iter().map(|e| e.t).max().unwrap_or(0)),
        )
    });
    let mut parts = Vec::new();
    for ((cat, dev), evs) in &ordered {
        status = status.worst(cat.status());
        let last = evs.iter().max_by_key(|e| (e.t, e.seq)).expect("non-empty");
        let what = describe(dev);
        parts.push(format!("{} on {}", cat.human(), what));
        let mut f = Finding::new(
            cat.status(),
            format!(
                "{} on {}: {} record{}, last {}",
                cat.human(),
                what,
                evs.len(),
                if evs.len() == 1 { "" } else { "s" },
                time::fmt_utc(last.t)
            ),
        )
        .signal(cat.label())
        .subject(device_subject(dev.as_ref(), data, names))
        .detail(format!("kernel: {}", last.text));
        if let Some(h) = dev.as_ref().and_then(|d| data.holdings.get(d)) {
            for (mp, pv) in h.mounts.iter().take(5) {
                f = f.detail(match pv {
                    Some(pv) => format!("mounted at {} ({pv})", mp.display()),
                    None => format!("mounted at {}", mp.display()),
                });
            }
        }
        findings.push(f);
    }
    let window = if window_ms > 0 {
        format!(
            "in the last {}",
            plugin::fmt_duration(Duration::from_millis(window_ms as u64))
        )
    } else {
        "in the kernel log".to_string()
    };
    let summary = if parts.is_empty() {
        format!("no storage errors {window} ({} records read)", data.records)
    } else {
        let more = if parts.len() > 3 {
            format!("; and {} more", parts.len() - 3)
        } else {
            String::new()
        };
        parts.truncate(3);
        format!("{}{more}", parts.join("; "))
    };
    let errors: u64 = counts.values().sum();
    let status = if thresholds.warning.is_some() || thresholds.critical.is_some() {
        thresholds.evaluate(errors as f64)
    } else {
        status
    };
    let mut report = Report::new(status, summary);
    if !data.complete {
        report = report
            .note("reading the kernel log stopped at the deadline; later records were not seen");
        if status == Status::Ok {
            report.status = Status::Unknown;
            report.summary = format!(
                "could not read the whole kernel log before the deadline ({} records read, no storage errors in them)",
                data.records
            );
        }
    }
    if data.overwritten > 0 {
        report = report.note(format!(
            "{} time(s) records were overwritten in the ring buffer while reading",
            data.overwritten
        ));
    }
    for f in findings {
        report = report.finding(f);
    }
    for n in data.notes.iter().chain(&names.notes) {
        report = report.note(n.clone());
    }
    for c in Category::ALL {
        report =
            report.perf(Perfdata::new(c.label(), *counts.get(&c).unwrap_or(&0) as f64).min(0.0));
    }
    report
        .perf(Perfdata::new("records", data.records as f64).min(0.0))
        .perf(
            Perfdata::new("storage_errors", errors as f64)
                .thresholds(thresholds)
                .min(0.0),
        )
}

/// What the check keeps between runs.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KmsgState {
    pub boot_id: Option<String>,
    pub last_seq: Option<u64>,
    #[serde(default)]
    pub events: Vec<Event>,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Block device name → maj:min, its partitions and device-mapper holders (two levels).
fn block_family(sys: &Path, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![(name.to_string(), 0)];
    while let Some((n, depth)) = todo.pop() {
        if out.iter().any(|(x, _): &(String, String)| *x == n) {
            continue;
        }
        let base = sys.join("class/block").join(&n);
        if let Some(dev) = read_trim(&base.join("dev")) {
            out.push((n.clone(), dev));
        }
        if depth >= 2 {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&base) {
            for e in rd.flatten() {
                let c = e.file_name().to_string_lossy().into_owned();
                if c.starts_with(&n) && e.path().join("partition").exists() {
                    todo.push((c, depth + 1));
                }
            }
        }
        if let Ok(rd) = std::fs::read_dir(base.join("holders")) {
            for e in rd.flatten() {
                todo.push((e.file_name().to_string_lossy().into_owned(), depth + 1));
            }
        }
    }
    out
}

/// SCSI address → its block disks (`/sys/class/scsi_device/H:C:T:L/device/block/*`).
fn scsi_disks(sys: &Path, addr: &str) -> Vec<String> {
    let p = sys
        .join("class/scsi_device")
        .join(addr)
        .join("device/block");
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// iSCSI session → its disks (`…/sessionN/device/target*/H:C:T:L/block/*`).
fn session_disks(sys: &Path, n: u32) -> Vec<String> {
    let dev = sys.join(format!("class/iscsi_session/session{n}/device"));
    let mut out = Vec::new();
    for t in std::fs::read_dir(&dev).into_iter().flatten().flatten() {
        if !t.file_name().to_string_lossy().starts_with("target") {
            continue;
        }
        for lun in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
            for b in std::fs::read_dir(lun.path().join("block"))
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push(b.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// Map a device to its disks, mount points and PVs.
pub fn resolve(
    dev: &Device,
    sys: &Path,
    mounts: &[node::Mount],
    roots: &[PathBuf],
    host: &Host,
) -> Holding {
    let disks = match dev {
        Device::Block(b) => vec![b.clone()],
        Device::Scsi(a) => scsi_disks(sys, a),
        Device::IscsiSession(n) => session_disks(sys, *n),
    };
    let mut family: Vec<(String, String)> = Vec::new();
    for d in &disks {
        family.extend(block_family(sys, d));
    }
    let names: Vec<&str> = family
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(disks.iter().map(String::as_str))
        .collect();
    let mut hold = Holding {
        disks: disks.clone(),
        mounts: Vec::new(),
    };
    for m in mounts {
        let by_dev = family.iter().any(|(_, mm)| *mm == m.dev());
        let src = m.source.trim_start_matches("/dev/");
        let by_name = names.contains(&src);
        if !(by_dev || by_name) {
            continue;
        }
        let pv = node::kubelet::classify(&m.mount_point, roots).and_then(|k| {
            k.volume_name().map(str::to_string).or_else(|| {
                node::kubelet::read_vol_data(host, &m.mount_point)
                    .ok()
                    .flatten()
                    .and_then(|v| v.spec_vol_id.or(v.volume_handle))
            })
        });
        if !hold.mounts.iter().any(|(p, _)| *p == m.mount_point) {
            hold.mounts.push((m.mount_point.clone(), pv));
        }
    }
    // Volumes first, then the shortest paths.
    hold.mounts
        .sort_by_key(|(p, pv)| (pv.is_none(), p.as_os_str().len()));
    hold
}

const CHECK_ID: &str = "storage_kernel_errors";

impl Opts {
    fn patterns(&self) -> Patterns {
        Patterns {
            critical: self.critical_pattern.clone(),
            warning: self.warning_pattern.clone(),
            exclude: self.exclude_pattern.clone(),
        }
    }
}

/// Drop the kept events dated in the future (beyond a small slack); returns how many. A record's
/// wall time is mapped from the kernel's monotonic clock at read time, so it is never later than
/// now: a future one comes from a clock set back or a state file that is not this node's, and
/// kept, it would raise an alert until the clock catches up with it.
pub fn drop_future_events(events: &mut Vec<Event>, now: i64) -> usize {
    state::drop_future(events, now, |e| e.t)
}

/// True when a saved position `after` cannot be this log's: the whole log was read and its
/// newest record (`max_seq`, `None` for an empty log) is older than the position (pure).
pub fn position_beyond_log(after: u64, max_seq: Option<u64>, complete: bool) -> bool {
    complete && max_seq.is_none_or(|m| m < after)
}

/// Storage events kept (in the state and for the answer): the newest ones.
const MAX_EVENTS: usize = 5000;

/// Read, classify, resolve.
pub fn gather(opts: &Opts, ctx: &Ctx, deadline: Instant) -> Result<Data, Unknown> {
    let host = opts.host.host();
    // A mistyped --kubelet-root is a usage mistake even when no record needs mapping.
    let roots = opts.kubelet_root.resolve_if_any(&host)?;
    let kmsg_path = opts.kmsg.clone().unwrap_or_else(|| host.file("/dev/kmsg"));
    let own_kmsg = opts.kmsg.is_none() && host.is_local();
    let patterns = opts.patterns();
    let window_ms = opts.window.as_millis() as i64;
    let (mono_now, real_now) = kmsg::clocks();
    let now = real_now;
    let mut data = Data {
        complete: true,
        ..Default::default()
    };
    // State.
    let boot_id = read_trim(&host.file("/proc/sys/kernel/random/boot_id"));
    let state_path = opts
        .state_dir
        .as_ref()
        .map(|d| state::path(d, CHECK_ID, &kmsg_path.display().to_string()));
    let mut st = KmsgState::default();
    if let Some(p) = &state_path {
        match state::load::<KmsgState>(p) {
            Ok(Some(s)) => {
                if s.boot_id.is_some() && s.boot_id == boot_id {
                    st = s;
                } else {
                    data.notes.push("the node rebooted since the last run (new boot id): the kernel log is read afresh".into());
                }
            }
            Ok(None) => {}
            Err(e) => data.notes.push(e),
        }
    }
    let future = drop_future_events(&mut st.events, now);
    if future > 0 {
        data.notes.push(format!(
            "state file {}: {future} kept record(s) dated in the future were dropped (the clock was set back, or the state is not this node's)",
            state_path.as_deref().unwrap_or(Path::new("?")).display()
        ));
    }
    let mut after = st.last_seq;
    let mut events = std::mem::take(&mut st.events);
    ctx.stage(format!("reading {}", kmsg_path.display()));
    let (stats, first_seq, max_seq) = loop {
        let mut first_seq: Option<u64> = None;
        let mut max_seq: Option<u64> = None;
        let mut records = 0u64;
        // cap_syslog serves the node's own /dev/kmsg only, never a --kmsg the caller named.
        let res = node::privilege::elevated_if(own_kmsg, || {
            kmsg::read(&kmsg_path, deadline, |r| {
                records += 1;
                first_seq.get_or_insert(r.seq);
                max_seq = Some(max_seq.map_or(r.seq, |s| s.max(r.seq)));
                if after.is_some_and(|a| r.seq <= a) || r.facility != 0 {
                    return;
                }
                let t = kmsg::wall_ms(r.usec, mono_now, real_now);
                if window_ms > 0 && t < now - window_ms {
                    return;
                }
                if let Some((cat, dev)) = patterns.classify(&r.text) {
                    events.push(Event {
                        seq: r.seq,
                        t,
                        category: cat.label().to_string(),
                        device: dev,
                        text: r.text.clone(),
                    });
                    // Only the newest MAX_EVENTS are kept (below): drop older ones as we go, so a
                    // log of nothing but errors cannot grow memory without bound.
                    if events.len() >= 2 * MAX_EVENTS {
                        events.drain(..events.len() - MAX_EVENTS);
                    }
                }
            })
        });
        let stats = match res {
            Ok(s) => s,
            Err(kmsg::KmsgError::Permission(e)) => {
                let restrict = read_trim(&host.file("/proc/sys/kernel/dmesg_restrict"))
                    .map(|v| format!(" (kernel.dmesg_restrict = {v})"))
                    .unwrap_or_default();
                return Err(Unknown(format!(
                    "cannot read {}: {}: reading the kernel log needs CAP_SYSLOG when kernel.dmesg_restrict=1{restrict}; run the check as root or grant it CAP_SYSLOG (setcap cap_syslog+ep)",
                    kmsg_path.display(),
                    node::errtext(&e)
                )));
            }
            Err(kmsg::KmsgError::Other(e)) => return Err(Unknown(e)),
        };
        data.records = records;
        if let Some(a) = after.filter(|&a| position_beyond_log(a, max_seq, stats.complete)) {
            // The newest record is never overwritten, so a saved position past it is not this
            // log's: keeping it would skip every record until the kernel catches up with it
            // (never, for a corrupted number). Drop the state and read the log again from its start.
            data.notes.push(format!(
                "state file {}: its last sequence number {a} is beyond the end of the kernel log (last record {}): the state is not this log's; read afresh",
                state_path.as_deref().unwrap_or(Path::new("?")).display(),
                max_seq.map_or("none".to_string(), |m| m.to_string())
            ));
            after = None;
            events.clear();
            continue;
        }
        break (stats, first_seq, max_seq);
    };
    let last_seq = match (after, max_seq) {
        (Some(a), Some(m)) => Some(a.max(m)),
        (a, m) => a.or(m),
    };
    if let (Some(a), Some(f)) = (after, first_seq) {
        if f > a + 1 {
            data.notes.push(format!(
                "{} records were overwritten in the ring buffer between runs (sequence {} to {}): run the check more often",
                f - a - 1,
                a + 1,
                f - 1
            ));
        }
    }
    data.overwritten = stats.overwritten;
    data.complete = stats.complete;
    if window_ms > 0 {
        events.retain(|e| e.t >= now - window_ms);
    }
    if events.len() > MAX_EVENTS {
        events.drain(..events.len() - MAX_EVENTS);
    }
    // Save before resolving (resolution reads sysfs and the mount table only).
    if let Some(p) = &state_path {
        let s = KmsgState {
            boot_id: boot_id.clone(),
            last_seq,
            events: events.clone(),
        };
        if let Err(e) = state::save(p, &s) {
            // A refused directory was already named when loading.
            if !data.notes.contains(&e) {
                data.notes.push(e);
            }
        }
    }
    // Devices → mounts → PVs.
    let devices: BTreeSet<Device> = events.iter().filter_map(|e| e.device.clone()).collect();
    if !devices.is_empty() {
        ctx.stage("mapping devices to mounts");
        let mi_path = opts.mountinfo.path(&host);
        let sys = opts.sys.path(&host);
        match node::mountinfo::read(&mi_path) {
            Ok(mounts) => {
                for d in devices {
                    let h = resolve(&d, &sys, &mounts, &roots, &host);
                    ctx.debug(format!("{d}: disks {:?}, mounts {:?}", h.disks, h.mounts));
                    data.holdings.insert(d, h);
                }
            }
            Err(e) => data
                .notes
                .push(format!("devices not mapped to mounts: {e}")),
        }
    }
    ctx.debug(format!(
        "{}: {} records, last seq {:?}, {} storage events kept",
        kmsg_path.display(),
        stats.records,
        last_seq,
        events.len()
    ));
    data.events = events;
    Ok(data)
}

impl Check for Opts {
    const NAME: &'static str = "STORAGE_KERNEL_ERRORS";
    const BINARY: &'static str = "check_storage_kernel_errors";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin()
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let rem = ctx.remaining();
        let margin = (rem / 5).clamp(Duration::from_millis(100), Duration::from_secs(2));
        let deadline = Instant::now() + rem.saturating_sub(margin);
        let data = gather(self, ctx, deadline)?;
        let (window, now) = (self.window.as_millis() as i64, time::now_ms());
        // Names only after the kernel log is read, and only for the volumes the errors hit.
        let names = kube::names::resolve(&self.names, &wanted(&data, window, now), ctx);
        let t = Thresholds::new(self.warning.clone(), self.critical.clone());
        Ok(evaluate_with(&data, window, now, &names, &t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn ev(seq: u64, t: i64, text: &str) -> Event {
        let (c, d) = classify::classify(text).unwrap();
        Event {
            seq,
            t,
            category: c.label().into(),
            device: d,
            text: text.into(),
        }
    }

    fn data(events: Vec<Event>) -> Data {
        Data {
            events,
            records: 100,
            complete: true,
            ..Default::default()
        }
    }

    #[test]
    fn quiet_log_is_ok_with_every_counter() {
        let r = evaluate(&data(vec![]), 15 * MIN, 100 * MIN);
        assert_eq!(r.status, Status::Ok);
        assert!(r
            .summary
            .contains("no storage errors in the last 15m (100 records read)"));
        // One counter per category, the records read, and the headline count -w/-c apply to.
        assert_eq!(r.perfdata.len(), Category::ALL.len() + 2);
        assert_eq!(r.perfdata[Category::ALL.len()].label, "records");
        assert_eq!(r.perfdata.last().unwrap().label, "storage_errors");
        assert_eq!(r.perfdata.last().unwrap().value, 0.0);
    }

    #[test]
    fn incident_sequence_is_critical_and_mapped_to_the_pv() {
        let now = 100 * MIN;
        let mut d = data(vec![
            ev(
                1,
                now - 5 * MIN,
                " connection3:0: detected conn error (1020)",
            ),
            ev(
                2,
                now - 3 * MIN,
                " session3: session recovery timed out after 120 secs",
            ),
            ev(
                3,
                now - 3 * MIN,
                "sd 3:0:0:0: rejecting I/O to offline device",
            ),
            ev(4, now - 3 * MIN, "Aborting journal on device sde-8."),
            ev(
                5,
                now - 3 * MIN,
                "EXT4-fs (sde): Remounting filesystem read-only",
            ),
        ]);
        let h = Holding {
            disks: vec!["sde".into()],
            mounts: vec![(
                PathBuf::from(
                    "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-746b2837/mount",
                ),
                Some("pvc-746b2837".into()),
            )],
        };
        d.holdings.insert(Device::Block("sde".into()), h.clone());
        d.holdings.insert(Device::IscsiSession(3), h);
        let r = evaluate(&d, 15 * MIN, now);
        assert_eq!(r.status, Status::Critical);
        assert!(r.summary.contains("sde → pvc-746b2837"), "{}", r.summary);
        let p = |l: &str| r.perfdata.iter().find(|p| p.label == l).unwrap().value;
        assert_eq!(p("iscsi_conn_error"), 1.0);
        assert_eq!(p("remount_ro"), 1.0);
        assert_eq!(p("scsi_offline"), 1.0);
        assert_eq!(p("io_error"), 0.0);
        assert!(r.findings.iter().any(|f| f
            .details
            .iter()
            .any(|d| d.contains("mounted at /var/lib/kubelet/pods/u"))));
    }

    #[test]
    fn volumes_hit_are_named_and_wanted() {
        let now = 100 * MIN;
        let mut d = data(vec![
            ev(
                1,
                now - 3 * MIN,
                "EXT4-fs (sde): Remounting filesystem read-only",
            ),
            // Outside the window: its volume is not looked up.
            ev(
                2,
                now - 30 * MIN,
                "EXT4-fs (sdf): Remounting filesystem read-only",
            ),
        ]);
        let mp = |uid: &str, pv: &str| {
            PathBuf::from(format!(
                "/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/{pv}/mount"
            ))
        };
        d.holdings.insert(
            Device::Block("sde".into()),
            Holding {
                disks: vec!["sde".into()],
                mounts: vec![(mp("3c2b", "pvc-746b2837"), Some("pvc-746b2837".into()))],
            },
        );
        d.holdings.insert(
            Device::Block("sdf".into()),
            Holding {
                disks: vec!["sdf".into()],
                mounts: vec![(mp("9999", "pvc-old"), Some("pvc-old".into()))],
            },
        );
        let w = wanted(&d, 15 * MIN, now);
        assert_eq!(w.pvs.iter().collect::<Vec<_>>(), ["pvc-746b2837"]);
        assert_eq!(w.pod_uids.iter().collect::<Vec<_>>(), ["3c2b"]);
        let mut names = Names::default();
        names.claims.insert(
            "pvc-746b2837".into(),
            ("media".into(), "config-seerr-0".into()),
        );
        names.pods.insert(
            "3c2b".into(),
            kube::names::PodName {
                namespace: "media".into(),
                name: "seerr-0".into(),
                node: None,
            },
        );
        names.notes.push("resolver note".into());
        let r = evaluate_named(&d, 15 * MIN, now, &names);
        assert_eq!(r.status, Status::Critical);
        assert!(
            r.summary
                .contains("sde → media/seerr-0 (PVC media/config-seerr-0, pvc-746b2837)"),
            "{}",
            r.summary
        );
        assert_eq!(r.notes.last().map(String::as_str), Some("resolver note"));
        // Without names: as before.
        let r = evaluate(&d, 15 * MIN, now);
        assert!(r.summary.contains("sde → pvc-746b2837"), "{}", r.summary);
        assert_eq!(
            pod_uid_of(Path::new("/k/pods/u1/volumeDevices/kubernetes.io~csi/pv")),
            Some("u1".into())
        );
        assert_eq!(pod_uid_of(Path::new("/k/plugins/x/globalmount")), None);
    }

    #[test]
    fn io_and_connection_errors_warn() {
        let now = 100 * MIN;
        let r = evaluate(
            &data(vec![ev(
                1,
                now - MIN,
                "I/O error, dev sdc, sector 8 op 0x1:(WRITE) flags 0x0",
            )]),
            15 * MIN,
            now,
        );
        assert_eq!(r.status, Status::Warning);
        assert!(r.summary.contains("I/O error on sdc"));
    }

    #[test]
    fn window_and_duplicates() {
        let now = 100 * MIN;
        let old = ev(
            1,
            now - 20 * MIN,
            "EXT4-fs (sdc): Remounting filesystem read-only",
        );
        assert_eq!(
            evaluate(&data(vec![old.clone()]), 15 * MIN, now).status,
            Status::Ok
        );
        // Window 0 = everything.
        assert_eq!(
            evaluate(&data(vec![old.clone()]), 0, now).status,
            Status::Critical
        );
        // The same record twice (state + re-read) counts once.
        let e = ev(2, now - MIN, "I/O error, dev sdc, sector 8");
        let r = evaluate(&data(vec![e.clone(), e]), 15 * MIN, now);
        assert_eq!(
            r.perfdata
                .iter()
                .find(|p| p.label == "io_error")
                .unwrap()
                .value,
            1.0
        );
    }

    #[test]
    fn incomplete_quiet_read_is_unknown() {
        let mut d = data(vec![]);
        d.complete = false;
        assert_eq!(evaluate(&d, 15 * MIN, 100 * MIN).status, Status::Unknown);
    }

    #[test]
    fn resolve_partitions_and_names() {
        let dir = std::env::temp_dir().join(format!("kerr-sys-{}", std::process::id()));
        let sys = dir.join("sys");
        std::fs::create_dir_all(sys.join("class/block/sdc/sdc1")).unwrap();
        std::fs::write(sys.join("class/block/sdc/dev"), "8:32\n").unwrap();
        std::fs::write(sys.join("class/block/sdc/sdc1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(sys.join("class/block/sdc1")).unwrap();
        std::fs::write(sys.join("class/block/sdc1/dev"), "8:33\n").unwrap();
        let mi = "30 1 8:33 / /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-x/globalmount rw - ext4 /dev/sdc1 rw\n\
                  31 1 8:33 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-x/mount rw - ext4 /dev/sdc1 rw\n\
                  32 1 8:0 / / rw - ext4 /dev/sda1 rw\n";
        let mounts = node::mountinfo::parse(mi, "test").unwrap();
        let roots = vec![PathBuf::from("/var/lib/kubelet")];
        let h = resolve(
            &Device::Block("sdc".into()),
            &sys,
            &mounts,
            &roots,
            &Host::local(),
        );
        assert_eq!(h.mounts.len(), 2);
        assert!(h
            .mounts
            .iter()
            .all(|(_, pv)| pv.as_deref() == Some("pvc-x")));
        let h = resolve(
            &Device::Block("sdz".into()),
            &sys,
            &mounts,
            &roots,
            &Host::local(),
        );
        assert!(h.mounts.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_saved_position_past_the_newest_record_is_not_this_logs() {
        // Read to the end, newest record older than the position: a foreign or corrupted state.
        assert!(position_beyond_log(4_000_000_000, Some(2), true));
        assert!(position_beyond_log(3, Some(2), true));
        assert!(position_beyond_log(3, None, true));
        // Nothing new since the last run: the newest record is the saved one.
        assert!(!position_beyond_log(2, Some(2), true));
        assert!(!position_beyond_log(2, Some(9), true));
        // Reading stopped at the deadline: the end was not seen, nothing can be said.
        assert!(!position_beyond_log(3, Some(2), false));
    }

    #[test]
    fn kept_events_from_the_future_are_dropped() {
        let now = 100 * MIN;
        let mut evs = vec![
            ev(1, now - MIN, "Aborting journal on device sdc-8."),
            ev(2, now + MIN, "I/O error, dev sdc, sector 8"),
            ev(
                3,
                now + 24 * 60 * MIN,
                "EXT4-fs (sdz): Remounting filesystem read-only",
            ),
        ];
        assert_eq!(drop_future_events(&mut evs, now), 1);
        assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    }

    /// The state of a run before: a position beyond the log's end, a record from tomorrow.
    #[test]
    fn gather_reads_afresh_past_a_foreign_position_and_rewrites_the_state() {
        use clap::Parser;
        let dir = std::env::temp_dir().join(format!("kerr-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let kmsg = dir.join("kmsg");
        std::fs::write(
            &kmsg,
            "6,1,1000,-;sd 3:0:0:0: [sdc] Attached SCSI disk\n3,2,2000,-;Aborting journal on device sdc-8.\n",
        )
        .unwrap();
        let opts = Opts::try_parse_from([
            "check_storage_kernel_errors",
            "--kmsg",
            kmsg.to_str().unwrap(),
            "--state-dir",
            dir.join("state").to_str().unwrap(),
            "--window",
            "0",
            "--mountinfo",
            "/nonexistent",
            "--sys",
            "/nonexistent",
        ])
        .unwrap();
        let sp = state::path(&dir.join("state"), CHECK_ID, &kmsg.display().to_string());
        let boot_id = read_trim(Path::new("/proc/sys/kernel/random/boot_id"));
        let tomorrow = time::now_ms() + 24 * 60 * MIN;
        let mut ghost = ev(
            1,
            tomorrow,
            "EXT4-fs (sdz): Remounting filesystem read-only",
        );
        ghost.seq = 3_999_999_999;
        state::save(
            &sp,
            &KmsgState {
                boot_id: boot_id.clone(),
                last_seq: Some(4_000_000_000),
                events: vec![ghost],
            },
        )
        .unwrap();
        let gather_now = || {
            gather(
                &opts,
                &Ctx::for_test(Duration::from_secs(10)),
                Instant::now() + Duration::from_secs(5),
            )
            .unwrap()
        };
        let d = gather_now();
        assert_eq!(d.records, 2);
        assert_eq!(
            d.events.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
            ["Aborting journal on device sdc-8."],
            "{d:?}"
        );
        if boot_id.is_some() {
            assert!(
                d.notes
                    .iter()
                    .any(|n| n.contains("beyond the end of the kernel log")),
                "{:?}",
                d.notes
            );
            assert!(d.notes.iter().any(|n| n.contains("dated in the future")));
        }
        let saved: KmsgState = state::load(&sp).unwrap().unwrap();
        assert_eq!(saved.last_seq, Some(2));
        assert_eq!(saved.events.len(), 1);
        // The next run starts from the rewritten state: nothing new, the finding kept, no note.
        let d = gather_now();
        assert_eq!(d.events.len(), 1);
        assert!(
            !d.notes.iter().any(|n| n.contains("state")),
            "{:?}",
            d.notes
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
