//! Block devices in sysfs, so that a check can follow a kernel message's device (`sdc`, a SCSI
//! address, an iSCSI session) to everything a filesystem may sit on: partitions, device-mapper
//! holders, the disks of a SCSI device or of an iSCSI session.
//!
//! ```text
//! <sys>/class/block/sdc/dev                 8:32
//! <sys>/class/block/sdc/sdc1/partition      (a partition is a subdirectory with this file)
//! <sys>/class/block/sdc/holders/dm-0        (device mapper on top)
//! <sys>/class/scsi_device/3:0:0:0/device/block/sdc
//! <sys>/class/iscsi_session/session3/device/target3:0:0/3:0:0:0/block/sdc   (see crate::iscsi)
//! ```
//!
//! Everything here is best effort: an absent or unreadable entry gives fewer devices, never an
//! error (the caller's device is named in its finding either way).

use std::path::Path;

/// `maj:min` as the kernel writes it (`8:32`, trailing newline allowed).
pub fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn read_trim(p: &Path) -> Option<String> {
    crate::read_small(p)
}

fn names_in(dir: &Path) -> impl Iterator<Item = (String, std::path::PathBuf)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
}

/// A block device by name, its partitions and device-mapper holders (two levels: a partition's
/// holder, a holder's holder), each with its `maj:min` as written in sysfs. Devices without a
/// readable `dev` file are left out.
pub fn family(sys: &Path, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![(name.to_string(), 0)];
    while let Some((n, depth)) = todo.pop() {
        if out.iter().any(|(x, _): &(String, String)| *x == n) {
            continue;
        }
        let base = sys.join("class/block").join(&n);
        if let Some(dev) = read_trim(&base.join("dev")) {
            out.push((n.clone(), dev));
        }
        if depth >= 2 {
            continue;
        }
        for (c, path) in names_in(&base) {
            if c.starts_with(&n) && path.join("partition").exists() {
                todo.push((c, depth + 1));
            }
        }
        for (h, _) in names_in(&base.join("holders")) {
            todo.push((h, depth + 1));
        }
    }
    out
}

/// The block disks of a SCSI device `H:C:T:L` (`/sys/class/scsi_device/<addr>/device/block/*`).
pub fn scsi_disks(sys: &Path, addr: &str) -> Vec<String> {
    let p = sys
        .join("class/scsi_device")
        .join(addr)
        .join("device/block");
    names_in(&p).map(|(n, _)| n).collect()
}

/// The block disks of iSCSI session `n`, sorted: the session as [`crate::iscsi`] reads it.
pub fn session_disks(sys: &Path, n: u32) -> Vec<String> {
    let mut out: Vec<String> = crate::iscsi::read_one(sys, n)
        .map(|s| s.block_devices().map(|b| b.name.clone()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Why `sys` cannot be the sysfs to read, if it cannot: not a directory, unreadable, or without
/// a `class/` directory (a mistyped `--sys` must not read as "nothing there").
pub fn sysfs_problem(sys: &Path) -> Option<String> {
    match std::fs::metadata(sys) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Some(format!(
                "{} is not a directory: is --sys right?",
                sys.display()
            ))
        }
        Err(e) => {
            return Some(format!(
                "cannot read {}: {} (is --sys right?)",
                sys.display(),
                plugin::errtext(&e)
            ))
        }
    }
    match std::fs::metadata(sys.join("class")) {
        Ok(m) if m.is_dir() => None,
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Some(format!(
            "cannot read {}: {}",
            sys.join("class").display(),
            plugin::errtext(&e)
        )),
        _ => Some(format!(
            "{} has no class/ directory: not a sysfs (is --sys right?)",
            sys.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_follows_partitions_and_holders_and_disks_follow_scsi_and_sessions() {
        let d = std::env::temp_dir().join(format!("node-blockdev-{}", std::process::id()));
        let sys = d.join("sys");
        let mk = |p: &str, f: &str, v: &str| {
            std::fs::create_dir_all(sys.join(p)).unwrap();
            std::fs::write(sys.join(p).join(f), v).unwrap();
        };
        mk("class/block/sdc", "dev", "8:32\n");
        mk("class/block/sdc/sdc1", "partition", "1\n");
        mk("class/block/sdc1", "dev", "8:33\n");
        mk("class/block/sdc1/holders/dm-0", "x", "");
        mk("class/block/dm-0", "dev", "253:0\n");
        let mut f = family(&sys, "sdc");
        f.sort();
        assert_eq!(
            f,
            [
                ("dm-0".to_string(), "253:0".to_string()),
                ("sdc".into(), "8:32".into()),
                ("sdc1".into(), "8:33".into())
            ]
        );
        assert!(family(&sys, "sdz").is_empty());
        mk(
            "class/scsi_device/3:0:0:0/device/block/sdc",
            "dev",
            "8:32\n",
        );
        assert_eq!(scsi_disks(&sys, "3:0:0:0"), ["sdc"]);
        assert!(scsi_disks(&sys, "9:0:0:0").is_empty());
        mk(
            "class/iscsi_session/session3/device/target3:0:0/3:0:0:1/block/sdd",
            "dev",
            "8:48\n",
        );
        mk(
            "class/iscsi_session/session3/device/target3:0:0/3:0:0:0/block/sdc",
            "dev",
            "8:32\n",
        );
        assert_eq!(session_disks(&sys, 3), ["sdc", "sdd"]);
        assert!(session_disks(&sys, 4).is_empty());
        assert_eq!(parse_majmin("8:32\n"), Some((8, 32)));
        assert_eq!(parse_majmin("8-32"), None);
        assert_eq!(sysfs_problem(&sys), None);
        assert!(sysfs_problem(&d).unwrap().contains("no class/ directory"));
        assert!(sysfs_problem(&d.join("nope"))
            .unwrap()
            .contains("(ENOENT) (is --sys right?)"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
