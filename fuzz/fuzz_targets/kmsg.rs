//! /dev/kmsg records and the kernel-message classifier: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for rec in node::logs::kmsg::split_records(data) {
        if let Some(r) = node::logs::kmsg::parse_record(rec) {
            let _ = check_storage_kernel_errors::classify::classify(&r.text);
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = check_storage_kernel_errors::classify::classify(s);
        let _ = check_storage_kernel_errors::classify::strip_jbd2(s);
    }
});
