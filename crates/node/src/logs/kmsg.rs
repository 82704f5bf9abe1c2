//! `/dev/kmsg` (Documentation/ABI/testing/dev-kmsg): `prio,seq,usec,flags[,…];text\n` and
//! continuation lines ` KEY=value\n`. `prio` carries the facility too (`facility << 3 | level`;
//! the kernel's own records have facility 0, userspace writes to /dev/kmsg get LOG_USER).
//! `usec` is the kernel's `local_clock()`, which does not count suspend: CLOCK_MONOTONIC (not
//! BOOTTIME), the clock journald maps kmsg timestamps with. Non-printable bytes and `\` in the
//! text arrive escaped as `\xNN`.
//!
//! Reading: opened `O_RDONLY|O_NONBLOCK`, positioned at the first record; every `read()` returns
//! exactly one record (16 KiB buffer, more than a record can hold); `EAGAIN` = no more records,
//! `EPIPE` = records were overwritten while reading (the position moves on: keep reading).
//! A regular file with the same text (`dmesg -r`-like dumps, tests) is read record by record too.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub facility: u32,
    pub level: u8,
    pub seq: u64,
    /// Monotonic microseconds since boot.
    pub usec: u64,
    pub text: String,
    /// Continuation `KEY=value` lines (`SUBSYSTEM`, `DEVICE`).
    pub dict: Vec<(String, String)>,
}

/// Undo the kernel's `\xNN` escaping.
pub fn unescape(s: &str) -> String {
    if !s.contains("\\x") {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            if let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("zz"), 16)
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse one record (the bytes one `read()` returned, or one record of a file).
pub fn parse_record(rec: &[u8]) -> Option<Record> {
    let text = String::from_utf8_lossy(rec);
    let mut lines = text.split('\n');
    let first = lines.next()?;
    let (prefix, msg) = first.split_once(';')?;
    let mut f = prefix.split(',');
    let prio: u32 = f.next()?.trim().parse().ok()?;
    let seq: u64 = f.next()?.parse().ok()?;
    let usec: u64 = f.next()?.parse().ok()?;
    let dict = lines
        .filter_map(|l| l.strip_prefix(' '))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), unescape(v)))
        .collect();
    Some(Record {
        facility: prio >> 3,
        level: (prio & 7) as u8,
        seq,
        usec,
        text: unescape(msg),
        dict,
    })
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadStats {
    pub records: u64,
    /// EPIPE seen: records overwritten while reading.
    pub overwritten: u64,
    pub complete: bool,
}

/// Why the kernel log could not be read.
#[derive(Debug)]
pub enum KmsgError {
    /// EACCES/EPERM: dmesg_restrict without CAP_SYSLOG.
    Permission(std::io::Error),
    Other(String),
}

/// Read every record of `path` (the kmsg device or a regular file) in order.
pub fn read(
    path: &Path,
    deadline: Instant,
    mut on_record: impl FnMut(Record),
) -> Result<ReadStats, KmsgError> {
    let perm = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => KmsgError::Permission(e),
        _ => KmsgError::Other(format!(
            "cannot read {}: {}",
            path.display(),
            crate::errtext(&e)
        )),
    };
    // `--kmsg` may name any file: a privileged process runs at its caller's level, and the check
    // raises privilege around this call only for the node's own /dev/kmsg
    // (`privilege::elevated_if`), so this open must not lower it again.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(perm)?;
    let md = f.metadata().map_err(perm)?;
    let mut st = ReadStats {
        complete: true,
        ..Default::default()
    };
    if md.is_file() {
        let mut all = Vec::new();
        f.read_to_end(&mut all).map_err(perm)?;
        for rec in split_records(&all) {
            if let Some(r) = parse_record(rec) {
                st.records += 1;
                on_record(r);
            }
        }
        return Ok(st);
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if Instant::now() >= deadline {
            st.complete = false;
            return Ok(st);
        }
        match f.read(&mut buf) {
            Ok(0) => return Ok(st),
            Ok(n) => {
                if let Some(r) = parse_record(&buf[..n]) {
                    st.records += 1;
                    on_record(r);
                }
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(st),
                Some(libc::EPIPE) => st.overwritten += 1,
                Some(libc::EINTR) => {}
                _ => return Err(perm(e)),
            },
        }
    }
}

/// Records of a kmsg text dump: a line not starting with a space starts a record.
pub fn split_records(all: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < all.len() {
        let le = memchr::memchr(b'\n', &all[i..])
            .map(|j| i + j)
            .unwrap_or(all.len());
        if i > start && all[i] != b' ' {
            out.push(&all[start..i - 1]);
            start = i;
        }
        i = le + 1;
    }
    if start < all.len() {
        let end = if all.ends_with(b"\n") {
            all.len() - 1
        } else {
            all.len()
        };
        if end > start {
            out.push(&all[start..end]);
        }
    }
    out
}

fn clock_us(id: libc::clockid_t) -> i64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as i64 * 1_000_000 + ts.tv_nsec as i64 / 1000
}

/// (CLOCK_MONOTONIC now in µs, CLOCK_REALTIME now in ms): maps record timestamps to wall time.
pub fn clocks() -> (u64, i64) {
    let mono = clock_us(libc::CLOCK_MONOTONIC);
    let real = clock_us(libc::CLOCK_REALTIME) / 1000;
    (mono.max(0) as u64, real)
}

/// Wall time (epoch ms) of a record's monotonic timestamp.
pub fn wall_ms(usec: u64, mono_now_us: u64, real_now_ms: i64) -> i64 {
    real_now_ms - (mono_now_us as i64 - usec as i64) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_with_dict_and_escapes() {
        let r = parse_record(b"3,348,580352748,-;Aborting journal on device loop0-8.\n SUBSYSTEM=block\n DEVICE=b7:0").unwrap();
        assert_eq!((r.facility, r.level, r.seq, r.usec), (0, 3, 348, 580352748));
        assert_eq!(r.text, "Aborting journal on device loop0-8.");
        assert_eq!(r.dict[1], ("DEVICE".into(), "b7:0".into()));
        let r = parse_record(b"14,5,6,-,caller=T1;user \\x09tab \\x5c").unwrap();
        assert_eq!((r.facility, r.level), (1, 6));
        assert_eq!(r.text, "user \ttab \\");
        assert!(parse_record(b"garbage").is_none());
    }

    #[test]
    fn split_dump() {
        let d = b"6,1,2,-;one\n SUBSYSTEM=x\n6,2,3,-;two\n6,3,4,-;three";
        let v = split_records(d);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], b"6,1,2,-;one\n SUBSYSTEM=x");
        assert_eq!(v[2], b"6,3,4,-;three");
    }

    #[test]
    fn wall_mapping() {
        assert_eq!(
            wall_ms(1_000_000, 61_000_000, 100_000_000),
            100_000_000 - 60_000
        );
    }
}
