//! `/dev/kmsg` records lent from the read buffer (issue 34): the same records, order, errors and
//! statistics as [`super::kmsg::read`], without an owned copy per record. A kmsg text dump (a
//! regular file) is scanned in place in one large buffer (`memchr` for line ends, a record is
//! copied only when the buffer is refilled under it); the text is borrowed unless it holds the
//! kernel's `\xNN` escapes or invalid UTF-8; the continuation lines (` SUBSYSTEM=…`) are not
//! parsed at all; the deadline is read every 256 records. The checks that read millions of
//! records (check_storage_kernel_errors) use this; the owned [`super::kmsg::Record`] stays for
//! single records (`parse_record`: stdin, receive-logs), and the owned reader `kmsg::read` only
//! as the reference this one is tested against.

use super::kmsg::{unescape, KmsgError, ReadStats, EXPECTED, RECORD_MAX};
use std::borrow::Cow;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

/// One record, borrowed.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRef<'a> {
    pub facility: u32,
    pub level: u8,
    pub seq: u64,
    /// Monotonic microseconds since boot.
    pub usec: u64,
    /// The message, unescaped.
    pub text: Cow<'a, str>,
}

/// Parse one record as [`super::kmsg::parse_record`] does (same answer on every input, tested),
/// lending its text.
pub fn parse_ref(rec: &[u8]) -> Option<RecordRef<'_>> {
    let first = match memchr::memchr(b'\n', rec) {
        Some(i) => &rec[..i],
        None => rec,
    };
    let semi = memchr::memchr(b';', first)?;
    let prefix = std::str::from_utf8(&first[..semi]).ok()?;
    let mut f = prefix.split(',');
    let prio: u32 = f.next()?.trim().parse().ok()?;
    let seq: u64 = f.next()?.parse().ok()?;
    let usec: u64 = f.next()?.parse().ok()?;
    let msg = String::from_utf8_lossy(&first[semi + 1..]);
    let text = if memchr::memmem::find(msg.as_bytes(), b"\\x").is_some() {
        Cow::Owned(unescape(&msg))
    } else {
        msg
    };
    Some(RecordRef {
        facility: prio >> 3,
        level: (prio & 7) as u8,
        seq,
        usec,
        text,
    })
}

fn not_kmsg(path: &Path, why: &str) -> KmsgError {
    KmsgError::Other(format!(
        "{} is not a kernel log: {why} (expected {EXPECTED})",
        path.display()
    ))
}

/// [`super::kmsg::read`], each record lent to `on_record`.
pub fn read_ref(
    path: &Path,
    deadline: Instant,
    mut on_record: impl FnMut(&RecordRef<'_>),
) -> Result<ReadStats, KmsgError> {
    let perm = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => KmsgError::Permission(e),
        _ => KmsgError::Other(format!(
            "cannot read {}: {}",
            path.display(),
            plugin::errtext(&e)
        )),
    };
    // As in kmsg::read: privilege is the caller's business (`privilege::elevated_if`).
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
    let mut unparsed = 0u64;
    if md.is_file() {
        let mut sc = Scan::new(f);
        let mut n = 0u64;
        loop {
            if n.is_multiple_of(256) && Instant::now() >= deadline {
                st.complete = false;
                break;
            }
            n += 1;
            match sc.next_record() {
                Ok(Some(rec)) => match parse_ref(rec) {
                    Some(r) => {
                        st.records += 1;
                        on_record(&r);
                    }
                    None => unparsed += 1,
                },
                Ok(None) => break,
                Err(ScanError::TooLong) => {
                    return Err(not_kmsg(
                        path,
                        &format!(
                            "it holds a record longer than {} (the cap of one kernel log record)",
                            plugin::fmt_bytes(RECORD_MAX as u64)
                        ),
                    ))
                }
                Err(ScanError::Io(e)) => return Err(perm(e)),
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
            return Err(not_kmsg(
                path,
                &format!("not one of its first {unparsed} reads was a record"),
            ));
        }
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(r) = parse_ref(&buf[..n]) {
                    st.records += 1;
                    on_record(&r);
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

enum ScanError {
    TooLong,
    Io(std::io::Error),
}

/// The records of a kmsg text dump, found in place: a line not starting with a space starts a
/// record, continuation lines belong to the one before, empty lines between records are
/// skipped; a record (its lines joined, without the last newline) over [`RECORD_MAX`] is an
/// error. Memory: one buffer.
struct Scan<R: Read> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
}

impl<R: Read> Scan<R> {
    fn new(inner: R) -> Self {
        Scan {
            inner,
            // Larger than a record can be, so a record being read always fits after compaction.
            buf: vec![0u8; 256 * 1024],
            pos: 0,
            end: 0,
            eof: false,
        }
    }

    /// Move the unread part to the front and read more after it.
    fn fill(&mut self) -> Result<(), ScanError> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ScanError::Io(e)),
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<&[u8]>, ScanError> {
        // Skip empty lines between records.
        loop {
            while self.pos < self.end && self.buf[self.pos] == b'\n' {
                self.pos += 1;
            }
            if self.pos < self.end {
                break;
            }
            if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
        let mut scan = self.pos;
        loop {
            let start = self.pos;
            match memchr::memchr(b'\n', &self.buf[scan..self.end]) {
                Some(i) => {
                    let nl = scan + i;
                    if nl - start > RECORD_MAX {
                        return Err(ScanError::TooLong);
                    }
                    if nl + 1 < self.end {
                        if self.buf[nl + 1] == b' ' {
                            scan = nl + 1;
                            continue;
                        }
                        self.pos = nl + 1;
                        return Ok(Some(&self.buf[start..nl]));
                    }
                    if self.eof {
                        self.pos = nl + 1;
                        return Ok(Some(&self.buf[start..nl]));
                    }
                    // Whether the next line continues this record is in the next read.
                    scan = nl - start;
                    self.fill()?;
                }
                None => {
                    if self.end - start > RECORD_MAX {
                        return Err(ScanError::TooLong);
                    }
                    if self.eof {
                        self.pos = self.end;
                        return Ok(Some(&self.buf[start..self.end]));
                    }
                    scan = self.end - start;
                    self.fill()?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kmsg;
    use super::*;

    /// The owned reader's view of a file: every record and the outcome.
    fn both(p: &Path) -> (String, String) {
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let mut a = Vec::new();
        let ra = kmsg::read(p, far, |r| {
            a.push((r.facility, r.level, r.seq, r.usec, r.text))
        });
        let mut b = Vec::new();
        let rb = read_ref(p, far, |r| {
            b.push((r.facility, r.level, r.seq, r.usec, r.text.to_string()))
        });
        let show = |r: Result<ReadStats, KmsgError>| match r {
            Ok(s) => format!("{s:?}"),
            Err(KmsgError::Other(e)) => e,
            Err(KmsgError::Permission(e)) => format!("perm {e}"),
        };
        (format!("{a:?} {}", show(ra)), format!("{b:?} {}", show(rb)))
    }

    /// Same records, order and outcome as kmsg::read on every shape a file can have: dict
    /// lines, escapes, invalid UTF-8, empty lines, no final newline, records across the read
    /// buffer, garbage, records at and over the cap — and on generated files.
    #[test]
    fn lent_records_are_the_owned_reader_s() {
        let dir = std::env::temp_dir().join(format!("kmsg-ref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cases: Vec<Vec<u8>> = vec![
            b"3,348,580352748,-;Aborting journal on device loop0-8.\n SUBSYSTEM=block\n DEVICE=b7:0\n".to_vec(),
            b"14,5,6,-,caller=T1;user \\x09tab \\x5c\n6,7,8,-;two\n\n\n6,9,10,-;three".to_vec(),
            b"6,1,2,-;bad \xff utf8\n 6,2,3,-;lead space\n6,3,4,-;x\n".to_vec(),
            b"\n\n 6,1,1,-;starts with a continuation\n".to_vec(),
            b"Jul 13 20:27:25 k8s03 kernel: EXT4-fs error (device sdc): x\n".repeat(100),
            vec![0u8; 200_000],
            b"".to_vec(),
            b"\n\n".to_vec(),
        ];
        // At the cap and one over, with and without continuation lines.
        let at = |extra: usize, dict: bool| {
            let mut r = b"6,1,1,-;".to_vec();
            let body = if dict { RECORD_MAX - 20 } else { RECORD_MAX };
            r.resize(body + extra, b'a');
            if dict {
                r.extend_from_slice(b"\n SUBSYSTEM=bl");
                r.resize(RECORD_MAX + extra, b'k');
            }
            r.extend_from_slice(b"\n6,2,2,-;after\n");
            r
        };
        cases.extend([at(0, false), at(1, false), at(0, true), at(1, true)]);
        // Generated: many records across the 256 KiB buffer, dict lines at the boundaries.
        let mut seed = 7u64;
        for _ in 0..6 {
            let mut big = Vec::new();
            let mut i = 0u64;
            while big.len() < 700_000 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (seed >> 33) as usize % 300;
                big.extend_from_slice(
                    format!("{},{i},{},-;", (seed >> 7) % 30, i * 1000).as_bytes(),
                );
                big.extend(std::iter::repeat_n(b'x', len));
                if seed.is_multiple_of(3) {
                    big.extend_from_slice(b"\n SUBSYSTEM=block\n DEVICE=b8:32");
                }
                if seed.is_multiple_of(11) {
                    big.extend_from_slice(b"\\x0a\\x5c");
                }
                if seed.is_multiple_of(17) {
                    big.push(b'\n');
                }
                big.push(b'\n');
                i += 1;
            }
            if seed.is_multiple_of(2) {
                big.pop();
            }
            cases.push(big);
        }
        for (n, body) in cases.iter().enumerate() {
            let p = dir.join(format!("case{n}"));
            std::fs::write(&p, body).unwrap();
            let (a, b) = both(&p);
            assert!(
                a == b,
                "case {n}:\nowned {}\nlent  {}",
                &a[..a.len().min(400)],
                &b[..b.len().min(400)]
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // A character device that is not the kernel log.
        let far = Instant::now() + std::time::Duration::from_secs(30);
        assert!(
            matches!(read_ref(Path::new("/dev/zero"), far, |_| {}), Err(KmsgError::Other(e)) if e.contains("is not a kernel log"))
        );
        assert_eq!(parse_ref(b"garbage"), None);
    }
}
