//! The block devices a kernel message's device name stands for, read in sysfs (for
//! check_storage_kernel_errors; best effort like [`crate::blockdev`]: what cannot be read gives
//! the name itself).
//!
//! ```text
//! <sys>/class/block/dm-3/dm/name              mpatha     (/dev/mapper/mpatha is dm-3)
//! <sys>/class/block/dm-3/slaves/sdc           (multipath paths, LVM physical volumes)
//! <sys>/class/nvme/nvme0/nvme0n1              (a namespace of controller nvme0)
//! <sys>/class/nvme/nvme0/nvme1c0n1            (native NVMe multipath: the path of controller 0
//!                                              to namespace 1 of subsystem 1; the disk that is
//!                                              mounted is the head, nvme1n1)
//! ```

use std::path::Path;

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `nvme<subsys>c<ctrl>n<ns>` (a native-multipath path device) → `nvme<subsys>n<ns>`, the head
/// disk the filesystem sits on. Pure.
pub fn nvme_head(name: &str) -> Option<String> {
    let rest = name.strip_prefix("nvme")?;
    let (subsys, rest) = rest.split_once('c')?;
    let (ctrl, ns) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(subsys) && digits(ctrl) && digits(ns)).then(|| format!("nvme{subsys}n{ns}"))
}

/// `nvme<N>` alone: an NVMe controller (not a namespace). Pure.
pub fn is_nvme_controller(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The disks of NVMe controller `ctrl` (`nvme0` → `nvme0n1`, `nvme0n2`; with native multipath
/// its path devices' heads), sorted, without duplicates.
pub fn nvme_namespaces(sys: &Path, ctrl: &str) -> Vec<String> {
    let mut out: Vec<String> = names_in(&sys.join("class/nvme").join(ctrl))
        .into_iter()
        .filter_map(|n| {
            if let Some(head) = nvme_head(&n) {
                return Some(head);
            }
            let ns = n.strip_prefix(ctrl)?.strip_prefix('n')?;
            (!ns.is_empty() && ns.bytes().all(|b| b.is_ascii_digit())).then_some(n)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The device-mapper device (`dm-3`) whose name (`/sys/class/block/dm-*/dm/name`) is `name`
/// (`mpatha`, `vg0-data`), as /dev/mapper/<name> calls it.
pub fn dm_by_name(sys: &Path, name: &str) -> Option<String> {
    names_in(&sys.join("class/block"))
        .into_iter()
        .filter(|d| d.starts_with("dm-"))
        .find(|d| {
            crate::read_small(&sys.join("class/block").join(d).join("dm/name")).as_deref()
                == Some(name)
        })
}

/// The devices below a device-mapper device (`slaves/`: multipath paths, LVM physical volumes).
pub fn dm_slaves(sys: &Path, dm: &str) -> Vec<String> {
    names_in(&sys.join("class/block").join(dm).join("slaves"))
}

/// The block devices a kernel message's device name stands for: a /dev/mapper name
/// (`mapper/mpatha`, as btrfs prints a device path) → its `dm-N`; an NVMe controller → its
/// namespaces; an NVMe multipath path device → its head; anything else → itself.
pub fn expand(sys: &Path, name: &str) -> Vec<String> {
    if let Some(m) = name.strip_prefix("mapper/") {
        return vec![dm_by_name(sys, m).unwrap_or_else(|| name.to_string())];
    }
    if is_nvme_controller(name) {
        let ns = nvme_namespaces(sys, name);
        if !ns.is_empty() {
            return ns;
        }
    }
    if let Some(head) = nvme_head(name) {
        return vec![head];
    }
    vec![name.to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_names_and_dm_names_in_a_sysfs_tree() {
        assert_eq!(nvme_head("nvme1c0n1").as_deref(), Some("nvme1n1"));
        assert_eq!(nvme_head("nvme0n1"), None);
        assert_eq!(nvme_head("nvme0c0"), None);
        assert!(is_nvme_controller("nvme12"));
        assert!(!is_nvme_controller("nvme0n1"));
        assert!(!is_nvme_controller("nvme"));
        let d = std::env::temp_dir().join(format!("node-blockname-{}", std::process::id()));
        let sys = d.join("sys");
        let mk = |p: &str, f: &str, v: &str| {
            std::fs::create_dir_all(sys.join(p)).unwrap();
            std::fs::write(sys.join(p).join(f), v).unwrap();
        };
        mk("class/nvme/nvme0/nvme0n1", "dev", "259:0\n");
        mk("class/nvme/nvme0/nvme0n2", "dev", "259:1\n");
        mk("class/nvme/nvme0", "state", "live\n");
        mk("class/nvme/nvme2/nvme1c2n1", "x", "");
        mk("class/nvme/nvme3/nvme1c3n1", "x", "");
        mk("class/block/dm-0/dm", "name", "vg0-root\n");
        mk("class/block/dm-3/dm", "name", "mpatha\n");
        mk("class/block/dm-3/slaves/sdc", "x", "");
        mk("class/block/dm-3/slaves/sdd", "x", "");
        assert_eq!(expand(&sys, "nvme0"), ["nvme0n1", "nvme0n2"]);
        assert_eq!(expand(&sys, "nvme2"), ["nvme1n1"]);
        assert_eq!(expand(&sys, "nvme1c3n1"), ["nvme1n1"]);
        assert_eq!(expand(&sys, "nvme9"), ["nvme9"]);
        assert_eq!(expand(&sys, "mapper/mpatha"), ["dm-3"]);
        assert_eq!(expand(&sys, "mapper/gone"), ["mapper/gone"]);
        assert_eq!(expand(&sys, "sdc"), ["sdc"]);
        assert_eq!(dm_slaves(&sys, "dm-3"), ["sdc", "sdd"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
