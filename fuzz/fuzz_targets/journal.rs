//! journalctl -o json lines: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = node::logs::journal::parse_entry(data);
    let _ = node::logs::journal::cursor_of(data);
});
