//! Windows: a pagefile-backed section mapped twice, an RX view (`FILE_MAP_READ |
//! FILE_MAP_EXECUTE`) and an RW view (`FILE_MAP_WRITE`); data is `VirtualAlloc`ed RW right
//! after the RX view. Verified to work under wine 8 too, so no `VirtualProtect` fallback
//! (which would make pages that other threads execute briefly non-executable) is needed.

use super::{Region, WriteWindow};
use std::io;
use std::ptr;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, MapViewOfFile, MapViewOfFileEx, UnmapViewOfFile, VirtualAlloc, VirtualFree,
    FILE_MAP_EXECUTE, FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_MAPPED_VIEW_ADDRESS, MEM_COMMIT,
    MEM_RELEASE, MEM_RESERVE, PAGE_EXECUTE_READWRITE, PAGE_READWRITE, SEC_COMMIT,
};
use windows_sys::Win32::System::SystemInformation::{GetSystemInfo, SYSTEM_INFO};

pub(crate) struct Mapping {
    section: HANDLE,
}

pub(crate) fn granularity() -> usize {
    // SAFETY: GetSystemInfo fills the struct it is given.
    let info: SYSTEM_INFO = unsafe {
        let mut info = std::mem::zeroed();
        GetSystemInfo(&mut info);
        info
    };
    (info.dwAllocationGranularity as usize).max(4096)
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
            PAGE_EXECUTE_READWRITE | SEC_COMMIT,
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
            MEM_RESERVE | MEM_COMMIT,
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
            mapping: Mapping { section },
        }))
    }
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
