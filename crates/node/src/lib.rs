//! Node state, read-only: the mount table, the kubelet's volume layout, filesystem error state,
//! and bounded-time probes of mount points. Every reader goes through [`Host`], so the same code
//! runs on the node and in a container that mounts the host at `/host`.

pub mod args;
pub mod blockdev;
pub mod fsstate;
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

/// Bytes as text, invalid sequences replaced: `String::from_utf8_lossy`, but valid input (nearly
/// all of it) is checked with the fast validator first; the lossy scan is several times slower
/// and shows on a 50 000-line mount table.
pub(crate) fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}
