//! Log lines wrapped by a container runtime, detected per line.
//!
//! A kubelet run in a container (RKE1 and other Docker-based setups, a static-pod kubelet) does not
//! write its log itself: the runtime does, one wrapped record per line.
//!
//! - Docker's json-file driver (`/var/lib/docker/containers/<id>/<id>-json.log`), one JSON object
//!   per line (moby `daemon/logger/jsonfilelog`, `jsonlog.JSONLogs`):
//!   `{"log":"<line, JSON-escaped>\n","stream":"stderr","time":"2019-03-25T06:02:55.123456789Z"}`
//!   (`attrs` may follow). A line longer than the driver's 16 KiB buffer is split into records
//!   whose `log` does not end in `\n`: the last piece is the one that does.
//! - The CRI format (kubelet `pkg/kubelet/kuberuntime/logs`, `parseCRILog`; containerd and CRI-O
//!   write it under `/var/log/pods/<ns>_<pod>_<uid>/<container>/N.log`, linked from
//!   `/var/log/containers/`): `<RFC3339Nano> <stdout|stderr> <tag> <line>` where the tag is `F`
//!   (full) or `P` (partial: the line continues in the next record), possibly followed by more
//!   `:`-separated tags; CRI logs of Kubernetes ≤ 1.9 had no tag field at all.
//!
//! The runtime's timestamp carries a year and a zone, unlike the klog header inside: it is the
//! entry's time.

use super::time::parse_rfc3339;
use std::borrow::Cow;

/// A logical line is never joined past this many bytes (the rest of its pieces are dropped).
pub const MAX_JOINED: usize = 1 << 20;

/// Which wrapper a line had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapper {
    Docker,
    Cri,
}

/// One physical line, unwrapped.
#[derive(Debug, Clone, PartialEq)]
pub struct Unwrapped<'a> {
    pub wrapper: Wrapper,
    /// The line the program wrote (without its newline).
    pub text: Cow<'a, str>,
    /// The runtime's time of the record (epoch ms).
    pub time_ms: Option<i64>,
    /// `stdout` or `stderr`.
    pub stream: Cow<'a, str>,
    /// The line continues in the next record of the same stream.
    pub partial: bool,
}

#[derive(serde::Deserialize)]
struct DockerJson<'a> {
    #[serde(borrow)]
    log: Cow<'a, str>,
    #[serde(default, borrow)]
    stream: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    time: Option<Cow<'a, str>>,
}

/// Unwrap a Docker json-file or CRI line; `None` for any other line (a plain klog line, a
/// journal export, a kubelet's own JSON logging).
pub fn unwrap(line: &[u8]) -> Option<Unwrapped<'_>> {
    let line = trim_eol(line);
    if line.starts_with(b"{\"log\":") || (line.starts_with(b"{") && contains(line, b"\"log\":")) {
        let s = std::str::from_utf8(line).ok()?;
        let j: DockerJson = serde_json::from_str(s).ok()?;
        let (text, partial) = match j.log.strip_suffix('\n') {
            Some(t) => (t.strip_suffix('\r').unwrap_or(t).to_string(), false),
            None => (j.log.to_string(), true),
        };
        return Some(Unwrapped {
            wrapper: Wrapper::Docker,
            text: Cow::Owned(text),
            time_ms: j
                .time
                .as_deref()
                .and_then(|t| parse_rfc3339(t.as_bytes()))
                .map(|(ms, _)| ms),
            stream: Cow::Owned(
                j.stream
                    .map(std::borrow::Cow::into_owned)
                    .unwrap_or_default(),
            ),
            partial,
        });
    }
    // CRI: timestamp, space, stream, space, [tag, space,] text.
    let (ms, n) = parse_rfc3339(line)?;
    let rest = line.get(n..)?.strip_prefix(b" ")?;
    let sp = memchr::memchr(b' ', rest);
    let stream = &rest[..sp.unwrap_or(rest.len())];
    if stream != b"stdout" && stream != b"stderr" {
        return None;
    }
    let rest = sp.map_or(&b""[..], |i| &rest[i + 1..]);
    let (partial, text) = {
        let sp = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let first_tag = rest[..sp].split(|&c| c == b':').next().unwrap_or(b"");
        match first_tag {
            b"P" => (true, rest.get(sp + 1..).unwrap_or(b"")),
            b"F" => (false, rest.get(sp + 1..).unwrap_or(b"")),
            // Kubernetes ≤ 1.9: no tag field.
            _ => (false, rest),
        }
    };
    Some(Unwrapped {
        wrapper: Wrapper::Cri,
        text: plugin::render::lossy(text),
        time_ms: Some(ms),
        stream: String::from_utf8_lossy(stream),
        partial,
    })
}

fn trim_eol(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = b {
        b = rest;
    }
    b
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    memchr::memmem::find(h, n).is_some()
}

/// One logical line: what the program wrote, the entry's time when the runtime gave one.
#[derive(Debug, Clone, PartialEq)]
pub struct Logical {
    pub text: String,
    pub time_ms: Option<i64>,
}

/// Joins the pieces of partial lines. Feed every physical line handed over; complete logical
/// lines come out in order. `feed` answers whether the next physical line is wanted (a partial
/// piece is pending), which is what [`super::scan::scan_follow`] asks.
#[derive(Debug, Default)]
pub struct Joiner {
    pending: Option<(Wrapper, String, Logical)>,
}

impl Joiner {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when `line` may be handed on as it is, without [`Joiner::feed`]: nothing is pending
    /// and it cannot be a wrapped line (a Docker json-file line starts with `{`, a CRI line with
    /// its RFC 3339 time). Saves a copy per line on a log of millions of lines.
    pub fn passes_through(&self, line: &[u8]) -> bool {
        self.pending.is_none() && !matches!(line.first(), Some(b'{' | b'0'..=b'9'))
    }

    pub fn feed(&mut self, line: &[u8], mut out: impl FnMut(Logical)) -> bool {
        match unwrap(line) {
            None => {
                // Not wrapped: a pending piece ends here, unjoined.
                if let Some((_, _, l)) = self.pending.take() {
                    out(l);
                }
                out(Logical {
                    text: plugin::render::lossy(trim_eol(line)).into_owned(),
                    time_ms: None,
                });
                false
            }
            Some(u) => {
                if let Some((w, stream, mut l)) = self.pending.take() {
                    if w == u.wrapper && stream == u.stream {
                        let room = MAX_JOINED.saturating_sub(l.text.len());
                        let mut cut = u.text.len().min(room);
                        while !u.text.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        l.text.push_str(&u.text[..cut]);
                        if u.partial {
                            self.pending = Some((w, stream, l));
                            return true;
                        }
                        out(l);
                        return false;
                    }
                    // Another stream or wrapper interleaved: the pending piece ends unjoined.
                    out(l);
                }
                let l = Logical {
                    text: u.text.into_owned(),
                    time_ms: u.time_ms,
                };
                if u.partial {
                    self.pending = Some((u.wrapper, u.stream.into_owned(), l));
                    true
                } else {
                    out(l);
                    false
                }
            }
        }
    }

    /// The end of input: a pending piece is handed over as it is.
    pub fn finish(&mut self, mut out: impl FnMut(Logical)) {
        if let Some((_, _, l)) = self.pending.take() {
            out(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A klog line as the kubelet writes it, and as Docker's json-file driver stores it (the
    /// quotes and backslashes of the line JSON-escaped, the newline as `\n`).
    const KLOG: &str = r#"E0325 06:02:55.123456    2166 nestedpendingoperations.go:301] Operation for "{volumeName:kubernetes.io/csi/driver.longhorn.io^pvc-1 podName: nodeName:}" failed. No retries permitted until 2019-03-25 06:04:57.123 +0000 UTC m=+1.0 (durationBeforeRetry 2m2s). Error: UnmountDevice failed"#;

    fn docker(log: &str, time: &str) -> String {
        format!(
            r#"{{"log":{},"stream":"stderr","time":"{time}"}}"#,
            serde_json::to_string(log).unwrap()
        )
    }

    #[test]
    fn docker_json_file_line() {
        let line = docker(&format!("{KLOG}\n"), "2019-03-25T06:02:55.123456789Z");
        // The escaping is real: the stored line holds \" where the klog line holds ".
        assert!(line.contains(r#"Operation for \"{volumeName"#));
        let u = unwrap(line.as_bytes()).unwrap();
        assert_eq!(u.wrapper, Wrapper::Docker);
        assert_eq!(u.text, KLOG);
        assert!(!u.partial);
        assert_eq!(u.stream, "stderr");
        assert_eq!(
            u.time_ms,
            parse_rfc3339(b"2019-03-25T06:02:55.123Z").map(|x| x.0)
        );
        // With attrs (log-opt labels/env) and a CRLF line end.
        let line = r#"{"log":"a b\r\n","stream":"stdout","attrs":{"tag":"kubelet"},"time":"2019-03-25T06:02:55Z"}"#;
        assert_eq!(unwrap(line.as_bytes()).unwrap().text, "a b");
    }

    #[test]
    fn cri_lines_full_partial_and_untagged() {
        let l = format!("2016-10-06T00:17:09.669794202Z stderr F {KLOG}");
        let u = unwrap(l.as_bytes()).unwrap();
        assert_eq!(
            (u.wrapper, u.text.as_ref(), u.partial),
            (Wrapper::Cri, KLOG, false)
        );
        assert_eq!(
            u.time_ms,
            parse_rfc3339(b"2016-10-06T00:17:09.669Z").map(|x| x.0)
        );
        let u = unwrap(b"2016-10-06T00:17:09.669794202+02:00 stdout P part one\n").unwrap();
        assert_eq!((u.text.as_ref(), u.partial), ("part one", true));
        // Forward-compatible tags: only the first one counts.
        let u = unwrap(b"2016-10-06T00:17:09.669794202Z stdout F:x:y done").unwrap();
        assert_eq!((u.text.as_ref(), u.partial), ("done", false));
        // Kubernetes <= 1.9: no tag; a klog line starting with F (fatal) is not a tag.
        let u = unwrap(b"2017-10-06T00:17:09.669794202Z stderr F1006 00:17:09.1 1 x.go:1] boom")
            .unwrap();
        assert_eq!(u.text, "F1006 00:17:09.1 1 x.go:1] boom");
        // Not wrapped.
        assert!(unwrap(KLOG.as_bytes()).is_none());
        assert!(unwrap(b"2016-10-06T00:17:09Z kubelet[1]: x").is_none());
        assert!(unwrap(br#"{"ts":1.5,"msg":"x"}"#).is_none());
        assert!(unwrap(b"{\"log\": broken").is_none());
    }

    fn join(lines: &[String]) -> (Vec<Logical>, Vec<bool>) {
        let mut j = Joiner::new();
        let mut out = Vec::new();
        let mut wants = Vec::new();
        for l in lines {
            wants.push(j.feed(l.as_bytes(), |x| out.push(x)));
        }
        j.finish(|x| out.push(x));
        (out, wants)
    }

    #[test]
    fn partial_pieces_join_with_the_next() {
        let (a, b) = KLOG.split_at(100);
        let (b, c) = b.split_at(50);
        // CRI: P, P, F.
        let lines = vec![
            format!("2016-10-06T00:17:09.000000001Z stderr P {a}"),
            format!("2016-10-06T00:17:09.000000002Z stderr P {b}"),
            format!("2016-10-06T00:17:09.000000003Z stderr F {c}"),
            "2016-10-06T00:17:10Z stderr F next".to_string(),
        ];
        let (out, wants) = join(&lines);
        assert_eq!(wants, [true, true, false, false]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].text, KLOG);
        assert_eq!(
            out[0].time_ms,
            parse_rfc3339(b"2016-10-06T00:17:09Z").map(|x| x.0)
        );
        assert_eq!(out[1].text, "next");
        // Docker: a piece without its newline, then the rest.
        let lines = vec![
            docker(a, "2019-03-25T06:02:55.1Z"),
            docker(&format!("{b}{c}\n"), "2019-03-25T06:02:55.2Z"),
        ];
        let (out, wants) = join(&lines);
        assert_eq!(wants, [true, false]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].text, KLOG);
        // A partial piece followed by another stream or by nothing ends unjoined.
        let lines = vec![
            "2016-10-06T00:17:09Z stderr P half".to_string(),
            "2016-10-06T00:17:09Z stdout F other".to_string(),
            "2016-10-06T00:17:09Z stderr P last".to_string(),
        ];
        let (out, _) = join(&lines);
        let texts: Vec<&str> = out.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["half", "other", "last"]);
        // Plain lines pass through.
        let (out, wants) = join(&[KLOG.to_string()]);
        assert_eq!(
            (out[0].text.as_str(), out[0].time_ms, wants[0]),
            (KLOG, None, false)
        );
    }

    #[test]
    fn joined_length_is_bounded() {
        let piece = "x".repeat(1 << 16);
        let mut lines: Vec<String> = (0..40)
            .map(|_| format!("2016-10-06T00:17:09Z stderr P {piece}"))
            .collect();
        lines.push("2016-10-06T00:17:09Z stderr F end".into());
        let (out, _) = join(&lines);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].text.len(), MAX_JOINED);
    }
}
