//! The words of the answer: summary, findings and notes, kept apart from the decisions so that
//! what the operator reads can be read in one place.

use crate::gather::SourceInfo;
use crate::volume::{secs, VolumeState};
use node::logs::time;
use plugin::fmt_duration;

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The first line: the worst three volumes (with their age and max backoff while still failing);
/// `over`: volumes failing past the cap of volumes kept, counted only.
pub fn summary(vols: &[VolumeState], over: u64, window: &str) -> String {
    let total = vols.len() as u64 + over;
    if total == 0 {
        return format!("no failed volume operations in the last {window}");
    }
    let parts: Vec<String> = vols
        .iter()
        .take(3)
        .map(|v| {
            let mut s = format!("{} {}", v.label(), v.ops.join("/"));
            if v.active && v.failing_for_ms() > 0 {
                s.push_str(&format!(" failing for {}", v.failing_for()));
            }
            if v.at_max_backoff() {
                s.push_str(" at max backoff");
            }
            s
        })
        .collect();
    let rest = total - parts.len() as u64;
    let more = if rest > 0 {
        format!(" and {} more volumes", group_digits(rest))
    } else {
        String::new()
    };
    format!(
        "{} volume{} with failing operations in {window}: {}{more}",
        group_digits(total),
        plural(total as usize),
        parts.join("; ")
    )
}

/// `12345` as `12 345` (a count an operator reads at a glance).
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Volumes past the cap: counted, not listed.
pub fn over_cap_note(over: u64) -> String {
    format!(
        "{} more {} failed in the window than the {} kept (the cap of volumes one run keeps): they are counted, not listed",
        group_digits(over),
        if over == 1 { "volume" } else { "volumes" },
        crate::acc::MAX_VOLUMES
    )
}

/// One volume's finding.
pub fn volume(v: &VolumeState, window: &str) -> String {
    let mut text = format!(
        "{} {}: {} failure{} in {window}, last {}, backoff {}",
        v.label(),
        v.ops.join("/"),
        v.failures_in_window,
        plural(v.failures_in_window),
        time::fmt_utc(v.last),
        fmt_duration(secs(v.backoff_ms as i64)),
    );
    if v.active {
        text.push_str(&format!(
            ", failing for {} (since {})",
            v.failing_for(),
            time::fmt_utc(v.streak_start)
        ));
    } else {
        text.push_str(", not seen failing since");
    }
    if !v.pods.is_empty() {
        text.push_str(&format!(", pods {}", v.pods.join(" ")));
    }
    text
}

/// What was read from one source, and how many lines could not be read as kubelet records (of
/// the lines the check looks at: the first ones, sampled for the log's shape, and every line
/// naming a retry; the others are skipped at grep speed, never parsed).
pub fn source(s: &SourceInfo) -> String {
    let unread = s.unread_sampled + s.unread_candidates;
    let unread = if unread > 0 {
        format!(
            "; {} line{} could not be read as kubelet records ({} of the first {} line{}, {} naming a retry)",
            unread,
            plural(unread as usize),
            s.unread_sampled,
            s.sampled,
            plural(s.sampled as usize),
            s.unread_candidates
        )
    } else {
        String::new()
    };
    format!(
        "read {}: {} bytes, {} candidate line{}{}{unread}",
        s.name,
        s.bytes,
        s.hits,
        plural(s.hits as usize),
        if s.complete {
            ""
        } else {
            " (stopped at the deadline)"
        }
    )
}

pub fn future_note(n: usize) -> String {
    format!(
        "{} dated more than 5m after now {} ignored: the clock jumped back, or the log's times are in another time zone than this check's (klog times are local)",
        plugin::count(n, "failure line", "failure lines"),
        if n == 1 { "was" } else { "were" }
    )
}

pub fn deadline_note(sources: &[&str]) -> String {
    format!(
        "reading stopped at the deadline in {} (raise -t; with --state-dir the next run continues)",
        sources.join(", ")
    )
}

pub fn deadline_summary(sources: &[&str]) -> String {
    format!(
        "could not read all of {} before the deadline; no failures in what was read",
        sources.join(", ")
    )
}

/// The answer when a source gave nothing at all.
pub fn empty_summary(sources: &[&str]) -> String {
    format!(
        "{} gave nothing to read (an empty file, /dev/null, or a pipe that ended at once): no kubelet log line was checked; give the kubelet's log (--log-file, --journal-unit)",
        sources.join(", ")
    )
}
