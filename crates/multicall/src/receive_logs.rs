//! `k8s-storage-checks receive-logs`: the receiver of Talos's `machine.logging.destinations`
//! (issue 28), so that the checks read a Talos node's kubelet and kernel logs from files.
//!
//! What Talos sends (siderolabs/talos, `internal/app/machined/pkg/runtime/logging/
//! sender_jsonlines.go`, since v0.14): one JSON object per event — the service's own JSON fields
//! (`extract.go` lifts kubelet JSON logging's `ts`, `level`, `msg`, `err` out of the line), plus
//! `msg`, `talos-time` (RFC 3339 with nanoseconds), `talos-level` and, for a service's log
//! (`circular.go`), `talos-service`; the kernel log destination (`controllers/runtime/
//! kmsg_log.go`) sends `facility`, `seq`, `clock`, `priority` instead of a service. Over TCP the
//! objects are newline-delimited on one long-lived connection; over UDP one object per datagram.
//!
//! What it keeps, under `--state-dir`: one file per service, `<service>.log`, one line per event
//! — the event's JSON object as received (re-serialised: one line, valid UTF-8), which
//! `check_kubelet_nested_ops --log-file DIR/kubelet.log` reads (`msg`, `talos-time`) — and
//! `kernel.log` in the `/dev/kmsg` record format (`prio,seq,usec,-;text`), which
//! `check_storage_kernel_errors --kmsg DIR/kernel.log` reads: the sequence number is the
//! receiver's own (continued across restarts), the monotonic time is the event's `talos-time`
//! mapped to this node's monotonic clock at receipt. A file over `--max-file-size` is renamed
//! `<name>.1` (the one older generation, as Talos's own `/var/log` files since v1.13) and started
//! afresh; the checks' `--state-dir` positions follow the rename.
//!
//! Bounded whatever the senders do: a line over `--max-line` is dropped (and counted), at most
//! `--max-connections` TCP connections (past it, the one idle longest is closed), at most
//! `--max-services` files; anything that is not such a JSON object is dropped and counted.
//! Files are created relative to the opened directory without following links (`openat` with
//! `O_NOFOLLOW`); a file that is a link, not regular, hard-linked or another user's is never
//! written. Counters are kept in `DIR/receive-logs.json` (rewritten atomically, at most four
//! times a second).

use clap::Parser;
use node::logs::state::StateDir;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The subcommand's name: `k8s-storage-checks receive-logs`.
pub const SUB: &str = "receive-logs";

/// The applet: reachable as the first argument only (no link of this name is installed).
pub static APPLET: super::Applet = super::Applet {
    name: SUB,
    caps: &[],
    about: super::about::<Opts>,
    longs: super::longs::<Opts>,
    run: main_from,
};

/// The receiver for `name`, if it is its name.
pub fn applet(name: &str) -> Option<&'static super::Applet> {
    (name == SUB).then_some(&APPLET)
}

const LONG_ABOUT: &str = "\
Receives Talos's log destinations (machine.logging.destinations with format json_lines, over
TCP and UDP on the same port; the kernel log destination too) and keeps one bounded, rotated
file per service under --state-dir: DIR/kubelet.log for `check_kubelet_nested_ops --log-file
DIR/kubelet.log`, DIR/kernel.log (kmsg records) for `check_storage_kernel_errors --kmsg
DIR/kernel.log`, DIR/<service>.log for every other service. Counters (lines written per
service, lines dropped and why, connections) are kept in DIR/receive-logs.json.

Talos machine config (v1.5+ also as a KmsgLogConfig document for the kernel log):
  machine:
    logging:
      destinations:
        - endpoint: tcp://127.0.0.1:5170/
          format: json_lines
    install:
      extraKernelArgs: [talos.logging.kernel=tcp://127.0.0.1:5170/]

Runs until killed; exits 3 when it cannot listen or use the directory.";

#[derive(Debug, Clone, Parser)]
#[command(
    name = "k8s-storage-checks receive-logs",
    bin_name = "k8s-storage-checks receive-logs",
    version,
    about = "Receive Talos json_lines logs (TCP and UDP) into a bounded file per service",
    long_about = LONG_ABOUT
)]
pub struct Opts {
    /// Listen on this address, TCP and UDP (port 0: any free port, the same for both)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,

    /// Keep the files here (created if missing; must be this user's, not writable by others)
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: PathBuf,

    /// Rename a file to <name>.1 when the next line would take it past this many bytes
    #[arg(long = "max-file-size", value_name = "BYTES", default_value_t = 5 << 20,
          value_parser = clap::value_parser!(u64).range(4096..=1 << 30))]
    pub max_file_size: u64,

    /// Drop a line (a TCP line or a UDP datagram) longer than this many bytes (Talos sends none
    /// over 64 KiB: its scanner's cap)
    #[arg(long = "max-line", value_name = "BYTES", default_value_t = 64 << 10,
          value_parser = clap::value_parser!(u64).range(256..=1 << 20))]
    pub max_line: u64,

    /// TCP connections kept at most; past it, the one idle longest is closed
    #[arg(long = "max-connections", value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_connections: u64,

    /// Files (services) kept at most; lines of further services are dropped
    #[arg(long = "max-services", value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_services: u64,

    /// Keep only these services (repeatable; `kernel` for the kernel log) [default: every one]
    #[arg(long = "service", value_name = "NAME")]
    pub service: Vec<String>,

    /// Say on stderr what was dropped and why, once per kind and connection
    #[arg(short, long)]
    pub verbose: bool,
}

/// The counters file's name in the directory.
pub const STATS_FILE: &str = "receive-logs.json";

/// Why lines are dropped (the counters' names).
const DROP_KINDS: &[&str] = &[
    "garbage",
    "overlong",
    "no_service",
    "bad_service_name",
    "filtered",
    "services_over_cap",
    "before_boot",
    "write_error",
];

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    dropped: [AtomicU64; 8],
    accepted: AtomicU64,
    evicted: AtomicU64,
    datagrams: AtomicU64,
    /// Bumped on every change: the stats writer rewrites the file only when it moved.
    generation: AtomicU64,
}

impl Counters {
    fn drop(&self, kind: &str) {
        let i = DROP_KINDS
            .iter()
            .position(|k| *k == kind)
            .expect("known kind");
        self.dropped[i].fetch_add(1, Ordering::Relaxed);
        self.bump();
    }
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// An open service file.
struct Out {
    file: std::fs::File,
    size: u64,
    written: u64,
}

/// The directory and its open files.
struct Files {
    dir: StateDir,
    max_file_size: u64,
    max_services: usize,
    open: HashMap<String, Out>,
    /// Services whose file was refused (a link, another user's): never tried again.
    refused: BTreeMap<String, String>,
    written: BTreeMap<String, u64>,
    /// The kernel log's next sequence number.
    kernel_seq: u64,
}

impl Files {
    /// Open `dir` (created when missing; owner and mode checked as the checks' state
    /// directories are, reached without following another user's links).
    fn open_dir(dir: &Path, max_file_size: u64, max_services: usize) -> Result<Files, String> {
        let dir = StateDir::open(dir, true).map_err(|e| match e {
            node::logs::state::DirError::Open(s) | node::logs::state::DirError::Refused(s) => s,
        })?;
        let mut files = Files {
            dir,
            max_file_size,
            max_services,
            open: HashMap::new(),
            refused: BTreeMap::new(),
            written: BTreeMap::new(),
            kernel_seq: 1,
        };
        // Records of an earlier run carry the monotonic times of that run's boot: they go to
        // kernel.log.1, and the numbering goes on after them.
        for n in ["kernel.log.1", "kernel.log"] {
            if let Some(s) = files.last_kernel_seq(n) {
                files.kernel_seq = files.kernel_seq.max(s + 1);
            }
        }
        files.rotate("kernel.log")?;
        Ok(files)
    }

    /// Create or open `name` for appending (see [`StateDir::open_append`]).
    fn open_file(&self, name: &str, excl: bool) -> Result<Out, String> {
        let (file, size) = self.dir.open_append(name, excl)?;
        Ok(Out {
            file,
            size,
            written: 0,
        })
    }

    /// `name` → `name.1` (replacing the older generation), relative to the directory.
    fn rotate(&self, name: &str) -> Result<(), String> {
        self.dir.rename(name, &format!("{name}.1"))
    }

    /// The last sequence number of a kmsg file left by an earlier run (its last 64 KiB).
    fn last_kernel_seq(&self, name: &str) -> Option<u64> {
        let b = self.dir.read_tail(name, 64 << 10)?;
        b.split(|&c| c == b'\n')
            .filter_map(|l| {
                let head = &l[..memchr(b';', l)?];
                let mut parts = head.split(|&c| c == b',');
                parts.next()?;
                std::str::from_utf8(parts.next()?).ok()?.parse::<u64>().ok()
            })
            .max()
    }

    /// Append one line (with its newline) to the file of `service`.
    fn append(&mut self, service: &str, line: &[u8]) -> Result<(), String> {
        if let Some(why) = self.refused.get(service) {
            return Err(why.clone());
        }
        let name = format!("{service}.log");
        if !self.open.contains_key(service) {
            if self.open.len() >= self.max_services {
                return Err("services_over_cap".into());
            }
            match self.open_file(&name, false) {
                Ok(o) => {
                    self.open.insert(service.to_string(), o);
                }
                Err(e) => {
                    self.refused.insert(service.to_string(), e.clone());
                    return Err(e);
                }
            }
        }
        let need = line.len() as u64;
        let full = {
            let o = self.open.get(service).expect("opened above");
            o.size > 0 && o.size + need > self.max_file_size
        };
        if full {
            self.open.remove(service);
            self.rotate(&name)?;
            match self.open_file(&name, true) {
                Ok(o) => {
                    self.open.insert(service.to_string(), o);
                }
                Err(e) => {
                    self.refused.insert(service.to_string(), e.clone());
                    return Err(e);
                }
            }
        }
        let o = self.open.get_mut(service).expect("opened above");
        o.file.write_all(line).map_err(|e| {
            format!(
                "{}: {}",
                self.dir.path().join(&name).display(),
                plugin::errtext(&e)
            )
        })?;
        o.size += need;
        o.written += 1;
        *self.written.entry(service.to_string()).or_default() += 1;
        Ok(())
    }
}

fn memchr(c: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

/// A service name Talos can send (its file is `<name>.log`; Talos itself refuses `/` and `.`).
pub fn valid_service(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// go-kmsg's facility names, in the kernel's numbering order as it prints them.
const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
];
const PRIORITIES: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// `/dev/kmsg`'s escaping: `\`, control characters and DEL as `\xNN`.
fn kmsg_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' || c.is_ascii_control() {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// What one received line becomes: (service, the line to append).
#[derive(Debug, PartialEq)]
pub enum Decoded {
    Line(String, Vec<u8>),
    /// Dropped: the counter's name.
    Drop(&'static str),
}

/// Decode one received event. `kernel_seq`: the next kmsg sequence number (advanced when used);
/// `(mono_now_us, real_now_ms)`: this node's clocks at receipt.
pub fn decode(raw: &[u8], kernel_seq: &mut u64, clocks: (u64, i64)) -> Decoded {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let Ok(serde_json::Value::Object(obj)) = serde_json::from_slice::<serde_json::Value>(raw)
    else {
        return Decoded::Drop("garbage");
    };
    let Some(msg) = obj.get("msg").and_then(|m| m.as_str()) else {
        return Decoded::Drop("garbage");
    };
    let service = match obj.get("talos-service") {
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(_) => return Decoded::Drop("bad_service_name"),
        None if obj.contains_key("facility") => "kernel",
        None => return Decoded::Drop("no_service"),
    };
    if !valid_service(service) {
        return Decoded::Drop("bad_service_name");
    }
    if service == "kernel" && !obj.contains_key("talos-service") {
        let (mono_now, now) = clocks;
        let t = obj
            .get("talos-time")
            .and_then(|t| t.as_str())
            .and_then(|t| node::logs::time::parse_rfc3339(t.as_bytes()))
            .map_or(now, |(ms, _)| ms);
        let usec = mono_now as i64 - (now - t).max(0) * 1000;
        if usec < 0 {
            return Decoded::Drop("before_boot");
        }
        let name = |k: &str, table: &[&str], default: usize| {
            obj.get(k).and_then(|v| v.as_str()).map_or(default, |s| {
                table.iter().position(|n| *n == s).unwrap_or(default)
            })
        };
        // An unknown facility is not the kernel's (its records are read for facility 0 only).
        let fac = name("facility", FACILITIES, 1);
        let prio = name("priority", PRIORITIES, 6);
        let seq = *kernel_seq;
        *kernel_seq += 1;
        let line = format!(
            "{},{seq},{usec},-;{}\n",
            fac << 3 | prio,
            kmsg_escape(msg.trim_end())
        );
        return Decoded::Line("kernel".into(), line.into_bytes());
    }
    let service = service.to_string();
    let mut line = serde_json::to_vec(&obj).expect("a JSON object serialises");
    line.push(b'\n');
    Decoded::Line(service, line)
}

/// Everything the listeners share.
struct Shared {
    opts: Opts,
    files: Mutex<Files>,
    counters: Counters,
    conns: Mutex<Vec<Conn>>,
    next_id: AtomicU64,
    said: Mutex<std::collections::BTreeSet<String>>,
}

struct Conn {
    id: u64,
    stream: TcpStream,
    last: Instant,
}

impl Shared {
    /// Say once (with -v) why something was dropped.
    fn say(&self, what: String) {
        if self.opts.verbose && self.said.lock().expect("not poisoned").insert(what.clone()) {
            eprintln!("receive-logs: {}", plugin::sanitize(&what));
        }
    }

    fn handle(&self, raw: &[u8], from: &str) {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        self.counters.received.fetch_add(1, Ordering::Relaxed);
        self.counters.bump();
        let mut files = self.files.lock().expect("not poisoned");
        let mut seq = files.kernel_seq;
        let d = decode(raw, &mut seq, node::logs::kmsg::clocks());
        match d {
            Decoded::Drop(kind) => {
                self.counters.drop(kind);
                self.say(format!("{from}: a line dropped: {kind}"));
            }
            Decoded::Line(service, line) => {
                if !self.opts.service.is_empty() && !self.opts.service.contains(&service) {
                    self.counters.drop("filtered");
                    return;
                }
                // The sequence number counts only when its line goes to the file.
                let kernel = service == "kernel";
                match files.append(&service, &line) {
                    Ok(()) => {
                        if kernel {
                            files.kernel_seq = files.kernel_seq.max(seq);
                        }
                    }
                    Err(e) if e == "services_over_cap" => {
                        self.counters.drop("services_over_cap");
                        self.say(format!(
                            "service {service}: dropped, {} files are kept at most (--max-services)",
                            self.opts.max_services
                        ));
                    }
                    Err(e) => {
                        self.counters.drop("write_error");
                        self.say(e);
                    }
                }
            }
        }
    }

    /// A TCP connection: newline-delimited events until it closes; a line over --max-line is
    /// dropped up to its newline.
    fn serve(&self, mut s: TcpStream, id: u64, peer: String) {
        let cap = self.opts.max_line as usize;
        let mut buf = vec![0u8; cap + 1];
        let mut filled = 0usize;
        let mut skipping = false;
        loop {
            let n = match s.read(&mut buf[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(c) = self
                .conns
                .lock()
                .expect("not poisoned")
                .iter_mut()
                .find(|c| c.id == id)
            {
                c.last = Instant::now();
            }
            let end = filled + n;
            let mut start = 0;
            while let Some(i) = memchr(b'\n', &buf[start..end]) {
                let line = &buf[start..start + i];
                if skipping {
                    skipping = false;
                } else {
                    self.handle(line, &peer);
                }
                start += i + 1;
            }
            if skipping {
                filled = 0;
                continue;
            }
            buf.copy_within(start..end, 0);
            filled = end - start;
            if filled > cap {
                self.counters.drop("overlong");
                self.say(format!(
                    "{peer}: a line longer than {cap} bytes (--max-line) dropped"
                ));
                skipping = true;
                filled = 0;
            }
        }
        if filled > 0 && !skipping {
            self.handle(&buf[..filled], &peer);
        }
        self.conns
            .lock()
            .expect("not poisoned")
            .retain(|c| c.id != id);
        self.counters.bump();
    }

    /// Keep a new connection; past --max-connections, close the one idle longest.
    fn admit(&self, s: &TcpStream) -> Option<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let clone = s.try_clone().ok()?;
        let mut conns = self.conns.lock().expect("not poisoned");
        while conns.len() as u64 >= self.opts.max_connections {
            let (i, _) = conns.iter().enumerate().min_by_key(|(_, c)| c.last)?;
            let old = conns.remove(i);
            let _ = old.stream.shutdown(Shutdown::Both);
            self.counters.evicted.fetch_add(1, Ordering::Relaxed);
        }
        conns.push(Conn {
            id,
            stream: clone,
            last: Instant::now(),
        });
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        self.counters.bump();
        Some(id)
    }

    fn stats_json(&self, listen: &SocketAddr) -> String {
        let c = &self.counters;
        let dropped: BTreeMap<&str, u64> = DROP_KINDS
            .iter()
            .zip(c.dropped.iter())
            .map(|(k, v)| (*k, v.load(Ordering::Relaxed)))
            .collect();
        let files = self.files.lock().expect("not poisoned");
        let refused: BTreeMap<&String, &String> = files.refused.iter().collect();
        serde_json::json!({
            "listen": listen.to_string(),
            "received": c.received.load(Ordering::Relaxed),
            "datagrams": c.datagrams.load(Ordering::Relaxed),
            "written": files.written,
            "dropped": dropped,
            "refused": refused,
            "connections": {
                "accepted": c.accepted.load(Ordering::Relaxed),
                "evicted": c.evicted.load(Ordering::Relaxed),
                "open": self.conns.lock().expect("not poisoned").len(),
            },
        })
        .to_string()
    }
}

/// Bind TCP and UDP on the same address; port 0 picks one free for both.
fn bind(addr: SocketAddr) -> Result<(TcpListener, UdpSocket), String> {
    let mut last = String::new();
    for _ in 0..if addr.port() == 0 { 16 } else { 1 } {
        let tcp = TcpListener::bind(addr)
            .map_err(|e| format!("cannot listen on tcp {addr}: {}", plugin::errtext(&e)))?;
        let got = tcp.local_addr().map_err(|e| plugin::errtext(&e))?;
        match UdpSocket::bind(got) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(e) => last = format!("cannot listen on udp {got}: {}", plugin::errtext(&e)),
        }
    }
    Err(last)
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(256 << 10)
        .spawn(f)
        .is_ok()
}

/// Run the receiver; returns only when it cannot start (exit 3) or for --help/--version.
pub fn main_from(args: Vec<OsString>) -> i32 {
    let opts = match Opts::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            // --help, --version and usage errors alike: 3, as every check's own.
            let _ = e.print();
            return 3;
        }
    };
    match run(opts) {
        Ok(()) => 0,
        Err(e) => {
            println!("RECEIVE_LOGS UNKNOWN - {}", plugin::sanitize(&e));
            3
        }
    }
}

fn run(opts: Opts) -> Result<(), String> {
    for s in &opts.service {
        if !valid_service(s) {
            return Err(format!(
                "--service {s}: not a service name (letters, digits, - and _)"
            ));
        }
    }
    let files = Files::open_dir(
        &opts.state_dir,
        opts.max_file_size,
        opts.max_services as usize,
    )?;
    let stats_dir = StateDir::open(&opts.state_dir, false).map_err(|e| format!("{e:?}"))?;
    let (tcp, udp) = bind(opts.listen)?;
    let listen = tcp.local_addr().map_err(|e| plugin::errtext(&e))?;
    let shared = Arc::new(Shared {
        opts,
        files: Mutex::new(files),
        counters: Counters::default(),
        conns: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(1),
        said: Mutex::new(std::collections::BTreeSet::new()),
    });
    stats_dir.write(STATS_FILE, shared.stats_json(&listen).as_bytes())?;
    eprintln!(
        "receive-logs: listening on tcp {listen} and udp {listen}, writing {}",
        shared.opts.state_dir.display()
    );
    let sh = shared.clone();
    spawn("udp", move || {
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, from)) = udp.recv_from(&mut buf) else {
                continue;
            };
            sh.counters.datagrams.fetch_add(1, Ordering::Relaxed);
            let from = format!("udp {from}");
            if n as u64 > sh.opts.max_line {
                sh.counters.drop("overlong");
                sh.say(format!(
                    "{from}: a datagram longer than {} bytes (--max-line) dropped",
                    sh.opts.max_line
                ));
                continue;
            }
            for line in buf[..n].split(|&c| c == b'\n') {
                sh.handle(line, &from);
            }
        }
    });
    let sh = shared.clone();
    spawn("stats", move || {
        let mut seen = u64::MAX;
        loop {
            let g = sh.counters.generation.load(Ordering::Relaxed);
            if g != seen {
                seen = g;
                if let Err(e) = stats_dir.write(STATS_FILE, sh.stats_json(&listen).as_bytes()) {
                    sh.say(e);
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    for s in tcp.incoming() {
        let Ok(s) = s else { continue };
        let peer = s
            .peer_addr()
            .map_or_else(|_| "tcp ?".into(), |p| format!("tcp {p}"));
        let Some(id) = shared.admit(&s) else { continue };
        let sh = shared.clone();
        if !spawn("conn", move || sh.serve(s, id, peer)) {
            shared
                .conns
                .lock()
                .expect("not poisoned")
                .retain(|c| c.id != id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOCKS: (u64, i64) = (3_600_000_000, 1_780_000_000_000);

    #[test]
    fn talos_service_events_are_kept_as_one_json_line() {
        let mut seq = 1;
        let raw = br#"{"caller":"nestedpendingoperations.go:348","msg":"Operation for \"x\" failed.\nsecond","talos-level":"info","talos-service":"kubelet","talos-time":"2026-07-13T20:27:25.123456789Z","v":0}"#;
        let Decoded::Line(s, l) = decode(raw, &mut seq, CLOCKS) else {
            panic!()
        };
        assert_eq!(s, "kubelet");
        assert_eq!(std::str::from_utf8(&l).unwrap().matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&l).unwrap();
        assert_eq!(v["msg"], "Operation for \"x\" failed.\nsecond");
        assert_eq!(v["talos-time"], "2026-07-13T20:27:25.123456789Z");
        assert_eq!(seq, 1);
    }

    #[test]
    fn kernel_events_become_kmsg_records_dated_by_talos_time() {
        let mut seq = 7;
        // 90 s before now: 90 s before this node's monotonic now.
        let t = "2026-05-28T20:25:10Z";
        let now = node::logs::time::parse_rfc3339(b"2026-05-28T20:26:40Z")
            .unwrap()
            .0;
        let raw = format!(
            r#"{{"clock":123,"facility":"kern","msg":"EXT4-fs error (device sdc): a\\b\n","priority":"err","seq":55,"talos-level":"error","talos-time":"{t}"}}"#
        );
        let d = decode(raw.as_bytes(), &mut seq, (100_000_000, now));
        assert_eq!(
            d,
            Decoded::Line(
                "kernel".into(),
                b"3,7,10000000,-;EXT4-fs error (device sdc): a\\x5cb\n".to_vec()
            )
        );
        assert_eq!(seq, 8);
        let rec =
            node::logs::kmsg::parse_record(b"3,7,10000000,-;EXT4-fs error (device sdc): a\\x5cb")
                .unwrap();
        assert_eq!(rec.facility, 0);
        assert_eq!(rec.text, "EXT4-fs error (device sdc): a\\b");
        // Older than this node's boot: dropped.
        let raw = br#"{"facility":"kern","msg":"x","talos-time":"2020-01-01T00:00:00Z"}"#;
        assert_eq!(
            decode(raw, &mut seq, (1000, now)),
            Decoded::Drop("before_boot")
        );
        // A user-space record keeps its facility (not counted as the kernel's).
        let raw = br#"{"facility":"daemon","priority":"info","msg":"x"}"#;
        let Decoded::Line(_, l) = decode(raw, &mut seq, (1000, now)) else {
            panic!()
        };
        assert!(
            l.starts_with(b"30,8,1000,-;x"),
            "{}",
            String::from_utf8_lossy(&l)
        );
    }

    #[test]
    fn garbage_is_dropped_by_kind() {
        let mut seq = 1;
        for (raw, kind) in [
            (&b"not json"[..], "garbage"),
            (b"\xff\xfe\x00{", "garbage"),
            (b"[1,2]", "garbage"),
            (br#"{"talos-service":"kubelet"}"#, "garbage"),
            (br#"{"msg":"x"}"#, "no_service"),
            (
                br#"{"msg":"x","talos-service":"../etc/passwd"}"#,
                "bad_service_name",
            ),
            (
                br#"{"msg":"x","talos-service":".hidden"}"#,
                "bad_service_name",
            ),
            (br#"{"msg":"x","talos-service":7}"#, "bad_service_name"),
        ] {
            assert_eq!(
                decode(raw, &mut seq, CLOCKS),
                Decoded::Drop(kind),
                "{raw:?}"
            );
        }
        assert!(valid_service("ext-iscsid") && valid_service("kubelet"));
        assert!(!valid_service("") && !valid_service("a/b") && !valid_service(&"a".repeat(65)));
    }
}
