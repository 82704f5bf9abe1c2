//! The kubelet-log format test applied to a source's first lines (issue 16: a log of another
//! format is UNKNOWN, not "no failures"), and the scanner's sampling: never a panic, never more
//! lines recognized than sampled nor more sampled than the scanner's limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use check_kubelet_nested_ops::parse;
use node::logs::scan;

fuzz_target!(|data: &[u8]| {
    let _ = parse::is_log_line(data);
    let o = scan::Scan {
        needles: parse::NEEDLES,
        deadline: None,
        consume_partial_tail: true,
        recognize: Some(parse::is_log_line),
    };
    if let Ok(st) = scan::scan(&mut &data[..], &o, |_| {}, |_| {}) {
        assert!(st.recognized <= st.sampled && st.sampled <= scan::SAMPLE_LINES);
    }
});
