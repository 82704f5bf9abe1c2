//! Node state, read-only: the mount table, the kubelet's volume layout, filesystem error state,
//! and bounded-time probes of mount points. Every reader goes through [`Host`], so the same code
//! runs on the node and in a container that mounts the host at `/host`.

pub mod args;
pub mod atomic;
pub mod blockdev;
pub mod blockname;
pub mod csi;
pub mod fsstate;
pub mod history;
pub mod host;
pub mod iscsi;
pub mod kubelet;
pub mod logs;
pub mod mountinfo;
pub mod privilege;
pub mod probe;
pub mod usage;

pub use args::{
    FilterArgs, HostRootArg, KubeletRootArg, MountinfoArg, ProbeTimeoutArg, RunDirArg, SysArg,
};
pub use host::Host;
pub use mountinfo::Mount;

/// The largest small host file read whole: a sysfs or `/proc/sys` attribute is at most a page.
const SMALL_MAX: u64 = 4096;

/// A small text file of the host (a sysfs or `/proc/sys` attribute, `/etc/hostname`), trimmed:
/// `None` when it cannot be read or is longer than a page (then it is not such a file; under
/// `--sys`/`--host-root` it may be anything, `/dev/zero` included, and must not grow the memory).
pub(crate) fn read_small(path: &std::path::Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let b = plugin::capped::read_capped(f, SMALL_MAX).ok()??;
    Some(String::from_utf8_lossy(&b).trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn small_host_files_are_read_at_most_a_page() {
        // `--sys` or `--host-root` may name a tree whose attribute is /dev/zero.
        assert_eq!(super::read_small(std::path::Path::new("/dev/zero")), None);
        let p = std::env::temp_dir().join(format!("node-small-{}", std::process::id()));
        std::fs::write(&p, "8:32\n").unwrap();
        assert_eq!(super::read_small(&p).as_deref(), Some("8:32"));
        std::fs::write(&p, "x".repeat(4097)).unwrap();
        assert_eq!(super::read_small(&p), None);
        std::fs::remove_file(&p).unwrap();
    }
}
