//! One program for the whole suite, as `coreutils` is for uutils: the name it is called by
//! (`argv[0]`, e.g. a `check_ro_pvc_mounts` link) or its first argument (`k8s-storage-checks
//! check_ro_pvc_mounts -t 20`) chooses the check, so the suite is linked once instead of ten times.
//!
//! File capabilities belong to the file, not to the name it is run by: installs keep one copy per
//! capability set (see [`copy_name`]) and link each check's name to the copy with its set; and
//! before a check runs, a privileged copy drops every capability that check does not need
//! ([`plugin::privilege::keep_only`]), so no name and no first argument can borrow a capability
//! meant for another check.
#![forbid(unsafe_code)]

use clap::CommandFactory;

pub mod receive_logs;
pub mod triage;
use plugin::Check;
use std::ffi::OsString;
use std::path::Path;

/// The multicall program's own name (and the prefix of its capability copies).
pub const PROGRAM: &str = "k8s-storage-checks";
/// The textfile runner's name (container mode's entry point), also reachable as [`TEXTFILE_SUB`].
pub const TEXTFILE: &str = "k8s-storage-checks-textfile";
/// The runner as a subcommand: `k8s-storage-checks textfile --dir ...`.
pub const TEXTFILE_SUB: &str = "textfile";
/// The `/metrics` server's name, also reachable as [`SERVE_SUB`].
pub const SERVE: &str = "k8s-storage-checks-serve";
/// The `/metrics` server as a subcommand: `k8s-storage-checks serve --listen ADDR:PORT ...`.
pub const SERVE_SUB: &str = "serve";

/// Subcommands of the program and the applet each one runs: `k8s-storage-checks SUB ...`.
pub static SUBCOMMANDS: &[(&str, &str)] = &[(TEXTFILE_SUB, TEXTFILE), (SERVE_SUB, SERVE)];

/// A Linux capability a check needs for the node's own sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Traverse and read the kubelet's root-only directories.
    DacReadSearch,
    /// Read /dev/kmsg when `kernel.dmesg_restrict` is set.
    Syslog,
}

impl Cap {
    /// The capability's number (linux/capability.h).
    pub fn number(self) -> u32 {
        match self {
            Cap::DacReadSearch => 2,
            Cap::Syslog => 34,
        }
    }

    /// The name `setcap`/`getcap` use.
    pub fn name(self) -> &'static str {
        match self {
            Cap::DacReadSearch => "cap_dac_read_search",
            Cap::Syslog => "cap_syslog",
        }
    }
}

/// Something this program can run: a check or the textfile runner.
pub struct Applet {
    /// The name it is called by (a link's name, or the first argument).
    pub name: &'static str,
    /// The capabilities it needs; a privileged copy keeps these and drops every other one.
    pub caps: &'static [Cap],
    /// One line saying what it does.
    about: fn() -> String,
    /// The long options it takes (`triage` passes each check the ones it has).
    pub longs: fn() -> Vec<String>,
    run: fn(Vec<OsString>) -> i32,
}

impl Applet {
    /// The capability mask this applet keeps (bit n: capability n).
    pub fn mask(&self) -> u64 {
        self.caps.iter().fold(0, |m, c| m | 1u64 << c.number())
    }

    /// The capabilities as `setcap` writes them, comma-separated ("" for none).
    pub fn cap_names(&self) -> String {
        self.caps
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn run_check<C: Check>(args: Vec<OsString>) -> i32 {
    plugin::main_from::<C>(args)
}

fn about<C: CommandFactory>() -> String {
    C::command()
        .get_about()
        .map(std::string::ToString::to_string)
        .unwrap_or_default()
}

fn longs<C: CommandFactory>() -> Vec<String> {
    C::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

const fn check<C: Check>(caps: &'static [Cap]) -> Applet {
    Applet {
        name: C::BINARY,
        caps,
        about: about::<C>,
        longs: longs::<C>,
        run: run_check::<C>,
    }
}

/// Every name this program answers to, in `--list` order. The capabilities are the ones each
/// check's privileged reads need (the Makefile, the package and the role install from this list:
/// `k8s-storage-checks --list`).
pub static APPLETS: &[Applet] = &[
    check::<check_csi_node_plugins::Opts>(&[Cap::DacReadSearch]),
    check::<check_iscsi_sessions::Opts>(&[]),
    check::<check_jiva_rep_crashloop::Opts>(&[]),
    check::<check_kubelet_nested_ops::Opts>(&[]),
    check::<check_longhorn_volumes::Opts>(&[]),
    check::<check_pv_capacity::Opts>(&[Cap::DacReadSearch]),
    check::<check_ro_pvc_mounts::Opts>(&[Cap::DacReadSearch]),
    check::<check_stale_csi_mounts::Opts>(&[Cap::DacReadSearch]),
    check::<check_storage_kernel_errors::Opts>(&[Cap::Syslog]),
    check::<check_stuck_scheduled::Opts>(&[]),
    check::<check_stuck_terminating::Opts>(&[]),
    check::<check_volume_attachments::Opts>(&[]),
    check::<check_watch_cache::Opts>(&[]),
    Applet {
        name: TEXTFILE,
        caps: &[],
        about: about::<textfile::Opts>,
        longs: longs::<textfile::Opts>,
        run: textfile::main_from,
    },
    Applet {
        name: SERVE,
        caps: &[],
        about: about::<textfile::serve::ServeOpts>,
        longs: longs::<textfile::serve::ServeOpts>,
        run: |args| textfile::serve::main_from(args),
    },
];

/// The applet called `name` (a subcommand's name, e.g. `textfile`, names its applet too).
pub fn applet(name: &str) -> Option<&'static Applet> {
    let name = SUBCOMMANDS
        .iter()
        .find(|(sub, _)| *sub == name)
        .map_or(name, |(_, applet)| *applet);
    APPLETS.iter().find(|a| a.name == name)
}

/// The file name of the copy that carries `caps` (none: the program's own name), e.g.
/// `k8s-storage-checks-cap_dac_read_search`. Installs link each check's name to it.
pub fn copy_name(caps: &[Cap]) -> String {
    let mut names: Vec<&str> = caps.iter().map(|c| c.name()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        PROGRAM.to_string()
    } else {
        format!("{PROGRAM}-{}", names.join("+"))
    }
}

/// What a command line asks for.
#[derive(Debug)]
pub enum Dispatch {
    /// Run an applet with these arguments (the first one is its name).
    Run(&'static Applet, Vec<OsString>),
    Help,
    Version,
    List,
    /// No applet of that name: the name as given.
    Unknown(String),
    /// The program's own name without an applet name after it.
    Usage,
}

impl std::fmt::Debug for Applet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Applet({})", self.name)
    }
}

fn basename(arg0: &OsString) -> String {
    Path::new(arg0)
        .file_name()
        .unwrap_or(arg0.as_os_str())
        .to_string_lossy()
        .into_owned()
}

/// Decide from the command line alone: by the name called (`argv[0]`'s file name) when it is an
/// applet's, else by the first argument. A `check_*` name that is not one of the suite's is
/// unknown (a link left from another version), not a reason to read the first argument as a name.
pub fn dispatch(args: Vec<OsString>) -> Dispatch {
    let called = args.first().map(basename).unwrap_or_default();
    if let Some(a) = APPLETS.iter().find(|a| a.name == called) {
        return Dispatch::Run(a, args);
    }
    if called.starts_with("check_") {
        return Dispatch::Unknown(called);
    }
    let Some(first) = args.get(1) else {
        return Dispatch::Usage;
    };
    let first = first.to_string_lossy().into_owned();
    match first.as_str() {
        "-h" | "--help" => Dispatch::Help,
        "-V" | "--version" => Dispatch::Version,
        "--list" => Dispatch::List,
        name => match applet(name)
            .or_else(|| receive_logs::applet(name))
            .or_else(|| triage::applet(name))
        {
            Some(a) => {
                let sub = SUBCOMMANDS.iter().any(|(s, _)| *s == name);
                let mut rest = args;
                rest.remove(0);
                if sub {
                    // Its usage and errors name the command as typed: `k8s-storage-checks textfile`.
                    rest[0] = format!("{PROGRAM} {name}").into();
                }
                Dispatch::Run(a, rest)
            }
            None => Dispatch::Unknown(name.to_string()),
        },
    }
}

/// `--list`: one line per name: the name, the copy an install links it to ([`copy_name`]) and,
/// when it needs any, its capabilities (comma-separated, as `setcap` takes them). The Makefile
/// and the package install from this.
pub fn list() -> String {
    APPLETS
        .iter()
        .map(|a| {
            let line = format!("{} {} {}", a.name, copy_name(a.caps), a.cap_names());
            format!("{}\n", line.trim_end())
        })
        .collect()
}

/// `--help`.
pub fn help() -> String {
    let mut s = format!(
        "{PROGRAM} {}: the suite in one program.\n\n\
         Usage: {PROGRAM} NAME [ARGS...]\n       NAME [ARGS...]   (a link named NAME to this program)\n       \
         {PROGRAM} --list | --help | --version\n\nNames:\n",
        env!("CARGO_PKG_VERSION")
    );
    for a in APPLETS {
        s.push_str(&format!("  {:<29} {}\n", a.name, (a.about)()));
        if !a.caps.is_empty() {
            s.push_str(&format!("  {:<29} needs {}\n", "", a.cap_names()));
        }
    }
    s.push_str(&format!(
        "\n  {PROGRAM} {} --listen ADDR:PORT --state-dir DIR   receives Talos json_lines logs\n",
        receive_logs::SUB
    ));
    s.push_str(&format!(
        "  {PROGRAM} {} [--node NAME] [-t SECONDS]   every check at once, findings joined into chains\n",
        triage::SUB
    ));
    s.push_str(&format!(
        "\nThe textfile runner is also `{PROGRAM} {TEXTFILE_SUB}`, the /metrics server `{PROGRAM} \
         {SERVE_SUB}`. `NAME --help` describes a check.\n\
         A copy with file capabilities keeps, for the check it runs, only those that check needs.\n\
         --list prints each name, the copy it is installed as a link to and the capabilities it\n\
         needs, one name per line.\n"
    ));
    s
}

/// The UNKNOWN line for a name that is not one of the suite's, plugin style.
pub fn unknown(name: &str) -> String {
    let names: Vec<&str> = APPLETS.iter().map(|a| a.name).collect();
    format!(
        "K8S_STORAGE_CHECKS UNKNOWN - no check named '{}' in {PROGRAM} {}: known names are {} \
         (and {})\n",
        plugin::sanitize(name),
        env!("CARGO_PKG_VERSION"),
        names.join(", "),
        SUBCOMMANDS
            .iter()
            .map(|(s, _)| *s)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn print(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// Run what the command line asks for and exit: 0..3 always (help and version answer 3, as every
/// check's own do; `--list` answers 0 for scripts).
pub fn main() -> ! {
    let code = match dispatch(std::env::args_os().collect()) {
        Dispatch::Run(a, args) => match plugin::privilege::keep_only(a.mask()) {
            Ok(()) => (a.run)(args),
            Err(why) => {
                print(&format!(
                    "{} UNKNOWN - {}\n",
                    a.name.trim_start_matches("check_").to_uppercase(),
                    plugin::sanitize(&why)
                ));
                3
            }
        },
        Dispatch::Help => {
            print(&help());
            3
        }
        Dispatch::Version => {
            print(&format!("{PROGRAM} {}\n", env!("CARGO_PKG_VERSION")));
            3
        }
        Dispatch::List => {
            print(&list());
            0
        }
        Dispatch::Unknown(name) if name == man::FLAG => {
            man::main(&std::env::args_os().collect::<Vec<_>>())
        }
        Dispatch::Unknown(name) => {
            print(&unknown(&name));
            3
        }
        Dispatch::Usage => {
            print(&format!(
                "K8S_STORAGE_CHECKS UNKNOWN - usage: {PROGRAM} NAME [ARGS...] (names: {PROGRAM} --list)\n"
            ));
            3
        }
    };
    std::process::exit(code)
}

mod man;

#[cfg(test)]
mod tests;
