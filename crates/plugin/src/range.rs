//! Threshold ranges and durations, as the monitoring-plugins development guidelines define them.
//!
//! | range    | alert when value is        |
//! |----------|----------------------------|
//! | `10`     | < 0 or > 10                |
//! | `10:`    | < 10                       |
//! | `~:10`   | > 10                       |
//! | `10:20`  | < 10 or > 20               |
//! | `@10:20` | ≥ 10 and ≤ 20              |
//!
//! Ends are inclusive. A range may also be written with durations (`5m`, `~:2h`) where the check
//! says its thresholds are durations; the values are then seconds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("empty {0}")]
    Empty(&'static str),
    #[error("invalid range '{0}': {1}")]
    Range(String, &'static str),
    #[error("invalid duration '{0}': use a number with an optional unit s, m, h or d (e.g. 90, 90s, 15m, 2h, 1d)")]
    Duration(String),
}

/// A threshold range. `start`/`end` are inclusive; `None` means unbounded (`~` or an empty end).
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub start: Option<f64>,
    pub end: Option<f64>,
    /// `@` prefix: alert when the value is inside the range.
    pub inside: bool,
    /// The text the user gave, normalised, as it appears in perfdata.
    text: String,
}

impl Range {
    /// Parse a numeric range.
    pub fn parse(s: &str) -> Result<Range, ParseError> {
        Self::parse_with(s, parse_number)
    }

    /// Parse a range whose ends are durations (`5m`, `10m:`, `@1h:2h`); values are seconds.
    pub fn parse_duration(s: &str) -> Result<Range, ParseError> {
        // A negative bound (`-10:-2`, the form monitoring-plugins' own tests use) is a negative
        // number of seconds: no age is below it, so such a range always alerts, as it would on
        // a plain number.
        Self::parse_with(s, |v| match v.strip_prefix('-') {
            Some(r) => parse_duration(r).ok().map(|d| -d.as_secs_f64()),
            None => parse_duration(v).ok().map(|d| d.as_secs_f64()),
        })
    }

    fn parse_with(s: &str, num: impl Fn(&str) -> Option<f64>) -> Result<Range, ParseError> {
        let orig = s.trim();
        if orig.is_empty() {
            return Err(ParseError::Empty("range"));
        }
        let bad = |why| ParseError::Range(orig.to_string(), why);
        let (inside, body) = match orig.strip_prefix('@') {
            Some(rest) => (true, rest),
            None => (false, orig),
        };
        if body.is_empty() {
            return Err(bad("nothing after '@'"));
        }
        let (start, end) = match body.split_once(':') {
            None => {
                let end = num(body).ok_or_else(|| bad("not a number"))?;
                (Some(0.0), Some(end))
            }
            Some((a, b)) => {
                if b.contains(':') {
                    return Err(bad("more than one ':'"));
                }
                let start = if a == "~" {
                    None
                } else if a.is_empty() {
                    Some(0.0)
                } else {
                    Some(num(a).ok_or_else(|| bad("start is not a number"))?)
                };
                let end = if b.is_empty() {
                    None
                } else {
                    Some(num(b).ok_or_else(|| bad("end is not a number"))?)
                };
                (start, end)
            }
        };
        if let (Some(a), Some(b)) = (start, end) {
            if a > b {
                return Err(bad("start is greater than end"));
            }
        }
        let text = render_range(start, end, inside);
        Ok(Range {
            start,
            end,
            inside,
            text,
        })
    }

    /// A range that alerts when the value is above `n` (`n` alone: outside 0..n).
    pub fn above(n: f64) -> Range {
        Range {
            start: Some(0.0),
            end: Some(n),
            inside: false,
            text: render_range(Some(0.0), Some(n), false),
        }
    }

    /// True when `value` raises an alert for this range.
    pub fn alerts(&self, value: f64) -> bool {
        if value.is_nan() {
            return true;
        }
        let below = self.start.is_some_and(|s| value < s);
        let above = self.end.is_some_and(|e| value > e);
        let outside = below || above;
        if self.inside {
            !outside
        } else {
            outside
        }
    }
}

fn render_range(start: Option<f64>, end: Option<f64>, inside: bool) -> String {
    let mut s = String::new();
    if inside {
        s.push('@');
    }
    match (start, end) {
        (Some(a), Some(b)) if a == 0.0 && !inside => s.push_str(&fmt_num(b)),
        (Some(a), Some(b)) => s.push_str(&format!("{}:{}", fmt_num(a), fmt_num(b))),
        (Some(a), None) => s.push_str(&format!("{}:", fmt_num(a))),
        (None, Some(b)) => s.push_str(&format!("~:{}", fmt_num(b))),
        (None, None) => s.push_str("~:"),
    }
    s
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Range {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Range::parse(s)
    }
}

/// Warning and critical ranges together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds {
    pub warning: Option<Range>,
    pub critical: Option<Range>,
}

impl Thresholds {
    pub fn new(warning: Option<Range>, critical: Option<Range>) -> Self {
        Thresholds { warning, critical }
    }

    /// CRITICAL if the critical range alerts, else WARNING if the warning range alerts, else OK.
    pub fn evaluate(&self, value: f64) -> crate::Status {
        if self.critical.as_ref().is_some_and(|r| r.alerts(value)) {
            crate::Status::Critical
        } else if self.warning.as_ref().is_some_and(|r| r.alerts(value)) {
            crate::Status::Warning
        } else {
            crate::Status::Ok
        }
    }
}

/// Longest plain-notation number [`fmt_num`] writes.
pub const PLAIN_MAX: usize = 24;

fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("nan") || s.to_ascii_lowercase().contains("inf") {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Format a number in C locale: the shortest text that reads back as the same value, in plain
/// notation (Rust's `Display` for `f64`) so perfdata shows exactly the threshold in force; a value
/// whose plain text would be longer than [`PLAIN_MAX`] characters (`1e300` is 301 digits) is
/// written in exponent notation (`1e300`, `1e-300`), which reads back as the same value too.
pub fn fmt_num(v: f64) -> String {
    if v.is_finite() {
        let plain = format!("{v}");
        if plain.len() > PLAIN_MAX {
            format!("{v:e}")
        } else {
            plain
        }
    } else {
        // Never reached through the public API (parse rejects non-finite numbers).
        "0".to_string()
    }
}

/// Parse a duration: `90`, `90s`, `15m`, `2h`, `1d`, compounds like `2m2s` or `1h30m`, decimals `1.5h`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let orig = s.trim();
    if orig.is_empty() {
        return Err(ParseError::Empty("duration"));
    }
    let bad = || ParseError::Duration(orig.to_string());
    let mut total = 0f64;
    let mut rest = orig;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "" if num_len == orig.len() => 1.0,
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += n * mult;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

/// Render a byte count for people, in binary units: `512 B`, `64 KiB`, `16 MiB`, `1.5 GiB`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{} {}", v as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Render a duration for people: `41m`, `2m2s`, `14d3h`, `850ms`.
pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        let ms = d.as_millis();
        return if ms == 0 {
            "0s".into()
        } else {
            format!("{ms}ms")
        };
    }
    let (days, h, m, s) = (
        secs / 86400,
        (secs % 86400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    );
    let mut out = String::new();
    let parts = [(days, "d"), (h, "h"), (m, "m"), (s, "s")];
    let mut shown = 0;
    for (v, u) in parts {
        if v > 0 || (shown > 0 && shown < 2) {
            if v > 0 {
                out.push_str(&format!("{v}{u}"));
            }
            shown += 1;
            if shown == 2 {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_for_people() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(64 << 10), "64 KiB");
        assert_eq!(fmt_bytes(16 << 20), "16 MiB");
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
    }

    use super::*;

    fn r(s: &str) -> Range {
        Range::parse(s).unwrap()
    }

    // The guidelines' table, row by row, with both edges of each range.
    #[test]
    fn plain_number_alerts_outside_zero_to_n() {
        let x = r("10");
        assert!(x.alerts(-0.1));
        assert!(!x.alerts(0.0));
        assert!(!x.alerts(10.0));
        assert!(x.alerts(10.01));
    }

    #[test]
    fn open_end_alerts_below_start() {
        let x = r("10:");
        assert!(x.alerts(9.99));
        assert!(!x.alerts(10.0));
        assert!(!x.alerts(1e12));
    }

    #[test]
    fn tilde_start_alerts_above_end() {
        let x = r("~:10");
        assert!(!x.alerts(-1e12));
        assert!(!x.alerts(10.0));
        assert!(x.alerts(10.5));
    }

    #[test]
    fn closed_range_alerts_outside() {
        let x = r("10:20");
        assert!(x.alerts(9.0));
        assert!(!x.alerts(10.0));
        assert!(!x.alerts(20.0));
        assert!(x.alerts(21.0));
    }

    #[test]
    fn at_sign_alerts_inside_inclusive() {
        let x = r("@10:20");
        assert!(!x.alerts(9.99));
        assert!(x.alerts(10.0));
        assert!(x.alerts(15.0));
        assert!(x.alerts(20.0));
        assert!(!x.alerts(20.01));
    }

    #[test]
    fn zero_means_any_positive_value_alerts() {
        let x = r("0");
        assert!(!x.alerts(0.0));
        assert!(x.alerts(1.0));
    }

    #[test]
    fn decimals_and_negatives() {
        let x = r("-5.5:5.5");
        assert!(x.alerts(-5.6));
        assert!(!x.alerts(-5.5));
        assert!(!x.alerts(5.5));
        assert!(x.alerts(5.51));
        assert!(r("@0.5").alerts(0.25));
    }

    #[test]
    fn empty_start_means_zero() {
        let x = r(":10");
        assert!(x.alerts(-1.0));
        assert!(!x.alerts(5.0));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "@", "abc", "10:5", "1:2:3", "~", "x:1", "1:x", "nan", "inf", "1e400",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn nan_value_always_alerts() {
        assert!(r("10").alerts(f64::NAN));
    }

    #[test]
    fn renders_normalised_for_perfdata() {
        assert_eq!(r("10").to_string(), "10");
        assert_eq!(r("10:").to_string(), "10:");
        assert_eq!(r("~:10").to_string(), "~:10");
        assert_eq!(r("@10:20").to_string(), "@10:20");
        assert_eq!(r("0.50:1").to_string(), "0.5:1");
    }

    #[test]
    fn duration_ranges_are_seconds() {
        let x = Range::parse_duration("5m").unwrap();
        assert_eq!(x.end, Some(300.0));
        assert!(x.alerts(301.0));
        assert!(!x.alerts(300.0));
        let y = Range::parse_duration("@1h:2h").unwrap();
        assert!(y.alerts(3600.0));
        assert!(Range::parse_duration("5q").is_err());
    }

    #[test]
    fn thresholds_critical_wins() {
        let t = Thresholds::new(Some(r("1")), Some(r("5")));
        assert_eq!(t.evaluate(0.0), crate::Status::Ok);
        assert_eq!(t.evaluate(2.0), crate::Status::Warning);
        assert_eq!(t.evaluate(6.0), crate::Status::Critical);
        assert_eq!(Thresholds::default().evaluate(1e9), crate::Status::Ok);
    }

    #[test]
    fn durations() {
        let d = |s| parse_duration(s).unwrap().as_secs_f64();
        assert_eq!(d("90"), 90.0);
        assert_eq!(d("90s"), 90.0);
        assert_eq!(d("15m"), 900.0);
        assert_eq!(d("2h"), 7200.0);
        assert_eq!(d("1d"), 86400.0);
        assert_eq!(d("2m2s"), 122.0);
        assert_eq!(d("1.5h"), 5400.0);
        assert_eq!(d("500ms"), 0.5);
        for bad in ["", "m", "10x", "-5", "5 m", "1e3", "10mm"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn human_durations() {
        assert_eq!(fmt_duration(Duration::from_secs(122)), "2m2s");
        assert_eq!(fmt_duration(Duration::from_mins(41)), "41m");
        assert_eq!(
            fmt_duration(Duration::from_secs(14 * 86400 + 3 * 3600 + 5)),
            "14d3h"
        );
        assert_eq!(fmt_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(fmt_duration(Duration::from_hours(1)), "1h");
    }

    #[test]
    fn rendered_range_reads_back_exactly() {
        // Found by fuzzing (fuzz/FINDINGS.md): 6 fixed decimals changed the threshold in perfdata.
        let x = r("8000080.000808080");
        let again = r(&x.to_string());
        assert_eq!(x.end, again.end);
        assert_eq!(fmt_num(1e-7), "0.0000001");
        assert_eq!(fmt_num(1e21), "1000000000000000000000");
        assert_eq!(fmt_num(1e300), "1e300");
        assert_eq!(fmt_num(1e-300), "1e-300");
        assert_eq!(fmt_num(-1.5e300), "-1.5e300");
        assert_eq!("1e300".parse::<f64>().unwrap(), 1e300);
    }

    #[test]
    fn numbers_in_c_locale() {
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(-1.5), "-1.5");
    }
}
