//! Small JSON state files: one per check and source, written atomically (temp file in the same
//! directory, fsync, rename, fsync of the directory), so a check killed mid-write leaves the old
//! state, never half a file.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Kept entries (failures, kernel records) dated later than this after now are not trusted: they
/// come from a clock that was set back or a state that is not this node's, and kept, they would
/// start counting once the clock reaches them. Clock skew below this is tolerated.
pub const FUTURE_SLACK_MS: i64 = 300_000;

/// True when epoch-ms `t` lies beyond [`FUTURE_SLACK_MS`] after `now`.
pub fn from_future(t: i64, now: i64) -> bool {
    t > now + FUTURE_SLACK_MS
}

/// Drop the entries of `v` dated in the future (by `t`, epoch ms); returns how many went.
pub fn drop_future<T>(v: &mut Vec<T>, now: i64, t: impl Fn(&T) -> i64) -> usize {
    let before = v.len();
    v.retain(|x| !from_future(t(x), now));
    before - v.len()
}

/// `<dir>/<check>.<source id>.json`; the source id is reduced to `[A-Za-z0-9._-]`.
pub fn path(dir: &Path, check: &str, source: &str) -> PathBuf {
    let id: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let id = id.trim_matches('_');
    let id = if id.len() > 150 {
        &id[id.len() - 150..]
    } else {
        id
    };
    dir.join(format!("{check}.{id}.json"))
}

/// Read a state file. `Ok(None)` when there is none yet; `Err` when it exists but cannot be read
/// or parsed (the caller starts afresh and says so).
pub fn load<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            format!(
                "state file {} is unreadable ({e}); starting afresh",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read state file {}: {}",
            path.display(),
            crate::errtext(&e)
        )),
    }
}

/// Write a state file atomically, creating its directory if needed.
pub fn save<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail = |what: &str, e: std::io::Error| {
        format!(
            "cannot {what} state file {}: {}",
            path.display(),
            crate::errtext(&e)
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("create the directory of", e))?;
    let body = serde_json::to_vec(value).map_err(|e| format!("cannot encode state: {e}"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail("write", e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_names() {
        let dir = std::env::temp_dir().join(format!("state-test-{}", std::process::id()));
        let p = path(&dir, "kubelet_nested_ops", "file:/var/log/kubelet.log");
        assert_eq!(
            p.file_name().unwrap().to_str().unwrap(),
            "kubelet_nested_ops.file__var_log_kubelet.log.json"
        );
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), None);
        save(&p, &vec![1u32, 2]).unwrap();
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![1, 2]));
        std::fs::write(&p, b"{garbled").unwrap();
        assert!(load::<Vec<u32>>(&p).is_err());
        // No temp files are left behind.
        save(&p, &vec![3u32]).unwrap();
        let n = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
