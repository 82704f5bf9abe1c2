//! The monitoring-plugin protocol, implemented once for the whole suite.
//!
//! A check is a `clap::Parser` options struct that flattens [`CommonArgs`] and implements
//! [`Check`]; no check has a `main` of its own: the one program (`crates/multicall`) runs each
//! by its name through [`main_from`]`::<Opts>(args)`, a row of its `APPLETS`. The runtime guarantees the
//! protocol: exit codes 0..3 only (usage errors, `--help`, `--version` and panics exit 3), a
//! status line first, sanitised text, capped output, and a watchdog that answers when the
//! deadline passes even if the gathering thread is stuck.

pub mod args;
pub mod capped;
pub mod deadline;
pub mod mapped;
pub mod next;
mod parent;
pub mod privilege;
pub mod range;
pub mod render;
pub mod report;
mod runtime;
pub mod shell;
mod status;
pub mod time;

pub use range::{fmt_bytes, fmt_duration, fmt_num, parse_duration, Range, Thresholds};
pub use render::{sanitize, Format};
pub use report::{
    count, count_of, runbook_of, Finding, Perfdata, Report, Subject, Uom, SUBJECT_FIELDS,
};
pub use runtime::{main, main_from, run_with_args, Check, CommonArgs, Ctx, Timeout, Unknown};
pub use shell::shell_quote;
pub use status::Status;

/// An I/O error as an operator reads it: the message plus the errno name (`EACCES`).
pub fn errtext(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let name = nix::errno::Errno::from_raw(code);
            let msg = e.to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
            format!("{msg} ({name:?})")
        }
        None => e.to_string(),
    }
}
