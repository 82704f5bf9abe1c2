//! Rendering a report: the Nagios plugin text protocol, JSON, and node_exporter textfile format.

use crate::report::{Perfdata, Report, Uom};
use crate::Status;
use std::fmt::Write as _;

/// The first line must survive NRPE v2's 1 KiB packet.
pub const FIRST_LINE_MAX: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Nagios,
    Json,
    Prometheus,
}

/// Quote `s` as one word for a POSIX shell, for the commands hints tell an operator to run
/// (`umount <path>`): bare when it holds only characters no shell treats specially, else in
/// single quotes with each `'` written as `'\''`. Every hint that names a path or a name in a
/// command uses this, so a hostile path cannot break out of it.
pub fn shell_quote(s: &str) -> String {
    // `~` only expands at the start of a word.
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+,~".contains(c);
    if !s.is_empty() && !s.starts_with('~') && s.chars().all(safe) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Make text safe for the plugin protocol: no `|` (perfdata separator), no control characters
/// (a newline would start a new long-output line, and Icinga takes perfdata from every line).
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push('¦'),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// Bytes from the outside world (paths, file contents) as text: invalid UTF-8 replaced.
pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Cut `s` to at most `max` bytes on a char boundary, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let ell = "…";
    if max < ell.len() {
        return String::new();
    }
    let mut end = max - ell.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{}", &s[..end], ell)
}

/// What the renderer needs besides the report.
pub struct RenderOptions<'a> {
    /// Upper-case name shown first on the status line, e.g. `RO_PVC_MOUNTS`.
    pub name: &'a str,
    /// Binary name, e.g. `check_ro_pvc_mounts` (JSON and Prometheus label).
    pub binary: &'a str,
    pub verbosity: u8,
    pub max_output: usize,
    pub duration_secs: f64,
    pub debug: &'a [String],
}

pub fn render(report: &Report, format: Format, o: &RenderOptions) -> String {
    match format {
        Format::Nagios => render_nagios(report, o),
        Format::Json => render_json(report, o),
        Format::Prometheus => render_prometheus(report, o),
    }
}

fn perf_string(perf: &[Perfdata]) -> String {
    perf.iter()
        .map(|p| p.render())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The status line, never longer than [`FIRST_LINE_MAX`]: the summary gives way, perfdata does not.
pub fn first_line(name: &str, report: &Report) -> String {
    let prefix = format!("{} {} - ", sanitize(name), report.status);
    let mut perf = perf_string(&report.perfdata);
    // Perfdata alone too long (never with the suite's own checks): drop whole values from the end.
    let mut n = report.perfdata.len();
    while !perf.is_empty() && prefix.len() + 16 + 3 + perf.len() > FIRST_LINE_MAX && n > 0 {
        n -= 1;
        perf = perf_string(&report.perfdata[..n]);
    }
    let tail = if perf.is_empty() {
        String::new()
    } else {
        format!(" | {perf}")
    };
    let room = FIRST_LINE_MAX.saturating_sub(prefix.len() + tail.len());
    let summary = truncate(&sanitize(&report.summary), room);
    format!("{prefix}{summary}{tail}")
}

fn finding_lines(report: &Report, verbosity: u8) -> Vec<String> {
    let mut lines = Vec::new();
    let mut findings: Vec<_> = report
        .findings
        .iter()
        .filter(|f| verbosity >= 1 || f.status != Status::Ok)
        .collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.status.rank()));
    for f in findings {
        lines.push(format!("[{}] {}", f.status, sanitize(&f.text)));
        for d in &f.details {
            lines.push(format!("    {}", sanitize(d)));
        }
    }
    for n in &report.notes {
        lines.push(sanitize(n));
    }
    lines
}

fn render_nagios(report: &Report, o: &RenderOptions) -> String {
    let mut out = first_line(o.name, report);
    out.push('\n');
    let mut lines = finding_lines(report, o.verbosity);
    if o.verbosity >= 2 {
        lines.extend(o.debug.iter().map(|d| format!("debug: {}", sanitize(d))));
    }
    let total = lines.len();
    for (i, line) in lines.iter().enumerate() {
        let remaining = total - i;
        // Room for this line, plus the "... and N more" marker if lines would still follow.
        let marker_room = if remaining > 1 { 40 } else { 0 };
        if out.len() + line.len() + 1 + marker_room > o.max_output {
            let _ = writeln!(out, "... and {remaining} more");
            return out;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn render_json(report: &Report, o: &RenderOptions) -> String {
    let v = serde_json::json!({
        "check": o.binary,
        "name": o.name,
        "status": report.status,
        "exit_code": report.status.code(),
        "summary": report.summary,
        "findings": report.findings,
        "perfdata": report.perfdata,
        "notes": report.notes,
        "duration_seconds": o.duration_secs,
    });
    let mut s = serde_json::to_string(&v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

fn metric_name(p: &Perfdata) -> String {
    let mut name = format!("k8s_storage_check_{}", p.safe_label());
    let suffix = match p.uom {
        Uom::Seconds => "_seconds",
        Uom::Bytes => "_bytes",
        Uom::Millis => "_milliseconds",
        Uom::Micros => "_microseconds",
        Uom::Percent => "_percent",
        Uom::Counter => "_total",
        Uom::None => "",
    };
    if !name.ends_with(suffix) {
        name.push_str(suffix);
    }
    name
}

fn prom_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn render_prometheus(report: &Report, o: &RenderOptions) -> String {
    let check = prom_escape(o.binary);
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name}{{check=\"{check}\"}} {value}");
    };
    gauge(
        "k8s_storage_check_status",
        "Plugin state: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        report.status.code() as f64,
    );
    gauge(
        "k8s_storage_check_duration_seconds",
        "Wall time of the check run.",
        o.duration_secs,
    );
    let mut seen = std::collections::HashSet::new();
    for p in &report.perfdata {
        let name = metric_name(p);
        if !seen.insert(name.clone()) {
            continue;
        }
        gauge(
            &name,
            &format!("Perfdata value {}.", p.safe_label()),
            p.value,
        );
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn shell_quoting_holds_one_word() {
        assert_eq!(
            shell_quote("/var/lib/kubelet/pods/u-1/mount"),
            "/var/lib/kubelet/pods/u-1/mount"
        );
        assert_eq!(shell_quote("/a b"), "'/a b'");
        assert_eq!(shell_quote("/x'; rm -rf / #"), "'/x'\\''; rm -rf / #'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(
            shell_quote("/p/kubernetes.io~csi/x"),
            "/p/kubernetes.io~csi/x"
        );
        assert_eq!(shell_quote("~root"), "'~root'");
        assert_eq!(shell_quote("$(id)`id`"), "'$(id)`id`'");
        // What a shell makes of the quoted word is the original, whatever it holds.
        for s in [
            "/a'b",
            "~",
            "it's",
            "'",
            "''",
            "a\\'b",
            "$HOME *",
            "/p/\u{e9}",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(s)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), s);
        }
    }
    use super::*;
    use crate::report::{Finding, Perfdata};
    use crate::Range;

    fn opts(max: usize, v: u8) -> RenderOptions<'static> {
        RenderOptions {
            name: "RO_PVC_MOUNTS",
            binary: "check_ro_pvc_mounts",
            verbosity: v,
            max_output: max,
            duration_secs: 0.01,
            debug: &[],
        }
    }

    fn sample() -> Report {
        Report::new(Status::Critical, "2 of 14 PV filesystems read-only")
            .perf(Perfdata::new("pv_mounts", 14.0).min(0.0))
            .perf(
                Perfdata::new("ro_volumes", 2.0)
                    .warn(Some(&Range::parse("0").unwrap()))
                    .crit(Some(&Range::parse("0").unwrap()))
                    .min(0.0),
            )
            .finding(Finding::new(Status::Warning, "pvc-b has errors"))
            .finding(Finding::new(Status::Critical, "pvc-a read-only").detail("since 20:28"))
            .finding(Finding::new(Status::Ok, "pvc-c fine"))
    }

    #[test]
    fn first_line_has_status_summary_and_all_perfdata() {
        let out = render(&sample(), Format::Nagios, &opts(4096, 0));
        let first = out.lines().next().unwrap();
        assert_eq!(
            first,
            "RO_PVC_MOUNTS CRITICAL - 2 of 14 PV filesystems read-only | pv_mounts=14;;;0 ro_volumes=2;0;0;0"
        );
        // perfdata appears on the first line only
        assert_eq!(out.matches('|').count(), 1);
    }

    #[test]
    fn long_output_worst_first_ok_hidden_at_v0() {
        let out = render(&sample(), Format::Nagios, &opts(4096, 0));
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines[1], "[CRITICAL] pvc-a read-only");
        assert_eq!(lines[2], "    since 20:28");
        assert_eq!(lines[3], "[WARNING] pvc-b has errors");
        assert!(!out.contains("pvc-c"));
        let v1 = render(&sample(), Format::Nagios, &opts(4096, 1));
        assert!(v1.lines().last().unwrap().contains("[OK] pvc-c fine"));
    }

    #[test]
    fn text_is_sanitised() {
        let r = Report::new(Status::Warning, "a|b\nc\x1bd")
            .finding(Finding::new(Status::Warning, "mount /x|y\nz"));
        let out = render(&r, Format::Nagios, &opts(4096, 0));
        assert_eq!(out.lines().count(), 2);
        assert!(!out.contains('|'));
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'));
        assert_eq!(sanitize("a|b"), "a¦b");
    }

    #[test]
    fn first_line_capped_summary_gives_way_not_perfdata() {
        let r = Report::new(Status::Critical, "x".repeat(5000))
            .perf(Perfdata::new("ro_volumes", 3.0).min(0.0));
        let out = render(&r, Format::Nagios, &opts(100_000, 0));
        let first = out.lines().next().unwrap();
        assert!(first.len() <= FIRST_LINE_MAX, "{}", first.len());
        assert!(first.ends_with("| ro_volumes=3;;;0"));
        assert!(first.contains('…'));
    }

    #[test]
    fn multibyte_summary_truncates_on_char_boundary() {
        let r = Report::new(Status::Ok, "é".repeat(2000));
        let first = first_line("X", &r);
        assert!(first.len() <= FIRST_LINE_MAX);
    }

    #[test]
    fn max_output_caps_with_and_n_more() {
        let mut r = Report::new(Status::Critical, "many").perf(Perfdata::new("n", 100.0));
        for i in 0..100 {
            r = r.finding(Finding::new(
                Status::Critical,
                format!("finding number {i}"),
            ));
        }
        let out = render(&r, Format::Nagios, &opts(500, 0));
        assert!(out.len() <= 500, "{}", out.len());
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("... and ") && last.ends_with(" more"),
            "{last}"
        );
        let shown = out.lines().filter(|l| l.starts_with("[CRITICAL]")).count();
        let more: usize = last
            .trim_start_matches("... and ")
            .trim_end_matches(" more")
            .parse()
            .unwrap();
        assert_eq!(shown + more, 100);
        assert!(out.lines().next().unwrap().ends_with("| n=100"));
    }

    #[test]
    fn max_output_smaller_than_first_line_keeps_first_line_whole() {
        let out = render(&sample(), Format::Nagios, &opts(10, 0));
        assert!(out.starts_with("RO_PVC_MOUNTS CRITICAL - 2 of 14"));
        assert!(out.lines().next().unwrap().ends_with("ro_volumes=2;0;0;0"));
        assert!(out.lines().nth(1).unwrap().starts_with("... and "));
    }

    #[test]
    fn json_has_status_summary_findings_perfdata() {
        let out = render(&sample(), Format::Json, &opts(4096, 0));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "CRITICAL");
        assert_eq!(v["exit_code"], 2);
        assert_eq!(v["findings"].as_array().unwrap().len(), 3);
        assert_eq!(v["perfdata"][1]["label"], "ro_volumes");
        assert_eq!(v["perfdata"][1]["crit"], "0");
    }

    #[test]
    fn prometheus_textfile_format() {
        let r = sample().perf(Perfdata::new("max_backoff", 122.0).uom(Uom::Seconds));
        let out = render(&r, Format::Prometheus, &opts(4096, 0));
        assert!(out.contains("k8s_storage_check_status{check=\"check_ro_pvc_mounts\"} 2\n"));
        assert!(out.contains("k8s_storage_check_ro_volumes{check=\"check_ro_pvc_mounts\"} 2\n"));
        assert!(out.contains(
            "k8s_storage_check_max_backoff_seconds{check=\"check_ro_pvc_mounts\"} 122\n"
        ));
        assert!(out.contains("# TYPE k8s_storage_check_duration_seconds gauge"));
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("k8s_storage_check_"));
            value.parse::<f64>().unwrap();
        }
    }
}
