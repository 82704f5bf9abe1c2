//! RFC 3339 timestamps as the API writes them (`2026-07-12T10:20:30Z`, `…30.123456Z`,
//! `…30+10:00`), as Unix seconds. No calendar crate needed for this one format.

use serde::{Deserialize, Deserializer};

/// Seconds since the Unix epoch (UTC).
pub type Time = i64;

/// Parse an RFC 3339 timestamp to Unix seconds (fractions dropped).
pub fn parse_rfc3339(s: &str) -> Option<Time> {
    let b = s.trim().as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = std::str::from_utf8(b.get(r)?).ok()?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let o = oh * 3600 + om * 60;
            if *c == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Format Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (for test fixtures and messages).
pub fn format_rfc3339(t: Time) -> String {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Unix seconds now.
pub fn now() -> Time {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// serde helper: an optional timestamp; null, empty or unparsable → None (tolerant by design:
/// one odd object must not fail a whole list).
pub fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    let s: Option<std::borrow::Cow<'de, str>> = Option::deserialize(d)?;
    Ok(s.and_then(|s| parse_rfc3339(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_api_forms() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2026-07-12T10:20:30Z"), Some(1783851630));
        assert_eq!(
            parse_rfc3339("2026-07-12T10:20:30.123456Z"),
            Some(1783851630)
        );
        assert_eq!(parse_rfc3339("2026-07-12T20:20:30+10:00"), Some(1783851630));
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951782400));
        for bad in [
            "",
            "2026-07-12",
            "2026-13-01T00:00:00Z",
            "2026-07-12T10:20:30",
            "x026-07-12T10:20:30Z",
            "2026-07-12T10:20:30Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for t in [0, 951782400, 1783851630, 4102444799] {
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t));
        }
        assert_eq!(format_rfc3339(1783851630), "2026-07-12T10:20:30Z");
    }
}
