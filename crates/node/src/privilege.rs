//! Elevated privilege serves the node's own sources, never a path the caller chose.
//!
//! The mechanism lives in [`plugin::privilege`] (shared with `kube`, which opens `--kubeconfig`
//! and `--pods-json` the same way); this module keeps the names the node readers use. In short:
//! when a check runs with more privilege than its real user (`AT_SECURE`), the runtime lowers the
//! whole process to the caller's privilege before any check code runs; every path a user can name
//! is opened at the caller's level ([`open`]/[`read`]), and privilege is raised only around the
//! node's own default sources (the default kubelet roots, `/dev/kmsg`) with [`elevated_if`].

pub use plugin::privilege::{
    as_caller, elevated_if, open, open_with, read, secure as is_privileged, via_sudo,
};
