//! The end-to-end tests, one binary (as ripgrep's `tests/tests.rs` and uutils' `tests/by-util/`):
//! one module per check, then one per concern that spans the suite. The shared fixture builders
//! (kubelet trees, Pods/PVs/events, mounts, sysfs trees, kubelet logs, the API server) are in the
//! harness crate, `tests/src/`.
//!
//! Run one module with a filter: `cargo test -p e2e --test e2e stale_csi_mounts::`. Tests that
//! change the machine take `e2e::exclusive()` (see `tests/src/serial.rs`); everything else runs
//! in parallel.

// One module per check.
mod csi_node_plugins;
mod iscsi_sessions;
mod jiva_rep_crashloop;
mod jiva_status;
mod kubelet_nested_ops;
mod longhorn_volumes;
mod pv_capacity;
mod ro_pvc_mounts;
mod ro_pvc_mounts_issue31;
mod ro_pvc_mounts_names;
mod stale_csi_mounts;
mod stale_csi_mounts_in_tree;
mod storage_kernel_errors;
mod stuck_scheduled;
mod stuck_terminating;
mod talos;
mod volume_attachments;
mod watch_cache;

// The API checks against a real kube-apiserver (tests/control-plane).
mod real_apiserver;

// Issue 33: the API cost of a run is the node's own volumes.
mod api_cost;

// Issue 27's API-side findings (secrets, TLS, proxies, pods memory).
mod never_lose_api;

// The suite as a whole: protocol, options, output formats, every fault, privilege.
mod fault_matrix;
mod never_lose_node;
mod never_lose_worker;
mod plugin_protocol;
mod privilege;
mod structured_output;
mod suite_options;

// The code itself: the layers' rule.
mod layers;

// Shipping it: deployment files, packages, container mode, the engines, the quickstart.
mod container_mode;
mod deployment;
mod engines_chains_icinga;
mod engines_chains_nagios;
mod engines_icinga;
mod engines_nagios;
mod engines_prometheus;
mod from_zero;
mod icinga2_pair;
mod multicall;
mod next_steps;

// Issue 28: the /metrics endpoint (serve) and the manifests per distribution.
mod deploy_overlays;
mod notify_script;
mod nrpe_v2;
mod package;
mod prometheus_rules;
mod role_agents;
mod serve;
mod spec;

// Issue 26: the docs hold to the programs (commands, options, links, runbooks).
mod docs;

// Issue 26: the man pages made by clap_mangen, read with man -l.
mod man_pages;

// Issue 32: the memory of a volume (--state-dir: each PV's read-only, degraded, stuck spells).
mod memory_of_a_volume;

// Issue 29: delivery (arm64 under qemu-user; project metadata, OCI images, release workflow).
mod arm64;
mod delivery;

// Issue 35: the "add a check" checklist (docs/development.md#adding-a-check), held to every check.
mod add_a_check;
// Issue 35: the shape of a check (docs/development.md#the-shape-of-a-check), held to every check.
mod check_shape;
// Issue 32: one incident, one chain.
mod triage;

// Issue 32: one page per chain on the Prometheus path (Alertmanager inhibit rules).
mod engines_chains_prometheus;
