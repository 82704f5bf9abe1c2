//! The decision, pure: what each PV filesystem's state means, and the report over all of them.

use crate::gather::{NodeData, NodeFs, Volume};
use crate::text::{next_step, short_name, volume_subject};
use kube::checks::names::{Names, Wanted};
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
    /// Read-only on every mount with no error recorded (the superblock `ro`, or every mount a
    /// read-only bind): what a ReadOnlyMany volume or a `readOnly: true` claim looks like, and
    /// also what a pod that cannot write looks like. Only the API tells (issue 31): a
    /// ReadWriteOnce/ReadWriteMany/ReadWriteOncePod claim that no pod mounts `readOnly` is
    /// CRITICAL, ReadOnlyMany or `readOnly: true` OK, unknown WARNING.
    ReadOnlyEverywhere(String),
    /// Every mount a read-only bind over a writable filesystem: the kubelet binds a volume
    /// read-only only when the pod (`readOnly: true`) or the PV (`csi.readOnly`) asks for it, and
    /// no kernel error path makes a bind read-only: read-only on purpose, not counted writable.
    ReadOnlyBind,
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
        return Verdict::ReadOnlyEverywhere(
            "mounted read-only everywhere (the filesystem itself is ro), no error recorded".into(),
        );
    }
    if !any_rw_mount && !v.mounts.is_empty() {
        return Verdict::ReadOnlyBind;
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
            Verdict::Writable | Verdict::ReadOnlyBind
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

/// The PVs read-only this run, as the findings will say: the kernel's (or a dead mount's)
/// read-only, and a filesystem read-only without error that the API says is meant to be written.
/// Not those read-only on purpose nor those whose intent is unknown. Pure.
pub fn read_only_pvs(data: &NodeData, names: &Names) -> Vec<String> {
    let mut out = Vec::new();
    for v in &data.volumes {
        let ro = match judge(v, data.kernel, data.can_read_all) {
            Verdict::ReadOnly(_) => true,
            Verdict::ReadOnlyNoError(_) | Verdict::ReadOnlyEverywhere(_) => matches!(
                v.names.iter().find_map(|n| names.intent(n)),
                Some(kube::checks::names::Intent::Writable(_))
            ),
            _ => false,
        };
        if ro {
            out.extend(v.names.iter().cloned());
        }
    }
    out
}

/// The machine-readable kind of a verdict (the finding's `signal`). Pure.
pub fn signal_of(v: &Volume, verdict: &Verdict) -> &'static str {
    let has = |o: &str| v.super_options.split(',').any(|x| x == o);
    match verdict {
        Verdict::Writable => "writable",
        Verdict::ReadOnlyEverywhere(_) => "ro_everywhere",
        Verdict::ReadOnlyBind => "ro_by_design",
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
    /// Read-only on purpose (the API says so): neither writable nor an alarm.
    by_design: usize,
}

/// A volume's status and the words after its name; counts it in `tally`.
fn status_of(v: &Volume, verdict: &Verdict, names: &Names, tally: &mut Tally) -> (Status, String) {
    match verdict {
        Verdict::ReadOnly(why) => {
            tally.ro.push(short_name(v, names));
            (Status::Critical, format!("is read-only: {why}"))
        }
        Verdict::ReadOnlyNoError(why) | Verdict::ReadOnlyEverywhere(why) => {
            let everywhere = matches!(verdict, Verdict::ReadOnlyEverywhere(_));
            match v.names.iter().find_map(|n| names.intent(n)) {
                Some(kube::checks::names::Intent::ReadOnly(reason)) => {
                    tally.by_design += 1;
                    (
                        Status::Ok,
                        format!("is read-only on purpose: {why}; {reason}"),
                    )
                }
                Some(kube::checks::names::Intent::Writable(reason)) => {
                    tally.ro.push(short_name(v, names));
                    (
                        Status::Critical,
                        format!(
                            "is read-only: {why}; but {reason} and no pod mounts its claim readOnly: it is meant to be written, and its pods cannot write"
                        ),
                    )
                }
                None => {
                    tally.unexplained.push(short_name(v, names));
                    let shape = if everywhere {
                        "read-only everywhere with no error recorded"
                    } else {
                        "read-only at the filesystem with no error recorded"
                    };
                    (
                        Status::Warning,
                        format!(
                            "is {shape}: {why}; intent unknown (a ReadOnlyMany volume or a readOnly: true claim looks like this: the PV's access modes and the pods' claims tell, with API access or --pvs-json and --pods-json)"
                        ),
                    )
                }
            }
        }
        Verdict::Errors(why) => {
            tally.errs.push(short_name(v, names));
            (
                Status::Warning,
                format!("has recorded errors but is still writable: {why}"),
            )
        }
        Verdict::ReadOnlyBind => {
            tally.by_design += 1;
            (
                Status::Ok,
                "is read-only on purpose: every mount of it is a read-only bind (readOnly: true), the filesystem is writable".to_string(),
            )
        }
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
    // A flapping volume is a known-bad one: how often it was read-only before (--state-dir).
    if status == Status::Critical {
        if let Some(m) = &data.memory {
            let kind = node::history::Kind::ReadOnly;
            if let Some(h) = m.text_any(v.names.iter().map(String::as_str), kind) {
                let _ = write!(text, "; {h}");
            }
        }
    }
    // A read-only-everywhere volume the API says is read-only on purpose keeps the OK signal.
    let signal = match (&verdict, status) {
        (Verdict::ReadOnlyEverywhere(_), Status::Ok) => "ro_by_design",
        _ => signal_of(v, &verdict),
    };
    let mut f = Finding::new(status, text).signal(signal).subject(with_node(
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

/// `1 PV filesystem`, `2 PV filesystems`.
fn pv_fs(n: usize) -> String {
    plugin::count(n, "PV filesystem", "PV filesystems")
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
        // Read-only-by-design volumes are not "writable" (issue 31).
        let writable = n - t.by_design;
        match (writable, t.by_design) {
            (_, 0) => format!("{} writable", pv_fs(n)),
            (0, d) => format!("{} read-only on purpose", pv_fs(d)),
            (w, d) => format!("{}: {w} writable, {d} read-only on purpose", pv_fs(n)),
        }
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
    evaluate_shown(data, thresholds, names, true)
}

/// [`evaluate_named`]; with `ok_findings` false the OK volumes are counted but get no finding:
/// what the output will not print (plain output without `-v`, Prometheus) is not built — on a
/// node with thousands of healthy volumes, building their findings was a third of the run.
/// Pure.
pub(crate) fn evaluate_shown(
    data: &NodeData,
    thresholds: &Thresholds,
    names: &Names,
    ok_findings: bool,
) -> Report {
    let mut tally = Tally::default();
    let mut findings: Vec<Finding> = Vec::new();
    for v in &data.volumes {
        if !ok_findings {
            // The status alone, as `volume_finding` decides it, counted as it counts it.
            let verdict = judge(v, data.kernel, data.can_read_all);
            match verdict {
                Verdict::Writable => continue,
                Verdict::ReadOnlyBind => {
                    tally.by_design += 1;
                    continue;
                }
                _ => {}
            }
            let mut one = Tally::default();
            if status_of(v, &verdict, names, &mut one).0 == Status::Ok {
                // Read-only on purpose, as the API says: counted, not shown.
                tally.by_design += one.by_design;
                continue;
            }
        }
        findings.push(volume_finding(v, data, names, &mut tally));
    }
    let n = data.volumes.len();
    let mut status = thresholds.evaluate(tally.ro.len() as f64);
    if !tally.errs.is_empty() || !tally.unexplained.is_empty() {
        status = status.worst(Status::Warning);
    }
    let node_fs = node_fs_findings(data);
    let mut summary = summary(&tally, n);
    if !node_fs.is_empty() {
        // The node's own filesystem read-only outranks every volume: nothing new starts here.
        status = status.worst(Status::Critical);
        let mps: Vec<String> = data
            .node_fs
            .iter()
            .filter(|f| node_fs_readonly(f).is_some())
            .map(|f| f.mount_point.display().to_string())
            .collect();
        summary = format!(
            "node filesystem read-only ({}): no new pod can start on this node; {summary}",
            mps.join(", ")
        );
    }
    let node_fs_ro = node_fs.len();
    findings.extend(node_fs);
    let mut r = Report::new(status, summary).unit("volume", "volumes");
    r.notes.extend(data.notes.iter().cloned());
    if let Some(m) = &data.memory {
        r.notes.extend(m.notes.iter().cloned());
    }
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
        .perf(
            Perfdata::new("node_fs_ro", node_fs_ro as f64)
                .crit(plugin::Range::parse("0").ok().as_ref())
                .min(0.0),
        )
}

/// Why a filesystem the node itself needs is read-only, if it is (issue 31). Pure.
/// - the filesystem of a kubelet root: read-only in any way (the mount or the filesystem): the
///   kubelet can no longer create a pod's directories, so no new pod starts on the node;
/// - `/`: only the kernel's doing (`emergency_ro`, or `ro` at the filesystem under a read-write
///   mount: the error remount): Talos, Bottlerocket, Flatcar-like systems mount their root
///   read-only on purpose, mount and filesystem alike.
pub fn node_fs_readonly(f: &NodeFs) -> Option<String> {
    let has = |o: &str| f.super_options.split(',').any(|x| x == o);
    if has("emergency_ro") {
        return Some(
            "emergency_ro in the filesystem's options (the kernel stopped writes after an error)"
                .into(),
        );
    }
    if has("ro") && !f.mount_ro {
        return Some(
            "read-only at the filesystem under a read-write mount (the kernel's remount after an error)"
                .into(),
        );
    }
    if !f.kubelet_roots.is_empty() && (has("ro") || f.mount_ro) {
        return Some(if has("ro") {
            "mounted read-only".into()
        } else {
            "a read-only mount (the filesystem itself is rw)".into()
        });
    }
    None
}

/// The findings on the node's own filesystems that are read-only. Pure.
fn node_fs_findings(data: &NodeData) -> Vec<Finding> {
    use plugin::shell_quote as q;
    let node = data.node_name.as_deref();
    let mut out = Vec::new();
    for f in &data.node_fs {
        let Some(why) = node_fs_readonly(f) else {
            continue;
        };
        let mut holds: Vec<String> = f
            .kubelet_roots
            .iter()
            .map(|r| format!("the kubelet root {}", r.display()))
            .collect();
        if f.is_root {
            holds.insert(0, "/".into());
        }
        let mp = f.mount_point.to_string_lossy();
        let text = format!(
            "node filesystem read-only: {} on {} ({}, mounted at {mp}): {why}; no new pod can start on this node",
            holds.join(" and "),
            f.source,
            f.fstype
        );
        let fsck = if f.fstype == "xfs" {
            "xfs_repair"
        } else {
            "fsck"
        };
        let node_word = node.map(q).unwrap_or_else(|| "NODE".into());
        let next = format!(
            "`kubectl cordon {node_word}`; on that node: `findmnt -o TARGET,SOURCE,FSTYPE,OPTIONS {}` and `journalctl -k --grep error`; then drain it, reboot, and {fsck} {} if the kernel recorded an error; then `kubectl uncordon {node_word}`",
            q(&mp),
            q(&f.source)
        );
        out.push(
            Finding::new(Status::Critical, text)
                .signal("node_fs_readonly")
                .subject(
                    plugin::Subject::new()
                        .maybe(plugin::Subject::node, node)
                        .device(f.source.strip_prefix("/dev/").unwrap_or(&f.source))
                        .mount(mp.to_string()),
                )
                .next(next),
        );
    }
    out
}

/// The node of a finding: this host's name ($NODE_NAME in container mode), whatever the pod lookup
/// found: a label that came and went (or changed spelling) with the lookup would reset the
/// finding's alert (issue 33).
fn with_node(s: plugin::Subject, host: Option<&str>) -> plugin::Subject {
    s.maybe(plugin::Subject::node, host)
}
