//! The systemd journal, read through `journalctl -o json` (no libsystemd in a static binary).
//!
//! The child is time-bounded: its output is read with `poll` until the deadline, and the child is
//! killed when the deadline passes: it runs in its own process group and the whole group is
//! killed, so nothing it started (a pager, a helper) outlives it holding our pipes. Position: `--after-cursor` with the cursor
//! of the last entry read (kept by the caller's state file), else `--since @<epoch>` for the
//! window. Lines are pre-filtered with the scanner's needles before any JSON parsing, so entries
//! that cannot matter cost nothing but the memmem pass.

use super::scan::{scan, Scan, ScanStats};
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// One journal entry handed to the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub realtime_ms: i64,
    pub message: String,
    pub unit: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JournalRead {
    /// Cursor of the last entry read (where the next run continues).
    pub last_cursor: Option<String>,
    pub stats: ScanStats,
    /// Notes for -v (journalctl's warnings, a cursor that could not be used...).
    pub notes: Vec<String>,
}

pub struct Query<'a> {
    /// The journalctl binary (`journalctl`).
    pub journalctl: &'a Path,
    /// `--directory` (a host journal mounted into a container; tests).
    pub directory: Option<&'a Path>,
    pub units: &'a [String],
    pub after_cursor: Option<&'a str>,
    /// `--since @<secs>` when there is no cursor.
    pub since_ms: Option<i64>,
    pub needles: &'a [&'a [u8]],
    pub deadline: Instant,
}

/// A pipe read with `poll` until a deadline; a read past the deadline is a `TimedOut` error.
struct Bounded<R: Read + AsFd> {
    inner: R,
    deadline: Instant,
}

impl<R: Read + AsFd> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            let ms = u16::try_from(left.as_millis().clamp(1, 60_000)).unwrap_or(60_000);
            let mut fds = [PollFd::new(self.inner.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                // Timed out (the deadline is looked at again) or interrupted: wait again.
                Ok(0) | Err(nix::errno::Errno::EINTR) => {}
                Ok(_) => return self.inner.read(buf),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn spawn(journalctl: &Path, args: &[String]) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    Command::new(journalctl)
        .args(args)
        .process_group(0)
        .env("SYSTEMD_PAGER", "")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run {}: {}",
                journalctl.display(),
                plugin::errtext(&e)
            )
        })
}

/// Collect a child's stderr in a thread (bounded to 64 KiB) so it can never block the child.
fn stderr_reader(child: &mut Child) -> std::thread::JoinHandle<String> {
    let err = child.stderr.take();
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(e) = err {
            let _ = e.take(64 * 1024).read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).trim().to_string()
    })
}

/// Kill the child if it still runs, and reap it. Returns its exit code when it ended by itself.
fn finish(child: &mut Child, timed_out: bool) -> Option<i32> {
    if timed_out {
        // The child leads its own process group (spawn): kill the group, then reap the child.
        if let Ok(pgid) = i32::try_from(child.id()) {
            let pgid = nix::unistd::Pid::from_raw(pgid);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    child.wait().ok().and_then(|s| s.code())
}

fn permission_hint(stderr: &str) -> Option<String> {
    let l = stderr.to_ascii_lowercase();
    (l.contains("insufficient permission")
        || l.contains("not seeing messages from other users")
        || l.contains("permission denied"))
        .then(|| {
            "the journal is not readable by this user: run the check as a member of group systemd-journal (or adm), or as root".to_string()
        })
}

/// The journal directory to give journalctl: `explicit` (`--journal-dir`); under a host root
/// (container mode) the host's persistent journal `<root>/var/log/journal`, else its volatile one
/// `<root>/run/log/journal` (Storage=volatile, or auto without /var/log/journal); else none
/// (journalctl's own default).
pub fn host_directory(explicit: Option<&Path>, host_root: Option<&Path>) -> Option<PathBuf> {
    if let Some(d) = explicit {
        return Some(d.to_path_buf());
    }
    host_root.map(|r| {
        let persistent = r.join("var/log/journal");
        if persistent.is_dir() {
            persistent
        } else {
            r.join("run/log/journal")
        }
    })
}

/// Values of a journal field (`journalctl -F FIELD`), e.g. the units that logged.
pub fn field_values(
    journalctl: &Path,
    directory: Option<&Path>,
    field: &str,
    deadline: Instant,
) -> Result<Vec<String>, String> {
    let mut args = vec!["--no-pager".to_string()];
    if let Some(d) = directory {
        args.push(format!("--directory={}", d.display()));
    }
    args.push("-F".into());
    args.push(field.into());
    let mut child = spawn(journalctl, &args)?;
    let errh = stderr_reader(&mut child);
    let mut out = Vec::new();
    let mut timed_out = false;
    if let Some(so) = child.stdout.take() {
        let mut b = Bounded {
            inner: so,
            deadline,
        };
        let mut buf = [0u8; 8192];
        loop {
            match b.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    timed_out = true;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading journalctl: {}", plugin::errtext(&e))),
            }
            if out.len() > 1 << 20 {
                break;
            }
        }
    }
    let code = finish(&mut child, timed_out);
    let stderr = errh.join().unwrap_or_default();
    if timed_out {
        return Err("journalctl -F did not finish before the deadline".into());
    }
    if let Some(h) = permission_hint(&stderr) {
        return Err(h);
    }
    if code != Some(0) {
        return Err(format!(
            "journalctl -F {field} failed (exit {}): {}",
            code.map_or_else(|| "signal".into(), |c| c.to_string()),
            stderr
        ));
    }
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[derive(serde::Deserialize)]
struct RawEntry {
    #[serde(rename = "MESSAGE")]
    message: Option<serde_json::Value>,
    #[serde(rename = "__REALTIME_TIMESTAMP")]
    realtime: Option<String>,
    #[serde(rename = "_SYSTEMD_UNIT")]
    unit: Option<serde_json::Value>,
}

/// A journal field value as journalctl's JSON gives it: a string, an array of bytes (binary or
/// invalid UTF-8), or an array of values (the field repeated).
fn field_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(a) if a.iter().all(serde_json::Value::is_u64) => {
            let b: Vec<u8> = a
                .iter()
                .filter_map(serde_json::Value::as_u64)
                .map(|x| u8::try_from(x).unwrap_or(b'?'))
                .collect();
            Some(String::from_utf8_lossy(&b).into_owned())
        }
        serde_json::Value::Array(a) => a.first().and_then(field_text),
        _ => None,
    }
}

/// Parse one `journalctl -o json` line into an entry.
pub fn parse_entry(line: &[u8]) -> Option<Entry> {
    let raw: RawEntry = serde_json::from_slice(line).ok()?;
    let message = raw.message.as_ref().and_then(field_text)?;
    let realtime_ms = raw.realtime?.parse::<i64>().ok()? / 1000;
    Some(Entry {
        realtime_ms,
        message,
        unit: raw.unit.as_ref().and_then(field_text),
    })
}

/// The `__CURSOR` of a `journalctl -o json` line, without parsing the whole entry.
pub fn cursor_of(line: &[u8]) -> Option<String> {
    let key = b"\"__CURSOR\":\"";
    let i = memchr::memmem::find(line, key)? + key.len();
    let end = memchr::memchr(b'"', &line[i..])? + i;
    // Cursors hold no escapes (`s=…;i=…;b=…;m=…;t=…;x=…`).
    Some(String::from_utf8_lossy(&line[i..end]).into_owned())
}

/// Read the journal, handing every entry whose JSON line holds a needle to `on_entry`.
pub fn read(q: &Query, mut on_entry: impl FnMut(Entry)) -> Result<JournalRead, String> {
    let mut notes = Vec::new();
    let mut cursor = q.after_cursor;
    loop {
        let mut args = vec!["--no-pager".to_string(), "-o".into(), "json".into()];
        args.push("--output-fields=MESSAGE,_SYSTEMD_UNIT".into());
        if let Some(d) = q.directory {
            args.push(format!("--directory={}", d.display()));
        }
        for u in q.units {
            args.push(format!("--unit={u}"));
        }
        match (cursor, q.since_ms) {
            (Some(c), _) => args.push(format!("--after-cursor={c}")),
            (None, Some(ms)) => args.push(format!("--since=@{}", ms.div_euclid(1000))),
            (None, None) => {}
        }
        let mut child = spawn(q.journalctl, &args)?;
        let errh = stderr_reader(&mut child);
        let mut last_cursor: Option<String> = None;
        let stdout = child.stdout.take().ok_or("journalctl has no stdout")?;
        let mut b = Bounded {
            inner: stdout,
            deadline: q.deadline,
        };
        let opts = Scan {
            needles: q.needles,
            deadline: Some(q.deadline),
            consume_partial_tail: true,
            recognize: None,
        };
        let res = scan(
            &mut b,
            &opts,
            |line| {
                if let Some(e) = parse_entry(line) {
                    on_entry(e);
                }
            },
            |line| {
                if let Some(c) = cursor_of(line) {
                    last_cursor = Some(c);
                }
            },
        );
        drop(b);
        let stats = match res {
            Ok(s) => s,
            Err(e) => {
                finish(&mut child, true);
                return Err(format!("reading journalctl: {}", plugin::errtext(&e)));
            }
        };
        let code = finish(&mut child, !stats.complete);
        let stderr = errh.join().unwrap_or_default();
        if let Some(h) = permission_hint(&stderr) {
            return Err(h);
        }
        if stats.complete && code != Some(0) {
            if cursor.is_some() && stats.bytes_read == 0 {
                // A cursor from another journal (or a vacuumed one): fall back to the window.
                notes.push(format!(
                    "the saved journal cursor could not be used ({stderr}); read the window instead"
                ));
                cursor = None;
                continue;
            }
            return Err(format!(
                "journalctl failed (exit {}): {}",
                code.map_or_else(|| "signal".into(), |c| c.to_string()),
                if stderr.is_empty() {
                    "no message"
                } else {
                    &stderr
                }
            ));
        }
        if !stderr.is_empty() && !stderr.contains("No entries") {
            notes.push(format!("journalctl: {stderr}"));
        }
        return Ok(JournalRead {
            last_cursor: last_cursor.or_else(|| cursor.map(str::to_string)),
            stats,
            notes,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_and_cursor() {
        let l = br#"{"__CURSOR":"s=ab;i=1f;b=cd;m=1;t=2;x=3","__REALTIME_TIMESTAMP":"1752402445123456","MESSAGE":"E0713 x \"q\"","_SYSTEMD_UNIT":"kubelet.service"}"#;
        let e = parse_entry(l).unwrap();
        assert_eq!(e.realtime_ms, 1752402445123);
        assert_eq!(e.message, "E0713 x \"q\"");
        assert_eq!(e.unit.as_deref(), Some("kubelet.service"));
        assert_eq!(cursor_of(l).unwrap(), "s=ab;i=1f;b=cd;m=1;t=2;x=3");
        let bin = br#"{"__REALTIME_TIMESTAMP":"1000000","MESSAGE":[104,105,255]}"#;
        assert_eq!(parse_entry(bin).unwrap().message, "hi\u{fffd}");
        assert!(parse_entry(b"{garbled").is_none());
    }

    /// A journalctl that hangs after starting a helper: at the deadline the whole process group
    /// goes, the helper included (killed by PID alone, it would live on holding the pipes).
    #[test]
    fn a_stuck_journalctl_is_killed_with_its_group() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("journal-pg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("journalctl");
        let pidfile = dir.join("helper.pid");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nsleep 300 </dev/null >/dev/null 2>&1 &\necho $! > {}\nexec sleep 300\n",
                pidfile.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let q = Query {
            journalctl: &script,
            directory: None,
            units: &["kubelet.service".to_string()],
            after_cursor: None,
            since_ms: None,
            needles: &[b"x"],
            deadline: Instant::now() + std::time::Duration::from_millis(1500),
        };
        let r = read(&q, |_| {}).unwrap();
        assert!(!r.stats.complete);
        let helper: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        let until = Instant::now() + std::time::Duration::from_secs(10);
        while !gone(helper) {
            assert!(
                Instant::now() < until,
                "helper {helper} outlived journalctl"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
