//! vol_data.json as the kubelet writes it: any bytes parse or are rejected, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = node::kubelet::parse_vol_data(&String::from_utf8_lossy(data));
});
