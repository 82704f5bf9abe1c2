//! Streaming a `…List` document (`{"kind":"PodList","metadata":{"continue":…},"items":[…]}`):
//! each item is deserialized into its compact typed form and handed to a callback as soon as it
//! is parsed, so a 20 000-pod list never exists in memory as text or as a JSON tree — only the
//! compact structs the caller decides to keep.
//!
//! How (issue 34): serde_json's reader path looks at every byte through `Read` (28.8 µs per pod
//! of `kubectl get pods -o json`); its slice path skips what a type does not need in bulk. So the
//! document is read in large chunks into one buffer ([`Scan`]) and each item is parsed from it
//! with serde_json's slice reader, which says where the item ended; an item cut by the end of
//! the buffer is parsed again once more is read. The buffer holds the unparsed rest of one chunk
//! plus at most one item ([`ITEM_MAX`]), whatever the document's size. The list's own fields
//! (`kind`, `metadata`, anything else) are parsed (validated) the same way.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::error::Category;
use std::fmt;
use std::io::Read;

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

#[derive(serde::Deserialize, Default, Debug)]
#[serde(default)]
struct RawListMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// The largest item (or other value of the list object) parsed: the API server stores no object
/// over 1.5 MiB (etcd's default request limit), so this is only reached by input that is not a
/// Kubernetes list; it bounds the buffer (the 64 MiB budget).
pub const ITEM_MAX: usize = 16 << 20;

/// Bytes read from the stream at a time.
const CHUNK: usize = 256 * 1024;

/// A list document that could not be read: serde_json's categories (what callers tell the
/// operator: truncated, invalid, unexpected, or the read failed), with where in the document.
#[derive(Debug)]
pub struct Error {
    category: Category,
    text: String,
    io: Option<std::io::Error>,
}

impl Error {
    fn new(category: Category, text: String) -> Error {
        Error {
            category,
            text,
            io: None,
        }
    }
    fn eof(what: &str, at: u64) -> Error {
        Error::new(
            Category::Eof,
            format!("EOF while parsing {what} at byte {at}"),
        )
    }
    fn syntax(what: &str, at: u64) -> Error {
        Error::new(Category::Syntax, format!("{what} at byte {at}"))
    }
    /// serde_json's error for a value that starts at byte `at` of the document.
    fn json(e: serde_json::Error, what: &str, at: u64) -> Error {
        let category = e.classify();
        if category == Category::Io {
            return Error::from(e);
        }
        Error::new(category, format!("{e} of {what} starting at byte {at}"))
    }
    pub fn classify(&self) -> Category {
        self.category
    }
    pub fn is_eof(&self) -> bool {
        self.category == Category::Eof
    }
    pub fn is_io(&self) -> bool {
        self.category == Category::Io
    }
    /// The read error behind an [`Category::Io`] error.
    pub fn into_io(self) -> Option<std::io::Error> {
        self.io
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Error {}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        let category = e.classify();
        let text = e.to_string();
        let io = (category == Category::Io).then(|| std::io::Error::from(e));
        Error { category, text, io }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error {
            category: Category::Io,
            text: e.to_string(),
            io: Some(e),
        }
    }
}

/// The document as bytes: a slice in memory (a mapped file) or a stream read in chunks into a
/// buffer that keeps only what is not parsed yet.
struct Scan<'a, R> {
    /// The stream, `None` for a slice (or once it ended).
    r: Option<R>,
    /// Read from a stream into `buf[..end]` (else the document is `slice`).
    streamed: bool,
    buf: Vec<u8>,
    end: usize,
    slice: &'a [u8],
    /// The next byte to look at, in `data()`.
    pos: usize,
    /// Bytes of the document before `data()[0]`.
    base: u64,
}

impl<R: Read> Scan<'_, R> {
    fn data(&self) -> &[u8] {
        if self.streamed {
            &self.buf[..self.end]
        } else {
            self.slice
        }
    }

    fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Read more of the stream, keeping `data()[keep..]` (and `pos`'s place in it): false at its
    /// end.
    fn more(&mut self, keep: usize) -> Result<bool, Error> {
        let Some(r) = self.r.as_mut() else {
            return Ok(false);
        };
        if keep > 0 {
            self.buf.copy_within(keep..self.end, 0);
            self.end -= keep;
            self.base += keep as u64;
            self.pos -= keep;
        }
        let len = self.end;
        if len > ITEM_MAX {
            return Err(Error::new(
                Category::Data,
                format!(
                    "a value of the list larger than {} at byte {}: not a Kubernetes list",
                    plugin::fmt_bytes(ITEM_MAX as u64),
                    self.base
                ),
            ));
        }
        // At least as much again as is kept: a value longer than a chunk is parsed again only
        // a logarithmic number of times. The buffer only grows (zeroed once).
        let want = CHUNK.max(len).min(ITEM_MAX + CHUNK - len);
        if self.buf.len() < len + want {
            self.buf.resize(len + want, 0);
        }
        let mut got = 0;
        while got < want {
            match r.read(&mut self.buf[len + got..len + want]) {
                Ok(0) => {
                    self.r = None;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.end = len + got;
                    return Err(e.into());
                }
            }
        }
        self.end = len + got;
        Ok(got > 0)
    }

    /// The next byte that is not white space (not consumed); `None` at the end of the document.
    fn peek(&mut self) -> Result<Option<u8>, Error> {
        loop {
            let d = self.data();
            let mut i = self.pos;
            while let Some(&b) = d.get(i) {
                if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                    self.pos = i;
                    return Ok(Some(b));
                }
                i += 1;
            }
            self.pos = i;
            if !self.more(self.pos)? {
                return Ok(None);
            }
        }
    }

    /// Expect `b` (after white space) and consume it.
    fn expect(&mut self, b: u8, what: &str) -> Result<(), Error> {
        match self.peek()? {
            Some(c) if c == b => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(Error::syntax(&format!("expected {what}"), self.at())),
            None => Err(Error::eof(
                &format!("the list (expected {what})"),
                self.at(),
            )),
        }
    }

    /// The next value (after white space) parsed as `V`, consumed; `what` names it in messages.
    /// serde_json parses it from the buffer (its slice reader, which skips what `V` does not
    /// need in bulk) and says where it ended; a value cut by the end of the buffer (serde_json
    /// reports EOF) is parsed again once more of the stream is read.
    fn parse<V: DeserializeOwned>(&mut self, what: impl fmt::Display) -> Result<V, Error> {
        loop {
            let mut it =
                serde_json::Deserializer::from_slice(&self.data()[self.pos..]).into_iter::<V>();
            let res = it.next();
            let used = it.byte_offset();
            match res {
                Some(Ok(v)) => {
                    self.pos += used;
                    return Ok(v);
                }
                Some(Err(e)) if self.r.is_none() || !cut_by_end(&e, &self.data()[self.pos..]) => {
                    return Err(Error::json(e, &what.to_string(), self.at()));
                }
                None if self.r.is_none() => return Err(Error::eof(&what.to_string(), self.at())),
                // Cut by the end of the buffer (or only white space in it): read on.
                _ => {
                    self.more(self.pos)?;
                }
            }
        }
    }
}

/// Whether serde_json's error on `d` may be the end of the buffer cutting a value: EOF, or an
/// error at its last bytes (`2.` of a number cut before its digits is "invalid number").
fn cut_by_end(e: &serde_json::Error, d: &[u8]) -> bool {
    if e.is_eof() {
        return true;
    }
    // serde_json's position: line (1-based) and the bytes since that line's start.
    let start_of_line = match e.line() {
        0 | 1 => 0,
        l => match memchr_nth(d, l - 1) {
            Some(i) => i + 1,
            None => return true,
        },
    };
    start_of_line + e.column() + 2 >= d.len()
}

/// The index of the `n`th (1-based) newline of `d`.
fn memchr_nth(d: &[u8], n: usize) -> Option<usize> {
    d.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(n - 1)
        .map(|(i, _)| i)
}

/// Parse a list document from `r`, calling `f` for every item in order. `r` is read in large
/// chunks (it need not be buffered).
pub fn read_list<T, F, R>(r: R, f: F) -> Result<ListMeta, Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: Read,
{
    parse_list(
        &mut Scan {
            r: Some(r),
            streamed: true,
            buf: Vec::new(),
            end: 0,
            slice: &[],
            pos: 0,
            base: 0,
        },
        f,
    )
}

/// [`read_list`] over a document already in memory (a mapped file): no copy.
pub fn read_list_slice<T, F>(doc: &[u8], f: F) -> Result<ListMeta, Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
{
    parse_list::<T, F, &[u8]>(
        &mut Scan {
            r: None,
            streamed: false,
            buf: Vec::new(),
            end: 0,
            slice: doc,
            pos: 0,
            base: 0,
        },
        f,
    )
}

fn parse_list<T, F, R>(s: &mut Scan<'_, R>, mut f: F) -> Result<ListMeta, Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: Read,
{
    let mut meta = ListMeta::default();
    match s.peek()? {
        Some(b'{') => s.pos += 1,
        Some(_) => {
            // Not an object: serde_json says what it is (`<html>…`: expected value; `[1]`: a
            // sequence where a map was expected).
            s.parse::<AnObject>("the document")?;
            return Err(Error::syntax("expected a list object", 0));
        }
        None => return Err(Error::eof("a value", s.at())),
    }
    if s.peek()? == Some(b'}') {
        s.pos += 1;
    } else {
        loop {
            if s.peek()? != Some(b'"') {
                return match s.peek()? {
                    None => Err(Error::eof("the list object", s.at())),
                    Some(_) => Err(Error::syntax("expected a key (a string)", s.at())),
                };
            }
            let key: String = s.parse("a key")?;
            s.expect(b':', "`:`")?;
            match key.as_str() {
                "kind" => meta.kind = s.parse::<Option<String>>("kind")?.unwrap_or_default(),
                "metadata" => {
                    let m = s
                        .parse::<Option<RawListMeta>>("metadata")?
                        .unwrap_or_default();
                    meta.continue_token = m.continue_.filter(|c| !c.is_empty());
                    meta.resource_version = m.resource_version.unwrap_or_default();
                }
                "items" => {
                    meta.had_items = true;
                    meta.items += items(s, &mut f)?;
                }
                _ => {
                    s.parse::<IgnoredAny>(format_args!("`{key}`"))?;
                }
            }
            match s.peek()? {
                Some(b',') => s.pos += 1,
                Some(b'}') => {
                    s.pos += 1;
                    break;
                }
                Some(_) => return Err(Error::syntax("expected `,` or `}`", s.at())),
                None => return Err(Error::eof("the list object", s.at())),
            }
        }
    }
    if s.peek()?.is_some() {
        return Err(Error::syntax("trailing characters", s.at()));
    }
    Ok(meta)
}

/// What a document that is not an object is told by: serde_json's error for it (`expected
/// value` for `<html>…`, `invalid type: sequence, expected a Kubernetes list object` for `[1]`).
struct AnObject;

impl<'de> serde::Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnObject, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = AnObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Kubernetes list object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<AnObject, A::Error> {
                Ok(AnObject)
            }
        }
        d.deserialize_map(V)
    }
}

/// The `items` array (or `null`), each item parsed as `T` and handed to `f`.
fn items<T, F, R>(s: &mut Scan<'_, R>, f: &mut F) -> Result<usize, Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: Read,
{
    if s.peek()? != Some(b'[') {
        // `null`, or what serde_json calls the wrong type.
        s.parse::<Option<Vec<IgnoredAny>>>("items")?;
        return Ok(0);
    }
    s.pos += 1;
    let mut n = 0;
    if s.peek()? == Some(b']') {
        s.pos += 1;
        return Ok(0);
    }
    loop {
        f(s.parse::<T>(format_args!("item {n}"))?);
        n += 1;
        match s.peek()? {
            Some(b',') => s.pos += 1,
            Some(b']') => {
                s.pos += 1;
                return Ok(n);
            }
            Some(_) => return Err(Error::syntax("expected `,` or `]`", s.at())),
            None => return Err(Error::eof("the items", s.at())),
        }
    }
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

    /// A stream that hands out at most `n` bytes per read (a pipe, a TLS record).
    struct Drip<'a>(&'a [u8], usize);
    impl Read for Drip<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn pods_doc(n: usize, pad: usize) -> Vec<u8> {
        let items: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"metadata":{{"name":"p{i}","namespace":"ns","annotations":{{"x":"{}\"q\\"}},"labels":{{"a":"b{i}"}}}},
                    "spec":{{"nodeName":"n{}"}},"status":{{"phase":"Pending","junk":[1,2.5e3,true,null,{{"k":"]}}"}}]}}}}"#,
                    "z".repeat(pad + i % 7),
                    i % 3
                )
            })
            .collect();
        format!(
            "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[{}],\"metadata\":{{\"continue\":\"c\"}}}}\n",
            items.join(" ,\n")
        )
        .into_bytes()
    }

    /// Items cut anywhere by the reads (1 byte at a time, odd sizes, chunks), items larger than
    /// the read chunk, and a mapped slice: the same items in the same order, and the list's own
    /// fields, from every one.
    #[test]
    fn the_same_items_whatever_the_reads() {
        for (n, pad) in [(50, 10), (3, 3 * CHUNK), (40, 20_000)] {
            let doc = pods_doc(n, pad);
            let mut want = vec![];
            let meta = read_list_slice::<Pod, _>(&doc, |p| {
                want.push((p.metadata.name, p.metadata.labels, p.spec.node_name))
            })
            .unwrap();
            assert_eq!(want.len(), n);
            assert_eq!(want[n - 1].0, format!("p{}", n - 1));
            assert_eq!((meta.items, meta.continue_token.as_deref()), (n, Some("c")));
            for step in [1, 7, 4096, 65536, usize::MAX] {
                if step == 1 && doc.len() > 1 << 20 {
                    continue;
                }
                let mut got = vec![];
                let m = read_list::<Pod, _, _>(Drip(&doc, step), |p| {
                    got.push((p.metadata.name, p.metadata.labels, p.spec.node_name))
                })
                .unwrap();
                assert_eq!(m, meta, "step {step}");
                assert!(got == want, "step {step}");
            }
        }
    }

    /// What callers tell the operator depends on the category: every way a document can be
    /// wrong, cut at every byte, read in drips and from a slice, gives the category serde_json
    /// gives for the whole document.
    #[test]
    fn errors_keep_serde_json_categories() {
        // The oracle: serde_json over the whole document, typed as the old reader was.
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Whole {
            kind: Option<String>,
            #[serde(rename = "apiVersion")]
            api_version: Option<IgnoredAny>,
            items: Option<Vec<Pod>>,
            metadata: Option<RawListMeta>,
        }
        let whole = serde_json::from_slice::<Whole>;
        let doc = pods_doc(3, 5);
        for cut in 0..doc.len() - 1 {
            let part = &doc[..cut];
            if part.iter().all(u8::is_ascii_whitespace) || whole(part).is_ok() {
                continue;
            }
            let want = whole(part).unwrap_err().classify();
            let e = read_list::<Pod, _, _>(Drip(part, 5), |_| {}).unwrap_err();
            assert_eq!(e.classify(), want, "{cut}: {e}");
            let e = read_list_slice::<Pod, _>(part, |_| {}).unwrap_err();
            assert_eq!(e.classify(), want, "{cut}: {e}");
        }
        for (bad, cat) in [
            (&b""[..], Category::Eof),
            (b"   ", Category::Eof),
            (b"<html>502 Bad Gateway</html>", Category::Syntax),
            (b"\0\0\0\0", Category::Syntax),
            (br#"{"items":[]} trailing"#, Category::Syntax),
            (br#"{"items":[]}}"#, Category::Syntax),
            (br#"{"items":[{},]}"#, Category::Syntax),
            (br#"{"items":[{}{}]}"#, Category::Syntax),
            (br#"{"items":[{},],}"#, Category::Syntax),
            (br#"{"items":[],}"#, Category::Syntax),
            (br#"{"items" []}"#, Category::Syntax),
            (br#"{items:[]}"#, Category::Syntax),
            (br#"{"kind":nul,"items":[]}"#, Category::Syntax),
            (br#"{"other":[1,2,}"#, Category::Syntax),
            (
                br#"{"items":[{"metadata":{"name":"a\x"}}]}"#,
                Category::Syntax,
            ),
            (br#"[1,2]"#, Category::Data),
            (br#"{"items":5}"#, Category::Data),
            (br#"{"items":[1]}"#, Category::Data),
            (br#"{"kind":5,"items":[]}"#, Category::Data),
            (br#"{"items":[{"metadata":{"name":5}}]}"#, Category::Data),
        ] {
            for e in [
                read_list::<Pod, _, _>(Drip(bad, 3), |_| {}).unwrap_err(),
                read_list_slice::<Pod, _>(bad, |_| {}).unwrap_err(),
            ] {
                assert_eq!(e.classify(), cat, "{}: {e}", String::from_utf8_lossy(bad));
            }
        }
        // Where: the item and the byte of the document it starts at.
        let e = read_list_slice::<Pod, _>(br#"{"items":[{},{"metadata":{"name":5}}]}"#, |_| {})
            .unwrap_err();
        assert!(
            e.to_string().contains("of item 1 starting at byte 13"),
            "{e}"
        );
        // A read error stays one (the API client tells a dropped connection from bad JSON).
        struct Fails;
        impl Read for Fails {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("connection reset"))
            }
        }
        let e = read_list::<Pod, _, _>(Fails, |_| {}).unwrap_err();
        assert!(e.is_io(), "{e}");
        assert_eq!(e.into_io().unwrap().to_string(), "connection reset");
    }

    /// Memory stays bounded by one item: a value larger than [`ITEM_MAX`] is an error naming it,
    /// read no further; an endless stream of small items is read in a buffer of one chunk.
    #[test]
    fn one_item_at_most_in_memory() {
        let mut big = br#"{"items":[{"metadata":{"name":""#.to_vec();
        big.resize(big.len() + ITEM_MAX + 2 * CHUNK, b'a');
        let e = read_list::<Pod, _, _>(&big[..], |_| {}).unwrap_err();
        assert_eq!(e.classify(), Category::Data, "{e}");
        assert!(e.to_string().contains("larger than 16 MiB"), "{e}");
        // 4 MiB of items through a drip: the buffer never grows past two chunks.
        let doc = pods_doc(20_000, 100);
        assert!(doc.len() > 4 << 20);
        let mut s = Scan {
            r: Some(Drip(&doc, 65536)),
            streamed: true,
            buf: Vec::new(),
            end: 0,
            slice: &[],
            pos: 0,
            base: 0,
        };
        let mut n = 0;
        parse_list(&mut s, |_: Pod| n += 1).unwrap();
        assert_eq!(n, 20_000);
        // The buffer only grows: its size now is the most it held.
        assert!(s.buf.len() <= 2 * CHUNK, "{}", s.buf.len());
    }
}
