//! Everything the check reads, bounded by the deadline: the mount table, vol_data.json, the
//! cluster view and the probes; the result is plain [`Data`] for `evaluate`.

use crate::cluster::{self, ClusterView};
use crate::identity::{identify, selected};
use crate::Opts;
use node::kubelet::{Kind, VolData};
use node::probe::Outcome;
use plugin::deadline::Reserve;
use plugin::{Ctx, Unknown};
use std::path::PathBuf;
use std::time::Duration;

/// Probes running at once at most; more mounts than this are probed in rounds.
pub const MAX_PARALLEL: usize = 128;

/// One CSI mount from the mount table.
#[derive(Debug, Clone, PartialEq)]
pub struct CsiMount {
    /// The mount point as the host sees it.
    pub mount_point: PathBuf,
    pub kind: Kind,
    pub major: u32,
    pub minor: u32,
    /// The mount source (`/dev/longhorn/pvc-…`, `server:/export`, …) and filesystem type.
    pub source: String,
    pub fstype: String,
    pub vol_data: Option<VolData>,
    /// vol_data.json was there but could not be read or parsed.
    pub vol_data_error: Option<String>,
    /// Kept by --include/--exclude (only selected mounts are probed and reported).
    pub selected: bool,
    /// The probe's answer; `None` when not probed (not selected).
    pub probe: Option<Outcome>,
}

/// Everything gather found.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub roots: Vec<PathBuf>,
    /// Every CSI mount under the roots (also the unselected ones: they still publish staging mounts).
    pub mounts: Vec<CsiMount>,
    pub cluster: ClusterView,
    /// The probe timeout actually used (--probe-timeout capped by the time left).
    pub probe_timeout: Duration,
    /// Notes of the gathering (a stuck probe that could not be remembered).
    pub notes: Vec<String>,
}

/// How long the API may take: what is left, minus the probes' time and a reserve, but at least
/// half of what is left. A slow API server must not squeeze the probes into false "hung" answers.
pub fn api_budget(remaining: Duration, probe_timeout: Duration) -> Duration {
    Reserve::share(
        2,
        Duration::ZERO,
        probe_timeout + Duration::from_millis(500),
    )
    .left(remaining)
}

/// All I/O: mount table, vol_data.json files, cluster view, probes. Bounded by the deadline.
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let host = opts.host.host();
    // Privilege (cap_dac_read_search) serves the node's own kubelet roots and the mount points of
    // its own mount table only: never a root or a mount table the caller named.
    let own = opts.mountinfo.is_own(&host)
        && node::kubelet::roots_are_own(&opts.kubelet_root.kubelet_root, &host);
    let roots = kubelet_roots(opts, &host, own, ctx)?;
    let mut mounts = csi_mounts(opts, &host, &roots, ctx)?;
    read_vol_data(&host, own, &mut mounts, ctx)?;
    let cluster = cluster::view(opts, &host, &mounts, ctx)?;

    let ids = identify(&mounts, cluster.pvs.as_deref());
    for (m, id) in mounts.iter_mut().zip(&ids) {
        m.selected = selected(m, id, &opts.filter.include, &opts.filter.exclude);
    }
    let targets: Vec<usize> = (0..mounts.len()).filter(|&i| mounts[i].selected).collect();
    // A filter that matched nothing must not read as "no CSI mounts".
    if targets.is_empty() && !mounts.is_empty() && opts.filter.is_set() {
        return Err(Unknown(format!(
            "{} matched none of the {} CSI mounts under {}",
            opts.filter.describe(),
            mounts.len(),
            shown(&roots)
        )));
    }
    let (probe_timeout, notes) = probe(opts, &host, own, &mut mounts, &targets, ctx);
    Ok(Data {
        roots,
        mounts,
        cluster,
        probe_timeout,
        notes,
    })
}

fn shown(roots: &[PathBuf]) -> String {
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kubelet roots, refused when this process may not list them (with `own`: at the binary's
/// privilege).
fn kubelet_roots(
    opts: &Opts,
    host: &node::Host,
    own: bool,
    ctx: &Ctx,
) -> Result<Vec<PathBuf>, Unknown> {
    ctx.stage("looking for the kubelet root");
    let roots = node::privilege::elevated_if(own, || -> Result<Vec<PathBuf>, Unknown> {
        let roots = opts.kubelet_root.resolve(host)?;
        // Without CAP_DAC_READ_SEARCH every probe below the root-only pods/ directory fails with
        // EACCES, which would read as "corrupted": refuse to guess.
        node::args::check_listable(host, &roots, &["", "pods", "plugins/kubernetes.io/csi"])?;
        Ok(roots)
    })?;
    ctx.debug(format!("kubelet roots: {}", shown(&roots)));
    Ok(roots)
}

/// The CSI mounts of the mount table under `roots`, once per mount point (the last, topmost
/// entry of a stack wins).
fn csi_mounts(
    opts: &Opts,
    host: &node::Host,
    roots: &[PathBuf],
    ctx: &Ctx,
) -> Result<Vec<CsiMount>, Unknown> {
    let mi_path = opts.mountinfo.path(host);
    ctx.stage(format!("reading {}", mi_path.display()));
    let table = node::mountinfo::read(&mi_path)?;
    ctx.debug(format!("{}: {} mounts", mi_path.display(), table.len()));
    let mut mounts: Vec<CsiMount> = Vec::new();
    for m in &table {
        let Some(kp) = node::kubelet::classify(&m.mount_point, roots) else {
            continue;
        };
        // CSI mounts, and in-tree network volumes (NFS, iSCSI, RBD, …), which hang on a dead
        // server just the same (issue 31).
        if !kp.is_csi() && kp.in_tree_plugin().is_none() {
            continue;
        }
        let cm = CsiMount {
            mount_point: m.mount_point.clone(),
            kind: kp.kind,
            major: m.major,
            minor: m.minor,
            source: m.source.clone(),
            fstype: m.fstype.clone(),
            vol_data: None,
            vol_data_error: None,
            selected: true,
            probe: None,
        };
        match mounts.iter_mut().find(|x| x.mount_point == cm.mount_point) {
            Some(x) => *x = cm,
            None => mounts.push(cm),
        }
    }
    Ok(mounts)
}

/// The vol_data.json beside each mount; one that cannot be read for lack of privilege is UNKNOWN,
/// any other failure a note on that mount.
fn read_vol_data(
    host: &node::Host,
    own: bool,
    mounts: &mut [CsiMount],
    ctx: &Ctx,
) -> Result<(), Unknown> {
    ctx.stage(format!(
        "reading vol_data.json of {} CSI mounts",
        mounts.len()
    ));
    node::privilege::elevated_if(own, || -> Result<(), Unknown> {
        for m in mounts.iter_mut() {
            match node::kubelet::read_vol_data(host, &m.mount_point) {
                Ok(v) => m.vol_data = v,
                Err(e) if e.ends_with("(EACCES)") => {
                    return Err(format!(
                        "cannot read {e}: {}",
                        node::privilege::advice(
                            "CAP_DAC_READ_SEARCH",
                            "the kubelet's directories are root-only",
                            own
                        )
                    )
                    .into())
                }
                Err(e) => m.vol_data_error = Some(e),
            }
        }
        Ok(())
    })
}

/// Probe the `targets` concurrently within the time left; returns the probe timeout used and the
/// notes of the probe memory (a stuck probe that could not be remembered).
fn probe(
    opts: &Opts,
    host: &node::Host,
    own: bool,
    mounts: &mut [CsiMount],
    targets: &[usize],
    ctx: &Ctx,
) -> (Duration, Vec<String>) {
    let paths: Vec<(PathBuf, String)> = targets
        .iter()
        .map(|&i| {
            let m = &mounts[i];
            (
                host.mount_path(&m.mount_point),
                format!("{}:{}", m.major, m.minor),
            )
        })
        .collect();
    let probe_timeout = probe_budget(opts.probe.probe_timeout, ctx.remaining(), paths.len());
    if probe_timeout < opts.probe.probe_timeout {
        ctx.debug(format!(
            "probe timeout capped at {} to answer within -t",
            plugin::fmt_duration(probe_timeout)
        ));
    }
    if paths.is_empty() {
        return (probe_timeout, Vec::new());
    }
    ctx.stage(format!(
        "probing {} CSI mounts (up to {} each)",
        paths.len(),
        plugin::fmt_duration(probe_timeout)
    ));
    let memory = node::probe::memory_for(
        opts.run_dir.run_dir.as_deref(),
        opts.host.host_root.as_deref(),
    );
    let (outcomes, notes) = node::privilege::elevated_if(own, || {
        node::probe::probe_remembered(
            &paths,
            probe_timeout,
            paths.len().min(MAX_PARALLEL),
            memory.as_ref().map_err(|e| e.as_str()),
        )
    });
    for (&i, o) in targets.iter().zip(outcomes) {
        ctx.debug(format!(
            "probe {}: {}",
            mounts[i].mount_point.display(),
            o.describe()
        ));
        mounts[i].probe = Some(o);
    }
    (probe_timeout, notes)
}

/// The per-probe timeout: --probe-timeout, but small enough that every round of probes ends
/// before the deadline with a reserve for killing, reaping and printing.
pub fn probe_budget(wanted: Duration, remaining: Duration, probes: usize) -> Duration {
    let rounds = probes.div_ceil(MAX_PARALLEL).max(1) as u32;
    let per_round =
        Reserve::share(10, Duration::from_millis(300), Duration::MAX).left(remaining) / rounds;
    wanted.min(per_round).max(Duration::from_millis(50))
}
