//! Pod, PV, VolumeAttachment and Event list documents (kubectl get -o json / API pages): any
//! bytes are parsed item by item or rejected, never a panic; label selectors too.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kube::list::read_list::<kube::Pod, _, _>(data, |p| {
        let _ = p.is_scheduled();
        let _ = p.all_container_statuses().count();
        let _ = p.claim_names().count();
    });
    let _ = kube::list::read_list::<kube::PersistentVolume, _, _>(data, |_| {});
    let _ = kube::list::read_list::<kube::VolumeAttachment, _, _>(data, |_| {});
    let _ = kube::list::read_list::<kube::Event, _, _>(data, |_| {});
    // Mixed-kind documents (`kubectl get pv,volumeattachments,csidrivers -o json`).
    let _ = kube::objects::parse_objects(data, "PersistentVolume", |_| {});
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(sel) = kube::Selector::parse(s) {
            let _ = sel.matches(&Default::default());
        }
        let _ = kube::time::parse_rfc3339(s);
    }
});
