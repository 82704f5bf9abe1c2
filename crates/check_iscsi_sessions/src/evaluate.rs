//! Every decision over all sessions, pure: each session's verdict, doubled logins, the
//! expectations (--min-sessions, --expect-target), the summary and the perfdata.

use crate::session::{is_offline, judge_session, session_volumes};
use crate::Gathered;
use kube::checks::names::{Names, Wanted};
use node::iscsi::{pv_from_iqn, RecoveryTmo, Session};
use node::usage::DeviceUsage;
use plugin::{Finding, Perfdata, Range, Report, Status, Thresholds, Uom};
use regex_lite::Regex;
use std::collections::BTreeMap;

/// The decisions' parameters, apart from the clap struct so tests build them directly.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub min_sessions: Option<u32>,
    pub expect_target: Vec<Regex>,
    pub min_recovery_timeout: Option<u64>,
    pub include: Vec<Regex>,
    pub exclude: Vec<Regex>,
    /// -w/-c on the number of unhealthy sessions.
    pub thresholds: Thresholds,
}

fn included(s: &Session, policy: &Policy) -> bool {
    let iqn = s.targetname.value().unwrap_or("");
    if policy.exclude.iter().any(|r| r.is_match(iqn)) {
        return false;
    }
    policy.include.is_empty() || policy.include.iter().any(|r| r.is_match(iqn))
}

/// The mount table's map, when there is one with anything in it.
fn usage_of(data: &Gathered) -> Option<&DeviceUsage> {
    match &data.mounts {
        Some(Ok(u)) if !u.is_empty() => Some(u),
        _ => None,
    }
}

/// The volumes and pods whose names the report needs: those of unhealthy sessions only, so a
/// healthy host costs no lookup. Pure.
pub fn wanted(data: &Gathered, policy: &Policy) -> Wanted {
    let usage = usage_of(data);
    let empty = DeviceUsage::default();
    let none = Names::default();
    let mut w = Wanted::default();
    for s in data
        .sessions
        .sessions
        .iter()
        .filter(|s| included(s, policy))
    {
        if judge_session(s, policy, usage, &none).status == Status::Ok {
            continue;
        }
        let (pvs, uids) = session_volumes(s, usage.unwrap_or(&empty));
        for pv in &pvs {
            w.add(pv, uids.iter().map(String::as_str));
        }
    }
    w
}

/// Every decision, from gathered data alone, without names.
pub fn evaluate(data: &Gathered, policy: &Policy) -> Report {
    evaluate_named(data, policy, &Names::default())
}

/// What the findings say, and the phrases of the summary (status, phrase) in order of discovery.
#[derive(Default)]
struct Found {
    findings: Vec<Finding>,
    phrases: Vec<(Status, String)>,
    unhealthy: usize,
}

impl Found {
    fn add(&mut self, status: Status, phrase: String, finding: Finding) {
        self.phrases.push((status, phrase));
        self.findings.push(finding);
    }
}

/// Two sessions to the same target and portal (through the same iface): a stale or doubled
/// login. Different ifaces to one portal are deliberate multipath and pass.
fn doubled_logins(sessions: &[&Session], found: &mut Found) {
    let mut groups: BTreeMap<(String, String, String), Vec<&Session>> = BTreeMap::new();
    for s in sessions {
        if let (Some(iqn), Some(portal)) = (s.targetname.value(), s.portal()) {
            let iface = s.ifacename.value().unwrap_or("").to_string();
            groups
                .entry((iqn.to_string(), portal, iface))
                .or_default()
                .push(s);
        }
    }
    for ((iqn, portal, _), group) in groups.iter().filter(|(_, g)| g.len() > 1) {
        let names: Vec<String> = group
            .iter()
            .map(|s| format!("{} {}", s.name, s.state.show()))
            .collect();
        let who = pv_from_iqn(iqn).unwrap_or(iqn);
        found.add(
            Status::Warning,
            format!("{} sessions to {who} at {portal}", group.len()),
            Finding::new(
                Status::Warning,
                format!(
                    "{} sessions to the same target and portal: {iqn} at {portal} ({}); a stale or doubled login, log out the extra one",
                    group.len(),
                    names.join(", ")
                ),
            )
            .signal("duplicate_session")
            .subject(
                plugin::Subject::new()
                    .iqn(iqn.as_str())
                    .maybe(plugin::Subject::pv, pv_from_iqn(iqn)),
            ),
        );
    }
}

/// --min-sessions and --expect-target.
fn expectations(data: &Gathered, sessions: &[&Session], policy: &Policy, found: &mut Found) {
    let n = sessions.len();
    if let Some(min) = policy.min_sessions.filter(|&m| (n as u64) < m as u64) {
        let why = if data.sessions.class_present {
            ""
        } else {
            " (the iSCSI transport class is not in sysfs: no initiator loaded)"
        };
        found.add(
            Status::Critical,
            format!(
                "{}, expected at least {min}",
                plugin::count(n, "session", "sessions")
            ),
            Finding::new(
                Status::Critical,
                format!(
                    "{}, fewer than --min-sessions {min}{why}",
                    plugin::count(n, "iSCSI session", "iSCSI sessions")
                ),
            )
            .signal("too_few_sessions"),
        );
    }
    for re in &policy.expect_target {
        let matching: Vec<&&Session> = sessions
            .iter()
            .filter(|s| s.targetname.value().is_some_and(|t| re.is_match(t)))
            .collect();
        if matching
            .iter()
            .any(|s| s.state.value() == Some("LOGGED_IN"))
        {
            continue;
        }
        let others = if matching.is_empty() {
            "no session at all".to_string()
        } else {
            matching
                .iter()
                .map(|s| format!("{} {}", s.name, s.state.show()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        found.add(
            Status::Critical,
            format!("no logged-in session to '{}'", re.as_str()),
            Finding::new(
                Status::Critical,
                format!(
                    "no logged-in session to a target matching --expect-target '{}' ({others})",
                    re.as_str()
                ),
            )
            .signal("expected_target_missing"),
        );
    }
}

/// The summary: the worst phrases, or what was seen when all is well.
fn summary(data: &Gathered, sessions: &[&Session], found: &mut Found) -> String {
    let n = sessions.len();
    if found.phrases.is_empty() {
        let devices: usize = sessions.iter().map(|s| s.devices.len()).sum();
        return match n {
            0 if data.sessions.class_present => "no iSCSI sessions".to_string(),
            0 => "no iSCSI sessions (the iSCSI transport class is not in sysfs)".to_string(),
            _ => format!(
                "{n} iSCSI session{} logged in, {devices} disk{} running",
                if n == 1 { "" } else { "s" },
                if devices == 1 { "" } else { "s" }
            ),
        };
    }
    found
        .phrases
        .sort_by_key(|(st, _)| std::cmp::Reverse(st.rank()));
    const SHOWN: usize = 3;
    let more = found.phrases.len().saturating_sub(SHOWN);
    let mut parts: Vec<String> = found
        .phrases
        .iter()
        .take(SHOWN)
        .map(|(_, p)| p.clone())
        .collect();
    if more > 0 {
        parts.push(format!("+{more} more"));
    }
    let head = if found.unhealthy > 0 {
        format!(
            "{} of {n} iSCSI session{} unhealthy: ",
            found.unhealthy,
            if n == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    format!("{head}{}", parts.join("; "))
}

/// The state: the worst finding, or with -w/-c the count of unhealthy sessions for their part;
/// what is not about one session's health (expectations, doubled logins) and what could not be
/// read still count.
fn status(sessions: usize, found: &Found, policy: &Policy) -> Status {
    let worst = found
        .findings
        .iter()
        .fold(Status::Ok, |acc, f| acc.worst(f.status));
    let t = &policy.thresholds;
    if t.warning.is_none() && t.critical.is_none() {
        return worst;
    }
    let others = found
        .findings
        .iter()
        .enumerate()
        .filter(|(i, f)| *i >= sessions || f.status == Status::Unknown)
        .fold(Status::Ok, |acc, (_, f)| acc.worst(f.status));
    t.evaluate(found.unhealthy as f64).worst(others)
}

/// The counters of the status line.
fn perfdata(mut r: Report, sessions: &[&Session], policy: &Policy, unhealthy: usize) -> Report {
    let n = sessions.len();
    let failed = sessions
        .iter()
        .filter(|s| s.state.value().is_some_and(|v| v != "LOGGED_IN"))
        .count();
    let devices: usize = sessions.iter().map(|s| s.devices.len()).sum();
    let offline = sessions
        .iter()
        .flat_map(|s| s.devices.iter())
        .filter(|d| d.state.value().is_some_and(is_offline))
        .count();
    let min_tmo = sessions
        .iter()
        .filter_map(|s| match s.recovery_tmo() {
            Some(RecoveryTmo::Secs(t)) => Some(t),
            _ => None,
        })
        .min();
    let zero = Range::parse("0").ok();
    let at_least = |m: Option<u64>| m.and_then(|m| Range::parse(&format!("{m}:")).ok());
    r = r
        .perf(
            Perfdata::new("sessions", n as f64)
                .crit(at_least(policy.min_sessions.map(u64::from)).as_ref())
                .min(0.0),
        )
        .perf(
            Perfdata::new("sessions_failed", failed as f64)
                .crit(zero.as_ref())
                .min(0.0),
        )
        .perf(Perfdata::new("devices", devices as f64).min(0.0))
        .perf(
            Perfdata::new("devices_offline", offline as f64)
                .crit(zero.as_ref())
                .min(0.0),
        );
    if let Some(t) = min_tmo {
        r = r.perf(
            Perfdata::new("min_recovery_tmo", t as f64)
                .uom(Uom::Seconds)
                .warn(at_least(policy.min_recovery_timeout).as_ref())
                .min(0.0),
        );
    }
    r.perf(
        Perfdata::new("sessions_unhealthy", unhealthy as f64)
            .thresholds(&policy.thresholds)
            .min(0.0),
    )
}

/// Every decision, from gathered data alone; volumes named with what `names` knows (its notes
/// are added).
pub fn evaluate_named(data: &Gathered, policy: &Policy, names: &Names) -> Report {
    let all = &data.sessions.sessions;
    let sessions: Vec<&Session> = all.iter().filter(|s| included(s, policy)).collect();
    let excluded = all.len() - sessions.len();
    if sessions.is_empty() && excluded > 0 {
        // A filter that matched nothing must not read as "no iSCSI sessions".
        let names: Vec<&str> = all
            .iter()
            .take(5)
            .map(|s| s.targetname.value().unwrap_or(s.name.as_str()))
            .collect();
        return Report::unknown(format!(
            "--include/--exclude matched none of the {} ({}{})",
            plugin::count(excluded, "iSCSI session", "iSCSI sessions"),
            names.join(", "),
            if excluded > 5 { ", …" } else { "" }
        ));
    }
    let usage = usage_of(data);
    let mut found = Found::default();
    for s in &sessions {
        let v = judge_session(s, policy, usage, names);
        if v.status != Status::Ok {
            found.unhealthy += 1;
            found.phrases.push((v.status, v.short));
        }
        found.findings.push(v.finding);
    }
    doubled_logins(&sessions, &mut found);
    expectations(data, &sessions, policy, &mut found);
    let status = status(sessions.len(), &found, policy);
    let summary = summary(data, &sessions, &mut found);
    let mut r = Report::new(status, summary).unit("session", "sessions");
    r = perfdata(r, &sessions, policy, found.unhealthy);
    for mut f in found.findings {
        if f.status != Status::Ok {
            let pods_node = pods_node(&f, names);
            let step = crate::next::step(&f, data.node_name.as_deref(), pods_node.as_deref());
            f = f.next(step);
        }
        r = r.finding(f);
    }
    if excluded > 0 {
        r = r.note(format!(
            "{} skipped by --include/--exclude",
            plugin::count(excluded, "session", "sessions")
        ));
    }
    let disks: usize = sessions.iter().map(|s| s.block_devices().count()).sum();
    if disks > 0 {
        if let Some(Err(e)) = &data.mounts {
            r = r.note(format!("mount points not shown: {e}"));
        }
    }
    for n in &names.notes {
        r = r.note(n.clone());
    }
    r.sort_findings();
    r
}

/// The node the pods of a finding's volume run on, when the API named exactly one.
fn pods_node(f: &Finding, names: &Names) -> Option<String> {
    let (ns, pod) = (f.subject.namespace.as_deref()?, f.subject.pod.as_deref()?);
    names
        .pods
        .values()
        .find(|p| p.namespace == ns && p.name == pod)
        .and_then(|p| p.node.clone())
}
