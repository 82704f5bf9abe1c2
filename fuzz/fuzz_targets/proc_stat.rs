//! `/proc/<tid>/stat` as the stuck-probe memory reads it (issue 16): never a panic, and a state
//! and start time only from a line with a `)` and enough fields after it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some((_, start)) = node::probe::parse_stat(s) {
            assert!(s.contains(')'));
            let _ = start;
        }
    }
});
