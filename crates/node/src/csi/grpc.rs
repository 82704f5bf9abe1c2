//! One unary gRPC call over a connected unix socket: HTTP/2 with prior knowledge (h2c, as
//! grpc-go serves a unix socket), written by hand for the one shape the check needs, with
//! `loona-hpack` decoding the answer's header blocks (Huffman, static and dynamic table).
//!
//! Sent, in one write: the connection preface, our SETTINGS (push off, a small header list),
//! a HEADERS frame for stream 1 (`POST`, `:path /pkg.Service/Method`, `content-type:
//! application/grpc`, `te: trailers`, `grpc-timeout`) and one DATA frame with END_STREAM
//! holding the length-prefixed request. Read: frames until stream 1 ends — its response
//! HEADERS, DATA, trailers (`grpc-status`, `grpc-message`) — answering SETTINGS and PING,
//! ignoring WINDOW_UPDATE and other streams, failing on GOAWAY or RST_STREAM.
//!
//! Everything is bounded: each read and write by what is left of the deadline (a server that
//! never answers or drips bytes ends at the deadline), a frame by [`FRAME_MAX`] (our
//! SETTINGS_MAX_FRAME_SIZE, the default), a header block by [`HEADER_BLOCK_MAX`], the message
//! by [`MESSAGE_MAX`], the number of frames by [`FRAMES_MAX`] (a server that floods PINGs or
//! empty frames), the decoder's dynamic table by its default 4096 bytes. Garbage is an error.
//!
//! Why by hand and not `h2` + tokio (+ `tonic`/`prost`): the suite is one static program whose
//! size is watched (bench/README.md); the two async runtimes' worth of code would cost far more
//! than this file plus the HPACK decoder (the measured cost is in `super`'s docs and
//! `docs/checks/check_csi_node_plugins.md`, "Limits").

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The largest frame payload accepted (SETTINGS_MAX_FRAME_SIZE's default, which we keep).
pub const FRAME_MAX: usize = 16_384;
/// The largest header block (HEADERS + CONTINUATIONs) accepted.
pub const HEADER_BLOCK_MAX: usize = 16_384;
/// The largest gRPC message accepted (the answers read here are a few hundred bytes).
pub const MESSAGE_MAX: usize = 64 * 1024;
/// The most frames read in one call before giving up.
pub const FRAMES_MAX: usize = 1024;

/// The longest `grpc-message` kept.
const MESSAGE_TEXT_MAX: usize = 4096;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// How a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No complete answer before the deadline.
    Timeout(String),
    /// The connection failed or closed early.
    Io(String),
    /// The server broke HTTP/2 or gRPC framing, or went past a cap.
    Protocol(String),
    /// A gRPC error status (`grpc-status` not 0).
    Status { code: u32, message: String },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout(s) | CallError::Io(s) | CallError::Protocol(s) => f.write_str(s),
            CallError::Status { code, message } => {
                write!(f, "gRPC status {code} ({})", status_name(*code))?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
        }
    }
}

/// The name of a gRPC status code.
pub fn status_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "unknown code",
    }
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let n = payload.len() as u32;
    out.extend_from_slice(&n.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK literal without indexing, its name from the static table (`index` < 15) or new.
fn literal(out: &mut Vec<u8>, index: u8, name: &str, value: &str) {
    if index > 0 {
        // 0000xxxx with the 4-bit prefix; all the indexes used are below 15.
        out.push(index);
    } else {
        out.push(0);
        hpack_string(out, name);
    }
    hpack_string(out, value);
}

fn hpack_string(out: &mut Vec<u8>, s: &str) {
    // Plain (no Huffman), 7-bit prefixed length.
    let n = s.len();
    if n < 127 {
        out.push(n as u8);
    } else {
        out.push(127);
        let mut rest = n - 127;
        while rest >= 128 {
            out.push((rest % 128) as u8 | 0x80);
            rest /= 128;
        }
        out.push(rest as u8);
    }
    out.extend_from_slice(s.as_bytes());
}

/// The bytes of a call: preface, SETTINGS, HEADERS, DATA.
pub fn request_bytes(path: &str, message: &[u8], timeout: Duration) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + message.len());
    out.extend_from_slice(PREFACE);
    // SETTINGS_ENABLE_PUSH (2) = 0, SETTINGS_MAX_HEADER_LIST_SIZE (6) = 16 KiB.
    let mut s = Vec::new();
    s.extend_from_slice(&[0, 2, 0, 0, 0, 0]);
    s.extend_from_slice(&[0, 6]);
    s.extend_from_slice(&(HEADER_BLOCK_MAX as u32).to_be_bytes());
    frame(&mut out, SETTINGS, 0, 0, &s);
    let mut h = vec![0x83, 0x86]; // :method POST, :scheme http (static 3, 6)
    literal(&mut h, 4, "", path); // :path
    literal(&mut h, 1, "", "localhost"); // :authority
    literal(&mut h, 0, "content-type", "application/grpc");
    literal(&mut h, 0, "te", "trailers");
    // grpc-timeout: at most 8 digits, in milliseconds.
    let ms = timeout.as_millis().clamp(1, 99_999_999);
    literal(&mut h, 0, "grpc-timeout", &format!("{ms}m"));
    frame(&mut out, HEADERS, END_HEADERS, 1, &h);
    let mut d = Vec::with_capacity(5 + message.len());
    d.push(0);
    d.extend_from_slice(&(message.len() as u32).to_be_bytes());
    d.extend_from_slice(message);
    frame(&mut out, DATA, END_STREAM, 1, &d);
    out
}

struct Conn<'a> {
    s: &'a mut UnixStream,
    deadline: Instant,
    what: &'a str,
}

impl Conn<'_> {
    fn left(&self) -> Result<Duration, CallError> {
        let left = plugin::deadline::remaining(self.deadline);
        if left.is_zero() {
            Err(self.timeout())
        } else {
            Ok(left)
        }
    }

    fn timeout(&self) -> CallError {
        CallError::Timeout(format!("{}: no answer in time", self.what))
    }

    fn io(&self, e: std::io::Error) -> CallError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => self.timeout(),
            std::io::ErrorKind::UnexpectedEof => CallError::Io(format!(
                "{}: the server closed the connection before answering",
                self.what
            )),
            _ => CallError::Io(format!("{}: {}", self.what, plugin::errtext(&e))),
        }
    }

    fn write_all(&mut self, b: &[u8]) -> Result<(), CallError> {
        let mut done = 0;
        while done < b.len() {
            let left = self.left()?;
            self.s
                .set_write_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.s.write(&b[done..]) {
                Ok(0) => return Err(self.io(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        Ok(())
    }

    fn read_exact(&mut self, b: &mut [u8]) -> Result<(), CallError> {
        let mut done = 0;
        while done < b.len() {
            let left = self.left()?;
            self.s
                .set_read_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.s.read(&mut b[done..]) {
                Ok(0) => return Err(self.io(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        Ok(())
    }
}

/// The payload of a frame without its padding (and priority fields of HEADERS).
fn unpad(flags: u8, kind: u8, p: &[u8]) -> Result<&[u8], String> {
    let mut p = p;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        let (&n, rest) = p
            .split_first()
            .ok_or("PADDED frame without its pad length")?;
        pad = n as usize;
        p = rest;
    }
    if kind == HEADERS && flags & PRIORITY != 0 {
        if p.len() < 5 {
            return Err("HEADERS frame too short for its priority fields".into());
        }
        p = &p[5..];
    }
    if pad > p.len() {
        return Err("padding longer than the frame".into());
    }
    Ok(&p[..p.len() - pad])
}

/// `grpc-message` is percent-encoded.
fn percent_decode(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            let hex = std::str::from_utf8(&s[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out[..out.len().min(MESSAGE_TEXT_MAX)]).into_owned()
}

/// Call `path` (`/package.Service/Method`) with `message` on the connected `stream` and return
/// the answer's message, all before `deadline`. `what` names the call in errors.
pub fn unary(
    stream: &mut UnixStream,
    path: &str,
    message: &[u8],
    deadline: Instant,
    what: &str,
) -> Result<Vec<u8>, CallError> {
    let mut c = Conn {
        s: stream,
        deadline,
        what,
    };
    let timeout = c.left()?;
    c.write_all(&request_bytes(path, message, timeout))?;

    let mut decoder = loona_hpack::Decoder::new();
    decoder.set_max_allowed_table_size(4096);
    let mut block: Vec<u8> = Vec::new();
    let mut block_ends_stream = false;
    let mut in_block = false;
    let mut headers_seen = 0usize;
    let mut status: Option<u32> = None;
    let mut grpc_message = String::new();
    let mut http_status: Option<String> = None;
    let mut body: Vec<u8> = Vec::new();
    let proto = |s: String| CallError::Protocol(format!("{what}: {s}"));

    for _ in 0..FRAMES_MAX {
        let mut head = [0u8; 9];
        c.read_exact(&mut head)?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let sid = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if len > FRAME_MAX {
            return Err(proto(format!(
                "a frame of {len} bytes, past the {FRAME_MAX} we allow (not a gRPC server?)"
            )));
        }
        let mut payload = vec![0u8; len];
        c.read_exact(&mut payload)?;
        if in_block && kind != CONTINUATION {
            return Err(proto("a header block interrupted by another frame".into()));
        }
        match kind {
            SETTINGS => {
                if sid != 0 || !len.is_multiple_of(6) {
                    return Err(proto("malformed SETTINGS frame".into()));
                }
                if flags & ACK == 0 {
                    let mut ack = Vec::new();
                    frame(&mut ack, SETTINGS, ACK, 0, &[]);
                    c.write_all(&ack)?;
                }
            }
            PING => {
                if len != 8 {
                    return Err(proto("malformed PING frame".into()));
                }
                if flags & ACK == 0 {
                    let mut ack = Vec::new();
                    frame(&mut ack, PING, ACK, 0, &payload);
                    c.write_all(&ack)?;
                }
            }
            GOAWAY => {
                let debug = payload
                    .get(8..)
                    .map(|d| String::from_utf8_lossy(&d[..d.len().min(256)]).into_owned());
                let code = payload
                    .get(4..8)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                let last = payload
                    .get(0..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff);
                // GOAWAY with last stream ≥ 1 still lets stream 1 finish.
                if last.unwrap_or(0) < 1 {
                    return Err(CallError::Io(format!(
                        "{what}: the server sent GOAWAY (error code {}){}",
                        code.unwrap_or(0),
                        debug
                            .filter(|d| !d.is_empty())
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    )));
                }
            }
            RST_STREAM if sid == 1 => {
                let code = payload
                    .get(0..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                return Err(CallError::Io(format!(
                    "{what}: the server reset the stream (HTTP/2 error code {})",
                    code.unwrap_or(0)
                )));
            }
            PUSH_PROMISE => return Err(proto("PUSH_PROMISE although push is off".into())),
            HEADERS if sid == 1 => {
                let frag = unpad(flags, kind, &payload).map_err(proto)?;
                block.clear();
                block.extend_from_slice(frag);
                block_ends_stream = flags & END_STREAM != 0;
                in_block = flags & END_HEADERS == 0;
            }
            CONTINUATION => {
                if !in_block || sid != 1 {
                    return Err(proto("CONTINUATION without a header block".into()));
                }
                if block.len() + payload.len() > HEADER_BLOCK_MAX {
                    return Err(proto(format!(
                        "a header block past {HEADER_BLOCK_MAX} bytes"
                    )));
                }
                block.extend_from_slice(&payload);
                in_block = flags & END_HEADERS == 0;
            }
            DATA if sid == 1 => {
                if headers_seen == 0 {
                    return Err(proto("DATA before the response headers".into()));
                }
                let d = unpad(flags, kind, &payload).map_err(proto)?;
                if body.len() + d.len() > MESSAGE_MAX + 5 {
                    return Err(proto(format!("an answer past {MESSAGE_MAX} bytes")));
                }
                body.extend_from_slice(d);
                if flags & END_STREAM != 0 {
                    return Err(proto(
                        "the stream ended without trailers (no grpc-status)".into(),
                    ));
                }
            }
            _ => {} // WINDOW_UPDATE, PRIORITY, other streams, unknown types: ignored.
        }
        if ((kind == HEADERS && sid == 1) || kind == CONTINUATION) && !in_block {
            headers_seen += 1;
            let mut bad: Option<String> = None;
            let res = decoder.decode_with_cb(
                &block,
                |n: std::borrow::Cow<[u8]>, v: std::borrow::Cow<[u8]>| match &*n {
                    b":status" => http_status = Some(String::from_utf8_lossy(&v).into_owned()),
                    b"grpc-status" => {
                        status = std::str::from_utf8(&v)
                            .ok()
                            .and_then(|s| s.trim().parse().ok());
                        if status.is_none() {
                            bad = Some("an unreadable grpc-status".into());
                        }
                    }
                    b"grpc-message" => grpc_message = percent_decode(&v),
                    b"content-type" if headers_seen == 1 && !v.starts_with(b"application/grpc") => {
                        bad = Some(format!(
                            "content-type {:?}, not application/grpc",
                            String::from_utf8_lossy(&v[..v.len().min(64)])
                        ));
                    }
                    _ => {}
                },
            );
            if let Err(e) = res {
                return Err(proto(format!("undecodable header block ({e:?})")));
            }
            if headers_seen == 1 {
                match http_status.as_deref() {
                    Some("200") => {}
                    Some(s) => return Err(proto(format!("HTTP status {s}, not 200"))),
                    None => return Err(proto("no :status in the response headers".into())),
                }
            }
            if let Some(b) = bad {
                return Err(proto(b));
            }
            if block_ends_stream {
                return finish(status, grpc_message, body, what);
            }
            if headers_seen > 1 {
                return Err(proto("a second header block without END_STREAM".into()));
            }
        }
    }
    Err(proto(format!("no answer after {FRAMES_MAX} frames")))
}

fn finish(
    status: Option<u32>,
    message: String,
    body: Vec<u8>,
    what: &str,
) -> Result<Vec<u8>, CallError> {
    match status {
        None => Err(CallError::Protocol(format!(
            "{what}: trailers without grpc-status"
        ))),
        Some(0) => {
            if body.len() < 5 {
                return Err(CallError::Protocol(format!(
                    "{what}: status OK but no message"
                )));
            }
            if body[0] != 0 {
                return Err(CallError::Protocol(format!(
                    "{what}: a compressed message (we asked for none)"
                )));
            }
            let n = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            if n != body.len() - 5 {
                return Err(CallError::Protocol(format!(
                    "{what}: the message says {n} bytes, {} came",
                    body.len() - 5
                )));
            }
            Ok(body[5..].to_vec())
        }
        Some(code) => Err(CallError::Status { code, message }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_well_formed() {
        let b = request_bytes("/csi.v1.Identity/Probe", &[], Duration::from_secs(3));
        assert!(b.starts_with(PREFACE));
        // Decode our own HEADERS with the same decoder the answers go through.
        let mut i = PREFACE.len();
        let mut headers = Vec::new();
        while i < b.len() {
            let len = u32::from_be_bytes([0, b[i], b[i + 1], b[i + 2]]) as usize;
            let kind = b[i + 3];
            if kind == HEADERS {
                headers = loona_hpack::Decoder::new()
                    .decode(&b[i + 9..i + 9 + len])
                    .unwrap();
            }
            i += 9 + len;
        }
        assert_eq!(i, b.len());
        let h: Vec<(String, String)> = headers
            .into_iter()
            .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect();
        assert!(
            h.contains(&(":path".into(), "/csi.v1.Identity/Probe".into())),
            "{h:?}"
        );
        assert!(h.contains(&(":method".into(), "POST".into())));
        assert!(h.contains(&("te".into(), "trailers".into())));
        assert!(h.contains(&("grpc-timeout".into(), "3000m".into())));
    }

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(percent_decode(b"a%20b%"), "a b%");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
    }

    #[test]
    fn padding_rules() {
        assert_eq!(unpad(PADDED, DATA, &[2, 7, 0, 0]).unwrap(), &[7]);
        assert!(unpad(PADDED, DATA, &[5, 7]).is_err());
        assert!(unpad(PADDED, DATA, &[]).is_err());
        assert!(unpad(PRIORITY, HEADERS, &[1, 2]).is_err());
    }
}
