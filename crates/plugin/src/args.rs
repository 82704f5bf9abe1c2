//! Value parsers every check uses for its options, once: threshold ranges (numbers or durations),
//! durations, regexes. Each returns a one-line `String` error that the runtime renders as the
//! usage error, in the requested `--format`.
//!
//! Threshold options take negative values as a separate argument (`-w -10:-2`, the form
//! monitoring-plugins' own tests use): declare them with `allow_hyphen_values = true`.

use crate::Range;
use std::time::Duration;

/// `-w/-c RANGE`: a monitoring-plugins range on a number (`10`, `10:`, `~:10`, `10:20`, `@10:20`).
pub fn range(s: &str) -> Result<Range, String> {
    Range::parse(s).map_err(|e| e.to_string())
}

/// A range whose ends are durations (`5m`, `10m:`, `@1h:2h`); the values are seconds.
pub fn duration_range(s: &str) -> Result<Range, String> {
    Range::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration: `90`, `90s`, `15m`, `2h`, `1d`, `2m2s`; zero allowed.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    crate::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration that must be greater than zero (a wait or a probe deadline of 0 means nothing).
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err(format!("'{s}': must be greater than 0"));
    }
    Ok(d)
}

/// A whole number of seconds given as a duration (`300`, `5m`).
pub fn seconds(s: &str) -> Result<u64, String> {
    duration(s).map(|d| d.as_secs())
}

/// A regex, with the syntax error's reason kept on one line.
pub fn regex(s: &str) -> Result<regex_lite::Regex, String> {
    regex_lite::Regex::new(s).map_err(|e| {
        let text = e.to_string();
        let reason = text
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string();
        format!("invalid regex '{s}': {reason}")
    })
}

/// A range as an operator wrote it for a duration threshold: `5m` rather than `300`, `@5m:10m`
/// rather than `@300:600`, `10m:` rather than `600:`.
pub fn duration_range_text(r: &Range) -> String {
    let d = |v: f64| crate::fmt_duration(Duration::from_secs_f64(v.max(0.0)));
    let mut s = String::new();
    if r.inside {
        s.push('@');
    }
    match (r.start, r.end) {
        (Some(a), Some(b)) if a == 0.0 && !r.inside => s.push_str(&d(b)),
        (Some(a), Some(b)) => s.push_str(&format!("{}:{}", d(a), d(b))),
        (Some(a), None) => s.push_str(&format!("{}:", d(a))),
        (None, Some(b)) => s.push_str(&format!("~:{}", d(b))),
        (None, None) => s.push_str("~:"),
    }
    s
}

/// Which durations a duration range alerts on, in words: "over 5m", "from 5m to 10m", "under 10m".
pub fn duration_range_alerts(r: &Range) -> String {
    let d = |v: f64| crate::fmt_duration(Duration::from_secs_f64(v.max(0.0)));
    match (r.start, r.end, r.inside) {
        (Some(0.0), Some(b), false) => format!("over {}", d(b)),
        (Some(a), None, false) => format!("under {}", d(a)),
        (None, Some(b), false) => format!("over {}", d(b)),
        (Some(a), Some(b), false) => format!("under {} or over {}", d(a), d(b)),
        (Some(a), Some(b), true) => format!("from {} to {}", d(a), d(b)),
        (Some(a), None, true) => format!("from {} on", d(a)),
        (None, Some(b), true) => format!("up to {}", d(b)),
        (None, None, true) => "always".into(),
        (None, None, false) => "never".into(),
    }
}

/// How the items a duration threshold does not (yet) alert on read in an OK summary:
/// "for less than 5m" for the usual `-w 5m`, else "outside -w @5m:10m (alerts from 5m to 10m)".
pub fn duration_range_quiet(r: &Range) -> String {
    match (r.start, r.end, r.inside) {
        (Some(0.0), Some(b), false) => {
            format!(
                "for less than {}",
                crate::fmt_duration(Duration::from_secs_f64(b))
            )
        }
        _ => format!(
            "outside -w {} (alerts {})",
            duration_range_text(r),
            duration_range_alerts(r)
        ),
    }
}

/// `-w/--warning RANGE` and `-c/--critical RANGE` on a count, defined once. A check says what the
/// ranges count, and gives any default, with
/// `#[command(mut_arg("warning", |a| a.help("…").default_value("3")))]`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RangeArgs {
    /// Range that raises WARNING
    #[arg(short = 'w', long = "warning", value_name = "RANGE", allow_hyphen_values = true, value_parser = range)]
    pub warning: Option<Range>,

    /// Range that raises CRITICAL
    #[arg(short = 'c', long = "critical", value_name = "RANGE", allow_hyphen_values = true, value_parser = range)]
    pub critical: Option<Range>,
}

impl RangeArgs {
    pub fn thresholds(&self) -> crate::Thresholds {
        crate::Thresholds::new(self.warning.clone(), self.critical.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    #[test]
    fn parsers_take_what_the_guidelines_define_and_say_why_not() {
        assert_eq!(range("-10:-2").unwrap().start, Some(-10.0));
        assert!(range("5:1")
            .unwrap_err()
            .contains("start is greater than end"));
        assert_eq!(duration_range("5m").unwrap().end, Some(300.0));
        assert_eq!(duration("0").unwrap(), Duration::ZERO);
        assert!(positive_duration("0")
            .unwrap_err()
            .contains("greater than 0"));
        assert_eq!(seconds("5m").unwrap(), 300);
        let e = regex("(").unwrap_err();
        assert!(e.starts_with("invalid regex '(': "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn min_rank_caps_a_state() {
        assert_eq!(Status::Critical.min_rank(Status::Warning), Status::Warning);
        assert_eq!(Status::Ok.min_rank(Status::Critical), Status::Ok);
    }

    #[test]
    fn duration_ranges_read_as_durations() {
        let t = |s: &str| duration_range_text(&Range::parse_duration(s).unwrap());
        assert_eq!(t("5m"), "5m");
        assert_eq!(t("@5m:10m"), "@5m:10m");
        assert_eq!(t("10m:"), "10m:");
        assert_eq!(t("~:2h"), "~:2h");
        let q = |s: &str| duration_range_quiet(&Range::parse_duration(s).unwrap());
        assert_eq!(q("5m"), "for less than 5m");
        assert_eq!(q("@5m:10m"), "outside -w @5m:10m (alerts from 5m to 10m)");
        assert_eq!(q("10m:"), "outside -w 10m: (alerts under 10m)");
    }
}
