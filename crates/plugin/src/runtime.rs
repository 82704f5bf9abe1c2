//! The guarded runtime: argument parsing, panic hook, watchdog, rendering, exit.

use crate::render::{render, Format, RenderOptions};
use crate::{Report, Status};
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `-t SECONDS[:STATE]`: the watchdog deadline and the state reported when it fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeout {
    pub duration: Duration,
    pub state: Status,
}

impl std::str::FromStr for Timeout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (secs, state) = match s.split_once(':') {
            Some((a, b)) => (
                a,
                Status::parse(b).ok_or_else(|| {
                    format!("invalid timeout state '{b}' (use OK, WARNING, CRITICAL or UNKNOWN)")
                })?,
            ),
            None => (s, Status::Unknown),
        };
        let duration = crate::parse_duration(secs).map_err(|e| e.to_string())?;
        if duration.is_zero() {
            return Err("timeout must be greater than 0".into());
        }
        Ok(Timeout { duration, state })
    }
}

/// Options every check takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Seconds before the check gives up and answers, optionally with the state to answer with
    #[arg(
        short = 't',
        long = "timeout",
        value_name = "SECONDS[:STATE]",
        default_value = "10",
        help_heading = "Common options"
    )]
    pub timeout: Timeout,

    /// Verbosity: -v lists healthy items too, -vv adds what was read and from where (-vvv: everything)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, help_heading = "Common options")]
    pub verbose: u8,

    /// Output format: nagios (plugin text), json (one object), prometheus (node_exporter textfile)
    #[arg(
        long,
        value_enum,
        default_value = "nagios",
        help_heading = "Common options"
    )]
    pub format: Format,

    /// Cap on the whole output in bytes; the status line and perfdata are always kept whole
    #[arg(
        long,
        value_name = "BYTES",
        default_value = "4096",
        help_heading = "Common options"
    )]
    pub max_output: usize,
}

/// An UNKNOWN outcome with its reason: anything that keeps a check from deciding.
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown(pub String);

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for Unknown {
    fn from(s: String) -> Self {
        Unknown(s)
    }
}
impl From<&str> for Unknown {
    fn from(s: &str) -> Self {
        Unknown(s.to_string())
    }
}

/// What a running check can see and tell the runtime.
pub struct Ctx {
    start: Instant,
    deadline: Instant,
    stage: Arc<Mutex<String>>,
    debug: Mutex<Vec<String>>,
    verbosity: u8,
}

impl Ctx {
    fn new(timeout: Duration, verbosity: u8) -> Ctx {
        let start = Instant::now();
        Ctx {
            start,
            deadline: start + timeout,
            stage: Arc::new(Mutex::new("starting".into())),
            debug: Mutex::new(Vec::new()),
            verbosity,
        }
    }

    /// A context for unit tests and benchmarks.
    pub fn for_test(timeout: Duration) -> Ctx {
        Ctx::new(timeout, 3)
    }

    /// Name what the check is doing now; the watchdog reports it if the deadline passes.
    pub fn stage(&self, what: impl Into<String>) {
        if let Ok(mut s) = self.stage.lock() {
            *s = what.into();
        }
    }

    /// When the check must have answered.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left before the deadline (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn verbosity(&self) -> u8 {
        self.verbosity
    }

    /// A line shown with `-vv`: what was read, from where, which config was used. Never secrets.
    pub fn debug(&self, line: impl Into<String>) {
        if let Ok(mut d) = self.debug.lock() {
            d.push(line.into());
        }
    }

    fn take_debug(&self) -> Vec<String> {
        self.debug.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// A check: its options (a clap parser flattening [`CommonArgs`]) and its run.
pub trait Check: clap::Parser + Send + Sync + 'static {
    /// Service name on the status line, e.g. `RO_PVC_MOUNTS`.
    const NAME: &'static str;
    /// Binary name, e.g. `check_ro_pvc_mounts`.
    const BINARY: &'static str;

    fn common(&self) -> &CommonArgs;

    /// Gather and evaluate. Every I/O happens here, bounded by `ctx.deadline()`.
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown>;
}

fn write_out(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn usage_error<C: Check>(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let usage = rendered
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .map(|l| l.to_string())
        .unwrap_or_else(|| format!("Usage: {} [OPTIONS]", C::BINARY));
    format!(
        "{} UNKNOWN - usage error: {}\n{}\nTry '{} --help' for more information.\n",
        C::NAME,
        crate::sanitize(&first),
        usage,
        C::BINARY
    )
}

/// Run a check as a process: parse `std::env::args`, run under the watchdog, print, exit 0..3.
pub fn main<C: Check>() -> ! {
    install_panic_hook(C::NAME);
    let code = run_with_args::<C, _, _>(std::env::args_os(), write_out);
    std::process::exit(code)
}

/// The runtime behind [`main`], with the arguments and the output sink given (for tests).
/// Returns the exit code; everything printed goes through `out`.
pub fn run_with_args<C, I, T>(args: I, out: impl Fn(&str) + Send + Sync + Clone + 'static) -> i32
where
    C: Check,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let opts = match C::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => out(&e.render().to_string()),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => out(&e.render().to_string()),
                _ => out(&usage_error::<C>(&e)),
            }
            return Status::Unknown.code();
        }
    };
    let common = opts.common().clone();
    let ctx = Arc::new(Ctx::new(common.timeout.duration, common.verbose));
    let (tx, rx) = mpsc::channel::<Result<Report, Unknown>>();
    let opts = Arc::new(opts);
    {
        let ctx = Arc::clone(&ctx);
        let opts = Arc::clone(&opts);
        let spawned = std::thread::Builder::new()
            .name("check".into())
            .spawn(move || {
                let r = opts.run(&ctx);
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            out(&format!("{} UNKNOWN - cannot start: {e}\n", C::NAME));
            return Status::Unknown.code();
        }
    }
    let result = rx.recv_timeout(common.timeout.duration);
    let report = match result {
        Ok(Ok(mut r)) => {
            if r.status == Status::Unknown && r.summary.is_empty() {
                r.summary = "no result".into();
            }
            r
        }
        Ok(Err(u)) => Report::unknown(u.0),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let stage = ctx.stage.lock().map(|s| s.clone()).unwrap_or_default();
            Report::new(
                common.timeout.state,
                format!(
                    "timed out after {} while {}",
                    crate::fmt_duration(common.timeout.duration),
                    stage
                ),
            )
        }
        // The check thread died without sending: the panic hook has already answered.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Report::unknown("internal error: check ended without a result")
        }
    };
    let debug = ctx.take_debug();
    let text = render(
        &report,
        common.format,
        &RenderOptions {
            name: C::NAME,
            binary: C::BINARY,
            verbosity: common.verbose,
            max_output: common.max_output,
            duration_secs: ctx.elapsed().as_secs_f64(),
            debug: &debug,
        },
    );
    out(&text);
    report.status.code()
}

fn install_panic_hook(name: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "panic".to_string()
        };
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let line = format!(
            "{} UNKNOWN - internal error: {}{}\n",
            name,
            crate::sanitize(&msg),
            place
        );
        // Raw write: the stdout lock may be held by whoever panicked.
        let _ = nix_free_write(line.as_bytes());
        std::process::exit(Status::Unknown.code());
    }));
}

fn nix_free_write(b: &[u8]) -> std::io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 1 is stdout for the life of the process; ManuallyDrop keeps it open.
    let f = unsafe { std::fs::File::from_raw_fd(1) };
    let mut f = std::mem::ManuallyDrop::new(f);
    f.write_all(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Finding, Perfdata};
    use clap::Parser;
    use std::sync::atomic::{AtomicBool, Ordering};

    static BLOCK: AtomicBool = AtomicBool::new(false);

    #[derive(Parser)]
    #[command(name = "check_demo", version)]
    struct Demo {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        hang: bool,
    }

    impl Check for Demo {
        const NAME: &'static str = "DEMO";
        const BINARY: &'static str = "check_demo";
        fn common(&self) -> &CommonArgs {
            &self.common
        }
        fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
            if self.hang {
                ctx.stage("probing /dead/mount");
                let (_tx, rx) = mpsc::channel::<()>();
                BLOCK.store(true, Ordering::SeqCst);
                let _ = rx.recv(); // blocks forever: the sender is alive in this frame
                unreachable!()
            }
            match self.status.as_deref() {
                Some("fail") => Err(Unknown("cannot read /nowhere: No such file".into())),
                Some(s) => Ok(Report::new(Status::parse(s).unwrap(), "demo")
                    .finding(Finding::new(Status::Critical, "bad|thing"))
                    .perf(Perfdata::new("n", 1.0))),
                None => Ok(Report::new(Status::Ok, "all good")),
            }
        }
    }

    fn run(args: &[&str]) -> (i32, String) {
        let buf = Arc::new(Mutex::new(String::new()));
        let b2 = Arc::clone(&buf);
        let mut argv = vec!["check_demo"];
        argv.extend_from_slice(args);
        let code = run_with_args::<Demo, _, _>(argv, move |s| b2.lock().unwrap().push_str(s));
        let s = buf.lock().unwrap().clone();
        (code, s)
    }

    #[test]
    fn ok_run() {
        let (code, out) = run(&[]);
        assert_eq!(code, 0);
        assert_eq!(out, "DEMO OK - all good\n");
    }

    #[test]
    fn each_status_exits_with_its_code() {
        for (s, c) in [("OK", 0), ("WARNING", 1), ("CRITICAL", 2), ("UNKNOWN", 3)] {
            let (code, out) = run(&["--status", s]);
            assert_eq!(code, c);
            assert!(
                out.starts_with(&format!("DEMO {s} - demo | n=1\n")),
                "{out}"
            );
        }
    }

    #[test]
    fn usage_errors_exit_3_with_a_usage_line() {
        for args in [
            &["--bogus"][..],
            &["-t", "abc"],
            &["-t", "0"],
            &["--format", "xml"],
            &["-t", "5:MAYBE"],
        ] {
            let (code, out) = run(args);
            assert_eq!(code, 3, "{args:?}");
            let first = out.lines().next().unwrap();
            assert!(first.starts_with("DEMO UNKNOWN - usage error: "), "{first}");
            assert!(out.contains("Usage: "), "{out}");
        }
    }

    #[test]
    fn help_and_version_exit_3() {
        let (code, out) = run(&["--help"]);
        assert_eq!(code, 3);
        assert!(out.contains("--timeout"));
        let (code, out) = run(&["-V"]);
        assert_eq!(code, 3);
        assert!(out.contains("check_demo"));
    }

    #[test]
    fn gather_failure_is_unknown() {
        let (code, out) = run(&["--status", "fail"]);
        assert_eq!(code, 3);
        assert_eq!(out, "DEMO UNKNOWN - cannot read /nowhere: No such file\n");
    }

    #[test]
    fn watchdog_answers_with_stage_and_state() {
        let (code, out) = run(&["--hang", "-t", "0.2"]);
        assert_eq!(code, 3);
        assert!(
            out.starts_with("DEMO UNKNOWN - timed out after 200ms while probing /dead/mount"),
            "{out}"
        );
        let (code, out) = run(&["--hang", "-t", "0.2:CRITICAL"]);
        assert_eq!(code, 2);
        assert!(out.starts_with("DEMO CRITICAL - timed out"), "{out}");
        assert!(BLOCK.load(Ordering::SeqCst));
    }

    #[test]
    fn timeout_parses_state_and_units() {
        let t: Timeout = "30:CRITICAL".parse().unwrap();
        assert_eq!(t.duration, Duration::from_secs(30));
        assert_eq!(t.state, Status::Critical);
        let t: Timeout = "1m".parse().unwrap();
        assert_eq!(t.duration, Duration::from_secs(60));
        assert_eq!(t.state, Status::Unknown);
        assert!("".parse::<Timeout>().is_err());
        assert!("10:x".parse::<Timeout>().is_err());
    }

    #[test]
    fn json_format() {
        let (code, out) = run(&["--status", "WARNING", "--format", "json"]);
        assert_eq!(code, 1);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "WARNING");
        assert_eq!(v["check"], "check_demo");
    }
}
