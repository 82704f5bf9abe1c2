//! Timestamps as the kubelet and syslog write them. All results are epoch milliseconds (UTC).
//!
//! - klog header `E0713 20:27:25.123456    2166 file.go:348] ` and syslog `Jul 13 20:27:25 `:
//!   local time without a year. The year is inferred from "now": the latest year that does not
//!   put the line more than a day in the future (so Dec 31 lines read on Jan 1 land in the old year).
//! - Go `time.Time` `%v`: `2025-02-07 10:17:53.799902973 +0800 CST m=+8812235.2`.
//! - Go durations `2m2s`, `500ms`, `1h0m0s`.
//! - RFC 3339 prefixes `2026-07-13T20:27:25.123456+10:00` (rsyslog, CRI logs).
//!
//! The calendar itself (civil dates, RFC 3339, the clock) is `plugin::time`, shared with `kube`.

pub use plugin::time::{
    civil_from_days, days_from_civil, fmt_utc, now_ms, parse_rfc3339_prefix as parse_rfc3339,
};
use plugin::time::{date_time, digits};

/// The local time zone: its UTC offset in seconds at an instant.
pub trait Tz {
    fn offset_at(&self, utc_secs: i64) -> i64;
}

/// A fixed offset (tests, `--tz`-less containers that log in UTC).
pub struct FixedTz(pub i64);
impl Tz for FixedTz {
    fn offset_at(&self, _: i64) -> i64 {
        self.0
    }
}

/// The process's local zone (`TZ`, `/etc/localtime`) through `localtime_r`.
pub struct SystemTz;

#[allow(deprecated)] // musl's time_t alias: see SystemTz::offset_at
const _: () = assert!(std::mem::size_of::<libc::time_t>() == std::mem::size_of::<i64>());
impl Tz for SystemTz {
    fn offset_at(&self, utc_secs: i64) -> i64 {
        // time_t is 64-bit on every target this builds for (x86_64 glibc and musl); libc marks
        // the musl alias deprecated over 32-bit targets' change, so it is not named here.
        let t: i64 = utc_secs;
        // SAFETY: libc::tm is integers and one pointer (tm_zone); all-zero is a valid value of
        // each (a null tm_zone is never read here).
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: localtime_r reads one time_t (64-bit here, as `t`) and writes into the tm we
        // own; both pointers are valid.
        let r = unsafe { libc::localtime_r((&raw const t).cast(), &raw mut tm) };
        if r.is_null() {
            0
        } else {
            tm.tm_gmtoff
        }
    }
}

/// A local wall-clock time without a year.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YearlessLocal {
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    pub micros: u32,
}

fn local_to_utc_ms(y: i64, t: &YearlessLocal, tz: &dyn Tz) -> i64 {
    let local_secs =
        days_from_civil(y, t.month, t.day) * 86400 + i64::from(t.hour * 3600 + t.min * 60 + t.sec);
    // Two passes settle the offset across DST changes.
    let off1 = tz.offset_at(local_secs);
    let off2 = tz.offset_at(local_secs - off1);
    (local_secs - off2) * 1000 + i64::from(t.micros / 1000)
}

/// Place a yearless local time in the year that makes sense at `now_ms`: the current local year,
/// or the previous one when that would put the line more than a day in the future.
pub fn infer_year(t: &YearlessLocal, now_ms: i64, tz: &dyn Tz) -> i64 {
    let now_secs = now_ms.div_euclid(1000);
    let local_now = now_secs + tz.offset_at(now_secs);
    let (year, _, _) = civil_from_days(local_now.div_euclid(86400));
    let this = local_to_utc_ms(year, t, tz);
    if this > now_ms + 86_400_000 {
        local_to_utc_ms(year - 1, t, tz)
    } else {
        this
    }
}

/// A klog header `Lmmdd hh:mm:ss.uuuuuu threadid file:line] ` found at `pos` in `line`.
#[derive(Debug, Clone, PartialEq)]
pub struct KlogHeader {
    pub level: u8,
    pub time: YearlessLocal,
    /// Offset of the message text after `] `.
    pub msg_start: usize,
}

fn klog_at(line: &[u8], i: usize) -> Option<KlogHeader> {
    let b = &line[i..];
    if b.len() < 22 || !matches!(b[0], b'I' | b'W' | b'E' | b'F') {
        return None;
    }
    let month = digits(&b[1..], 2)?;
    let day = digits(&b[3..], 2)?;
    if b[5] != b' ' || b[8] != b':' || b[11] != b':' || b[14] != b'.' {
        return None;
    }
    let hour = digits(&b[6..], 2)?;
    let min = digits(&b[9..], 2)?;
    let sec = digits(&b[12..], 2)?;
    let micros = digits(&b[15..], 6)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    // Then spaces, a thread id, a space, `file:line]`.
    let rest = &b[21..];
    let close = memchr::memchr(b']', rest)?;
    if close > 120 {
        return None;
    }
    let msg_start = i + 21 + close + 1 + usize::from(rest.get(close + 1) == Some(&b' '));
    Some(KlogHeader {
        level: b[0],
        time: YearlessLocal {
            month,
            day,
            hour,
            min,
            sec,
            micros,
        },
        msg_start,
    })
}

/// Find the klog header in a line: at its start, or behind a syslog/journal/CRI prefix (searched
/// in the first 200 bytes).
pub fn find_klog_header(line: &[u8]) -> Option<KlogHeader> {
    let lim = line.len().min(200);
    (0..lim).find_map(|i| {
        if i == 0 || line[i - 1] == b' ' || line[i - 1] == b'"' {
            klog_at(line, i)
        } else {
            None
        }
    })
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// A classic syslog prefix `Jul 13 20:27:25 ` (day space-padded) at the start of a line.
pub fn syslog_prefix(line: &[u8]) -> Option<YearlessLocal> {
    if line.len() < 16 {
        return None;
    }
    let month = MONTHS.iter().position(|m| &line[..3] == *m)? as u32 + 1;
    let day_s = &line[4..6];
    let day = if day_s[0] == b' ' {
        digits(&day_s[1..], 1)?
    } else {
        digits(day_s, 2)?
    };
    if line[3] != b' ' || line[6] != b' ' || line[9] != b':' || line[12] != b':' {
        return None;
    }
    Some(YearlessLocal {
        month,
        day,
        hour: digits(&line[7..], 2)?,
        min: digits(&line[10..], 2)?,
        sec: digits(&line[13..], 2)?,
        micros: 0,
    })
}

/// Go's `time.Time.String()`: `2025-02-07 10:17:53.799902973 +0800 CST m=+8812235.2`.
pub fn parse_go_time(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let (secs, micros, i) = date_time(b, |c| c == b' ')?;
    let rest = b.get(i..)?;
    if rest.len() < 6 || rest[0] != b' ' || !matches!(rest[1], b'+' | b'-') {
        return None;
    }
    let h = i64::from(digits(&rest[2..], 2)?);
    let m = i64::from(digits(&rest[4..], 2)?);
    let off = (h * 3600 + m * 60) * if rest[1] == b'-' { -1 } else { 1 };
    Some((secs - off) * 1000 + i64::from(micros / 1000))
}

/// Go's `time.Duration.String()`: `2m2s`, `500ms`, `1h0m0s`, `1.5s`, `750µs` → milliseconds.
pub fn parse_go_duration(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0s" || s == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let n_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if n_len == 0 {
            return None;
        }
        let n: f64 = rest[..n_len].parse().ok()?;
        rest = &rest[n_len..];
        let u_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..u_len] {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1000.0,
            "ms" => 1.0,
            "us" | "µs" | "μs" => 0.001,
            "ns" => 0.000_001,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[u_len..];
    }
    Some(total.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        (days_from_civil(y, mo, d) * 86400 + i64::from(h * 3600 + mi * 60 + s)) * 1000
    }

    #[test]
    fn klog_header_bare_and_prefixed() {
        let l = b"E0713 20:27:25.123456    2166 nestedpendingoperations.go:348] Operation for";
        let h = find_klog_header(l).unwrap();
        assert_eq!(h.level, b'E');
        assert_eq!((h.time.month, h.time.day, h.time.hour), (7, 13, 20));
        assert_eq!(h.time.micros, 123456);
        assert!(l[h.msg_start..].starts_with(b"Operation for"));
        let l = b"Jul 13 20:27:25 k8s03 microk8s.daemon-kubelite[2166]: E0713 20:27:25.123456 2166 x.go:1] msg";
        let h = find_klog_header(l).unwrap();
        assert_eq!(&l[h.msg_start..], b"msg");
        assert!(find_klog_header(b"Everything 0713 is fine").is_none());
    }

    #[test]
    fn year_boundary_new_year() {
        // now = 2027-01-01 00:05 UTC; a line from Dec 31 23:58 belongs to 2026.
        let now = utc(2027, 1, 1, 0, 5, 0);
        let t = YearlessLocal {
            month: 12,
            day: 31,
            hour: 23,
            min: 58,
            sec: 0,
            micros: 0,
        };
        assert_eq!(
            infer_year(&t, now, &FixedTz(0)),
            utc(2026, 12, 31, 23, 58, 0)
        );
        // A line from Jan 1 00:04 stays in 2027.
        let t2 = YearlessLocal {
            month: 1,
            day: 1,
            hour: 0,
            min: 4,
            ..t
        };
        assert_eq!(infer_year(&t2, now, &FixedTz(0)), utc(2027, 1, 1, 0, 4, 0));
        // With a local zone of +10:00: local Jan 1 00:05 is Dec 31 14:05 UTC.
        let now = utc(2026, 12, 31, 14, 5, 0);
        assert_eq!(
            infer_year(&t, now, &FixedTz(36000)),
            utc(2026, 12, 31, 13, 58, 0)
        );
    }

    #[test]
    fn go_time_and_duration() {
        let t = parse_go_time("2025-02-07 10:17:53.799902973 +0800 CST m=+8812235.211760637");
        assert_eq!(t, Some(utc(2025, 2, 7, 2, 17, 53) + 799));
        let t = parse_go_time("2017-04-28 11:41:17.039803969 +0000 UTC");
        assert_eq!(t, Some(utc(2017, 4, 28, 11, 41, 17) + 39));
        assert_eq!(parse_go_duration("2m2s"), Some(122_000));
        assert_eq!(parse_go_duration("500ms"), Some(500));
        assert_eq!(parse_go_duration("1m4s"), Some(64_000));
        assert_eq!(parse_go_duration("2m0s"), Some(120_000));
        assert_eq!(parse_go_duration("1h0m0s"), Some(3_600_000));
        assert_eq!(parse_go_duration("soon"), None);
    }

    #[test]
    fn rfc3339_and_syslog() {
        let (t, n) = parse_rfc3339(b"2026-07-13T20:27:25.123456+10:00 host x").unwrap();
        assert_eq!(t, utc(2026, 7, 13, 10, 27, 25) + 123);
        assert_eq!(n, 32);
        let (t, _) = parse_rfc3339(b"2026-07-13T10:27:25.123456789Z stderr F x").unwrap();
        assert_eq!(t, utc(2026, 7, 13, 10, 27, 25) + 123);
        let s = syslog_prefix(b"Jul  3 20:27:25 host kubelet[1]: x").unwrap();
        assert_eq!((s.month, s.day, s.hour, s.sec), (7, 3, 20, 25));
    }
}
