//! A regular file mapped read-only into memory.
//!
//! Parsing a large `--pods-json` document or `--mountinfo` table in memory is several times faster than streaming it,
//! and mapping it costs neither a copy nor a page fault per 4 KiB of a fresh buffer (the kernel
//! maps page-cache pages around each fault). The one difference from `read`: if another process
//! truncates the file while it is mapped, touching the lost pages raises SIGBUS, which ends the
//! check's worker, and the check answers UNKNOWN saying so (reading would have given a
//! truncated document, also UNKNOWN).

use nix::sys::mman::{madvise, mmap, munmap, MapFlags, MmapAdvise, ProtFlags};
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::ops::Deref;
use std::ptr::NonNull;

/// A read-only private mapping of a whole file (`ptr` dangles when `len` is 0).
pub struct Mapped {
    ptr: NonNull<c_void>,
    len: usize,
}

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr..ptr+len is a live mapping owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the mapping was made by map with this length.
            let _ = unsafe { munmap(self.ptr, self.len) };
        }
    }
}

/// Map `len` bytes of `file` (its size when the caller looked).
pub fn map(file: &std::fs::File, len: u64) -> std::io::Result<Mapped> {
    let len = usize::try_from(len).map_err(std::io::Error::other)?;
    let Some(size) = NonZeroUsize::new(len) else {
        return Ok(Mapped {
            ptr: NonNull::dangling(),
            len: 0,
        });
    };
    // SAFETY: a read-only private mapping of a descriptor we hold, at an address the kernel
    // picks: it aliases nothing of ours.
    let p = unsafe {
        mmap(
            None,
            size,
            ProtFlags::PROT_READ,
            MapFlags::MAP_PRIVATE,
            file,
            0,
        )
    }?;
    // SAFETY: advice on our own mapping; it only tunes read-ahead.
    let _ = unsafe { madvise(p, len, MmapAdvise::MADV_SEQUENTIAL) };
    Ok(Mapped { ptr: p, len })
}

/// The most bytes [`read`] copies from a file it cannot map (it stops one byte after). A
/// caller's own cap of such a file must not exceed this.
pub const READ_MAX: u64 = 32 << 20;

/// A whole file's bytes: mapped when it is a regular file with a size, read otherwise (procfs
/// files such as `/proc/1/mountinfo` report size 0 and cannot be mapped).
pub enum FileBytes {
    Mapped(Mapped),
    Read(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Read(v) => v,
        }
    }
}

/// The bytes of `path`, without copying a large regular file into the heap. The path may be one a
/// user named (`--mountinfo`, `--pods-json`): it is opened with the caller's privilege
/// ([`crate::privilege`]).
pub fn read(path: &std::path::Path) -> std::io::Result<FileBytes> {
    let file = crate::privilege::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > 0 {
        return map(&file, meta.len()).map(FileBytes::Mapped);
    }
    // Not mappable (procfs, a pipe, a character device such as /dev/zero): read at most one byte
    // more than [`READ_MAX`], so the caller can tell "larger than its cap" without memory growing.
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&file, READ_MAX + 1), &mut v)?;
    Ok(FileBytes::Read(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_files_exactly() {
        let dir = std::env::temp_dir().join(format!("mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for size in [0usize, 1, 4095, 4096, (2 << 20) + 7] {
            let p = dir.join(format!("f{size}"));
            let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            std::fs::write(&p, &data).unwrap();
            let f = std::fs::File::open(&p).unwrap();
            let m = map(&f, size as u64).unwrap();
            assert_eq!(&m[..], &data[..], "size {size}");
            assert_eq!(&read(&p).unwrap()[..], &data[..], "size {size}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // procfs: size 0, read not mapped.
        let own = read(std::path::Path::new("/proc/self/mountinfo")).unwrap();
        assert!(matches!(own, FileBytes::Read(_)) && !own.is_empty());
        // A character device without end: read to one byte past the cap, no further.
        let zero = read(std::path::Path::new("/dev/zero")).unwrap();
        assert_eq!(zero.len() as u64, READ_MAX + 1);
    }
}
