//! Threshold ranges, durations and timeouts: any text is either parsed or rejected, never a panic,
//! and a parsed range renders to text that parses back to the same range.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(r) = plugin::Range::parse(s) {
        let again = plugin::Range::parse(&r.to_string()).expect("rendered range parses");
        assert_eq!(r.start, again.start);
        assert_eq!(r.end, again.end);
        assert_eq!(r.inside, again.inside);
        let _ = r.alerts(0.0);
    }
    let _ = plugin::Range::parse_duration(s);
    if let Ok(d) = plugin::parse_duration(s) {
        let _ = plugin::fmt_duration(d);
    }
    let _ = plugin::sanitize(s);
});
