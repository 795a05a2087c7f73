//! What both Unix memory back ends share: error context and committing data pages (the
//! data part of a chunk is private anonymous memory on every Unix, never executable).

use super::Region;
use std::io;

/// The last OS error, prefixed with the call that failed.
pub(super) fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Commits data bytes `from..to` (page-aligned): fresh private RW pages, never X.
pub(crate) fn commit_data(region: &Region, from: usize, to: usize) -> io::Result<()> {
    // SAFETY: replaces part of the data reservation this region owns, past every byte in use.
    let at = unsafe {
        libc::mmap(
            (region.data + from) as *mut libc::c_void,
            to - from,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(os_error("mmap (commit data)"));
    }
    Ok(())
}
