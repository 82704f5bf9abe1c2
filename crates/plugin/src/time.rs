//! The calendar, once: civil dates ↔ day counts, RFC 3339 timestamps, the clock. The node's log
//! readers (`node::logs::time`: klog, syslog, Go times) and the API's timestamps (`kube::time`)
//! both build on it, so one date has one arithmetic.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `n` ASCII digits at the start of `b` as a number.
pub fn digits(b: &[u8], n: usize) -> Option<u32> {
    if b.len() < n || !b[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        b[..n]
            .iter()
            .fold(0u32, |a, &c| a * 10 + u32::from(c - b'0')),
    )
}

/// `YYYY-MM-DD?HH:MM:SS[.fraction]` at the start of `b` (`sep_ok` decides the separator), without
/// any zone: (seconds as if UTC, microseconds, length). Fields out of range are `None`.
pub fn date_time(b: &[u8], sep_ok: impl Fn(u8) -> bool) -> Option<(i64, u32, usize)> {
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !sep_ok(b[10]) || b[13] != b':' {
        return None;
    }
    if b[16] != b':' {
        return None;
    }
    let y = i64::from(digits(b, 4)?);
    let mo = digits(&b[5..], 2)?;
    let d = digits(&b[8..], 2)?;
    let h = digits(&b[11..], 2)?;
    let mi = digits(&b[14..], 2)?;
    let s = digits(&b[17..], 2)?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0u32;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale = 100_000u32;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            micros += u32::from(c - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let secs = days_from_civil(y, mo, d) * 86400 + i64::from(h * 3600 + mi * 60 + s);
    Some((secs, micros, i))
}

/// An RFC 3339 timestamp at the start of `b` (`T`, `t` or a space between date and time; `Z` or
/// `±hh:mm`/`±hhmm`): (epoch milliseconds, length).
pub fn parse_rfc3339_prefix(b: &[u8]) -> Option<(i64, usize)> {
    let (secs, micros, mut i) = date_time(b, |c| matches!(c, b'T' | b't' | b' '))?;
    let off = match b.get(i) {
        Some(b'Z' | b'z') => {
            i += 1;
            0
        }
        Some(&c @ (b'+' | b'-')) => {
            let h = i64::from(digits(b.get(i + 1..)?, 2)?);
            let colon = usize::from(b.get(i + 3) == Some(&b':'));
            let m = i64::from(digits(b.get(i + 3 + colon..)?, 2)?);
            i += 5 + colon;
            let o = h * 3600 + m * 60;
            if c == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    Some(((secs - off) * 1000 + i64::from(micros / 1000), i))
}

/// A whole string that is one RFC 3339 timestamp (surrounding blanks allowed), as Unix seconds
/// (fractions dropped): the form the Kubernetes API writes.
pub fn parse_rfc3339_secs(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    match parse_rfc3339_prefix(b)? {
        (ms, n) if n == b.len() => Some(ms.div_euclid(1000)),
        _ => None,
    }
}

fn ymd_hms(secs: i64) -> (i64, u32, u32, i64, i64, i64) {
    let (y, m, d) = civil_from_days(secs.div_euclid(86400));
    let t = secs.rem_euclid(86400);
    (y, m, d, t / 3600, t / 60 % 60, t % 60)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC).
pub fn format_rfc3339(secs: i64) -> String {
    let (y, m, d, h, mi, s) = ymd_hms(secs);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Epoch milliseconds as `2026-07-13 20:27:25Z` (UTC) for output.
pub fn fmt_utc(ms: i64) -> String {
    let (y, m, d, h, mi, s) = ymd_hms(ms.div_euclid(1000));
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}Z")
}

/// Now, epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Now, Unix seconds.
pub fn now_secs() -> i64 {
    now_ms().div_euclid(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        (days_from_civil(y, mo, d) * 86400 + i64::from(h * 3600 + mi * 60 + s)) * 1000
    }

    #[test]
    fn civil_round_trip() {
        for z in [-1000i64, 0, 1, 59, 365, 10_957, 20_000, 30_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
    }

    #[test]
    fn rfc3339_prefixes_of_log_lines() {
        let (t, n) = parse_rfc3339_prefix(b"2026-07-13T20:27:25.123456+10:00 host x").unwrap();
        assert_eq!(t, utc(2026, 7, 13, 10, 27, 25) + 123);
        assert_eq!(n, 32);
        let (t, _) = parse_rfc3339_prefix(b"2026-07-13T10:27:25.123456789Z stderr F x").unwrap();
        assert_eq!(t, utc(2026, 7, 13, 10, 27, 25) + 123);
        assert_eq!(parse_rfc3339_prefix(b"2026-07-13T10:27:25+1"), None);
    }

    #[test]
    fn whole_rfc3339_strings_as_the_api_writes_them() {
        assert_eq!(parse_rfc3339_secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_secs("2026-07-12T10:20:30Z"), Some(1783851630));
        assert_eq!(
            parse_rfc3339_secs("2026-07-12T10:20:30.123456Z"),
            Some(1783851630)
        );
        assert_eq!(
            parse_rfc3339_secs("2026-07-12T20:20:30+10:00"),
            Some(1783851630)
        );
        assert_eq!(parse_rfc3339_secs("2000-02-29T00:00:00Z"), Some(951782400));
        for bad in [
            "",
            "2026-07-12",
            "2026-13-01T00:00:00Z",
            "2026-07-12T24:00:00Z",
            "2026-07-12T10:20:30",
            "2026-07-12T10:20:30.Z",
            "x026-07-12T10:20:30Z",
            "2026-07-12T10:20:30Zjunk",
        ] {
            assert_eq!(parse_rfc3339_secs(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for t in [0, 951782400, 1783851630, 4102444799, -86401] {
            assert_eq!(parse_rfc3339_secs(&format_rfc3339(t)), Some(t));
        }
        assert_eq!(format_rfc3339(1783851630), "2026-07-12T10:20:30Z");
        assert_eq!(fmt_utc(1_783_851_630_123), "2026-07-12 10:20:30Z");
    }
}
