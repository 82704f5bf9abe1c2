//! `k8s-storage-checks triage`: one incident, one page. Runs every check of the suite for this
//! node at once within one `-t` (the API ones once), joins their findings on the subjects they
//! share (`pv`, `device`, `session`, `pod`, `node`) by the causal rules of [`rules`], and prints
//! chains root cause first with the root's next step; findings no rule links stand alone, and a
//! check that could not tell is named with why, never hidden. `--from FILE` reads saved
//! `--format json` answers instead (a transcript's other lines are skipped).
//!
//! The exit status is the worst state of it all (0–3), so a script can use it; it is a command
//! for people and tooling, not a check for the engines (they page per check, with the same rules
//! as their dependencies: docs/triage.md).
#![forbid(unsafe_code)]

pub mod alertmanager;
pub mod answer;
pub mod chain;
pub mod engines;
pub mod rules;
pub mod run;
pub mod text;

use clap::Parser;
use plugin::Status;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use run::CheckSpec;

/// Each check gets the triage's -t less this (its own watchdog ends it before the triage's).
const CHECK_RESERVE: plugin::deadline::Reserve =
    plugin::deadline::Reserve::fixed(Duration::from_secs(1));
/// What the triage keeps to join and print after its deadline for the checks.
const PRINT_RESERVE: plugin::deadline::Reserve =
    plugin::deadline::Reserve::fixed(Duration::from_millis(500));

const LONG_ABOUT: &str = "\
Runs every check of the suite for this node at once within one -t (the node's own checks and the
API checks for this node), joins their findings on the subjects they share (PV, device, iSCSI
session, pod, node) by causal rules (docs/triage.md), and prints chains root cause first, e.g.

  iSCSI session FREE → disk offline → journal aborted → PVC read-only → pod stuck Terminating

with the next step of the root; findings no rule links stand alone; a check that could not tell
is listed with why. The options below are passed to every check that takes them. Exit status:
the worst state (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN); a check whose storage system (Longhorn,
Jiva) is not installed is listed and does not count.";

/// `k8s-storage-checks triage`
#[derive(Debug, Parser)]
#[command(
    name = "k8s-storage-checks triage",
    about = "Every check for this node at once, findings joined into chains root cause first",
    long_about = LONG_ABOUT,
    version
)]
pub struct Opts {
    /// Seconds for the whole triage; each check gets one second less
    #[arg(short = 't', long = "timeout", value_name = "SECONDS", default_value = "20",
          value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub timeout: u64,
    /// The node (its Kubernetes name); also the node of findings that name none
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// kubeconfig for the API checks (default: each check's own search)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubelet's root directory (default: each check's own search)
    #[arg(long = "kubelet-root", value_name = "DIR")]
    pub kubelet_root: Option<PathBuf>,
    /// The host's root as mounted in a container (container mode)
    #[arg(long = "host-root", value_name = "DIR")]
    pub host_root: Option<PathBuf>,
    /// Leave this check out (repeatable)
    #[arg(long, value_name = "CHECK")]
    pub skip: Vec<String>,
    /// Read saved `--format json` answers from FILE (- for stdin) instead of running the checks
    /// (repeatable; other lines of the file are skipped)
    #[arg(long, value_name = "FILE")]
    pub from: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Also list every check's answer
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
}

/// Run the triage on a command line (`args[0]` is the program name); the exit code.
pub fn main_from(args: Vec<OsString>, checks: &[CheckSpec]) -> i32 {
    let opts = match Opts::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            // Help and version answer 3 too, as every check's own do.
            let _ = e.print();
            return Status::Unknown.code();
        }
    };
    let t = match triage(&opts, checks) {
        Ok(t) => t,
        Err(why) => {
            println!("TRIAGE UNKNOWN - {why}");
            return Status::Unknown.code();
        }
    };
    if opts.format == "json" {
        println!("{}", t.json());
    } else {
        print!("{}", t.text(opts.verbose));
    }
    t.status().code()
}

/// Gather the answers (run the checks, or read them) and join them.
pub fn triage(opts: &Opts, checks: &[CheckSpec]) -> Result<text::Triage, String> {
    let answers = if opts.from.is_empty() {
        let start = Instant::now();
        let total = Duration::from_secs(opts.timeout);
        let mut shared: Vec<(&str, String)> = Vec::new();
        if let Some(n) = &opts.node {
            shared.push(("node", n.clone()));
        }
        if let Some(k) = &opts.kubeconfig {
            shared.push(("kubeconfig", k.display().to_string()));
        }
        if let Some(k) = &opts.kubelet_root {
            shared.push(("kubelet-root", k.display().to_string()));
        }
        if let Some(h) = &opts.host_root {
            shared.push(("host-root", h.display().to_string()));
        }
        for s in &opts.skip {
            if !checks.iter().any(|c| c.name == s) {
                return Err(format!("--skip {s}: no check of that name"));
            }
        }
        let lines: Vec<Vec<String>> = checks
            .iter()
            .filter(|c| !opts.skip.iter().any(|s| s == c.name))
            .map(|c| run::args_for(c, &shared, CHECK_RESERVE.left(total)))
            .collect();
        let program = std::env::current_exe()
            .map_err(|e| format!("cannot find this program: {}", plugin::errtext(&e)))?;
        // The deadline leaves half a second to print.
        run::run_all(&program, &lines, start + PRINT_RESERVE.left(total))
    } else {
        let mut all = Vec::new();
        for f in &opts.from {
            let text = if f.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .take(64 << 20)
                    .read_to_string(&mut s)
                    .map_err(|e| format!("stdin: {}", plugin::errtext(&e)))?;
                s
            } else {
                let file = std::fs::File::open(f)
                    .map_err(|e| format!("{}: {}", f.display(), plugin::errtext(&e)))?;
                let mut s = String::new();
                file.take(64 << 20)
                    .read_to_string(&mut s)
                    .map_err(|e| format!("{}: {}", f.display(), plugin::errtext(&e)))?;
                s
            };
            all.extend(answer::parse_all(&text).map_err(|e| format!("{}: {e}", f.display()))?);
        }
        if all.is_empty() {
            return Err("no check answer (--format json) in --from".into());
        }
        all
    };
    Ok(join(answers, opts.node.as_deref()))
}

/// Join the answers' findings into chains.
pub fn join(answers: Vec<Answer>, node: Option<&str>) -> text::Triage {
    let findings = chain::prepare(
        answers.iter().flat_map(|a| a.findings.clone()).collect(),
        node,
    );
    let (chains, alone) = chain::chains(&findings);
    text::Triage {
        answers,
        findings,
        chains,
        alone,
    }
}

use answer::Answer;
use std::io::Read;

#[cfg(test)]
mod tests;
