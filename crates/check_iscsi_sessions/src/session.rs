//! The judgement of one session, pure: its state, recovery timeout, connections and disks, each
//! turned into problems, then into one finding and a phrase for the summary.

use crate::Policy;
use kube::checks::names::Names;
use node::blockdev::parse_majmin;
use node::iscsi::{pv_from_iqn, Attr, RecoveryTmo, Session};
use node::usage::DeviceUsage;
use plugin::{Finding, Status};

/// One problem found on a session: the status, a few words for the summary, a sentence for the
/// long output.
#[derive(Debug, Clone)]
struct Problem {
    status: Status,
    short: String,
    long: String,
    /// The machine-readable kind (the finding's `signal` when it is the worst problem).
    signal: &'static str,
}

impl Problem {
    fn new(status: Status, short: impl Into<String>, long: impl Into<String>) -> Problem {
        Problem {
            status,
            short: short.into(),
            long: long.into(),
            signal: "session_problem",
        }
    }
    fn signal(mut self, s: &'static str) -> Problem {
        self.signal = s;
        self
    }
    /// An attribute that the decision needs could not be read.
    fn unreadable(e: &node::iscsi::AttrError) -> Problem {
        let file = e
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let short_err = e.errno.map(nix_name).unwrap_or_else(|| e.error.clone());
        Problem::new(
            Status::Unknown,
            format!("cannot read {file} ({short_err})"),
            e.to_string(),
        )
        .signal("sysfs_unreadable")
    }
}

fn nix_name(errno: i32) -> String {
    // "Permission denied (EACCES)" → "EACCES"
    let t = plugin::errtext(&std::io::Error::from_raw_os_error(errno));
    t.rsplit_once('(')
        .map(|(_, n)| n.trim_end_matches(')').to_string())
        .unwrap_or(t)
}

/// What a SCSI device state means.
fn device_state(state: &str) -> (Status, &'static str) {
    match state {
        "running" => (Status::Ok, ""),
        "created" => (Status::Ok, "being set up"),
        "blocked" => (Status::Warning, "I/O waits while the session recovers"),
        "created-blocked" => (
            Status::Warning,
            "blocked while being set up: I/O waits while the session recovers",
        ),
        "quiesce" => (Status::Warning, "quiesced: I/O held"),
        "transport-offline" => (
            Status::Critical,
            "session recovery timed out: the kernel fails all I/O to it",
        ),
        "offline" => (
            Status::Critical,
            "SCSI error handling gave up: the kernel fails all I/O to it",
        ),
        "deleted" | "cancel" => (Status::Critical, "being removed: I/O fails"),
        _ => (Status::Warning, "unexpected state"),
    }
}

pub(crate) fn is_offline(state: &str) -> bool {
    matches!(
        state,
        "transport-offline" | "offline" | "deleted" | "cancel"
    )
}

/// Mount points and PVs using a device (`maj:min`), as one display string.
fn usage_text(devs: &[(String, (u32, u32))], usage: &DeviceUsage) -> Option<String> {
    let mut pvs: Vec<String> = Vec::new();
    let mut points: Vec<String> = Vec::new();
    for (name, majmin) in devs {
        for m in usage.on(*majmin) {
            if let Some(pv) = m.volume {
                if !pvs.iter().any(|p| p == pv) {
                    pvs.push(pv.to_string());
                }
            }
            let mp = if devs.len() > 1 {
                format!("{} ({name})", m.mount_point)
            } else {
                m.mount_point.to_string()
            };
            if !points.contains(&mp) {
                points.push(mp);
            }
        }
    }
    if points.is_empty() {
        return None;
    }
    const SHOWN: usize = 4;
    let more = points.len().saturating_sub(SHOWN);
    points.truncate(SHOWN);
    let mut s = String::new();
    if !pvs.is_empty() {
        s.push_str(&format!("PV {}; ", pvs.join(", ")));
    }
    s.push_str(&format!("mounted at {}", points.join(", ")));
    if more > 0 {
        s.push_str(&format!(" (+{more} more)"));
    }
    Some(s)
}

/// The PVs (from the target name, then the kubelet mounts of its disks) and the UIDs of the
/// pods whose volume mounts use its disks.
pub(crate) fn session_volumes(s: &Session, usage: &DeviceUsage) -> (Vec<String>, Vec<String>) {
    let from_iqn: Vec<String> = s
        .targetname
        .value()
        .and_then(pv_from_iqn)
        .map(|p| vec![p.to_string()])
        .unwrap_or_default();
    let devs = s
        .devices
        .iter()
        .flat_map(|d| d.blocks.iter())
        .flat_map(|b| std::iter::once(&b.dev).chain(b.children.iter().map(|(_, d)| d)))
        .filter_map(|d| d.value().and_then(parse_majmin));
    usage.volumes_on(devs, from_iqn)
}

pub(crate) struct SessionVerdict {
    pub(crate) status: Status,
    pub(crate) finding: Finding,
    /// `session3 (pvc-…): FREE (recovery timed out), sdc transport-offline`
    pub(crate) short: String,
}

fn label(s: &Session) -> String {
    match s.targetname.value() {
        Some(iqn) => pv_from_iqn(iqn).unwrap_or(iqn).to_string(),
        None => "target unknown".into(),
    }
}

/// The recovery timeout as shown: the parsed value, else the attribute as read.
fn tmo_text(s: &Session) -> String {
    match (s.recovery_tmo(), &s.recovery_tmo) {
        (Some(t), _) => t.to_string(),
        (None, a) => a.show(),
    }
}

/// What the session's own state says.
fn state_problem(s: &Session) -> Option<Problem> {
    let tmo_text = tmo_text(s);
    Some(match &s.state {
        Attr::Value(v) if v == "LOGGED_IN" => return None,
        Attr::Value(v) if v == "FAILED" => Problem::new(
            Status::Critical,
            "FAILED (in recovery)",
            format!(
                "the connection is lost and recovery is running; I/O is blocked until the target returns, and after recovery_tmo ({tmo_text}) its disks go offline"
            ),
        )
        .signal("session_failed"),
        Attr::Value(v) if v == "FREE" => Problem::new(
            Status::Critical,
            "FREE (recovery timed out)",
            "recovery timed out; I/O to its disks fails and filesystems on them abort (ext4 remounts read-only)",
        )
        .signal("session_recovery_timed_out"),
        Attr::Value(v) => Problem::new(
            Status::Critical,
            format!("state {v}"),
            format!("in state '{v}', not LOGGED_IN"),
        )
        .signal("session_state"),
        Attr::Missing => Problem::new(
            Status::Unknown,
            "state unknown",
            format!(
                "no state attribute in {}: cannot tell whether it is logged in",
                s.attr_dir.display()
            ),
        )
        .signal("session_state_unknown"),
        Attr::Error(e) => Problem::unreadable(e),
    })
}

/// recovery_tmo against --min-recovery-timeout; without one, an unreadable value is a detail.
fn recovery_tmo_problem(
    s: &Session,
    policy: &Policy,
    details: &mut Vec<String>,
) -> Option<Problem> {
    let Some(min) = policy.min_recovery_timeout else {
        if let Attr::Error(e) = &s.recovery_tmo {
            details.push(e.to_string());
        }
        return None;
    };
    match (&s.recovery_tmo, s.recovery_tmo()) {
        (_, Some(RecoveryTmo::Secs(t))) if t < min => Some(Problem::new(
            Status::Warning,
            format!("recovery_tmo {t}s < {min}s"),
            format!(
                "recovery_tmo {t}s is below {min}s: a target outage longer than {t}s offlines its disks (raise node.session.timeo.replacement_timeout)"
            ),
        )
        .signal("recovery_tmo_low")),
        (_, Some(_)) => None,
        (Attr::Value(v), None) => Some(Problem::new(
            Status::Unknown,
            "recovery_tmo not understood",
            format!("recovery_tmo '{v}' is not a number of seconds or 'off'"),
        )
        .signal("recovery_tmo_unknown")),
        (Attr::Missing, None) => Some(Problem::new(
            Status::Unknown,
            "recovery_tmo unknown",
            format!(
                "no recovery_tmo attribute in {}: cannot check --min-recovery-timeout",
                s.attr_dir.display()
            ),
        )
        .signal("recovery_tmo_unknown")),
        (Attr::Error(e), None) => Some(Problem::unreadable(e)),
    }
}

/// Connections not up.
fn connection_problems(s: &Session, problems: &mut Vec<Problem>, details: &mut Vec<String>) {
    for c in &s.connections {
        let portal = c.portal().unwrap_or_else(|| "portal unknown".into());
        match &c.state {
            Attr::Value(v) if v == "up" => {}
            Attr::Value(v) => problems.push(
                Problem::new(
                    Status::Critical,
                    format!("{} {v}", c.name),
                    format!("{} to {portal} is {v}, not up", c.name),
                )
                .signal("connection_down"),
            ),
            Attr::Missing => {}
            Attr::Error(e) => problems.push(Problem::unreadable(e)),
        }
        details.push(format!("{} {}, portal {portal}", c.name, c.state.show()));
    }
    if s.connections.is_empty() && s.problems.is_empty() {
        details.push("no connection in sysfs".into());
    }
}

/// SCSI devices not running, and a line per disk with what it carries; returns the number of
/// disks.
fn device_problems(
    s: &Session,
    usage: Option<&DeviceUsage>,
    problems: &mut Vec<Problem>,
    details: &mut Vec<String>,
) -> usize {
    let mut disks = 0usize;
    for d in &s.devices {
        let names: Vec<&str> = d.blocks.iter().map(|b| b.name.as_str()).collect();
        let who = if names.is_empty() {
            d.hctl.clone()
        } else {
            names.join(",")
        };
        disks += d.blocks.len();
        match &d.state {
            Attr::Value(v) => {
                let (st, why) = device_state(v);
                if st != Status::Ok {
                    problems.push(
                        Problem::new(
                            st,
                            format!("{who} {v}"),
                            format!("{} {who} is {v}: {why}", d.hctl),
                        )
                        .signal("scsi_device_state"),
                    );
                }
            }
            Attr::Missing => problems.push(
                Problem::new(
                    Status::Unknown,
                    format!("{who} state unknown"),
                    format!("{} {who}: no state attribute", d.hctl),
                )
                .signal("scsi_device_state_unknown"),
            ),
            Attr::Error(e) => problems.push(Problem::unreadable(e)),
        }
        if d.blocks.is_empty() {
            details.push(format!("{} {}, no block device", d.hctl, d.state.show()));
        }
        for b in &d.blocks {
            let mut devs = Vec::new();
            if let Some(mm) = b.dev.value().and_then(parse_majmin) {
                devs.push((b.name.clone(), mm));
            }
            for (cn, cd) in &b.children {
                if let Some(mm) = cd.value().and_then(parse_majmin) {
                    devs.push((cn.clone(), mm));
                }
            }
            let mut line = format!(
                "{} {} ({}) {}",
                d.hctl,
                b.name,
                b.dev.show(),
                d.state.show()
            );
            if let Some(u) = usage {
                line.push_str(": ");
                line.push_str(&usage_text(&devs, u).unwrap_or_else(|| "not mounted".into()));
            }
            details.push(line);
        }
    }
    disks
}

/// Everything wrong with one session, and the details of its long output.
fn problems(
    s: &Session,
    policy: &Policy,
    usage: Option<&DeviceUsage>,
) -> (Vec<Problem>, Vec<String>) {
    let mut problems: Vec<Problem> = Vec::new();
    let mut details: Vec<String> = Vec::new();
    problems.extend(state_problem(s));
    // The target name: needed to name, filter and compare sessions.
    if let Attr::Error(e) = &s.targetname {
        problems.push(Problem::unreadable(e));
    }
    problems.extend(recovery_tmo_problem(s, policy, &mut details));
    connection_problems(s, &mut problems, &mut details);
    let disks = device_problems(s, usage, &mut problems, &mut details);
    let logged_in = s.state.value() == Some("LOGGED_IN");
    if logged_in && disks == 0 && s.problems.is_empty() {
        problems.push(
            Problem::new(
                Status::Warning,
                "no disk attached",
                "logged in but no disk attached (no LUN was scanned, or its disk was removed)",
            )
            .signal("no_disk"),
        );
    }
    // What could not be walked.
    for p in &s.problems {
        problems.push(
            Problem::new(Status::Unknown, "sysfs incomplete", p.clone()).signal("sysfs_incomplete"),
        );
    }
    // Worst problems first in the text and the summary.
    problems.sort_by_key(|p| std::cmp::Reverse(p.status.rank()));
    (problems, details)
}

/// ` (PV p, PVC ns/c, pods …)` after the IQN, as far as `names` knows them.
fn pv_text(pv: Option<&str>, uids: &[String], names: &Names) -> String {
    let Some(p) = pv else {
        return String::new();
    };
    let mut t = format!(" (PV {p}");
    if let Some(c) = names.claim(p) {
        t.push_str(&format!(", PVC {c}"));
    }
    let pods = names.pods_of(p, uids.iter().map(String::as_str));
    if !pods.is_empty() {
        t.push_str(&format!(
            ", pod{} {}",
            if pods.len() == 1 { "" } else { "s" },
            pods.join(", ")
        ));
    }
    t.push(')');
    t
}

/// The decision for one session, pure: its problems, one finding, one summary phrase.
pub(crate) fn judge_session(
    s: &Session,
    policy: &Policy,
    usage: Option<&DeviceUsage>,
    names: &Names,
) -> SessionVerdict {
    let (problems, details) = problems(s, policy, usage);
    let status = problems
        .iter()
        .fold(Status::Ok, |acc, p| acc.worst(p.status));
    let iqn_pv = s.targetname.value().and_then(pv_from_iqn);
    let uids = match usage {
        Some(u) if !names.is_empty() => session_volumes(s, u).1,
        _ => Vec::new(),
    };
    let portal = s.portal().unwrap_or_else(|| "unknown".into());
    let mut text = format!(
        "{} {}: {}{}, portal {portal}, recovery_tmo {}",
        s.name,
        s.state.show(),
        s.targetname.show(),
        pv_text(iqn_pv, &uids, names),
        tmo_text(s)
    );
    if !problems.is_empty() {
        text.push_str(" - ");
        text.push_str(
            &problems
                .iter()
                .map(|p| p.long.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    let disk_names: Vec<&str> = s
        .devices
        .iter()
        .flat_map(|d| d.blocks.iter().map(|b| b.name.as_str()))
        .collect();
    let subject = names
        .subject(iqn_pv.unwrap_or(""), uids.iter().map(String::as_str))
        .session(s.name.as_str())
        .maybe(plugin::Subject::iqn, s.targetname.value())
        .maybe(
            plugin::Subject::device,
            match disk_names.as_slice() {
                [one] => Some(*one),
                _ => None,
            },
        );
    let mut f = Finding::new(status, text)
        .signal(problems.first().map_or("session_ok", |p| p.signal))
        .subject(subject);
    let extra: Vec<String> = [
        ("iface", &s.ifacename),
        ("tpgt", &s.tpgt),
        ("target_state", &s.target_state),
    ]
    .iter()
    .filter(|(_, a)| !matches!(a, Attr::Missing))
    .map(|(n, a)| format!("{n} {}", a.show()))
    .collect();
    if !extra.is_empty() {
        f = f.detail(extra.join(", "));
    }
    for d in details {
        f = f.detail(d);
    }
    let named = iqn_pv
        .map(|p| names.volume(p, uids.iter().map(String::as_str)))
        .filter(|n| Some(n.as_str()) != iqn_pv);
    let who = match named {
        // `session3 media/radarr-0 (PVC media/radarr-config, pvc-…)`
        Some(n) => format!("{} {n}", s.name),
        None => format!("{} ({})", s.name, label(s)),
    };
    let short = format!(
        "{who}: {}",
        problems
            .iter()
            .map(|p| p.short.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    SessionVerdict {
        status,
        finding: f,
        short,
    }
}
