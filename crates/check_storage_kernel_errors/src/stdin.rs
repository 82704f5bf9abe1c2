//! `--kmsg -`: the kernel log on standard input, as an operator pipes it from another node
//! (issue 28). Input decoding only: every record is classified like one of /dev/kmsg.
//!
//! - `talosctl [-n A,B] dmesg` (siderolabs/talos): machined's Dmesg API formats each record as
//!   `"%s: %7s: [%s]: %s"` (facility, priority right-aligned to 7, the time in RFC 3339 with
//!   nanoseconds, the text; `internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go`),
//!   and talosctl prints each node's data behind `"<node>: "` (`cmd/talosctl/cmd/talos/dmesg.go`),
//!   for one node or several: `172.20.0.5: kern:    info: [2026-07-13T20:27:25.123456789Z]: text`.
//!   The node prefix may be missing (a copy of one node's output).
//! - `/dev/kmsg` records (`cat /dev/kmsg`, a `prio,seq,usec,flags;text` dump), dated with this
//!   machine's clock like the device itself.
//!
//! Lines starting with a space (the kernel's ` KEY=value` continuation lines) belong to the
//! record before them; any other line that is neither shape is counted as unreadable.

use node::logs::kmsg::{self, Record};
use std::io::{BufRead, Read};
use std::time::Instant;

/// One record read from stdin: the record, its wall time when the line gives one (talosctl's
/// RFC 3339), and the node that printed it (talosctl's prefix).
pub struct Decoded {
    pub record: Record,
    pub t_ms: Option<i64>,
    pub node: Option<String>,
}

/// go-kmsg's facility names (talosctl prints them), in their numbering.
const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
];
const PRIORITIES: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// Decode one line of `talosctl dmesg` (with or without its node prefix). `seq`: the number the
/// record gets (its line's order: talosctl prints none).
pub fn decode_talosctl(line: &str, seq: u64) -> Option<Decoded> {
    // The time in brackets ends the fixed part: `...: [<RFC 3339>]: text`.
    let mut from = 0;
    while let Some(i) = line[from..].find(": [").map(|i| from + i) {
        let after = &line[i + 3..];
        if let Some(close) = after
            .find("]: ")
            .or_else(|| after.strip_suffix(']').map(str::len))
        {
            if let Some((t_ms, n)) = node::logs::time::parse_rfc3339(&after.as_bytes()[..close]) {
                if n == close {
                    let head = &line[..i];
                    let (rest, level) = head.rsplit_once(": ")?;
                    let level = level.trim();
                    let (node, facility) = match rest.rsplit_once(": ") {
                        Some((n, f)) => (Some(n.trim().to_string()), f.trim()),
                        None => (None, rest.trim()),
                    };
                    let fac = FACILITIES.iter().position(|f| *f == facility)? as u32;
                    let lvl = PRIORITIES.iter().position(|p| *p == level)? as u8;
                    let text = after.get(close + 3..).unwrap_or("");
                    return Some(Decoded {
                        record: Record {
                            facility: fac,
                            level: lvl,
                            seq,
                            usec: 0,
                            text: text.trim_end().to_string(),
                            dict: Vec::new(),
                        },
                        t_ms: Some(t_ms),
                        node: node.filter(|n| !n.is_empty()),
                    });
                }
            }
        }
        from = i + 3;
    }
    None
}

/// Decode one line: talosctl's, else a kmsg record.
pub fn decode_line(line: &str, seq: u64) -> Option<Decoded> {
    decode_talosctl(line, seq).or_else(|| {
        kmsg::parse_record(line.as_bytes()).map(|record| Decoded {
            record,
            t_ms: None,
            node: None,
        })
    })
}

/// What reading stdin gave.
#[derive(Debug, Default)]
pub struct Stats {
    pub read: kmsg::ReadStats,
    pub bytes: u64,
    /// Lines that are no record in either shape (continuation lines excluded), and lines over
    /// [`kmsg::RECORD_MAX`].
    pub unreadable: u64,
    /// The nodes talosctl named, in order of first appearance.
    pub nodes: Vec<String>,
}

/// What the error says a kernel log on stdin is expected to hold.
pub const EXPECTED: &str = "`talosctl dmesg` lines (`<node>: kern:    info: [<RFC 3339 time>]: text`) or /dev/kmsg records `prio,seq,usec,flags;text`";

/// Read `r` (stdin) to its end or the deadline, calling `f` per record in order. Memory stays
/// within one line of at most [`kmsg::RECORD_MAX`] bytes whatever the input.
pub fn read<R: Read>(
    r: R,
    deadline: Instant,
    mut f: impl FnMut(&Decoded),
) -> Result<Stats, kmsg::KmsgError> {
    let mut r = std::io::BufReader::with_capacity(64 << 10, r);
    let mut st = Stats {
        read: kmsg::ReadStats {
            complete: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut line: Vec<u8> = Vec::new();
    let mut overlong = false;
    let mut seq = 0u64;
    loop {
        if Instant::now() >= deadline {
            st.read.complete = false;
            break;
        }
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(kmsg::KmsgError::Other(format!(
                    "cannot read stdin: {}",
                    plugin::errtext(&e)
                )))
            }
        };
        let eof = buf.is_empty();
        let (chunk, done) = match buf.iter().position(|&c| c == b'\n') {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let complete_line = eof || done > chunk.len();
        if !overlong {
            if line.len() + chunk.len() > kmsg::RECORD_MAX {
                overlong = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        st.bytes += done as u64;
        r.consume(done);
        if !complete_line {
            continue;
        }
        if overlong {
            st.unreadable += 1;
            overlong = false;
        } else if !line.is_empty() && !line.starts_with(b" ") {
            let text = String::from_utf8_lossy(&line);
            seq += 1;
            match decode_line(text.trim_end_matches('\r'), seq) {
                Some(d) => {
                    st.read.records += 1;
                    if let Some(n) = &d.node {
                        if !st.nodes.contains(n) && st.nodes.len() < 64 {
                            st.nodes.push(n.clone());
                        }
                    }
                    f(&d);
                }
                None => st.unreadable += 1,
            }
        }
        line.clear();
        if eof {
            break;
        }
    }
    if st.read.records == 0 && st.unreadable > 0 {
        return Err(kmsg::KmsgError::Other(format!(
            "stdin is not a kernel log: none of its {} is a record (expected {EXPECTED})",
            plugin::count(st.unreadable as usize, "line", "lines")
        )));
    }
    Ok(st)
}

/// What the answer says about a kernel log read from stdin: the node talosctl named (several:
/// joined with `,`, as `talosctl -n` takes them), how many lines could not be read, and that
/// devices are not mapped to volumes (they are another node's: this machine's mount table and
/// sysfs do not know them).
pub fn describe(st: &Stats, data: &mut crate::Data) {
    if !st.nodes.is_empty() {
        data.node_name = Some(st.nodes.join(","));
    }
    if st.unreadable > 0 {
        data.notes.push(format!(
            "stdin: {} could not be read as kernel log records (expected {EXPECTED}); every record read was judged",
            plugin::count(st.unreadable as usize, "line", "lines")
        ));
    }
    if !data.events.is_empty() {
        data.notes.push(
            "stdin: devices are not mapped to volumes (the log is another node's); run the check on that node or in its DaemonSet pod for the PVs".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn talosctl_dmesg_lines_with_and_without_the_node() {
        let d = decode_line(
            "172.20.0.5: kern:     err: [2026-07-13T20:27:25.123456789Z]: sd 2:0:0:0: [sdc] tag#0 FAILED Result: hostbyte=DID_OK",
            4,
        )
        .unwrap();
        assert_eq!(d.node.as_deref(), Some("172.20.0.5"));
        assert_eq!((d.record.facility, d.record.level, d.record.seq), (0, 3, 4));
        assert_eq!(
            d.record.text,
            "sd 2:0:0:0: [sdc] tag#0 FAILED Result: hostbyte=DID_OK"
        );
        assert_eq!(
            d.t_ms,
            node::logs::time::parse_rfc3339(b"2026-07-13T20:27:25.123Z").map(|x| x.0)
        );
        // IPv6 node, no node, another facility.
        let d = decode_line(
            "fd00::5: kern:    info: [2026-07-13T20:27:25Z]: EXT4-fs (sdc): mounted",
            1,
        )
        .unwrap();
        assert_eq!(d.node.as_deref(), Some("fd00::5"));
        let d = decode_line("daemon:  notice: [2026-07-13T20:27:25Z]: x: [y]: z", 1).unwrap();
        assert_eq!(
            (d.node, d.record.facility, d.record.text.as_str()),
            (None, 3, "x: [y]: z")
        );
        // A kmsg record; garbage.
        let d = decode_line("3,77,1000,-;EXT4-fs error (device sdc): x", 1).unwrap();
        assert_eq!((d.record.seq, d.t_ms), (77, None));
        assert!(decode_line("hello: [world]: x", 1).is_none());
        assert!(decode_line("kern: bogus: [2026-07-13T20:27:25Z]: x", 1).is_none());
    }

    #[test]
    fn reading_counts_unreadable_lines_and_nodes_and_bounds_a_line() {
        let input = format!(
            "a: kern:    info: [2026-07-13T20:27:25Z]: one\n SUBSYSTEM=scsi\nnoise\n{}\nb: kern:    info: [2026-07-13T20:27:26Z]: two",
            "x".repeat(kmsg::RECORD_MAX + 10)
        );
        let mut got = Vec::new();
        let st = read(
            input.as_bytes(),
            Instant::now() + Duration::from_secs(5),
            |d| got.push(d.record.text.clone()),
        )
        .unwrap();
        assert_eq!(got, ["one", "two"]);
        assert_eq!(st.unreadable, 2);
        assert_eq!(st.nodes, ["a", "b"]);
        let e = read(
            &b"nothing here\n"[..],
            Instant::now() + Duration::from_secs(5),
            |_| {},
        )
        .unwrap_err();
        assert!(matches!(e, kmsg::KmsgError::Other(s) if s.contains("talosctl dmesg")));
        let st = read(&b""[..], Instant::now() + Duration::from_secs(5), |_| {}).unwrap();
        assert_eq!(st.read.records, 0);
    }
}
