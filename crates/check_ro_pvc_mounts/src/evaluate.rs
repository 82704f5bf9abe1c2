//! The decision, pure: what each PV filesystem's state means, and the report over all of them.

use crate::gather::{NodeData, Volume};
use crate::text::{next_step, short_name, volume_subject};
use kube::names::{Names, Wanted};
use node::fsstate;
use node::probe::Outcome;
use plugin::{Finding, Perfdata, Report, Status, Thresholds};

/// Why a volume counts as read-only (or broken), if it does.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Writable,
    /// Still writable but the filesystem recorded errors.
    Errors(String),
    ReadOnly(String),
    /// Read-only at the filesystem (the superblock) under a read-write mount, with no error
    /// recorded and no `emergency_ro`: what a CSI driver does with a ReadOnlyMany volume (stage
    /// it `ro`, bind it without `ro`) looks exactly like this. Not the kernel's error remount;
    /// the API's access modes tell intent from failure.
    ReadOnlyNoError(String),
    /// Mounted read-only on purpose everywhere (no alarm).
    ReadOnlyByDesign,
}

fn in_hidden_ro_window(kernel: Option<(u32, u32, u32)>) -> bool {
    matches!(kernel, Some((6, 12..=14, _)))
}

/// The decision for one volume. Pure. Read-only, whatever way the running kernel shows it:
/// - `emergency_ro` in the super options (ext4, Linux ≥ 6.15 and 6.14.y backports);
/// - `ro` in the super options while a mount of it is `rw` (ext4 errors=remount-ro or a journal
///   abort up to 6.11: the kernel flips the superblock, never the per-mount flags);
/// - `ro` in the super options of every mount *and* recorded ext4 errors;
/// - the mount point no longer answers (`stat` EIO: XFS shut down; EROFS; or no answer at all);
/// - ext4 recorded errors on 6.12–6.14, which show no marker at all (presumed read-only);
/// - a block-mode volume whose device has its read-only flag set.
///
/// Recorded ext4 errors on a filesystem that is still writable are [`Verdict::Errors`].
pub fn judge(v: &Volume, kernel: Option<(u32, u32, u32)>, can_read_all: bool) -> Verdict {
    let has = |o: &str| v.super_options.split(',').any(|x| x == o);
    let errors = v.ext4_errors.as_ref().filter(|e| e.count > 0);
    let err_text = errors.map(|e| {
        let mut s = format!(
            "{} recorded",
            plugin::count(e.count as usize, "ext4 error", "ext4 errors")
        );
        if let Some(t) = e.first_error_time {
            s.push_str(&format!(", first at {}", fsstate::utc(t)));
        }
        if let Some(t) = e.last_error_time {
            if Some(t) != e.first_error_time {
                s.push_str(&format!(", last at {}", fsstate::utc(t)));
            }
        }
        s
    });
    let with_errors = |s: String| match &err_text {
        Some(e) => format!("{s}; {e}"),
        None => s,
    };
    if v.block_mode {
        return if v.block_ro == Some(true) {
            Verdict::ReadOnly(format!(
                "block device {} has its read-only flag set (sysfs ro=1)",
                v.block_dev.as_deref().unwrap_or("?")
            ))
        } else {
            Verdict::Writable
        };
    }
    if has("emergency_ro") {
        return Verdict::ReadOnly(with_errors(
            "emergency_ro in the filesystem's options (the kernel stopped writes after an error)"
                .into(),
        ));
    }
    let any_rw_mount = v.mounts.iter().any(|(_, ro)| !ro);
    // The kernel's remount-ro after an error records it (ext4's errors_count; a journal abort
    // goes through ext4_error too): read-only with an error recorded is the kernel's doing.
    if has("ro") && any_rw_mount && errors.is_some() {
        return Verdict::ReadOnly(with_errors(
            "the filesystem is read-only under a read-write mount (the kernel remounted it read-only)".into(),
        ));
    }
    if has("ro") && errors.is_some() {
        return Verdict::ReadOnly(with_errors("the filesystem is read-only".into()));
    }
    match &v.probe {
        Some(Outcome::Failed { errno, .. })
            if !can_read_all
                && matches!(
                    errno,
                    node::probe::Errno::EACCES | node::probe::Errno::EPERM
                ) =>
        {
            // Our own lack of rights, not the volume's state: evaluate() notes it.
        }
        Some(Outcome::Failed { stage, errno }) if *errno != node::probe::Errno::ENOENT => {
            let why = match errno {
                node::probe::Errno::EIO if v.fstype == "xfs" => " (XFS shut down after an error)",
                node::probe::Errno::EIO => {
                    " (I/O error: the filesystem shut down or its device is gone)"
                }
                node::probe::Errno::EROFS => " (read-only filesystem)",
                _ => "",
            };
            return Verdict::ReadOnly(with_errors(format!(
                "{} of the mount point fails: {:?} {}{}",
                stage.name(),
                errno,
                errno.desc(),
                why
            )));
        }
        Some(Outcome::Hung { after }) => {
            return Verdict::ReadOnly(with_errors(format!(
                "the mount point does not answer (no answer in {})",
                plugin::fmt_duration(*after)
            )));
        }
        Some(o @ Outcome::StillHung { .. }) => {
            return Verdict::ReadOnly(with_errors(format!(
                "the mount point does not answer ({})",
                o.describe()
            )));
        }
        _ => {}
    }
    if has("ro") && any_rw_mount {
        let ext = matches!(v.fstype.as_str(), "ext4" | "ext3" | "ext2");
        let known = match (&v.ext4_errors, ext) {
            (Some(_), _) => "no ext4 error recorded (errors_count 0), no emergency_ro".to_string(),
            (None, true) => {
                "no emergency_ro; the ext4 error counters could not be read (sysfs)".to_string()
            }
            (None, false) => format!(
                "no error recorded ({} does not remount read-only on errors; a shutdown fails the probe)",
                v.fstype
            ),
        };
        return Verdict::ReadOnlyNoError(format!(
            "read-only at the filesystem under a read-write mount, {known}"
        ));
    }
    if has("ro") {
        return Verdict::ReadOnlyByDesign;
    }
    if let Some(e) = err_text {
        if in_hidden_ro_window(kernel) {
            let (a, b, c) = kernel.unwrap_or_default();
            return Verdict::ReadOnly(format!(
                "{e} on kernel {a}.{b}.{c}: kernels 6.12 to 6.14 stop ext4 writes after an error without showing it in the mount table; presumed read-only"
            ));
        }
        return Verdict::Errors(e);
    }
    Verdict::Writable
}

/// The volumes and pods whose names the report needs: those of non-OK volumes only, so a
/// healthy node costs no lookup. Pure.
pub fn wanted(data: &NodeData) -> Wanted {
    let mut w = Wanted::default();
    for v in &data.volumes {
        if matches!(
            judge(v, data.kernel, data.can_read_all),
            Verdict::Writable | Verdict::ReadOnlyByDesign
        ) {
            continue;
        }
        for n in &v.names {
            w.add(n, v.pod_uids.iter().map(String::as_str));
        }
        if v.names.is_empty() {
            w.add("", v.pod_uids.iter().map(String::as_str));
        }
    }
    w
}

/// The machine-readable kind of a verdict (the finding's `signal`). Pure.
pub fn signal_of(v: &Volume, verdict: &Verdict) -> &'static str {
    let has = |o: &str| v.super_options.split(',').any(|x| x == o);
    match verdict {
        Verdict::Writable => "writable",
        Verdict::ReadOnlyByDesign => "ro_by_design",
        Verdict::Errors(_) => "fs_errors",
        Verdict::ReadOnlyNoError(_) => "ro_no_error",
        Verdict::ReadOnly(_) if v.block_mode => "block_ro",
        Verdict::ReadOnly(_) if has("emergency_ro") => "emergency_ro",
        Verdict::ReadOnly(_) if has("ro") => "remounted_ro",
        Verdict::ReadOnly(_) => match v.probe {
            Some(Outcome::Hung { .. }) => "mount_hung",
            Some(Outcome::Failed { .. }) => "mount_io_error",
            Some(Outcome::StillHung { .. }) => "mount_still_hung",
            _ => "presumed_ro",
        },
    }
}

/// The whole decision without names. Pure.
pub fn evaluate(data: &NodeData, thresholds: &Thresholds) -> Report {
    evaluate_named(data, thresholds, &Names::default())
}

/// The volumes of each kind of alarm, named, for the summary.
#[derive(Default)]
struct Tally {
    ro: Vec<String>,
    errs: Vec<String>,
    unexplained: Vec<String>,
}

/// A volume's status and the words after its name; counts it in `tally`.
fn status_of(v: &Volume, verdict: &Verdict, names: &Names, tally: &mut Tally) -> (Status, String) {
    match verdict {
        Verdict::ReadOnly(why) => {
            tally.ro.push(short_name(v, names));
            (Status::Critical, format!("is read-only: {why}"))
        }
        Verdict::ReadOnlyNoError(why) => match v.names.iter().find_map(|n| names.intent(n)) {
            Some(kube::names::Intent::ReadOnly(reason)) => (
                Status::Ok,
                format!("is read-only on purpose: {why}; {reason}"),
            ),
            Some(kube::names::Intent::Writable(reason)) => {
                tally.ro.push(short_name(v, names));
                (
                    Status::Critical,
                    format!("is read-only: {why}; but {reason}: it is meant to be written"),
                )
            }
            None => {
                tally.unexplained.push(short_name(v, names));
                (
                    Status::Warning,
                    format!(
                        "is read-only at the filesystem with no error recorded: {why}; intent unknown (a ReadOnlyMany volume looks like this: the PV's access modes tell, with API access or --pvs-json)"
                    ),
                )
            }
        },
        Verdict::Errors(why) => {
            tally.errs.push(short_name(v, names));
            (
                Status::Warning,
                format!("has recorded errors but is still writable: {why}"),
            )
        }
        Verdict::ReadOnlyByDesign => (Status::Ok, "is mounted read-only on purpose".to_string()),
        Verdict::Writable => (Status::Ok, "is writable".to_string()),
    }
}

/// One volume's finding: what it is, its pods and mounts, and for an alarm the next step.
fn volume_finding(v: &Volume, data: &NodeData, names: &Names, tally: &mut Tally) -> Finding {
    use std::fmt::Write as _;
    let verdict = judge(v, data.kernel, data.can_read_all);
    let (status, what) = status_of(v, &verdict, names, tally);
    // One string per line, written in place: a node with thousands of volumes builds
    // thousands of these (most are only shown at -v or in JSON).
    let mut text = short_name(v, names);
    let _ = if v.block_mode {
        let dev = v.block_dev.as_deref().unwrap_or("?");
        write!(text, " {what} — block device {dev}")
    } else {
        write!(text, " {what} — {} on {} ({})", v.fstype, v.source, v.key)
    };
    let mut f = Finding::new(status, text)
        .signal(signal_of(v, &verdict))
        .subject(with_node(
            volume_subject(v, names),
            data.node_name.as_deref(),
        ));
    if !v.pod_uids.is_empty() {
        let mut d = String::from("pods: ");
        for (i, u) in v.pod_uids.iter().enumerate() {
            if i > 0 {
                d.push_str(", ");
            }
            match names.pod(u) {
                Some(p) => {
                    let _ = write!(d, "{p} (UID {u})");
                }
                None => d.push_str(u),
            }
        }
        f.details.push(d);
    }
    for (mp, mro) in &v.mounts {
        f = f.detail(format!(
            "mount: {}{}",
            mp.display(),
            if *mro { " (ro bind)" } else { "" }
        ));
    }
    // The evidence (-v): what the verdict rests on.
    if !v.block_mode {
        f = f.evidence(format!(
            "filesystem options (superblock): {}",
            v.super_options
        ));
    }
    if let Some(p) = &v.probe {
        f = f.evidence(format!("probe of the mount point: {}", p.describe()));
    }
    if let Some(ro) = v.block_ro {
        f = f.evidence(format!(
            "block device read-only flag: {}",
            if ro { "set" } else { "not set" }
        ));
    }
    if status != Status::Ok {
        let still_writable = matches!(verdict, Verdict::Errors(_));
        f = f.next(next_step(
            v,
            status,
            still_writable,
            names,
            data.node_name.as_deref(),
        ));
    }
    f
}

/// The summary line over `n` volumes.
fn summary(t: &Tally, n: usize) -> String {
    let (ro, errs, unexplained) = (&t.ro, &t.errs, &t.unexplained);
    let summary = if n == 0 {
        "no PV mounts on this node".to_string()
    } else if !ro.is_empty() {
        let mut s = format!(
            "{} read-only: {}",
            plugin::count_of(ro.len(), n, "PV filesystem", "PV filesystems"),
            ro.join(", ")
        );
        if !errs.is_empty() {
            s.push_str(&format!(
                "; {} with recorded errors: {}",
                errs.len(),
                errs.join(", ")
            ));
        }
        s
    } else if !errs.is_empty() {
        format!(
            "{} {} recorded errors: {}",
            plugin::count_of(errs.len(), n, "PV filesystem", "PV filesystems"),
            if errs.len() == 1 { "has" } else { "have" },
            errs.join(", ")
        )
    } else if unexplained.is_empty() {
        format!(
            "{} writable",
            plugin::count(n, "PV filesystem", "PV filesystems")
        )
    } else {
        String::new()
    };
    if unexplained.is_empty() {
        return summary;
    }
    let u = format!(
        "{} read-only at the filesystem with no error recorded (intent unknown): {}",
        plugin::count_of(unexplained.len(), n, "PV filesystem", "PV filesystems"),
        unexplained.join(", ")
    );
    if summary.is_empty() {
        u
    } else {
        format!("{summary}; {u}")
    }
}

/// Mount points we had no right to probe: UNKNOWN, not a silent OK (a real alarm still
/// outranks it).
fn note_denied(r: &mut Report, data: &NodeData) {
    let n = data.volumes.len();
    let denied = data
        .volumes
        .iter()
        .filter(|v| {
            !data.can_read_all
                && matches!(&v.probe, Some(Outcome::Failed { errno, .. })
                    if matches!(errno, node::probe::Errno::EACCES | node::probe::Errno::EPERM))
        })
        .count();
    if denied == 0 {
        return;
    }
    r.raise(Status::Unknown);
    if r.status == Status::Unknown {
        r.summary = format!(
            "{} could not be probed: permission denied (grant CAP_DAC_READ_SEARCH); {}",
            plugin::count_of(denied, n, "PV mount point", "PV mount points"),
            r.summary
        );
    }
    r.notes.push(format!(
        "{} could not be probed: permission denied (grant CAP_DAC_READ_SEARCH to see an XFS shutdown or a hung mount)",
        plugin::count(denied, "PV mount point", "PV mount points")
    ));
}

/// The whole decision, volumes named with what `names` knows (pods, claims; its notes are
/// added). Pure.
pub fn evaluate_named(data: &NodeData, thresholds: &Thresholds, names: &Names) -> Report {
    let mut tally = Tally::default();
    let findings: Vec<Finding> = data
        .volumes
        .iter()
        .map(|v| volume_finding(v, data, names, &mut tally))
        .collect();
    let n = data.volumes.len();
    let mut status = thresholds.evaluate(tally.ro.len() as f64);
    if !tally.errs.is_empty() || !tally.unexplained.is_empty() {
        status = status.worst(Status::Warning);
    }
    let mut r = Report::new(status, summary(&tally, n)).unit("volume", "volumes");
    r.notes.extend(data.notes.iter().cloned());
    note_denied(&mut r, data);
    r.findings = findings;
    r.sort_findings();
    r.notes.extend(names.notes.iter().cloned());
    r.perf(Perfdata::new("pv_mounts", n as f64).min(0.0))
        .perf(
            Perfdata::new("ro_volumes", tally.ro.len() as f64)
                .thresholds(thresholds)
                .min(0.0),
        )
        .perf(Perfdata::new("error_volumes", tally.errs.len() as f64).min(0.0))
}

/// The node of a finding: this host's name ($NODE_NAME in container mode), whatever the pod lookup
/// found: a label that came and went (or changed spelling) with the lookup would reset the
/// finding's alert (issue 33).
fn with_node(s: plugin::Subject, host: Option<&str>) -> plugin::Subject {
    s.maybe(plugin::Subject::node, host)
}
