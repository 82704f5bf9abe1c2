//! Grep-speed line scanning.
//!
//! The reader fills one 1 MiB buffer; each chunk up to its last newline is searched with a
//! `memmem` finder for the needle, and only the lines around a hit are handed to the caller.
//! Nothing is allocated per line; memory stays constant whatever the input size. Lines longer
//! than the buffer ([`LINE_MAX`], the cap of one log line) are cut (the part in the buffer is
//! still searched), the rest is skipped, and they are counted (`overlong`).
//!
//! So that a source of the wrong format is not read as "nothing found", the first
//! [`SAMPLE_LINES`] complete lines are shown to the caller's format test (`recognize`): a caller
//! can tell "no line of this input is a log line of the kind I read" from "no hit".

use memchr::memmem::Finder;
use std::io::{self, Read};
use std::time::Instant;

pub const BUF_SIZE: usize = 1 << 20;

/// The cap of one line: longer lines are cut to this and counted as overlong.
pub const LINE_MAX: usize = BUF_SIZE;

/// How many leading complete lines are shown to [`Scan::recognize`].
pub const SAMPLE_LINES: u64 = 16;

/// Bytes of a sampled line shown to [`Scan::recognize`] (formats are told by their start).
const SAMPLE_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScanStats {
    /// Bytes read from the reader.
    pub bytes_read: u64,
    /// Bytes consumed: up to and including the last complete line handed over (what a saved
    /// offset may advance by). Equals `bytes_read` when the tail was consumed too.
    pub bytes_consumed: u64,
    /// Lines that held the needle.
    pub hits: u64,
    /// False when the deadline stopped the scan before the end of the input.
    pub complete: bool,
    /// Lines longer than [`LINE_MAX`] (cut and skipped).
    pub overlong: u64,
    /// Leading complete lines shown to [`Scan::recognize`], and how many it recognized.
    pub sampled: u64,
    pub recognized: u64,
}

/// Options of one scan.
pub struct Scan<'a> {
    pub needles: &'a [&'a [u8]],
    pub deadline: Option<Instant>,
    /// Hand over a last line without its newline at end of input (stdin, a finished child);
    /// not for files still being written, whose partial last line is read next time.
    pub consume_partial_tail: bool,
    /// The input's format test: is this line (its first 4 KiB) one of the kind the caller
    /// reads? Applied to the first [`SAMPLE_LINES`] complete lines.
    pub recognize: Option<fn(&[u8]) -> bool>,
}

/// Show the leading lines of `region` (complete lines, each with its newline) to the format test.
fn sample(region: &[u8], opts: &Scan, stats: &mut ScanStats) {
    let Some(test) = opts.recognize else { return };
    let mut rest = region;
    while stats.sampled < SAMPLE_LINES && !rest.is_empty() {
        let le = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..le];
        stats.sampled += 1;
        if test(&line[..line.len().min(SAMPLE_BYTES)]) {
            stats.recognized += 1;
        }
        rest = &rest[(le + 1).min(rest.len())..];
    }
}

/// Scan `r`, calling `on_hit(line)` for every line (without its newline) that contains one of the
/// needles, in input order, and `on_last(line)` with the last complete line of every chunk (the
/// journal reader takes the cursor from it). Returns the counters; I/O errors are returned as is.
pub fn scan<R: Read>(
    r: &mut R,
    opts: &Scan,
    mut on_hit: impl FnMut(&[u8]),
    on_last: impl FnMut(&[u8]),
) -> io::Result<ScanStats> {
    scan_follow(
        r,
        opts,
        |l| {
            on_hit(l);
            false
        },
        on_last,
    )
}

/// [`scan`] where `on_hit` answers whether it wants the line after this one too (a container
/// runtime's partial line continues on the next, which need not hold the needle): while it
/// answers true, the following lines are handed over whatever they hold, across chunk boundaries.
/// Lines handed over that way are not counted as hits unless they hold a needle themselves.
pub fn scan_follow<R: Read>(
    r: &mut R,
    opts: &Scan,
    mut on_hit: impl FnMut(&[u8]) -> bool,
    mut on_last: impl FnMut(&[u8]),
) -> io::Result<ScanStats> {
    let mut want_next = false;
    let finders: Vec<Finder> = opts.needles.iter().map(Finder::new).collect();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut filled = 0usize;
    let mut stats = ScanStats {
        complete: true,
        ..Default::default()
    };
    // Bytes of a too-long line still to skip up to its newline.
    let mut skipping = false;
    loop {
        if opts.deadline.is_some_and(|d| Instant::now() >= d) {
            stats.complete = false;
            return Ok(stats);
        }
        let n = match r.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                stats.complete = false;
                return Ok(stats);
            }
            Err(e) => return Err(e),
        };
        stats.bytes_read += n as u64;
        let eof = n == 0;
        let end = filled + n;
        let mut start = 0usize;
        if skipping {
            match memchr::memchr(b'\n', &buf[..end]) {
                Some(i) => {
                    start = i + 1;
                    skipping = false;
                    stats.bytes_consumed += start as u64;
                }
                None => {
                    stats.bytes_consumed += end as u64;
                    filled = 0;
                    if eof {
                        return Ok(stats);
                    }
                    continue;
                }
            }
        }
        let region_end = match memchr::memrchr(b'\n', &buf[start..end]) {
            Some(i) => start + i + 1,
            None => start,
        };
        // The continuation of a partial line handed over before this chunk.
        while want_next && start < region_end {
            let le = start
                + memchr::memchr(b'\n', &buf[start..region_end]).expect("region ends in newline");
            let line = &buf[start..le];
            if finders.iter().any(|f| f.find(line).is_some()) {
                stats.hits += 1;
            }
            want_next = on_hit(line);
            stats.bytes_consumed += (le + 1 - start) as u64;
            start = le + 1;
        }
        if region_end > start {
            let region = &buf[start..region_end];
            if stats.sampled < SAMPLE_LINES {
                sample(region, opts, &mut stats);
            }
            want_next = scan_region(region, &finders, &mut stats, &mut on_hit);
            // The last complete line of the region.
            let body = &region[..region.len() - 1];
            let ls = memchr::memrchr(b'\n', body).map_or(0, |i| i + 1);
            on_last(&body[ls..]);
            stats.bytes_consumed += (region_end - start) as u64;
        }
        let rest = end - region_end;
        if eof {
            if rest > 0 && opts.consume_partial_tail {
                let tail = &buf[region_end..end];
                let hit = finders.iter().any(|f| f.find(tail).is_some());
                if hit {
                    stats.hits += 1;
                }
                if hit || want_next {
                    on_hit(tail);
                }
                on_last(tail);
                stats.bytes_consumed += rest as u64;
            }
            return Ok(stats);
        }
        if rest == buf.len() {
            // One line fills the whole buffer: search what we have, skip the rest of the line.
            let part = &buf[..];
            let hit = finders.iter().any(|f| f.find(part).is_some());
            if hit {
                stats.hits += 1;
            }
            if hit || want_next {
                // The rest of the line is skipped: no continuation is asked for.
                on_hit(part);
                want_next = false;
            }
            stats.bytes_consumed += rest as u64;
            stats.overlong += 1;
            skipping = true;
            filled = 0;
            continue;
        }
        buf.copy_within(region_end..end, 0);
        filled = rest;
    }
}

/// Hand over the lines of `region` (whole lines, ending in a newline) holding a needle, and the
/// lines after one whose `on_hit` asked for them. Returns whether the last line handed over asked
/// for the next one (which is in the next chunk).
fn scan_region(
    region: &[u8],
    finders: &[Finder],
    stats: &mut ScanStats,
    on_hit: &mut impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut from = 0usize;
    loop {
        // The earliest hit of any needle (one finder: its first hit).
        let pos = if finders.len() == 1 {
            finders[0].find(&region[from..])
        } else {
            finders.iter().filter_map(|f| f.find(&region[from..])).min()
        }
        .map(|i| from + i);
        let Some(pos) = pos else { return false };
        let ls = memchr::memrchr(b'\n', &region[..pos]).map_or(0, |j| j + 1);
        let mut le = memchr::memchr(b'\n', &region[pos..]).map_or(region.len(), |j| pos + j);
        stats.hits += 1;
        let mut want_next = on_hit(&region[ls..le]);
        from = le + 1;
        while want_next && from < region.len() {
            le = memchr::memchr(b'\n', &region[from..]).map_or(region.len(), |j| from + j);
            let line = &region[from..le];
            if finders.iter().any(|f| f.find(line).is_some()) {
                stats.hits += 1;
            }
            want_next = on_hit(line);
            from = le + 1;
        }
        if from >= region.len() {
            return want_next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8], needles: &[&[u8]], tail: bool) -> (Vec<String>, ScanStats) {
        let mut hits = Vec::new();
        let opts = Scan {
            needles,
            deadline: None,
            consume_partial_tail: tail,
            recognize: Some(|l| l.starts_with(b"line ")),
        };
        let st = scan(
            &mut &input[..],
            &opts,
            |l| hits.push(String::from_utf8_lossy(l).into_owned()),
            |_| {},
        )
        .unwrap();
        (hits, st)
    }

    #[test]
    fn finds_lines_with_needle_only() {
        let input = b"a x\nb needle 1\nc\nneedle 2 needle again\nz";
        let (hits, st) = run(input, &[b"needle"], false);
        assert_eq!(hits, ["b needle 1", "needle 2 needle again"]);
        assert_eq!(st.hits, 2);
        // The partial last line is not consumed.
        assert_eq!(st.bytes_consumed as usize, input.len() - 1);
        let (hits, st) = run(b"x\nlast needle", &[b"needle"], true);
        assert_eq!(hits, ["last needle"]);
        assert_eq!(st.bytes_consumed, 13);
    }

    #[test]
    fn several_needles_in_order() {
        let (hits, _) = run(b"one A\ntwo B\nthree\nfour A B\n", &[b"B", b"A"], false);
        assert_eq!(hits, ["one A", "two B", "four A B"]);
    }

    #[test]
    fn lines_across_buffer_boundaries() {
        let mut input = Vec::new();
        let mut want = 0;
        let mut i = 0;
        while input.len() < 3 * BUF_SIZE {
            if i % 1000 == 7 {
                input.extend_from_slice(format!("line {i} No retries permitted\n").as_bytes());
                want += 1;
            } else {
                input.extend_from_slice(format!("line {i} ordinary text here\n").as_bytes());
            }
            i += 1;
        }
        let (hits, st) = run(&input, &[b"No retries permitted"], false);
        assert_eq!(hits.len(), want);
        assert!(hits.iter().all(|h| h.starts_with("line ")));
        assert_eq!(st.bytes_consumed as usize, input.len());
    }

    /// A hit asking for the next line gets it (no needle in it), also when it sits in the next
    /// chunk, and a chain of them; lines after the chain are searched as before.
    #[test]
    fn follow_hands_over_continuations() {
        let run_f = |input: &[u8]| {
            let mut got = Vec::new();
            let opts = Scan {
                needles: &[b"needle"],
                deadline: None,
                consume_partial_tail: true,
                recognize: None,
            };
            let st = scan_follow(
                &mut &input[..],
                &opts,
                |l| {
                    got.push(String::from_utf8_lossy(l).into_owned());
                    l.ends_with(b"+")
                },
                |_| {},
            )
            .unwrap();
            (got, st)
        };
        let (got, st) = run_f(b"a\nneedle 1+\ncont 1+\ncont 2\nplain\nneedle 2\nz+\nq\n");
        assert_eq!(got, ["needle 1+", "cont 1+", "cont 2", "needle 2"]);
        assert_eq!(st.hits, 2);
        // Across a chunk boundary: the continuation is the first line of the next chunk.
        let mut input = vec![b'x'; BUF_SIZE - 20];
        input.extend_from_slice(b"\nneedle here+\n");
        input.extend_from_slice(b"continued\nafter\n");
        let (got, _) = run_f(&input);
        assert_eq!(got, ["needle here+", "continued"]);
        // A partial line at the end of input.
        let (got, _) = run_f(b"needle+\ntail");
        assert_eq!(got, ["needle+", "tail"]);
    }

    #[test]
    fn overlong_line_is_cut_not_fatal() {
        let mut input = vec![b'x'; BUF_SIZE + 100];
        input.extend_from_slice(b"\nafter needle\n");
        let (hits, st) = run(&input, &[b"needle"], false);
        assert_eq!(hits, ["after needle"]);
        assert_eq!(st.bytes_consumed as usize, input.len());
        assert_eq!((st.overlong, st.sampled, st.recognized), (1, 1, 0));
        // A gigabyte-class line with no newline at all: cut, counted, memory stays one buffer.
        let (hits, st) = run(&vec![0u8; 3 * BUF_SIZE + 5], &[b"needle"], false);
        assert!(hits.is_empty());
        assert_eq!((st.overlong, st.sampled), (1, 0));
    }

    #[test]
    fn leading_lines_are_sampled_for_the_format() {
        let mut input = Vec::new();
        for i in 0..40 {
            input.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let (_, st) = run(&input, &[b"x"], false);
        assert_eq!((st.sampled, st.recognized), (SAMPLE_LINES, SAMPLE_LINES));
        let (_, st) = run(b"garbage\nline 1\npartial", &[b"x"], false);
        assert_eq!((st.sampled, st.recognized), (2, 1));
        let (_, st) = run(b"partial only", &[b"x"], false);
        assert_eq!(st.sampled, 0);
    }
}
