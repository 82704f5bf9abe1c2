//! Reading a source whole, up to a cap: the one bounded read every reader of a small file or a
//! child's output uses (a leaf module).

/// All of `r` when it holds at most `max` bytes, else `None`: at most one byte more is read, so a
/// source that never ends (`/dev/zero`, a FIFO) cannot grow the memory.
pub fn read_capped(r: impl std::io::Read, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut r.take(max + 1), &mut v)?;
    Ok((v.len() as u64 <= max).then_some(v))
}
