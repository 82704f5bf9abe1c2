//! The mount table parser: garbled, truncated or hostile lines give an error naming the line,
//! never a panic; parsed mounts classify under a kubelet root without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(mounts) = node::mountinfo::parse(&text, "fuzz") {
        let roots = [std::path::PathBuf::from("/var/lib/kubelet")];
        for m in &mounts {
            let _ = node::kubelet::classify(&m.mount_point, &roots);
            let _ = m.super_ro();
        }
    }
    let _ = node::mountinfo::unescape(&text);
});
