//! The same objects from files: `--pods-json`/`--pvs-json` (`kubectl get … -o json`, `-` for
//! stdin), capped, mapped or streamed, parsed through the typed path the API uses.

use crate::filter::PodFilter;
use crate::list;
use crate::types::{PersistentVolume, Pod};
use plugin::Unknown;
use serde::de::DeserializeOwned;
use std::io::BufReader;
use std::path::Path;

/// The cap of a JSON document parsed as a whole ([`read_document`]: `--pvs-json` objects that
/// may be held until the document's kind is known). A list (`--pods-json`, `--pvs-json` as
/// `kubectl get … -o json`, [`read_json_list`]) has no cap: it is streamed item by item, in
/// memory bounded by one item ([`crate::list::ITEM_MAX`]) whatever its size (a 100 000-pod
/// cluster's `kubectl get pods -A -o json` is about 413 MB), in time bounded by `-t`.
pub const JSON_FILE_MAX: u64 = 256 << 20;

/// The largest file mapped whole: its touched pages count in the worker's RSS (as file pages),
/// so a mapped file of 200 MiB alone broke the 64 MiB budget (issue 27, finding 3: 666 MB for
/// 10^6 stuck pods). Up to this (half the budget) the faster slice parser is used; past it the
/// file is streamed.
pub const JSON_MAP_MAX: u64 = 32 << 20;

/// A JSON document as [`read_document`] hands it to its parser.
pub enum Document<'a> {
    /// A regular file, mapped: parsed in memory.
    Slice(&'a [u8]),
    /// Stdin or another stream, read through a buffer up to the cap.
    Reader(&'a mut dyn std::io::BufRead),
}

/// Open the JSON input `path` names (`-`: stdin; a file with the caller's privilege), hold it to
/// [`JSON_FILE_MAX`], and run `parse` over it; failures become one UNKNOWN naming `what` and the
/// path. A stream is parsed as it is read: input that cannot start a JSON document (`/dev/zero`,
/// a binary file) fails at its first byte, never read to the cap.
pub fn read_document<T>(
    path: &Path,
    what: &str,
    parse: impl FnOnce(Document) -> Result<T, list::Error>,
) -> Result<T, Unknown> {
    read_capped(path, what, Some(JSON_FILE_MAX), parse)
}

/// [`read_document`] with a cap (`None`: read to the end, for a parser that keeps nothing of
/// what it has parsed but the caller's aggregates).
fn read_capped<T>(
    path: &Path,
    what: &str,
    cap: Option<u64>,
    parse: impl FnOnce(Document) -> Result<T, list::Error>,
) -> Result<T, Unknown> {
    let shown = if path == Path::new("-") {
        "stdin".to_string()
    } else {
        path.display().to_string()
    };
    let over = || {
        Unknown(format!(
            "{what} {shown} is larger than {} (the cap of a JSON input): not read",
            plugin::fmt_bytes(cap.unwrap_or(u64::MAX))
        ))
    };
    let (res, exceeded) = if path == Path::new("-") {
        stream_document(&mut std::io::stdin().lock(), cap, parse)
    } else {
        // A path the caller named: opened with the caller's privilege.
        let file = plugin::privilege::open(path).map_err(|e| {
            Unknown(format!(
                "cannot read {what} {shown}: {}",
                plugin::errtext(&e)
            ))
        })?;
        let size = file.metadata().map(|m| m.is_file().then_some(m.len()));
        match size {
            Ok(Some(len)) if cap.is_some_and(|c| len > c) => return Err(over()),
            Ok(Some(len)) if len <= JSON_MAP_MAX => {
                let doc = plugin::mapped::map(&file, len).map_err(|e| {
                    Unknown(format!(
                        "cannot read {what} {shown}: {}",
                        plugin::errtext(&e)
                    ))
                })?;
                (parse(Document::Slice(&doc)), false)
            }
            _ => stream_document(&mut &file, cap, parse),
        }
    };
    if exceeded {
        return Err(over());
    }
    res.map_err(|e| {
        use serde_json::error::Category;
        let text = match e.classify() {
            Category::Eof => format!("truncated JSON: {e}: not a JSON document as a whole"),
            Category::Syntax => format!("invalid JSON: {e}: not a JSON document"),
            Category::Io => format!("read failed: {e}"),
            Category::Data => format!("unexpected JSON: {e}"),
        };
        Unknown(format!("cannot parse {what} {shown}: {text}"))
    })
}

/// Parse a stream read through a buffer, at most one byte past the cap; the flag says the cap
/// was reached.
fn stream_document<T>(
    r: &mut dyn std::io::Read,
    cap: Option<u64>,
    parse: impl FnOnce(Document) -> Result<T, list::Error>,
) -> (Result<T, list::Error>, bool) {
    let mut capped = std::io::Read::take(r, cap.map_or(u64::MAX, |c| c + 1));
    let res = {
        let mut buf = BufReader::with_capacity(64 * 1024, &mut capped);
        parse(Document::Reader(&mut buf))
    };
    (res, cap.is_some() && capped.limit() == 0)
}

/// Read a list document (`kubectl get … -o json`) from `path` (`-`: stdin), streaming each item
/// to `f` through the same typed path the API uses, whatever the document's size (no cap: see
/// [`JSON_FILE_MAX`]). Returns the number of items.
pub fn read_json_list<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    f: impl FnMut(T),
) -> Result<usize, Unknown> {
    let meta = read_capped(path, what, None, |doc| match doc {
        Document::Slice(s) => list::read_list_slice(s, f),
        Document::Reader(r) => list::read_list(r, f),
    })?;
    if !meta.had_items {
        let shown = if path == Path::new("-") {
            "stdin".to_string()
        } else {
            path.display().to_string()
        };
        return Err(Unknown(format!(
            "{what} {shown} is not a list (kind '{}'): give the output of `kubectl get … -o json` for several objects",
            meta.kind
        )));
    }
    Ok(meta.items)
}

/// Pods from `--pods-json FILE|-` (`kubectl get pods -A -o json`), filtered like the API would.
/// Returns the number of pods passed to `f`.
pub fn load_pods_json(
    path: &Path,
    filter: &PodFilter,
    mut f: impl FnMut(Pod),
) -> Result<usize, Unknown> {
    let mut n = 0;
    read_json_list(path, "--pods-json", |p: Pod| {
        if filter.matches(&p) {
            n += 1;
            f(p)
        }
    })?;
    Ok(n)
}

/// PersistentVolumes from `--pvs-json FILE|-` (`kubectl get pv -o json`).
pub fn load_pvs_json(path: &Path, f: impl FnMut(PersistentVolume)) -> Result<usize, Unknown> {
    read_json_list(path, "--pvs-json", f)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::Selector;

    fn tmpfile(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("kube-lib-test-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn pods_json_is_filtered_like_the_api() {
        let p = tmpfile(
            "pods.json",
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[
              {"metadata":{"name":"a","namespace":"openebs","labels":{"openebs.io/component":"jiva-replica"}},"spec":{"nodeName":"k8s01"}},
              {"metadata":{"name":"b","namespace":"openebs"},"spec":{"nodeName":"k8s02"}},
              {"metadata":{"name":"c","namespace":"media"},"spec":{"nodeName":"k8s01"}},
              {"metadata":{"name":"d","namespace":"media"},"spec":{}}]}"#,
        );
        let names = |f: PodFilter| {
            let mut v = vec![];
            let n = load_pods_json(&p, &f, |p| v.push(p.metadata.name)).unwrap();
            assert_eq!(n, v.len());
            v
        };
        assert_eq!(names(PodFilter::default()), ["a", "b", "c", "d"]);
        assert_eq!(
            names(PodFilter {
                node: Some("k8s01".into()),
                ..Default::default()
            }),
            ["a", "c"]
        );
        assert_eq!(
            names(PodFilter {
                namespaces: vec!["media".into()],
                ..Default::default()
            }),
            ["c", "d"]
        );
        let sel = Selector::parse("openebs.io/component=jiva-replica").unwrap();
        assert_eq!(
            names(PodFilter {
                labels: Some(sel),
                ..Default::default()
            }),
            ["a"]
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn pvs_json_and_bad_files() {
        let p = tmpfile(
            "pvs.json",
            r#"{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"pvc-1"},"spec":{"csi":{"driver":"jiva.csi.openebs.io","volumeHandle":"pvc-1"}}}]}"#,
        );
        let mut v = vec![];
        assert_eq!(load_pvs_json(&p, |pv| v.push(pv)).unwrap(), 1);
        assert_eq!(v[0].spec.csi.as_ref().unwrap().volume_handle, "pvc-1");
        std::fs::write(&p, r#"{"items":[{"metadata":{"name":"pvc-1"}"#).unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("--pvs-json") && e.0.contains("truncated JSON"),
            "{e}"
        );
        std::fs::write(
            &p,
            r#"{"kind":"PersistentVolume","metadata":{"name":"pvc-1"}}"#,
        )
        .unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("is not a list (kind 'PersistentVolume')"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("cannot read --pvs-json") && e.0.contains("ENOENT"),
            "{e}"
        );
    }
}
