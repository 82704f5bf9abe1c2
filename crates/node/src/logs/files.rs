//! A log file read from where the last run stopped.
//!
//! The position is the file's identity (device + inode) and a byte offset. Next run:
//! - same inode, size ≥ offset: read from the offset;
//! - same inode, size < offset: the file was truncated (copytruncate): read from 0;
//! - another inode: the file was rotated. The old file is looked for beside it (same directory,
//!   a name starting with the log's name, e.g. `kubelet.log.1`, with the saved inode) and its tail
//!   is read from the old offset; then the new file from 0.

use super::scan::{scan_follow, Scan, ScanStats};
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FilePos {
    pub dev: u64,
    pub ino: u64,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileRead {
    /// Where the next run starts.
    pub pos: FilePos,
    pub stats: ScanStats,
    /// What happened to the file since the last run (rotation, truncation), for -v output.
    pub notes: Vec<String>,
}

fn add(a: &mut ScanStats, b: ScanStats) {
    a.bytes_read += b.bytes_read;
    a.bytes_consumed += b.bytes_consumed;
    a.hits += b.hits;
    a.complete &= b.complete;
    a.overlong += b.overlong;
    a.sampled += b.sampled;
    a.recognized += b.recognized;
}

/// A gzip file: named `.gz`, or starting with the gzip magic (`1f 8b`).
fn is_gzip(path: &Path, f: &mut File) -> bool {
    use std::io::Read;
    if path.extension().is_some_and(|e| e == "gz") {
        return true;
    }
    let mut magic = [0u8; 2];
    let ok = f.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
    let _ = f.seek(SeekFrom::Start(0));
    ok
}

/// A gzip stream whose corruption is an I/O error naming it (flate2 says `InvalidInput`).
struct GzReader<R>(R);
impl<R: std::io::Read> std::io::Read for GzReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::Interrupted {
                e
            } else {
                std::io::Error::other(format!("corrupt or truncated gzip data: {e}"))
            }
        })
    }
}

fn find_rotated(path: &Path, dev: u64, ino: u64) -> Option<PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = path.file_name()?.to_string_lossy().into_owned();
    crate::privilege::as_caller(|| std::fs::read_dir(dir))
        .ok()?
        .filter_map(std::result::Result::ok)
        .find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == base || !name.starts_with(&base) {
                return None;
            }
            let md = std::fs::metadata(e.path()).ok()?;
            (md.dev() == dev && md.ino() == ino && md.is_file()).then(|| e.path())
        })
}

/// Read `path` from `prev` (or from its start without one), handing lines holding a needle to
/// `on_hit`, which answers whether it wants the next line too (see [`super::scan::scan_follow`]).
/// Errors name the file and the errno.
pub fn read(
    path: &Path,
    prev: Option<&FilePos>,
    opts: &Scan,
    mut on_hit: impl FnMut(&[u8]) -> bool,
) -> Result<FileRead, String> {
    let err =
        |e: std::io::Error| format!("cannot read {}: {}", path.display(), plugin::errtext(&e));
    // `--log-file`: the caller's path, opened with the caller's privilege.
    let mut f = crate::privilege::open(path).map_err(err)?;
    let md = f.metadata().map_err(err)?;
    if md.is_dir() {
        return Err(format!("cannot read {}: it is a directory", path.display()));
    }
    let (dev, ino, size) = (md.dev(), md.ino(), md.len());
    let mut stats = ScanStats {
        complete: true,
        ..Default::default()
    };
    let mut notes = Vec::new();
    // A pipe (a FIFO given as the log) is read as it comes: no magic peeked, no seek.
    if md.is_file() && is_gzip(path, &mut f) {
        // A rotated, compressed log does not grow: read it whole once; the saved position is
        // its size (same file, same size: nothing new).
        if prev.is_some_and(|p| p.dev == dev && p.ino == ino && p.offset == size) {
            return Ok(FileRead {
                pos: FilePos {
                    dev,
                    ino,
                    offset: size,
                },
                stats,
                notes,
            });
        }
        f.seek(SeekFrom::Start(0)).map_err(err)?;
        let mut gz = GzReader(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
            f,
        )));
        let o = Scan {
            consume_partial_tail: true,
            ..*opts
        };
        let s = scan_follow(&mut gz, &o, &mut on_hit, |_| {}).map_err(|e| {
            format!(
                "cannot read {} (gzip): {}",
                path.display(),
                plugin::errtext(&e)
            )
        })?;
        add(&mut stats, s);
        return Ok(FileRead {
            pos: FilePos {
                dev,
                ino,
                offset: if stats.complete { size } else { 0 },
            },
            stats,
            notes,
        });
    }
    let mut start = 0u64;
    if let Some(p) = prev {
        if p.dev == dev && p.ino == ino {
            if size < p.offset {
                notes.push(format!(
                    "{} was truncated ({} bytes, was read to {}): read from its start",
                    path.display(),
                    size,
                    p.offset
                ));
            } else {
                start = p.offset;
            }
        } else {
            match find_rotated(path, p.dev, p.ino) {
                Some(old) => {
                    let mut of = crate::privilege::open(&old).map_err(err)?;
                    let olen = of.metadata().map_or(0, |m| m.len());
                    if olen >= p.offset {
                        of.seek(SeekFrom::Start(p.offset)).map_err(err)?;
                        let o = Scan {
                            consume_partial_tail: true,
                            ..*opts
                        };
                        let s = scan_follow(&mut of, &o, &mut on_hit, |_| {}).map_err(err)?;
                        add(&mut stats, s);
                    }
                    notes.push(format!(
                        "{} was rotated: read the rest of {} first",
                        path.display(),
                        old.display()
                    ));
                }
                None => notes.push(format!(
                    "{} was replaced (rotated) and the old file is gone: read the new one from its start",
                    path.display()
                )),
            }
        }
    }
    if md.is_file() {
        f.seek(SeekFrom::Start(start)).map_err(err)?;
    }
    let s = scan_follow(&mut f, opts, &mut on_hit, |_| {}).map_err(err)?;
    let offset = start + s.bytes_consumed;
    add(&mut stats, s);
    Ok(FileRead {
        pos: FilePos { dev, ino, offset },
        stats,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn collect(path: &Path, prev: Option<&FilePos>) -> (Vec<String>, FileRead) {
        let mut v = Vec::new();
        let o = Scan {
            needles: &[b"HIT"],
            deadline: None,
            consume_partial_tail: false,
            recognize: None,
        };
        let r = read(path, prev, &o, |l| {
            v.push(String::from_utf8_lossy(l).into_owned());
            false
        })
        .unwrap();
        (v, r)
    }

    /// A rotated, compressed log (`kubelet.log.2.gz`, several gzip members as logrotate and
    /// `cat a.gz b.gz` leave them) is read whole once, then not again; garbage is an error
    /// naming the file, never a panic.
    #[test]
    fn gzip_logs_are_read_once() {
        use flate2::write::GzEncoder;
        let dir = std::env::temp_dir().join(format!("files-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = |s: &str| {
            let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(s.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        let mut data = gz("HIT 1\nno\n");
        data.extend(gz("HIT 2\nlast HIT"));
        let p = dir.join("kubelet.log.2.gz");
        std::fs::write(&p, &data).unwrap();
        let (v, r) = collect(&p, None);
        assert_eq!(v, ["HIT 1", "HIT 2", "last HIT"]);
        assert!(r.stats.complete);
        let (v, _) = collect(&p, Some(&r.pos));
        assert!(v.is_empty());
        // Detected by its magic without the suffix.
        let q = dir.join("kubelet.log.3");
        std::fs::write(&q, gz("HIT 3\n")).unwrap();
        assert_eq!(collect(&q, None).0, ["HIT 3"]);
        // Corrupt: an error naming the file.
        let bad = dir.join("bad.gz");
        let mut b = gz(&"HIT x\n".repeat(1000));
        let n = b.len();
        b.truncate(n / 2);
        b.extend_from_slice(&[0xff; 64]);
        std::fs::write(&bad, &b).unwrap();
        let o = Scan {
            needles: &[b"HIT"],
            deadline: None,
            consume_partial_tail: false,
            recognize: None,
        };
        let e = read(&bad, None, &o, |_| false).unwrap_err();
        assert!(e.contains("bad.gz") && e.contains("gzip"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resume_truncate_rotate() {
        let dir = std::env::temp_dir().join(format!("files-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("kubelet.log");
        std::fs::write(&p, "HIT 1\nno\nHIT 2\npartial HIT").unwrap();
        let (v, r) = collect(&p, None);
        assert_eq!(v, ["HIT 1", "HIT 2"]);
        // Appended: only the new lines (the partial line completed).
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b" 3\nHIT 4\n").unwrap();
        let (v, r) = collect(&p, Some(&r.pos));
        assert_eq!(v, ["partial HIT 3", "HIT 4"]);
        // Nothing new.
        let (v, r) = collect(&p, Some(&r.pos));
        assert!(v.is_empty());
        // Truncated (copytruncate) and rewritten shorter.
        std::fs::write(&p, "HIT 5\n").unwrap();
        let (v, r) = collect(&p, Some(&r.pos));
        assert_eq!(v, ["HIT 5"]);
        assert!(r.notes[0].contains("truncated"));
        // Rotated: the old file gets more lines before the rename, a new file appears.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"HIT 6\n").unwrap();
        std::fs::rename(&p, dir.join("kubelet.log.1")).unwrap();
        std::fs::write(&p, "HIT 7\n").unwrap();
        let (v, r) = collect(&p, Some(&r.pos));
        assert_eq!(v, ["HIT 6", "HIT 7"]);
        assert!(r.notes[0].contains("rotated"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
