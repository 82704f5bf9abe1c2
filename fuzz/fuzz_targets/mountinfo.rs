//! The mount table parser: garbled, truncated or hostile lines give an error naming the line,
//! never a panic; parsed mounts classify under a kubelet root without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fn m_on(map: &Result<node::usage::DeviceUsage, node::mountinfo::ParseError>, dev: (u32, u32)) -> usize {
    map.as_ref().map_or(0, |m| m.on(dev).count())
}

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
    // The device-usage map over the same text: the same verdict on every line, and every mount
    // it keeps readable back, whatever the escapes and roots.
    let roots = [
        std::path::PathBuf::from("/var/lib/kubelet"),
        std::path::PathBuf::from("/var/lib//./k"),
    ];
    for scope in [node::usage::Scope::All, node::usage::Scope::Volumes] {
        let map = node::usage::DeviceUsage::parse(&text, "fuzz", &roots, scope);
        assert_eq!(map.is_ok(), node::mountinfo::parse(&text, "fuzz").is_ok());
        for u in map.iter().flat_map(|m| m.uses()) {
            let _ = (u.volume, u.pod_uid, u.mount_point.len(), m_on(&map, u.dev));
        }
    }
});
