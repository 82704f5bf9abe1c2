//! The guarded runtime: argument parsing, panic hook, watchdog, rendering, exit.

use crate::render::{render, Format, RenderOptions};
use crate::{Report, Status};
use nix::libc;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod spec;
mod worker;
use spec::print_spec;
use worker::{install_panic_hook, run_forked, send, MSG_STAGE};

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

    /// Verbosity: -v adds healthy items and the evidence behind each finding, -vv the decisions taken and what was used, -vvv every input read
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

    /// --format prometheus: at most this many k8s_storage_check_finding series (one per non-OK
    /// finding, worst first); the rest are counted in k8s_storage_check_findings_omitted
    #[arg(
        long,
        value_name = "N",
        default_value = "100",
        help_heading = "Common options"
    )]
    pub max_findings_series: usize,
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
    /// In a worker process: the pipe that stage names are sent to.
    sink: Option<std::os::fd::BorrowedFd<'static>>,
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
            sink: None,
        }
    }

    /// A context for unit tests and benchmarks.
    pub fn for_test(timeout: Duration) -> Ctx {
        Ctx::new(timeout, 3)
    }

    /// Name what the check is doing now; the watchdog reports it if the deadline passes.
    pub fn stage(&self, what: impl Into<String>) {
        let what = what.into();
        if let Some(fd) = self.sink {
            send(fd, MSG_STAGE, what.as_bytes());
        }
        if let Ok(mut s) = self.stage.lock() {
            *s = what;
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

    /// A line shown from `-vv`: what was used and decided (which kube config, which kubelet
    /// roots, why a volume counts as read-only), as a sentence. Never secrets, never a Rust
    /// debug dump.
    pub fn debug(&self, line: impl Into<String>) {
        self.push_line(2, "info", &line.into());
    }

    /// A decision taken, shown from `-vv` (same as [`Self::debug`]; the name says what it is).
    pub fn decision(&self, line: impl Into<String>) {
        self.push_line(2, "info", &line.into());
    }

    /// An input read (a file, a request, its size), shown with `-vvv` only, as a sentence.
    pub fn input(&self, line: impl Into<String>) {
        self.push_line(3, "read", &line.into());
    }

    fn push_line(&self, level: u8, tag: &str, line: &str) {
        if self.verbosity < level {
            return;
        }
        if let Ok(mut d) = self.debug.lock() {
            d.push(format!("{tag}: {line}"));
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

    /// True when this run reads its standard input (e.g. `--log-file -`): the worker keeps it
    /// instead of reading /dev/null.
    fn reads_stdin(&self) -> bool {
        false
    }

    /// Gather and evaluate. Every I/O happens here, bounded by `ctx.deadline()`.
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown>;
}

fn write_out(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn usage_error<C: Check>(err: &clap::Error, format: Format) -> String {
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
        .map_or_else(
            || format!("Usage: {} [OPTIONS]", C::BINARY),
            std::string::ToString::to_string,
        );
    if format != Format::Nagios {
        // The caller asked for a machine format: a usage error is an UNKNOWN in that format.
        let report = Report::unknown(format!("usage error: {}", crate::sanitize(&first)))
            .note(usage)
            .note(format!("Try '{} --help' for more information.", C::BINARY));
        return render_plain::<C>(&report, format);
    }
    format!(
        "{} UNKNOWN - usage error: {}\n{}\nTry '{} --help' for more information.\n",
        C::NAME,
        crate::sanitize(&first),
        usage,
        C::BINARY
    )
}

/// The format the arguments ask for, read without the parser (which just failed): the last
/// `--format X` / `--format=X` that names a known format, else nagios.
fn requested_format(args: &[std::ffi::OsString]) -> Format {
    use clap::ValueEnum;
    let mut format = Format::Nagios;
    let mut it = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        let value = if a == "--format" {
            it.next().map(std::borrow::Cow::into_owned)
        } else {
            a.strip_prefix("--format=")
                .map(std::string::ToString::to_string)
        };
        if let Some(f) = value.and_then(|v| Format::from_str(&v, false).ok()) {
            format = f;
        }
    }
    format
}

/// A report rendered outside a run (usage error, panic, lost worker): no debug, no duration.
fn render_plain<C: Check>(report: &Report, format: Format) -> String {
    render_plain_as(C::NAME, C::BINARY, report, format)
}

/// [`render_plain`] by name, for the panic hook (which knows no `Check` type).
fn render_plain_as(name: &str, binary: &str, report: &Report, format: Format) -> String {
    render(
        report,
        format,
        &RenderOptions {
            name,
            binary,
            verbosity: 0,
            max_output: 4096,
            duration_secs: 0.0,
            debug: &[],
            max_findings_series: 0,
            timeout_secs: 0.0,
        },
    )
}

/// The output format once parsed, for the panic hook (0 nagios, 1 json, 2 prometheus).
static FORMAT: AtomicU8 = AtomicU8::new(0);

fn set_format(f: Format) {
    FORMAT.store(
        match f {
            Format::Nagios => 0,
            Format::Json => 1,
            Format::Prometheus => 2,
        },
        Ordering::SeqCst,
    );
}

fn current_format() -> Format {
    match FORMAT.load(Ordering::SeqCst) {
        1 => Format::Json,
        2 => Format::Prometheus,
        _ => Format::Nagios,
    }
}

/// Run a check as a process: parse `std::env::args`, run, print, exit 0..3.
///
/// The check runs in a forked worker process, not in this one. This process only waits for the
/// worker's answer on a pipe until the deadline, prints it, and exits. A worker stuck in an
/// uninterruptible syscall (a read on a dead iSCSI disk, a hard NFS mount) cannot keep this
/// process alive, and it never holds the stdout that NRPE reads: its own stdout and stderr are
/// /dev/null. On timeout the worker is killed (killable waits end at once) and abandoned to init
/// if even that cannot end it.
pub fn main<C: Check>() -> ! {
    main_from::<C>(std::env::args_os())
}

/// [`main`] with the arguments given (the first one names the program, as `argv[0]` does): the
/// entry point of the multicall binary, which dispatches on a name and passes the rest on.
pub fn main_from<C: Check>(args: impl IntoIterator<Item = std::ffi::OsString>) -> ! {
    install_panic_hook(C::NAME, C::BINARY);
    let code = match parse::<C, _, _>(args, write_out) {
        Ok(opts) => match privileged_start() {
            Ok(()) => run_forked(opts, write_out),
            Err(why) => refuse::<C>(opts.common(), why, write_out),
        },
        Err(code) => code,
    };
    std::process::exit(code)
}

/// The privilege boundary, before any check code runs: a privileged binary (`AT_SECURE`) refuses
/// callers outside the group owning its file, and otherwise lowers itself to the caller's
/// privilege; checks raise it again only around the node's own sources (see
/// [`crate::privilege`] and `node::privilege`).
fn privileged_start() -> Result<(), String> {
    crate::privilege::gate()?;
    crate::privilege::lower_process()
}

/// Answer UNKNOWN with `why`, in the requested format, without running the check.
fn refuse<C: Check>(common: &CommonArgs, why: String, out: impl Fn(&str)) -> i32 {
    let report = Report::unknown(why);
    out(&finish::<C>(&report, common, &[], Duration::ZERO));
    report.status.code()
}

/// Parse arguments; usage errors, `--help` and `--version` are answered here (exit code 3).
/// A usage error is answered in the requested `--format` when that much can be read.
fn parse<C, I, T>(args: I, out: impl Fn(&str)) -> Result<C, i32>
where
    C: Check,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == "--print-spec") {
        out(&print_spec::<C>(&args));
        return Err(Status::Ok.code());
    }
    match C::try_parse_from(&args) {
        Ok(c) => {
            set_format(c.common().format);
            Ok(c)
        }
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    out(&e.render().to_string());
                }
                _ => out(&usage_error::<C>(&e, requested_format(&args))),
            }
            Err(Status::Unknown.code())
        }
    }
}

fn outcome_report(result: Result<Report, Unknown>) -> Report {
    match result {
        Ok(mut r) => {
            if r.summary.is_empty() {
                r.summary = "no result".into();
            }
            r
        }
        Err(u) => Report::unknown(u.0),
    }
}

fn timeout_report(common: &CommonArgs, stage: &str) -> Report {
    Report::new(
        common.timeout.state,
        format!(
            "timed out after {} while {}",
            crate::fmt_duration(common.timeout.duration),
            stage
        ),
    )
}

fn finish<C: Check>(
    report: &Report,
    common: &CommonArgs,
    debug: &[String],
    elapsed: Duration,
) -> String {
    render(
        report,
        common.format,
        &RenderOptions {
            name: C::NAME,
            binary: C::BINARY,
            verbosity: common.verbose,
            max_output: common.max_output,
            duration_secs: elapsed.as_secs_f64(),
            debug,
            max_findings_series: common.max_findings_series,
            timeout_secs: common.timeout.duration.as_secs_f64(),
        },
    )
}

/// The deadline the check itself works to: a little before the watchdog's, so that a check that
/// bounds its own I/O by `ctx.remaining()` answers with what it found rather than a bare timeout.
fn work_budget(timeout: Duration) -> Duration {
    crate::deadline::Reserve::share(10, Duration::ZERO, Duration::from_millis(500)).left(timeout)
}

/// The runtime behind [`main`], in one process with the check on a thread (for unit tests).
/// Returns the exit code; everything printed goes through `out`.
pub fn run_with_args<C, I, T>(args: I, out: impl Fn(&str) + Send + Sync + Clone + 'static) -> i32
where
    C: Check,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let opts: C = match parse(args, &out) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let common = opts.common().clone();
    if let Err(why) = crate::privilege::gate() {
        return refuse::<C>(&common, why, out);
    }
    let ctx = Arc::new(Ctx::new(
        work_budget(common.timeout.duration),
        common.verbose,
    ));
    let (tx, rx) = mpsc::channel::<Result<Report, Unknown>>();
    let opts = Arc::new(opts);
    {
        let ctx = Arc::clone(&ctx);
        let opts = Arc::clone(&opts);
        let spawned = std::thread::Builder::new()
            .name("check".into())
            .spawn(move || {
                let _ = tx.send(opts.run(&ctx));
            });
        if let Err(e) = spawned {
            out(&format!("{} UNKNOWN - cannot start: {e}\n", C::NAME));
            return Status::Unknown.code();
        }
    }
    let report = match rx.recv_timeout(common.timeout.duration) {
        Ok(r) => outcome_report(r),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let stage = ctx.stage.lock().map(|s| s.clone()).unwrap_or_default();
            timeout_report(&common, &stage)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Report::unknown("internal error: check ended without a result")
        }
    };
    out(&finish::<C>(
        &report,
        &common,
        &ctx.take_debug(),
        ctx.elapsed(),
    ));
    report.status.code()
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
    fn usage_errors_answer_in_the_requested_format() {
        let (code, out) = run(&["--format", "prometheus", "--bogus"]);
        assert_eq!(code, 3);
        assert!(
            out.contains("k8s_storage_check_status{check=\"check_demo\"} 3\n"),
            "{out}"
        );
        assert!(!out.contains("Usage:"), "{out}");
        let (code, out) = run(&["-t", "abc", "--format=json"]);
        assert_eq!(code, 3);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "UNKNOWN");
        assert!(v["summary"].as_str().unwrap().starts_with("usage error: "));
        assert!(v["notes"][0].as_str().unwrap().starts_with("Usage: "));
        // An unknown format is itself the usage error: plain text.
        let (_, out) = run(&["--format", "xml"]);
        assert!(out.starts_with("DEMO UNKNOWN - usage error: "), "{out}");
    }

    #[test]
    fn usage_errors_come_in_the_requested_format() {
        for args in [
            &["--format", "json", "--bogus"][..],
            &["--bogus", "--format=json"],
            &["--format", "json", "-t", "0"],
        ] {
            let (code, out) = run(args);
            assert_eq!(code, 3, "{args:?}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| {
                panic!("{args:?}: not JSON ({e}): {out}");
            });
            assert_eq!(v["status"], "UNKNOWN", "{out}");
            assert!(
                v["summary"].as_str().unwrap().starts_with("usage error: "),
                "{out}"
            );
        }
        let (code, out) = run(&["--format", "prometheus", "--bogus"]);
        assert_eq!(code, 3);
        assert!(
            out.contains("status=\"UNKNOWN\"") || out.contains(" 3"),
            "{out}"
        );
        for line in out.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "not exposition: {line}");
        }
        // A bad --format value itself: the usage error falls back to the plugin text.
        let (_, out) = run(&["--format", "xml"]);
        assert!(out.starts_with("DEMO UNKNOWN - usage error: "), "{out}");
    }

    #[test]
    fn print_spec_describes_every_option_and_parses_a_command_line() {
        let (code, out) = run(&["--print-spec"]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["binary"], "check_demo");
        let opt = |long: &str| {
            v["options"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["long"][0] == long)
                .cloned()
                .unwrap_or_else(|| panic!("no --{long} in {out}"))
        };
        assert_eq!(opt("timeout")["short"][0], "t");
        assert_eq!(opt("timeout")["kind"], "duration");
        assert_eq!(opt("timeout")["default"][0], "10");
        assert_eq!(opt("verbose")["kind"], "count");
        assert_eq!(opt("hang")["kind"], "flag");
        assert_eq!(opt("format")["kind"], "enum");
        assert!(v.get("parse").is_none());
        let (_, out) = run(&["--print-spec", "-t", "5", "--hang"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["parse"]["ok"], true, "{out}");
        let (_, out) = run(&["--print-spec", "--hangs"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["parse"]["ok"], false, "{out}");
        assert!(
            v["parse"]["error"].as_str().unwrap().contains("--hangs"),
            "{out}"
        );
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
        assert_eq!(t.duration, Duration::from_mins(1));
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
