//! Kubeconfig files (YAML, inline base64 data, contexts): any bytes give a config or an UNKNOWN
//! reason, never a panic, and never a message carrying a token.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("/fuzz/kubeconfig");
    let src = kube::Source::Flag(path.to_path_buf());
    if let Err(e) = kube::config::from_kubeconfig(data, path, src, None) {
        assert!(!e.0.contains("fuzz-secret-token"), "a secret reached an error message");
    }
    let _ = kube::config::base64_decode(&String::from_utf8_lossy(data));
});
