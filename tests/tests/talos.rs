//! Talos's kubelet and kernel logs, the three ways the suite reads them (issue 28), each as a
//! fault-matrix-style table of rows run through the release binaries with the same invariants
//! (exit code in 0..3, the protocol's first line, the expected status and phrase):
//!
//! 1. the files Talos ≥ v1.13 writes under `/var/log` (`<service>.log`, the service's own lines:
//!    the kubelet's JSON logging, Talos's default `logging.format: json`; rotated to
//!    `<service>.log.1` past 5 MiB), read with `--log-file`;
//! 2. `machine.logging.destinations` `json_lines` over a real TCP connection and real UDP
//!    datagrams into `k8s-storage-checks receive-logs`, whose files the checks read;
//! 3. `talosctl [-n A,B] logs kubelet` and `talosctl dmesg` output on stdin (`--log-file -`,
//!    `--kmsg -`), with talosctl's `<node>: ` prefix for one node and several.
//!
//! The events are built the way Talos builds them (siderolabs/talos: `runtime/logging/
//! extract.go` lifts the kubelet's `ts` and `msg` out of its JSON line, `sender_jsonlines.go`
//! marshals the fields with `msg`, `talos-time` (RFC 3339, nanoseconds), `talos-level` and
//! `talos-service` through Go's encoding/json — sorted keys, `<>&` escaped — newline-terminated on
//! TCP, one per datagram on UDP; `controllers/runtime/kmsg_log.go` sends kernel records with
//! `facility`, `seq`, `clock`, `priority`; machined's Dmesg API prints `"%s: %7s: [%s]: %s"`).
//! Talos itself is not run: these are its documented formats, sent over real sockets.
//!
//! The receiver's hostile-input tests (huge lines, binary, many connections, planted links) wait
//! on its counters file, never on sleeps.

use e2e::logs::*;
use e2e::{bin, Cmd, Output};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROGRAM: &str = "k8s-storage-checks";
const PV: &str = "pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
const LONGHORN: &str = "driver.longhorn.io";

fn now_secs() -> i64 {
    let _ = e2e::bin_dir();
    e2e::logs::now_secs()
}

/// The worker-04 loop: UnmountDevice's GetDeviceMountRefs failing for 12 minutes, its backoff
/// doubling from 500ms to the kubelet's maximum 2m2s. (time s, message) per failure.
fn worker04(now: i64) -> Vec<(i64, String)> {
    let (mut t, mut b, end) = ((now - 12 * 60) * 1000, 500u64, now * 1000 - 20_000);
    let mut v = Vec::new();
    while t <= end {
        v.push((
            t / 1000,
            nested_op_msg(
                t / 1000,
                LONGHORN,
                PV,
                "",
                b,
                &mount_refs_err(LONGHORN, PV, "worker-04"),
            ),
        ));
        t += b as i64 + 50;
        b = (b * 2).min(122_000);
    }
    v
}

/// A healthy kubelet's lines (the same kinds of records, no failed operation).
fn healthy(now: i64) -> Vec<(i64, String)> {
    (0..20)
        .map(|i| {
            (
                now - 600 + i * 30,
                format!("\"SyncLoop (PLEG): event for pod\" pod=\"default/web-{i}\" event={{\"Type\":\"ContainerStarted\"}}"),
            )
        })
        .collect()
}

/// Go's `time.Time.Format(time.RFC3339Nano)` in UTC (trailing zeros of the fraction dropped).
fn rfc3339_nano(t: i64, nanos: u32) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(t);
    let frac = format!("{nanos:09}");
    let frac = frac.trim_end_matches('0');
    let frac = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}Z")
}

/// Go's encoding/json: sorted map keys (serde_json's default map is sorted too) and HTML
/// escaping of `<`, `>`, `&` (they only occur inside strings).
fn go_json(v: &serde_json::Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The kubelet's JSON line as Talos receives it on the kubelet's stderr, turned into the event
/// `sender_jsonlines.go` sends: `ts` becomes `talos-time`, `msg` lifted, the other fields kept.
fn talos_event(t: i64, msg: &str) -> String {
    go_json(&serde_json::json!({
        "caller": "nestedpendingoperations/nestedpendingoperations.go:348",
        "msg": msg,
        "v": 0,
        "talos-level": "info",
        "talos-service": "kubelet",
        "talos-time": rfc3339_nano(t, 123_000_000),
    }))
}

/// A kernel record as the kernel log destination sends it.
fn talos_kernel_event(t: i64, seq: u64, prio: &str, msg: &str) -> String {
    go_json(&serde_json::json!({
        "clock": 8_812_235_211_760u64 + seq,
        "facility": "kern",
        "msg": msg,
        "priority": prio,
        "seq": seq,
        "talos-level": if prio == "err" { "error" } else { "info" },
        "talos-time": rfc3339_nano(t, 5_000),
    }))
}

/// `talosctl dmesg`'s line of one record (machined's `"%s: %7s: [%s]: %s"`, talosctl's node).
fn talosctl_dmesg(node: &str, t: i64, prio: &str, msg: &str) -> String {
    format!(
        "{node}: kern: {prio:>7}: [{}]: {msg}",
        rfc3339_nano(t, 123_456_789)
    )
}

/// The kernel's storage errors of a disk going bad under the Longhorn volume, and a healthy boot.
fn kernel_fault() -> Vec<(&'static str, &'static str)> {
    vec![
        ("info", "sd 2:0:0:1: [sdc] Attached SCSI disk"),
        ("err", "blk_update_request: I/O error, dev sdc, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"),
        ("err", "EXT4-fs error (device sdc): ext4_journal_check_start:83: comm kworker/u8:2: Detected aborted journal"),
        ("crit", "EXT4-fs (sdc): Remounting filesystem read-only"),
    ]
}
fn kernel_healthy() -> Vec<(&'static str, &'static str)> {
    vec![
        ("info", "sd 2:0:0:1: [sdc] Attached SCSI disk"),
        (
            "info",
            "EXT4-fs (sdc): mounted filesystem 3f1c2a9e with ordered data mode. Quota mode: none.",
        ),
    ]
}

/// The invariants of every row, then its status and phrase.
fn assert_row(row: &str, out: &Output, name: &str, code: i32, phrase: &str) {
    assert!(
        (0..=3).contains(&out.code),
        "{row}: exit {}: {out:?}",
        out.code
    );
    out.assert_protocol(name);
    assert_eq!(out.code, code, "{row}: {out:?}");
    assert!(
        out.stdout.contains(phrase),
        "{row}: no {phrase:?} in {}",
        out.stdout
    );
    assert!(
        out.stdout.lines().skip(1).all(|l| !l.contains('|')),
        "{row}: | after the first line: {}",
        out.stdout
    );
}

fn nested() -> Cmd {
    Cmd::check("check_kubelet_nested_ops").env("TZ", "UTC")
}

const NESTED: &str = "KUBELET_NESTED_OPS";
const KERNEL: &str = "STORAGE_KERNEL_ERRORS";
const MOUNT_REFS: &str =
    "pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b UnmountDevice (GetDeviceMountRefs)";

/// Path 1: `/var/log/kubelet.log` of Talos ≥ v1.13 (log persistence: `LogPersistenceController`
/// writes each line the kubelet prints, JSON logging by default, and renames the file to
/// `kubelet.log.1` past 5 MiB). Rows: the worker-04 loop, a healthy log, the loop across
/// Talos's rotation with --state-dir (the earlier part in kubelet.log.1).
#[test]
fn var_log_files_of_talos_1_13() {
    let now = now_secs();
    let tmp = tempfile::tempdir().unwrap();
    let var_log = tmp.path().join("var/log");
    std::fs::create_dir_all(&var_log).unwrap();
    let write = |lines: &[(i64, String)]| {
        let body: String = lines.iter().map(|(t, m)| json_line(*t, m) + "\n").collect();
        // machined's own log beside it, timestamp-prefixed (never read by the check).
        std::fs::write(
            var_log.join("machined.log"),
            "2026/12/05 05:00:00.000000 [talos] task startAllServices (1/1): done\n",
        )
        .unwrap();
        std::fs::write(var_log.join("kubelet.log"), body).unwrap();
    };
    let log = var_log.join("kubelet.log");
    for (row, lines, code, phrase) in [
        ("worker-04 loop", worker04(now), 2, MOUNT_REFS),
        ("healthy", healthy(now), 0, "no failed volume operations"),
    ] {
        write(&lines);
        let out = nested().arg("--log-file").arg(&log).run();
        assert_row(row, &out, NESTED, code, phrase);
    }
    // Rotation as Talos does it (rename, new file), read with --state-dir across it.
    let state = tmp.path().join("state");
    let lines = worker04(now);
    let (first, rest) = lines.split_at(lines.len() / 2);
    write(first);
    let out = nested()
        .arg("--log-file")
        .arg(&log)
        .arg("--state-dir")
        .arg(&state)
        .run();
    assert!(out.code == 1 || out.code == 2, "{out:?}");
    std::fs::rename(&log, var_log.join("kubelet.log.1")).unwrap();
    let body: String = rest.iter().map(|(t, m)| json_line(*t, m) + "\n").collect();
    std::fs::write(&log, body).unwrap();
    let out = nested()
        .arg("--log-file")
        .arg(&log)
        .arg("--state-dir")
        .arg(&state)
        .run();
    assert_row("rotated", &out, NESTED, 2, "at max backoff");
    assert!(out.stdout.contains("failing for"), "{out:?}");
}

/// A running receiver, killed when dropped.
struct Receiver {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Receiver {
    fn start(dir: &Path, extra: &[&str]) -> Receiver {
        let mut child = Command::new(bin(PROGRAM))
            .args(["receive-logs", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn receive-logs");
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(err);
            let mut l = String::new();
            let _ = r.read_line(&mut l);
            let _ = tx.send(l);
            // Keep draining (-v lines) so the receiver never blocks on a full pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("receive-logs says where it listens");
        let addr = line
            .split_whitespace()
            .nth(4)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Receiver {
            child,
            dir: dir.to_path_buf(),
            addr,
        }
    }

    fn stats(&self) -> serde_json::Value {
        std::fs::read(self.dir.join("receive-logs.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Wait until the counters say `what` (a condition on the counters file), 20 s at most.
    fn wait(&self, what: &str, cond: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.stats();
            if cond(&s) {
                return s;
            }
            assert!(Instant::now() < end, "receiver never got to {what}: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The receiver's peak memory (VmHWM) and threads.
    fn mem_threads(&self) -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |k: &str| {
            s.lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap()
        };
        (field("VmHWM:") * 1024, field("Threads:"))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn n(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or(0)
}

/// Send events the way Talos's json_lines sender does: TCP, one connection, each event ending
/// in a newline; UDP, one event per datagram.
fn send_tcp(addr: SocketAddr, events: &[String]) {
    let mut s = TcpStream::connect(addr).unwrap();
    for e in events {
        s.write_all(format!("{e}\n").as_bytes()).unwrap();
    }
}
fn send_udp(addr: SocketAddr, events: &[String]) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for e in events {
        s.send_to(e.as_bytes(), addr).unwrap();
    }
}

/// Path 2: the log destinations into the receiver, over TCP and over UDP; the checks read its
/// files. Rows: the worker-04 loop and a healthy kubelet; kernel records of a failing disk and
/// of a healthy one.
#[test]
fn log_destinations_into_the_receiver() {
    let now = now_secs();
    for proto in ["tcp", "udp"] {
        for (row, kubelet, kernel, code, phrase, kcode, kphrase) in [
            (
                "worker-04 loop",
                worker04(now),
                kernel_fault(),
                2,
                MOUNT_REFS,
                2,
                "sdc",
            ),
            (
                "healthy",
                healthy(now),
                kernel_healthy(),
                0,
                "no failed volume operations",
                0,
                "OK",
            ),
        ] {
            let row = format!("{proto} {row}");
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("logs");
            let r = Receiver::start(&dir, &[]);
            let events: Vec<String> = kubelet.iter().map(|(t, m)| talos_event(*t, m)).collect();
            let kev: Vec<String> = kernel
                .iter()
                .enumerate()
                .map(|(i, (p, m))| talos_kernel_event(now - 60 + i as i64, 900 + i as u64, p, m))
                .collect();
            let all: Vec<String> = events.iter().chain(kev.iter()).cloned().collect();
            if proto == "tcp" {
                send_tcp(r.addr, &all);
            } else {
                send_udp(r.addr, &all);
            }
            let (nk, nn) = (events.len() as u64, kev.len() as u64);
            let s = r.wait(&format!("{nk} kubelet and {nn} kernel lines"), |s| {
                n(s, &["written", "kubelet"]) == nk && n(s, &["written", "kernel"]) == nn
            });
            assert_eq!(n(&s, &["dropped", "garbage"]), 0, "{s}");
            let out = nested()
                .arg("--log-file")
                .arg(dir.join("kubelet.log"))
                .run();
            assert_row(&row, &out, NESTED, code, phrase);
            let out = Cmd::check("check_storage_kernel_errors")
                .arg("--kmsg")
                .arg(dir.join("kernel.log"))
                .run();
            assert_row(&format!("{row} kernel"), &out, KERNEL, kcode, kphrase);
        }
    }
}

/// Path 3: `talosctl logs kubelet` and `talosctl dmesg` piped in, for one node and for two
/// (talosctl prefixes every line with its node; lines of the two nodes interleave).
#[test]
fn talosctl_output_on_stdin() {
    let now = now_secs();
    let one = |lines: &[(i64, String)], nodes: &[&str]| -> String {
        lines
            .iter()
            .enumerate()
            .map(|(i, (t, m))| format!("{}: {}\n", nodes[i % nodes.len()], json_line(*t, m)))
            .collect()
    };
    for (row, lines, code, phrase) in [
        ("worker-04 loop", worker04(now), 2, MOUNT_REFS),
        ("healthy", healthy(now), 0, "no failed volume operations"),
    ] {
        for nodes in [&["172.20.0.5"][..], &["172.20.0.5", "172.20.0.6"][..]] {
            let row = format!("talosctl -n {} logs kubelet: {row}", nodes.join(","));
            let out = nested()
                .args(["--log-file", "-"])
                .stdin(one(&lines, nodes))
                .run();
            assert_row(&row, &out, NESTED, code, phrase);
        }
    }
    for (row, recs, code, phrase) in [
        ("failing disk", kernel_fault(), 2, "sdc"),
        ("healthy", kernel_healthy(), 0, "OK"),
    ] {
        for nodes in [&["172.20.0.5"][..], &["172.20.0.5", "172.20.0.6"][..]] {
            let input: String = recs
                .iter()
                .enumerate()
                .map(|(i, (p, m))| {
                    talosctl_dmesg(nodes[i % nodes.len()], now - 60 + i as i64, p, m) + "\n"
                })
                .collect();
            let row = format!("talosctl -n {} dmesg: {row}", nodes.join(","));
            let out = Cmd::check("check_storage_kernel_errors")
                .args(["--kmsg", "-", "-v"])
                .stdin(input)
                .run();
            assert_row(&row, &out, KERNEL, code, phrase);
            if code != 0 {
                // The node is talosctl's, not this machine's.
                let json = Cmd::check("check_storage_kernel_errors")
                    .args(["--kmsg", "-", "--format", "json"])
                    .stdin(
                        recs.iter()
                            .map(|(p, m)| talosctl_dmesg(nodes[0], now - 30, p, m) + "\n")
                            .collect::<String>(),
                    )
                    .run();
                assert!(json.stdout.contains("172.20.0.5"), "{json:?}");
            }
        }
    }
    // Nothing of the kind on stdin: UNKNOWN naming what was expected.
    let out = Cmd::check("check_storage_kernel_errors")
        .args(["--kmsg", "-"])
        .stdin("hello\nworld\n")
        .run();
    assert_row("not a kernel log", &out, KERNEL, 3, "talosctl dmesg");
}

/// The receiver under hostile input: a line of 16 MiB, binary noise, 200 connections against a
/// cap of 16, an oversized datagram, hostile service names, more services than kept, a planted
/// symbolic link; it stays within 64 MiB and its threads stay bounded, writes nothing outside its
/// directory, keeps taking Talos's events, and counts what it dropped.
#[test]
fn receiver_hostile_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("logs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    // A link planted where containerd's file will be: never written through.
    let target = tmp.path().join("target");
    std::fs::write(&target, "").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("containerd.log")).unwrap();
    let r = Receiver::start(
        &dir,
        &[
            "--max-connections",
            "16",
            "--max-services",
            "3",
            "--max-line",
            "8192",
            "-v",
        ],
    );
    let now = now_secs();
    let good = talos_event(now, "fine");
    // 1. A 16 MiB line, then a good event on the same connection.
    {
        let mut s = TcpStream::connect(r.addr).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..16 {
            s.write_all(&chunk).unwrap();
        }
        s.write_all(format!("\n{good}\n").as_bytes()).unwrap();
    }
    r.wait("the overlong line dropped, the good one written", |s| {
        n(s, &["dropped", "overlong"]) == 1 && n(s, &["written", "kubelet"]) == 1
    });
    // 2. Binary noise (with newlines in it) and non-events.
    {
        let mut s = TcpStream::connect(r.addr).unwrap();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        s.write_all(&noise).unwrap();
        s.write_all(b"\n[1,2,3]\n{\"msg\":\"no service\"}\n")
            .unwrap();
        s.write_all(format!("{good}\n").as_bytes()).unwrap();
    }
    let st = r.wait("noise dropped, the good event written", |s| {
        n(s, &["written", "kubelet"]) == 2
    });
    assert!(n(&st, &["dropped", "garbage"]) >= 2, "{st}");
    assert_eq!(n(&st, &["dropped", "no_service"]), 1, "{st}");
    // 3. Hostile service names and more services than kept (kubelet is one of the 3).
    let ev = |svc: &str| go_json(&serde_json::json!({"msg": "x", "talos-service": svc}));
    send_tcp(
        r.addr,
        &[
            ev("../../etc/cron.d/x"),
            ev(".hidden"),
            ev("a/b"),
            ev("etcd"),
            ev("cri"),
            ev("apid"),
            ev("trustd"),
        ],
    );
    let st = r.wait("names refused, services capped", |s| {
        n(s, &["dropped", "bad_service_name"]) == 3 && n(s, &["dropped", "services_over_cap"]) == 2
    });
    assert_eq!(n(&st, &["written", "etcd"]), 1, "{st}");
    // 4. The planted link: refused, its target untouched (containerd would be a 4th service;
    //    the cap counts files kept, and a refused one is none).
    let r2dir = tmp.path().join("logs2");
    std::fs::create_dir(&r2dir).unwrap();
    std::fs::set_permissions(&r2dir, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink(&target, r2dir.join("kubelet.log")).unwrap();
    let r2 = Receiver::start(&r2dir, &[]);
    send_tcp(r2.addr, std::slice::from_ref(&good));
    let st = r2.wait("the link refused", |s| {
        n(s, &["dropped", "write_error"]) == 1
    });
    assert!(
        st["refused"]["kubelet"]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{st}"
    );
    assert_eq!(
        std::fs::read(&target).unwrap(),
        b"",
        "written through a link"
    );
    drop(r2);
    // 5. An oversized datagram.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.send_to(&vec![b'{'; 9000], r.addr).unwrap();
    u.send_to(good.as_bytes(), r.addr).unwrap();
    r.wait("the datagram dropped, the next written", |s| {
        n(s, &["dropped", "overlong"]) == 2 && n(s, &["written", "kubelet"]) == 3
    });
    // 6. 200 idle connections against a cap of 16: the idle longest are closed, Talos's sender
    //    still gets in, threads stay bounded.
    let conns: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(r.addr).unwrap())
        .collect();
    r.wait("200 connections accepted", |s| {
        n(s, &["connections", "accepted"]) >= 203
    });
    let st = r.wait("the cap held", |s| n(s, &["connections", "open"]) <= 16);
    assert!(n(&st, &["connections", "evicted"]) >= 184, "{st}");
    send_tcp(r.addr, std::slice::from_ref(&good));
    r.wait("the sender got through", |s| {
        n(s, &["written", "kubelet"]) == 4
    });
    let (hwm, _) = r.mem_threads();
    assert!(hwm < 64 << 20, "peak RSS {hwm} bytes");
    // The closed connections' threads end (main, UDP, counters, at most 16 connections).
    let end = Instant::now() + Duration::from_secs(20);
    while r.mem_threads().1 > 16 + 3 {
        assert!(Instant::now() < end, "{} threads", r.mem_threads().1);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(conns);
    // Nothing outside the directory, only service files and the counters inside.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "containerd.log",
            "cri.log",
            "etcd.log",
            "kubelet.log",
            "receive-logs.json"
        ],
    );
    let mut outside: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside.sort();
    assert_eq!(outside, ["logs", "logs2", "target"]);
    // Every kept line is one JSON event.
    for l in std::fs::read_to_string(dir.join("kubelet.log"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["msg"], "fine");
    }
}

/// Rotation: past --max-file-size the file becomes `<name>.1` and starts afresh; the check with
/// --state-dir follows it and still sees the loop; the kernel log keeps its numbering across a
/// restart of the receiver (its earlier records go to kernel.log.1).
#[test]
fn receiver_rotates_and_the_checks_follow() {
    let now = now_secs();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("logs");
    let state = tmp.path().join("state");
    let events: Vec<String> = worker04(now)
        .iter()
        .map(|(t, m)| talos_event(*t, m))
        .collect();
    // Room for the first half, not for all: one rotation on the way.
    let total: usize = events.iter().map(|e| e.len() + 1).sum();
    let max = (total * 2 / 3).max(4096);
    let max_s = max.to_string();
    let r = Receiver::start(&dir, &["--max-file-size", &max_s]);
    let (a, b) = events.split_at(events.len() / 2);
    send_tcp(r.addr, a);
    r.wait("the first half", |s| {
        n(s, &["written", "kubelet"]) == a.len() as u64
    });
    let out = nested()
        .arg("--log-file")
        .arg(dir.join("kubelet.log"))
        .arg("--state-dir")
        .arg(&state)
        .run();
    assert!(out.code == 1 || out.code == 2, "{out:?}");
    send_tcp(r.addr, b);
    r.wait("all", |s| {
        n(s, &["written", "kubelet"]) == events.len() as u64
    });
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    assert!(size(&dir.join("kubelet.log.1")) > 0, "never rotated");
    assert!(size(&dir.join("kubelet.log")) <= max as u64);
    assert!(size(&dir.join("kubelet.log.1")) <= max as u64);
    let out = nested()
        .arg("--log-file")
        .arg(dir.join("kubelet.log"))
        .arg("--state-dir")
        .arg(&state)
        .run();
    assert_row("rotated receiver file", &out, NESTED, 2, "at max backoff");
    // Kernel numbering across a restart.
    send_tcp(r.addr, &[talos_kernel_event(now - 5, 1, "info", "first")]);
    r.wait("a kernel record", |s| n(s, &["written", "kernel"]) == 1);
    drop(r);
    let r = Receiver::start(&dir, &["--max-file-size", &max_s]);
    send_tcp(r.addr, &[talos_kernel_event(now - 1, 2, "info", "second")]);
    r.wait("a kernel record", |s| n(s, &["written", "kernel"]) == 1);
    let old = std::fs::read_to_string(dir.join("kernel.log.1")).unwrap();
    let new = std::fs::read_to_string(dir.join("kernel.log")).unwrap();
    assert!(old.starts_with("6,1,") && old.contains(";first"), "{old}");
    assert!(new.starts_with("6,2,") && new.contains(";second"), "{new}");
}
