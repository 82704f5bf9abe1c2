//! The decision, pure: records in the window counted per category and device, each device
//! named by what it holds, and the state.

use crate::classify::{Category, Device};

use kube::checks::names::{Names, Wanted};
use node::logs::time;
use plugin::{Finding, Perfdata, Report, Status, Thresholds};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// The decision's parameters, built from the options.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Only records of the last `window_ms` count (0: every record).
    pub window_ms: i64,
    /// -w/-c on the number of storage-error records in the window.
    pub thresholds: Thresholds,
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
    /// For a device-mapper device: the devices below it (`/sys/class/block/dm-N/slaves/`:
    /// multipath paths, LVM physical volumes).
    pub below: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    pub events: Vec<Event>,
    pub holdings: BTreeMap<Device, Holding>,
    pub records: u64,
    pub overwritten: u64,
    pub complete: bool,
    /// The kernel log read whole gave no record at all (an empty file, /dev/null, a pipe that
    /// gave nothing): its name. Nothing was checked.
    pub empty_source: Option<String>,
    pub notes: Vec<String>,
    /// This host's name ($NODE_NAME in container mode): the `node` of every device finding, never
    /// from a pod lookup that can fail (a label that came and went with the lookup would reset
    /// the finding's alert, issue 33).
    pub node_name: Option<String>,
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
    }
    .maybe(plugin::Subject::node, data.node_name.as_deref());
    s = match dev {
        Device::Block(b) => s.device(b.as_str()),
        // The filesystem source's host: an NFS server has no block device.
        Device::Nfs(server) => s.device(server.as_str()),
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
        .filter_map(|(mp, _)| node::kubelet::pod_uid_in(mp))
        .collect();
    uids.sort();
    uids.dedup();
    (pvs, uids)
}

/// Events in the window, each record once (recovery records included).
fn in_window(data: &Data, window_ms: i64, now: i64) -> impl Iterator<Item = &Event> {
    let mut seen = BTreeSet::new();
    data.events.iter().filter(move |e| {
        !(window_ms > 0 && e.t < now - window_ms) && seen.insert((e.seq, e.text.as_str()))
    })
}

/// The newest recovery record per (recovery category, device) in the window: its sequence
/// number and time.
fn recoveries(
    data: &Data,
    window_ms: i64,
    now: i64,
) -> BTreeMap<(Category, Option<Device>), (u64, i64)> {
    let mut r: BTreeMap<(Category, Option<Device>), (u64, i64)> = BTreeMap::new();
    for e in in_window(data, window_ms, now) {
        if let Some(c) = Category::from_label(&e.category).filter(|c| c.is_recovery()) {
            let v = r.entry((c, e.device.clone())).or_insert((e.seq, e.t));
            if e.seq > v.0 {
                *v = (e.seq, e.t);
            }
        }
    }
    r
}

/// Events that count: in the window, each record once, neither a recovery record nor a record
/// a later recovery of the same device ended (`nfs: server X OK` after `… not responding`).
fn counted(data: &Data, window_ms: i64, now: i64) -> impl Iterator<Item = &Event> {
    let rec = recoveries(data, window_ms, now);
    in_window(data, window_ms, now).filter(move |e| {
        let Some(c) = Category::from_label(&e.category) else {
            return true;
        };
        if c.is_recovery() {
            return false;
        }
        c.recovered_by()
            .and_then(|r| rec.get(&(r, e.device.clone())))
            .is_none_or(|&(seq, _)| seq <= e.seq)
    })
}

/// The state of a group of records: its category's, except a disk that vanished while it still
/// held a mount (CRITICAL: what was mounted from it is gone; a disk detached after its unmount
/// is the WARNING its category says).
fn group_status(cat: Category, holding: Option<&Holding>) -> Status {
    match cat {
        Category::DiskVanished if holding.is_some_and(|h| !h.mounts.is_empty()) => Status::Critical,
        c => c.status(),
    }
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

/// Aggregate and decide (pure), without names. `now`: epoch ms.
pub fn evaluate(data: &Data, policy: &Policy, now: i64) -> Report {
    evaluate_named(data, policy, now, &Names::default())
}

/// Aggregate and decide (pure), volumes named with what `names` knows (its notes are added).
/// The policy's window (0: everything) selects the records; its -w/-c ranges, when one is given,
/// on the number of storage-error records in the window decide the state instead of each
/// record's kind.
pub fn evaluate_named(data: &Data, policy: &Policy, now: i64, names: &Names) -> Report {
    let (window_ms, thresholds) = (policy.window_ms, &policy.thresholds);
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
    let gstatus = |(c, d): &Key| group_status(*c, d.as_ref().and_then(|d| data.holdings.get(d)));
    let mut ordered: Vec<(&Key, &Vec<&Event>)> = groups.iter().collect();
    ordered.sort_by_key(|(k, evs)| {
        (
            std::cmp::Reverse(gstatus(k).rank()),
            std::cmp::Reverse(evs.iter().map(|e| e.t).max().unwrap_or(0)),
        )
    });
    let mut parts = Vec::new();
    for (key, evs) in &ordered {
        let (cat, dev) = key;
        let st = gstatus(key);
        status = status.worst(st);
        let last = evs.iter().max_by_key(|e| (e.t, e.seq)).expect("non-empty");
        let what = describe(dev);
        parts.push(format!("{} on {}", cat.human(), what));
        let mut f = Finding::new(
            st,
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
        let held_by = dev.as_ref().and_then(|d| data.holdings.get(d));
        let (pvs, uids) = held_by.map(held).unwrap_or_default();
        f = f.next(crate::next::step(
            cat.label(),
            &pvs,
            &uids,
            data.node_name.as_deref(),
            names,
        ));
        for e in evs.iter().rev().skip(1).take(4) {
            f = f.evidence(format!("kernel, {}: {}", time::fmt_utc(e.t), e.text));
        }
        if let Some(h) = held_by {
            if !h.below.is_empty() {
                f = f.detail(format!(
                    "device-mapper device on {} (multipath paths or LVM physical volumes)",
                    h.below.join(", ")
                ));
            }
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
        format!(
            "no storage errors {window} ({} read)",
            plugin::count(data.records as usize, "record", "records")
        )
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
                "could not read the whole kernel log before the deadline ({} read, no storage errors in them)",
                plugin::count(data.records as usize, "record", "records")
            );
        }
    }
    if let Some(src) = data
        .empty_source
        .as_ref()
        .filter(|_| report.status == Status::Ok)
    {
        report.status = Status::Unknown;
        report.summary = format!(
            "{src} gave no kernel log record (an empty file, /dev/null, or a pipe that gave nothing): nothing was checked; read the node's /dev/kmsg (the default) or a dump of it (`cat /dev/kmsg` records)"
        );
    }
    if data.overwritten > 0 {
        report = report.note(format!(
            "records were overwritten in the ring buffer while reading ({})",
            plugin::count(data.overwritten as usize, "time", "times")
        ));
    }
    for f in findings {
        report = report.finding(f);
    }
    for n in data.notes.iter().chain(&names.notes) {
        report = report.note(n.clone());
    }
    for ((c, dev), (seq, t)) in recoveries(data, window_ms, now) {
        let cleared = in_window(data, window_ms, now).any(|e| {
            e.device == dev
                && e.seq < seq
                && Category::from_label(&e.category).is_some_and(|x| x.recovered_by() == Some(c))
        });
        if cleared {
            let what = dev
                .as_ref()
                .map_or("unknown device".to_string(), |d| d.to_string());
            report = report.note(format!(
                "{what}: {} at {}; its earlier records no longer count",
                c.human(),
                time::fmt_utc(t)
            ));
        }
    }
    for c in Category::ALL.into_iter().filter(|c| !c.is_recovery()) {
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
