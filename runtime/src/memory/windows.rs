//! Windows: a pagefile-backed `SEC_RESERVE` section mapped twice, an RX view
//! (`FILE_MAP_READ | FILE_MAP_EXECUTE`) and an RW view (`FILE_MAP_WRITE`); data is reserved
//! with `VirtualAlloc(MEM_RESERVE)` right after the RX view. Nothing is committed up front:
//! `commit_code` commits the section's new pages with `VirtualAlloc(MEM_COMMIT)` through
//! the RW view (`PAGE_READWRITE`) and then through the RX view (`PAGE_EXECUTE_READ`):
//! committing section pages through a view is how `SEC_RESERVE` sections are meant to be
//! used, recommitting committed pages succeeds, and wine tracks each view's pages
//! separately, so both views are committed explicitly; and
//! `commit_data` commits data pages `PAGE_READWRITE`. No page is ever W+X, and no
//! `VirtualProtect` (which would briefly make pages other threads execute non-executable)
//! is needed. Verified under wine 8.

use super::{Region, WriteWindow};
use std::io;
use std::ptr;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, MapViewOfFile, MapViewOfFileEx, UnmapViewOfFile, VirtualAlloc, VirtualFree,
    FILE_MAP_EXECUTE, FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_MAPPED_VIEW_ADDRESS, MEM_COMMIT,
    MEM_RELEASE, MEM_RESERVE, PAGE_EXECUTE_READ, PAGE_EXECUTE_READWRITE, PAGE_PROTECTION_FLAGS,
    PAGE_READWRITE, SEC_RESERVE,
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

pub(crate) fn open_write_window() -> WriteWindow {
    WriteWindow::new()
}

pub(crate) fn close_write_window() {}

fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

pub(crate) fn map_at(code_len: usize, data_len: usize, at: usize) -> io::Result<Option<Region>> {
    map(code_len, data_len, at)
}

pub(crate) fn map_anywhere(code_len: usize, data_len: usize) -> io::Result<Region> {
    if let Some(region) = map(code_len, data_len, 0)? {
        return Ok(region);
    }
    Err(io::Error::other(
        "no address range free for code followed by its data",
    ))
}

/// `Ok(None)` when the address range at `at` (or after the RX view) is not free.
fn map(code_len: usize, data_len: usize, at: usize) -> io::Result<Option<Region>> {
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
        let rw = MapViewOfFile(section, FILE_MAP_WRITE, 0, 0, code_len);
        if rw.Value.is_null() {
            let e = os_error("MapViewOfFile (code, RW view)");
            VirtualFree(data, 0, MEM_RELEASE);
            UnmapViewOfFile(rx);
            CloseHandle(section);
            return Err(e);
        }
        Ok(Some(Region {
            code_rx: rx.Value as usize,
            code_rw: rw.Value as usize,
            code_len,
            data: data as usize,
            data_len,
            code_committed: 0,
            data_committed: 0,
            mapping: Mapping { section },
        }))
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

/// Commits code bytes `from..to`: through the RW view first, then the RX view (see the
/// module docs). Recommitting committed pages succeeds, so a failed commit can be retried.
pub(crate) fn commit_code(region: &Region, from: usize, to: usize) -> io::Result<()> {
    let rw = "VirtualAlloc (commit code, RW view)";
    commit(region.code_rw, from, to, PAGE_READWRITE, rw)?;
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
        UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
            Value: region.code_rw as *mut _,
        });
        VirtualFree(region.data as *mut _, 0, MEM_RELEASE);
        CloseHandle(region.mapping.section);
    }
}

/// Nothing to do: no emulator caches translations of this platform's code (see
/// `unix_dual::retire_code`).
pub(crate) fn retire_code(_region: &Region, _offset: usize, _len: usize) {}
