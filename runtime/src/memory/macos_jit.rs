//! macOS arm64: one `MAP_JIT` mapping, made writable per thread with
//! `pthread_jit_write_protect_np(0)` and executable again with `(1)`.
//!
//! Apple silicon enforces this per thread in hardware: while a thread has write access it
//! cannot execute the region, and all other threads keep RX access, so traces keep running
//! while another thread writes. Hardened-runtime binaries need the
//! `com.apple.security.cs.allow-jit` entitlement for `MAP_JIT`. Data is a separate
//! reservation placed right after the code.
//!
//! Committing: the `MAP_JIT` region must be mapped RWX whole when created (its permissions
//! cannot be added later), but its pages cost nothing until touched and the arena touches
//! only its high-water mark, so committing code is bookkeeping only. Data is reserved
//! `PROT_NONE` and committed by mapping fresh RW pages over it.

use super::os_error;
use super::unix_common::reserve;
pub(crate) use super::unix_common::{commit_data, granularity, page_size};
use super::Region;
use std::io;

pub(crate) struct Mapping;

/// Nothing: the code is written in place once this thread may write `MAP_JIT` memory.
pub(crate) type Handle = ();

pub(crate) fn handle(_mapping: &Mapping) -> Handle {}

/// This thread's write access to `MAP_JIT` memory, revoked on drop.
pub(crate) struct Window;

impl Window {
    /// Nothing to do: the bytes were written in place.
    pub(crate) fn publish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: toggles this thread's view of MAP_JIT regions only.
        unsafe { libc::pthread_jit_write_protect_np(1) };
    }
}

/// Gives this thread write access (and takes its execute access) to `MAP_JIT` memory;
/// code byte `offset` is written at its executable address.
pub(crate) fn open_window(
    code_rx: usize,
    _handle: Handle,
    offset: usize,
    _len: usize,
) -> io::Result<(Window, usize)> {
    // SAFETY: as above.
    unsafe { libc::pthread_jit_write_protect_np(0) };
    Ok((Window, code_rx + offset))
}

pub(crate) fn map_anywhere(
    code_len: usize,
    data_len: usize,
    object: &super::CodeObject,
) -> io::Result<Region> {
    map_at(code_len, data_len, 0, object)?
        .ok_or_else(|| io::Error::other("data could not be mapped within ±2 GiB of the code"))
}

/// `Ok(None)` when the data could not be placed within reach of the code (mapped near
/// `hint`, anywhere for 0). `_object`: nothing is shared, each region has its own `MAP_JIT`
/// mapping (and never a persistent alias: [`super::PERSISTENT_ALIAS`] is false).
pub(crate) fn map_at(
    code_len: usize,
    data_len: usize,
    hint: usize,
    _object: &super::CodeObject,
) -> io::Result<Option<Region>> {
    // SAFETY: fresh mappings; on failure everything mapped so far is unmapped.
    unsafe {
        let code = libc::mmap(
            hint as *mut libc::c_void,
            code_len,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_JIT,
            -1,
            0,
        );
        if code == libc::MAP_FAILED {
            return Err(os_error("mmap (MAP_JIT code)"));
        }
        let data = match reserve(code as usize + code_len, data_len, "mmap (data)") {
            Ok(data) => data,
            Err(e) => {
                libc::munmap(code, code_len);
                return Err(e);
            }
        };
        if (data as usize).abs_diff(code as usize) > (1 << 31) - code_len - data_len {
            libc::munmap(data, data_len);
            libc::munmap(code, code_len);
            return Ok(None);
        }
        Ok(Some(Region::reserved(
            (code as usize, code_len),
            (data as usize, data_len),
            Mapping,
        )))
    }
}

/// Nothing to map: the `MAP_JIT` region is whole (see the module docs).
pub(crate) fn commit_code(_region: &Region, _from: usize, _to: usize) -> io::Result<()> {
    Ok(())
}

pub(crate) fn unmap(region: &mut Region) {
    let _ = &region.mapping;
    // SAFETY: the region owns both ranges.
    unsafe {
        libc::munmap(region.code_rx as *mut libc::c_void, region.code_len);
        libc::munmap(region.data as *mut libc::c_void, region.data_len);
    }
}

/// Nothing to do: no emulator caches translations of this platform's code (see
/// `unix_dual::retire_code`).
pub(crate) fn retire_code(_region: &Region, _offset: usize, _len: usize) {}
