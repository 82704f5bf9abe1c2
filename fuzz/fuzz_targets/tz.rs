#![no_main]
//! The `--tz` zone sources: a TZif file (`Zone::parse`), its POSIX TZ footer rule and a fixed
//! offset. A TZif file is read from the zoneinfo directory or a path the user names.
use libfuzzer_sys::fuzz_target;
use node::logs::time::Tz;

fuzz_target!(|data: &[u8]| {
    if let Ok(z) = node::logs::tz::Zone::parse(data) {
        for t in [i64::MIN / 2, -1, 0, 1_783_938_484, i64::MAX / 2] {
            let _ = z.offset_at(t);
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(p) = node::logs::tz::PosixTz::parse(s) {
            for t in [-1, 0, 1_783_938_484] {
                let _ = p.offset_at(t);
            }
        }
        let _ = node::logs::tz::parse_fixed(s);
    }
});
