//! The guarded runtime: argument parsing, panic hook, watchdog, rendering, exit.

use crate::render::{render, Format, RenderOptions};
use crate::{Report, Status};
use nix::libc;
use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
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
    sink: Option<i32>,
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
        .map(|l| l.to_string())
        .unwrap_or_else(|| format!("Usage: {} [OPTIONS]", C::BINARY));
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
            it.next().map(|v| v.into_owned())
        } else {
            a.strip_prefix("--format=").map(|v| v.to_string())
        };
        if let Some(f) = value.and_then(|v| Format::from_str(&v, false).ok()) {
            format = f;
        }
    }
    format
}

/// A report rendered outside a run (usage error, panic, lost worker): no debug, no duration.
fn render_plain<C: Check>(report: &Report, format: Format) -> String {
    render(
        report,
        format,
        &RenderOptions {
            name: C::NAME,
            binary: C::BINARY,
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

/// `--print-spec [ARGS…]` (hidden, first argument only): the check's options as JSON — names,
/// arity, value kind, defaults — for the test that holds the deployment files to the binary;
/// with ARGS, whether they parse (`"parse": {"ok": …, "error": …}`). Exit 0.
fn print_spec<C: Check>(args: &[std::ffi::OsString]) -> String {
    let cmd = C::command();
    let mut options = Vec::new();
    for a in cmd.get_arguments() {
        if a.is_positional() {
            continue;
        }
        let takes_value = a.get_action().takes_values();
        let multiple = matches!(
            a.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        let shorts: Vec<String> = a
            .get_short_and_visible_aliases()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.to_string())
            .collect();
        let longs: Vec<String> = a
            .get_long_and_visible_aliases()
            .unwrap_or_default()
            .into_iter()
            .map(str::to_string)
            .collect();
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let possible: Vec<String> = a
            .get_possible_values()
            .iter()
            .map(|p| p.get_name().to_string())
            .collect();
        let value_names: Vec<String> = a
            .get_value_names()
            .unwrap_or_default()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let kind = if !takes_value {
            match a.get_action() {
                clap::ArgAction::Count => "count",
                _ => "flag",
            }
        } else {
            value_kind(a, !possible.is_empty())
        };
        options.push(serde_json::json!({
            "id": a.get_id().as_str(),
            "long": longs,
            "short": shorts,
            "takes_value": takes_value,
            "multiple": multiple,
            "value_name": value_names.first(),
            "kind": kind,
            "default": defaults,
            "possible_values": possible,
            "allow_hyphen_values": a.is_allow_hyphen_values_set(),
            "hidden": a.is_hide_set(),
            "help_heading": a.get_help_heading(),
        }));
    }
    let mut spec = serde_json::json!({
        "binary": C::BINARY,
        "name": C::NAME,
        "options": options,
    });
    if args.len() > 2 {
        let mut rest = vec![args[0].clone()];
        rest.extend(args[2..].iter().cloned());
        spec["parse"] = match C::try_parse_from(rest) {
            Ok(_) => serde_json::json!({"ok": true}),
            Err(e) => {
                let text = e.render().to_string();
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                serde_json::json!({"ok": false, "error": first.trim_start_matches("error: ")})
            }
        };
    }
    format!("{spec}\n")
}

/// What kind of value an option takes, found by asking its own value parser about samples:
/// `duration_range`, `range`, `duration`, `integer`, `regex`, `enum` or `text`.
fn value_kind(a: &clap::Arg, has_possible: bool) -> &'static str {
    if has_possible {
        return "enum";
    }
    let probe = clap::Command::new("probe").no_binary_name(true).arg(
        clap::Arg::new("v")
            .long("v")
            .action(clap::ArgAction::Set)
            .allow_hyphen_values(true)
            .value_parser(a.get_value_parser().clone()),
    );
    let ok = |v: &str| {
        probe
            .clone()
            .try_get_matches_from([format!("--v={v}")])
            .is_ok()
    };
    if ok("5m:") && ok("@1:2") {
        "duration_range"
    } else if ok("-10:-2") && ok("@1:2") {
        "range"
    } else if ok("5m") && ok("90") && !ok("x") {
        "duration"
    } else if ok("5") && !ok("x") {
        "integer"
    } else if ok("a.b") && !ok("(") {
        "regex"
    } else {
        "text"
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
                    out(&e.render().to_string())
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
    timeout.saturating_sub((timeout / 10).min(Duration::from_millis(500)))
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

// Messages from the worker: one type byte, a u32 LE length, the payload.
const MSG_STAGE: u8 = b'S';
const MSG_RESULT: u8 = b'R';
const MSG_PANIC: u8 = b'P';

/// The worker's end of the pipe, for the panic hook (-1 in the parent).
static WORKER_FD: AtomicI32 = AtomicI32::new(-1);

fn send(fd: i32, kind: u8, payload: &[u8]) {
    let mut msg = Vec::with_capacity(payload.len() + 5);
    msg.push(kind);
    msg.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    msg.extend_from_slice(payload);
    let mut off = 0;
    while off < msg.len() {
        // SAFETY: writing our own buffer to our own pipe fd.
        let n = unsafe { libc::write(fd, msg[off..].as_ptr().cast(), msg.len() - off) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        off += n as usize;
    }
}

fn run_forked<C: Check>(opts: C, out: impl Fn(&str)) -> i32 {
    let common = opts.common().clone();
    let start = Instant::now();
    let mut fds = [0i32; 2];
    // SAFETY: fds is a 2-element array as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        out(&format!(
            "{} UNKNOWN - cannot start: pipe: {}\n",
            C::NAME,
            std::io::Error::last_os_error()
        ));
        return Status::Unknown.code();
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: this process is single-threaded here (nothing has spawned a thread yet), so the
    // child may do anything a fresh process may.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        out(&format!(
            "{} UNKNOWN - cannot start: fork: {}\n",
            C::NAME,
            std::io::Error::last_os_error()
        ));
        return Status::Unknown.code();
    }
    if pid == 0 {
        worker::<C>(opts, &common, rd, wr);
    }
    // SAFETY: the parent keeps the read end only.
    unsafe { libc::close(wr) };
    let deadline = start + common.timeout.duration;
    let mut buf: Vec<u8> = Vec::new();
    let mut stage = String::from("starting");
    let mut chunk = [0u8; 16 * 1024];
    let answer: Result<(i32, String), String> = loop {
        // Handle every complete message in the buffer.
        let mut done = None;
        while buf.len() >= 5 {
            let len = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if buf.len() < 5 + len {
                break;
            }
            let kind = buf[0];
            let payload = String::from_utf8_lossy(&buf[5..5 + len]).into_owned();
            buf.drain(..5 + len);
            match kind {
                MSG_STAGE => stage = payload,
                MSG_RESULT => {
                    let (code, text) = payload.split_once('\n').unwrap_or(("3", ""));
                    done = Some(Ok((code.parse().unwrap_or(3), text.to_string())));
                }
                MSG_PANIC => done = Some(Ok((Status::Unknown.code(), payload))),
                _ => {}
            }
        }
        if let Some(d) = done {
            break d;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(stage.clone());
        }
        let mut pfd = libc::pollfd {
            fd: rd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n <= 0 {
            continue; // timeout (checked above) or EINTR
        }
        // SAFETY: reading into a local buffer from our own fd.
        let r = unsafe { libc::read(rd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if r > 0 {
            buf.extend_from_slice(&chunk[..r as usize]);
        } else if r == 0 {
            // The worker ended without an answer.
            let mut status = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let how = if libc::WIFSIGNALED(status) {
                let sig = libc::WTERMSIG(status);
                match nix::sys::signal::Signal::try_from(sig) {
                    // A mapped input file (--pods-json) truncated by another process.
                    Ok(nix::sys::signal::Signal::SIGBUS) => {
                        "killed by SIGBUS: an input file was truncated while it was read?"
                            .to_string()
                    }
                    Ok(s) => format!("killed by {}", s.as_str()),
                    Err(_) => format!("killed by signal {sig}"),
                }
            } else {
                format!("exit status {}", libc::WEXITSTATUS(status))
            };
            let report = Report::unknown(format!(
                "internal error: the check process ended without an answer ({how})"
            ));
            break Ok((
                Status::Unknown.code(),
                finish::<C>(&report, &common, &[], start.elapsed()),
            ));
        }
    };
    // SAFETY: closing our own fd.
    unsafe { libc::close(rd) };
    match answer {
        Ok((code, text)) => {
            reap(pid);
            out(&text);
            code
        }
        Err(stage) => {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            reap(pid);
            let report = timeout_report(&common, &stage);
            out(&finish::<C>(&report, &common, &[], start.elapsed()));
            report.status.code()
        }
    }
}

/// Wait a short, bounded while for the worker to go; one stuck in an uninterruptible wait is
/// left to init (it holds nothing the caller waits on).
fn reap(pid: i32) {
    const GRACE_MS: i32 = 500;
    // SAFETY: pidfd_open on our own child; a pidfd becomes readable when the process exits.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd >= 0 {
        let mut pfd = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; then reap and close our own descriptors.
        unsafe {
            libc::poll(&mut pfd, 1, GRACE_MS);
            let mut status = 0;
            libc::waitpid(pid, &mut status, libc::WNOHANG);
            libc::close(pidfd);
        }
        return;
    }
    // Kernels before 5.3: poll the child's state.
    let until = Instant::now() + Duration::from_millis(GRACE_MS as u64);
    loop {
        let mut status = 0;
        // SAFETY: non-blocking reap of our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc != 0 || Instant::now() >= until {
            return;
        }
        // SAFETY: a plain timed wait.
        unsafe { libc::poll(std::ptr::null_mut(), 0, 1) };
    }
}

fn worker<C: Check>(opts: C, common: &CommonArgs, rd: i32, wr: i32) -> ! {
    // SAFETY: plain fd operations on descriptors this process owns.
    unsafe {
        libc::close(rd);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            if !opts.reads_stdin() {
                libc::dup2(null, 0);
            }
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            if null > 2 {
                libc::close(null);
            }
        }
    }
    WORKER_FD.store(wr, Ordering::SeqCst);
    let mut ctx = Ctx::new(work_budget(common.timeout.duration), common.verbose);
    ctx.sink = Some(wr);
    let report = outcome_report(opts.run(&ctx));
    let text = finish::<C>(&report, common, &ctx.take_debug(), ctx.elapsed());
    send(
        wr,
        MSG_RESULT,
        format!("{}\n{}", report.status.code(), text).as_bytes(),
    );
    // SAFETY: leave at once: no destructors, no atexit handlers of the parent's.
    unsafe { libc::_exit(0) }
}

fn install_panic_hook(name: &'static str, binary: &'static str) {
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
        let reason = format!("internal error: {}{}", crate::sanitize(&msg), place);
        let line = match current_format() {
            Format::Nagios => format!("{name} UNKNOWN - {reason}\n"),
            f => render(
                &Report::unknown(reason),
                f,
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
            ),
        };
        let fd = WORKER_FD.load(Ordering::SeqCst);
        if fd >= 0 {
            // In the worker: the parent prints it.
            send(fd, MSG_PANIC, line.as_bytes());
        } else {
            // Raw write: the stdout lock may be held by whoever panicked.
            let _ = nix_free_write(line.as_bytes());
        }
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
