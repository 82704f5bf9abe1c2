//! Values of iSCSI sysfs attributes: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = node::iscsi::RecoveryTmo::parse(s);
    }
});
