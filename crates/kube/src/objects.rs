//! Documents of several kinds at once, as `kubectl get pv,volumeattachments,csidrivers -o json`
//! prints them: one reader sorts their Pods, PersistentVolumes, VolumeAttachments and CSIDrivers
//! into the same typed forms the API gives, so a check's cross-checks read files and the API alike.
//!
//! Accepted: a `List` whose items carry their `kind`, a typed list (`PodList`: items take the
//! list's kind), and a single object (`kubectl get pv pvc-1 -o json`). Items without a kind in a
//! document without one take the kind the option implies (`Pod` for `--pods-json`). Every item is
//! parsed on its own as it streams by (the document never exists as a JSON tree), under the same
//! size cap and caller-privilege open as every JSON input ([`crate::json::read_document`]).

use crate::types::{CsiDriver, PersistentVolume, Pod, VolumeAttachment};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;
use std::path::Path;

/// One object of a mixed document, typed by its kind (handed over by value once, never stored
/// as this enum: the size difference of the variants costs nothing).
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Object {
    Pod(Pod),
    PersistentVolume(PersistentVolume),
    VolumeAttachment(VolumeAttachment),
    CsiDriver(CsiDriver),
    /// Any other kind (skipped by the checks; counted for `-vv`).
    Other(String),
}

impl Object {
    fn parse(kind: &str, raw: &str) -> Result<Object, serde_json::Error> {
        Ok(match kind {
            "Pod" => Object::Pod(serde_json::from_str(raw)?),
            "PersistentVolume" => Object::PersistentVolume(serde_json::from_str(raw)?),
            "VolumeAttachment" => Object::VolumeAttachment(serde_json::from_str(raw)?),
            "CSIDriver" => Object::CsiDriver(serde_json::from_str(raw)?),
            k => Object::Other(k.to_string()),
        })
    }
}

/// What a mixed document says about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocumentKind {
    /// Its `kind` (`List`, `PodList`, `PersistentVolume` for a single object; empty when none).
    pub kind: String,
    /// It is a list (has `items`, possibly empty or null).
    pub is_list: bool,
}

/// The objects of the documents read, by kind (for callers that keep them all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Objects {
    pub pods: Vec<Pod>,
    pub pvs: Vec<PersistentVolume>,
    pub attachments: Vec<VolumeAttachment>,
    pub drivers: Vec<CsiDriver>,
    /// A VolumeAttachment, or a (possibly empty) `VolumeAttachmentList`, was seen: the documents
    /// can tell "no attachment" from "attachments not supplied".
    pub saw_attachments: bool,
    /// Objects of other kinds, skipped.
    pub ignored: usize,
}

impl Objects {
    /// Keep one object.
    pub fn add(&mut self, o: Object) {
        match o {
            Object::Pod(p) => self.pods.push(p),
            Object::PersistentVolume(p) => self.pvs.push(p),
            Object::VolumeAttachment(v) => {
                self.attachments.push(v);
                self.saw_attachments = true;
            }
            Object::CsiDriver(d) => self.drivers.push(d),
            Object::Other(_) => self.ignored += 1,
        }
    }

    /// [`read_objects`] into this collection.
    pub fn read(
        &mut self,
        path: &Path,
        what: &str,
        default_kind: &str,
    ) -> Result<(), plugin::Unknown> {
        let doc = read_objects(path, what, default_kind, |o| self.add(o))?;
        if doc.kind == "VolumeAttachmentList" {
            self.saw_attachments = true;
        }
        Ok(())
    }
}

/// An item's kind, read without parsing the rest.
#[derive(Deserialize)]
struct KindOnly {
    #[serde(default)]
    kind: Option<String>,
}

/// Read the document at `path` (`-`: stdin), handing each object to `f` as it is parsed. `what`
/// names the option in messages (`--pvs-json`); `default_kind` is the kind of items nothing else
/// names.
pub fn read_objects(
    path: &Path,
    what: &str,
    default_kind: &str,
    mut f: impl FnMut(Object),
) -> Result<DocumentKind, plugin::Unknown> {
    crate::json::read_document(path, what, |doc| {
        let seed = DocSeed {
            default_kind,
            f: &mut f,
        };
        match doc {
            crate::json::Document::Slice(s) => Ok(parse_objects(s, default_kind, &mut f)?),
            crate::json::Document::Reader(r) => {
                let mut de = serde_json::Deserializer::from_reader(r);
                let k = seed.deserialize(&mut de)?;
                de.end()?;
                Ok(k)
            }
        }
    })
}

/// [`read_objects`] on a document in memory (what a mapped file or the fuzz target hands over).
pub fn parse_objects(
    s: &[u8],
    default_kind: &str,
    mut f: impl FnMut(Object),
) -> Result<DocumentKind, serde_json::Error> {
    let seed = DocSeed {
        default_kind,
        f: &mut f,
    };
    let mut de = serde_json::Deserializer::from_slice(s);
    let k = seed.deserialize(&mut de)?;
    de.end().map(|_| k)
}

struct DocSeed<'a> {
    default_kind: &'a str,
    f: &'a mut dyn FnMut(Object),
}

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = DocumentKind;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<DocumentKind, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = DocumentKind;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes List or object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DocumentKind, A::Error> {
        let mut kind: Option<String> = None;
        let mut had_items = false;
        // Items without a kind met before the document's own kind (kept to be sorted at the end).
        let mut pending: Vec<(usize, Box<RawValue>)> = Vec::new();
        // The parts of a single object.
        let mut parts: Vec<(&'static str, Box<RawValue>)> = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "kind" => kind = map.next_value::<Option<String>>()?,
                "items" => {
                    had_items = true;
                    map.next_value_seed(ItemsSeed {
                        list_kind: kind.as_deref(),
                        f: &mut *self.f,
                        pending: &mut pending,
                    })?;
                }
                k @ ("metadata" | "spec" | "status") => {
                    let name = match k {
                        "metadata" => "metadata",
                        "spec" => "spec",
                        _ => "status",
                    };
                    parts.push((name, map.next_value()?));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let item_kind = kind
            .as_deref()
            .and_then(|k| k.strip_suffix("List"))
            .filter(|k| !k.is_empty())
            .unwrap_or(self.default_kind);
        let shape = |i: Option<usize>, e: serde_json::Error| {
            let at = i.map(|i| format!("item {i}: ")).unwrap_or_default();
            de::Error::custom(format!("{at}unexpected shape: {e}"))
        };
        if had_items {
            for (i, raw) in pending {
                (self.f)(Object::parse(item_kind, raw.get()).map_err(|e| shape(Some(i), e))?);
            }
            return Ok(DocumentKind {
                kind: kind.unwrap_or_default(),
                is_list: true,
            });
        }
        if !parts.iter().any(|(k, _)| *k == "metadata") {
            return Err(de::Error::custom(
                "neither a List nor a Kubernetes object (no 'items', no 'metadata')",
            ));
        }
        // One object (`kubectl get pv NAME -o json`): its own kind, else the option's.
        let text = format!(
            "{{{}}}",
            parts
                .iter()
                .map(|(k, v)| format!("\"{k}\":{}", v.get()))
                .collect::<Vec<_>>()
                .join(",")
        );
        let one = kind.as_deref().unwrap_or(self.default_kind);
        (self.f)(Object::parse(one, &text).map_err(|e| shape(None, e))?);
        Ok(DocumentKind {
            kind: kind.unwrap_or_default(),
            is_list: false,
        })
    }
}

struct ItemsSeed<'a, 'k> {
    list_kind: Option<&'k str>,
    f: &'a mut dyn FnMut(Object),
    pending: &'a mut Vec<(usize, Box<RawValue>)>,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of items")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let list_kind = self
            .list_kind
            .and_then(|k| k.strip_suffix("List"))
            .filter(|k| !k.is_empty());
        let mut i = 0usize;
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            let shape = |e: serde_json::Error| {
                de::Error::custom(format!("item {i}: unexpected shape: {e}"))
            };
            let own: KindOnly = serde_json::from_str(raw.get()).map_err(shape)?;
            match own.kind.as_deref().or(list_kind) {
                Some(k) => (self.f)(Object::parse(k, raw.get()).map_err(shape)?),
                None => self.pending.push((i, raw)),
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(text: &str) -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("kube-objects-{}-{n}.json", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    fn read(text: &str, what: &str, default_kind: &str, into: &mut Objects) -> Result<(), String> {
        let p = tmp(text);
        let r = into.read(&p, what, default_kind).map_err(|e| e.0);
        std::fs::remove_file(&p).unwrap();
        r
    }

    const PVS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pvc-81b676e6"},"spec":{"csi":{"driver":"driver.longhorn.io","volumeHandle":"pvc-81b676e6"},"claimRef":{"kind":"PersistentVolumeClaim","namespace":"shop","name":"data-web-0"}}},
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-nfs"},"spec":{"nfs":{"server":"x","path":"/"}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"csi-1"},"spec":{"attacher":"driver.longhorn.io","nodeName":"worker-04","source":{"persistentVolumeName":"pvc-81b676e6"}},"status":{"attached":true}},
      {"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"nfs.csi.k8s.io"},"spec":{"attachRequired":false}},
      {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}
    ]}"#;

    #[test]
    fn kinds_of_one_list_are_sorted_into_their_types() {
        let mut o = Objects::default();
        read(PVS, "--pvs-json", "PersistentVolume", &mut o).unwrap();
        assert_eq!(o.pvs.len(), 2);
        assert_eq!(
            o.pvs[0].spec.csi.as_ref().unwrap().volume_handle,
            "pvc-81b676e6"
        );
        assert_eq!(o.attachments[0].spec.node_name, "worker-04");
        assert!(o.saw_attachments);
        assert_eq!(o.drivers[0].metadata.name, "nfs.csi.k8s.io");
        assert_eq!(o.drivers[0].spec.attach_required, Some(false));
        assert_eq!(o.ignored, 1);
    }

    #[test]
    fn typed_lists_and_single_objects() {
        let mut o = Objects::default();
        read(
            r#"{"kind":"PodList","items":[{"metadata":{"name":"a","namespace":"n","uid":"x"},"spec":{"nodeName":"worker-04"}}]}"#,
            "p",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        read(
            r#"{"kind":"VolumeAttachmentList","items":[]}"#,
            "v",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        read(
            r#"{"kind":"PersistentVolume","metadata":{"name":"pv1"},"spec":{}}"#,
            "v",
            "Pod",
            &mut o,
        )
        .unwrap();
        // A typed list whose kind follows its items (hand-made): the items still take it.
        read(
            r#"{"items":[{"metadata":{"name":"va"},"spec":{"nodeName":"n"}}],"kind":"VolumeAttachmentList"}"#,
            "v",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        assert_eq!(o.pods[0].metadata.uid, "x");
        assert_eq!(o.pvs[0].metadata.name, "pv1");
        assert_eq!(o.attachments[0].metadata.name, "va");
        assert!(o.saw_attachments);
        // Items without any kind take the option's.
        let mut o = Objects::default();
        read(
            r#"{"items":[{"metadata":{"name":"a","uid":"u"}}],"metadata":{"resourceVersion":""}}"#,
            "p",
            "Pod",
            &mut o,
        )
        .unwrap();
        assert_eq!(o.pods[0].metadata.uid, "u");
        assert!(!o.saw_attachments);
    }

    #[test]
    fn garbage_is_an_error_naming_the_option() {
        let mut o = Objects::default();
        for bad in [
            "",
            "{",
            "[1,2]",
            r#"{"items":5}"#,
            r#"{"items":[{"metadata":"str"}]}"#,
            r#"{"kind":"List"}"#,
            "<html>",
        ] {
            let e = read(bad, "--pods-json", "Pod", &mut o).unwrap_err();
            assert!(e.starts_with("cannot parse --pods-json "), "{bad}: {e}");
        }
        let e = read("{\"items\": [", "--pods-json", "Pod", &mut o).unwrap_err();
        assert!(e.contains("not a JSON document"), "{e}");
        let e = read(
            r#"{"items":[{"metadata":"str"}]}"#,
            "--pods-json",
            "Pod",
            &mut o,
        )
        .unwrap_err();
        assert!(e.contains("item 0: unexpected shape"), "{e}");
    }
}
