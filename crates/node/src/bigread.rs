//! Reading a large regular file whole into memory, cheaply.
//!
//! A `Vec` of 80 MiB is paged in 4 KiB at a time while `read` fills it: ~20 000 page faults,
//! most of the system time of a `--pods-json` run. This buffer is an anonymous mapping the
//! kernel is asked to back with transparent huge pages (`MADV_HUGEPAGE`, honoured when THP is
//! `always` or `madvise`): a few dozen faults instead. Semantics are those of `read`: the bytes
//! are a private copy, so the file may change or shrink meanwhile without harm.

use std::io::Read;
use std::ops::Deref;

/// Bytes of a file, in an anonymous mapping of their own.
pub struct BigBuf {
    ptr: *mut u8,
    cap: usize,
    len: usize,
}

impl Deref for BigBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is mapped, initialised by read, and owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for BigBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by read_whole with this length.
        unsafe { libc::munmap(self.ptr.cast(), self.cap) };
    }
}

/// Read `file` (whose size is `len` now) to its end. Reads what is there: a file that grew is
/// read up to the buffer's size and then to the end through a second read of the rest.
pub fn read_whole(file: &mut std::fs::File, len: u64) -> std::io::Result<BigBuf> {
    let cap = (len as usize).saturating_add(1).next_multiple_of(2 << 20);
    // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            cap,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: advice on our own mapping; failure (THP off) only means small pages.
    unsafe { libc::madvise(p, cap, libc::MADV_HUGEPAGE) };
    let mut buf = BigBuf {
        ptr: p.cast(),
        cap,
        len: 0,
    };
    loop {
        if buf.len == buf.cap {
            // Grew since we looked: not worth a remap; fail like an over-long input would.
            return Err(std::io::Error::other("the file grew while it was read"));
        }
        // SAFETY: ptr+len..ptr+cap is mapped and ours; read writes at most that many bytes.
        let spare =
            unsafe { std::slice::from_raw_parts_mut(buf.ptr.add(buf.len), buf.cap - buf.len) };
        match file.read(spare) {
            Ok(0) => return Ok(buf),
            Ok(n) => buf.len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_of_any_size_exactly() {
        let dir = std::env::temp_dir().join(format!("bigread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for size in [0usize, 1, 4095, 2 << 20, (2 << 20) + 7, 5 << 20] {
            let p = dir.join(format!("f{size}"));
            let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            std::fs::write(&p, &data).unwrap();
            let mut f = std::fs::File::open(&p).unwrap();
            let b = read_whole(&mut f, size as u64).unwrap();
            assert_eq!(&b[..], &data[..], "size {size}");
        }
        // A file larger than announced (it grew): an error, not a short or corrupt read.
        let p = dir.join("grown");
        std::fs::write(&p, vec![b'x'; (2 << 20) + 10]).unwrap();
        let mut f = std::fs::File::open(&p).unwrap();
        assert!(read_whole(&mut f, 10).is_err());
        // Smaller than announced (it shrank): what is there.
        let mut f = std::fs::File::open(&p).unwrap();
        assert_eq!(read_whole(&mut f, 3 << 20).unwrap().len(), (2 << 20) + 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
