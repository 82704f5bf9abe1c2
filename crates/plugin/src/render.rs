//! Rendering a report: the Nagios plugin text protocol, JSON, and node_exporter textfile format.

use crate::report::{Perfdata, Report, Uom};
use crate::Status;
use std::fmt::Write as _;

/// The first line must survive NRPE v2's 1 KiB packet, whose last byte is the terminating NUL:
/// 1023 bytes of text reach the server.
pub const FIRST_LINE_MAX: usize = 1023;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Nagios,
    Json,
    Prometheus,
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

/// Bytes from the outside world (paths, file contents) as text, invalid sequences replaced:
/// `String::from_utf8_lossy`, but valid input (nearly all of it) is checked with the fast
/// validator first; the lossy scan is several times slower and shows on a 50 000-line mount
/// table.
pub fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
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
    /// Cap on `k8s_storage_check_finding` series in the Prometheus format.
    pub max_findings_series: usize,
    /// The run's `-t` in seconds (exported so that rules can compare the duration with it); 0
    /// when unknown (usage errors).
    pub timeout_secs: f64,
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
        .map(super::report::Perfdata::render)
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
    // Room for the note that says so.
    while n < report.perfdata.len() && n > 0 && prefix.len() + 80 + 3 + perf.len() > FIRST_LINE_MAX
    {
        n -= 1;
        perf = perf_string(&report.perfdata[..n]);
    }
    let tail = if perf.is_empty() {
        String::new()
    } else {
        format!(" | {perf}")
    };
    // Never drop perfdata silently: the summary says how many values did not fit.
    let dropped = report.perfdata.len() - n;
    let cut = if dropped > 0 {
        format!("({dropped} perfdata values left out: status line over {FIRST_LINE_MAX} bytes) ")
    } else {
        String::new()
    };
    let room = FIRST_LINE_MAX.saturating_sub(prefix.len() + tail.len());
    let summary = truncate(&format!("{cut}{}", sanitize(&report.summary)), room);
    format!("{prefix}{summary}{tail}")
}

/// One block of long output: a finding with its detail lines, a note, or a debug line.
enum Block {
    Finding(Vec<String>),
    Note(String),
    Debug(String),
}

fn blocks(report: &Report, verbosity: u8, debug: &[String]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut findings: Vec<_> = report
        .findings
        .iter()
        .filter(|f| verbosity >= 1 || f.status != Status::Ok)
        .collect();
    findings.sort_by(|a, b| crate::report::cmp_findings(a, b));
    for f in findings {
        let mut lines = vec![format!("[{}] {}", f.status, sanitize(&f.text))];
        for d in &f.details {
            lines.push(format!("    {}", sanitize(d)));
        }
        if verbosity >= 1 {
            for e in &f.evidence {
                lines.push(format!("    evidence: {}", sanitize(e)));
            }
        }
        // Last: the step to take. Its commands carry no `|` (see `crate::next`), so the
        // sanitiser leaves them as they are to be pasted.
        if let Some(n) = f.next_line() {
            lines.push(format!("    next: {}", sanitize(&n)));
        }
        out.push(Block::Finding(lines));
    }
    for n in &report.notes {
        out.push(Block::Note(sanitize(n)));
    }
    if verbosity >= 2 {
        out.extend(debug.iter().map(|d| Block::Debug(sanitize(d))));
    }
    out
}

/// "70 more volumes, 2 notes": what a cut hides, counted in the unit the report lists.
fn more_count(rest: &[Block], unit: Option<(&str, &str)>) -> String {
    let (mut f, mut n, mut d) = (0, 0, 0);
    for b in rest {
        match b {
            Block::Finding(_) => f += 1,
            Block::Note(_) => n += 1,
            Block::Debug(_) => d += 1,
        }
    }
    let (one, many) = unit.unwrap_or(("finding", "findings"));
    let mut parts = Vec::new();
    for (k, one, many) in [
        (f, one, many),
        (n, "note", "notes"),
        (d, "verbose line", "verbose lines"),
    ] {
        if k > 0 {
            let more = if parts.is_empty() { "more " } else { "" };
            parts.push(format!("{k} {more}{}", if k == 1 { one } else { many }));
        }
    }
    parts.join(", ")
}

/// "... and 70 more volumes, 2 notes": what the `--max-output` cut hides.
fn more_marker(rest: &[Block], unit: Option<(&str, &str)>) -> String {
    format!("... and {}", more_count(rest, unit))
}

/// NRPE v2 packets (`check_nrpe -2`, and NRPE before 3.0) carry 1024 bytes, the last a NUL:
/// the first 1023 bytes of an answer are all such a client receives.
pub const NRPE_V2_MAX: usize = FIRST_LINE_MAX;

/// The line that ends the first [`NRPE_V2_MAX`] bytes of a longer answer: what follows and how
/// to see it. Free of `|` (perfdata) and of the characters Nagios strips from macros
/// (`` `~$&|'"<> ``).
fn v2_marker(rest: &[Block], unit: Option<(&str, &str)>, binary: &str, cut: bool) -> String {
    let more = if rest.is_empty() {
        "the rest of this finding follows".to_string()
    } else if cut {
        format!(
            "the rest of this finding and {} follow",
            more_count(rest, unit)
        )
    } else {
        format!("{} follow", more_count(rest, unit))
    };
    format!(
        "... {more}: NRPE v2 (check_nrpe -2) stops at 1 KiB here; to see all, query without -2 or run {} on the node (add --format json for one line per finding)",
        sanitize(binary)
    )
}

fn block_lines(b: &Block) -> &[String] {
    match b {
        Block::Finding(l) => l,
        Block::Note(l) | Block::Debug(l) => std::slice::from_ref(l),
    }
}

fn block_len(b: &Block) -> usize {
    block_lines(b).iter().map(|l| l.len() + 1).sum()
}

/// Append whole blocks from `blocks[start..]` while the answer stays within `max`, then the
/// `--max-output` marker for those that did not fit.
fn push_blocks(
    out: &mut String,
    blocks: &[Block],
    start: usize,
    max: usize,
    unit: Option<(&str, &str)>,
) {
    for i in start..blocks.len() {
        // Room for this block, plus the marker if blocks would still follow.
        let marker_room = if i + 1 < blocks.len() { 60 } else { 0 };
        if out.len() + block_len(&blocks[i]) + marker_room > max {
            let _ = writeln!(out, "{}", more_marker(&blocks[i..], unit));
            return;
        }
        for l in block_lines(&blocks[i]) {
            out.push_str(l);
            out.push('\n');
        }
    }
}

/// The plugin text: the status line (with the perfdata), then the long output, worst first.
///
/// An answer longer than [`NRPE_V2_MAX`] bytes is laid out so that its first 1023 bytes, all
/// that an NRPE v2 packet carries, are whole lines: the status line, the whole findings that fit,
/// and a line saying how many follow and how to see them, padded with spaces to end exactly at
/// byte 1023 (its newline the 1024th); the rest follows for clients that receive it all (NRPE
/// v3/v4 packets, Icinga). The padding is not counted against `--max-output`. When not even the
/// first finding fits whole before that line, its first whole lines that fit come before it ("the
/// rest of this finding and 39 more pods follow") and its other lines right after; when not even
/// its first line fits, the answer is left as it is (the v2 client then gets the first 1023
/// bytes' worth, the last line possibly cut).
fn render_nagios(report: &Report, o: &RenderOptions) -> String {
    let mut head = first_line(o.name, report);
    head.push('\n');
    let blocks = blocks(report, o.verbosity, o.debug);
    let mut full = head.clone();
    push_blocks(&mut full, &blocks, 0, o.max_output, report.unit);
    // Its last newline aside, the answer fits a v2 packet: nothing to arrange.
    if full.len() <= NRPE_V2_MAX + 1 || blocks.is_empty() {
        return full;
    }
    let mut i = 0;
    while i + 1 < blocks.len() {
        let marker = v2_marker(&blocks[i + 1..], report.unit, o.binary, false);
        if head.len() + block_len(&blocks[i]) + marker.len() > NRPE_V2_MAX {
            break;
        }
        for l in block_lines(&blocks[i]) {
            head.push_str(l);
            head.push('\n');
        }
        i += 1;
    }
    // Not even the first finding fits whole beside the marker (its step is long): its first
    // whole lines that fit (at least its own line, which names what failed), then the marker,
    // then the rest of the finding for the clients that receive it all.
    let cut = i == 0;
    let marker = v2_marker(&blocks[i.max(1)..], report.unit, o.binary, cut);
    let mut shown = 0;
    if cut {
        let lines = block_lines(&blocks[0]);
        while shown < lines.len()
            && head.len() + lines[shown].len() + 1 + marker.len() <= NRPE_V2_MAX
        {
            head.push_str(&lines[shown]);
            head.push('\n');
            shown += 1;
        }
        // Not even its first line fits: the answer as it is (a v2 client gets the status line
        // and as much of the finding as the packet holds, rather than a marker hiding it).
        if shown == 0 {
            return full;
        }
    }
    // The marker's newline is the 1024th byte: a v2 client shows the marker as the last line.
    let pad = NRPE_V2_MAX.saturating_sub(head.len() + marker.len());
    let _ = writeln!(head, "{marker}{}", " ".repeat(pad));
    // The padding is not the answer's content: it does not take the room of a finding under
    // --max-output (which would make the findings shown depend on the length of the ones before).
    let mut max = o.max_output + pad;
    if cut {
        for l in &block_lines(&blocks[0])[shown..] {
            head.push_str(l);
            head.push('\n');
        }
        max = max.max(head.len());
        i = 1;
    }
    push_blocks(&mut head, &blocks, i, max, report.unit);
    head
}

fn render_json(report: &Report, o: &RenderOptions) -> String {
    let mut findings: Vec<&crate::report::Finding> = report.findings.iter().collect();
    findings.sort_by(|a, b| crate::report::cmp_findings(a, b));
    let v = serde_json::json!({
        "check": o.binary,
        "name": o.name,
        "status": report.status,
        "exit_code": report.status.code(),
        "summary": report.summary,
        "findings": findings,
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
        Uom::Millis | Uom::Micros => "_seconds",
        Uom::Percent => "_percent",
        Uom::Counter => "_total",
        Uom::None => "",
    };
    if !name.ends_with(suffix) {
        name.push_str(suffix);
    }
    name
}

/// A label value as the text exposition format wants it: `\\`, `\"` and `\n` escaped.
pub fn prom_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The per-finding series: one per non-OK finding, labelled with its check, state, signal and
/// subject; its value is the state's exit code.
pub const FINDING_METRIC: &str = "k8s_storage_check_finding";
/// The names of a finding series' volume (namespace, pvc, pod), value 1: one per finding series
/// that has them, with that series' labels. Names come from API lookups that may fail for a run;
/// kept off the finding series, a failed lookup changes no alert's labels (an alert keyed on
/// `node`, `pv` and `signal` neither resolves nor restarts its `for:`).
pub const FINDING_INFO_METRIC: &str = "k8s_storage_check_finding_info";
/// Label names and values of a subject.
pub type Labels<'a> = Vec<(&'static str, &'a str)>;

/// The subject fields that are names rather than identity when the finding is about a volume.
pub const NAME_LABELS: [&str; 3] = ["namespace", "pvc", "pod"];

/// A subject's fields split into (identity, names): a finding about a volume (its `pv` known) is
/// identified by the volume, its node and device; the claim and pod using it are names, looked up
/// and possibly missing. A finding about a pod (no `pv`) is identified by its namespace and pod.
pub fn split_names(s: &crate::Subject) -> (Labels<'_>, Labels<'_>) {
    let volume = s.pv.as_deref().is_some_and(|p| !p.is_empty());
    s.fields()
        .into_iter()
        .partition(|(k, _)| !(volume && NAME_LABELS.contains(k)))
}

/// The runbook and the next step of a finding series, value 1, with that series' labels plus
/// `runbook` and `next`: kept off the finding series (a step names pods, which a failed lookup
/// changes) and off the info series (whose presence says the names were resolved).
pub const FINDING_NEXT_METRIC: &str = "k8s_storage_check_finding_next";

/// The bytes of `next` labels one answer carries at most (worst findings first): a node with
/// thousands of findings keeps its textfile small; the findings past it keep their `runbook`.
pub const NEXT_LABELS_MAX: usize = 16 * 1024;

/// How many non-OK findings were not exported as series because of the cap.
pub const FINDINGS_OMITTED_METRIC: &str = "k8s_storage_check_findings_omitted";
/// Non-OK findings per state, all of them (exported or not).
pub const FINDINGS_METRIC: &str = "k8s_storage_check_findings";

/// The run's state as a series: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
pub const STATUS_METRIC: &str = "k8s_storage_check_status";

/// Metric names the renderer writes itself; a perfdata label never takes one of them.
const RESERVED_METRICS: [&str; 8] = [
    STATUS_METRIC,
    FINDING_INFO_METRIC,
    FINDING_NEXT_METRIC,
    "k8s_storage_check_duration_seconds",
    "k8s_storage_check_timeout_seconds",
    FINDING_METRIC,
    FINDINGS_OMITTED_METRIC,
    FINDINGS_METRIC,
];

/// One sample of a series labelled with the check, with its HELP and TYPE lines.
fn sample(out: &mut String, check: &str, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name}{{check=\"{check}\"}} {}", prom_num(value));
}

/// The status series of a check binary alone: what the textfile runner writes for a check that
/// gave no usable answer (the same lines as at the head of every `--format prometheus` answer).
pub fn prometheus_status(binary: &str, status: Status) -> String {
    let mut out = String::new();
    status_series(&mut out, &prom_escape(binary), status);
    out
}

fn status_series(out: &mut String, check: &str, status: Status) {
    sample(
        out,
        check,
        STATUS_METRIC,
        "gauge",
        "Plugin state: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        f64::from(status.code()),
    );
}

fn render_prometheus(report: &Report, o: &RenderOptions) -> String {
    let check = prom_escape(o.binary);
    let mut out = String::new();
    let sample = |out: &mut String, name: &str, kind: &str, help: &str, value: f64| {
        sample(out, &check, name, kind, help, value);
    };
    let gauge = |out: &mut String, name: &str, help: &str, value: f64| {
        sample(out, name, "gauge", help, value);
    };
    status_series(&mut out, &check, report.status);
    gauge(
        &mut out,
        "k8s_storage_check_duration_seconds",
        "Wall time of the check run.",
        o.duration_secs,
    );
    if o.timeout_secs > 0.0 {
        gauge(
            &mut out,
            "k8s_storage_check_timeout_seconds",
            "The run's -t: the watchdog answers at this duration.",
            o.timeout_secs,
        );
    }
    let mut seen: std::collections::HashSet<String> = RESERVED_METRICS
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    for p in &report.perfdata {
        let name = metric_name(p);
        if !seen.insert(name.clone()) {
            continue;
        }
        // Prometheus wants base units: ms and us become seconds; a counter is typed as one.
        let (kind, value) = match p.uom {
            Uom::Millis => ("gauge", p.value / 1e3),
            Uom::Micros => ("gauge", p.value / 1e6),
            Uom::Counter => ("counter", p.value),
            _ => ("gauge", p.value),
        };
        sample(
            &mut out,
            &name,
            kind,
            &format!("Perfdata value {}.", p.safe_label()),
            value,
        );
    }
    render_finding_series(&mut out, report, o, &check);
    out
}

/// A sample value: Prometheus spells the non-finite ones `NaN`, `+Inf`, `-Inf`.
fn prom_num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn render_finding_series(out: &mut String, report: &Report, o: &RenderOptions, check: &str) {
    let mut bad: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.status != Status::Ok)
        .collect();
    // Worst first, so that the cap keeps what pages.
    bad.sort_by(|a, b| crate::report::cmp_findings(a, b));

    let _ = writeln!(
        out,
        "# HELP {FINDINGS_METRIC} Non-OK findings of the run by state, whether exported as series or not."
    );
    let _ = writeln!(out, "# TYPE {FINDINGS_METRIC} gauge");
    for st in [Status::Critical, Status::Warning, Status::Unknown] {
        let n = bad.iter().filter(|f| f.status == st).count();
        let _ = writeln!(
            out,
            "{FINDINGS_METRIC}{{check=\"{check}\",state=\"{}\"}} {n}",
            st.as_str().to_ascii_lowercase()
        );
    }

    let mut lines = Vec::new();
    let mut info = Vec::new();
    let mut steps = Vec::new();
    let mut keys = std::collections::HashSet::new();
    let mut omitted = 0usize;
    let mut next_budget = NEXT_LABELS_MAX;
    for f in &bad {
        let mut labels = format!(
            "check=\"{check}\",state=\"{}\"",
            f.status.as_str().to_ascii_lowercase()
        );
        if !f.signal.is_empty() {
            let _ = write!(labels, ",signal=\"{}\"", prom_escape(f.signal));
        }
        let (identity, names) = split_names(&f.subject);
        for (k, v) in identity {
            let _ = write!(labels, ",{k}=\"{}\"", prom_escape(v));
        }
        // Two findings with the same labels are one series (a duplicate would be rejected).
        if keys.contains(&labels) {
            continue;
        }
        if lines.len() >= o.max_findings_series {
            omitted += 1;
            continue;
        }
        keys.insert(labels.clone());
        lines.push(format!("{FINDING_METRIC}{{{labels}}} {}", f.status.code()));
        // The names, the runbook and the next step: all of them may change from run to run
        // (a lookup that failed, a step naming a pod), so they are kept off the finding series.
        // The runbook and the step within the answer's budget for steps, worst findings
        // first; past it a finding's runbook is still its signal's page.
        if let Some(n) = f.next_line().filter(|n| n.len() <= next_budget) {
            next_budget -= n.len();
            steps.push(format!(
                "{FINDING_NEXT_METRIC}{{{labels},runbook=\"{}\",next=\"{}\"}} 1",
                prom_escape(&f.runbook),
                prom_escape(&n)
            ));
        }
        if !names.is_empty() {
            let mut l = labels;
            for (k, v) in names {
                let _ = write!(l, ",{k}=\"{}\"", prom_escape(v));
            }
            info.push(format!("{FINDING_INFO_METRIC}{{{l}}} 1"));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "# HELP {FINDING_METRIC} One series per non-OK finding (worst first, capped by --max-findings-series): value is the state, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Labelled with the finding's identity only; the names of a volume's claim and pod are in {FINDING_INFO_METRIC}."
        );
        let _ = writeln!(out, "# TYPE {FINDING_METRIC} gauge");
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !info.is_empty() {
        let _ = writeln!(
            out,
            "# HELP {FINDING_INFO_METRIC} The names (namespace, pvc, pod) of a {FINDING_METRIC} series' volume as resolved this run, with that series' labels; absent when the names could not be looked up."
        );
        let _ = writeln!(out, "# TYPE {FINDING_INFO_METRIC} gauge");
        for l in info {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !steps.is_empty() {
        let _ = writeln!(
            out,
            "# HELP {FINDING_NEXT_METRIC} The runbook and the next step (the next: line, commands between backticks) of a {FINDING_METRIC} series' finding, with that series' labels; the steps of one answer stop at {NEXT_LABELS_MAX} bytes, worst first."
        );
        let _ = writeln!(out, "# TYPE {FINDING_NEXT_METRIC} gauge");
        for l in steps {
            out.push_str(&l);
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "# HELP {FINDINGS_OMITTED_METRIC} Non-OK findings left out of {FINDING_METRIC} by --max-findings-series."
    );
    let _ = writeln!(out, "# TYPE {FINDINGS_OMITTED_METRIC} gauge");
    let _ = writeln!(
        out,
        "{FINDINGS_OMITTED_METRIC}{{check=\"{check}\"}} {omitted}"
    );
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
        assert_eq!(
            shell_quote("$(id)`id`"),
            r#"'$(id)'"$(printf '\140')"'id'"$(printf '\140')"''"#
        );
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
            "a|b`c",
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
    use crate::report::{Finding, Perfdata, Subject};
    use crate::shell_quote;
    use crate::Range;

    fn opts(max: usize, v: u8) -> RenderOptions<'static> {
        RenderOptions {
            name: "RO_PVC_MOUNTS",
            binary: "check_ro_pvc_mounts",
            verbosity: v,
            max_output: max,
            duration_secs: 0.01,
            debug: &[],
            max_findings_series: 100,
            timeout_secs: 10.0,
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
    fn a_full_status_line_fits_nrpe_v2_whole_with_its_last_perfdata_byte() {
        // NRPE v2 sends 1024 bytes of which the last is NUL: 1023 bytes of text arrive.
        let r = Report::new(Status::Critical, "y".repeat(3000))
            .perf(Perfdata::new("stale", 7.0).min(0.0));
        let first = first_line("X", &r);
        assert_eq!(first.len(), 1023, "{first}");
        assert!(first.ends_with("stale=7;;;0"), "{first}");
    }

    #[test]
    fn long_thresholds_keep_every_perfdata_value_in_short_numbers() {
        let w = crate::Range::parse("@1e-300:1e300").unwrap();
        let mut r = Report::new(Status::Ok, "fine");
        for i in 0..8 {
            r = r.perf(
                Perfdata::new(format!("value_{i}"), 1.0)
                    .warn(Some(&w))
                    .crit(Some(&w)),
            );
        }
        let first = first_line("X", &r);
        assert_eq!(
            first.matches("=1;@1e-300:1e300;@1e-300:1e300").count(),
            8,
            "{first}"
        );
        assert!(!first.contains("left out"), "{first}");
    }

    #[test]
    fn perfdata_that_cannot_fit_is_left_out_with_a_word_not_silently() {
        let mut r = Report::new(Status::Ok, "fine");
        for i in 0..60 {
            r = r.perf(Perfdata::new(
                format!("a_rather_long_label_number_{i}"),
                1.0,
            ));
        }
        let first = first_line("X", &r);
        assert!(first.len() <= FIRST_LINE_MAX);
        assert!(first.contains("perfdata values left out"), "{first}");
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
            last.starts_with("... and ") && last.ends_with(" more findings"),
            "{last}"
        );
        let shown = out.lines().filter(|l| l.starts_with("[CRITICAL]")).count();
        let more: usize = last
            .trim_start_matches("... and ")
            .trim_end_matches(" more findings")
            .parse()
            .unwrap();
        assert_eq!(shown + more, 100);
        assert!(out.lines().next().unwrap().ends_with("| n=100"));
    }

    /// The cut counts findings in the report's unit, not lines: every finding here has two
    /// detail lines, and the notes are counted apart.
    #[test]
    fn more_marker_counts_findings_in_their_unit() {
        let mut r = Report::new(Status::Critical, "many").unit("volume", "volumes");
        for i in 0..80 {
            r = r.finding(
                Finding::new(Status::Critical, format!("pvc-{i} read-only"))
                    .detail("mounted at /var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/x/mount")
                    .detail("next: cordon the node"),
            );
        }
        r = r.note("one note").note("another note");
        let out = render(&r, Format::Nagios, &opts(2000, 0));
        assert!(out.len() <= 2000);
        let last = out.lines().last().unwrap();
        let shown = out.lines().filter(|l| l.starts_with("[CRITICAL]")).count();
        assert_eq!(
            last,
            format!("... and {} more volumes, 2 notes", 80 - shown)
        );
        // Whole findings only: the last one shown has its details.
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[lines.len() - 2].starts_with("    next:"), "{out}");
        // Sorted by name, numbers as numbers.
        assert!(lines[1].starts_with("[CRITICAL] pvc-0 "), "{out}");
        assert!(lines[4].starts_with("[CRITICAL] pvc-1 "), "{out}");
        // One left: singular.
        let mut r = Report::new(Status::Critical, "x").unit("volume", "volumes");
        for i in 0..2 {
            r = r.finding(Finding::new(
                Status::Critical,
                format!("{i}{}", "v".repeat(300)),
            ));
        }
        let out = render(&r, Format::Nagios, &opts(400, 0));
        assert!(out.ends_with("... and 1 more volume\n"), "{out}");
    }

    /// A first finding too long to fit whole before the v2 marker is not hidden behind it: it
    /// comes right after the status line (ro_pvc_mounts' one ext4 finding with its evidence and
    /// hint is such a block), cut between whole lines by the marker, none of them lost.
    #[test]
    fn a_first_finding_longer_than_the_first_kib_comes_first() {
        let mut f = Finding::new(Status::Critical, "pvc-a is read-only: x");
        for i in 0..30 {
            f = f.detail(format!("evidence line {i} of a long finding block"));
        }
        let r = Report::new(Status::Critical, "1 of 2 read-only")
            .finding(f)
            .finding(Finding::new(Status::Warning, "pvc-b has errors"));
        let out = render(&r, Format::Nagios, &opts(64 * 1024, 0));
        assert!(out.len() > NRPE_V2_MAX, "{out}");
        assert_eq!(
            out.lines().nth(1),
            Some("[CRITICAL] pvc-a is read-only: x"),
            "{out}"
        );
        assert!(
            out[..NRPE_V2_MAX]
                .contains("\n... the rest of this finding and 1 more finding follow: NRPE v2"),
            "{out}"
        );
        for i in 0..30 {
            assert!(
                out.contains(&format!(
                    "\n    evidence line {i} of a long finding block\n"
                )),
                "{out}"
            );
        }
    }

    /// Issue 33: through NRPE v2 packets only the first 1023 bytes arrive. They are whole
    /// lines: the status line with its perfdata, whole findings, and a line saying how many
    /// follow and how to see them, ending exactly at byte 1023; every finding follows it.
    #[test]
    fn first_kib_is_whole_lines_and_says_how_to_see_the_rest() {
        let mut r = Report::new(Status::Critical, "40 of 40 pods stuck")
            .unit("pod", "pods")
            .perf(Perfdata::new("stuck", 40.0));
        for i in 0..40 {
            r = r.finding(
                Finding::new(Status::Critical, format!("ns/pod-{i} stuck 300s"))
                    .detail(format!("next: kubectl -n ns describe pod pod-{i}")),
            );
        }
        let out = render(&r, Format::Nagios, &opts(64 * 1024, 0));
        // Everything is there for a client that receives it all.
        for i in 0..40 {
            assert!(
                out.contains(&format!("[CRITICAL] ns/pod-{i} stuck")),
                "{out}"
            );
            assert!(out.contains(&format!("describe pod pod-{i}\n")), "{out}");
        }
        assert!(!out.contains("... and "), "{out}");
        // The first 1023 bytes end a line: the marker's newline is the 1024th byte.
        let v2 = &out[..NRPE_V2_MAX];
        assert_eq!(out.as_bytes()[NRPE_V2_MAX], b'\n', "{out:?}");
        let lines: Vec<&str> = v2.lines().collect();
        assert!(lines[0].starts_with("RO_PVC_MOUNTS CRITICAL - 40 of 40"));
        assert!(lines[0].ends_with("| stuck=40"));
        let last = lines.last().unwrap().trim_end();
        let shown = lines
            .iter()
            .filter(|l| l.starts_with("[CRITICAL] "))
            .count();
        assert!(shown >= 5, "{v2}");
        assert_eq!(
            last,
            format!(
                "... {} more pods follow: NRPE v2 (check_nrpe -2) stops at 1 KiB here; to see all, query without -2 or run check_ro_pvc_mounts on the node (add --format json for one line per finding)",
                40 - shown
            )
        );
        // Whole findings: each shown finding has its detail line, right before the marker too.
        assert!(lines[lines.len() - 2].starts_with("    next: "), "{v2}");
        for l in &lines[1..lines.len() - 1] {
            assert!(l.starts_with("[CRITICAL] ns/pod-") || l.starts_with("    next: kubectl"));
        }
        assert!(!last.contains('|'));
        for c in "`~$&'\"<>".chars() {
            assert!(!last.contains(c), "{c} in {last}");
        }
        // What follows the marker starts with the next finding.
        assert!(
            out[NRPE_V2_MAX + 1..].starts_with(&format!("[CRITICAL] ns/pod-{shown} stuck")),
            "{out}"
        );
        // --max-output still caps the whole, with its own marker.
        let out = render(&r, Format::Nagios, &opts(2000, 0));
        let marker = out.lines().find(|l| l.contains("NRPE v2")).unwrap();
        let pad = marker.len() - marker.trim_end().len();
        assert!(out.len() <= 2000 + pad, "{}", out.len());
        assert_eq!(out.as_bytes()[NRPE_V2_MAX], b'\n');
        assert!(out.lines().last().unwrap().starts_with("... and "), "{out}");
        // A short answer is left alone: no marker, no padding.
        let out = render(&sample(), Format::Nagios, &opts(64 * 1024, 0));
        assert!(out.len() < NRPE_V2_MAX);
        assert!(!out.contains("NRPE v2"));
    }

    /// A first finding too long to fit whole beside the marker (a long step): its own line
    /// before the marker, its other lines right after it, then the other findings.
    #[test]
    fn nrpe_v2_cuts_a_long_first_finding_between_whole_lines() {
        let mut r = Report::new(Status::Critical, "3 stuck").unit("pod", "pods");
        for i in 0..3 {
            r = r.finding(
                Finding::new(Status::Critical, format!("ns/pod-{i} stuck")).detail("x".repeat(900)),
            );
        }
        let out = render(&r, Format::Nagios, &opts(64 * 1024, 0));
        assert_eq!(out.as_bytes()[NRPE_V2_MAX], b'\n', "{out:?}");
        let lines: Vec<&str> = out[..NRPE_V2_MAX].lines().collect();
        assert_eq!(lines[1], "[CRITICAL] ns/pod-0 stuck", "{out}");
        assert_eq!(
            lines[2].trim_end(),
            "... the rest of this finding and 2 more pods follow: NRPE v2 (check_nrpe -2) stops at 1 KiB here; to see all, query without -2 or run check_ro_pvc_mounts on the node (add --format json for one line per finding)"
        );
        assert_eq!(lines.len(), 3, "{out}");
        let rest: Vec<&str> = out[NRPE_V2_MAX + 1..].lines().collect();
        assert_eq!(rest[0], format!("    {}", "x".repeat(900)));
        assert_eq!(rest[1], "[CRITICAL] ns/pod-1 stuck");
        assert_eq!(rest.len(), 5, "{out}");
    }

    /// Issue 26: the step is a finding's last line in text, ends with the runbook, and is the
    /// same string in JSON (`next`, beside `runbook`); evidence shows from -v, in JSON always.
    #[test]
    fn next_step_and_runbook_in_text_and_json() {
        let f = Finding::new(Status::Critical, "pvc-a read-only")
            .signal("remounted_ro")
            .subject(Subject::new().node("k8s02").pv("pvc-a"))
            .next(format!("on k8s02: {} first", crate::next::cordon("k8s02")))
            .evidence("filesystem options (superblock): ro")
            .detail("mount: /m");
        let r = Report::new(Status::Critical, "x").finding(f);
        let out = render(&r, Format::Nagios, &opts(4096, 0));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1..],
            [
                "[CRITICAL] pvc-a read-only",
                "    mount: /m",
                "    next: on k8s02: `kubectl cordon k8s02` first — runbook: docs/runbooks/remounted_ro.md"
            ]
        );
        let out = render(&r, Format::Nagios, &opts(4096, 1));
        assert!(
            out.contains(
                "    mount: /m\n    evidence: filesystem options (superblock): ro\n    next: "
            ),
            "{out}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&render(&r, Format::Json, &opts(4096, 0))).unwrap();
        let f = &v["findings"][0];
        assert_eq!(f["runbook"], "docs/runbooks/remounted_ro.md");
        assert_eq!(
            f["next"],
            "on k8s02: `kubectl cordon k8s02` first — runbook: docs/runbooks/remounted_ro.md"
        );
        assert_eq!(f["evidence"][0], "filesystem options (superblock): ro");
        // An OK finding has no step; a non-OK one without a step still names its runbook.
        let ok = Finding::new(Status::Ok, "fine").signal("writable");
        assert_eq!(ok.next_line(), None);
        let bare = Finding::new(Status::Warning, "odd").signal("fs_errors");
        assert_eq!(
            bare.next_line().as_deref(),
            Some("see the runbook — runbook: docs/runbooks/fs_errors.md")
        );
        assert_eq!(
            Finding::new(Status::Warning, "x")
                .signal("a")
                .runbook("docs/runbooks/b.md")
                .signal("a")
                .runbook,
            "docs/runbooks/b.md"
        );
    }

    #[test]
    fn count_nouns() {
        assert_eq!(
            crate::count(1, "PV filesystem", "PV filesystems"),
            "1 PV filesystem"
        );
        assert_eq!(
            crate::count(0, "PV filesystem", "PV filesystems"),
            "0 PV filesystems"
        );
        assert_eq!(
            crate::count_of(1, 14, "PV filesystem", "PV filesystems"),
            "1 of 14 PV filesystems"
        );
        assert_eq!(crate::count_of(1, 1, "pod", "pods"), "1 of 1 pod");
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
        assert!(
            out.contains("k8s_storage_check_timeout_seconds{check=\"check_ro_pvc_mounts\"} 10\n")
        );
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("k8s_storage_check_"));
            value.parse::<f64>().unwrap();
        }
    }

    /// The status series alone (the textfile runner's answer for a check that gave none) is
    /// the head of a rendered answer in the same state: one renderer of that series.
    #[test]
    fn prometheus_status_alone_is_the_head_of_an_answer() {
        let alone = prometheus_status("check_ro_pvc_mounts", Status::Critical);
        assert_eq!(
            alone,
            "# HELP k8s_storage_check_status Plugin state: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.\n\
             # TYPE k8s_storage_check_status gauge\n\
             k8s_storage_check_status{check=\"check_ro_pvc_mounts\"} 2\n"
        );
        let out = render(&sample(), Format::Prometheus, &opts(4096, 0));
        assert!(out.starts_with(&alone), "{out}");
        assert!(prometheus_status("a\"b", Status::Unknown).contains("{check=\"a\\\"b\"} 3\n"));
    }

    fn opts_cap(max_series: usize) -> RenderOptions<'static> {
        RenderOptions {
            max_findings_series: max_series,
            ..opts(4096, 0)
        }
    }

    /// The guard against a non-OK finding without a step (issue 26) can fail: a finding whose
    /// check gave it none is found in the report and in the answer of every format, and one
    /// with its step, or an OK one, is not.
    #[test]
    fn a_non_ok_finding_without_a_step_is_caught_in_the_report_and_every_format() {
        use crate::report::{shows_missing_step, NO_STEP};
        let with_step = Finding::new(Status::Critical, "pvc-a read-only")
            .signal("remounted_ro")
            .subject(Subject::new().node("k8s02").pv("pvc-a"))
            .next(format!("on k8s02: {} first", crate::next::cordon("k8s02")));
        let ok = Finding::new(Status::Ok, "pvc-c fine").signal("writable");
        let good = Report::new(Status::Critical, "x")
            .finding(with_step.clone())
            .finding(ok.clone());
        assert!(good.findings_without_step().is_empty());
        for format in [Format::Nagios, Format::Json, Format::Prometheus] {
            let out = render(&good, format, &opts(65536, 1));
            assert!(!shows_missing_step(&out), "{format:?}: {out}");
        }
        for status in [Status::Warning, Status::Critical, Status::Unknown] {
            let bare = Finding::new(status, "sdc has errors")
                .signal("fs_errors")
                .subject(Subject::new().device("sdc"));
            assert!(bare.lacks_step());
            let bad = good.clone().finding(bare);
            let missing = bad.findings_without_step();
            assert_eq!(missing.len(), 1, "{status:?}");
            assert_eq!(missing[0].text, "sdc has errors");
            for format in [Format::Nagios, Format::Json, Format::Prometheus] {
                let out = render(&bad, format, &opts(65536, 0));
                assert!(
                    shows_missing_step(&out),
                    "{status:?} {format:?}: the fallback is not seen in {out}"
                );
                assert!(out.contains(NO_STEP), "{format:?}");
            }
        }
        // Without a signal a non-OK finding prints no `next:` line at all: still found in the
        // report.
        let nameless = Finding::new(Status::Warning, "odd");
        assert!(nameless.lacks_step() && nameless.next_line().is_none());
        assert!(!ok.lacks_step() && !with_step.lacks_step());
    }

    fn series(out: &str, metric: &str) -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn prometheus_one_series_per_non_ok_finding_with_subject_labels() {
        let r = Report::new(Status::Critical, "x")
            .finding(
                Finding::new(Status::Critical, "radarr read-only")
                    .signal("emergency_ro")
                    .subject(
                        Subject::new()
                            .namespace("media")
                            .pvc("radarr-config")
                            .pv("pvc-1"),
                    ),
            )
            .finding(
                Finding::new(Status::Ok, "fine")
                    .signal("rw")
                    .subject(Subject::new().pv("pvc-2")),
            )
            .finding(
                Finding::new(Status::Warning, "errors")
                    .signal("fs_errors")
                    .subject(Subject::new().device("sdc")),
            );
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        assert_eq!(
            series(&out, FINDING_METRIC),
            [
                r#"k8s_storage_check_finding{check="check_ro_pvc_mounts",state="critical",signal="emergency_ro",pv="pvc-1"} 2"#,
                r#"k8s_storage_check_finding{check="check_ro_pvc_mounts",state="warning",signal="fs_errors",device="sdc"} 1"#,
            ]
        );
        // The names of the volume are in the info series, with the finding series' labels.
        assert_eq!(
            series(&out, FINDING_INFO_METRIC),
            [
                r#"k8s_storage_check_finding_info{check="check_ro_pvc_mounts",state="critical",signal="emergency_ro",pv="pvc-1",namespace="media",pvc="radarr-config"} 1"#,
            ]
        );
        // The runbook and the next step of every non-OK finding, with its series' labels.
        assert_eq!(
            series(&out, FINDING_NEXT_METRIC),
            [
                r#"k8s_storage_check_finding_next{check="check_ro_pvc_mounts",state="critical",signal="emergency_ro",pv="pvc-1",runbook="docs/runbooks/emergency_ro.md",next="see the runbook — runbook: docs/runbooks/emergency_ro.md"} 1"#,
                r#"k8s_storage_check_finding_next{check="check_ro_pvc_mounts",state="warning",signal="fs_errors",device="sdc",runbook="docs/runbooks/fs_errors.md",next="see the runbook — runbook: docs/runbooks/fs_errors.md"} 1"#,
            ]
        );
        assert!(
            out.contains("k8s_storage_check_findings_omitted{check=\"check_ro_pvc_mounts\"} 0\n")
        );
        assert!(out.contains(
            "k8s_storage_check_findings{check=\"check_ro_pvc_mounts\",state=\"critical\"} 1\n"
        ));
        assert!(out.contains(
            "k8s_storage_check_findings{check=\"check_ro_pvc_mounts\",state=\"warning\"} 1\n"
        ));
        assert!(out.contains(
            "k8s_storage_check_findings{check=\"check_ro_pvc_mounts\",state=\"unknown\"} 0\n"
        ));
    }

    /// Issue 33: the names of a volume come from API lookups; a run where they fail must not
    /// change the finding series (its alert would resolve and fire again with `for:` restarted).
    /// A pod's own findings (no pv) keep namespace and pod: they are its identity.
    #[test]
    fn prometheus_a_failed_name_lookup_changes_no_finding_series() {
        let finding = |s: Subject| {
            Report::new(Status::Critical, "x").finding(
                Finding::new(Status::Critical, "read-only")
                    .signal("emergency_ro")
                    .subject(s.device("sdc")),
            )
        };
        let named = Subject::new()
            .node("k8s02")
            .namespace("media")
            .pod("radarr-0")
            .pvc("radarr-config")
            .pv("pvc-1");
        let bare = Subject::new().node("k8s02").pv("pvc-1");
        let a = render(&finding(named), Format::Prometheus, &opts_cap(100));
        let b = render(&finding(bare), Format::Prometheus, &opts_cap(100));
        assert_eq!(series(&a, FINDING_METRIC), series(&b, FINDING_METRIC));
        assert_eq!(
            series(&a, FINDING_METRIC),
            [
                r#"k8s_storage_check_finding{check="check_ro_pvc_mounts",state="critical",signal="emergency_ro",node="k8s02",pv="pvc-1",device="sdc"} 2"#
            ]
        );
        assert_eq!(
            series(&a, FINDING_INFO_METRIC),
            [
                r#"k8s_storage_check_finding_info{check="check_ro_pvc_mounts",state="critical",signal="emergency_ro",node="k8s02",pv="pvc-1",device="sdc",namespace="media",pod="radarr-0",pvc="radarr-config"} 1"#
            ]
        );
        assert!(series(&b, FINDING_INFO_METRIC).is_empty());
        assert!(
            !b.contains(&format!("# TYPE {FINDING_INFO_METRIC} ")),
            "no HELP/TYPE for an empty family"
        );
        // The step series does not depend on the names either.
        assert_eq!(
            series(&a, FINDING_NEXT_METRIC),
            series(&b, FINDING_NEXT_METRIC)
        );
        // A stuck pod: namespace and pod are what the finding is about.
        let r = Report::new(Status::Critical, "x").finding(
            Finding::new(Status::Critical, "stuck")
                .signal("stuck_no_status")
                .subject(Subject::new().node("k8s01").namespace("ws").pod("ws-1")),
        );
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        assert_eq!(
            series(&out, FINDING_METRIC),
            [
                r#"k8s_storage_check_finding{check="check_ro_pvc_mounts",state="critical",signal="stuck_no_status",node="k8s01",namespace="ws",pod="ws-1"} 2"#
            ]
        );
        assert!(series(&out, FINDING_INFO_METRIC).is_empty());
        assert_eq!(
            series(&out, FINDING_NEXT_METRIC),
            [
                r#"k8s_storage_check_finding_next{check="check_ro_pvc_mounts",state="critical",signal="stuck_no_status",node="k8s01",namespace="ws",pod="ws-1",runbook="docs/runbooks/stuck_no_status.md",next="see the runbook — runbook: docs/runbooks/stuck_no_status.md"} 1"#
            ]
        );
    }

    /// The next steps stop at NEXT_LABELS_MAX bytes per answer, worst first (a finding past it
    /// has its runbook by its signal's page).
    #[test]
    fn prometheus_next_labels_are_bounded() {
        let mut r = Report::new(Status::Critical, "x");
        for i in 0..100 {
            r = r.finding(
                Finding::new(Status::Critical, format!("c{i}"))
                    .signal("emergency_ro")
                    .subject(Subject::new().pv(format!("p{i}")))
                    .next(format!(
                        "{} {}",
                        "x".repeat(1000),
                        crate::next::cordon("k8s02")
                    )),
            );
        }
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        let steps = series(&out, FINDING_NEXT_METRIC);
        assert!(steps.len() >= 14 && steps.len() < 17, "{}", steps.len());
        assert!(steps
            .iter()
            .all(|l| l.contains(",runbook=\"docs/runbooks/emergency_ro.md\",next=\"")));
        assert!(out.len() < 64 * 1024, "{}", out.len());
    }

    /// The info series follow the finding series' cap: never more of them than finding series.
    #[test]
    fn prometheus_info_series_are_capped_with_the_findings() {
        let mut r = Report::new(Status::Critical, "x");
        for i in 0..30 {
            r = r.finding(
                Finding::new(Status::Critical, format!("c{i}"))
                    .signal("c")
                    .subject(
                        Subject::new()
                            .pv(format!("p{i}"))
                            .namespace("ns")
                            .pvc(format!("c{i}")),
                    ),
            );
        }
        let out = render(&r, Format::Prometheus, &opts_cap(7));
        assert_eq!(series(&out, FINDING_METRIC).len(), 7);
        assert_eq!(series(&out, FINDING_INFO_METRIC).len(), 7);
    }

    #[test]
    fn prometheus_finding_series_are_capped_worst_first_and_counted() {
        let mut r = Report::new(Status::Critical, "x");
        for i in 0..50 {
            r = r.finding(
                Finding::new(Status::Warning, format!("w{i}"))
                    .signal("w")
                    .subject(Subject::new().pv(format!("w{i}"))),
            );
        }
        for i in 0..5 {
            r = r.finding(
                Finding::new(Status::Critical, format!("c{i}"))
                    .signal("c")
                    .subject(Subject::new().pv(format!("c{i}"))),
            );
        }
        let out = render(&r, Format::Prometheus, &opts_cap(10));
        let s = series(&out, FINDING_METRIC);
        assert_eq!(s.len(), 10);
        assert_eq!(
            s.iter()
                .filter(|l| l.contains("state=\"critical\""))
                .count(),
            5
        );
        assert!(
            out.contains("k8s_storage_check_findings_omitted{check=\"check_ro_pvc_mounts\"} 45\n")
        );
        // A cap of 0 exports no series (and no HELP/TYPE for an empty family), only the counts.
        let out = render(&r, Format::Prometheus, &opts_cap(0));
        assert!(!out.contains(&format!("{FINDING_METRIC}{{")));
        assert!(!out.contains(&format!("TYPE {FINDING_METRIC} ")));
        assert!(
            out.contains("k8s_storage_check_findings_omitted{check=\"check_ro_pvc_mounts\"} 55\n")
        );
    }

    #[test]
    fn prometheus_identical_findings_are_one_series() {
        let f = Finding::new(Status::Critical, "a")
            .signal("s")
            .subject(Subject::new().pv("p"));
        let r = Report::new(Status::Critical, "x")
            .finding(f.clone())
            .finding(f.clone().detail("other text, same labels"));
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        assert_eq!(series(&out, FINDING_METRIC).len(), 1);
        assert!(
            out.contains("k8s_storage_check_findings_omitted{check=\"check_ro_pvc_mounts\"} 0\n")
        );
    }

    #[test]
    fn prometheus_label_values_are_escaped() {
        let r = Report::new(Status::Critical, "x").finding(
            Finding::new(Status::Critical, "a")
                .signal("s")
                .subject(Subject::new().mount("/var/lib/a\"b\\c\nd")),
        );
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        assert!(out.contains(r#"mount="/var/lib/a\"b\\c\nd"} 2"#), "{out}");
        assert_eq!(prom_escape("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
    }

    #[test]
    fn prometheus_base_units_reserved_names_and_non_finite_values() {
        let r = Report::new(Status::Ok, "x")
            .perf(Perfdata::new("lag", 250.0).uom(Uom::Millis))
            .perf(Perfdata::new("events", 7.0).uom(Uom::Counter))
            .perf(Perfdata::new("status", 9.0))
            .perf(Perfdata::new("ratio", f64::INFINITY));
        let out = render(&r, Format::Prometheus, &opts_cap(100));
        assert!(out.contains("k8s_storage_check_lag_seconds{check=\"check_ro_pvc_mounts\"} 0.25\n"));
        assert!(out.contains("# TYPE k8s_storage_check_events_total counter\n"));
        assert_eq!(out.matches("k8s_storage_check_status{").count(), 1);
        assert!(out.contains("k8s_storage_check_ratio{check=\"check_ro_pvc_mounts\"} +Inf\n"));
    }
}
