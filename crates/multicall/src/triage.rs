//! `k8s-storage-checks triage`: the suite's checks run at once for this node, their findings
//! joined into chains (the `triage` crate). Reachable as the first argument only.

use super::{Applet, APPLETS};
use std::ffi::OsString;

/// The subcommand.
pub const SUB: &str = "triage";

/// The applet: no link of this name is installed.
pub static APPLET: Applet = Applet {
    name: SUB,
    caps: &[],
    about: super::about::<triage::Opts>,
    longs: super::longs::<triage::Opts>,
    run: main_from,
};

/// The triage for `name`, if it is its name.
pub fn applet(name: &str) -> Option<&'static Applet> {
    (name == SUB).then_some(&APPLET)
}

/// Every check of the program, with the long options it takes.
pub fn checks() -> Vec<triage::CheckSpec> {
    APPLETS
        .iter()
        .filter(|a| a.name.starts_with("check_"))
        .map(|a| triage::CheckSpec {
            name: a.name,
            longs: (a.longs)(),
        })
        .collect()
}

fn main_from(args: Vec<OsString>) -> i32 {
    triage::main_from(args, &checks())
}
