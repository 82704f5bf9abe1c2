//! The kubelet's failed-volume-operation line, across versions.
//!
//! `exponentialbackoff.GenerateNoRetriesPermittedMsg`, logged by `nestedpendingoperations.go`:
//!
//! ```text
//! Operation for %q failed. No retries permitted until %v (durationBeforeRetry %v). Error: %v
//! ```
//! (`Error: %q` in releases up to ≈1.19: the error text quoted with escaped quotes).
//! The operation key is `%q` of:
//! - old: `"<volumeName>"` or `"<volumeName>" ("<podName>")` → `"\"kubernetes.io/…\" (\"uid\")"`;
//! - new: `fmt.Sprintf("%+v", operationKey)` → `"{volumeName:kubernetes.io/csi/d^h podName:uid nodeName:}"`.
//!
//! Timestamps: the entry's own (journal, JSON `ts` in epoch ms, RFC 3339 prefix), else the klog
//! header (local time, year inferred), else the syslog prefix, else `until − durationBeforeRetry`.

use node::logs::time::{self, Tz};

/// What makes a line a candidate (searched with memmem before anything else).
pub const NEEDLES: &[&[u8]] = &[b"No retries permitted until"];

/// What nearly every kubelet record holds, in every shape read: klog's `file.go:123]`, a JSON
/// `msg` or journal `MESSAGE`, a syslog tag. Searched (at grep speed) to find a record past a
/// long preamble before a source is called "not a kubelet log".
pub const RECORD_NEEDLES: &[&[u8]] = &[b".go:", b"\"msg\"", b"\"MESSAGE\"", b"kubelet["];

/// One failed volume operation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// When it failed (epoch ms).
    pub t: i64,
    /// The kubelet's unique volume name (`kubernetes.io/csi/<driver>^<handle>`).
    pub volume: String,
    /// The PV (spec) name when the error text gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pv: Option<String>,
    /// Operation kind: MountDevice, UnmountDevice, SetUp, TearDown, Attach, …
    pub op: String,
    /// Pod name (or UID) involved, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// durationBeforeRetry (ms).
    pub backoff_ms: u64,
    /// The error text (shortened).
    pub error: String,
}

/// Parse a Go `%q` string starting at `s[0] == '"'`: (unquoted, bytes consumed).
pub fn go_unquote(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut out: Vec<u8> = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let s = String::from_utf8(out)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                return Some((s, i + 1));
            }
            b'\\' if i + 1 < b.len() => {
                let c = b[i + 1];
                i += 2;
                match c {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'x' if i + 2 <= b.len() => {
                        let v = std::str::from_utf8(&b[i..i + 2])
                            .ok()
                            .and_then(|h| u8::from_str_radix(h, 16).ok())?;
                        out.push(v);
                        i += 2;
                    }
                    b'u' | b'U' => {
                        let n = if c == b'u' { 4 } else { 8 };
                        let ch = std::str::from_utf8(b.get(i..i + n)?)
                            .ok()
                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                            .and_then(char::from_u32)?;
                        let mut tmp = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        i += n;
                    }
                    other => out.push(other),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// (volume, pod) of an operation key (already unquoted once).
fn parse_key(key: &str) -> Option<(String, Option<String>)> {
    if let Some(inner) = key.strip_prefix('{').and_then(|k| k.strip_suffix('}')) {
        // volumeName:<v> podName:<p> nodeName:<n>[ operationName:<o>]
        let v_start = inner.find("volumeName:")? + "volumeName:".len();
        let p_at = inner.find(" podName:");
        let volume = inner[v_start..p_at.unwrap_or(inner.len())]
            .trim()
            .to_string();
        let pod = p_at.map(|p| {
            let rest = &inner[p + " podName:".len()..];
            rest[..rest.find(" nodeName:").unwrap_or(rest.len())]
                .trim()
                .to_string()
        });
        return Some((volume, pod.filter(|p| !p.is_empty())));
    }
    if key.starts_with('"') {
        let (volume, n) = go_unquote(key)?;
        let rest = key[n..].trim_start();
        let pod = rest
            .strip_prefix('(')
            .and_then(go_unquote)
            .map(|(p, _)| p)
            .filter(|p| !p.is_empty());
        return Some((volume, pod));
    }
    Some((key.to_string(), None))
}

/// The operation kind from the error text.
pub fn op_kind(err: &str) -> String {
    if err.contains("GetDeviceMountRefs") {
        return "UnmountDevice (GetDeviceMountRefs)".into();
    }
    let known = [
        ("MountVolume.MountDevice", "MountDevice"),
        ("MountVolume.WaitForAttach", "WaitForAttach"),
        ("MountVolume.SetUp", "SetUp"),
        ("MountVolume.NodeExpandVolume", "NodeExpandVolume"),
        ("MountVolume.MarkVolumeAsMounted", "MountVolume"),
        ("UnmountVolume.TearDown", "TearDown"),
        ("UnmountVolume.MarkVolumeMountAsUncertain", "TearDown"),
        ("UnmountDevice", "UnmountDevice"),
        ("MapVolume.", "MapVolume"),
        ("UnmapVolume.", "UnmapVolume"),
        ("UnmapDevice", "UnmapDevice"),
        ("AttachVolume.", "Attach"),
        ("DetachVolume.", "Detach"),
        ("VerifyControllerAttachedVolume", "VerifyControllerAttached"),
        ("Verify", "Verify"),
        ("NodeExpandVolume", "NodeExpandVolume"),
    ];
    // The first 200 bytes, cut on a character boundary (log lines carry any UTF-8; fuzzing found
    // a cut inside a multi-byte character: see fuzz/FINDINGS.md).
    let mut cut = err.len().min(200);
    while !err.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &err[..cut];
    known
        .iter()
        .filter_map(|(needle, name)| head.find(needle).map(|p| (p, *name)))
        .min_by_key(|(p, _)| *p)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| "volume operation".into())
}

/// `for volume "X"` in the error text.
fn pv_of(err: &str) -> Option<String> {
    let i = err.find("for volume ")? + "for volume ".len();
    let (v, _) = go_unquote(&err[i..])?;
    (!v.is_empty()).then_some(v)
}

/// `pod "name" (UID: "uid")` in the error text.
fn pod_of(err: &str) -> Option<String> {
    let i = err.find(" pod \"")? + " pod ".len();
    go_unquote(&err[i..])
        .map(|(p, _)| p)
        .filter(|p| !p.is_empty())
}

/// Where the part of a known error that says what to do begins, most specific first: the paths
/// to unmount (GetDeviceMountRefs, all versions' wording), the device path, the CSI driver's own
/// answer.
const ACTIONABLE: &[&str] = &[
    "the device mount path",
    "The device mount path",
    "is still mounted by other references",
    "rpc error:",
];

/// Shorten an error for output: one line, at most `max` characters. What is cut is the middle:
/// the head (which operation, which volume) and the actionable tail of a known error (the
/// `still mounted by other references [...]` list, the device path, the driver's `rpc error`)
/// stay; without a known tail the last two thirds are kept.
pub fn shorten(s: &str, max: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    let n = one.chars().count();
    if n <= max {
        return one.to_string();
    }
    let max = max.max(8);
    // The earliest actionable marker whose tail leaves room for a head; else the latest one.
    let starts: Vec<usize> = ACTIONABLE
        .iter()
        .filter_map(|m| one.find(m))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let tail_chars = |b: usize| one[b..].chars().count();
    let pick = starts
        .iter()
        .copied()
        .find(|&b| tail_chars(b) + 8 <= max)
        .or_else(|| starts.last().copied());
    let (head_n, tail) = match pick {
        Some(b) if tail_chars(b) + 8 <= max => (max - 1 - tail_chars(b), &one[b..]),
        Some(b) => {
            // The tail alone is too long: keep its start and its end (the list's last entries).
            let t = &one[b..];
            let keep_end = (max - 2) / 2;
            let keep_start = max - 2 - keep_end;
            let start: String = t.chars().take(keep_start).collect();
            let end: String = t.chars().skip(t.chars().count() - keep_end).collect();
            return format!("…{start}…{end}");
        }
        None => {
            let tail_n = (max - 1) * 2 / 3;
            let b = one
                .char_indices()
                .nth(n - tail_n)
                .map(|(i, _)| i)
                .unwrap_or(one.len());
            (max - 1 - tail_n, &one[b..])
        }
    };
    let head: String = one.chars().take(head_n).collect();
    format!("{}…{tail}", head.trim_end())
}

/// Parse the message text of a failure line (after any log header).
/// (volume, pod from the key, failure time from `until − backoff`, backoff ms, error text).
pub type Parsed = (String, Option<String>, Option<i64>, u64, String);

/// `hay.find(needle)` with memchr's searcher (several times faster than `str::find` per line on
/// a log of millions of lines).
fn find(hay: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(hay.as_bytes(), needle.as_bytes())
}

pub fn parse_message(msg: &str) -> Option<Parsed> {
    parse_message_with(msg, true, true)
}

/// A `%q` string without escapes, borrowed: (text, bytes consumed). The key of every kubelet
/// since 1.20 is one; parsing it without a copy keeps a log of millions of lines within -t.
fn quoted_plain(s: &str) -> Option<(&str, usize)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let end = memchr::memchr2(b'"', b'\\', &b[1..])? + 1;
    (b[end] == b'"').then(|| (&s[1..end], end + 1))
}

/// [`parse_message`]; without `want_err` the error text is left out (empty), without
/// `want_until` the retry time is not parsed (the line has its own time).
fn parse_message_with(msg: &str, want_err: bool, want_until: bool) -> Option<Parsed> {
    let at = find(msg, "Operation for ")? + "Operation for ".len();
    let rest = &msg[at..];
    let (key, n) = match quoted_plain(rest) {
        Some((k, n)) => (std::borrow::Cow::Borrowed(k), n),
        None => {
            let (k, n) = go_unquote(rest)?;
            (std::borrow::Cow::Owned(k), n)
        }
    };
    let rest = rest[n..].strip_prefix(" failed. No retries permitted until ")?;
    let d = find(rest, " (durationBeforeRetry ")?;
    let until = if want_until {
        time::parse_go_time(&rest[..d])
    } else {
        None
    };
    let rest = &rest[d + " (durationBeforeRetry ".len()..];
    let close = rest.find(')')?;
    let backoff_ms = time::parse_go_duration(&rest[..close])?;
    let rest = &rest[close + 1..];
    let err = match rest
        .strip_prefix(". Error: ")
        .or_else(|| rest.strip_prefix(". error: "))
        .filter(|_| want_err)
    {
        Some(e) if e.starts_with('"') => go_unquote(e)
            .map(|(s, _)| s)
            .unwrap_or_else(|| e.to_string()),
        Some(e) => e.trim_end().to_string(),
        None => String::new(),
    };
    let (volume, key_pod) = parse_key(&key)?;
    let t = until.map(|u| u - backoff_ms as i64);
    Some((volume, key_pod, t, backoff_ms, err))
}

#[derive(serde::Deserialize)]
struct JsonLine {
    /// Kubelet JSON logging (`--logging-format=json`): epoch milliseconds.
    ts: Option<f64>,
    msg: Option<String>,
    /// Talos `json_lines` (machined's `sender_jsonlines.go`): RFC 3339 with nanoseconds.
    #[serde(rename = "talos-time")]
    talos_time: Option<String>,
    /// `journalctl -o json`: the message (a string, or an array of bytes when not UTF-8) and
    /// the entry's time in microseconds (a decimal string).
    #[serde(rename = "MESSAGE")]
    message: Option<serde_json::Value>,
    #[serde(rename = "__REALTIME_TIMESTAMP")]
    realtime_us: Option<String>,
}

impl JsonLine {
    /// (message, time in epoch ms) of a JSON record of any shape the check reads.
    fn decode(self) -> Option<(String, Option<i64>)> {
        if let Some(m) = self.msg {
            let t = self
                .ts
                .filter(|v| v.is_finite())
                .map(|v| v as i64)
                .or_else(|| {
                    self.talos_time
                        .and_then(|s| time::parse_rfc3339(s.as_bytes()).map(|(ms, _)| ms))
                });
            return Some((m, t));
        }
        let m = match self.message? {
            serde_json::Value::String(s) => s,
            serde_json::Value::Array(a) => {
                let b: Vec<u8> = a
                    .iter()
                    .filter_map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok()))
                    .collect();
                String::from_utf8_lossy(&b).into_owned()
            }
            _ => return None,
        };
        let t = self
            .realtime_us
            .and_then(|s| s.parse::<i64>().ok())
            .map(|us| us / 1000);
        Some((m, t))
    }
}

/// Characters an operator's copy may put before a record: blanks, a Markdown backtick, a quote
/// mark of a pasted mail or chat, and the separators of `grep -H`/`-n` (`kubelet.log:535:`,
/// `535-` for context lines) and talosctl (`10.0.0.4: `).
fn after_prefix_char(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'`' | b'>' | b':' | b'-' | b'\'' | b'|')
}

/// Does a kubelet record start right at the beginning of `l`: a klog header, a syslog or
/// `journalctl -o short-precise` prefix, an RFC 3339 (CRI, `short-iso`) prefix, or a JSON
/// record of kubelet JSON logging, Talos `json_lines` or `journalctl -o json`.
fn record_at(l: &[u8]) -> bool {
    let json = |l: &[u8]| {
        l.starts_with(b"{\"")
            && ((memchr::memmem::find(l, b"\"msg\":").is_some()
                && (memchr::memmem::find(l, b"\"ts\":").is_some()
                    || memchr::memmem::find(l, b"\"talos-time\":").is_some()))
                || memchr::memmem::find(l, b"\"MESSAGE\":").is_some())
    };
    time::find_klog_header(l).is_some_and(|h| h.msg_start <= 200)
        || time::syslog_prefix(l).is_some()
        || time::parse_rfc3339(l).is_some()
        || json(l)
}

/// Where the kubelet record of an operator's copy of a line begins: at its start, or after a
/// prefix (blanks, backticks, quote marks, `grep -H`/`-n`, talosctl's `<node>: `) in its first
/// 256 bytes. `None`: no record in the line.
pub fn record_start(line: &[u8]) -> Option<usize> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if record_at(line) {
        return Some(0);
    }
    let lim = line.len().min(256);
    (1..lim).find(|&i| after_prefix_char(line[i - 1]) && record_at(&line[i..]))
}

/// Is this a kubelet log line in any shape the check reads: a klog header (at the start or behind
/// a syslog/journal, CRI or Docker json-file prefix), a syslog prefix, an RFC 3339 (CRI) prefix,
/// or kubelet JSON logging, Talos `json_lines`, `journalctl -o json` — also behind what an
/// operator's copy adds (a `grep -n`/`-H` prefix, a backtick, talosctl's `<node>: `). Used on
/// the first lines of a source to tell "no failure" from "not a kubelet log at all".
pub fn is_log_line(line: &[u8]) -> bool {
    // A failure line pasted without its header is a kubelet record too.
    record_start(line).is_some()
        || (memchr::memmem::find(line, b"Operation for ").is_some()
            && memchr::memmem::find(line, NEEDLES[0]).is_some())
}

/// Parse one candidate line of any supported shape. `entry_ms`: the entry's own time when the
/// source has one (the journal's `__REALTIME_TIMESTAMP`).
pub fn parse_line(line: &[u8], entry_ms: Option<i64>, now_ms: i64, tz: &dyn Tz) -> Option<Failure> {
    parse_line_since(line, entry_ms, now_ms, tz, i64::MIN)
}

/// [`parse_line`], with only what a volume's run needs (time, volume, backoff) for a failure
/// older than `old_before` (epoch ms): its words are never shown, and leaving them out keeps a
/// log of millions of old lines within -t (issue 27, finding 3).
pub fn parse_line_since(
    line: &[u8],
    entry_ms: Option<i64>,
    now_ms: i64,
    tz: &dyn Tz,
    old_before: i64,
) -> Option<Failure> {
    // Valid UTF-8 (nearly every line) is checked with the fast validator; the lossy scan is
    // several times slower and shows on a log of millions of lines.
    let text = match std::str::from_utf8(line) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(line),
    };
    let text = text.trim_end_matches(['\r', '\n']);
    let mut msg: std::borrow::Cow<str> = std::borrow::Cow::Borrowed(text);
    let mut t: Option<i64> = entry_ms;
    // JSON logging, Talos json_lines, journalctl -o json (possibly behind a prefix: CRI, syslog,
    // talosctl's "node: ", grep -n).
    if find(text, "\"msg\"").is_some() || find(text, "\"MESSAGE\"").is_some() {
        if let Some(open) = text.find("{\"") {
            if let Some((m, jt)) = serde_json::from_str::<JsonLine>(text[open..].trim_end())
                .ok()
                .and_then(JsonLine::decode)
            {
                msg = std::borrow::Cow::Owned(m);
                if t.is_none() {
                    t = jt;
                }
            }
        }
    }
    if t.is_none() {
        t = time::parse_rfc3339(text.as_bytes()).map(|(ms, _)| ms);
    }
    // Headers behind an operator's prefix (`kubelet.log:535:E0713 …`, a backtick) are found
    // where the record starts.
    let body = match t {
        None => &msg.as_bytes()[record_start(msg.as_bytes()).unwrap_or(0)..],
        Some(_) => msg.as_bytes(),
    };
    if t.is_none() {
        if let Some(h) = time::find_klog_header(body) {
            t = Some(time::infer_year(&h.time, now_ms, tz));
        }
    }
    if t.is_none() {
        if let Some(s) = time::syslog_prefix(body) {
            t = Some(time::infer_year(&s, now_ms, tz));
        }
    }
    // A line whose own time is older than `old_before` needs no error text.
    let old = t.is_some_and(|t| t < old_before);
    let (volume, key_pod, until_t, backoff_ms, err) = parse_message_with(&msg, !old, t.is_none())?;
    let t = t.or(until_t)?;
    if t < old_before {
        return Some(Failure {
            t,
            volume,
            pv: None,
            op: String::new(),
            pod: None,
            backoff_ms,
            error: String::new(),
        });
    }
    Some(Failure {
        t,
        pv: pv_of(&err),
        op: op_kind(&err),
        pod: pod_of(&err).or(key_pod),
        volume,
        backoff_ms,
        // Kept whole up to 1000 characters (state files hold up to 5000 failures); longer, the
        // middle goes and the actionable tail stays.
        error: shorten(&err, 1000),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn op_kind_cuts_long_errors_on_a_char_boundary() {
        // Found by fuzzing: byte 200 fell inside a multi-byte character.
        let err = format!(
            "GetDeviceMountRefs check failed {}{}",
            "x".repeat(167),
            "€€€ the device mount path"
        );
        assert!(!err.is_char_boundary(200));
        assert_eq!(op_kind(&err), "UnmountDevice (GetDeviceMountRefs)");
        let err = format!("{}€ UnmountVolume.TearDown failed", "y".repeat(199));
        assert_eq!(op_kind(&err), "volume operation");
    }

    use super::*;
    use node::logs::time::{days_from_civil, FixedTz};

    fn utc(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        (days_from_civil(y, mo, d) * 86400 + (h * 3600 + mi * 60 + s) as i64) * 1000
    }

    const NEW: &str = r#"Feb  7 10:17:21 node-1 kubelet[2166]: E0207 10:17:21.799920    2166 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/diskplugin.csi.alibabacloud.com^d-abc podName: nodeName:}" failed. No retries permitted until 2025-02-07 10:17:53.799902973 +0800 CST m=+8812235.211760637 (durationBeforeRetry 32s). Error: GetDeviceMountRefs check failed for volume "d-abc" (UniqueName: "kubernetes.io/csi/diskplugin.csi.alibabacloud.com^d-abc") on node "node-1" : the device mount path "/var/lib/kubelet/plugins/kubernetes.io/csi/diskplugin.csi.alibabacloud.com/0716/globalmount" is still mounted by other references [/tmp/test]"#;

    const OLD: &str = r#"E0118 08:15:52.041014    2112 nestedpendingoperations.go:267] Operation for "\"kubernetes.io/azure-file/42c0ea39-pvc-d7e1b5f9\" (\"42c0ea39-1af9-11e9-8941-000d3af95268\")" failed. No retries permitted until 2019-01-18 08:15:53.0410149 +0000 GMT m=+732.446642701 (durationBeforeRetry 1s). Error: "MountVolume.SetUp failed for volume \"pvc-d7e1b5f9\" (UniqueName: \"kubernetes.io/azure-file/42c0ea39-pvc-d7e1b5f9\") pod \"web-0\" (UID: \"42c0ea39\") : New-SmbGlobalMapping failed""#;

    #[test]
    fn new_key_bare_error_syslog_prefix() {
        // The klog header is local time (here UTC+8): 10:17:21 local = 02:17:21Z.
        let now = utc(2025, 2, 7, 3, 0, 0);
        let f = parse_line(NEW.as_bytes(), None, now, &FixedTz(8 * 3600)).unwrap();
        assert_eq!(
            f.volume,
            "kubernetes.io/csi/diskplugin.csi.alibabacloud.com^d-abc"
        );
        assert_eq!(f.pv.as_deref(), Some("d-abc"));
        assert_eq!(f.op, "UnmountDevice (GetDeviceMountRefs)");
        assert_eq!(f.pod, None);
        assert_eq!(f.backoff_ms, 32_000);
        assert_eq!(f.t, utc(2025, 2, 7, 2, 17, 21) + 799);
        assert!(f
            .error
            .contains("still mounted by other references [/tmp/test]"));
    }

    #[test]
    fn old_quoted_key_and_quoted_error() {
        let now = utc(2019, 1, 18, 8, 20, 0);
        let f = parse_line(OLD.as_bytes(), None, now, &FixedTz(0)).unwrap();
        assert_eq!(f.volume, "kubernetes.io/azure-file/42c0ea39-pvc-d7e1b5f9");
        assert_eq!(f.pv.as_deref(), Some("pvc-d7e1b5f9"));
        assert_eq!(f.pod.as_deref(), Some("web-0"));
        assert_eq!(f.op, "SetUp");
        assert_eq!(f.backoff_ms, 1000);
        assert!(f
            .error
            .starts_with("MountVolume.SetUp failed for volume \"pvc-d7e1b5f9\""));
        assert_eq!(f.t, utc(2019, 1, 18, 8, 15, 52) + 41);
    }

    #[test]
    fn json_logging_ts_is_epoch_millis() {
        let msg = r#"Operation for \"{volumeName:kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837 podName:0d6a-uid nodeName:}\" failed. No retries permitted until 2026-07-13 20:31:25.5 +1000 AEST m=+1.0 (durationBeforeRetry 2m2s). Error: MountVolume.MountDevice failed for volume \"pvc-746b2837\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837\") pod \"seerr-0\" (UID: \"0d6a-uid\") : rpc error: code = DeadlineExceeded desc = context deadline exceeded"#;
        let line = format!(
            r#"{{"ts":1783938563500.123,"caller":"nestedpendingoperations/nestedpendingoperations.go:348","msg":"{msg}"}}"#
        );
        let f = parse_line(line.as_bytes(), None, 0, &FixedTz(0)).unwrap();
        assert_eq!(f.t, 1783938563500);
        assert_eq!(f.op, "MountDevice");
        assert_eq!(f.pod.as_deref(), Some("seerr-0"));
        assert_eq!(f.backoff_ms, 122_000);
        assert_eq!(
            f.volume,
            "kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837"
        );
    }

    #[test]
    fn very_old_unquoted_error_and_no_monotonic() {
        let l = r#"E0428 11:39:17.039857 1241 nestedpendingoperations.go:254] Operation for "\"kubernetes.io/rbd/a45f-foo-pv\" (\"a45f62aa\")" failed. No retries permitted until 2017-04-28 11:41:17.039803969 +0800 CST (durationBeforeRetry 2m0s). Error: MountVolume.SetUp failed for volume "kubernetes.io/rbd/a45f-foo-pv" (spec.Name: "foo-pv") pod "a45f62aa" (UID: "a45f62aa") with: rbd: image foo1 is locked by other nodes"#;
        let now = utc(2017, 4, 28, 3, 45, 0);
        let f = parse_line(l.as_bytes(), None, now, &FixedTz(8 * 3600)).unwrap();
        assert_eq!(f.backoff_ms, 120_000);
        assert_eq!(f.op, "SetUp");
        assert_eq!(f.pod.as_deref(), Some("a45f62aa"));
        assert_eq!(f.t, utc(2017, 4, 28, 3, 39, 17) + 39);
    }

    #[test]
    fn entry_time_wins_and_garbage_is_none() {
        let f = parse_line(OLD.as_bytes(), Some(42), 0, &FixedTz(0)).unwrap();
        assert_eq!(f.t, 42);
        assert!(parse_line(b"No retries permitted until tomorrow", None, 0, &FixedTz(0)).is_none());
        assert!(parse_line(
            b"Operation for \"x\" failed. No retries permitted until soon (durationBeforeRetry forever). Error: x",
            None,
            0,
            &FixedTz(0)
        )
        .is_none());
    }

    /// A real GetDeviceMountRefs error of a ≥ 1.24 kubelet (staging path under the sha256 of the
    /// volume handle) with three references: shortened, the head and every reference stay.
    #[test]
    fn shorten_keeps_the_references() {
        let refs = [
            "/var/lib/kubelet/pods/0d6a3b1e-6f2c-4e8a-9d1b-2b7c4f5e6a7b/volumes/kubernetes.io~csi/pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b/mount",
            "/var/lib/kubelet/pods/7e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b/volumes/kubernetes.io~csi/pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b/mount",
        ];
        let err = format!(
            "GetDeviceMountRefs check failed for volume \"pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b\") on node \"worker-04\" : the device mount path \"/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/{}/globalmount\" is still mounted by other references [{}]",
            "5d41402abc4b2a76b9719d911017c592ae8f3b2c1d4e5f6a7b8c9d0e1f2a3b4c",
            refs.join(" ")
        );
        assert!(err.chars().count() > 500);
        let s = shorten(&err, 500);
        assert_eq!(s.chars().count(), 500, "{s}");
        assert!(s.starts_with("GetDeviceMountRefs check failed"), "{s}");
        assert!(s.ends_with(&format!("[{}]", refs.join(" "))), "{s}");
        assert!(
            s.contains("…the device mount path \"/var/lib/kubelet/plugins/"),
            "{s}"
        );
        // Tighter than the tail: the marker closest to the end, its start and end kept.
        let s = shorten(&err, 200);
        assert_eq!(s.chars().count(), 200, "{s}");
        assert!(
            s.starts_with("…is still mounted by other references ["),
            "{s}"
        );
        assert!(s.ends_with("/mount]"), "{s}");
        // The driver's answer of a MountDevice failure.
        let err = format!(
            "MountVolume.MountDevice failed for volume \"pvc-746b2837\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837\") pod \"seerr-0\" (UID: \"0d6a\") {}: rpc error: code = DeadlineExceeded desc = context deadline exceeded",
            "x".repeat(300)
        );
        let s = shorten(&err, 300);
        assert!(
            s.starts_with("MountVolume.MountDevice failed for volume"),
            "{s}"
        );
        assert!(
            s.ends_with("rpc error: code = DeadlineExceeded desc = context deadline exceeded"),
            "{s}"
        );
        // Unknown errors: head and the last two thirds.
        let s = shorten(&format!("{}{}", "a".repeat(500), "b".repeat(500)), 100);
        assert_eq!(s.chars().count(), 100);
        assert!(
            s.starts_with("aaa") && s.ends_with("bbb") && s.contains('…'),
            "{s}"
        );
        // Short texts are one line, untouched otherwise.
        assert_eq!(shorten("a\nb", 10), "a b");
    }

    /// A pod name holding `"` (Go's %q writes it `\"`) stays whole in every shape: the bare error
    /// of new kubelets, the quoted error of old ones (escaped twice), JSON logging (escaped
    /// again by JSON) and a Docker json-file wrapper around that.
    #[test]
    fn pod_name_with_a_quote_is_kept_intact() {
        let err = r#"MountVolume.SetUp failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/d^pvc-1") pod "we\"ird-0" (UID: "u1") : rpc error: code = Internal desc = x"#;
        let new = format!(
            r#"E0713 20:27:25.123456    2166 nestedpendingoperations.go:348] Operation for "{{volumeName:kubernetes.io/csi/d^pvc-1 podName:u1 nodeName:}}" failed. No retries permitted until 2026-07-13 20:27:26.1 +0000 UTC m=+1.0 (durationBeforeRetry 1s). Error: {err}"#
        );
        let now = utc(2026, 7, 13, 20, 30, 0);
        let f = parse_line(new.as_bytes(), None, now, &FixedTz(0)).unwrap();
        assert_eq!(f.pod.as_deref(), Some("we\"ird-0"));
        assert!(f.error.contains(r#"pod "we\"ird-0""#), "{}", f.error);
        // Old: the whole error %q-quoted.
        let quoted = format!("{:?}", err); // Rust's Debug escapes " and \ like Go's %q here
        let old = format!(
            r#"E0713 20:27:25.123456    2166 nestedpendingoperations.go:267] Operation for "\"kubernetes.io/csi/d^pvc-1\" (\"u1\")" failed. No retries permitted until 2026-07-13 20:27:26.1 +0000 UTC m=+1.0 (durationBeforeRetry 1s). Error: {quoted}"#
        );
        let f = parse_line(old.as_bytes(), None, now, &FixedTz(0)).unwrap();
        assert_eq!(f.pod.as_deref(), Some("we\"ird-0"));
        // JSON logging, then Docker around it.
        let msg = new[new.find("Operation for").unwrap()..].to_string();
        let json = serde_json::json!({"ts": (now - 60_000) as f64, "msg": msg}).to_string();
        let f = parse_line(json.as_bytes(), None, now, &FixedTz(0)).unwrap();
        assert_eq!(f.pod.as_deref(), Some("we\"ird-0"));
        let docker = serde_json::json!({"log": format!("{json}\n"), "stream": "stderr", "time": "2026-07-13T20:29:00Z"}).to_string();
        let mut j = node::logs::wrap::Joiner::new();
        let mut got = Vec::new();
        j.feed(docker.as_bytes(), |l| got.push(l));
        let f = parse_line(got[0].text.as_bytes(), got[0].time_ms, now, &FixedTz(0)).unwrap();
        assert_eq!(f.pod.as_deref(), Some("we\"ird-0"));
    }

    #[test]
    fn unquote() {
        assert_eq!(
            go_unquote(r#""a\"b\\c\x41\u00e9" tail"#),
            Some(("a\"b\\cAé".to_string(), 19))
        );
        assert_eq!(go_unquote(r#""open"#), None);
    }

    #[test]
    fn log_line_shapes_are_recognized() {
        for (l, is) in [
            (
                &b"E0713 20:27:25.123456    2166 nestedpendingoperations.go:348] x"[..],
                true,
            ),
            (b"Jul 13 20:27:25 k8s03 kubelet[2166]: something", true),
            (
                b"2026-07-13T20:27:25.123456789Z stderr F I0713 20:27:25.123456 1 a.go:1] x",
                true,
            ),
            (
                b"{\"log\":\"I0713 20:27:25.123456       1 a.go:1] x\\n\",\"stream\":\"stderr\"}",
                true,
            ),
            (
                b"{\"ts\":1689279645123.4,\"caller\":\"a.go:1\",\"msg\":\"x\"}",
                true,
            ),
            (b"EXT4-fs error (device sdc): x", false),
            (b"\x00\x00\x00", false),
            (b"6,1,1000,-;sd 3:0:0:0: [sdc] Attached SCSI disk", false),
            (b"{\"kind\":\"PodList\"}", false),
            (b"", false),
        ] {
            assert_eq!(is_log_line(l), is, "{}", String::from_utf8_lossy(l));
        }
    }
}
