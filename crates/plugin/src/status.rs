//! The four states of the plugin protocol and their exit codes.

use serde::Serialize;
use std::fmt;

/// A plugin state. Ordered by severity for "worst of" decisions: OK < WARNING < UNKNOWN < CRITICAL
/// is *not* the order used here; the monitoring-plugins convention ranks CRITICAL worst, then
/// WARNING, then UNKNOWN, then OK (a known alarm outranks an unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Warning,
    Critical,
    Unknown,
}

impl Status {
    /// Exit code of the plugin protocol: 0, 1, 2, 3 and nothing else.
    pub fn code(self) -> i32 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Critical => 2,
            Status::Unknown => 3,
        }
    }

    /// Severity rank: CRITICAL > WARNING > UNKNOWN > OK.
    pub fn rank(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Unknown => 1,
            Status::Warning => 2,
            Status::Critical => 3,
        }
    }

    /// The worse of two states.
    pub fn worst(self, other: Status) -> Status {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// The less severe of two states: caps a state at `other`.
    pub fn min_rank(self, other: Status) -> Status {
        if self.rank() <= other.rank() {
            self
        } else {
            other
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warning => "WARNING",
            Status::Critical => "CRITICAL",
            Status::Unknown => "UNKNOWN",
        }
    }

    /// Parse a state name as used by `-t SECONDS:STATE` (case-insensitive, also 0..3).
    pub fn parse(s: &str) -> Option<Status> {
        match s.to_ascii_uppercase().as_str() {
            "OK" | "0" => Some(Status::Ok),
            "WARNING" | "WARN" | "1" => Some(Status::Warning),
            "CRITICAL" | "CRIT" | "2" => Some(Status::Critical),
            "UNKNOWN" | "3" => Some(Status::Unknown),
            _ => None,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_protocol() {
        assert_eq!(Status::Ok.code(), 0);
        assert_eq!(Status::Warning.code(), 1);
        assert_eq!(Status::Critical.code(), 2);
        assert_eq!(Status::Unknown.code(), 3);
    }

    #[test]
    fn critical_outranks_everything_and_warning_outranks_unknown() {
        assert_eq!(Status::Ok.worst(Status::Unknown), Status::Unknown);
        assert_eq!(Status::Unknown.worst(Status::Warning), Status::Warning);
        assert_eq!(Status::Warning.worst(Status::Critical), Status::Critical);
        assert_eq!(Status::Critical.worst(Status::Unknown), Status::Critical);
        assert_eq!(Status::Ok.worst(Status::Ok), Status::Ok);
    }

    #[test]
    fn parses_state_names() {
        assert_eq!(Status::parse("critical"), Some(Status::Critical));
        assert_eq!(Status::parse("WARNING"), Some(Status::Warning));
        assert_eq!(Status::parse("3"), Some(Status::Unknown));
        assert_eq!(Status::parse("bogus"), None);
    }
}
