//! The device-usage map: block device (`maj:min`) → its mounts → the kubelet volume each one is
//! (PV name, pod UID), read once from the mount table for every check that must say what a
//! device carries.
//!
//! A node's table can hold 50 000 mounts and is read on every run: the map validates every line
//! borrowed, and copies the fields of the mounts it keeps into one per-run arena (one string)
//! instead of a handful of owned strings per mount.

use crate::kubelet::{self, KindRef};
use crate::mountinfo::{self, ParseError};
use std::path::{Path, PathBuf};

/// Which mounts the map keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only kubelet volume mounts (those [`kubelet::classify`] recognises).
    Volumes,
    /// Every mount (to name what a device carries, volume or not).
    All,
}

/// A piece of the arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    dev: (u32, u32),
    mount_point: Span,
    root: Span,
    source: Span,
    fstype: Span,
    super_options: Span,
    mount_ro: bool,
    /// Under a kubelet root, as a volume.
    kubelet: bool,
    block: bool,
    volume: Option<Span>,
    pod_uid: Option<Span>,
}

/// What the classifier said of a mount point, as spans of the arena.
#[derive(Debug, Clone, Copy, Default)]
struct Kind {
    kubelet: bool,
    block: bool,
    volume: Option<Span>,
    pod_uid: Option<Span>,
}

impl Kind {
    /// `k` borrows from `text`, which is the arena's `at`.
    fn of(k: KindRef<'_>, text: &str, at: Span) -> Kind {
        let base = text.as_ptr() as usize;
        let span = |s: &str| Span {
            start: at.start + (s.as_ptr() as usize - base) as u32,
            len: s.len() as u32,
        };
        Kind {
            kubelet: true,
            block: k.is_block(),
            volume: k.volume_name().map(span),
            pod_uid: k.pod_uid().map(span),
        }
    }
}

/// One mount of the map, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountUse<'a> {
    pub dev: (u32, u32),
    /// Unescaped.
    pub mount_point: &'a str,
    /// The path inside the filesystem mounted here (for a block-mode volume: the device node).
    pub root: &'a str,
    pub source: &'a str,
    pub fstype: &'a str,
    /// The superblock's options, comma-separated.
    pub super_options: &'a str,
    /// Per-mount `ro` (a read-only bind when the superblock is `rw`).
    pub mount_ro: bool,
    /// A kubelet volume mount (below a kubelet root, of a PV-backed kind).
    pub kubelet: bool,
    /// A block-mode volume path (published or staged device node).
    pub block: bool,
    /// The PV (or volume) name the path tells.
    pub volume: Option<&'a str>,
    pub pod_uid: Option<&'a str>,
}

impl MountUse<'_> {
    pub fn mount_point_path(&self) -> &Path {
        Path::new(self.mount_point)
    }
}

/// The map itself. Build it with [`DeviceUsage::read`] (the node) or [`DeviceUsage::parse`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceUsage {
    arena: String,
    entries: Vec<Entry>,
    /// (device, entry index), sorted: the mounts of one device are one binary search away.
    by_dev: Vec<((u32, u32), u32)>,
}

impl DeviceUsage {
    /// Read the mount table at `path`; errors are one line an operator understands.
    pub fn read(path: &Path, roots: &[PathBuf], scope: Scope) -> Result<DeviceUsage, String> {
        mountinfo::with_text(path, |text, label| {
            DeviceUsage::parse(text, label, roots, scope)
        })
    }

    /// [`DeviceUsage::read`] and [`mountinfo::holding`] in one pass over the table at `path`: the map,
    /// and the mount holding each of `paths`. A table of 50 000
    /// mounts costs the kernel about 90 ms of CPU to write each time it is read.
    pub fn read_holding(
        path: &Path,
        roots: &[PathBuf],
        scope: Scope,
        paths: &[PathBuf],
    ) -> Result<(DeviceUsage, Vec<Option<crate::Mount>>), String> {
        mountinfo::with_text(path, |text, label| {
            DeviceUsage::parse_holding(text, label, roots, scope, paths)
        })
    }

    /// [`DeviceUsage::parse`] and [`mountinfo::holding`] in one pass.
    pub fn parse_holding(
        text: &str,
        label: &str,
        roots: &[PathBuf],
        scope: Scope,
        paths: &[PathBuf],
    ) -> Result<(DeviceUsage, Vec<Option<crate::Mount>>), ParseError> {
        let mut h = mountinfo::Holding::new(paths);
        let map = DeviceUsage::parse_each(text, label, roots, scope, |raw| h.offer(raw))?;
        Ok((map, h.finish()))
    }

    /// Build the map from a mountinfo text (`label` names it in errors).
    pub fn parse(
        text: &str,
        label: &str,
        roots: &[PathBuf],
        scope: Scope,
    ) -> Result<DeviceUsage, ParseError> {
        DeviceUsage::parse_each(text, label, roots, scope, |_| {})
    }

    /// [`DeviceUsage::parse`], also handing every validated line to `also`.
    fn parse_each(
        text: &str,
        label: &str,
        roots: &[PathBuf],
        scope: Scope,
        mut also: impl FnMut(&mountinfo::Raw<'_>),
    ) -> Result<DeviceUsage, ParseError> {
        // Only mount points below a root can be volumes: a byte prefix test on the escaped text
        // spares the classification of every other line.
        let prefixes: Vec<String> = roots
            .iter()
            .map(|r| {
                format!(
                    "{}/",
                    mountinfo::escape(&r.to_string_lossy()).trim_end_matches('/')
                )
            })
            .collect();
        let canonical = prefixes.iter().all(|p| {
            p.starts_with('/') && !p.contains("//") && !p.contains("/./") && !p.contains("/../")
        });
        let maybe_volume =
            |mp: &str| !canonical || prefixes.iter().any(|p| mp.starts_with(p.as_str()));
        let mut map = DeviceUsage::default();
        // Every kept field is at most as long as the line it comes from: reserving the text's
        // size once spares the arena its doublings (pages never written are never touched).
        map.arena.reserve(text.len());
        mountinfo::for_each_line(text, label, |raw| {
            also(&raw);
            let candidate = maybe_volume(raw.mount_point);
            if scope == Scope::Volumes && !candidate {
                return;
            }
            map.add(&raw, if candidate { roots } else { &[] }, scope);
        })?;
        map.index();
        Ok(map)
    }

    /// Build the map from parsed mounts (tests, and callers that hold a parsed table already).
    pub fn from_mounts(mounts: &[crate::Mount], roots: &[PathBuf], scope: Scope) -> DeviceUsage {
        let mut text = String::new();
        for m in mounts {
            use std::fmt::Write as _;
            let _ = writeln!(
                text,
                "{} {} {}:{} {} {} {}{}{} - {} {} {}",
                m.id,
                m.parent,
                m.major,
                m.minor,
                mountinfo::escape(&m.root),
                mountinfo::escape(&m.mount_point.to_string_lossy()),
                m.mount_options,
                if m.optional.is_empty() { "" } else { " " },
                m.optional,
                m.fstype,
                mountinfo::escape(&m.source),
                m.super_options
            );
        }
        DeviceUsage::parse(&text, "mounts", roots, scope).unwrap_or_default()
    }

    fn push(&mut self, s: &str) -> Span {
        let start = self.arena.len();
        self.arena.push_str(s);
        Span {
            start: start as u32,
            len: (self.arena.len() - start) as u32,
        }
    }

    fn push_unescaped(&mut self, s: &str) -> Span {
        let start = self.arena.len();
        mountinfo::unescape_into(s, &mut self.arena);
        Span {
            start: start as u32,
            len: (self.arena.len() - start) as u32,
        }
    }

    fn text(&self, s: Span) -> &str {
        &self.arena[s.start as usize..(s.start + s.len) as usize]
    }

    fn add(&mut self, raw: &mountinfo::Raw<'_>, roots: &[PathBuf], scope: Scope) {
        let mark = self.arena.len();
        // The mount point goes into the arena; what the classifier borrows from it (PV name,
        // pod UID) is kept as spans of it. Without escapes the raw text is classified first, so
        // the thousands of secrets and projected volumes of a node are never copied.
        let (mount_point, kind) = if raw.mount_point.contains('\\') {
            let mp = self.push_unescaped(raw.mount_point);
            let kind = kubelet::classify_str(self.text(mp), roots)
                .map(|(_, k)| Kind::of(k, self.text(mp), mp));
            (mp, kind)
        } else {
            let kind = kubelet::classify_str(raw.mount_point, roots);
            if scope == Scope::Volumes && kind.is_none() {
                return;
            }
            let mp = self.push(raw.mount_point);
            (mp, kind.map(|(_, k)| Kind::of(k, raw.mount_point, mp)))
        };
        if scope == Scope::Volumes && kind.is_none() {
            self.arena.truncate(mark);
            return;
        }
        let kind = kind.unwrap_or_default();
        let root = self.push_unescaped(raw.root);
        let source = self.push_unescaped(raw.source);
        let fstype = self.push(raw.fstype);
        let super_options = self.push(raw.super_options);
        self.entries.push(Entry {
            dev: (raw.major, raw.minor),
            mount_point,
            root,
            source,
            fstype,
            super_options,
            mount_ro: raw.mount_options.split(',').any(|o| o == "ro"),
            kubelet: kind.kubelet,
            block: kind.block,
            volume: kind.volume,
            pod_uid: kind.pod_uid,
        });
    }

    fn index(&mut self) {
        self.by_dev = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.dev, i as u32))
            .collect();
        self.by_dev.sort_unstable();
    }

    fn view(&self, e: &Entry) -> MountUse<'_> {
        MountUse {
            dev: e.dev,
            mount_point: self.text(e.mount_point),
            root: self.text(e.root),
            source: self.text(e.source),
            fstype: self.text(e.fstype),
            super_options: self.text(e.super_options),
            mount_ro: e.mount_ro,
            kubelet: e.kubelet,
            block: e.block,
            volume: e.volume.map(|s| self.text(s)),
            pod_uid: e.pod_uid.map(|s| self.text(s)),
        }
    }

    /// How many mounts the map holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every mount kept, in the table's order.
    pub fn uses(&self) -> impl Iterator<Item = MountUse<'_>> {
        self.entries.iter().map(|e| self.view(e))
    }

    /// The mounts of one device, in the table's order.
    pub fn on(&self, dev: (u32, u32)) -> impl Iterator<Item = MountUse<'_>> {
        let from = self.by_dev.partition_point(|(d, _)| *d < dev);
        self.by_dev[from..]
            .iter()
            .take_while(move |(d, _)| *d == dev)
            .map(|(_, i)| self.view(&self.entries[*i as usize]))
    }

    /// The kubelet volumes on these devices: PV names in order of discovery (after `first`,
    /// those already known) and the UIDs of the pods whose volume mounts use them, sorted.
    pub fn volumes_on(
        &self,
        devs: impl IntoIterator<Item = (u32, u32)>,
        first: Vec<String>,
    ) -> (Vec<String>, Vec<String>) {
        let mut pvs = first;
        let mut uids: Vec<String> = Vec::new();
        for d in devs {
            for u in self.on(d) {
                if let Some(pv) = u.volume {
                    if !pvs.iter().any(|p| p == pv) {
                        pvs.push(pv.to_string());
                    }
                }
                if let Some(uid) = u.pod_uid {
                    if !uids.iter().any(|x| x == uid) {
                        uids.push(uid.to_string());
                    }
                }
            }
        }
        uids.sort();
        (pvs, uids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "/var/lib/kubelet";

    fn table() -> String {
        format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             30 1 8:33 / {K}/plugins/kubernetes.io/csi/pv/pvc-x/globalmount rw - ext4 /dev/sdc1 rw\n\
             31 1 8:33 / {K}/pods/u1/volumes/kubernetes.io~csi/pvc-x/mount ro,relatime shared:3 - ext4 /dev/sdc1 rw,emergency_ro\n\
             32 1 0:60 / {K}/pods/u1/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs tmpfs rw\n\
             33 1 8:33 / /mnt/with\\040space rw - ext4 /dev/sdc1 rw\n\
             34 1 0:5 /sdd {K}/pods/u2/volumeDevices/kubernetes.io~csi/pvc-b rw - devtmpfs udev rw\n"
        )
    }

    fn roots() -> Vec<PathBuf> {
        vec![PathBuf::from(K)]
    }

    #[test]
    fn every_mount_of_a_device_with_its_volume_and_pod() {
        let m = DeviceUsage::parse(&table(), "t", &roots(), Scope::All).unwrap();
        assert_eq!(m.len(), 6);
        let on: Vec<MountUse> = m.on((8, 33)).collect();
        assert_eq!(on.len(), 3);
        assert_eq!(on[0].volume, Some("pvc-x"));
        assert_eq!(on[0].pod_uid, None);
        assert!(on[0].kubelet && !on[0].mount_ro);
        assert_eq!(on[1].pod_uid, Some("u1"));
        assert!(on[1].mount_ro);
        assert_eq!(on[1].super_options, "rw,emergency_ro");
        assert_eq!(on[2].mount_point, "/mnt/with space");
        assert!(!on[2].kubelet && on[2].volume.is_none());
        assert_eq!(on[2].source, "/dev/sdc1");
        assert_eq!(m.on((8, 99)).count(), 0);
        let (pvs, uids) = m.volumes_on([(8, 33), (0, 5)], vec!["pvc-iqn".into()]);
        assert_eq!(pvs, ["pvc-iqn", "pvc-x", "pvc-b"]);
        assert_eq!(uids, ["u1", "u2"]);
        let b = m.on((0, 5)).next().unwrap();
        assert!(b.block && b.root == "/sdd" && b.fstype == "devtmpfs");
    }

    #[test]
    fn the_volume_scope_keeps_only_kubelet_volumes_but_validates_every_line() {
        let m = DeviceUsage::parse(&table(), "t", &roots(), Scope::Volumes).unwrap();
        let points: Vec<&str> = m.uses().map(|u| u.mount_point).collect();
        assert_eq!(points.len(), 3, "{points:?}");
        assert!(points.iter().all(|p| p.starts_with(K)));
        let bad = format!("{}garbage line\n", table());
        let e = DeviceUsage::parse(&bad, "t", &roots(), Scope::Volumes).unwrap_err();
        assert_eq!(e.line, 7);
        // A root written with a trailing slash or `.` still matches component-wise.
        for r in [
            "/var/lib/kubelet/",
            "/var/lib/./kubelet",
            "/var/lib//kubelet",
        ] {
            let m = DeviceUsage::parse(&table(), "t", &[PathBuf::from(r)], Scope::Volumes).unwrap();
            assert_eq!(m.len(), 3, "{r}");
        }
    }

    #[test]
    fn an_escaped_volume_path_is_named_unescaped() {
        let t = format!(
            "40 1 8:48 / {K}/pods/u3/volumes/kubernetes.io~csi/pvc\\040sp/mount rw - ext4 /dev/sdd rw\n\
             41 1 0:61 / {K}/pods/u3/volumes/kubernetes.io~secret/a\\040b rw - tmpfs tmpfs rw\n"
        );
        for scope in [Scope::Volumes, Scope::All] {
            let m = DeviceUsage::parse(&t, "t", &roots(), scope).unwrap();
            let u = m.on((8, 48)).next().unwrap();
            assert_eq!(u.volume, Some("pvc sp"));
            assert_eq!(u.pod_uid, Some("u3"));
            assert_eq!(m.len(), if scope == Scope::All { 2 } else { 1 });
        }
    }

    #[test]
    fn parsed_mounts_give_the_same_map() {
        let mounts = mountinfo::parse(&table(), "t").unwrap();
        let a = DeviceUsage::from_mounts(&mounts, &roots(), Scope::All);
        let b = DeviceUsage::parse(&table(), "t", &roots(), Scope::All).unwrap();
        assert_eq!(a.uses().collect::<Vec<_>>(), b.uses().collect::<Vec<_>>());
    }

    #[test]
    fn one_pass_gives_the_map_and_the_holding_mounts() {
        let paths = [PathBuf::from(K), PathBuf::from("/")];
        for scope in [Scope::Volumes, Scope::All] {
            let (m, held) =
                DeviceUsage::parse_holding(&table(), "t", &roots(), scope, &paths).unwrap();
            assert_eq!(
                m,
                DeviceUsage::parse(&table(), "t", &roots(), scope).unwrap()
            );
            assert_eq!(held, mountinfo::holding(&table(), "t", &paths).unwrap());
            assert_eq!(held[0].as_ref().map(|m| m.id), Some(1));
        }
        let bad = format!("{}garbage line\n", table());
        let e =
            DeviceUsage::parse_holding(&bad, "t", &roots(), Scope::Volumes, &paths).unwrap_err();
        assert_eq!(e.line, 7);
    }

    #[test]
    fn read_names_an_unreadable_table() {
        let e = DeviceUsage::read(Path::new("/nonexistent/mi"), &roots(), Scope::All).unwrap_err();
        assert!(e.starts_with("cannot read /nonexistent/mi"), "{e}");
    }
}
