//! check_ro_pvc_mounts: PersistentVolume filesystems that can no longer be written.
//!
//! gather → evaluate → render. A PV filesystem counts as read-only when the *filesystem* can no
//! longer be written, whatever way the running kernel shows it:
//! - `emergency_ro` in the super options (ext4, Linux ≥ 6.15 and 6.14.y backports);
//! - `ro` in the super options while a mount of it is `rw` (ext4 errors=remount-ro or a journal
//!   abort up to 6.11: the kernel flips the superblock, never the per-mount flags);
//! - `ro` in the super options of every mount *and* recorded ext4 errors;
//! - the mount point no longer answers (`stat` EIO: XFS shut down; EROFS; or no answer at all);
//! - ext4 recorded errors on 6.12–6.14, which show no marker at all (reported as presumed read-only);
//! - a block-mode volume whose device has its read-only flag set.
//!
//! A read-only *bind* (per-mount `ro` over a `rw` superblock: a `readOnly: true` volume) is not
//! an alarm. Recorded ext4 errors on a filesystem that is still writable are a WARNING.

use clap::Parser;
use kube::names::{Names, Wanted};
use node::kubelet::{self, Kind};
use node::probe::{self, Outcome};
use node::{fsstate, Mount};
use plugin::{
    Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds, Unknown,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "check_ro_pvc_mounts",
    version,
    about = "Alert on PersistentVolume filesystems that can no longer be written",
    long_about = "Alert on PersistentVolume filesystems that can no longer be written (ext4 remounted \
read-only or in emergency read-only, XFS shut down, volumes that no longer answer), without alarming \
on volumes mounted readOnly on purpose.\n\nExit: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
    mut_arg("include", |a| a.help("Only mount points matching REGEX (repeatable: any of them)")),
    mut_arg("exclude", |a| a.help("Skip mount points matching REGEX, even when --include matches too (repeatable)"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Range on the number of read-only PV filesystems that raises WARNING
    #[arg(
        short = 'w',
        long = "warning",
        value_name = "RANGE",
        default_value = "0",
        allow_hyphen_values = true,
        value_parser = plugin::args::range
    )]
    pub warning: Range,

    /// Range on the number of read-only PV filesystems that raises CRITICAL
    #[arg(
        short = 'c',
        long = "critical",
        value_name = "RANGE",
        default_value = "0",
        allow_hyphen_values = true,
        value_parser = plugin::args::range
    )]
    pub critical: Range,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub sys: node::SysArg,

    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub run_dir: node::RunDirArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    #[command(flatten)]
    pub filter: node::FilterArgs,

    #[command(flatten)]
    pub probe: node::ProbeTimeoutArg,

    /// Names an operator knows: pods and claims of the volumes in non-OK findings
    #[command(flatten)]
    pub names: kube::NamesArgs,
}

/// One PV filesystem (or block device) as found on the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volume {
    /// `maj:min` of the filesystem, or `block:<dev>` for block-mode volumes.
    pub key: String,
    pub names: BTreeSet<String>,
    pub fstype: String,
    pub source: String,
    pub block_dev: Option<String>,
    /// Options of the filesystem itself (the superblock), comma-separated as in mountinfo.
    pub super_options: String,
    /// (mount point, per-mount read-only)
    pub mounts: Vec<(PathBuf, bool)>,
    pub pod_uids: BTreeSet<String>,
    pub block_mode: bool,
    pub ext4_errors: Option<fsstate::Ext4Errors>,
    pub block_ro: Option<bool>,
    pub probe: Option<Outcome>,
}

/// Everything gathered from the node.
#[derive(Debug, Clone, Default)]
pub struct NodeData {
    pub volumes: Vec<Volume>,
    /// The probes could read any directory (CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE): an
    /// EACCES then means a broken mount (a FUSE daemon refusing), not our lack of rights.
    pub can_read_all: bool,
    pub kernel: Option<(u32, u32, u32)>,
    pub roots: Vec<PathBuf>,
    /// This node's name (for the next-step hints).
    pub node_name: Option<String>,
    /// Notes of the gathering (a stuck probe that could not be remembered).
    pub notes: Vec<String>,
}

/// Group the kubelet's volume mounts into PV filesystems. Pure.
pub fn group(mounts: Vec<Mount>, roots: &[PathBuf], filter: &node::FilterArgs) -> Vec<Volume> {
    let mut by_key: BTreeMap<String, Volume> = BTreeMap::new();
    for m in mounts {
        let Some(kp) = kubelet::classify(&m.mount_point, roots) else {
            continue;
        };
        if filter.is_set() && !filter.selects([m.mount_point.to_string_lossy().as_ref()]) {
            continue;
        }
        let block_mode = matches!(kp.kind, Kind::PodBlock { .. } | Kind::BlockStaging { .. })
            && matches!(m.fstype.as_str(), "devtmpfs" | "tmpfs" | "udev");
        let key = if block_mode {
            format!("block:{}", m.root.trim_start_matches('/'))
        } else {
            m.dev()
        };
        let v = by_key.entry(key.clone()).or_insert_with(|| Volume {
            key,
            fstype: m.fstype.clone(),
            source: m.source.clone(),
            block_mode,
            block_dev: block_mode.then(|| m.root.trim_start_matches('/').to_string()),
            ..Default::default()
        });
        if let Some(n) = kp.volume_name() {
            if !v.names.contains(n) {
                v.names.insert(n.to_string());
            }
        }
        if let Some(u) = kp.pod_uid() {
            if !v.pod_uids.contains(u) {
                v.pod_uids.insert(u.to_string());
            }
        }
        // The super options are the filesystem's: the same on every mount, but take the
        // latest-listed in case the table was read mid-change.
        let ro = m.mount_ro();
        v.super_options = m.super_options;
        v.mounts.push((m.mount_point, ro));
    }
    by_key.into_values().collect()
}

/// Without the right to look into the kubelet's directories every probe would fail with EACCES:
/// say what is missing instead of reporting every volume as broken.
fn check_access(roots: &[PathBuf], host: &node::Host) -> Result<(), Unknown> {
    for r in roots {
        let pods = host.mount_path(r.join("pods"));
        if let Err(e) = std::fs::read_dir(&pods) {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                return Err(Unknown(format!(
                    "cannot read {}: {}: run as root or grant CAP_DAC_READ_SEARCH (setcap cap_dac_read_search+ep)",
                    r.join("pods").display(),
                    node::errtext(&e)
                )));
            }
        }
    }
    Ok(())
}

/// Read everything the decision needs, under the deadline.
pub fn gather(o: &Opts, ctx: &Ctx) -> Result<NodeData, Unknown> {
    let host = o.host.host();
    if let Some(problem) = host.access_problem() {
        return Err(Unknown(problem));
    }
    let sys = o.sys.path(&host);
    // Privilege (cap_dac_read_search) serves the node's own kubelet roots and the mount points of
    // its own mount table only: never a root or a mount table the caller named.
    let own = o.mountinfo.mountinfo.is_none()
        && kubelet::roots_are_own(&o.kubelet_root.kubelet_root, &host);
    let roots = node::privilege::elevated_if(own, || o.kubelet_root.resolve(&host))?;
    ctx.debug(format!(
        "kubelet roots: {}",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    node::privilege::elevated_if(own, || check_access(&roots, &host))?;
    ctx.stage("reading the mount table");
    let mi = o.mountinfo.path(&host);
    ctx.debug(format!("mount table: {}", mi.display()));
    // Only mounts below a kubelet root matter; every line is still validated.
    let prefixes: Vec<String> = roots
        .iter()
        .map(|r| {
            format!(
                "{}/",
                node::mountinfo::escape(&r.to_string_lossy()).trim_end_matches('/')
            )
        })
        .collect();
    let mounts = node::mountinfo::read_with(&mi, |mp| {
        prefixes.iter().any(|p| mp.starts_with(p.as_str()))
    })
    .map_err(Unknown)?;
    let under_roots = if o.filter.is_set() {
        mounts
            .iter()
            .filter(|m| kubelet::classify(&m.mount_point, &roots).is_some())
            .count()
    } else {
        0
    };
    let mut volumes = group(mounts, &roots, &o.filter);
    // A filter that matched nothing must not read as "no PV mounts".
    if volumes.is_empty() && under_roots > 0 {
        return Err(Unknown(format!(
            "{} matched none of the {under_roots} mounts under the kubelet root(s)",
            o.filter.describe()
        )));
    }

    ctx.stage("reading filesystem error state from sysfs");
    let ext4 = fsstate::Ext4Index::read(&sys);
    for v in &mut volumes {
        if v.block_mode {
            if let Some(dev) = &v.block_dev {
                v.block_ro = fsstate::block_readonly(&sys, dev);
            }
            continue;
        }
        if ext4.is_empty() || !matches!(v.fstype.as_str(), "ext4" | "ext3" | "ext2") {
            continue;
        }
        let (maj, min) = v.key.split_once(':').unwrap_or(("0", "0"));
        let (maj, min): (u32, u32) = (maj.parse().unwrap_or(0), min.parse().unwrap_or(0));
        if let Some(name) = ext4.name(maj, min, &v.source) {
            v.ext4_errors = fsstate::ext4_errors(&sys, name);
        }
    }

    ctx.stage("probing PV mount points");
    let budget = ctx.remaining().saturating_sub(Duration::from_millis(300));
    let timeout = o
        .probe
        .probe_timeout
        .min(budget)
        .max(Duration::from_millis(50));
    let targets: Vec<(PathBuf, String)> = volumes
        .iter()
        .map(|v| {
            // Probe a staging mount when there is one (it exists as long as any pod uses the
            // volume), otherwise the first mount.
            let mp = v
                .mounts
                .iter()
                .find(|(p, _)| p.ends_with("globalmount"))
                .unwrap_or(&v.mounts[0])
                .0
                .clone();
            (host.mount_path(mp), v.key.clone())
        })
        .collect();
    let memory = probe::memory_for(o.run_dir.run_dir.as_deref(), o.host.host_root.as_deref());
    let (outcomes, notes) = node::privilege::elevated_if(own, || {
        probe::probe_remembered(
            &targets,
            timeout,
            16,
            memory.as_ref().map_err(|e| e.as_str()),
        )
    });
    for (v, out) in volumes.iter_mut().zip(outcomes) {
        v.probe = Some(out);
    }
    let kernel = host
        .kernel_release()
        .and_then(|r| node::host::parse_kernel_version(&r));
    ctx.debug(format!("kernel: {kernel:?}"));
    // What the probes ran with: the binary's own privilege for the node's own roots.
    let can_read_all = node::privilege::elevated_if(own, || {
        node::host::has_capability(2) || node::host::has_capability(1)
    });
    Ok(NodeData {
        volumes,
        kernel,
        roots,
        can_read_all,
        node_name: host.hostname(),
        notes,
    })
}

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

/// The decision for one volume. Pure.
pub fn judge(v: &Volume, kernel: Option<(u32, u32, u32)>, can_read_all: bool) -> Verdict {
    let has = |o: &str| v.super_options.split(',').any(|x| x == o);
    let errors = v.ext4_errors.as_ref().filter(|e| e.count > 0);
    let err_text = errors.map(|e| {
        let mut s = format!("{} ext4 error(s) recorded", e.count);
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

fn short_name(v: &Volume, names: &Names) -> String {
    if v.names.is_empty() {
        format!("volume on {}", v.source)
    } else {
        v.names
            .iter()
            .map(|n| names.volume(n, v.pod_uids.iter().map(String::as_str)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The next step for a non-OK volume, paste-safe: cordon the node so nothing new lands on it,
/// delete the pods so they remount elsewhere, and find what broke under the filesystem.
fn next_step(v: &Volume, status: Status, names: &Names, node: Option<&str>) -> String {
    use plugin::shell_quote as q;
    let node = node.map(q).unwrap_or_else(|| "<this node>".into());
    let pods: Vec<String> = v
        .pod_uids
        .iter()
        .filter_map(|u| names.pod(u))
        .map(|p| match p.split_once('/') {
            Some((ns, name)) => format!("kubectl delete pod -n {} {}", q(ns), q(name)),
            None => format!("kubectl delete pod {}", q(&p)),
        })
        .collect();
    let delete = if pods.is_empty() {
        if v.pod_uids.is_empty() {
            "delete the pods using it so they remount elsewhere".to_string()
        } else {
            format!(
                "delete the pods using it so they remount elsewhere (pod UIDs {}: `kubectl get pods -A -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid`)",
                v.pod_uids.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    } else {
        format!("`{}` so it remounts elsewhere", pods.join("; "))
    };
    let under = if v.fstype == "xfs" {
        "the kernel's account: check_storage_kernel_errors, `dmesg | grep -i xfs`"
    } else {
        "the kernel's account: check_storage_kernel_errors, `dmesg | grep -iE 'ext4|jbd2|I/O error'`"
    };
    if status == Status::Critical {
        format!(
            "next: `kubectl cordon {node}`, then {delete}; if the volume is iSCSI, find the session that dropped (check_iscsi_sessions, `iscsiadm -m session -P 3`); {under}"
        )
    } else {
        format!(
            "next: check the volume's access modes (`kubectl get pv {} -o jsonpath='{{.spec.accessModes}}'`): ReadOnlyMany is intent; otherwise `kubectl cordon {node}`, then {delete}; {under}",
            v.names.iter().next().map(|n| q(n)).unwrap_or_else(|| "<pv>".into())
        )
    }
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

/// What a volume's finding is about: PV, claim and pod as far as `names` knows them, the
/// device (block device or mount source) and the first mount point.
fn volume_subject(v: &Volume, names: &Names) -> plugin::Subject {
    let pv = v.names.iter().next().map(String::as_str).unwrap_or("");
    let device = match &v.block_dev {
        Some(d) if v.block_mode => d.as_str(),
        _ => v.source.as_str(),
    };
    names
        .subject(pv, v.pod_uids.iter().map(String::as_str))
        .device(device.strip_prefix("/dev/").unwrap_or(device))
        .maybe(
            plugin::Subject::mount,
            v.mounts.first().map(|(m, _)| m.to_string_lossy()),
        )
}

/// The whole decision without names. Pure.
pub fn evaluate(data: &NodeData, thresholds: &Thresholds) -> Report {
    evaluate_named(data, thresholds, &Names::default())
}

/// The whole decision, volumes named with what `names` knows (pods, claims; its notes are
/// added). Pure.
pub fn evaluate_named(data: &NodeData, thresholds: &Thresholds, names: &Names) -> Report {
    let mut ro = Vec::new();
    let mut errs = Vec::new();
    let mut unexplained = Vec::new();
    let mut findings = Vec::new();
    for v in &data.volumes {
        let verdict = judge(v, data.kernel, data.can_read_all);
        let (status, what) = match &verdict {
            Verdict::ReadOnly(why) => {
                ro.push(short_name(v, names));
                (Status::Critical, format!("is read-only: {why}"))
            }
            Verdict::ReadOnlyNoError(why) => match v.names.iter().find_map(|n| names.intent(n)) {
                Some(kube::names::Intent::ReadOnly(reason)) => (
                    Status::Ok,
                    format!("is read-only on purpose: {why}; {reason}"),
                ),
                Some(kube::names::Intent::Writable(reason)) => {
                    ro.push(short_name(v, names));
                    (
                        Status::Critical,
                        format!("is read-only: {why}; but {reason}: it is meant to be written"),
                    )
                }
                None => {
                    unexplained.push(short_name(v, names));
                    (
                            Status::Warning,
                            format!(
                                "is read-only at the filesystem with no error recorded: {why}; intent unknown (a ReadOnlyMany volume looks like this: the PV's access modes tell, with API access or --pvs-json)"
                            ),
                        )
                }
            },
            Verdict::Errors(why) => {
                errs.push(short_name(v, names));
                (
                    Status::Warning,
                    format!("has recorded errors but is still writable: {why}"),
                )
            }
            Verdict::ReadOnlyByDesign => {
                (Status::Ok, "is mounted read-only on purpose".to_string())
            }
            Verdict::Writable => (Status::Ok, "is writable".to_string()),
        };
        // One string per line, written in place: a node with thousands of volumes builds
        // thousands of these (most are only shown at -v or in JSON).
        use std::fmt::Write as _;
        let mut text = short_name(v, names);
        let _ = if v.block_mode {
            let dev = v.block_dev.as_deref().unwrap_or("?");
            write!(text, " {what} — block device {dev}")
        } else {
            write!(text, " {what} — {} on {} ({})", v.fstype, v.source, v.key)
        };
        let mut f = Finding::new(status, text)
            .signal(signal_of(v, &verdict))
            .subject(volume_subject(v, names));
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
        if status != Status::Ok {
            f = f.detail(next_step(v, status, names, data.node_name.as_deref()));
        }
        findings.push(f);
    }
    let n = data.volumes.len();
    let ro_status = thresholds.evaluate(ro.len() as f64);
    let mut status = ro_status;
    if !errs.is_empty() {
        status = status.worst(Status::Warning);
    }
    let summary = if n == 0 {
        "no PV mounts on this node".to_string()
    } else if !ro.is_empty() {
        let mut s = format!(
            "{} of {} PV filesystems read-only: {}",
            ro.len(),
            n,
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
            "{} of {} PV filesystems have recorded errors: {}",
            errs.len(),
            n,
            errs.join(", ")
        )
    } else if unexplained.is_empty() {
        format!("{n} PV filesystems writable")
    } else {
        String::new()
    };
    let summary = if unexplained.is_empty() {
        summary
    } else {
        let u = format!(
            "{} of {} PV filesystems read-only at the filesystem with no error recorded (intent unknown): {}",
            unexplained.len(),
            n,
            unexplained.join(", ")
        );
        if summary.is_empty() {
            u
        } else {
            format!("{summary}; {u}")
        }
    };
    if !unexplained.is_empty() {
        status = status.worst(Status::Warning);
    }
    let mut r = Report::new(status, summary).unit("volume", "volumes");
    r.notes.extend(data.notes.iter().cloned());
    let denied = data
        .volumes
        .iter()
        .filter(|v| {
            !data.can_read_all
                && matches!(&v.probe, Some(Outcome::Failed { errno, .. })
                    if matches!(errno, node::probe::Errno::EACCES | node::probe::Errno::EPERM))
        })
        .count();
    if denied > 0 {
        // Not a silent OK: what could not be looked at is UNKNOWN (a real alarm still outranks it).
        r.raise(Status::Unknown);
        if r.status == Status::Unknown {
            r.summary = format!(
                "{denied} of {n} PV mount points could not be probed: permission denied (grant CAP_DAC_READ_SEARCH); {}",
                r.summary
            );
        }
        r.notes.push(format!(
            "{denied} PV mount point(s) could not be probed: permission denied (grant CAP_DAC_READ_SEARCH to see an XFS shutdown or a hung mount)"
        ));
    }
    r.findings = findings;
    r.sort_findings();
    r.notes.extend(names.notes.iter().cloned());
    r.perf(Perfdata::new("pv_mounts", n as f64).min(0.0))
        .perf(
            Perfdata::new("ro_volumes", ro.len() as f64)
                .thresholds(thresholds)
                .min(0.0),
        )
        .perf(Perfdata::new("error_volumes", errs.len() as f64).min(0.0))
}

impl Check for Opts {
    const NAME: &'static str = "RO_PVC_MOUNTS";
    const BINARY: &'static str = "check_ro_pvc_mounts";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.names.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let data = gather(self, ctx)?;
        // Names only after the node's own work, and only for what will be reported.
        let names = kube::names::resolve(&self.names, &wanted(&data), ctx);
        ctx.stage("evaluating");
        let t = Thresholds::new(Some(self.warning.clone()), Some(self.critical.clone()));
        let report = evaluate_named(&data, &t, &names);
        // The worker exits as soon as the report is sent: freeing thousands of volumes' small
        // allocations one by one would be most of a large node's run time, for nothing.
        std::mem::forget(data);
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
