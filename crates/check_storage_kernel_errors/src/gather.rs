//! What check_storage_kernel_errors reads, through `node` only: the kernel log (resumable with
//! `--state-dir`), then for each device a record names, what it holds (sysfs and the
//! device-usage map).

use crate::classify::{Device, Patterns};
use crate::{Data, Event, Holding, Opts};
use node::logs::{kmsg, kmsg_ref, state};
use node::usage::{DeviceUsage, Scope};
use node::Host;
use plugin::{Ctx, Unknown};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the check keeps between runs.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KmsgState {
    pub boot_id: Option<String>,
    pub last_seq: Option<u64>,
    #[serde(default)]
    pub events: Vec<Event>,
    /// When the state was written (epoch ms, the wall clock of that run): a state written later
    /// than now tells a clock set back even when it keeps no record.
    #[serde(default)]
    pub saved_ms: Option<i64>,
}

/// Map a device to its disks (`node::blockdev`) and, through the device-usage map, to the
/// mount points and PVs on them or on their partitions and device-mapper holders.
pub fn resolve(dev: &Device, sys: &Path, usage: &DeviceUsage, host: &Host) -> Holding {
    use node::blockdev;
    let disks = match dev {
        // A /dev/mapper name, an NVMe controller or multipath path device → the disks mounted.
        Device::Block(b) => node::blockname::expand(sys, b),
        Device::Scsi(a) => blockdev::scsi_disks(sys, a),
        Device::IscsiSession(n) => blockdev::session_disks(sys, *n),
        Device::Nfs(server) => return resolve_nfs(server, usage, host),
    };
    let mut family: Vec<(String, String)> = Vec::new();
    for d in &disks {
        family.extend(blockdev::family(sys, d));
    }
    let devs: Vec<(u32, u32)> = family
        .iter()
        .filter_map(|(_, mm)| blockdev::parse_majmin(mm))
        .collect();
    let names: Vec<&str> = family
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(disks.iter().map(String::as_str))
        .collect();
    let mut hold = Holding {
        disks: disks.clone(),
        mounts: Vec::new(),
        below: disks
            .iter()
            .filter(|d| d.starts_with("dm-"))
            .flat_map(|d| node::blockname::dm_slaves(sys, d))
            .collect(),
    };
    for m in usage.uses() {
        let by_dev = devs.contains(&m.dev);
        let by_name = names.contains(&m.source.trim_start_matches("/dev/"));
        if !(by_dev || by_name) {
            continue;
        }
        add_mount(&mut hold, &m, host);
    }
    sort_mounts(&mut hold);
    hold
}

/// The host part of an NFS mount's source (`10.0.0.5:/export`, `nas:/x`, `[fd00::5]:/x`).
fn nfs_host(source: &str) -> Option<&str> {
    if let Some(v6) = source.strip_prefix('[') {
        return v6.split_once("]:").map(|(h, _)| h);
    }
    source.split_once(":/").map(|(h, _)| h)
}

/// The NFS mounts of `server` (as the kernel's RPC client names it: the host the mount named).
fn resolve_nfs(server: &str, usage: &DeviceUsage, host: &Host) -> Holding {
    let want = server.trim_start_matches('[').trim_end_matches(']');
    let mut hold = Holding::default();
    for m in usage.uses() {
        if m.fstype.starts_with("nfs") && nfs_host(m.source) == Some(want) {
            add_mount(&mut hold, &m, host);
        }
    }
    sort_mounts(&mut hold);
    hold
}

/// Record a mount (and the PV it is, for a kubelet volume) once.
fn add_mount(hold: &mut Holding, m: &node::usage::MountUse<'_>, host: &Host) {
    // A kubelet volume path names its PV; a 1.24+ staging path only by its vol_data.json.
    let pv = if m.kubelet {
        m.volume.map(str::to_string).or_else(|| {
            node::kubelet::read_vol_data(host, m.mount_point_path())
                .ok()
                .flatten()
                .and_then(|v| v.spec_vol_id.or(v.volume_handle))
        })
    } else {
        None
    };
    let mp = m.mount_point_path();
    if !hold.mounts.iter().any(|(p, _)| p == mp) {
        hold.mounts.push((mp.to_path_buf(), pv));
    }
}

/// Volumes first, then the shortest paths.
fn sort_mounts(hold: &mut Holding) {
    hold.mounts
        .sort_by_key(|(p, pv)| (pv.is_none(), p.as_os_str().len()));
}

pub(crate) const CHECK_ID: &str = "storage_kernel_errors";

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

/// Where the log is and what a pass over it keeps: one run's fixed inputs.
struct LogRead<'a> {
    path: PathBuf,
    /// The node's own /dev/kmsg (privilege may serve it), not a file the caller named.
    own: bool,
    /// `--kmsg -`: standard input (another node's log, e.g. `talosctl dmesg`).
    stdin: bool,
    host: &'a Host,
    patterns: Patterns,
    window_ms: i64,
    mono_now: u64,
    now: i64,
    deadline: Instant,
}

/// One pass over the kernel log.
struct Pass {
    stats: kmsg::ReadStats,
    records: u64,
    first_seq: Option<u64>,
    max_seq: Option<u64>,
    /// `--kmsg -`: what stdin gave besides its records.
    stdin: Option<crate::stdin::Stats>,
}

impl LogRead<'_> {
    /// Read every record after `after`, classifying the kernel's own storage records of the
    /// window into `events` (the newest [`MAX_EVENTS`] at most).
    fn pass(&self, after: Option<u64>, events: &mut Vec<Event>) -> Result<Pass, Unknown> {
        let (mut first_seq, mut max_seq, mut records) = (None, None::<u64>, 0u64);
        let mut handle = |seq: u64, facility: u32, text: &str, t: i64| {
            records += 1;
            first_seq.get_or_insert(seq);
            max_seq = Some(max_seq.map_or(seq, |s| s.max(seq)));
            if after.is_some_and(|a| seq <= a) || facility != 0 {
                return;
            }
            if self.window_ms > 0 && t < self.now - self.window_ms {
                return;
            }
            if let Some((cat, dev)) = self.patterns.classify(text) {
                events.push(Event {
                    seq,
                    t,
                    category: cat.label().to_string(),
                    device: dev,
                    text: text.to_string(),
                });
                // Only the newest MAX_EVENTS are kept (below): drop older ones as we go, so a
                // log of nothing but errors cannot grow memory without bound.
                if events.len() >= 2 * MAX_EVENTS {
                    events.drain(..events.len() - MAX_EVENTS);
                }
            }
        };
        if self.stdin {
            // `--kmsg -` (talosctl dmesg, a kmsg dump): talosctl's own times, else this clock's.
            let st = crate::stdin::read(std::io::stdin().lock(), self.deadline, |d| {
                let t = d
                    .t_ms
                    .unwrap_or_else(|| kmsg::wall_ms(d.record.usec, self.mono_now, self.now));
                handle(d.record.seq, d.record.facility, &d.record.text, t)
            })
            .map_err(|e| match e {
                kmsg::KmsgError::Other(s) => Unknown(s),
                kmsg::KmsgError::Permission(e) => Unknown(plugin::errtext(&e)),
            })?;
            return Ok(Pass {
                stats: st.read,
                records,
                first_seq,
                max_seq,
                stdin: Some(st),
            });
        }
        // cap_syslog serves the node's own /dev/kmsg only, never a --kmsg the caller named.
        let res = node::privilege::elevated_if(self.own, || {
            // Records lent from the read buffer: only a storage record is copied (issue 34).
            kmsg_ref::read_ref(&self.path, self.deadline, |r| {
                let t = kmsg::wall_ms(r.usec, self.mono_now, self.now);
                handle(r.seq, r.facility, &r.text, t)
            })
        });
        let stats = match res {
            Ok(s) => s,
            Err(kmsg::KmsgError::Permission(e)) => {
                let restrict = self
                    .host
                    .proc_sys("kernel/dmesg_restrict")
                    .map(|v| format!(" (kernel.dmesg_restrict = {v})"))
                    .unwrap_or_default();
                return Err(Unknown(format!(
                    "cannot read {}: {}: reading the kernel log needs CAP_SYSLOG when kernel.dmesg_restrict=1{restrict}; {}",
                    self.path.display(),
                    plugin::errtext(&e),
                    node::privilege::advice("CAP_SYSLOG", "setcap cap_syslog+ep", self.own)
                )));
            }
            Err(kmsg::KmsgError::Other(e)) => return Err(Unknown(e)),
        };
        Ok(Pass {
            stats,
            records,
            first_seq,
            max_seq,
            stdin: None,
        })
    }
}

/// The last run's state when it is this boot's (a state of another boot is named in `notes`).
/// A state ahead of the clock (the clock was set back: kept records or the state itself dated
/// after now) keeps its records of the past only, and its position is dropped so that the ring
/// buffer is read again from its start: what it still holds is dated again with the clock of now
/// (a record's wall time is mapped from the monotonic clock at read time) and counts.
fn load_state(
    path: Option<&Path>,
    boot_id: &Option<String>,
    now: i64,
    notes: &mut Vec<String>,
) -> KmsgState {
    let mut st = KmsgState::default();
    if let Some(p) = path {
        match state::load::<KmsgState>(p) {
            Ok(Some(s)) => {
                if s.boot_id.is_some() && s.boot_id == *boot_id {
                    st = s;
                } else {
                    notes.push("the node rebooted since the last run (new boot id): the kernel log is read afresh".into());
                }
            }
            Ok(None) => {}
            Err(e) => notes.push(e),
        }
    }
    let newest = st.events.iter().map(|e| e.t).max();
    if let Some(ahead) = state::clock_went_back(st.saved_ms, newest, now) {
        let future = drop_future_events(&mut st.events, now);
        notes.push(state::clock_note(
            path.unwrap_or(Path::new("?")),
            ahead,
            future,
            "the kernel log",
        ));
        st.last_seq = None;
    }
    st
}

/// Map each device the kept records name to what it holds (sysfs and the device-usage map).
fn map_devices(opts: &Opts, host: &Host, roots: &[PathBuf], ctx: &Ctx, data: &mut Data) {
    let devices: BTreeSet<Device> = data
        .events
        .iter()
        .filter_map(|e| e.device.clone())
        .collect();
    if devices.is_empty() {
        return;
    }
    ctx.stage("mapping devices to mounts");
    let mi_path = opts.mountinfo.path(host);
    let sys = opts.sys.path(host);
    match DeviceUsage::read(&mi_path, roots, Scope::All) {
        Ok(usage) => {
            for d in devices {
                let h = resolve(&d, &sys, &usage, host);
                ctx.decision(format!(
                    "device {d} is {} and mounted at {}",
                    if h.disks.is_empty() {
                        "on no disk found in sysfs".to_string()
                    } else {
                        format!(
                            "on {} {}",
                            if h.disks.len() == 1 { "disk" } else { "disks" },
                            h.disks.join(", ")
                        )
                    },
                    if h.mounts.is_empty() {
                        "no mount point".to_string()
                    } else {
                        h.mounts
                            .iter()
                            .map(|(m, pv)| match pv {
                                Some(pv) => format!("{} (PV {pv})", m.display()),
                                None => m.display().to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
                data.holdings.insert(d, h);
            }
        }
        Err(e) => data
            .notes
            .push(format!("devices not mapped to mounts: {e}")),
    }
}

/// Read, classify, resolve.
pub fn gather(opts: &Opts, ctx: &Ctx, deadline: Instant) -> Result<Data, Unknown> {
    let host = opts.host.host();
    // A mistyped --kubelet-root is a usage mistake even when no record needs mapping.
    let roots = opts.kubelet_root.resolve_if_any(&host)?;
    let (mono_now, now) = kmsg::clocks();
    let log = LogRead {
        path: if opts.reads_kmsg_stdin() {
            PathBuf::from("stdin")
        } else {
            opts.kmsg.clone().unwrap_or_else(|| host.file("/dev/kmsg"))
        },
        own: opts.kmsg.is_none() && host.is_local(),
        stdin: opts.reads_kmsg_stdin(),
        host: &host,
        patterns: opts.patterns(),
        window_ms: opts.window.as_millis() as i64,
        mono_now,
        now,
        deadline,
    };
    let mut data = Data {
        complete: true,
        // --node, else the host's name (lower case, as the kubelet registers it by default).
        node_name: opts.node.name_or_host(|| host.hostname()),
        ..Default::default()
    };
    let boot_id = host.proc_sys("kernel/random/boot_id");
    // stdin has no position to resume from: read whole every time.
    let state_path = opts
        .state_dir
        .as_ref()
        .filter(|_| !log.stdin)
        .map(|d| state::path(d, CHECK_ID, &log.path.display().to_string()));
    let mut st = load_state(state_path.as_deref(), &boot_id, now, &mut data.notes);
    let mut after = st.last_seq;
    let mut events = std::mem::take(&mut st.events);
    ctx.stage(format!("reading {}", log.path.display()));
    let pass = loop {
        let pass = log.pass(after, &mut events)?;
        data.records = pass.records;
        if let Some(a) =
            after.filter(|&a| position_beyond_log(a, pass.max_seq, pass.stats.complete))
        {
            // The newest record is never overwritten, so a saved position past it is not this
            // log's: keeping it would skip every record until the kernel catches up with it
            // (never, for a corrupted number). Drop the state and read the log again from its start.
            data.notes.push(format!(
                "state file {}: its last sequence number {a} is beyond the end of the kernel log (last record {}): the state is not this log's; read afresh",
                state_path.as_deref().unwrap_or(Path::new("?")).display(),
                pass.max_seq.map_or("none".to_string(), |m| m.to_string())
            ));
            after = None;
            events.clear();
            continue;
        }
        break pass;
    };
    let last_seq = match (after, pass.max_seq) {
        (Some(a), Some(m)) => Some(a.max(m)),
        (a, m) => a.or(m),
    };
    if let (Some(a), Some(f)) = (after, pass.first_seq) {
        if f > a + 1 {
            data.notes.push(format!(
                "{} overwritten in the ring buffer between runs (sequence {} to {}): run the check more often",
                if f - a - 1 == 1 {
                    "1 record was".to_string()
                } else {
                    format!("{} records were", f - a - 1)
                },
                a + 1,
                f - 1
            ));
        }
    }
    if pass.records == 0 && pass.stats.complete {
        data.empty_source = Some(log.path.display().to_string());
    }
    data.overwritten = pass.stats.overwritten;
    data.complete = pass.stats.complete;
    if log.window_ms > 0 {
        events.retain(|e| e.t >= now - log.window_ms);
    }
    // A log read again from its start (the clock was set back) gives again the kept records
    // it still holds: each counts once.
    events.sort_by_key(|e| e.seq);
    events.dedup_by_key(|e| e.seq);
    if events.len() > MAX_EVENTS {
        events.drain(..events.len() - MAX_EVENTS);
    }
    // Save before resolving (resolution reads sysfs and the mount table only).
    if let Some(p) = &state_path {
        let s = KmsgState {
            boot_id: boot_id.clone(),
            last_seq,
            events: events.clone(),
            saved_ms: Some(now),
        };
        if let Err(e) = state::save(p, &s) {
            // A refused directory was already named when loading.
            if !data.notes.contains(&e) {
                data.notes.push(e);
            }
        }
    }
    ctx.input(format!(
        "read {} kernel log records from {}{}, {} of them storage events",
        pass.stats.records,
        log.path.display(),
        match last_seq {
            Some(s) => format!(" up to sequence number {s}"),
            None => String::new(),
        },
        events.len()
    ));
    data.events = events;
    if let Some(st) = &pass.stdin {
        crate::stdin::describe(st, &mut data);
        return Ok(data);
    }
    map_devices(opts, &host, &roots, ctx, &mut data);
    Ok(data)
}
