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

/// The kernel's name of the block device `maj:min` (`sdc`, `dm-3`, `loop7`), from
/// `/sys/dev/block/<maj:min>` which links to `.../block/<name>`.
pub fn block_name(sys: &Path, major: u32, minor: u32) -> Option<String> {
    let link = std::fs::read_link(sys.join(format!("dev/block/{major}:{minor}"))).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn read_u64(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
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
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch))
        .to_string()
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
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn utc_format() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1783938484), "2026-07-13T10:28:04Z");
    }
}
