//! `/dev/kmsg` records lent from the read buffer (issue 34): the same records, order, errors and
//! statistics as [`super::kmsg::read`], without an owned copy per record. A kmsg text dump (a
//! regular file) is scanned in place in one large buffer (`memchr` for line ends, a record is
//! copied only when the buffer is refilled under it); the text is borrowed unless it holds the
//! kernel's `\xNN` escapes or invalid UTF-8; the continuation lines (` SUBSYSTEM=…`) are not
//! parsed at all; the deadline is read every 256 records. The checks that read millions of
//! records (check_storage_kernel_errors) use this; the owned [`super::kmsg::Record`] stays for
//! single records (`parse_record`: stdin, receive-logs), and the owned reader `kmsg::read` only
//! as the reference this one is tested against. Both share the loop around the records
//! (`kmsg::read_records`: opening, the device's reads, the deadline, the "not a kernel log"
//! answers); what differs, and is compared, is how a file is cut into records and parsed.

use super::kmsg::{
    read_records, unescape, KmsgError, ReadStats, RecordError, RecordSource, RECORD_MAX,
};
use std::borrow::Cow;
use std::io::Read;
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

/// [`super::kmsg::read`], each record lent to `on_record`: [`read_records`] with the in-place
/// [`Scan`] and [`parse_ref`].
pub fn read_ref(
    path: &Path,
    deadline: Instant,
    mut on_record: impl FnMut(&RecordRef<'_>),
) -> Result<ReadStats, KmsgError> {
    read_records(path, deadline, Scan::new, |rec| {
        parse_ref(rec).map(|r| on_record(&r)).is_some()
    })
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
    fn fill(&mut self) -> Result<(), RecordError> {
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
                Err(e) => return Err(RecordError::Io(e)),
            }
        }
    }
}

impl<R: Read> RecordSource for Scan<R> {
    fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
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
                        return Err(RecordError::TooLong);
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
                        return Err(RecordError::TooLong);
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
        let far = Instant::now() + std::time::Duration::from_mins(1);
        let mut a = Vec::new();
        let ra = kmsg::read(p, far, |r| {
            a.push((r.facility, r.level, r.seq, r.usec, r.text));
        });
        let mut b = Vec::new();
        let rb = read_ref(p, far, |r| {
            b.push((r.facility, r.level, r.seq, r.usec, r.text.to_string()));
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
