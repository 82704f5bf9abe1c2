//! Streaming a `…List` document (`{"kind":"PodList","metadata":{"continue":…},"items":[…]}`):
//! each item is deserialized into its compact typed form and handed to a callback as soon as it
//! is parsed, so a 20 000-pod list never exists in memory as text or as a JSON tree — only the
//! compact structs the caller decides to keep.

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use std::fmt;
use std::io::Read;
use std::marker::PhantomData;

/// What a list says about itself besides its items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListMeta {
    /// `kind` of the document (`PodList`, or `List` from kubectl).
    pub kind: String,
    /// `metadata.continue`: present when more pages follow.
    pub continue_token: Option<String>,
    pub resource_version: String,
    /// Items handed to the callback.
    pub items: usize,
    /// The document had an `items` array (a single object or a Status has none).
    pub had_items: bool,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct RawListMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

struct ListSeed<'f, T, F> {
    f: &'f mut F,
    _t: PhantomData<T>,
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> DeserializeSeed<'de> for ListSeed<'_, T, F> {
    type Value = ListMeta;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ListMeta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> Visitor<'de> for ListSeed<'_, T, F> {
    type Value = ListMeta;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "kind" => meta.kind = map.next_value::<Option<String>>()?.unwrap_or_default(),
                "metadata" => {
                    let m: Option<RawListMeta> = map.next_value()?;
                    let m = m.unwrap_or_default();
                    meta.continue_token = m.continue_.filter(|c| !c.is_empty());
                    meta.resource_version = m.resource_version.unwrap_or_default();
                }
                "items" => {
                    meta.had_items = true;
                    meta.items += map.next_value_seed(ItemsSeed {
                        f: &mut *self.f,
                        _t: PhantomData,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

struct ItemsSeed<'f, T, F> {
    f: &'f mut F,
    _t: PhantomData<T>,
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> DeserializeSeed<'de> for ItemsSeed<'_, T, F> {
    type Value = usize;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> Visitor<'de> for ItemsSeed<'_, T, F> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of items")
    }
    fn visit_none<E: de::Error>(self) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0;
        while let Some(item) = seq.next_element::<T>()? {
            (self.f)(item);
            n += 1;
        }
        Ok(n)
    }
}

/// Parse a list document from `r`, calling `f` for every item in order.
/// `r` should be buffered (a `BufReader` or an in-memory slice).
pub fn read_list<T, F, R>(r: R, f: F) -> Result<ListMeta, serde_json::Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: Read,
{
    parse_list(serde_json::Deserializer::from_reader(r), f)
}

/// [`read_list`] over a document already in memory: serde_json parses a slice several times
/// faster than a reader (strings it skips are scanned in bulk, not byte by byte).
pub fn read_list_slice<T, F>(doc: &[u8], f: F) -> Result<ListMeta, serde_json::Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
{
    parse_list(serde_json::Deserializer::from_slice(doc), f)
}

fn parse_list<'de, T, F, R>(
    mut de: serde_json::Deserializer<R>,
    mut f: F,
) -> Result<ListMeta, serde_json::Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: serde_json::de::Read<'de>,
{
    let meta = ListSeed {
        f: &mut f,
        _t: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Pod;

    #[test]
    fn streams_items_and_reads_continue() {
        let doc = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc","remainingItemCount":3},
            "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"extra":[1,2,{"x":null}]}]}"#;
        let mut names = vec![];
        let meta = read_list::<Pod, _, _>(&doc[..], |p| names.push(p.metadata.name)).unwrap();
        assert_eq!(names, ["a", "b"]);
        let mut again = vec![];
        let meta2 = read_list_slice::<Pod, _>(doc, |p| again.push(p.metadata.name)).unwrap();
        assert_eq!(
            (again, meta2.items, meta2.had_items),
            (names.clone(), 2, true)
        );
        assert!(read_list_slice::<Pod, _>(&doc[..doc.len() - 9], |_| {})
            .unwrap_err()
            .is_eof());
        assert_eq!(meta.continue_token.as_deref(), Some("abc"));
        assert_eq!(meta.resource_version, "42");
        assert_eq!(meta.items, 2);
        assert!(meta.had_items);
    }

    #[test]
    fn kubectl_list_and_empty_continue() {
        let doc = br#"{"apiVersion":"v1","items":null,"kind":"List","metadata":{"resourceVersion":"","continue":""}}"#;
        let meta = read_list::<Pod, _, _>(&doc[..], |_| panic!("no items")).unwrap();
        assert_eq!(meta.kind, "List");
        assert_eq!(meta.continue_token, None);
    }

    #[test]
    fn truncated_and_garbage_fail() {
        assert!(read_list::<Pod, _, _>(
            &br#"{"items":[{"metadata":{"name":"a"}},{"meta"#[..],
            |_| {}
        )
        .is_err());
        assert!(read_list::<Pod, _, _>(&b"<html>502 Bad Gateway</html>"[..], |_| {}).is_err());
        assert!(read_list::<Pod, _, _>(&br#"{"items":[]} trailing"#[..], |_| {}).is_err());
        assert!(read_list::<Pod, _, _>(&br#"[1,2]"#[..], |_| {}).is_err());
    }
}
