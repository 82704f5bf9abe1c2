//! Log readers shared by the log-driven checks.
//!
//! - [`scan`]: constant-memory, grep-speed scanning of a byte stream for lines holding a needle
//!   (one big buffer, `memmem` over whole chunks; non-matching lines are never looked at one by one).
//! - [`files`]: log files read from where the last run stopped (inode + offset; rotation and
//!   truncation handled).
//! - [`journal`]: the systemd journal through `journalctl -o json`, time-bounded (the child is
//!   killed at the deadline), positioned by cursor or by `--since`.
//! - [`kmsg`]: `/dev/kmsg` records, non-blocking, one `read()` per record.
//! - [`time`]: klog/syslog headers without a year, Go `time.Time` and duration strings, RFC 3339.
//! - [`state`]: small JSON state files written atomically, one per check and source.
//! - [`tz`]: the zone of klog/syslog local times (`--tz`): fixed offsets, TZif files (the host's
//!   `/etc/localtime` in container mode) with their POSIX footer rules.
//! - [`wrap`]: lines wrapped by a container runtime (Docker json-file, CRI), detected per line,
//!   partial lines joined.

pub mod files;
pub mod journal;
pub mod kmsg;
pub mod kmsg_ref;
pub mod scan;
pub mod state;
pub mod time;
pub mod tz;
pub mod wrap;
