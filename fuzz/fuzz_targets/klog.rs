//! Kubelet log lines (klog text bare or behind a syslog prefix, JSON logging, old and new
//! operation keys): any bytes give a failure record or nothing, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use node::logs::time::FixedTz;

fuzz_target!(|data: &[u8]| {
    let now = 1_783_938_484_000i64;
    let _ = check_kubelet_nested_ops::parse::parse_line(data, None, now, &FixedTz(0));
    let _ = check_kubelet_nested_ops::parse::parse_line(data, Some(now - 1000), now, &FixedTz(36000));
    let _ = node::logs::time::find_klog_header(data);
    let _ = node::logs::time::syslog_prefix(data);
    let _ = node::logs::time::parse_rfc3339(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = check_kubelet_nested_ops::parse::parse_message(s);
        let _ = check_kubelet_nested_ops::parse::go_unquote(s);
        let _ = node::logs::time::parse_go_time(s);
        let _ = node::logs::time::parse_go_duration(s);
    }
});
