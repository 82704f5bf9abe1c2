//! The decision, pure: each PV filesystem's free space and inodes against the limits, the
//! prediction from its history, the report over all of them.

use crate::gather::{NodeData, Volume};
use crate::history::{fit, Fill};
use crate::Limit;
use kube::checks::names::{Names, Wanted};
use node::probe::Outcome;
use plugin::{fmt_bytes, Finding, Perfdata, Range, Report, Status, Subject, Uom};
use std::time::Duration;

/// The decision's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub warning: Limit,
    pub critical: Limit,
    pub iwarning: Limit,
    pub icritical: Limit,
    /// 0: no prediction.
    pub predict_within: Duration,
    pub predict_window: Duration,
    pub perf_volumes: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            warning: Limit::Percent(15.0),
            critical: Limit::Percent(3.0),
            iwarning: Limit::Percent(15.0),
            icritical: Limit::Percent(3.0),
            predict_within: Duration::from_secs(4 * 86400),
            predict_window: Duration::from_secs(6 * 3600),
            perf_volumes: 5,
        }
    }
}

impl Policy {
    /// The least span of history a prediction needs: a sixth of the window (1h of 6h).
    pub fn min_span(&self) -> Duration {
        self.predict_window / 6
    }
}

/// What one volume's numbers mean.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub status: Status,
    pub signal: &'static str,
    /// Used percentage of what a pod sees (used / (used + avail)), when measured.
    pub used_pct: Option<f64>,
    pub text: String,
    /// The soonest fill-up predicted (seconds), bytes or inodes.
    pub secs_to_full: Option<f64>,
    /// Which limits it is below (for the next step).
    pub space_low: bool,
    pub inodes_low: bool,
    pub filling: bool,
}

fn days(secs: f64) -> String {
    let d = secs / 86400.0;
    if d >= 10.0 {
        format!("{d:.0} days")
    } else if d >= 1.0 {
        format!("{d:.1} days")
    } else {
        plugin::fmt_duration(Duration::from_secs(secs.max(0.0) as u64))
    }
}

fn pct(v: f64) -> String {
    if (10.0..99.95).contains(&v) {
        format!("{v:.0}%")
    } else {
        format!("{v:.1}%")
    }
}

/// Judge one volume. Pure.
pub fn judge(v: &Volume, p: &Policy) -> Judged {
    let unmeasured = |why: String| Judged {
        status: Status::Unknown,
        signal: signal(Verdict::Unmeasured),
        used_pct: None,
        text: format!("could not be measured: {why}"),
        secs_to_full: None,
        space_low: false,
        inodes_low: false,
        filling: false,
    };
    let s = match (&v.probe, v.space) {
        (Some(Outcome::Answered { .. }), Some(s)) => s,
        (Some(Outcome::Answered { .. }) | None, _) => {
            return unmeasured("statvfs gave no answer".into())
        }
        (Some(o), _) => {
            return unmeasured(format!(
                "{} (check_ro_pvc_mounts and check_stale_csi_mounts tell what broke)",
                o.describe()
            ))
        }
    };
    let seen = s.used().saturating_add(s.avail);
    let used_pct = if seen > 0 {
        s.used() as f64 * 100.0 / seen as f64
    } else {
        0.0
    };
    let mut text = format!(
        "{} used ({} of {}, {} free)",
        pct(used_pct),
        fmt_bytes(s.used()),
        fmt_bytes(seen),
        fmt_bytes(s.avail)
    );
    let ipct = (s.files > 0).then(|| s.files_used() as f64 * 100.0 / s.files as f64);
    match ipct {
        Some(i) => text.push_str(&format!(", inodes {} used ({} free)", pct(i), s.files_free)),
        None => text.push_str(", no inode limit"),
    }
    if v.read_only {
        text.push_str("; mounted read-only by design: not judged full");
        return Judged {
            status: Status::Ok,
            signal: signal(Verdict::ReadOnly),
            used_pct: Some(used_pct),
            text,
            secs_to_full: None,
            space_low: false,
            inodes_low: false,
            filling: false,
        };
    }
    let level = |w: &Limit, c: &Limit, free: u64, total: u64| {
        if c.below(free, total) {
            Status::Critical
        } else if w.below(free, total) {
            Status::Warning
        } else {
            Status::Ok
        }
    };
    let space = level(&p.warning, &p.critical, s.avail, seen);
    let inodes = level(&p.iwarning, &p.icritical, s.files_free, s.files);
    if space != Status::Ok {
        let lim = if space == Status::Critical {
            ("-c", &p.critical)
        } else {
            ("-w", &p.warning)
        };
        text.push_str(&format!(
            "; free space under {} {}",
            lim.0,
            lim.1.text(false)
        ));
    }
    if inodes != Status::Ok {
        let lim = if inodes == Status::Critical {
            ("-K", &p.icritical)
        } else {
            ("-W", &p.iwarning)
        };
        text.push_str(&format!(
            "; free inodes under {} {}",
            lim.0,
            lim.1.text(true)
        ));
    }
    // The prediction, from samples of the same size (the history holds this run's last).
    let mut soonest: Option<(f64, &'static str, Fill)> = None;
    if !p.predict_within.is_zero() {
        let h: Vec<_> = v.history.iter().filter(|h| h.total == s.total).collect();
        let bytes: Vec<(i64, u64)> = h.iter().map(|h| (h.t, h.used)).collect();
        let inodes_pts: Vec<(i64, u64)> = h.iter().map(|h| (h.t, h.iused)).collect();
        let mut consider = |what: &'static str, f: Option<Fill>| {
            if let Some(f) = f {
                if let Some(secs) = f.secs_to_full {
                    if soonest.is_none_or(|(s0, _, _)| secs < s0) {
                        soonest = Some((secs, what, f));
                    }
                }
            }
        };
        consider("space", fit(&bytes, s.avail, p.min_span()));
        if s.files > 0 {
            consider("inodes", fit(&inodes_pts, s.files_free, p.min_span()));
        }
    }
    let mut filling = false;
    if let Some((secs, what, f)) = soonest {
        let rate = if what == "space" {
            format!("{}/day", fmt_bytes((f.per_sec * 86400.0) as u64))
        } else {
            format!("{:.0} inodes/day", f.per_sec * 86400.0)
        };
        let within = secs <= p.predict_within.as_secs_f64();
        filling = within;
        text.push_str(&format!(
            "; {} full in {} at {rate} (a line through {} samples over {}){}",
            if what == "space" { "space" } else { "inodes" },
            days(secs),
            f.samples,
            plugin::fmt_duration(Duration::from_secs(f.span_secs as u64)),
            if within {
                format!(
                    ", within --predict-within {}",
                    plugin::fmt_duration(p.predict_within)
                )
            } else {
                String::new()
            }
        ));
    }
    let predicted = if filling { Status::Warning } else { Status::Ok };
    let status = space.worst(inodes).worst(predicted);
    let signal = signal(if status == Status::Ok {
        Verdict::Ok
    } else if space == status {
        Verdict::SpaceLow
    } else if inodes == status {
        Verdict::InodesLow
    } else {
        Verdict::FillingUp
    });
    Judged {
        status,
        signal,
        used_pct: Some(used_pct),
        text,
        secs_to_full: soonest.map(|s| s.0),
        space_low: space != Status::Ok,
        inodes_low: inodes != Status::Ok,
        filling,
    }
}

/// The volumes and pods whose names the report needs: those of non-OK volumes only, so a
/// healthy node costs no lookup. Pure.
pub fn wanted(data: &NodeData, p: &Policy) -> Wanted {
    let mut w = Wanted::default();
    for v in &data.volumes {
        if judge(v, p).status == Status::Ok {
            continue;
        }
        let uids = v.pod_uids.iter().map(String::as_str);
        match v.names.iter().next() {
            Some(n) => w.add(n, uids),
            None => w.add("", uids),
        }
    }
    w
}

fn short_name(v: &Volume, names: &Names) -> String {
    match v.names.iter().next() {
        Some(n) => names.volume(n, v.pod_uids.iter().map(String::as_str)),
        None => format!("volume on {}", v.source),
    }
}

/// The next step for a non-OK volume, paste-safe, naming the node.
fn next_step(v: &Volume, j: &Judged, names: &Names, node: Option<&str>) -> String {
    use plugin::shell_quote as q;
    let node = node.unwrap_or("NODE");
    let mount = v
        .mounts
        .iter()
        .find(|m| !m.ends_with("globalmount"))
        .or(v.mounts.first())
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pv = v.names.iter().next().cloned().unwrap_or_default();
    if j.status == Status::Unknown {
        return format!(
            "on node {node}: `stat {}`; then check_ro_pvc_mounts and check_stale_csi_mounts on that node",
            q(&mount)
        );
    }
    let du = if j.inodes_low && !j.space_low {
        format!("du -x --inodes -d1 {}", q(&mount))
    } else {
        format!("du -xh -d1 {}", q(&mount))
    };
    let grow = match names.claims.get(&pv) {
        Some((ns, claim)) => {
            let size = v
                .space
                .map(|s| s.total.saturating_mul(2).div_ceil(1 << 30).max(1))
                .unwrap_or(1);
            let patch = format!(r#"{{"spec":{{"resources":{{"requests":{{"storage":"{size}Gi"}}}}}}}}"#);
            format!(
                "or grow the claim: `kubectl -n {} patch pvc {} -p {}` (its StorageClass must allow volume expansion)",
                q(ns),
                q(claim),
                q(&patch)
            )
        }
        None if !pv.is_empty() => format!(
            "or grow its claim (`kubectl get pv {} -o jsonpath='{{.spec.claimRef.namespace}} {{.spec.claimRef.name}}'` names it)",
            q(&pv)
        ),
        None => "or grow its claim".to_string(),
    };
    format!("on node {node}, find what grows: `{du}`; delete what is not needed, {grow}")
}

fn subject(v: &Volume, names: &Names, node: Option<&str>) -> Subject {
    let pv = v.names.iter().next().map(String::as_str).unwrap_or("");
    names
        .subject(pv, v.pod_uids.iter().map(String::as_str))
        .device(v.source.strip_prefix("/dev/").unwrap_or(&v.source))
        .maybe(
            Subject::mount,
            v.mounts.first().map(|m| m.to_string_lossy()),
        )
        .maybe(Subject::node, node)
}

/// The whole decision without names. Pure.
pub fn evaluate(data: &NodeData, p: &Policy) -> Report {
    evaluate_named(data, p, &Names::default())
}

/// The whole decision, volumes named with what `names` knows. Pure.
pub fn evaluate_named(data: &NodeData, p: &Policy, names: &Names) -> Report {
    let n = data.volumes.len();
    let judged: Vec<Judged> = data.volumes.iter().map(|v| judge(v, p)).collect();
    let mut findings = Vec::with_capacity(n);
    let mut alarms: Vec<(Status, String)> = Vec::new();
    for (v, j) in data.volumes.iter().zip(&judged) {
        let name = short_name(v, names);
        let mut f = Finding::new(j.status, format!("{name} {}", j.text))
            .signal(j.signal)
            .subject(subject(v, names, data.node_name.as_deref()));
        f = f.detail(format!(
            "{} on {} ({}), mounted at {}",
            v.fstype,
            v.source,
            v.dev,
            v.mounts
                .iter()
                .map(|m| m.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if j.status != Status::Ok {
            let why = if j.status == Status::Unknown {
                "not measured".to_string()
            } else if j.space_low || j.inodes_low {
                match j.used_pct {
                    Some(u) if j.space_low => format!("{} used", pct(u)),
                    _ => "inodes low".to_string(),
                }
            } else {
                format!("full in {}", days(j.secs_to_full.unwrap_or(0.0)))
            };
            alarms.push((j.status, format!("{name} ({why})")));
            f = f.next(next_step(v, j, names, data.node_name.as_deref()));
        }
        findings.push(f);
    }
    let status = judged
        .iter()
        .map(|j| j.status)
        .fold(Status::Ok, Status::worst);
    alarms.sort_by(|a, b| b.0.rank().cmp(&a.0.rank()).then_with(|| a.1.cmp(&b.1)));
    let fs = |k: usize| format!("{k} PV filesystem{}", if k == 1 { "" } else { "s" });
    let summary = if n == 0 {
        "no PV mounts on this node".to_string()
    } else if alarms.is_empty() {
        let fullest = data
            .volumes
            .iter()
            .zip(&judged)
            .filter(|(v, j)| !v.read_only && j.used_pct.is_some())
            .fold(None, |best: Option<(&Volume, &Judged)>, x| match best {
                // The first of equals (volumes are in name order).
                Some(b) if b.1.used_pct >= x.1.used_pct => Some(b),
                _ => Some(x),
            });
        match fullest {
            Some((v, j)) => format!(
                "{} with room; the fullest: {} at {} used",
                fs(n),
                short_name(v, names),
                pct(j.used_pct.unwrap_or(0.0))
            ),
            None => format!("{} with room", fs(n)),
        }
    } else {
        let shown: Vec<&str> = alarms.iter().take(5).map(|a| a.1.as_str()).collect();
        format!(
            "{} of {} filling up or unmeasured: {}{}",
            alarms.len(),
            fs(n),
            shown.join(", "),
            if alarms.len() > 5 {
                format!(", +{} more", alarms.len() - 5)
            } else {
                String::new()
            }
        )
    };
    let mut r = Report::new(status, summary).unit("volume", "volumes");
    r.findings = findings;
    r.sort_findings();
    r.notes.extend(data.notes.iter().cloned());
    if !data.history_kept && !p.predict_within.is_zero() && n > 0 {
        r.notes
            .push("no prediction: give --state-dir to keep each volume's history".into());
    }
    r.notes.extend(names.notes.iter().cloned());
    let count = |f: &dyn Fn(&Judged) -> bool| judged.iter().filter(|j| f(j)).count() as f64;
    r = r
        .perf(Perfdata::new("pv_filesystems", n as f64).min(0.0))
        .perf(Perfdata::new("space_low", count(&|j| j.space_low)).min(0.0))
        .perf(Perfdata::new("inodes_low", count(&|j| j.inodes_low)).min(0.0))
        .perf(Perfdata::new("filling_up", count(&|j| j.filling)).min(0.0))
        .perf(Perfdata::new("unmeasured", count(&|j| j.status == Status::Unknown)).min(0.0));
    // Each of the fullest volumes (bounded): used %, with -w/-c as used % of that volume.
    let mut order: Vec<usize> = (0..n).filter(|&i| judged[i].used_pct.is_some()).collect();
    order.sort_by(|&a, &b| {
        judged[b]
            .used_pct
            .partial_cmp(&judged[a].used_pct)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| data.volumes[a].key().cmp(&data.volumes[b].key()))
    });
    for &i in order.iter().take(p.perf_volumes) {
        let v = &data.volumes[i];
        let total = v.space.map(|s| s.used() + s.avail).unwrap_or(0);
        let range = |l: &Limit| {
            l.used_pct(total)
                .and_then(|u| Range::parse(&plugin::fmt_num((u * 100.0).round() / 100.0)).ok())
        };
        let mut pd = Perfdata::new(
            format!("{}_used", v.key()),
            judged[i].used_pct.unwrap_or(0.0),
        )
        .uom(Uom::Percent)
        .min(0.0)
        .max(100.0);
        if !v.read_only {
            pd = pd
                .warn(range(&p.warning).as_ref())
                .crit(range(&p.critical).as_ref());
        }
        r = r.perf(pd);
    }
    r
}

/// What a volume's verdict is, by its signal.
#[derive(Clone, Copy)]
enum Verdict {
    Ok,
    SpaceLow,
    InodesLow,
    FillingUp,
    Unmeasured,
    ReadOnly,
}

/// The signal of each verdict: the one table of this check's signals (docs/checks reads it).
fn signal(v: Verdict) -> &'static str {
    match v {
        Verdict::Ok => "pv_capacity_ok",
        Verdict::SpaceLow => "pv_space_low",
        Verdict::InodesLow => "pv_inodes_low",
        Verdict::FillingUp => "pv_filling_up",
        Verdict::Unmeasured => "pv_unmeasured",
        Verdict::ReadOnly => "pv_read_only",
    }
}
