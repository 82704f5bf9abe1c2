//! `k8s-storage-checks serve`: the checks' series on an HTTP `/metrics` endpoint, for a
//! Prometheus (Operator) that scrapes pods instead of node_exporter's textfile directory.
//!
//! The checks run on their own schedule, never because of a scrape: each configured check every
//! `interval` (its own in the config file, else `--interval`), at most `--concurrency` at a time,
//! each as a child process exactly like the textfile runner runs it ([`crate::run_job`]), killed
//! at its own `-t` plus a grace when its watchdog did not end it. A scrape answers at once with
//! the last answer of every check, merged by metric family ([`crate::exposition::merge`]), plus
//! `k8s_storage_check_last_run_timestamp_seconds` and `k8s_storage_check_run_duration_seconds`.
//! A hung check holds one worker until it is killed; the others and the scrape go on.
//!
//! The HTTP server is std's `TcpListener` and a thread per connection (at most [`MAX_CONN`] at a
//! time, each with read/write timeouts), GET/HEAD of `/metrics`, `/healthz` and `/` only: no
//! HTTP library for four paths. TLS (rustls, already in the program for the API client) and
//! basic auth come from `--web.config.file` ([`crate::webconfig`]).

use crate::exposition::{self, Run};
use crate::webconfig::{BasicAuth, WebConfig};
use crate::{Job, STOP};
use clap::Parser;
use serde::Deserialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

#[derive(Parser, Debug)]
#[command(
    name = "k8s-storage-checks serve",
    version,
    about = "Run the checks on a schedule and serve their series on /metrics (Prometheus)",
    long_about = "Run the checks on a schedule and serve their series on /metrics (Prometheus).\n\n\
Each check runs every --interval (or its own interval from --config), at most --concurrency at a \
time, never because of a scrape; a check still running at its -t plus a grace (at most \
--kill-after) is killed and reported UNKNOWN. /metrics serves the same series as the textfile \
runner's files, plus k8s_storage_check_last_run_timestamp_seconds and \
k8s_storage_check_run_duration_seconds per check; /healthz answers 200 while the scheduler runs.\n\n\
--check lines are a binary name (looked up in --plugin-dir) and its arguments, split at \
whitespace; --format prometheus is added (and --host-root DIR when given). --config FILE reads \
YAML:\n\n  interval: 60s            # default for the checks below\n  checks:\n    \
- command: check_ro_pvc_mounts -t 30\n    - command: check_watch_cache -t 20\n      interval: 5m\n\n\
--web.config.file FILE turns on TLS and/or basic auth, in the format of the Prometheus \
exporter-toolkit:\n\n  tls_server_config:\n    cert_file: tls.crt\n    key_file: tls.key\n  \
basic_auth_users:\n    prometheus: <bcrypt hash: htpasswd -nBC 10 prometheus>\n"
)]
pub struct ServeOpts {
    /// Address and port to listen on, e.g. 0.0.0.0:9842 or [::]:9842
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,

    /// A check and its arguments, e.g. "check_ro_pvc_mounts -t 20" (repeatable)
    #[arg(long = "check", value_name = "COMMAND")]
    pub checks: Vec<String>,

    /// YAML file with the checks (and their own intervals), instead of or besides --check
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Time between the starts of two runs of a check (when it has no interval of its own)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = plugin::args::duration)]
    pub interval: Duration,

    /// At most this many checks run at the same time
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u16).range(1..=16))]
    pub concurrency: u16,

    /// Passed to every check as --host-root (container mode, e.g. /host)
    #[arg(long, value_name = "DIR")]
    pub host_root: Option<PathBuf>,

    /// Where the check binaries are
    #[arg(long, value_name = "DIR", default_value = "/usr/lib/nagios/plugins")]
    pub plugin_dir: PathBuf,

    /// Kill a check still running after this long, whatever its -t (it is killed at its -t plus 5s)
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = plugin::args::duration)]
    pub kill_after: Duration,

    /// TLS and basic auth, in the Prometheus exporter-toolkit's web config format
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
}

/// The config file of `serve --config`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    #[serde(default, with = "opt_duration")]
    pub interval: Option<Duration>,
    #[serde(default)]
    pub checks: Vec<CheckConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    pub command: String,
    #[serde(default, with = "opt_duration")]
    pub interval: Option<Duration>,
}

mod opt_duration {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let v: Option<serde_yaml_ng::Value> = Option::deserialize(d)?;
        match v {
            None => Ok(None),
            Some(serde_yaml_ng::Value::String(s)) => plugin::args::duration(&s)
                .map(Some)
                .map_err(serde::de::Error::custom),
            Some(serde_yaml_ng::Value::Number(n)) => plugin::args::duration(&n.to_string())
                .map(Some)
                .map_err(serde::de::Error::custom),
            Some(other) => Err(serde::de::Error::custom(format!(
                "{other:?} is not a duration (90, 90s, 15m, 2h)"
            ))),
        }
    }
}

/// The grace a check gets past its own `-t` before it is killed.
pub const GRACE: Duration = Duration::from_secs(5);
/// The most one check's answer may take in memory (serve keeps every answer; 64 MiB RSS).
pub const SERVE_OUTPUT_MAX: u64 = 8 << 20;
/// Connections served at the same time; more are closed at once.
pub const MAX_CONN: usize = 8;
/// The most of a request's head that is read.
const HEAD_MAX: usize = 8192;

/// A scheduled check.
#[derive(Debug, Clone)]
pub struct Scheduled {
    pub job: Job,
    pub interval: Duration,
    /// Its own -t plus [`GRACE`], at most --kill-after.
    pub kill_after: Duration,
}

/// The checks `serve` runs, from `--check` and `--config`. Errors name the line or the file.
pub fn schedule(o: &ServeOpts) -> Result<Vec<Scheduled>, String> {
    let mut lines: Vec<(String, Duration)> =
        o.checks.iter().map(|c| (c.clone(), o.interval)).collect();
    if let Some(path) = &o.config {
        let f =
            std::fs::File::open(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
        let text = plugin::capped::read_capped(f, 1 << 20)
            .map_err(|e| format!("--config {}: {e}", path.display()))?
            .ok_or_else(|| format!("--config {}: more than 1 MiB", path.display()))?;
        let c: ServeConfig = serde_yaml_ng::from_slice(&text)
            .map_err(|e| format!("--config {}: {e}", path.display()))?;
        let default = c.interval.unwrap_or(o.interval);
        lines.extend(
            c.checks
                .into_iter()
                .map(|k| (k.command, k.interval.unwrap_or(default))),
        );
    }
    if lines.is_empty() {
        return Err("no check configured: give --check COMMAND or --config FILE".into());
    }
    let commands: Vec<String> = lines.iter().map(|(c, _)| c.clone()).collect();
    let jobs = crate::jobs_from(&commands, &o.plugin_dir, o.host_root.as_deref())?;
    Ok(jobs
        .into_iter()
        .zip(lines)
        .map(|(job, (_, interval))| {
            let kill_after = (job.timeout() + GRACE).min(o.kill_after);
            Scheduled {
                job,
                interval: interval.max(Duration::from_secs(1)),
                kill_after,
            }
        })
        .collect())
}

#[derive(Default)]
struct Slot {
    text: Option<String>,
    run: Option<Run>,
    busy: bool,
    next: Option<Instant>,
}

/// What the scheduler and the HTTP side share.
pub struct State {
    checks: Vec<Scheduled>,
    slots: Mutex<Vec<Slot>>,
    /// When the scheduler last went round (for /healthz).
    tick: Mutex<Instant>,
}

impl State {
    pub fn new(checks: Vec<Scheduled>) -> State {
        let slots = checks.iter().map(|_| Slot::default()).collect();
        State {
            checks,
            slots: Mutex::new(slots),
            tick: Mutex::new(Instant::now()),
        }
    }

    /// The `/metrics` page: every check's last answer, merged, and the runner's series.
    pub fn metrics(&self) -> String {
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let texts: Vec<&str> = slots.iter().filter_map(|s| s.text.as_deref()).collect();
        let runs: Vec<(&str, Run)> = self
            .checks
            .iter()
            .zip(slots.iter())
            .filter_map(|(c, s)| Some((c.job.name.as_str(), s.run?)))
            .collect();
        let own = exposition::runner_series(runs);
        exposition::merge(texts.into_iter().chain([own.as_str()]))
    }

    fn healthy(&self) -> bool {
        self.tick
            .lock()
            .is_ok_and(|t| t.elapsed() < Duration::from_secs(30))
    }

    /// Mark the due checks busy and return them (the scheduler's round).
    fn due(&self, now: Instant) -> Vec<usize> {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Vec::new();
        for (i, s) in slots.iter_mut().enumerate() {
            if s.next.is_some_and(|n| n > now) {
                continue;
            }
            // A check still running (or queued) when it is due again is not stacked: its next
            // start is one interval on.
            s.next = Some(now + self.checks[i].interval);
            if !s.busy {
                s.busy = true;
                out.push(i);
            }
        }
        out
    }

    fn done(&self, i: usize, text: String, run: Run) {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots[i].text = Some(text);
        slots[i].run = Some(run);
        slots[i].busy = false;
    }

    fn all_idle(&self) -> bool {
        self.slots.lock().is_ok_and(|s| s.iter().all(|s| !s.busy))
    }

    /// Run check `i` now (a worker's job).
    pub fn run(&self, i: usize) {
        let c = &self.checks[i];
        let t0 = Instant::now();
        let text = crate::run_job_capped(&c.job, c.kill_after, SERVE_OUTPUT_MAX);
        let seconds = t0.elapsed().as_secs_f64();
        let ended_unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.done(
            i,
            text,
            Run {
                ended_unix,
                seconds,
            },
        );
    }
}

/// An HTTP answer.
pub struct Response {
    pub code: u16,
    pub reason: &'static str,
    pub content_type: &'static str,
    pub body: String,
    pub extra: Option<String>,
}

fn response(code: u16, reason: &'static str, body: impl Into<String>) -> Response {
    Response {
        code,
        reason,
        content_type: "text/plain; charset=utf-8",
        body: body.into(),
        extra: None,
    }
}

/// Answer a request head (everything before the blank line).
pub fn answer(head: &str, state: &State, auth: Option<&BasicAuth>) -> (Response, bool) {
    let mut lines = head.split("\r\n");
    let request = lines.next().unwrap_or("");
    let mut parts = request.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return (
            response(405, "Method Not Allowed", "GET or HEAD only\n"),
            false,
        );
    }
    if let Some(a) = auth {
        let header = lines.find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("authorization")
                .then(|| v.trim())
        });
        if !a.allows(header) {
            let mut r = response(401, "Unauthorized", "Unauthorized\n");
            r.extra = Some("WWW-Authenticate: Basic realm=\"k8s-storage-checks\"\r\n".into());
            return (r, head_only);
        }
    }
    let path = target.split('?').next().unwrap_or("");
    let r = match path {
        "/metrics" => Response {
            code: 200,
            reason: "OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: state.metrics(),
            extra: None,
        },
        "/healthz" if state.healthy() => response(200, "OK", "ok\n"),
        "/healthz" => response(503, "Service Unavailable", "the scheduler is stuck\n"),
        "/" => response(
            200,
            "OK",
            "k8s-storage-checks serve: the checks' series are on /metrics, health on /healthz\n",
        ),
        _ => response(404, "Not Found", "Not found: /metrics or /healthz\n"),
    };
    (r, head_only)
}

/// Read a request head (up to the blank line, at most [`HEAD_MAX`] bytes).
fn read_head(s: &mut impl Read) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return String::from_utf8(buf).ok();
        }
        if buf.len() > HEAD_MAX {
            return None;
        }
    }
}

fn serve_conn(mut s: impl Read + Write, state: &State, auth: Option<&BasicAuth>) {
    let Some(head) = read_head(&mut s) else {
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    let (r, head_only) = answer(&head, state, auth);
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        r.code,
        r.reason,
        r.content_type,
        r.body.len(),
        r.extra.as_deref().unwrap_or("")
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(r.body.as_bytes());
    }
    let _ = s.write_all(&out);
    let _ = s.flush();
}

fn handle(
    stream: TcpStream,
    state: &State,
    tls: Option<&Arc<rustls::ServerConfig>>,
    auth: Option<&BasicAuth>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    match tls {
        None => serve_conn(stream, state, auth),
        Some(cfg) => {
            let Ok(conn) = rustls::ServerConnection::new(cfg.clone()) else {
                return;
            };
            let mut s = rustls::StreamOwned::new(conn, stream);
            serve_conn(&mut s, state, auth);
            s.conn.send_close_notify();
            let _ = s.conn.complete_io(&mut s.sock);
        }
    }
}

fn err(msg: &str) -> i32 {
    eprintln!("k8s-storage-checks serve: {msg}");
    2
}

/// The `serve` subcommand (the first argument names the program).
pub fn main_from(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let o = match ServeOpts::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let checks = match schedule(&o) {
        Ok(c) => c,
        Err(e) => return err(&e),
    };
    let (tls, auth) = match &o.web_config_file {
        None => (None, None),
        Some(p) => match WebConfig::load(p).and_then(|c| Ok((c.tls()?, c.basic_auth_users))) {
            Ok((tls, users)) => (tls, BasicAuth::new(users)),
            Err(e) => return err(&e),
        },
    };
    let listener = match TcpListener::bind(o.listen) {
        Ok(l) => l,
        Err(e) => return err(&format!("--listen {}: {e}", o.listen)),
    };
    crate::install_signal_handlers();
    eprintln!(
        "k8s-storage-checks serve: {}, at most {} at a time, on {}://{}/metrics{}",
        plugin::report::count(checks.len(), "check", "checks"),
        o.concurrency,
        if tls.is_some() { "https" } else { "http" },
        o.listen,
        if auth.is_some() { " (basic auth)" } else { "" }
    );
    let state = Arc::new(State::new(checks));
    let auth = auth.map(Arc::new);

    // The HTTP side: one acceptor thread, a thread per connection, at most MAX_CONN.
    {
        let state = state.clone();
        let _ = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || accept(listener, state, tls, auth));
    }

    // Workers.
    let (tx, rx) = mpsc::channel::<usize>();
    let rx = Arc::new(Mutex::new(rx));
    for n in 0..o.concurrency {
        let rx = rx.clone();
        let state = state.clone();
        let _ = std::thread::Builder::new()
            .name(format!("worker-{n}"))
            .spawn(move || loop {
                let next = rx.lock().map(|r| r.recv());
                match next {
                    Ok(Ok(i)) => state.run(i),
                    _ => return,
                }
            });
    }

    // The scheduler.
    while !STOP.load(Ordering::SeqCst) {
        let now = Instant::now();
        if let Ok(mut t) = state.tick.lock() {
            *t = now;
        }
        for i in state.due(now) {
            if tx.send(i).is_err() {
                return err("the workers are gone");
            }
        }
        // Probes abandoned by a check are re-parented to PID 1, which this process is in a
        // container: reap them, only while no check of ours runs (so no worker's child is
        // reaped under it; the scheduler is the only one that starts them).
        if state.all_idle() {
            crate::reap_orphans();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    0
}

fn accept(
    listener: TcpListener,
    state: Arc<State>,
    tls: Option<Arc<rustls::ServerConfig>>,
    auth: Option<Arc<BasicAuth>>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if open.load(Ordering::SeqCst) >= MAX_CONN {
            drop(stream);
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (state, tls, auth, held) = (state.clone(), tls.clone(), auth.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("conn".into())
            .stack_size(256 << 10)
            .spawn(move || {
                handle(stream, &state, tls.as_ref(), auth.as_deref());
                held.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> ServeOpts {
        let mut v = vec!["serve", "--listen", "127.0.0.1:0"];
        v.extend_from_slice(args);
        ServeOpts::try_parse_from(v).unwrap()
    }

    #[test]
    fn checks_from_options_and_config_with_their_own_intervals_and_kill_times() {
        let cfg = std::env::temp_dir().join(format!("ksc-serve-cfg-{}", std::process::id()));
        std::fs::write(
            &cfg,
            "interval: 2m\nchecks:\n  - command: check_watch_cache -t 20\n    interval: 5m\n  - command: check_jiva_rep_crashloop\n",
        )
        .unwrap();
        let o = opts(&[
            "--check",
            "check_ro_pvc_mounts -t 30",
            "--config",
            cfg.to_str().unwrap(),
            "--kill-after",
            "30s",
        ]);
        let s = schedule(&o).unwrap();
        let v: Vec<(&str, u64, u64)> = s
            .iter()
            .map(|c| {
                (
                    c.job.name.as_str(),
                    c.interval.as_secs(),
                    c.kill_after.as_secs(),
                )
            })
            .collect();
        assert_eq!(
            v,
            [
                ("check_ro_pvc_mounts", 60, 30),
                ("check_watch_cache", 300, 25),
                ("check_jiva_rep_crashloop", 120, 15)
            ]
        );
        std::fs::write(&cfg, "checks:\n  - command: check_a\n    every: 5m\n").unwrap();
        assert!(schedule(&o).unwrap_err().contains("every"));
        std::fs::remove_file(&cfg).unwrap();
        let e = schedule(&opts(&[])).unwrap_err();
        assert!(e.contains("no check configured"), "{e}");
    }

    fn sh(name: &str, script: &str, t: &str) -> Scheduled {
        Scheduled {
            job: Job {
                name: name.into(),
                program: "/bin/sh".into(),
                args: vec!["-c".into(), script.into(), "-t".into(), t.into()],
            },
            interval: Duration::from_mins(1),
            kill_after: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_scrape_gets_merged_series_and_the_runners_own() {
        let st = State::new(vec![
            sh(
                "check_a",
                "echo 'k8s_storage_check_status{check=\"check_a\"} 0'",
                "1",
            ),
            sh("check_b", "exec sleep 30", "1"),
        ]);
        assert_eq!(st.due(Instant::now()), [0, 1]);
        // Due again while busy: not stacked.
        assert!(st.due(Instant::now() + Duration::from_secs(61)).is_empty());
        st.run(0);
        st.run(1);
        let m = st.metrics();
        assert!(
            m.contains("k8s_storage_check_status{check=\"check_a\"} 0\n"),
            "{m}"
        );
        assert!(
            m.contains("k8s_storage_check_status{check=\"check_b\"} 3\n"),
            "{m}"
        );
        assert!(m.contains("killed after 1s"), "{m}");
        assert_eq!(
            m.matches("# TYPE k8s_storage_check_status ").count(),
            1,
            "{m}"
        );
        assert!(m.contains("k8s_storage_check_last_run_timestamp_seconds{check=\"check_b\"} "));
        assert!(m.contains("k8s_storage_check_run_duration_seconds{check=\"check_a\"} "));
        let (r, _) = answer("GET /metrics HTTP/1.1\r\nHost: x", &st, None);
        assert_eq!(r.code, 200);
        assert_eq!(r.body, m);
        assert_eq!(answer("GET /nope HTTP/1.1", &st, None).0.code, 404);
        assert_eq!(answer("POST /metrics HTTP/1.1", &st, None).0.code, 405);
        assert_eq!(answer("GET /healthz HTTP/1.1", &st, None).0.code, 200);
    }
}
