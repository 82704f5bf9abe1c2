//! Time zones for log lines written in local time without a zone (klog and syslog headers).
//!
//! A check reading a node's log from a container has the container's zone, not the node's; and an
//! operator reading a log copied from elsewhere knows its zone better than this host does. So:
//! - `UTC`, `Z`, or a fixed offset `+08:00`, `-0530`, `+8`;
//! - an IANA name (`Europe/Berlin`), read as TZif from the zoneinfo directory;
//! - a TZif file path (`/host/etc/localtime`: the host's zone in container mode).
//!
//! TZif (RFC 8536): version 1 (32-bit transitions) or 2+ (the 64-bit block after the first, then a
//! POSIX TZ footer such as `CET-1CEST,M3.5.0,M10.5.0/3` for the times after the last transition —
//! "slim" files rely on it for every DST change after 2007).

use super::time::{days_from_civil, Tz};
use std::path::Path;

/// A zone from a TZif file.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// (transition time in UTC seconds, index into `offsets`), ascending.
    transitions: Vec<(i64, usize)>,
    /// UTC offsets (seconds east) of the local time types.
    offsets: Vec<i64>,
    /// The offset before the first transition.
    initial: i64,
    footer: Option<PosixTz>,
}

fn be32(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

impl Zone {
    /// Parse TZif bytes.
    pub fn parse(b: &[u8]) -> Result<Zone, String> {
        let bad = |what: &str| format!("not a TZif file: {what}");
        if b.len() < 44 || &b[..4] != b"TZif" {
            return Err(bad("no TZif magic"));
        }
        let version = b[4];
        let counts = |at: usize| -> Option<[usize; 6]> {
            let mut c = [0usize; 6];
            for (k, v) in c.iter_mut().enumerate() {
                *v = be32(b, at + 20 + 4 * k)? as usize;
            }
            Some(c)
        };
        let block_len = |c: &[usize; 6], tsize: usize| {
            let [isut, isstd, leap, time, typ, chr] = *c;
            time * tsize + time + typ * 6 + chr + leap * (tsize + 4) + isstd + isut
        };
        let c1 = counts(0).ok_or_else(|| bad("short header"))?;
        let (at, c, tsize) = if version >= b'2' {
            let second = 44 + block_len(&c1, 4);
            let c2 = counts(second).ok_or_else(|| bad("short second header"))?;
            if b.get(second..second + 4) != Some(b"TZif") {
                return Err(bad("no second header"));
            }
            (second + 44, c2, 8)
        } else {
            (44, c1, 4)
        };
        let [_, _, _, timecnt, typecnt, _] = c;
        if typecnt == 0 || typecnt > 256 || timecnt > 1 << 20 {
            return Err(bad("impossible counts"));
        }
        let end = at + block_len(&c, tsize);
        if b.len() < end {
            return Err(bad("truncated"));
        }
        let mut transitions = Vec::with_capacity(timecnt);
        let idx_at = at + timecnt * tsize;
        let types_at = idx_at + timecnt;
        for k in 0..timecnt {
            let t = if tsize == 8 {
                i64::from_be_bytes(b[at + 8 * k..at + 8 * k + 8].try_into().expect("8 bytes"))
            } else {
                i64::from(i32::from_be_bytes(
                    b[at + 4 * k..at + 4 * k + 4].try_into().expect("4 bytes"),
                ))
            };
            let i = b[idx_at + k] as usize;
            if i >= typecnt {
                return Err(bad("transition to an unknown type"));
            }
            transitions.push((t, i));
        }
        let mut offsets = Vec::with_capacity(typecnt);
        let mut dst = Vec::with_capacity(typecnt);
        for k in 0..typecnt {
            let o = types_at + 6 * k;
            offsets.push(i64::from(i32::from_be_bytes(
                b[o..o + 4].try_into().expect("4 bytes"),
            )));
            dst.push(b[o + 4] != 0);
        }
        // RFC 8536: before the first transition, the first standard-time type (else type 0).
        let initial = (0..typecnt)
            .find(|&k| !dst[k])
            .map_or(offsets[0], |k| offsets[k]);
        let footer = if version >= b'2' {
            b.get(end..)
                .and_then(|f| f.strip_prefix(b"\n"))
                .and_then(|f| f.split(|&c| c == b'\n').next())
                .and_then(|f| std::str::from_utf8(f).ok())
                .filter(|f| !f.is_empty())
                .and_then(PosixTz::parse)
        } else {
            None
        };
        Ok(Zone {
            transitions,
            offsets,
            initial,
            footer,
        })
    }

    /// Read a TZif file.
    pub fn read(path: &Path) -> Result<Zone, String> {
        // The path may name anything (`/dev/zero`): read at most one byte past the cap.
        let b = std::fs::File::open(path)
            .and_then(|f| plugin::capped::read_capped(f, 1 << 20))
            .map_err(|e| format!("cannot read {}: {}", path.display(), plugin::errtext(&e)))?
            .ok_or_else(|| format!("{}: not a TZif file (too big)", path.display()))?;
        Zone::parse(&b).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Tz for Zone {
    fn offset_at(&self, t: i64) -> i64 {
        match self.transitions.partition_point(|&(at, _)| at <= t) {
            0 => self.initial,
            n if n == self.transitions.len() => match &self.footer {
                Some(f) => f.offset_at(t),
                None => self.offsets[self.transitions[n - 1].1],
            },
            n => self.offsets[self.transitions[n - 1].1],
        }
    }
}

/// A POSIX TZ string (the TZif footer): standard offset, and optionally DST with its rules.
#[derive(Debug, Clone, PartialEq)]
pub struct PosixTz {
    /// Seconds east of UTC (POSIX writes west-positive: `CET-1` is +3600 here).
    std: i64,
    dst: Option<(i64, Rule, Rule)>,
}

/// When DST starts or ends: a day rule and the local time of day (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rule {
    day: Day,
    time: i64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Day {
    /// `Mm.w.d`: day d (0 = Sunday) of week w (5 = last) of month m.
    Month(u32, u32, u32),
    /// `Jn`: day n (1..365), February 29 never counted.
    Julian1(u32),
    /// `n`: day n (0..365), February 29 counted.
    Julian0(u32),
}

impl PosixTz {
    pub fn parse(s: &str) -> Option<PosixTz> {
        let b = s.as_bytes();
        let mut i = 0;
        name(b, &mut i)?;
        let std = -offset(b, &mut i)?;
        if i == b.len() {
            return Some(PosixTz { std, dst: None });
        }
        name(b, &mut i)?;
        let dst_off = if i < b.len() && b[i] != b',' {
            -offset(b, &mut i)?
        } else {
            std + 3600
        };
        // No rules: the US rules of POSIX's default; zic always writes them, so none is rare.
        let (start, end) = if i == b.len() {
            (
                Rule {
                    day: Day::Month(3, 2, 0),
                    time: 7200,
                },
                Rule {
                    day: Day::Month(11, 1, 0),
                    time: 7200,
                },
            )
        } else {
            if b[i] != b',' {
                return None;
            }
            i += 1;
            let start = rule(b, &mut i)?;
            if b.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
            let end = rule(b, &mut i)?;
            (start, end)
        };
        (i == b.len()).then_some(PosixTz {
            std,
            dst: Some((dst_off, start, end)),
        })
    }

    pub fn offset_at(&self, t: i64) -> i64 {
        let Some((dst, start, end)) = self.dst else {
            return self.std;
        };
        let local = t + self.std;
        let (year, _, _) = super::time::civil_from_days(local.div_euclid(86400));
        // Start is given in standard time, end in daylight time.
        let on = |y: i64, r: Rule, off: i64| day_of(y, r.day) * 86400 + r.time - off;
        for y in [year - 1, year, year + 1] {
            let (s, e) = (on(y, start, self.std), on(y, end, dst));
            let inside = if s < e {
                s <= t && t < e
            } else {
                // Southern hemisphere: DST spans the new year.
                !(e <= t && t < s)
            };
            if y == year {
                return if inside { dst } else { self.std };
            }
        }
        self.std
    }
}

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days since 1970-01-01 of a rule's day in year `y`.
fn day_of(y: i64, d: Day) -> i64 {
    match d {
        Day::Julian1(n) => {
            let n = i64::from(n.clamp(1, 365));
            days_from_civil(y, 1, 1) + n - 1 + i64::from(leap(y) && n >= 60)
        }
        Day::Julian0(n) => days_from_civil(y, 1, 1) + i64::from(n.min(365)),
        Day::Month(m, w, wd) => {
            let first = days_from_civil(y, m, 1);
            let first_wd = (first + 4).rem_euclid(7); // 1970-01-01 was a Thursday
            let mut day = first + (i64::from(wd) - first_wd).rem_euclid(7) + 7 * (i64::from(w) - 1);
            let next_month = if m == 12 {
                days_from_civil(y + 1, 1, 1)
            } else {
                days_from_civil(y, m + 1, 1)
            };
            while day >= next_month {
                day -= 7;
            }
            day
        }
    }
}

fn name(b: &[u8], i: &mut usize) -> Option<()> {
    if b.get(*i) == Some(&b'<') {
        let close = b[*i..].iter().position(|&c| c == b'>')?;
        *i += close + 1;
        return Some(());
    }
    let start = *i;
    while *i < b.len() && b[*i].is_ascii_alphabetic() {
        *i += 1;
    }
    (*i - start >= 3).then_some(())
}

fn number(b: &[u8], i: &mut usize) -> Option<i64> {
    let start = *i;
    while *i < b.len() && b[*i].is_ascii_digit() {
        *i += 1;
    }
    std::str::from_utf8(&b[start..*i]).ok()?.parse().ok()
}

/// `[+-]hh[:mm[:ss]]` in seconds, as written (POSIX sign: west positive).
fn offset(b: &[u8], i: &mut usize) -> Option<i64> {
    let sign = match b.get(*i) {
        Some(b'-') => {
            *i += 1;
            -1
        }
        Some(b'+') => {
            *i += 1;
            1
        }
        _ => 1,
    };
    // Hours up to 167 (RFC 8536 §3.3.1 extends POSIX's 24 for rule times), minutes and seconds
    // up to 59: anything else is not a zone (and must not overflow the arithmetic).
    let hours = number(b, i).filter(|h| (0..=167).contains(h))?;
    let mut secs = hours * 3600;
    for mult in [60, 1] {
        if b.get(*i) == Some(&b':') {
            *i += 1;
            secs += number(b, i).filter(|n| (0..=59).contains(n))? * mult;
        } else {
            break;
        }
    }
    Some(sign * secs)
}

fn rule(b: &[u8], i: &mut usize) -> Option<Rule> {
    let day = match b.get(*i)? {
        b'M' => {
            *i += 1;
            let m = number(b, i)?;
            (b.get(*i) == Some(&b'.')).then_some(())?;
            *i += 1;
            let w = number(b, i)?;
            (b.get(*i) == Some(&b'.')).then_some(())?;
            *i += 1;
            let d = number(b, i)?;
            if !(1..=12).contains(&m) || !(1..=5).contains(&w) || d > 6 {
                return None;
            }
            Day::Month(m as u32, w as u32, d as u32)
        }
        b'J' => {
            *i += 1;
            Day::Julian1(number(b, i)?.clamp(1, 365) as u32)
        }
        _ => Day::Julian0(number(b, i)?.clamp(0, 365) as u32),
    };
    let time = if b.get(*i) == Some(&b'/') {
        *i += 1;
        offset(b, i)?
    } else {
        7200
    };
    Some(Rule { day, time })
}

/// A fixed offset: `UTC`, `Z`, `+08:00`, `-0530`, `+8`.
pub fn parse_fixed(s: &str) -> Option<i64> {
    let s = s.trim();
    if matches!(s, "UTC" | "utc" | "Z" | "z" | "GMT" | "Etc/UTC" | "UTC0") {
        return Some(0);
    }
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.is_empty() || digits.len() > 4 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m) = if digits.len() <= 2 {
        (digits.parse::<i64>().ok()?, 0)
    } else {
        let (h, m) = digits.split_at(digits.len() - 2);
        (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?)
    };
    (h <= 14 && m < 60).then_some(sign * (h * 3600 + m * 60))
}

/// A `--tz` value: a fixed offset, a TZif file path, or an IANA name under `zoneinfo` (e.g.
/// `/usr/share/zoneinfo`, or the host's in container mode).
pub fn resolve(spec: &str, zoneinfo: &Path) -> Result<Box<dyn Tz + Send + Sync>, String> {
    if let Some(o) = parse_fixed(spec) {
        return Ok(Box::new(super::time::FixedTz(o)));
    }
    let p = Path::new(spec);
    if p.is_absolute() {
        return Ok(Box::new(Zone::read(p)?));
    }
    let ok_name = !spec.is_empty()
        && !spec
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        && spec
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'));
    if !ok_name {
        return Err(format!(
            "--tz {spec:?}: not a zone (UTC, +08:00, an IANA name such as Europe/Berlin, or a TZif file path)"
        ));
    }
    Zone::read(&zoneinfo.join(spec)).map(|z| Box::new(z) as Box<dyn Tz + Send + Sync>)
}

/// The zone of a host's local log times: `spec` (`--tz`) when given, an IANA name read from the
/// host's zoneinfo; else, in container mode, the host's `/etc/localtime` (a symlink into its
/// zoneinfo followed under the host root; none at all: the host runs in UTC); else this process's
/// zone (TZ, /etc/localtime).
pub fn host_zone(
    host: &crate::Host,
    spec: Option<&str>,
) -> Result<Box<dyn Tz + Send + Sync>, String> {
    let zoneinfo = host.file("/usr/share/zoneinfo");
    if let Some(spec) = spec {
        return resolve(spec, &zoneinfo);
    }
    if host.is_local() {
        return Ok(Box::new(super::time::SystemTz));
    }
    let lt = host.file("/etc/localtime");
    // A symlink into the host's zoneinfo (`/usr/share/zoneinfo/Europe/Berlin`) resolves in the
    // container's tree: follow it under the host root.
    let target = std::fs::read_link(&lt)
        .ok()
        .filter(|t| t.is_absolute())
        .map(|t| host.file(t))
        .unwrap_or(lt.clone());
    match Zone::read(&target) {
        Ok(z) => Ok(Box::new(z)),
        Err(e) if lt.exists() => Err(format!("the host's time zone: {e} (give --tz)")),
        Err(_) => Ok(Box::new(super::time::FixedTz(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60
    }

    #[test]
    fn posix_rules_north_south_and_fixed() {
        let cet = PosixTz::parse("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        // 2026: DST from Sun Mar 29 01:00Z to Sun Oct 25 01:00Z.
        assert_eq!(cet.offset_at(utc(2026, 3, 29, 0, 59)), 3600);
        assert_eq!(cet.offset_at(utc(2026, 3, 29, 1, 0)), 7200);
        assert_eq!(cet.offset_at(utc(2026, 10, 25, 0, 59)), 7200);
        assert_eq!(cet.offset_at(utc(2026, 10, 25, 1, 0)), 3600);
        let us = PosixTz::parse("EST5EDT,M3.2.0,M11.1.0").unwrap();
        assert_eq!(us.offset_at(utc(2026, 7, 1, 12, 0)), -4 * 3600);
        assert_eq!(us.offset_at(utc(2026, 12, 1, 12, 0)), -5 * 3600);
        // Southern hemisphere: Sydney, DST across the new year.
        let syd = PosixTz::parse("AEST-10AEDT,M10.1.0,M4.1.0/3").unwrap();
        assert_eq!(syd.offset_at(utc(2026, 1, 15, 0, 0)), 11 * 3600);
        assert_eq!(syd.offset_at(utc(2026, 7, 13, 10, 0)), 10 * 3600);
        assert_eq!(PosixTz::parse("<+08>-8").unwrap().offset_at(0), 8 * 3600);
        assert_eq!(
            PosixTz::parse("IST-5:30").unwrap().offset_at(0),
            5 * 3600 + 1800
        );
        assert!(PosixTz::parse("").is_none() && PosixTz::parse("X1").is_none());
        assert_eq!(parse_fixed("+08:00"), Some(8 * 3600));
        assert_eq!(parse_fixed("-0530"), Some(-(5 * 3600 + 1800)));
        assert_eq!(parse_fixed("UTC"), Some(0));
        assert_eq!(parse_fixed("+8"), Some(8 * 3600));
        assert_eq!(parse_fixed("Europe/Berlin"), None);
        assert_eq!(parse_fixed("+99"), None);
    }

    /// Found by the `tz` fuzz target: a POSIX TZ string whose offset has 19 digits overflowed
    /// `hours * 3600` (a panic in a debug build, a wrapped offset in a release build). Out-of-range
    /// hours, minutes or seconds are not a zone.
    #[test]
    fn huge_offsets_are_not_a_zone() {
        let fuzz =
            "kkkkkkk2222222222222222222kkkkkkUTC0kkkkkkKkkkkkkkkk22222222222222222222UTC0:2222223";
        assert!(PosixTz::parse(fuzz).is_none());
        assert!(PosixTz::parse("XXX2222222222222222222").is_none());
        assert!(PosixTz::parse("XXX168").is_none());
        assert!(PosixTz::parse("XXX1:60").is_none());
        assert_eq!(PosixTz::parse("XXX167").unwrap().offset_at(0), -167 * 3600);
        assert!(PosixTz::parse("CET-1CEST,M3.5.0/99999999999999999,M10.5.0").is_none());
    }

    /// The system's own TZif files, fat or slim, against the C library's answer.
    #[test]
    fn tzif_files_of_this_system() {
        let dir = Path::new("/usr/share/zoneinfo");
        for (name, summer, winter) in [
            ("Europe/Berlin", 7200, 3600),
            ("America/New_York", -4 * 3600, -5 * 3600),
            ("Australia/Sydney", 10 * 3600, 11 * 3600),
            ("Asia/Kolkata", 19800, 19800),
        ] {
            let p = dir.join(name);
            if !p.exists() {
                assert!(
                    !std::env::var("CI").is_ok_and(|v| v == "true"),
                    "{name}: needs the tzdata package"
                );
                eprintln!("skipped {name}: no tzdata");
                continue;
            }
            let z = Zone::read(&p).unwrap();
            // July and January of a year past any fat file's table (2040) and of this decade.
            for y in [2026, 2040] {
                assert_eq!(z.offset_at(utc(y, 7, 1, 12, 0)), summer, "{name} {y}");
                assert_eq!(z.offset_at(utc(y, 1, 15, 12, 0)), winter, "{name} {y}");
            }
            // History: Berlin had no DST in 1970.
            if name == "Europe/Berlin" {
                assert_eq!(z.offset_at(utc(1970, 7, 1, 0, 0)), 3600);
            }
        }
        let ok = resolve("Europe/Berlin", dir);
        if dir.join("Europe/Berlin").exists() {
            assert!(ok.is_ok());
        }
        assert!(resolve("../etc/passwd", dir).is_err());
        assert!(resolve("Nowhere/Land", dir).is_err());
        assert!(Zone::parse(b"TZif2 garbage").is_err());
        assert!(Zone::parse(&[0u8; 100]).is_err());
    }
}
