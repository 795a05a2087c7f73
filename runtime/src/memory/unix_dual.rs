//! Dual mapping on Linux (`memfd_create`) and macOS x86_64 (`shm_open`, unlinked at once).
//!
//! The chunk's address range is first reserved `PROT_NONE`, then the RX view of the shared
//! object and the private RW data are mapped over it with `MAP_FIXED` (safe: the range is
//! ours), which keeps code and data adjacent. The RW view of the code goes wherever the
//! kernel puts it; its address never needs to be reachable from code.

use super::{Region, WriteWindow};
use std::io;
use std::ptr;

pub(crate) struct Mapping {
    rw_len: usize,
    /// The shared memory object, kept open to remap retired code (see `retire_code`).
    fd: libc::c_int,
}

pub(crate) fn granularity() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else {
        4096
    }
}

pub(crate) fn open_write_window() -> WriteWindow {
    WriteWindow::new()
}

pub(crate) fn close_write_window() {}

pub(crate) fn map_at(code_len: usize, data_len: usize, at: usize) -> io::Result<Option<Region>> {
    map(code_len, data_len, at).map(Some)
}

pub(crate) fn map_anywhere(code_len: usize, data_len: usize) -> io::Result<Region> {
    map(code_len, data_len, 0)
}

/// An anonymous shared memory object of `len` bytes, as an owned file descriptor.
#[cfg(target_os = "linux")]
fn shared_object(len: usize) -> io::Result<libc::c_int> {
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_memfd_create,
            c"cpjit-code".as_ptr(),
            libc::MFD_CLOEXEC,
        )
    } as libc::c_int;
    if fd < 0 {
        return Err(os_error("memfd_create"));
    }
    truncate(fd, len)
}

/// An anonymous shared memory object of `len` bytes, as an owned file descriptor.
#[cfg(not(target_os = "linux"))]
fn shared_object(len: usize) -> io::Result<libc::c_int> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        // SAFETY: getpid has no preconditions.
        let name = format!("/cpjit.{}.{n}\0", unsafe { libc::getpid() });
        let name = name.as_ptr() as *const libc::c_char;
        // SAFETY: NUL-terminated name; the object is unlinked right away so that nothing
        // outlives the process.
        let fd =
            unsafe { libc::shm_open(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600) };
        if fd >= 0 {
            unsafe { libc::shm_unlink(name) };
            return truncate(fd, len);
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(os_error("shm_open"));
        }
    }
    Err(os_error("shm_open"))
}

fn truncate(fd: libc::c_int, len: usize) -> io::Result<libc::c_int> {
    // SAFETY: fd is a valid descriptor we own.
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
        let e = os_error("ftruncate");
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn map(code_len: usize, data_len: usize, hint: usize) -> io::Result<Region> {
    let total = code_len + data_len;
    let fd = shared_object(code_len)?;
    // SAFETY: every mmap below either maps fresh memory or replaces part of the
    // reservation made here; on any failure everything mapped so far is unmapped.
    unsafe {
        let base = libc::mmap(
            hint as *mut libc::c_void,
            total,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            let e = os_error("mmap (reserve)");
            libc::close(fd);
            return Err(e);
        }
        let fail = |what: &str, rw: *mut libc::c_void| {
            let e = os_error(what);
            libc::munmap(base, total);
            if !rw.is_null() {
                libc::munmap(rw, code_len);
            }
            libc::close(fd);
            e
        };
        let rw = libc::mmap(
            ptr::null_mut(),
            code_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        if rw == libc::MAP_FAILED {
            return Err(fail("mmap (code, RW view)", ptr::null_mut()));
        }
        let rx = libc::mmap(
            base,
            code_len,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        );
        if rx == libc::MAP_FAILED {
            return Err(fail("mmap (code, RX view)", rw));
        }
        let data = libc::mmap(
            (base as usize + code_len) as *mut libc::c_void,
            data_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED,
            -1,
            0,
        );
        if data == libc::MAP_FAILED {
            return Err(fail("mmap (data)", rw));
        }
        Ok(Region {
            code_rx: base as usize,
            code_rw: rw as usize,
            code_len,
            data: data as usize,
            data_len,
            mapping: Mapping {
                rw_len: code_len,
                fd,
            },
        })
    }
}

pub(crate) fn unmap(region: &mut Region) {
    // SAFETY: the region owns both ranges; no trace can use them any more.
    unsafe {
        libc::munmap(
            region.code_rx as *mut libc::c_void,
            region.code_len + region.data_len,
        );
        libc::munmap(region.code_rw as *mut libc::c_void, region.mapping.rw_len);
        libc::close(region.mapping.fd);
    }
}

/// Replaces the RX view's pages over `offset..offset + len` of the code part with a fresh
/// mapping of the same bytes (`MAP_FIXED`, same file offset and protection: atomic for other
/// threads, which at most take a minor fault).
///
/// Needed only under emulation: qemu-user caches translated code per guest address and
/// drops it only when the range is unmapped or remapped; writes through the RW alias are
/// invisible to it, so a freed block reused for new code would run the old translation.
/// Hardware needs nothing beyond the icache flush, so this runs where aarch64 Linux is
/// tested under qemu, once per freed trace.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub(crate) fn retire_code(region: &Region, offset: usize, len: usize) {
    let page = granularity();
    let start = offset & !(page - 1);
    let end = ((offset + len + page - 1) & !(page - 1)).min(region.code_len);
    // SAFETY: replaces part of our own RX view with the same file pages and protection.
    unsafe {
        libc::mmap(
            (region.code_rx + start) as *mut libc::c_void,
            end - start,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_SHARED | libc::MAP_FIXED,
            region.mapping.fd,
            start as libc::off_t,
        );
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "aarch64")))]
pub(crate) fn retire_code(_region: &Region, _offset: usize, _len: usize) {}
