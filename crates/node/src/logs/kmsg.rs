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

/// The cap of one record: the kernel's `/dev/kmsg` records fit in 8 KiB (`CONSOLE_EXT_LOG_MAX`),
/// and one `read()` gets this much. A longer "record" in a file is not the kernel's.
pub const RECORD_MAX: usize = 16 * 1024;

/// What a kernel log source is expected to hold, for the "not a kernel log" answer.
pub const EXPECTED: &str = "/dev/kmsg records `prio,seq,usec,flags;text` (as `cat /dev/kmsg` prints them), not syslog or dmesg text";

fn not_kmsg(path: &Path, why: &str) -> KmsgError {
    KmsgError::Other(format!(
        "{} is not a kernel log: {why} (expected {EXPECTED})",
        path.display()
    ))
}

/// Why the next record of a file could not be had.
pub(super) enum RecordError {
    /// Longer than [`RECORD_MAX`].
    TooLong,
    Io(std::io::Error),
}

/// The records of a kmsg text dump (a regular file), one at a time: the in-place scanner of
/// [`super::kmsg_ref`], and in tests the plain stream it is tested against.
pub(super) trait RecordSource {
    /// The next record (its lines joined by `\n`, without the last one), `None` at the end.
    fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError>;
}

/// Read every record of `path` (the kmsg device or a regular file) in order: a file's records
/// come from the `source` made of it, each `read()` of the device is one record. `record` parses
/// one and hands it on, false when it is not a record. A source that yields data but not one
/// parsable record is an error naming the format, as is a record over [`RECORD_MAX`]; memory
/// stays within one record (one buffer of the source) whatever the input. The deadline is read
/// every 256 records of a file, before every read of the device.
pub(super) fn read_records<S: RecordSource>(
    path: &Path,
    deadline: Instant,
    source: impl FnOnce(std::fs::File) -> S,
    mut record: impl FnMut(&[u8]) -> bool,
) -> Result<ReadStats, KmsgError> {
    let perm = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => KmsgError::Permission(e),
        _ => KmsgError::Other(format!(
            "cannot read {}: {}",
            path.display(),
            plugin::errtext(&e)
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
    // Pieces that were not records (a read, a record of a file).
    let mut unparsed = 0u64;
    if md.is_file() {
        let mut src = source(f);
        let mut n = 0u64;
        loop {
            if n.is_multiple_of(256) && Instant::now() >= deadline {
                st.complete = false;
                break;
            }
            n += 1;
            match src.next_record() {
                Ok(Some(rec)) => {
                    if record(rec) {
                        st.records += 1;
                    } else {
                        unparsed += 1;
                    }
                }
                Ok(None) => break,
                Err(RecordError::TooLong) => {
                    return Err(not_kmsg(
                        path,
                        &format!(
                            "it holds a record longer than {} (the cap of one kernel log record)",
                            plugin::fmt_bytes(RECORD_MAX as u64)
                        ),
                    ))
                }
                Err(RecordError::Io(e)) => return Err(perm(e)),
            }
            if st.records == 0 && unparsed >= 64 {
                break;
            }
        }
        if st.records == 0 && unparsed > 0 {
            return Err(not_kmsg(
                path,
                &format!("not one of its first {unparsed} records could be parsed"),
            ));
        }
        return Ok(st);
    }
    let mut buf = vec![0u8; RECORD_MAX];
    loop {
        if Instant::now() >= deadline {
            st.complete = false;
            return Ok(st);
        }
        if st.records == 0 && unparsed >= 4 {
            // A character device that is not the kernel log (/dev/zero, /dev/urandom).
            return Err(not_kmsg(
                path,
                &format!("not one of its first {unparsed} reads was a record"),
            ));
        }
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if record(&buf[..n]) {
                    st.records += 1;
                } else {
                    unparsed += 1;
                }
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) => break,
                Some(libc::EPIPE) => st.overwritten += 1,
                Some(libc::EINTR) => {}
                _ => return Err(perm(e)),
            },
        }
    }
    if st.records == 0 && unparsed > 0 {
        return Err(not_kmsg(
            path,
            &format!("not one of its {unparsed} reads was a record"),
        ));
    }
    Ok(st)
}

/// [`read_records`] with the plain reference parts, one owned record at a time: the checks read
/// with [`super::kmsg_ref::read_ref`], whose in-place scanner and borrowing parser are tested to
/// give the same records, order, errors and statistics as [`RecordStream`] and [`parse_record`]
/// on every shape a file can have. Test code only.
#[cfg(test)]
pub fn read(
    path: &Path,
    deadline: Instant,
    mut on_record: impl FnMut(Record),
) -> Result<ReadStats, KmsgError> {
    read_records(path, deadline, RecordStream::new, |rec| {
        parse_record(rec).map(&mut on_record).is_some()
    })
}

/// The records of a kmsg text dump read as a stream: a line not starting with a space starts a
/// record, continuation lines (` KEY=value`) belong to the one before. Holds at most one record
/// plus one read buffer.
#[cfg(test)]
struct RecordStream<R: Read> {
    inner: R,
    buf: Vec<u8>,
    /// Bytes of `buf` filled.
    end: usize,
    /// Start of the unconsumed part of `buf`.
    pos: usize,
    eof: bool,
    /// The record being returned (valid until the next call).
    rec: Vec<u8>,
}

#[cfg(test)]
impl<R: Read> RecordStream<R> {
    fn new(inner: R) -> Self {
        RecordStream {
            inner,
            buf: vec![0u8; 64 * 1024],
            end: 0,
            pos: 0,
            eof: false,
            rec: Vec::new(),
        }
    }

    /// Replace the (consumed) buffer by the next read.
    fn refill(&mut self) -> Result<(), RecordError> {
        let n = loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RecordError::Io(e)),
            }
        };
        self.pos = 0;
        self.end = n;
        self.eof = n == 0;
        Ok(())
    }

    /// The next line (without its newline) appended to `out`, false at end of input. A line
    /// longer than [`RECORD_MAX`] is an error.
    fn line(&mut self, out: &mut Vec<u8>) -> Result<bool, RecordError> {
        let start_len = out.len();
        loop {
            if self.pos < self.end {
                let avail = &self.buf[self.pos..self.end];
                if let Some(i) = memchr::memchr(b'\n', avail) {
                    out.extend_from_slice(&avail[..i]);
                    self.pos += i + 1;
                    return if out.len() - start_len > RECORD_MAX {
                        Err(RecordError::TooLong)
                    } else {
                        Ok(true)
                    };
                }
                out.extend_from_slice(avail);
                self.pos = self.end;
                if out.len() - start_len > RECORD_MAX {
                    return Err(RecordError::TooLong);
                }
            }
            if self.eof {
                return Ok(out.len() > start_len);
            }
            self.refill()?;
        }
    }

    /// Peek: does the unread input go on with a continuation line (starting with a space)?
    fn continues(&mut self) -> Result<bool, RecordError> {
        if self.pos >= self.end && !self.eof {
            self.refill()?;
        }
        Ok(self.pos < self.end && self.buf[self.pos] == b' ')
    }
}

#[cfg(test)]
impl<R: Read> RecordSource for RecordStream<R> {
    fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
        let mut rec = std::mem::take(&mut self.rec);
        rec.clear();
        // Skip empty lines between records.
        loop {
            if !self.line(&mut rec)? {
                self.rec = rec;
                return Ok(None);
            }
            if !rec.is_empty() {
                break;
            }
        }
        while self.continues()? {
            rec.push(b'\n');
            self.line(&mut rec)?;
            if rec.len() > RECORD_MAX {
                return Err(RecordError::TooLong);
            }
        }
        self.rec = rec;
        Ok(Some(&self.rec))
    }
}

/// Records of a kmsg text dump: a line not starting with a space starts a record.
pub fn split_records(all: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < all.len() {
        let le = memchr::memchr(b'\n', &all[i..]).map_or(all.len(), |j| i + j);
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

fn clock_us(id: nix::time::ClockId) -> i64 {
    // Both clocks exist on every Linux; an error (none is documented for them) reads as 0.
    nix::time::clock_gettime(id).map_or(0, |ts| ts.tv_sec() * 1_000_000 + ts.tv_nsec() / 1000)
}

/// (CLOCK_MONOTONIC now in µs, CLOCK_REALTIME now in ms): maps record timestamps to wall time.
pub fn clocks() -> (u64, i64) {
    let mono = clock_us(nix::time::ClockId::CLOCK_MONOTONIC);
    let real = clock_us(nix::time::ClockId::CLOCK_REALTIME) / 1000;
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

    fn stream(all: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
        let mut rs = RecordStream::new(all);
        let mut v = Vec::new();
        loop {
            match rs.next_record() {
                Ok(Some(r)) => v.push(r.to_vec()),
                Ok(None) => return Ok(v),
                Err(RecordError::TooLong) => return Err("too long"),
                Err(RecordError::Io(_)) => return Err("io"),
            }
        }
    }

    #[test]
    fn streamed_records_match_the_split_dump() {
        let d = b"6,1,2,-;one\n SUBSYSTEM=x\n6,2,3,-;two\n\n6,3,4,-;three";
        // The same records (the stream skips the empty line between them).
        let want: Vec<Vec<u8>> = split_records(d)
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.to_vec())
            .collect();
        assert_eq!(stream(d).unwrap(), want);
        // Across the 64 KiB read buffer.
        let mut big = Vec::new();
        for i in 0..20_000 {
            big.extend_from_slice(format!("6,{i},{i},-;record {i}\n SUBSYSTEM=x\n").as_bytes());
        }
        let got = stream(&big).unwrap();
        assert_eq!(got.len(), 20_000);
        assert_eq!(got[19_999], b"6,19999,19999,-;record 19999\n SUBSYSTEM=x");
        // Over the record cap: an error, whatever the length.
        assert_eq!(stream(&vec![0u8; RECORD_MAX + 1]).unwrap_err(), "too long");
        assert_eq!(stream(&vec![b'x'; 3 << 20]).unwrap_err(), "too long");
    }

    #[test]
    fn a_source_without_records_is_not_a_kernel_log() {
        let dir = std::env::temp_dir().join(format!("kmsg-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let far = Instant::now() + std::time::Duration::from_secs(30);
        let cases: [(&str, Vec<u8>, &str); 4] = [
            (
                "random",
                (0..40_000u32)
                    .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                    .collect(),
                "could be parsed",
            ),
            (
                "syslog",
                b"Jul 13 20:27:25 k8s03 kernel: EXT4-fs error (device sdc): x\n".repeat(100),
                "could be parsed",
            ),
            ("zeros", vec![0u8; 200_000], "longer than 16 KiB"),
            (
                "good",
                b"3,1,1000,-;EXT4-fs error (device sdc): x\n".to_vec(),
                "",
            ),
        ];
        for (name, body, want) in cases {
            let p = dir.join(name);
            std::fs::write(&p, &body).unwrap();
            let r = read(&p, far, |_| {});
            if want.is_empty() {
                assert_eq!(r.unwrap().records, 1);
            } else {
                match r {
                    Err(KmsgError::Other(e)) => {
                        assert!(
                            e.contains("is not a kernel log") && e.contains(want),
                            "{name}: {e}"
                        );
                    }
                    other => panic!("{name}: {other:?}"),
                }
            }
        }
        // A character device that is not the kernel log answers at once, not at the deadline.
        let t = Instant::now();
        match read(Path::new("/dev/zero"), far, |_| {}) {
            Err(KmsgError::Other(e)) => assert!(e.contains("is not a kernel log"), "{e}"),
            other => panic!("/dev/zero: {other:?}"),
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        // Empty stays empty: no records, no error.
        let p = dir.join("empty");
        std::fs::write(&p, b"").unwrap();
        assert_eq!(read(&p, far, |_| {}).unwrap().records, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
