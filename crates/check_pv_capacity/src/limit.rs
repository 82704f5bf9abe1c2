//! `-w/-c` and `-W/-K` as monitoring-plugins' check_disk takes them: a minimum of free space as a
//! percentage (`15%`) or an amount (`2G`, `500M`, `1.5GiB`, `4096B`; a plain number is MiB, as
//! check_disk's default unit), and for inodes a percentage or a count. A monitoring-plugins range
//! (`10:`, `@0:5`, `-10:-2`: anything with `:`, `@` or `~`) is taken too, as the suite's ranges
//! are on every check: a range on the free percentage (`10:` is `10%`).

/// A minimum of free space (or free inodes): alert when the free part is below it.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// Percent of the filesystem (0..=100).
    Percent(f64),
    /// Bytes (or inodes).
    Amount(u64),
    /// A monitoring-plugins range on the free percentage: alert where the range alerts.
    Range(plugin::Range),
}

impl Limit {
    /// True when `free` of `total` is below the limit. A filesystem of size 0 is never below.
    pub fn below(&self, free: u64, total: u64) -> bool {
        if total == 0 {
            return false;
        }
        match self {
            Limit::Percent(p) => (free as f64) * 100.0 < p * total as f64,
            Limit::Amount(a) => free < *a,
            Limit::Range(r) => r.alerts(free as f64 * 100.0 / total as f64),
        }
    }

    /// The limit as a used percentage of a filesystem of `total` (for perfdata): 100 - free%;
    /// `None` for a range (no single number says it).
    pub fn used_pct(&self, total: u64) -> Option<f64> {
        match self {
            Limit::Percent(p) => Some(100.0 - p),
            Limit::Amount(a) if total > 0 => {
                Some((100.0 - *a as f64 * 100.0 / total as f64).max(0.0))
            }
            Limit::Amount(_) => Some(0.0),
            Limit::Range(_) => None,
        }
    }

    /// As an operator wrote it, for texts (`15%`, `2 GiB`, `1000 inodes`).
    pub fn text(&self, inodes: bool) -> String {
        match self {
            Limit::Percent(p) => format!("{}%", plugin::fmt_num(*p)),
            Limit::Amount(a) if inodes => format!("{a} inodes"),
            Limit::Amount(a) => plugin::fmt_bytes(*a),
            Limit::Range(r) => format!("range {r} (free %)"),
        }
    }
}

/// A monitoring-plugins range, when `s` is written as one (`:`, `@` or `~` in it).
fn range(s: &str) -> Option<Result<Limit, String>> {
    s.contains([':', '@', '~']).then(|| {
        plugin::Range::parse(s)
            .map(Limit::Range)
            .map_err(|e| e.to_string())
    })
}

fn percent(s: &str) -> Option<Result<Limit, String>> {
    let p = s.strip_suffix('%')?;
    Some(match p.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=100.0).contains(&v) => Ok(Limit::Percent(v)),
        _ => Err(format!("'{s}': a percentage from 0% to 100%")),
    })
}

/// `-w/-c`: `15%`, `2G`, `500M`, `1.5GiB`, `4096B`, `100` (MiB).
pub fn bytes(s: &str) -> Result<Limit, String> {
    let s = s.trim();
    if let Some(r) = percent(s).or_else(|| range(s)) {
        return r;
    }
    let bad = || {
        format!("'{s}': free space as a percentage (15%) or an amount (2G, 500M, 4096B; a plain number is MiB)")
    };
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "M" | "MB" | "MIB" => (1u64 << 20) as f64,
        "B" => 1.0,
        "K" | "KB" | "KIB" => 1024.0,
        "G" | "GB" | "GIB" => (1u64 << 30) as f64,
        "T" | "TB" | "TIB" => (1u64 << 40) as f64,
        _ => return Err(bad()),
    };
    let v = n * mult;
    if !v.is_finite() || v > u64::MAX as f64 / 2.0 {
        return Err(bad());
    }
    Ok(Limit::Amount(v as u64))
}

/// `-W/-K`: `15%` or a count of inodes.
pub fn inodes(s: &str) -> Result<Limit, String> {
    let s = s.trim();
    if let Some(r) = percent(s).or_else(|| range(s)) {
        return r;
    }
    s.parse::<u64>()
        .map(Limit::Amount)
        .map_err(|_| format!("'{s}': free inodes as a percentage (15%) or a count (10000)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_disk_spellings() {
        assert_eq!(bytes("20%").unwrap(), Limit::Percent(20.0));
        assert_eq!(bytes("100").unwrap(), Limit::Amount(100 << 20));
        assert_eq!(bytes("2G").unwrap(), Limit::Amount(2 << 30));
        assert_eq!(bytes("1.5GiB").unwrap(), Limit::Amount(3 << 29));
        assert_eq!(bytes("4096B").unwrap(), Limit::Amount(4096));
        assert_eq!(bytes("512k").unwrap(), Limit::Amount(512 << 10));
        assert!(bytes("101%").is_err());
        assert!(bytes("-5%").is_err());
        assert!(bytes("5X").is_err());
        assert!(bytes("").is_err());
        assert!(bytes("1e400").is_err());
        assert_eq!(inodes("10%").unwrap(), Limit::Percent(10.0));
        assert_eq!(inodes("1000").unwrap(), Limit::Amount(1000));
        assert!(inodes("1k").is_err());
        // The suite's ranges, on the free percentage: negative values as separate arguments.
        let r = bytes("-10:-2").unwrap();
        assert!(r.below(50, 100), "a negative range always alerts");
        assert!(bytes("10:").unwrap().below(9, 100));
        assert!(!bytes("10:").unwrap().below(10, 100));
        assert!(bytes("@0:5").unwrap().below(5, 100));
        assert!(bytes("-10:-20")
            .unwrap_err()
            .contains("start is greater than end"));
        assert_eq!(inodes("~:50").unwrap().used_pct(100), None);
    }

    #[test]
    fn below_and_perfdata_thresholds() {
        let l = Limit::Percent(10.0);
        assert!(l.below(9, 100));
        assert!(!l.below(10, 100));
        assert!(!l.below(0, 0));
        assert_eq!(l.used_pct(100), Some(90.0));
        let a = Limit::Amount(25);
        assert!(a.below(24, 100));
        assert_eq!(a.used_pct(100), Some(75.0));
        assert_eq!(a.used_pct(10), Some(0.0));
        assert_eq!(a.text(true), "25 inodes");
        assert_eq!(Limit::Percent(15.0).text(false), "15%");
    }
}
