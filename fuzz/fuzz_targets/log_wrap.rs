#![no_main]
//! Container runtime log wrappers (Docker json-file, CRI): one physical line unwrapped, and the
//! partial-line joiner over every line of the input.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = node::logs::wrap::unwrap(data);
    let mut j = node::logs::wrap::Joiner::new();
    let mut n = 0usize;
    for line in data.split_inclusive(|b| *b == b'\n') {
        j.feed(line, |l| {
            // Lossy decoding grows a byte to at most three (U+FFFD).
            assert!(l.text.len() <= 3 * data.len() + 3);
            n += 1;
        });
    }
    j.finish(|_| n += 1);
});
