//! What the kernel tells about a filesystem's health outside the mount table:
//! ext4's error counters in `/sys/fs/ext4/<dev>/` and a block device's read-only flag.

use std::path::Path;

/// ext4 error record (`/sys/fs/ext4/<dev>/errors_count`, `first_error_time`, `last_error_time`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ext4Errors {
    pub count: u64,
    /// Epoch seconds; 0 or absent when the kernel has none recorded.
    pub first_error_time: Option<u64>,
    pub last_error_time: Option<u64>,
}

/// The ext4 filesystems the kernel has error records for: `/sys/fs/ext4/<name>/`, indexed by
/// the block device's `maj:min` (from `/sys/class/block/<name>/dev`). Listing them once costs
/// two reads per ext4 filesystem on the node, instead of two lookups per PV mount.
#[derive(Debug, Clone, Default)]
pub struct Ext4Index {
    by_dev: std::collections::HashMap<(u32, u32), String>,
    names: std::collections::HashSet<String>,
}

impl Ext4Index {
    /// List `/sys/fs/ext4`; an absent or unreadable directory gives an empty index.
    pub fn read(sys: &Path) -> Ext4Index {
        let mut ix = Ext4Index::default();
        let Ok(rd) = std::fs::read_dir(sys.join("fs/ext4")) else {
            return ix;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "features" {
                continue;
            }
            let dev = crate::read_small(&sys.join("class/block").join(&name).join("dev"));
            if let Some((maj, min)) = dev.as_deref().and_then(|d| d.split_once(':')) {
                if let (Ok(maj), Ok(min)) = (maj.parse(), min.parse()) {
                    ix.by_dev.insert((maj, min), name.clone());
                }
            }
            ix.names.insert(name);
        }
        ix
    }

    /// The ext4 sysfs name of the filesystem on `maj:min` (or, failing that, of `/dev/<name>`
    /// in `source`), if the kernel keeps error records for it.
    pub fn name(&self, major: u32, minor: u32, source: &str) -> Option<&str> {
        if let Some(n) = self.by_dev.get(&(major, minor)) {
            return Some(n);
        }
        let n = source.strip_prefix("/dev/")?;
        self.names.get(n).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

fn read_u64(path: &std::path::Path) -> Option<u64> {
    crate::read_small(path)?.parse().ok()
}

/// ext4 errors of the filesystem on block device `name`; `None` when the kernel has no such
/// ext4 directory (not ext4, or not mounted).
pub fn ext4_errors(sys: &Path, name: &str) -> Option<Ext4Errors> {
    let dir = sys.join("fs/ext4").join(name);
    if !dir.is_dir() {
        return None;
    }
    let count = read_u64(&dir.join("errors_count")).unwrap_or(0);
    let nz = |v: Option<u64>| v.filter(|t| *t > 0);
    Some(Ext4Errors {
        count,
        first_error_time: nz(read_u64(&dir.join("first_error_time"))),
        last_error_time: nz(read_u64(&dir.join("last_error_time"))),
    })
}

/// The block device's read-only flag (`/sys/class/block/<name>/ro`).
pub fn block_readonly(sys: &Path, name: &str) -> Option<bool> {
    read_u64(&sys.join("class/block").join(name).join("ro")).map(|v| v == 1)
}

/// Epoch seconds as RFC 3339 UTC.
pub fn utc(epoch: u64) -> String {
    plugin::time::format_rfc3339(i64::try_from(epoch).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ext4_errors_from_a_sysfs_tree() {
        let d = std::env::temp_dir().join(format!("fsstate-{}", std::process::id()));
        let e = d.join("sys/fs/ext4/sdc");
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(e.join("errors_count"), "3\n").unwrap();
        std::fs::write(e.join("first_error_time"), "1783938484\n").unwrap();
        std::fs::write(e.join("last_error_time"), "0\n").unwrap();
        let b = d.join("sys/class/block/sdc");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("ro"), "1\n").unwrap();
        let sys = d.join("sys");
        let got = ext4_errors(&sys, "sdc").unwrap();
        assert_eq!(got.count, 3);
        assert_eq!(got.first_error_time, Some(1783938484));
        assert_eq!(got.last_error_time, None);
        assert_eq!(ext4_errors(&sys, "sdd"), None);
        assert_eq!(block_readonly(&sys, "sdc"), Some(true));
        // The index maps maj:min through /sys/class/block/<name>/dev, and /dev/<name> sources.
        std::fs::create_dir_all(d.join("sys/fs/ext4/features")).unwrap();
        std::fs::create_dir_all(d.join("sys/fs/ext4/dm-3")).unwrap();
        std::fs::write(b.join("dev"), "8:32\n").unwrap();
        let ix = Ext4Index::read(&sys);
        assert!(!ix.is_empty());
        assert_eq!(ix.name(8, 32, "/dev/whatever"), Some("sdc"));
        assert_eq!(ix.name(253, 3, "/dev/dm-3"), Some("dm-3"));
        assert_eq!(ix.name(253, 4, "/dev/features"), None);
        assert_eq!(ix.name(8, 48, "/dev/sdd"), None);
        assert!(Ext4Index::read(&d.join("nonexistent")).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn utc_format() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1783938484), "2026-07-13T10:28:04Z");
        // A garbled sysfs time far past any calendar still formats (SystemTime + Duration
        // panicked on it before the formatter was plugin's).
        assert!(utc(u64::MAX).ends_with('Z'));
    }
}
