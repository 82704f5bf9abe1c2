//! RFC 3339 timestamps as the API writes them (`2026-07-12T10:20:30Z`, `…30.123456Z`,
//! `…30+10:00`), as Unix seconds; the calendar underneath is `plugin::time`, the one the node's
//! log readers use too.

use serde::{Deserialize, Deserializer};

/// Seconds since the Unix epoch (UTC).
pub type Time = i64;

/// Parse an RFC 3339 timestamp to Unix seconds (fractions dropped).
pub fn parse_rfc3339(s: &str) -> Option<Time> {
    plugin::time::parse_rfc3339_secs(s)
}

/// Format Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (for test fixtures and messages).
pub fn format_rfc3339(t: Time) -> String {
    plugin::time::format_rfc3339(t)
}

/// Unix seconds now.
pub fn now() -> Time {
    plugin::time::now_secs()
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
