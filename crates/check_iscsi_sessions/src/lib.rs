//! check_iscsi_sessions: the initiator side of iSCSI volumes, read from sysfs.
//!
//! gather (sysfs, mountinfo, kubelet roots) → evaluate (pure, every decision) → the plugin runtime
//! renders. See `node::iscsi` for the sysfs layout.

use clap::Parser;
use kube::names::{Names, Wanted};
use node::iscsi::{pv_from_iqn, Attr, RecoveryTmo, Session, Sessions};
use node::Mount;
use plugin::{
    Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds, Unknown, Uom,
};
use regex::Regex;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

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
    mut_arg("mountinfo", |a| a.help("Mount table that maps disks to mount points and PVs [default: /proc/self/mountinfo, or <host-root>/proc/1/mountinfo]"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Range on the number of unhealthy sessions for WARNING (with -w/-c the count decides the
    /// sessions' state; --min-sessions, --expect-target and doubled logins still alert)
    #[arg(short = 'w', long = "warning", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub warning: Option<Range>,

    /// Range on the number of unhealthy sessions for CRITICAL
    #[arg(short = 'c', long = "critical", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub critical: Option<Range>,

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
    pub names: kube::NamesArgs,
}

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

impl From<&Opts> for Policy {
    fn from(o: &Opts) -> Policy {
        Policy {
            min_sessions: o.min_sessions,
            expect_target: o.expect_target.clone(),
            min_recovery_timeout: o.min_recovery_timeout,
            include: o.filter.include.clone(),
            exclude: o.filter.exclude.clone(),
            thresholds: Thresholds::new(o.warning.clone(), o.critical.clone()),
        }
    }
}

/// Everything gathered from the node.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub sessions: Sessions,
    /// `None`: not read (no block device to map). `Some(Err)`: unreadable (a note, not an alert).
    pub mounts: Option<Result<Vec<Mount>, String>>,
    pub kubelet_roots: Vec<PathBuf>,
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
        let names = kube::names::resolve(&self.names, &wanted(&data, &policy), ctx);
        Ok(evaluate_named(&data, &policy, &names))
    }
}

/// All I/O: the session class, then (only when there are disks) the mount table.
pub fn gather(o: &Opts, ctx: &Ctx) -> Result<Gathered, Unknown> {
    let host = o.host.host();
    let sys = o.sys.path(&host);
    // A mistyped --kubelet-root is a usage mistake even when no disk needs mapping.
    let roots = o.kubelet_root.resolve_if_any(&host)?;
    ctx.stage(format!(
        "reading {}",
        sys.join("class/iscsi_session").display()
    ));
    match std::fs::metadata(&sys) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Unknown(format!(
                "{} is not a directory: is --sys right?",
                sys.display()
            )))
        }
        Err(e) => {
            return Err(Unknown(format!(
                "cannot read {}: {} (is --sys right?)",
                sys.display(),
                node::errtext(&e)
            )))
        }
    }
    match std::fs::metadata(sys.join("class")) {
        Ok(m) if m.is_dir() => {}
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Unknown(format!(
                "cannot read {}: {}",
                sys.join("class").display(),
                node::errtext(&e)
            )))
        }
        _ => {
            return Err(Unknown(format!(
                "{} has no class/ directory: not a sysfs (is --sys right?)",
                sys.display()
            )))
        }
    }
    let sessions = node::iscsi::read(&sys).map_err(Unknown)?;
    ctx.debug(format!(
        "read {} iSCSI session(s) under {} (class present: {})",
        sessions.sessions.len(),
        sys.display(),
        sessions.class_present
    ));
    let has_disks = sessions
        .sessions
        .iter()
        .any(|s| s.block_devices().next().is_some());
    let mut g = Gathered {
        sessions,
        ..Default::default()
    };
    if has_disks {
        let mi = o.mountinfo.path(&host);
        ctx.stage(format!("reading {}", mi.display()));
        let mounts = node::mountinfo::read(&mi);
        if let Ok(m) = &mounts {
            ctx.debug(format!("read {} mounts from {}", m.len(), mi.display()));
        }
        g.mounts = Some(mounts);
        ctx.stage("looking for kubelet roots");
        g.kubelet_roots = roots;
        ctx.debug(format!("kubelet roots: {:?}", g.kubelet_roots));
    }
    Ok(g)
}

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
    let t = node::errtext(&std::io::Error::from_raw_os_error(errno));
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

fn is_offline(state: &str) -> bool {
    matches!(
        state,
        "transport-offline" | "offline" | "deleted" | "cancel"
    )
}

fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Mount points and PVs using a device (`maj:min`), as one display string.
fn usage_text(
    devs: &[(String, (u32, u32))],
    by_dev: &HashMap<(u32, u32), Vec<&Mount>>,
    roots: &[PathBuf],
) -> Option<String> {
    let mut pvs: Vec<String> = Vec::new();
    let mut points: Vec<String> = Vec::new();
    for (name, majmin) in devs {
        for m in by_dev.get(majmin).into_iter().flatten() {
            if let Some(kp) = node::kubelet::classify(&m.mount_point, roots) {
                if let Some(pv) = kp.volume_name() {
                    if !pvs.iter().any(|p| p == pv) {
                        pvs.push(pv.to_string());
                    }
                }
            }
            let mp = m.mount_point.display().to_string();
            let mp = if devs.len() > 1 {
                format!("{mp} ({name})")
            } else {
                mp
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
fn session_volumes(
    s: &Session,
    by_dev: &HashMap<(u32, u32), Vec<&Mount>>,
    roots: &[PathBuf],
) -> (Vec<String>, Vec<String>) {
    let mut pvs: Vec<String> = s
        .targetname
        .value()
        .and_then(pv_from_iqn)
        .map(|p| vec![p.to_string()])
        .unwrap_or_default();
    let mut uids: Vec<String> = Vec::new();
    for b in s.devices.iter().flat_map(|d| d.blocks.iter()) {
        let devs = std::iter::once(&b.dev).chain(b.children.iter().map(|(_, d)| d));
        for mm in devs.filter_map(|d| d.value().and_then(parse_majmin)) {
            for m in by_dev.get(&mm).into_iter().flatten() {
                if let Some(kp) = node::kubelet::classify(&m.mount_point, roots) {
                    if let Some(pv) = kp.volume_name() {
                        if !pvs.iter().any(|p| p == pv) {
                            pvs.push(pv.to_string());
                        }
                    }
                    if let Some(u) = kp.pod_uid() {
                        if !uids.iter().any(|x| x == u) {
                            uids.push(u.to_string());
                        }
                    }
                }
            }
        }
    }
    uids.sort();
    (pvs, uids)
}

fn mounts_by_dev(data: &Gathered) -> HashMap<(u32, u32), Vec<&Mount>> {
    let mut by_dev: HashMap<(u32, u32), Vec<&Mount>> = HashMap::new();
    if let Some(Ok(mounts)) = &data.mounts {
        for m in mounts {
            by_dev.entry((m.major, m.minor)).or_default().push(m);
        }
    }
    by_dev
}

/// The volumes and pods whose names the report needs: those of unhealthy sessions only, so a
/// healthy host costs no lookup. Pure.
pub fn wanted(data: &Gathered, policy: &Policy) -> Wanted {
    let by_dev = mounts_by_dev(data);
    let none = Names::default();
    let mut w = Wanted::default();
    for s in data
        .sessions
        .sessions
        .iter()
        .filter(|s| included(s, policy))
    {
        if judge_session(s, policy, &by_dev, &data.kubelet_roots, &none).status == Status::Ok {
            continue;
        }
        let (pvs, uids) = session_volumes(s, &by_dev, &data.kubelet_roots);
        for pv in &pvs {
            w.add(pv, uids.iter().map(String::as_str));
        }
    }
    w
}

struct SessionVerdict {
    status: Status,
    finding: Finding,
    /// `session3 (pvc-…): FREE (recovery timed out), sdc transport-offline`
    short: String,
}

fn label(s: &Session) -> String {
    match s.targetname.value() {
        Some(iqn) => pv_from_iqn(iqn).unwrap_or(iqn).to_string(),
        None => "target unknown".into(),
    }
}

fn judge_session(
    s: &Session,
    policy: &Policy,
    by_dev: &HashMap<(u32, u32), Vec<&Mount>>,
    roots: &[PathBuf],
    names: &Names,
) -> SessionVerdict {
    let mut problems: Vec<Problem> = Vec::new();
    let mut details: Vec<String> = Vec::new();

    // Session state.
    let logged_in = s.state.value() == Some("LOGGED_IN");
    let tmo = s.recovery_tmo();
    let tmo_text = match (&tmo, &s.recovery_tmo) {
        (Some(t), _) => t.to_string(),
        (None, a) => a.show(),
    };
    match &s.state {
        Attr::Value(v) if v == "LOGGED_IN" => {}
        Attr::Value(v) if v == "FAILED" => problems.push(Problem::new(
            Status::Critical,
            "FAILED (in recovery)",
            format!(
                "the connection is lost and recovery is running; I/O is blocked until the target returns, and after recovery_tmo ({tmo_text}) its disks go offline"
            ),
        )
            .signal("session_failed")),
        Attr::Value(v) if v == "FREE" => problems.push(Problem::new(
            Status::Critical,
            "FREE (recovery timed out)",
            "recovery timed out; I/O to its disks fails and filesystems on them abort (ext4 remounts read-only)",
        )
            .signal("session_recovery_timed_out")),
        Attr::Value(v) => problems.push(Problem::new(
            Status::Critical,
            format!("state {v}"),
            format!("in state '{v}', not LOGGED_IN"),
        )
            .signal("session_state")),
        Attr::Missing => problems.push(Problem::new(
            Status::Unknown,
            "state unknown",
            format!(
                "no state attribute in {}: cannot tell whether it is logged in",
                s.attr_dir.display()
            ),
        )
            .signal("session_state_unknown")),
        Attr::Error(e) => problems.push(Problem::unreadable(e)),
    }

    // The target name: needed to name, filter and compare sessions.
    if let Attr::Error(e) = &s.targetname {
        problems.push(Problem::unreadable(e));
    }

    // recovery_tmo against the minimum.
    if let Some(min) = policy.min_recovery_timeout {
        match (&s.recovery_tmo, tmo) {
            (_, Some(RecoveryTmo::Secs(t))) if t < min => problems.push(Problem::new(
                Status::Warning,
                format!("recovery_tmo {t}s < {min}s"),
                format!(
                    "recovery_tmo {t}s is below {min}s: a target outage longer than {t}s offlines its disks (raise node.session.timeo.replacement_timeout)"
                ),
            )
            .signal("recovery_tmo_low")),
            (_, Some(_)) => {}
            (Attr::Value(v), None) => problems.push(Problem::new(
                Status::Unknown,
                "recovery_tmo not understood",
                format!("recovery_tmo '{v}' is not a number of seconds or 'off'"),
            )
            .signal("recovery_tmo_unknown")),
            (Attr::Missing, None) => problems.push(Problem::new(
                Status::Unknown,
                "recovery_tmo unknown",
                format!(
                    "no recovery_tmo attribute in {}: cannot check --min-recovery-timeout",
                    s.attr_dir.display()
                ),
            )
            .signal("recovery_tmo_unknown")),
            (Attr::Error(e), None) => problems.push(Problem::unreadable(e)),
        }
    } else if let Attr::Error(e) = &s.recovery_tmo {
        details.push(e.to_string());
    }

    // Connections.
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

    // SCSI devices and their disks.
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
            let usage = if by_dev.is_empty() {
                None
            } else {
                Some(usage_text(&devs, by_dev, roots).unwrap_or_else(|| "not mounted".into()))
            };
            let mut line = format!(
                "{} {} ({}) {}",
                d.hctl,
                b.name,
                b.dev.show(),
                d.state.show()
            );
            if let Some(u) = usage {
                line.push_str(": ");
                line.push_str(&u);
            }
            details.push(line);
        }
    }
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

    let status = problems
        .iter()
        .fold(Status::Ok, |acc, p| acc.worst(p.status));
    let iqn = s.targetname.show();
    let iqn_pv = s.targetname.value().and_then(pv_from_iqn);
    let (_, uids) = if names.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        session_volumes(s, by_dev, roots)
    };
    let pv = iqn_pv
        .map(|p| {
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
        })
        .unwrap_or_default();
    let portal = s.portal().unwrap_or_else(|| "unknown".into());
    let mut text = format!(
        "{} {}: {iqn}{pv}, portal {portal}, recovery_tmo {tmo_text}",
        s.name,
        s.state.show()
    );
    // Worst problems first in the text and the summary.
    let mut sorted = problems.clone();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.status.rank()));
    if !sorted.is_empty() {
        text.push_str(" - ");
        text.push_str(
            &sorted
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
        .signal(sorted.first().map_or("session_ok", |p| p.signal))
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
        sorted
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

fn included(s: &Session, policy: &Policy) -> bool {
    let iqn = s.targetname.value().unwrap_or("");
    if policy.exclude.iter().any(|r| r.is_match(iqn)) {
        return false;
    }
    policy.include.is_empty() || policy.include.iter().any(|r| r.is_match(iqn))
}

/// Every decision, from gathered data alone, without names.
pub fn evaluate(data: &Gathered, policy: &Policy) -> Report {
    evaluate_named(data, policy, &Names::default())
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
            "--include/--exclude matched none of the {excluded} iSCSI session(s) ({}{})",
            names.join(", "),
            if excluded > 5 { ", …" } else { "" }
        ));
    }

    let by_dev = mounts_by_dev(data);

    let mut findings: Vec<Finding> = Vec::new();
    // (status, phrase) for the summary, in order of discovery; sorted worst first below.
    let mut phrases: Vec<(Status, String)> = Vec::new();
    let mut unhealthy = 0usize;
    for s in &sessions {
        let v = judge_session(s, policy, &by_dev, &data.kubelet_roots, names);
        if v.status != Status::Ok {
            unhealthy += 1;
            phrases.push((v.status, v.short));
        }
        findings.push(v.finding);
    }

    // Two sessions to the same target and portal (through the same iface): a stale or doubled
    // login. Different ifaces to one portal are deliberate multipath and pass.
    let mut groups: BTreeMap<(String, String, String), Vec<&Session>> = BTreeMap::new();
    for s in &sessions {
        if let (Some(iqn), Some(portal)) = (s.targetname.value(), s.portal()) {
            let iface = s.ifacename.value().unwrap_or("").to_string();
            groups
                .entry((iqn.to_string(), portal, iface))
                .or_default()
                .push(s);
        }
    }
    for ((iqn, portal, _), group) in &groups {
        if group.len() > 1 {
            let names: Vec<String> = group
                .iter()
                .map(|s| format!("{} {}", s.name, s.state.show()))
                .collect();
            let who = pv_from_iqn(iqn).unwrap_or(iqn);
            phrases.push((
                Status::Warning,
                format!("{} sessions to {who} at {portal}", group.len()),
            ));
            findings.push(
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

    // Expectations.
    let n = sessions.len();
    if let Some(min) = policy.min_sessions {
        if (n as u64) < min as u64 {
            let why = if data.sessions.class_present {
                String::new()
            } else {
                " (the iSCSI transport class is not in sysfs: no initiator loaded)".into()
            };
            phrases.push((
                Status::Critical,
                format!("{n} session(s), expected at least {min}"),
            ));
            findings.push(
                Finding::new(
                    Status::Critical,
                    format!("{n} iSCSI session(s), fewer than --min-sessions {min}{why}"),
                )
                .signal("too_few_sessions"),
            );
        }
    }
    for re in &policy.expect_target {
        let matching: Vec<&&Session> = sessions
            .iter()
            .filter(|s| s.targetname.value().is_some_and(|t| re.is_match(t)))
            .collect();
        if !matching
            .iter()
            .any(|s| s.state.value() == Some("LOGGED_IN"))
        {
            let others = if matching.is_empty() {
                "no session at all".to_string()
            } else {
                matching
                    .iter()
                    .map(|s| format!("{} {}", s.name, s.state.show()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            phrases.push((
                Status::Critical,
                format!("no logged-in session to '{}'", re.as_str()),
            ));
            findings.push(
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

    // Counts and perfdata.
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
    let disks: usize = sessions.iter().map(|s| s.block_devices().count()).sum();
    let min_tmo = sessions
        .iter()
        .filter_map(|s| match s.recovery_tmo() {
            Some(RecoveryTmo::Secs(t)) => Some(t),
            _ => None,
        })
        .min();

    let mut status = findings
        .iter()
        .fold(Status::Ok, |acc, f| acc.worst(f.status));
    let t = &policy.thresholds;
    if t.warning.is_some() || t.critical.is_some() {
        // The count of unhealthy sessions decides their part; what is not about one session's
        // health (expectations, doubled logins) and what could not be read still count.
        let session_findings = sessions.len();
        let others = findings
            .iter()
            .enumerate()
            .filter(|(i, f)| *i >= session_findings || f.status == Status::Unknown)
            .fold(Status::Ok, |acc, (_, f)| acc.worst(f.status));
        status = t.evaluate(unhealthy as f64).worst(others);
    }
    let summary = if phrases.is_empty() {
        match n {
            0 if data.sessions.class_present => "no iSCSI sessions".to_string(),
            0 => "no iSCSI sessions (the iSCSI transport class is not in sysfs)".to_string(),
            _ => format!(
                "{n} iSCSI session{} logged in, {devices} disk{} running",
                if n == 1 { "" } else { "s" },
                if devices == 1 { "" } else { "s" }
            ),
        }
    } else {
        phrases.sort_by_key(|(st, _)| std::cmp::Reverse(st.rank()));
        const SHOWN: usize = 3;
        let more = phrases.len().saturating_sub(SHOWN);
        let mut parts: Vec<String> = phrases.iter().take(SHOWN).map(|(_, p)| p.clone()).collect();
        if more > 0 {
            parts.push(format!("+{more} more"));
        }
        let head = if unhealthy > 0 {
            format!(
                "{unhealthy} of {n} iSCSI session{} unhealthy: ",
                if n == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        };
        format!("{head}{}", parts.join("; "))
    };

    let zero = Range::parse("0").ok();
    let mut r = Report::new(status, summary)
        .unit("session", "sessions")
        .perf(
            Perfdata::new("sessions", n as f64)
                .crit(
                    policy
                        .min_sessions
                        .and_then(|m| Range::parse(&format!("{m}:")).ok())
                        .as_ref(),
                )
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
                .warn(
                    policy
                        .min_recovery_timeout
                        .and_then(|m| Range::parse(&format!("{m}:")).ok())
                        .as_ref(),
                )
                .min(0.0),
        );
    }
    r = r.perf(
        Perfdata::new("sessions_unhealthy", unhealthy as f64)
            .thresholds(t)
            .min(0.0),
    );
    for f in findings {
        r = r.finding(f);
    }
    if excluded > 0 {
        r = r.note(format!(
            "{excluded} session(s) skipped by --include/--exclude"
        ));
    }
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

#[cfg(test)]
mod tests;
