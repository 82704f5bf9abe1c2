//! The Linux iSCSI transport class in sysfs, read without iscsiadm or iscsid.
//!
//! Layout (drivers/scsi/scsi_transport_iscsi.c, scsi_scan.c, scsi_sysfs.c; open-iscsi usr/iscsi_sysfs.c):
//!
//! ```text
//! /sys/class/iscsi_session/session3 -> ../../devices/platform/host2/session3/iscsi_session/session3
//!     state           LOGGED_IN | FAILED | FREE
//!     recovery_tmo    seconds, or "off" (-1: never time out)
//!     targetname tpgt ifacename target_state …   (visibility depends on the transport)
//!     device -> ../../../session3                 (the session device)
//! /sys/devices/platform/host2/session3/                          (software iSCSI: hostH under platform;
//!     connection3:0/iscsi_connection/connection3:0/                offload HBAs sit under their PCI device)
//!         state (up|down|failed|bound|unknown, kernel ≥ 5.7), persistent_address, persistent_port,
//!         address, port (ENOTCONN without an endpoint)
//!     target2:0:0/2:0:0:0/state   running | blocked | transport-offline | offline | created |
//!                                 created-blocked | quiesce | cancel | deleted
//!     target2:0:0/2:0:0:0/block/sdc/dev   "8:32"   (= /sys/block/sdc/dev)
//!         sdc1/ (partitions: a directory with a `partition` file), holders/dm-0 (device mapper)
//! ```
//!
//! A FAILED session is in recovery: its SCSI devices are `blocked` and I/O waits. When
//! `recovery_tmo` passes, the session becomes FREE, the devices go `transport-offline` and I/O
//! fails — that is when filesystems on them abort and remount read-only.
//!
//! Every attribute is read as an [`Attr`]: present, missing (the transport or kernel does not
//! expose it) or unreadable (with the path and errno), so callers decide what each case means.

use std::io::Read;
use std::path::{Path, PathBuf};

/// One sysfs attribute as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// The attribute's text, trailing newline and blanks removed.
    Value(String),
    /// No such file: the transport or kernel does not expose it.
    Missing,
    /// The file is there but could not be read.
    Error(AttrError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrError {
    pub path: PathBuf,
    /// `errtext`: "Permission denied (EACCES)".
    pub error: String,
    pub errno: Option<i32>,
}

impl AttrError {
    /// ENOTCONN: the kernel's answer for `address`/`port` of a connection without an endpoint.
    pub fn not_connected(&self) -> bool {
        self.errno == Some(nix::libc::ENOTCONN)
    }
    pub fn permission(&self) -> bool {
        matches!(self.errno, Some(nix::libc::EACCES | nix::libc::EPERM))
    }
}

impl std::fmt::Display for AttrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot read {}: {}", self.path.display(), self.error)
    }
}

impl Attr {
    pub fn value(&self) -> Option<&str> {
        match self {
            Attr::Value(v) => Some(v),
            _ => None,
        }
    }
    pub fn error(&self) -> Option<&AttrError> {
        match self {
            Attr::Error(e) => Some(e),
            _ => None,
        }
    }
    /// The value, or `unknown` / `unknown (<errno>)` for display.
    pub fn show(&self) -> String {
        match self {
            Attr::Value(v) if v.is_empty() => "(empty)".into(),
            Attr::Value(v) => v.clone(),
            Attr::Missing => "unknown".into(),
            Attr::Error(e) if e.not_connected() => "unknown (not connected)".into(),
            Attr::Error(e) => format!("unknown ({})", e.error),
        }
    }
}

/// Sysfs attributes are at most a page; anything longer is not an attribute.
const ATTR_MAX: u64 = 4096;

/// Read one attribute file.
pub fn read_attr(path: &Path) -> Attr {
    let res = std::fs::File::open(path).and_then(|f| {
        let mut buf = Vec::new();
        f.take(ATTR_MAX).read_to_end(&mut buf)?;
        Ok(buf)
    });
    match res {
        Ok(b) => Attr::Value(String::from_utf8_lossy(&b).trim_end().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Attr::Missing,
        Err(e) => Attr::Error(AttrError {
            path: path.to_path_buf(),
            error: plugin::errtext(&e),
            errno: e.raw_os_error(),
        }),
    }
}

/// `recovery_tmo` as the kernel prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryTmo {
    /// Seconds before a failed session is given up and its devices go offline.
    Secs(u64),
    /// `off` (the kernel's -1): recovery never times out, I/O waits for ever.
    Off,
}

impl RecoveryTmo {
    pub fn parse(s: &str) -> Option<RecoveryTmo> {
        let s = s.trim();
        if s == "off" || s == "-1" {
            return Some(RecoveryTmo::Off);
        }
        s.parse().ok().map(RecoveryTmo::Secs)
    }
}

impl std::fmt::Display for RecoveryTmo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryTmo::Secs(s) => write!(f, "{s}s"),
            RecoveryTmo::Off => f.write_str("off"),
        }
    }
}

/// A block device of a SCSI device, its partitions and device-mapper holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDev {
    /// `sdc`
    pub name: String,
    /// `maj:min` from its `dev` file.
    pub dev: Attr,
    /// Partitions (`sdc1`) and holders (`dm-0`) with their `dev`: filesystems may live on them.
    pub children: Vec<(String, Attr)>,
}

/// A SCSI device (LUN) of a session: `H:C:T:L`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiDevice {
    pub hctl: String,
    pub state: Attr,
    pub blocks: Vec<BlockDev>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// `connection3:0`
    pub name: String,
    pub state: Attr,
    pub persistent_address: Attr,
    pub persistent_port: Attr,
    pub address: Attr,
    pub port: Attr,
}

impl Connection {
    /// `addr:port` of the portal (`[v6]:port`), persistent values first; `None` when unknown.
    pub fn portal(&self) -> Option<String> {
        let pick = |a: &Attr, b: &Attr| {
            a.value()
                .filter(|v| !v.is_empty())
                .or_else(|| b.value().filter(|v| !v.is_empty()))
                .map(str::to_string)
        };
        let addr = pick(&self.persistent_address, &self.address)?;
        let port = pick(&self.persistent_port, &self.port);
        let addr = if addr.contains(':') && !addr.starts_with('[') {
            format!("[{addr}]")
        } else {
            addr
        };
        Some(match port {
            Some(p) => format!("{addr}:{p}"),
            None => addr,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `session3`
    pub name: String,
    pub sid: u32,
    /// The transport-class directory the attributes were read from.
    pub attr_dir: PathBuf,
    pub state: Attr,
    pub recovery_tmo: Attr,
    pub targetname: Attr,
    pub tpgt: Attr,
    pub ifacename: Attr,
    /// `target_state` (ALLOCATED, SCANNED, UNBINDING, UNBOUND), newer kernels only.
    pub target_state: Attr,
    pub connections: Vec<Connection>,
    pub devices: Vec<ScsiDevice>,
    /// What could not be walked (a directory unreadable, the device directory not found).
    pub problems: Vec<String>,
}

impl Session {
    pub fn recovery_tmo(&self) -> Option<RecoveryTmo> {
        self.recovery_tmo.value().and_then(RecoveryTmo::parse)
    }
    /// The portal of the first connection that tells one.
    pub fn portal(&self) -> Option<String> {
        self.connections.iter().find_map(Connection::portal)
    }
    pub fn block_devices(&self) -> impl Iterator<Item = &BlockDev> {
        self.devices.iter().flat_map(|d| d.blocks.iter())
    }
}

/// All sessions of a host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sessions {
    /// `<sys>/class/iscsi_session` exists (the iSCSI transport class is loaded).
    pub class_present: bool,
    pub sessions: Vec<Session>,
}

/// Sorted directory entries (name, path); `Ok(None)` when the directory does not exist.
fn entries(dir: &Path) -> Result<Option<Vec<(String, PathBuf)>>, String> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot list {}: {}",
                dir.display(),
                plugin::errtext(&e)
            ))
        }
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| format!("cannot list {}: {}", dir.display(), plugin::errtext(&e)))?;
        out.push((e.file_name().to_string_lossy().into_owned(), e.path()));
    }
    out.sort_by_key(|a| natural_key(&a.0));
    Ok(Some(out))
}

/// Sort key that orders `session10` after `session9` and `2:0:0:10` after `2:0:0:9`.
fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut num: Option<u64> = None;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
        } else {
            if let Some(n) = num.take() {
                out.push((std::mem::take(&mut text), n));
            }
            text.push(c);
        }
    }
    out.push((text, num.unwrap_or(0)));
    out
}

fn is_hctl(name: &str) -> bool {
    let parts: Vec<&str> = name.split(':').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Read every iSCSI session under `sys` (the host's `/sys`).
///
/// `Err` only when the session class itself cannot be listed; everything below is recorded per
/// session (attributes as [`Attr`], walk failures in `problems`).
pub fn read(sys: &Path) -> Result<Sessions, String> {
    let class = sys.join("class/iscsi_session");
    let Some(list) = entries(&class)? else {
        return Ok(Sessions::default());
    };
    let mut sessions = Vec::new();
    for (name, path) in list {
        let Some(sid) = name
            .strip_prefix("session")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let s = read_session(&name, sid, &path);
        // Logged out while we read it: the class entry is gone. Not a session any more.
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        sessions.push(s);
    }
    Ok(Sessions {
        class_present: true,
        sessions,
    })
}

/// One session by number (`sessionN`); `None` when the class has no such entry.
pub fn read_one(sys: &Path, sid: u32) -> Option<Session> {
    let name = format!("session{sid}");
    let path = sys.join("class/iscsi_session").join(&name);
    std::fs::symlink_metadata(&path).ok()?;
    Some(read_session(&name, sid, &path))
}

/// The session device directory (`…/hostH/sessionN`) of a class directory.
fn session_device_dir(attr_dir: &Path) -> Option<PathBuf> {
    // The class device's `device` link points at its parent, the session device.
    if let Ok(p) = std::fs::canonicalize(attr_dir.join("device")) {
        return Some(p);
    }
    // Without it (it is always there on real kernels), the class dir sits at
    // <session device>/iscsi_session/sessionN.
    let parent = attr_dir.parent()?;
    if parent.file_name()? == "iscsi_session" {
        return parent.parent().map(Path::to_path_buf);
    }
    None
}

fn read_session(name: &str, sid: u32, class_path: &Path) -> Session {
    let mut problems = Vec::new();
    // The class entry is a symlink into /sys/devices; resolve it so `..` means the real parent.
    let (attr_dir, resolved) = match std::fs::canonicalize(class_path) {
        Ok(p) => (p, true),
        Err(e) => {
            problems.push(format!(
                "cannot resolve {}: {}",
                class_path.display(),
                plugin::errtext(&e)
            ));
            (class_path.to_path_buf(), false)
        }
    };
    let a = |f: &str| read_attr(&attr_dir.join(f));
    let mut s = Session {
        name: name.to_string(),
        sid,
        state: a("state"),
        recovery_tmo: a("recovery_tmo"),
        targetname: a("targetname"),
        tpgt: a("tpgt"),
        ifacename: a("ifacename"),
        target_state: a("target_state"),
        attr_dir: attr_dir.clone(),
        connections: Vec::new(),
        devices: Vec::new(),
        problems,
    };
    if !resolved {
        return s;
    }
    let Some(dev_dir) = session_device_dir(&attr_dir) else {
        s.problems.push(format!(
            "{}: session device directory not found (no `device` link): connections and disks unknown",
            attr_dir.display()
        ));
        return s;
    };
    let list = match entries(&dev_dir) {
        Ok(Some(l)) => l,
        Ok(None) => {
            s.problems
                .push(format!("{}: no such directory", dev_dir.display()));
            return s;
        }
        Err(e) => {
            s.problems.push(e);
            return s;
        }
    };
    for (entry, path) in list {
        if entry.starts_with("connection") {
            let cdir = path.join("iscsi_connection").join(&entry);
            let c = |f: &str| read_attr(&cdir.join(f));
            s.connections.push(Connection {
                name: entry.clone(),
                state: c("state"),
                persistent_address: c("persistent_address"),
                persistent_port: c("persistent_port"),
                address: c("address"),
                port: c("port"),
            });
        } else if entry.starts_with("target") {
            match entries(&path) {
                Ok(Some(luns)) => {
                    for (lun, lpath) in luns.into_iter().filter(|(n, _)| is_hctl(n)) {
                        s.devices
                            .push(read_scsi_device(&lun, &lpath, &mut s.problems));
                    }
                }
                Ok(None) => {}
                Err(e) => s.problems.push(e),
            }
        }
    }
    s
}

fn read_scsi_device(hctl: &str, dir: &Path, problems: &mut Vec<String>) -> ScsiDevice {
    let mut d = ScsiDevice {
        hctl: hctl.to_string(),
        state: read_attr(&dir.join("state")),
        blocks: Vec::new(),
    };
    let blocks = match entries(&dir.join("block")) {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => {
            problems.push(e);
            Vec::new()
        }
    };
    for (name, bdir) in blocks {
        let mut children = Vec::new();
        match entries(&bdir) {
            Ok(Some(sub)) => {
                for (sname, spath) in sub {
                    if spath.join("partition").exists() {
                        children.push((sname, read_attr(&spath.join("dev"))));
                    }
                }
            }
            Ok(None) => {}
            Err(e) => problems.push(e),
        }
        match entries(&bdir.join("holders")) {
            Ok(Some(holders)) => {
                for (hname, hpath) in holders {
                    children.push((hname, read_attr(&hpath.join("dev"))));
                }
            }
            Ok(None) => {}
            Err(e) => problems.push(e),
        }
        d.blocks.push(BlockDev {
            dev: read_attr(&bdir.join("dev")),
            name,
            children,
        });
    }
    d
}

/// The PersistentVolume an iSCSI target serves, when its IQN tells: OpenEBS Jiva and cStor use
/// `iqn.2016-09.com.openebs.jiva:<pv>` / `…cstor:<pv>`; other provisioners are recognised when the
/// name after the last `:` is a Kubernetes-generated PV name (`pvc-<uid>`).
pub fn pv_from_iqn(iqn: &str) -> Option<&str> {
    let (authority, name) = iqn.rsplit_once(':')?;
    if name.is_empty() {
        return None;
    }
    let openebs =
        authority.ends_with(".com.openebs.jiva") || authority.ends_with(".com.openebs.cstor");
    if openebs || name.starts_with("pvc-") {
        Some(name)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p = std::env::temp_dir().join(format!(
                "node-iscsi-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Tmp(p)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    /// A minimal real-layout session: host2/session1 with one connection and one disk.
    fn session(sys: &Path, host: u32, sid: u32, state: &str, disk: Option<(&str, &str)>) {
        let sdev = sys.join(format!("devices/platform/host{host}/session{sid}"));
        let attrs = sdev.join(format!("iscsi_session/session{sid}"));
        write(&attrs.join("state"), &format!("{state}\n"));
        write(&attrs.join("recovery_tmo"), "120\n");
        write(
            &attrs.join("targetname"),
            "iqn.2016-09.com.openebs.jiva:pvc-1\n",
        );
        symlink(format!("../../../session{sid}"), attrs.join("device")).unwrap();
        std::fs::create_dir_all(sys.join("class/iscsi_session")).unwrap();
        symlink(
            format!("../../devices/platform/host{host}/session{sid}/iscsi_session/session{sid}"),
            sys.join(format!("class/iscsi_session/session{sid}")),
        )
        .unwrap();
        let conn = sdev.join(format!(
            "connection{sid}:0/iscsi_connection/connection{sid}:0"
        ));
        write(&conn.join("state"), "up\n");
        write(&conn.join("persistent_address"), "10.0.0.7\n");
        write(&conn.join("persistent_port"), "3260\n");
        if let Some((sd, dev)) = disk {
            let lun = sdev.join(format!("target{host}:0:0/{host}:0:0:0"));
            write(&lun.join("state"), "running\n");
            write(&lun.join(format!("block/{sd}/dev")), &format!("{dev}\n"));
        }
    }

    #[test]
    fn reads_the_real_layout_through_the_class_symlink() {
        let t = Tmp::new("layout");
        let sys = t.0.join("sys");
        session(&sys, 2, 1, "LOGGED_IN", Some(("sdb", "8:16")));
        session(&sys, 3, 10, "FAILED", None);
        session(&sys, 4, 2, "FREE", None);
        let s = read(&sys).unwrap();
        assert!(s.class_present);
        let names: Vec<_> = s.sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["session1", "session2", "session10"]);
        let s1 = &s.sessions[0];
        assert_eq!(s1.state, Attr::Value("LOGGED_IN".into()));
        assert_eq!(s1.recovery_tmo(), Some(RecoveryTmo::Secs(120)));
        assert_eq!(s1.portal().as_deref(), Some("10.0.0.7:3260"));
        assert_eq!(s1.connections[0].state.value(), Some("up"));
        assert_eq!(s1.devices.len(), 1);
        assert_eq!(s1.devices[0].hctl, "2:0:0:0");
        assert_eq!(s1.devices[0].blocks[0].name, "sdb");
        assert_eq!(s1.devices[0].blocks[0].dev.value(), Some("8:16"));
        assert_eq!(s1.tpgt, Attr::Missing);
        assert!(s1.problems.is_empty(), "{:?}", s1.problems);
        assert_eq!(s.sessions[2].state.value(), Some("FAILED"));
    }

    #[test]
    fn no_class_is_no_sessions() {
        let t = Tmp::new("noclass");
        std::fs::create_dir_all(t.0.join("class")).unwrap();
        let s = read(&t.0).unwrap();
        assert!(!s.class_present);
        assert!(s.sessions.is_empty());
    }

    #[test]
    fn without_device_link_the_grandparent_is_used() {
        let t = Tmp::new("nolink");
        let sys = t.0.join("sys");
        session(&sys, 2, 1, "LOGGED_IN", Some(("sdb", "8:16")));
        std::fs::remove_file(
            sys.join("devices/platform/host2/session1/iscsi_session/session1/device"),
        )
        .unwrap();
        let s = read(&sys).unwrap();
        assert_eq!(s.sessions[0].devices.len(), 1);
    }

    #[test]
    fn unreadable_attribute_is_an_error_naming_the_file() {
        let t = Tmp::new("unreadable");
        let sys = t.0.join("sys");
        session(&sys, 2, 1, "LOGGED_IN", None);
        // A directory where the attribute should be: read fails with EISDIR even for root.
        let state = sys.join("devices/platform/host2/session1/iscsi_session/session1/state");
        std::fs::remove_file(&state).unwrap();
        std::fs::create_dir(&state).unwrap();
        let s = read(&sys).unwrap();
        let e = s.sessions[0].state.error().expect("an error");
        assert_eq!(e.errno, Some(nix::libc::EISDIR));
        assert!(e.to_string().contains("session1/state"), "{e}");
        assert!(e.to_string().contains("EISDIR"), "{e}");
    }

    #[test]
    fn dangling_class_link_is_a_problem_not_a_crash() {
        let t = Tmp::new("dangling");
        let sys = t.0.join("sys");
        std::fs::create_dir_all(sys.join("class/iscsi_session")).unwrap();
        symlink(
            "../../devices/platform/host9/session9/iscsi_session/session9",
            sys.join("class/iscsi_session/session9"),
        )
        .unwrap();
        let s = read(&sys).unwrap();
        assert_eq!(s.sessions.len(), 1);
        assert_eq!(s.sessions[0].state, Attr::Missing);
        assert!(!s.sessions[0].problems.is_empty());
    }

    #[test]
    fn partitions_and_holders_are_children() {
        let t = Tmp::new("children");
        let sys = t.0.join("sys");
        session(&sys, 2, 1, "LOGGED_IN", Some(("sdb", "8:16")));
        let bdir = sys.join("devices/platform/host2/session1/target2:0:0/2:0:0:0/block/sdb");
        write(&bdir.join("sdb1/partition"), "1\n");
        write(&bdir.join("sdb1/dev"), "8:17\n");
        write(&bdir.join("queue/rotational"), "0\n");
        write(&sys.join("devices/virtual/block/dm-0/dev"), "253:0\n");
        std::fs::create_dir_all(bdir.join("holders")).unwrap();
        symlink(
            "../../../../../../../../virtual/block/dm-0",
            bdir.join("holders/dm-0"),
        )
        .unwrap();
        let s = read(&sys).unwrap();
        let b = &s.sessions[0].devices[0].blocks[0];
        let kids: Vec<_> = b
            .children
            .iter()
            .map(|(n, d)| (n.as_str(), d.show()))
            .collect();
        assert_eq!(kids, [("sdb1", "8:17".into()), ("dm-0", "253:0".into())]);
    }

    #[test]
    fn recovery_tmo_forms() {
        assert_eq!(RecoveryTmo::parse("120"), Some(RecoveryTmo::Secs(120)));
        assert_eq!(RecoveryTmo::parse("off"), Some(RecoveryTmo::Off));
        assert_eq!(RecoveryTmo::parse("-1"), Some(RecoveryTmo::Off));
        assert_eq!(RecoveryTmo::parse("soon"), None);
        assert_eq!(RecoveryTmo::Off.to_string(), "off");
        assert_eq!(RecoveryTmo::Secs(300).to_string(), "300s");
    }

    #[test]
    fn portal_prefers_persistent_and_brackets_v6() {
        let mut c = Connection {
            name: "connection1:0".into(),
            state: Attr::Missing,
            persistent_address: Attr::Missing,
            persistent_port: Attr::Missing,
            address: Attr::Value("10.1.1.1".into()),
            port: Attr::Value("3261".into()),
        };
        assert_eq!(c.portal().as_deref(), Some("10.1.1.1:3261"));
        c.persistent_address = Attr::Value("fd00::7".into());
        c.persistent_port = Attr::Value("3260".into());
        assert_eq!(c.portal().as_deref(), Some("[fd00::7]:3260"));
        c.persistent_address = Attr::Missing;
        c.address = Attr::Missing;
        assert_eq!(c.portal(), None);
    }

    #[test]
    fn pv_names_from_iqns() {
        assert_eq!(
            pv_from_iqn("iqn.2016-09.com.openebs.jiva:pvc-746b2837-1c2d-4e5f-8a9b-0123456789ab"),
            Some("pvc-746b2837-1c2d-4e5f-8a9b-0123456789ab")
        );
        assert_eq!(
            pv_from_iqn("iqn.2016-09.com.openebs.jiva:my-volume"),
            Some("my-volume")
        );
        assert_eq!(
            pv_from_iqn("iqn.2016-09.com.openebs.cstor:pvc-1"),
            Some("pvc-1")
        );
        assert_eq!(
            pv_from_iqn("iqn.2003-01.org.linux-iscsi.nas:pvc-9"),
            Some("pvc-9")
        );
        assert_eq!(pv_from_iqn("iqn.2003-01.org.linux-iscsi.nas:lun7"), None);
        assert_eq!(pv_from_iqn("iqn.2016-09.com.openebs.jiva:"), None);
        assert_eq!(pv_from_iqn("no-colon"), None);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["session10", "session9", "session1", "2:0:0:10", "2:0:0:9"];
        v.sort_by_key(|s| natural_key(s));
        assert_eq!(
            v,
            ["2:0:0:9", "2:0:0:10", "session1", "session9", "session10"]
        );
        assert!(is_hctl("2:0:0:0"));
        assert!(!is_hctl("power"));
        assert!(!is_hctl("2:0:0"));
    }
}
