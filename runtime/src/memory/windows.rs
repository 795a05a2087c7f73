//! Windows: a pagefile-backed `SEC_RESERVE` section mapped as an RX view
//! (`FILE_MAP_READ | FILE_MAP_EXECUTE`) for the chunk's life; data is reserved with
//! `VirtualAlloc(MEM_RESERVE)` right after the RX view. Nothing is committed up front:
//! `commit_code` commits the section's new pages with `VirtualAlloc(MEM_COMMIT)` through
//! the RX view (`PAGE_EXECUTE_READ`), which is how `SEC_RESERVE` sections are meant to be
//! used; `commit_data` commits data pages `PAGE_READWRITE`. Code is written through a
//! window: a `FILE_MAP_WRITE` view of the section's range (from the 64 KiB boundary below
//! it), its pages committed again through it (`PAGE_READWRITE`: recommitting succeeds, and
//! wine tracks each view's pages separately), unmapped when the writer is dropped. No page
//! is ever W+X, no writable view outlives a write, and no `VirtualProtect` (which would
//! briefly make pages other threads execute non-executable) is needed. Verified under
//! wine 8.

use super::{os_error, Region};
use std::io;
use std::ptr;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, MapViewOfFile, MapViewOfFileEx, UnmapViewOfFile, VirtualAlloc, VirtualFree,
    FILE_MAP_EXECUTE, FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_MAPPED_VIEW_ADDRESS, MEM_COMMIT,
    MEM_RELEASE, MEM_RESERVE, PAGE_EXECUTE_READ, PAGE_EXECUTE_READWRITE, PAGE_NOACCESS,
    PAGE_PROTECTION_FLAGS, PAGE_READWRITE, SEC_RESERVE,
};
use windows_sys::Win32::System::SystemInformation::{GetSystemInfo, SYSTEM_INFO};

pub(crate) struct Mapping {
    section: HANDLE,
}

fn system_info() -> SYSTEM_INFO {
    // SAFETY: GetSystemInfo fills the struct it is given.
    unsafe {
        let mut info = std::mem::zeroed();
        GetSystemInfo(&mut info);
        info
    }
}

/// Views and reservations start at multiples of the allocation granularity (64 KiB).
pub(crate) fn granularity() -> usize {
    (system_info().dwAllocationGranularity as usize).max(4096)
}

/// Commits are in pages (4 KiB).
pub(crate) fn page_size() -> usize {
    (system_info().dwPageSize as usize).max(4096)
}

/// The section, as an address-sized integer (a `HANDLE` is a pointer, not `Send`).
pub(crate) type Handle = usize;

pub(crate) fn handle(mapping: &Mapping) -> Handle {
    mapping.section as usize
}

/// A `FILE_MAP_WRITE` view of part of the section, unmapped on drop.
pub(crate) struct Window {
    base: usize,
}

impl Window {
    /// Nothing to do: the bytes were written through the view.
    pub(crate) fn publish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: our own view, made by `open_window`; nothing refers to it any more.
        unsafe {
            UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
                Value: self.base as *mut _,
            })
        };
    }
}

/// Maps the section's bytes from the allocation-granularity boundary at or below `offset`
/// to `offset + len` writable, and commits `offset..offset + len` through the view; returns
/// the window and the address of byte `offset` in it.
pub(crate) fn open_window(
    _code_rx: usize,
    section: Handle,
    offset: usize,
    len: usize,
) -> io::Result<(Window, usize)> {
    let first = offset & !(granularity() - 1);
    let end = offset + len.max(1);
    // SAFETY: a fresh view of our own section; released on every path by `Window`.
    let view = unsafe {
        MapViewOfFile(
            section as HANDLE,
            FILE_MAP_WRITE,
            (first as u64 >> 32) as u32,
            first as u32,
            end - first,
        )
    };
    if view.Value.is_null() {
        return Err(os_error("MapViewOfFile (code write window)"));
    }
    let window = Window {
        base: view.Value as usize,
    };
    let start = window.base + (offset - first);
    commit(
        start,
        0,
        len.max(1),
        PAGE_READWRITE,
        "VirtualAlloc (commit code, write window)",
    )?;
    Ok((window, start))
}

pub(crate) fn map_anywhere(
    code_len: usize,
    data_len: usize,
    object: &super::CodeObject,
) -> io::Result<Region> {
    if let Some(region) = map_at(code_len, data_len, 0, object)? {
        return Ok(region);
    }
    // The view landed where its data cannot follow (something is mapped right after it):
    // find a range free for both, then map there. Another thread may take the range in
    // between, so try a few times.
    for _ in 0..16 {
        let at = free_range(code_len + data_len)?;
        if let Some(region) = map_at(code_len, data_len, at, object)? {
            return Ok(region);
        }
    }
    Err(io::Error::other(
        "no address range free for code followed by its data",
    ))
}

/// The start of an address range of `len` bytes that is free now (reserved and released).
fn free_range(len: usize) -> io::Result<usize> {
    // SAFETY: a fresh reservation, released at once; only its address is kept.
    unsafe {
        let at = VirtualAlloc(ptr::null(), len, MEM_RESERVE, PAGE_NOACCESS);
        if at.is_null() {
            return Err(os_error("VirtualAlloc (find a free range)"));
        }
        VirtualFree(at, 0, MEM_RELEASE);
        Ok(at as usize)
    }
}

/// `Ok(None)` when the address range at `at` (or after the RX view) is not free.
/// `_object`: nothing is shared, each region has its own section (and never a persistent
/// alias: [`super::PERSISTENT_ALIAS`] is false).
pub(crate) fn map_at(
    code_len: usize,
    data_len: usize,
    at: usize,
    _object: &super::CodeObject,
) -> io::Result<Option<Region>> {
    let size = code_len as u64;
    // SAFETY: plain Win32 calls; every handle and view is released on each failure path.
    unsafe {
        let section = CreateFileMappingW(
            INVALID_HANDLE_VALUE,
            ptr::null(),
            PAGE_EXECUTE_READWRITE | SEC_RESERVE,
            (size >> 32) as u32,
            size as u32,
            ptr::null(),
        );
        if section.is_null() {
            return Err(os_error("CreateFileMappingW"));
        }
        let rx = MapViewOfFileEx(
            section,
            FILE_MAP_READ | FILE_MAP_EXECUTE,
            0,
            0,
            code_len,
            at as *const _,
        );
        if rx.Value.is_null() {
            let e = os_error("MapViewOfFileEx (code, RX view)");
            CloseHandle(section);
            return if at != 0 { Ok(None) } else { Err(e) };
        }
        let data = VirtualAlloc(
            (rx.Value as usize + code_len) as *const _,
            data_len,
            MEM_RESERVE,
            PAGE_READWRITE,
        );
        if data.is_null() {
            UnmapViewOfFile(rx);
            CloseHandle(section);
            return Ok(None);
        }
        Ok(Some(Region::reserved(
            (rx.Value as usize, code_len),
            (data as usize, data_len),
            Mapping { section },
        )))
    }
}

/// Commits `from..to` (page-aligned) of the region at `base` with `protect`.
fn commit(
    base: usize,
    from: usize,
    to: usize,
    protect: PAGE_PROTECTION_FLAGS,
    what: &str,
) -> io::Result<()> {
    // SAFETY: the range lies in a view or reservation this region owns.
    let at = unsafe { VirtualAlloc((base + from) as *const _, to - from, MEM_COMMIT, protect) };
    if at.is_null() {
        return Err(os_error(what));
    }
    Ok(())
}

/// Commits code bytes `from..to` through the RX view (see the module docs). Recommitting
/// committed pages succeeds, so a failed commit can be retried.
pub(crate) fn commit_code(region: &Region, from: usize, to: usize) -> io::Result<()> {
    let rx = "VirtualAlloc (commit code, RX view)";
    commit(region.code_rx, from, to, PAGE_EXECUTE_READ, rx)
}

/// Commits data bytes `from..to`, read-write and never executable.
pub(crate) fn commit_data(region: &Region, from: usize, to: usize) -> io::Result<()> {
    commit(
        region.data,
        from,
        to,
        PAGE_READWRITE,
        "VirtualAlloc (commit data)",
    )
}

pub(crate) fn unmap(region: &mut Region) {
    // SAFETY: the region owns both views, the data allocation and the section handle.
    unsafe {
        UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
            Value: region.code_rx as *mut _,
        });
        VirtualFree(region.data as *mut _, 0, MEM_RELEASE);
        CloseHandle(region.mapping.section);
    }
}

/// Nothing to do: no emulator caches translations of this platform's code (see
/// `unix_dual::retire_code`).
pub(crate) fn retire_code(_region: &Region, _offset: usize, _len: usize) {}
