//! What both Unix memory back ends share: the page size (the unit of both mapping and
//! committing), reserving address space, and committing data pages (the data part of a
//! chunk is private anonymous memory on every Unix, never executable).

use super::{os_error, Region};
use std::io;

/// The size multiple in which regions are mapped: the page size.
pub(crate) fn granularity() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        16384 // Apple silicon's pages
    } else {
        4096
    }
}

/// The size multiple in which reserved memory is committed: the page size too.
pub(crate) fn page_size() -> usize {
    granularity()
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

/// An inaccessible reservation of `len` bytes at `hint` (or anywhere when 0).
pub(super) fn reserve(hint: usize, len: usize, what: &str) -> io::Result<*mut libc::c_void> {
    // SAFETY: a fresh anonymous mapping; MAP_FIXED is not used, so nothing is replaced.
    let at = unsafe {
        libc::mmap(
            hint as *mut libc::c_void,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(os_error(what));
    }
    Ok(at)
}
