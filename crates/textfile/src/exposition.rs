//! The Prometheus text exposition of several checks' answers as one page: what `serve` answers on
//! `/metrics`. Each check's `--format prometheus` answer carries its own `# HELP`/`# TYPE` lines;
//! node_exporter's textfile collector merges the files by metric family, and so does [`merge`]:
//! one `# HELP` and one `# TYPE` per family, every sample of a family together (the exposition
//! format requires it; the strict parsers refuse a second `# TYPE` for a name).

use std::fmt::Write as _;

/// The series `serve` adds per check, next to the check's own.
pub const LAST_RUN_METRIC: &str = "k8s_storage_check_last_run_timestamp_seconds";
/// The wall time of the last run as the runner measured it (start to exit, spawning included).
pub const RUN_DURATION_METRIC: &str = "k8s_storage_check_run_duration_seconds";

/// The metric family a sample line belongs to (its name before `{` or the value).
fn family(line: &str) -> &str {
    let end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    &line[..end]
}

/// Merge exposition texts into one, by metric family in the order first seen. Comments other
/// than `# HELP`/`# TYPE` (the runner's "gave no metrics" reason) come first, in order.
pub fn merge<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    struct Family<'a> {
        help: Option<&'a str>,
        kind: Option<&'a str>,
        samples: Vec<&'a str>,
    }
    let mut order: Vec<&'a str> = Vec::new();
    let mut families: std::collections::HashMap<&'a str, Family<'a>> =
        std::collections::HashMap::new();
    let mut comments: Vec<&'a str> = Vec::new();
    for text in texts {
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let (name, what) = if let Some(rest) = line.strip_prefix("# HELP ") {
                (family(rest), 1)
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                (family(rest), 2)
            } else if line.starts_with('#') {
                comments.push(line);
                continue;
            } else {
                (family(line), 0)
            };
            let f = families.entry(name).or_insert_with(|| {
                order.push(name);
                Family {
                    help: None,
                    kind: None,
                    samples: Vec::new(),
                }
            });
            match what {
                1 => {
                    f.help.get_or_insert(line);
                }
                2 => {
                    f.kind.get_or_insert(line);
                }
                _ => f.samples.push(line),
            }
        }
    }
    let mut out = String::new();
    for c in comments {
        out.push_str(c);
        out.push('\n');
    }
    for name in order {
        let f = &families[name];
        for l in [f.help, f.kind].into_iter().flatten() {
            out.push_str(l);
            out.push('\n');
        }
        for s in &f.samples {
            out.push_str(s);
            out.push('\n');
        }
    }
    out
}

/// One check's run as `serve` saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// When the last run ended, seconds since the epoch.
    pub ended_unix: f64,
    /// How long it took, spawning and waiting included.
    pub seconds: f64,
}

/// The runner's own series for the checks that ran: the last run's end and its duration.
pub fn runner_series<'a>(runs: impl IntoIterator<Item = (&'a str, Run)>) -> String {
    let runs: Vec<(&str, Run)> = runs.into_iter().collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP {LAST_RUN_METRIC} When the check's last run ended (k8s-storage-checks serve), seconds since the epoch.\n# TYPE {LAST_RUN_METRIC} gauge"
    );
    for (check, r) in &runs {
        let _ = writeln!(
            out,
            "{LAST_RUN_METRIC}{{check=\"{}\"}} {:.3}",
            plugin::render::prom_escape(check),
            r.ended_unix
        );
    }
    let _ = writeln!(
        out,
        "# HELP {RUN_DURATION_METRIC} How long the check's last run took, start to exit, as the runner measured it.\n# TYPE {RUN_DURATION_METRIC} gauge"
    );
    for (check, r) in &runs {
        let _ = writeln!(
            out,
            "{RUN_DURATION_METRIC}{{check=\"{}\"}} {:.3}",
            plugin::render::prom_escape(check),
            r.seconds
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_merged_with_one_help_and_type_each() {
        let a = plugin::render::prometheus_status("check_a", plugin::Status::Ok);
        let b = format!(
            "# k8s-storage-checks-textfile: check_b gave no metrics: x\n{}",
            plugin::render::prometheus_status("check_b", plugin::Status::Unknown)
        );
        let m = merge([a.as_str(), b.as_str()]);
        assert_eq!(
            m,
            "# k8s-storage-checks-textfile: check_b gave no metrics: x\n\
             # HELP k8s_storage_check_status Plugin state: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.\n\
             # TYPE k8s_storage_check_status gauge\n\
             k8s_storage_check_status{check=\"check_a\"} 0\n\
             k8s_storage_check_status{check=\"check_b\"} 3\n"
        );
    }

    #[test]
    fn runner_series_name_each_check() {
        let s = runner_series([(
            "check_a",
            Run {
                ended_unix: 1700000000.5,
                seconds: 0.25,
            },
        )]);
        assert!(s.contains(
            "k8s_storage_check_last_run_timestamp_seconds{check=\"check_a\"} 1700000000.500\n"
        ));
        assert!(s.contains("k8s_storage_check_run_duration_seconds{check=\"check_a\"} 0.250\n"));
        assert_eq!(s.matches("# TYPE").count(), 2);
    }
}
