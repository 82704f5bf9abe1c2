//! check_stale_csi_mounts: find the CSI mounts that deadlock the kubelet.
//!
//! A deleted PV whose device mount stayed behind blocks the kubelet's serialized volume-operation
//! queue, and every pod that needs a CSI volume on that node waits in ContainerCreating for days
//! (incident "Stale CSI Mount — Workspace Stuck Pending"). This check walks every CSI mount under
//! the kubelet root(s) and classifies it:
//!
//! - corrupted: a probe fails with ENOTCONN, ESTALE, EIO, EACCES or EHOSTDOWN → CRITICAL
//! - hung: the probe does not answer within `--probe-timeout` → CRITICAL
//! - orphaned pod mount: the pod UID is not a pod of this node → CRITICAL (needs the pod list)
//! - stale staging mount: its PV is gone, or it has no VolumeAttachment to this node → CRITICAL
//!   (needs the PV list)
//! - unpublished staging mount: no pod mount shares its device or PV → WARNING
//!
//! gather (mount table, vol_data.json, cluster view, bounded-time probes) → [`evaluate`] (pure) → render.

pub mod cluster;

use clap::Parser;
use cluster::{ClusterView, Objects};
use node::kubelet::{Kind, VolData};
use node::probe::Outcome;
use plugin::{
    Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds, Unknown,
};
use regex::Regex;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Probes running at once at most; more mounts than this are probed in rounds.
const MAX_PARALLEL: usize = 128;

const LONG_ABOUT: &str = "\
Find the CSI mounts that deadlock the kubelet.

Every CSI mount under the kubelet root(s) - staging (globalmount, both path schemes), pod publish \
mounts and block volumeDevices - is probed (stat, statfs, readdir) concurrently, a probe that does \
not answer being abandoned, and classified:
  corrupted   the probe fails with ENOTCONN, ESTALE, EIO, EACCES or EHOSTDOWN     CRITICAL
  hung        no answer within --probe-timeout                                  CRITICAL
  orphaned    a pod mount whose pod is not a pod of this node                   CRITICAL
  stale       a staging mount whose PV is gone or has no VolumeAttachment here  CRITICAL
  unpublished a staging mount no pod mount shares (device or PV)                WARNING
The pod and PV cross-checks need the cluster view: from the API (credentials: --kubeconfig or \
the usual lookup), or from --pods-json (kubectl get pods -A -o json) and --pvs-json (kubectl get \
pv,volumeattachments,csidrivers -o json). Without credentials the summary says the cross-checks were skipped; a failing API is \
UNKNOWN unless a mount is worse. -w/-c ranges on the number of stale mounts replace the per-class \
states.";

#[derive(Parser, Debug)]
#[command(
    name = "check_stale_csi_mounts",
    version,
    about = "Find corrupted, hung, orphaned and stale CSI mounts under the kubelet root",
    long_about = LONG_ABOUT,
    mut_arg("pods_json", |a| a.help("Pods as `kubectl get pods -A -o json` prints them (all nodes are fine) instead of the API; `-` reads stdin")),
    mut_arg("pvs_json", |a| a.help("PVs, and VolumeAttachments/CSIDrivers in the same List, as `kubectl get pv,volumeattachments,csidrivers -o json` prints them, instead of the API; `-` reads stdin")),
    mut_arg("include", |a| a.help("Check only mounts whose mount point, PV or driver matches REGEX (repeatable)")),
    mut_arg("exclude", |a| a.help("Skip mounts whose mount point, PV or driver matches REGEX (repeatable)"))
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Range on the number of stale mounts for WARNING (with -w/-c the count decides the state)
    #[arg(short = 'w', long = "warning", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub warning: Option<Range>,

    /// Range on the number of stale mounts for CRITICAL
    #[arg(short = 'c', long = "critical", value_name = "RANGE", allow_hyphen_values = true, value_parser = plugin::args::range)]
    pub critical: Option<Range>,

    #[command(flatten)]
    pub mountinfo: node::MountinfoArg,

    #[command(flatten)]
    pub kubelet_root: node::KubeletRootArg,

    #[command(flatten)]
    pub probe: node::ProbeTimeoutArg,

    #[command(flatten)]
    pub api: kube::ApiArgs,

    #[command(flatten)]
    pub node: kube::NodeArg,

    /// `--host-root` (container mode: the mount table and mount points are read through it).
    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub pods: kube::PodsJsonArg,

    #[command(flatten)]
    pub pvs: kube::PvsJsonArg,

    #[command(flatten)]
    pub filter: node::FilterArgs,

    #[command(flatten)]
    pub run_dir: node::RunDirArg,
}

impl Check for Opts {
    const NAME: &'static str = "STALE_CSI_MOUNTS";
    const BINARY: &'static str = "check_stale_csi_mounts";

    fn common(&self) -> &CommonArgs {
        &self.common
    }

    fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin() || self.pvs.reads_stdin()
    }

    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let data = gather(self, ctx)?;
        Ok(evaluate(&data, self))
    }
}

// ---- data ----------------------------------------------------------------------------------

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

/// Who a mount belongs to, as far as the path, vol_data.json, the other mounts and the cluster tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub pv: Option<String>,
    /// Where the PV name came from (`path`, `vol_data.json`, `pod mount`, `PV list`, `volumeHandle`).
    pub pv_from: &'static str,
    pub driver: Option<String>,
    pub handle: Option<String>,
    pub pod_uid: Option<String>,
}

fn is_pod_mount(k: &Kind) -> bool {
    matches!(k, Kind::PodVolume { .. } | Kind::PodBlock { .. })
}

fn is_staging(k: &Kind) -> bool {
    matches!(k, Kind::CsiStaging { .. } | Kind::BlockStaging { .. })
}

/// Work out PV, driver, handle and pod of every mount (pure).
pub fn identify(mounts: &[CsiMount], cluster: &ClusterView) -> Vec<Identity> {
    mounts
        .iter()
        .map(|m| {
            let vd = m.vol_data.clone().unwrap_or_default();
            let mut id = Identity {
                driver: vd.driver_name.clone(),
                handle: vd.volume_handle.clone(),
                ..Default::default()
            };
            match &m.kind {
                Kind::PodVolume { pod_uid, name, .. } => {
                    id.pv = Some(name.clone());
                    id.pv_from = "path";
                    id.pod_uid = Some(pod_uid.clone());
                }
                Kind::PodBlock { pod_uid, name } => {
                    id.pv = Some(name.clone());
                    id.pv_from = "path";
                    id.pod_uid = pod_uid.clone();
                }
                Kind::BlockStaging { pv } => {
                    id.pv = Some(pv.clone());
                    id.pv_from = "path";
                }
                Kind::CsiStaging { driver, pv, hash } => {
                    if id.driver.is_none() {
                        id.driver = driver.clone();
                    }
                    if let Some(pv) = pv {
                        id.pv = Some(pv.clone());
                        id.pv_from = "path";
                    } else if let Some(spec) = vd.spec_vol_id.clone().filter(|s| !s.is_empty()) {
                        id.pv = Some(spec);
                        id.pv_from = "vol_data.json";
                    } else if let Some(p) = mounts.iter().find(|o| {
                        matches!(o.kind, Kind::PodVolume { .. })
                            && o.major == m.major
                            && o.minor == m.minor
                    }) {
                        if let Kind::PodVolume { name, .. } = &p.kind {
                            id.pv = Some(name.clone());
                            id.pv_from = "pod mount";
                        }
                    } else if let Some(pv) = cluster.pvs.as_ref().and_then(|pvs| {
                        pvs.iter().find(|pv| {
                            let h = pv.volume_handle.as_deref();
                            (id.driver.is_none() || pv.driver == id.driver)
                                && h.is_some()
                                && (h == id.handle.as_deref()
                                    || hash.as_deref()
                                        == h.map(node::kubelet::staging_hash).as_deref())
                        })
                    }) {
                        id.pv = Some(pv.name.clone());
                        id.pv_from = "PV list";
                    } else if let Some(h) = id.handle.clone() {
                        id.pv = Some(h);
                        id.pv_from = "volumeHandle";
                    }
                }
                Kind::PodSubpath { .. } | Kind::PluginDevice { .. } => {}
            }
            if id.driver.is_none() {
                // A pod mount without vol_data.json: the staging mount of the same device knows.
                id.driver = mounts
                    .iter()
                    .filter(|o| o.major == m.major && o.minor == m.minor)
                    .find_map(|o| match &o.kind {
                        Kind::CsiStaging { driver, .. } => driver.clone(),
                        _ => None,
                    });
            }
            if id.driver.is_none() {
                if let (Some(pv), Some(pvs)) = (&id.pv, &cluster.pvs) {
                    id.driver = pvs
                        .iter()
                        .find(|p| &p.name == pv)
                        .and_then(|p| p.driver.clone());
                }
            }
            id
        })
        .collect()
}

/// --include/--exclude on the mount point, PV and driver (pure).
pub fn selected(m: &CsiMount, id: &Identity, include: &[Regex], exclude: &[Regex]) -> bool {
    let mp = m.mount_point.to_string_lossy();
    let subjects = [Some(mp.as_ref()), id.pv.as_deref(), id.driver.as_deref()];
    let hit = |re: &Regex| subjects.iter().flatten().any(|s| re.is_match(s));
    (include.is_empty() || include.iter().any(hit)) && !exclude.iter().any(hit)
}

// ---- gather --------------------------------------------------------------------------------

fn read_input(path: &Path, what: &str) -> Result<String, Unknown> {
    let shown = if path == Path::new("-") {
        "-".to_string()
    } else {
        path.display().to_string()
    };
    let res = if path == Path::new("-") {
        read_json_bytes(&mut std::io::stdin().lock())
    } else {
        // A path the caller named: opened with the caller's privilege.
        node::privilege::open(path).and_then(|mut f| read_json_bytes(&mut f))
    };
    match res {
        Ok(Some(buf)) => Ok(String::from_utf8_lossy(&buf).into_owned()),
        Ok(None) => Err(Unknown(format!(
            "{what} {shown} is not JSON (it does not start with '{{' or '['): give the output of `kubectl get … -o json`"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(Unknown(format!(
            "{what} {shown} is larger than {} (the cap of a JSON input): not read",
            plugin::fmt_bytes(kube::JSON_FILE_MAX)
        ))),
        Err(e) => Err(Unknown(format!("{what} {shown}: {}", node::errtext(&e)))),
    }
}

/// A JSON document read whole, up to the cap of a JSON input (`kube::JSON_FILE_MAX`), in chunks:
/// input whose first non-blank byte cannot start a JSON document (`/dev/zero`, a binary file) is
/// refused at once (`Ok(None)`) instead of being read to the cap; past the cap, `FileTooLarge`.
fn read_json_bytes(r: &mut dyn Read) -> std::io::Result<Option<Vec<u8>>> {
    let max = kube::JSON_FILE_MAX as usize;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut started = false;
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !started {
            if let Some(&b) = chunk[..n].iter().find(|b| !b.is_ascii_whitespace()) {
                if b != b'{' && b != b'[' {
                    return Ok(None);
                }
                started = true;
            }
        }
        if buf.len() + n > max {
            return Err(std::io::Error::from(std::io::ErrorKind::FileTooLarge));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(buf))
}

fn privilege_error(host: &node::Host, path: &Path, e: &std::io::Error) -> Unknown {
    Unknown(node::args::privilege_text(host, path, e))
}

/// The cluster view: from --pods-json/--pvs-json when given, else from the API. Without any
/// credentials (and none asked for) the API part is skipped, not failed; a failing API is kept
/// as the reason, so the local findings still count.
pub fn cluster_view(opts: &Opts, host: &node::Host, ctx: &Ctx) -> Result<ClusterView, Unknown> {
    if opts.pods.reads_stdin() && opts.pvs.reads_stdin() {
        return Err("--pods-json and --pvs-json cannot both read stdin".into());
    }
    let node = match &opts.node.node {
        Some(n) if !n.trim().is_empty() => n.trim().to_string(),
        _ => host
            .hostname()
            .ok_or("cannot tell this node's name from the host name: give --node")?,
    };
    if opts.pods.pods_json.is_none() && opts.pvs.pvs_json.is_none() {
        return Ok(api_view(opts, node, ctx));
    }
    let mut objects = Objects::default();
    if let Some(p) = &opts.pods.pods_json {
        ctx.stage(format!("reading --pods-json {}", p.display()));
        let what = format!("--pods-json {}", p.display());
        cluster::parse_objects(&read_input(p, "--pods-json")?, &what, "Pod", &mut objects)?;
    }
    if let Some(p) = &opts.pvs.pvs_json {
        ctx.stage(format!("reading --pvs-json {}", p.display()));
        let what = format!("--pvs-json {}", p.display());
        cluster::parse_objects(
            &read_input(p, "--pvs-json")?,
            &what,
            "PersistentVolume",
            &mut objects,
        )?;
    }
    ctx.debug(format!(
        "cluster view for node {node}: {} pods, {} PVs, {} VolumeAttachments, {} CSIDrivers, {} other objects ignored",
        objects.pods.len(),
        objects.pvs.len(),
        objects.attachments.len(),
        objects.drivers.len(),
        objects.ignored
    ));
    Ok(objects.into_view(
        node,
        opts.pods.pods_json.is_some(),
        opts.pvs.pvs_json.is_some(),
    ))
}

/// How long the API may take: what is left, minus the probes' time and a reserve, but at least
/// half of what is left. A slow API server must not squeeze the probes into false "hung" answers.
pub fn api_budget(remaining: Duration, probe_timeout: Duration) -> Duration {
    remaining
        .saturating_sub(probe_timeout + Duration::from_millis(500))
        .max(remaining / 2)
}

/// `kube::connect`, with a deadline of our own (see [`api_budget`]).
fn connect(opts: &Opts, ctx: &Ctx) -> Result<kube::Client, Unknown> {
    let budget = api_budget(ctx.remaining(), opts.probe.probe_timeout);
    ctx.debug(format!("API budget {}", plugin::fmt_duration(budget)));
    kube::connect_until(&opts.api, ctx, std::time::Instant::now() + budget)
}

fn api_view(opts: &Opts, node: String, ctx: &Ctx) -> ClusterView {
    let asked = opts.api.kubeconfig.is_some() || opts.api.context.is_some();
    let client = match connect(opts, ctx) {
        Ok(c) => c,
        Err(e) => {
            let api = if !asked && e.0.starts_with(kube::config::NO_CREDENTIALS) {
                cluster::ApiUse::Skipped(e.0)
            } else {
                cluster::ApiUse::Failed(e.0)
            };
            return ClusterView {
                api,
                ..ClusterView::local_only(node)
            };
        }
    };
    ctx.stage(format!(
        "listing pods on node {node}, PVs and VolumeAttachments from {}",
        client.description
    ));
    match cluster::from_api(&client, &node) {
        Ok(v) => {
            ctx.debug(format!(
                "cluster view from the API for node {node}: {} pods, {} PVs, {} VolumeAttachments",
                v.pods.as_ref().map_or(0, Vec::len),
                v.pvs.as_ref().map_or(0, Vec::len),
                v.attachments.as_ref().map_or(0, Vec::len)
            ));
            v
        }
        Err(e) => ClusterView {
            api: cluster::ApiUse::Failed(e.0),
            ..ClusterView::local_only(node)
        },
    }
}

/// All I/O: mount table, vol_data.json files, cluster view, probes. Bounded by the deadline.
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let host = opts.host.host();

    ctx.stage("looking for the kubelet root");
    // Privilege (cap_dac_read_search) serves the node's own kubelet roots and the mount points of
    // its own mount table only: never a root or a mount table the caller named.
    let own = opts.mountinfo.mountinfo.is_none()
        && node::kubelet::roots_are_own(&opts.kubelet_root.kubelet_root, &host);
    let roots = node::privilege::elevated_if(own, || -> Result<Vec<PathBuf>, Unknown> {
        let roots = opts.kubelet_root.resolve(&host)?;
        // Without CAP_DAC_READ_SEARCH every probe below the root-only pods/ directory fails with
        // EACCES, which would read as "corrupted": refuse to guess.
        for r in &roots {
            for sub in ["", "pods", "plugins/kubernetes.io/csi"] {
                let p = if sub.is_empty() {
                    r.clone()
                } else {
                    r.join(sub)
                };
                match std::fs::read_dir(host.mount_path(&p)) {
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                        return Err(privilege_error(&host, &p, &e))
                    }
                    _ => {}
                }
            }
        }
        Ok(roots)
    })?;
    ctx.debug(format!(
        "kubelet roots: {}",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let mi_path = opts.mountinfo.path(&host);
    ctx.stage(format!("reading {}", mi_path.display()));
    let table = node::mountinfo::read(&mi_path)?;
    ctx.debug(format!("{}: {} mounts", mi_path.display(), table.len()));

    // The CSI mounts, once per mount point (the last, topmost entry of a stack wins).
    let mut mounts: Vec<CsiMount> = Vec::new();
    for m in &table {
        let Some(kp) = node::kubelet::classify(&m.mount_point, &roots) else {
            continue;
        };
        if !kp.is_csi() {
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

    ctx.stage(format!(
        "reading vol_data.json of {} CSI mounts",
        mounts.len()
    ));
    node::privilege::elevated_if(own, || -> Result<(), Unknown> {
        for m in &mut mounts {
            match node::kubelet::read_vol_data(&host, &m.mount_point) {
                Ok(v) => m.vol_data = v,
                Err(e) if e.ends_with("(EACCES)") => {
                    return Err(format!(
                        "cannot read {e}: run as root or grant CAP_DAC_READ_SEARCH"
                    )
                    .into())
                }
                Err(e) => m.vol_data_error = Some(e),
            }
        }
        Ok(())
    })?;

    let cluster = cluster_view(opts, &host, ctx)?;

    let ids = identify(&mounts, &cluster);
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
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
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
    let mut notes = Vec::new();
    let probe_timeout = probe_budget(opts.probe.probe_timeout, ctx.remaining(), paths.len());
    if probe_timeout < opts.probe.probe_timeout {
        ctx.debug(format!(
            "probe timeout capped at {} to answer within -t",
            plugin::fmt_duration(probe_timeout)
        ));
    }
    if !paths.is_empty() {
        ctx.stage(format!(
            "probing {} CSI mounts (up to {} each)",
            paths.len(),
            plugin::fmt_duration(probe_timeout)
        ));
        let memory = node::probe::memory_for(
            opts.run_dir.run_dir.as_deref(),
            opts.host.host_root.as_deref(),
        );
        let (outcomes, n) = node::privilege::elevated_if(own, || {
            node::probe::probe_remembered(
                &paths,
                probe_timeout,
                paths.len().min(MAX_PARALLEL),
                memory.as_ref().map_err(|e| e.as_str()),
            )
        });
        notes = n;
        for (&i, o) in targets.iter().zip(outcomes) {
            ctx.debug(format!(
                "probe {}: {}",
                mounts[i].mount_point.display(),
                o.describe()
            ));
            mounts[i].probe = Some(o);
        }
    }
    Ok(Data {
        roots,
        mounts,
        cluster,
        probe_timeout,
        notes,
    })
}

/// The per-probe timeout: --probe-timeout, but small enough that every round of probes ends
/// before the deadline with a reserve for killing, reaping and printing.
pub fn probe_budget(wanted: Duration, remaining: Duration, probes: usize) -> Duration {
    let rounds = probes.div_ceil(MAX_PARALLEL).max(1) as u32;
    let reserve = (remaining / 10).max(Duration::from_millis(300));
    let per_round = remaining.saturating_sub(reserve) / rounds;
    wanted.min(per_round).max(Duration::from_millis(50))
}

// ---- evaluate ------------------------------------------------------------------------------

/// A problem of one mount, most urgent first.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Corrupted(String),
    /// No answer: why (`no answer in 3s`, or still hung from an earlier run).
    Hung(String),
    /// The probe failed in a way that says nothing about the mount (fork failed, other errno).
    NotProbed(String),
    Orphaned,
    PvGone,
    NotAttached,
    Unpublished,
}

impl Problem {
    pub fn status(&self) -> Status {
        match self {
            Problem::Unpublished => Status::Warning,
            Problem::NotProbed(_) => Status::Unknown,
            _ => Status::Critical,
        }
    }
    /// The finding's machine-readable kind.
    pub fn signal(&self) -> &'static str {
        match self {
            Problem::Corrupted(_) => "stale_mount",
            Problem::Hung(_) => "mount_hung",
            Problem::NotProbed(_) => "not_probed",
            Problem::Orphaned => "orphaned_mount",
            Problem::PvGone => "staging_pv_gone",
            Problem::NotAttached => "staging_not_attached",
            Problem::Unpublished => "staging_unpublished",
        }
    }
    /// Counts as a stale mount (everything but "could not probe").
    pub fn is_stale(&self) -> bool {
        !matches!(self, Problem::NotProbed(_))
    }
}

fn kind_word(k: &Kind) -> &'static str {
    match k {
        Kind::PodVolume { .. } => "pod mount",
        Kind::PodBlock { .. } => "pod block device",
        Kind::CsiStaging { .. } => "staging mount",
        Kind::BlockStaging { .. } => "block staging",
        _ => "mount",
    }
}

/// What is wrong with one mount (pure).
pub fn problems(i: usize, data: &Data, ids: &[Identity]) -> Vec<Problem> {
    let m = &data.mounts[i];
    let id = &ids[i];
    let c = &data.cluster;
    let mut out = Vec::new();
    match &m.probe {
        Some(o) if o.is_corrupted() => out.push(Problem::Corrupted(o.describe())),
        Some(o @ (Outcome::Hung { .. } | Outcome::StillHung { .. })) => {
            out.push(Problem::Hung(o.describe()))
        }
        Some(Outcome::ProbeError(e)) => out.push(Problem::NotProbed(e.clone())),
        // Gone between reading the table and probing: unmounted meanwhile, nothing stale.
        Some(Outcome::Failed { errno, .. }) if *errno == nix::errno::Errno::ENOENT => {}
        Some(o @ Outcome::Failed { .. }) => out.push(Problem::NotProbed(o.describe())),
        _ => {}
    }
    if is_pod_mount(&m.kind) {
        if let (Some(uid), Some(mut here)) = (&id.pod_uid, c.pods_on_node()) {
            if !here.any(|p| &p.uid == uid) {
                out.push(Problem::Orphaned);
            }
        }
    }
    if is_staging(&m.kind) {
        if c.pv_exists(id.pv.as_deref(), id.driver.as_deref(), id.handle.as_deref()) == Some(false)
        {
            out.push(Problem::PvGone);
        } else if let (Some(pv), Some(driver)) = (&id.pv, &id.driver) {
            if c.needs_attachment(driver) && c.attached_here(pv) == Some(false) {
                out.push(Problem::NotAttached);
            }
        }
        let published = data
            .mounts
            .iter()
            .zip(ids)
            .any(|(o, oid)| match (&m.kind, &o.kind) {
                (Kind::CsiStaging { .. }, Kind::PodVolume { .. }) => {
                    (o.major == m.major && o.minor == m.minor)
                        || (id.pv.is_some() && oid.pv == id.pv)
                }
                (Kind::BlockStaging { .. }, Kind::PodBlock { .. }) => {
                    id.pv.is_some() && oid.pv == id.pv
                }
                _ => false,
            });
        if !published {
            out.push(Problem::Unpublished);
        }
    }
    out
}

fn headline(p: &Problem, m: &CsiMount, id: &Identity, c: &ClusterView) -> String {
    let kw = kind_word(&m.kind);
    let mp = m.mount_point.display();
    let pv = id.pv.as_deref().unwrap_or("?");
    match p {
        Problem::Corrupted(why) => format!("corrupted {kw} {mp}: {why}"),
        Problem::Hung(why) => format!("hung {kw} {mp}: {why}"),
        Problem::NotProbed(why) => format!("{kw} {mp} not probed: {why}"),
        Problem::Orphaned => {
            let uid = id.pod_uid.as_deref().unwrap_or("?");
            match id.pod_uid.as_deref().and_then(|u| c.pod(u)) {
                Some(p) => format!(
                    "orphaned pod mount {mp}: pod {uid} ({}/{}) runs on node {}, not {}",
                    p.namespace,
                    p.name,
                    p.node.as_deref().unwrap_or("(none)"),
                    c.node
                ),
                None => format!(
                    "orphaned pod mount {mp}: pod {uid} is not a pod of node {}",
                    c.node
                ),
            }
        }
        Problem::PvGone if id.pv.is_none() => format!(
            "stale {kw} {mp}: no PV of driver {} has the volume handle of this directory any more",
            id.driver.as_deref().unwrap_or("?")
        ),
        Problem::PvGone => format!("stale {kw} {mp}: PV {pv} no longer exists"),
        Problem::NotAttached => format!(
            "stale {kw} {mp}: no VolumeAttachment of PV {pv} to node {}",
            c.node
        ),
        Problem::Unpublished => {
            format!("unpublished {kw} {mp}: no pod mount uses PV {pv} any more")
        }
    }
}

/// Short class names, in the order the summary lists them.
const CLASS_ORDER: &[&str] = &[
    "corrupted",
    "hung",
    "orphaned pod mount",
    "staging of deleted PV",
    "staging not attached here",
    "unpublished staging",
    "not probed",
];

fn short(p: &Problem) -> &'static str {
    let i = match p {
        Problem::Corrupted(_) => 0,
        Problem::Hung(_) => 1,
        Problem::Orphaned => 2,
        Problem::PvGone => 3,
        Problem::NotAttached => 4,
        Problem::Unpublished => 5,
        Problem::NotProbed(_) => 6,
    };
    CLASS_ORDER[i]
}

fn hint(p: &Problem, m: &CsiMount, id: &Identity, c: &ClusterView) -> String {
    let driver = id.driver.as_deref().unwrap_or("its driver");
    // The path as one shell word: a hostile path cannot break out of the command.
    let mp = plugin::shell_quote(&m.mount_point.to_string_lossy());
    let plugin = format!("restart the CSI node plugin pod of {driver} on this node");
    match p {
        Problem::Corrupted(_) | Problem::Hung(_) if is_pod_mount(&m.kind) => {
            let pod_alive = id.pod_uid.as_deref().and_then(|u| c.pod(u)).filter(|p| p.node.as_deref() == Some(c.node.as_str()));
            match pod_alive {
                Some(pod) => format!(
                    "hint: {plugin}, then delete pod {}/{} so the kubelet mounts the volume again; if the mount stays wedged: umount {mp}",
                    pod.namespace, pod.name
                ),
                None => format!("hint: {plugin}; if the mount stays wedged: umount {mp}, then restart the kubelet"),
            }
        }
        Problem::Corrupted(_) | Problem::Hung(_) => {
            format!("hint: {plugin}; if pods still wait in ContainerCreating, restart the kubelet")
        }
        Problem::NotProbed(_) => "hint: run with -vv to see every probe's answer".into(),
        Problem::Orphaned => format!("hint: umount {mp} (its pod is gone), then restart the kubelet so its volume queue moves again"),
        Problem::PvGone | Problem::NotAttached => format!(
            "hint: restart the kubelet (it retries the unmount); if the mount stays, {plugin}; last resort: umount {mp}"
        ),
        Problem::Unpublished => format!(
            "hint: the kubelet unstages unused volumes within minutes; if this stays, restart the kubelet, then {plugin}"
        ),
    }
}

/// What a mount's finding is about: node, PV, claim, pod, driver, mount source and point.
fn mount_subject(
    m: &CsiMount,
    id: &Identity,
    c: &ClusterView,
    names: &kube::Names,
) -> plugin::Subject {
    let mut s = names
        .subject(id.pv.as_deref().unwrap_or(""), id.pod_uid.as_deref())
        .node(c.node.as_str())
        .maybe(plugin::Subject::driver, id.driver.as_deref())
        .device(m.source.strip_prefix("/dev/").unwrap_or(&m.source))
        .mount(m.mount_point.to_string_lossy());
    if s.pod.is_none() {
        if let Some(p) = id.pod_uid.as_deref().and_then(|u| c.pod(u)) {
            if s.namespace.as_deref().is_none_or(|ns| ns == p.namespace) {
                s = s.namespace(p.namespace.as_str()).pod(p.name.as_str());
            }
        }
    }
    s
}

/// Who a mount is for, as an operator knows it (`media/radarr-0 (PVC media/radarr-config,
/// pvc-…)`), when the cross-checks named a pod or a claim.
fn named(id: &Identity, names: &kube::Names) -> Option<String> {
    let pv = id.pv.as_deref()?;
    let label = names.volume(pv, id.pod_uid.as_deref());
    (label != pv).then_some(label)
}

fn identity_line(m: &CsiMount, id: &Identity, c: &ClusterView, names: &kube::Names) -> String {
    let mut parts = Vec::new();
    match &id.pv {
        Some(pv) => {
            parts.push(format!("pv {pv} (from {})", id.pv_from));
            if let Some(claim) = names.claim(pv) {
                parts.push(format!("PVC {claim}"));
            }
        }
        None => parts.push("pv unknown".into()),
    }
    parts.push(format!(
        "driver {}",
        id.driver.as_deref().unwrap_or("unknown")
    ));
    if let Some(uid) = &id.pod_uid {
        match c.pod(uid) {
            Some(p) => parts.push(format!("pod {}/{} (uid {uid})", p.namespace, p.name)),
            None => parts.push(format!("pod uid {uid}")),
        }
    }
    parts.push(format!(
        "device {} ({}, {}:{})",
        m.source, m.fstype, m.major, m.minor
    ));
    parts.join(", ")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Every decision, on plain data.
pub fn evaluate(data: &Data, opts: &Opts) -> Report {
    let c = &data.cluster;
    let ids = identify(&data.mounts, c);
    // Names an operator knows, from what the cross-checks read (the shared resolver's format).
    let names = cluster::names(c);
    let sel: Vec<usize> = (0..data.mounts.len())
        .filter(|&i| data.mounts[i].selected)
        .collect();

    // A wrong node name would make every pod mount look orphaned: refuse to guess.
    if let Some(here) = c.pods_on_node() {
        let has_pod_mounts = sel.iter().any(|&i| is_pod_mount(&data.mounts[i].kind));
        if here.count() == 0 && has_pod_mounts {
            let mut nodes: Vec<&str> = c
                .pods
                .iter()
                .flatten()
                .filter_map(|p| p.node.as_deref())
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            let seen = if nodes.is_empty() {
                "none".to_string()
            } else {
                nodes.iter().take(5).copied().collect::<Vec<_>>().join(", ")
            };
            return Report::unknown(format!(
                "--pods-json has no pod on node '{}' although pods have CSI mounts here: give --node (nodes seen: {seen}) and use kubectl get pods -A",
                c.node
            ));
        }
    }

    let mut report = Report::new(Status::Ok, "").unit("mount", "mounts");
    let (mut stale, mut hung, mut orphaned, mut not_probed) = (0usize, 0usize, 0usize, 0usize);
    let mut by_class: Vec<(&'static str, usize)> = Vec::new();
    for &i in &sel {
        let m = &data.mounts[i];
        let id = &ids[i];
        let probs = problems(i, data, &ids);
        if probs.iter().any(|p| matches!(p, Problem::Hung(_))) {
            hung += 1;
        }
        if probs.contains(&Problem::Orphaned) {
            orphaned += 1;
        }
        if probs.iter().any(Problem::is_stale) {
            stale += 1;
        } else if !probs.is_empty() {
            not_probed += 1;
        }
        let Some(primary) = probs.first() else {
            let mut f = Finding::new(
                Status::Ok,
                format!("healthy {} {}", kind_word(&m.kind), m.mount_point.display()),
            )
            .signal("healthy")
            .subject(mount_subject(m, id, c, &names))
            .detail(identity_line(m, id, c, &names));
            if let Some(e) = &m.vol_data_error {
                f = f.detail(format!("note: {e}"));
            }
            report = report.finding(f);
            continue;
        };
        match by_class.iter_mut().find(|(k, _)| *k == short(primary)) {
            Some((_, n)) => *n += 1,
            None => by_class.push((short(primary), 1)),
        }
        let mut text = headline(primary, m, id, c);
        if let Some(who) = named(id, &names) {
            text.push_str(&format!(" — {who}"));
        }
        let mut f = Finding::new(primary.status(), text)
            .signal(primary.signal())
            .subject(mount_subject(m, id, c, &names))
            .detail(identity_line(m, id, c, &names));
        let also: Vec<&str> = probs[1..].iter().map(short).collect();
        if !also.is_empty() {
            f = f.detail(format!("also: {}", also.join(", ")));
        }
        if let Some(e) = &m.vol_data_error {
            f = f.detail(format!("note: {e}"));
        }
        report = report.finding(f.detail(hint(primary, m, id, c)));
    }

    let thresholds = Thresholds::new(opts.warning.clone(), opts.critical.clone());
    let use_thresholds = thresholds.warning.is_some() || thresholds.critical.is_some();
    report.status = if use_thresholds {
        let s = thresholds.evaluate(stale as f64);
        if not_probed > 0 {
            s.worst(Status::Unknown)
        } else {
            s
        }
    } else {
        report.worst_finding()
    };

    let n = sel.len();
    let mut summary = if stale > 0 {
        by_class.sort_by_key(|(k, _)| CLASS_ORDER.iter().position(|c| c == k));
        let parts: Vec<String> = by_class
            .iter()
            .filter(|(k, _)| *k != "not probed")
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        format!(
            "{stale} of {} stale: {}",
            plural(n, "CSI mount", "CSI mounts"),
            parts.join(", ")
        )
    } else if n == 0 {
        format!(
            "no CSI mounts under {}",
            data.roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!("{} healthy", plural(n, "CSI mount", "CSI mounts"))
    };
    if not_probed > 0 {
        summary.push_str(&format!(", {not_probed} not probed"));
    }
    match (&c.api, c.pods.is_some(), c.pvs.is_some()) {
        (cluster::ApiUse::Failed(e), _, _) => {
            // The local findings stand; an OK would hide that half the check did not run.
            summary.push_str(&format!("; API cross-checks failed: {e}"));
            report.status = report.status.worst(Status::Unknown);
        }
        (cluster::ApiUse::Skipped(e), _, _) => {
            summary.push_str("; API cross-checks skipped (no Kubernetes credentials: give --kubeconfig or --pods-json/--pvs-json)");
            report = report.note(e.clone());
        }
        (_, false, false) => {
            summary.push_str("; API cross-checks skipped (no --pods-json/--pvs-json)")
        }
        (_, false, true) => summary.push_str("; pod cross-check skipped (no --pods-json)"),
        (_, true, false) => summary.push_str("; PV cross-check skipped (no --pvs-json)"),
        (_, true, true) => {}
    }
    report.summary = summary;

    if c.pvs.is_some() && c.attachments.is_none() {
        report = report.note(
            "VolumeAttachment cross-check skipped: no VolumeAttachment in --pvs-json (kubectl get pv,volumeattachments,csidrivers -o json)",
        );
    }
    let excluded = data.mounts.len() - n;
    if excluded > 0 {
        report = report.note(format!(
            "{} excluded by --include/--exclude",
            plural(excluded, "CSI mount", "CSI mounts")
        ));
    }
    if use_thresholds {
        report = report.note("state from -w/-c on the number of stale mounts");
    }
    for n in &data.notes {
        report = report.note(n.clone());
    }

    report
        .perf(Perfdata::new("csi_mounts", n as f64).min(0.0))
        .perf(
            Perfdata::new("stale_mounts", stale as f64)
                .thresholds(&thresholds)
                .min(0.0),
        )
        .perf(Perfdata::new("hung_mounts", hung as f64).min(0.0))
        .perf(Perfdata::new("orphaned_mounts", orphaned as f64).min(0.0))
}

#[cfg(test)]
mod tests;
