//! Dual mapping on Linux (`memfd_create`: one per arena, a range per chunk, see
//! `code_file.rs`) and macOS x86_64 (`shm_open`, unlinked at once, one per chunk).
//!
//! The chunk's address range (code then data) is reserved `PROT_NONE` (`MAP_NORESERVE`: no
//! memory, no commit charge). Committing maps the new part of the shared object R+X over the
//! code reservation, and fresh private RW pages over the data reservation, with `MAP_FIXED`
//! (safe: the ranges are ours), which keeps code and data adjacent. No writable alias of
//! the code outlives a write: on Linux code is assembled in a private buffer and written
//! to the memfd with `pwrite` (no writable mapping of code ever exists), or, with protection
//! keys, through a keyed alias that only a thread inside a write window may write
//! (`pkey.rs`); on macOS x86_64 through a window, the object's pages for the bytes written
//! mapped RW wherever the kernel puts them and unmapped when the writer is dropped.

#[cfg(target_os = "linux")]
use super::code_file::CodeFile;
use super::os_error;
use super::unix_common::reserve;
pub(crate) use super::unix_common::{commit_data, granularity, page_size};
use super::{CodeObject, Region};
use std::io;

/// Linux: the region's range of its arena's code object.
#[cfg(target_os = "linux")]
pub(crate) struct Mapping {
    /// The arena's shared memory object behind both code views (`code_file.rs`), kept to
    /// commit more of it, to remap retired code (see `retire_code`) and to give the range
    /// back when the region is unmapped.
    file: std::sync::Arc<CodeFile>,
    /// The file offset of the code part's first byte.
    base: usize,
    /// Start of the persistent RW alias of the code part, or 0.
    alias: usize,
    /// The protection key of the alias, if only write windows may write it.
    key: Option<u32>,
}

/// macOS x86_64: the region's own shared memory object (sized once, so not shared).
#[cfg(not(target_os = "linux"))]
pub(crate) struct Mapping {
    fd: libc::c_int,
}

/// What writing code needs on Linux: the shared memory object's descriptor, the file
/// offset of the region's code, the persistent alias's address (0 if none) and its key.
#[cfg(target_os = "linux")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Handle {
    fd: libc::c_int,
    base: usize,
    alias: usize,
    key: Option<u32>,
}

#[cfg(target_os = "linux")]
pub(crate) fn handle(mapping: &Mapping) -> Handle {
    Handle {
        fd: mapping.file.fd,
        base: mapping.base,
        alias: mapping.alias,
        key: mapping.key,
    }
}

/// The shared memory object's descriptor, for writing code.
#[cfg(not(target_os = "linux"))]
pub(crate) type Handle = libc::c_int;

#[cfg(not(target_os = "linux"))]
pub(crate) fn handle(mapping: &Mapping) -> Handle {
    mapping.fd
}

/// Linux: a private buffer for code bytes `offset..offset + len`, written to the memfd by
/// `publish` (staged whole) or window by window by `put`, so that no writable mapping of
/// the code exists at any time; or, with a persistent alias, nothing (`direct`): the bytes
/// are written through the alias (a keyed one granted to this thread until dropped).
#[cfg(target_os = "linux")]
pub(crate) struct Window {
    fd: libc::c_int,
    offset: usize,
    /// The buffer: the thread's ([`STAGING`], lent to this window until it is dropped) or
    /// `_own`'s; null when `direct`. (Pointers, not the buffer moved in and out of the
    /// thread's local: the moves were about a third of the 200 instructions a trace spent
    /// opening and closing its window.)
    buffer: *mut Vec<u8>,
    /// Where the thread's buffer is marked lent (null if this window has its own).
    lent: *const std::cell::Cell<bool>,
    /// A window's own buffer, where the thread's is lent already (a window opened while
    /// another is) or gone (the thread's locals being destroyed): boxed, so that `buffer`
    /// stays valid when the window moves.
    #[allow(clippy::box_collection)]
    _own: Option<Box<Vec<u8>>>,
    /// Bytes staged whole, which `publish` writes (0 when staged in windows).
    whole: usize,
    direct: bool,
    /// This thread's write access to a keyed alias, closed when the window is dropped.
    _access: Option<super::pkey::WriteAccess>,
}

/// A thread's staging buffer, reused from trace to trace, and whether a window has it.
#[cfg(target_os = "linux")]
struct Staging {
    buffer: std::cell::UnsafeCell<Vec<u8>>,
    lent: std::cell::Cell<bool>,
}

#[cfg(target_os = "linux")]
thread_local! {
    /// One buffer per thread, lent to one window at a time.
    static STAGING: Staging = const {
        Staging {
            buffer: std::cell::UnsafeCell::new(Vec::new()),
            lent: std::cell::Cell::new(false),
        }
    };
}

/// A thread keeps a buffer of at most this many bytes (windows are at most
/// [`STAGE_BYTES`](super::STAGE_BYTES) plus one instance): a larger one, grown for an
/// instance larger than a window, is freed.
#[cfg(target_os = "linux")]
const KEEP_BYTES: usize = 2 * super::STAGE_BYTES;

/// The capacity of this thread's staging buffer (what it keeps between traces).
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn staged_capacity() -> usize {
    STAGING.with(|s| {
        assert!(!s.lent.get(), "asked while a window is open");
        // SAFETY: no window of this thread has the buffer (`lent` is false), so nothing
        // else refers to it.
        unsafe { &*s.buffer.get() }.capacity()
    })
}

#[cfg(target_os = "linux")]
impl Window {
    /// A window on `offset..` of `fd` staging in the thread's buffer, or (if a window of
    /// this thread has it, or the thread's locals are gone) in a buffer of its own.
    fn staged(fd: libc::c_int, offset: usize) -> Window {
        let lent = STAGING.try_with(|s| (!s.lent.replace(true)).then_some(s as *const Staging));
        let (buffer, lent, own) = match lent {
            Ok(Some(s)) => {
                // SAFETY: the thread's staging, alive for the thread's life, which this
                // window (not `Send`) does not outlive: it lives inside one call on it.
                let s = unsafe { &*s };
                (s.buffer.get(), &s.lent as *const _, None)
            }
            _ => {
                let mut own = Box::new(Vec::new());
                (&mut *own as *mut Vec<u8>, std::ptr::null(), Some(own))
            }
        };
        Window {
            fd,
            offset,
            buffer,
            lent,
            _own: own,
            whole: 0,
            direct: false,
            _access: None,
        }
    }

    /// The buffer this window stages in.
    fn buffer(&mut self) -> &mut Vec<u8> {
        debug_assert!(!self.direct);
        // SAFETY: the thread's buffer, lent to this window alone until it is dropped, or
        // the window's own boxed one (the field `buffer`); `&mut self` makes the borrow
        // unique.
        unsafe { &mut *self.buffer }
    }

    /// The first `len` bytes of the buffer, grown if needed (fallibly: a window is bounded,
    /// but the process may be out of memory); with `whole`, `publish` writes them.
    pub(crate) fn stage(&mut self, len: usize, whole: bool) -> Result<&mut [u8], crate::Error> {
        let buffer = self.buffer();
        // Not cleared: callers write every byte, and stale code bytes are not secret. Not
        // shortened either, so that only growth past the largest window yet is zero-filled.
        if buffer.len() < len {
            let more = len - buffer.len();
            crate::error::try_grow(buffer, more, "staging the trace's code")?;
            buffer.resize(len, 0);
        }
        if whole {
            self.whole = len;
        }
        Ok(&mut self.buffer()[..len])
    }

    /// Writes the buffer's first `len` bytes at byte `from` of the window's range.
    pub(crate) fn put(&mut self, from: usize, len: usize) -> io::Result<()> {
        let at = self.offset + from;
        pwrite_all(self.fd, &self.buffer()[..len], at)
    }

    /// Writes the bytes staged whole to the object (the pages the RX view maps).
    pub(crate) fn publish(&mut self) -> io::Result<()> {
        if self.direct || self.whole == 0 {
            // Already in the object's pages (through the alias, or window by window).
            return Ok(());
        }
        let (whole, at) = (self.whole, self.offset);
        pwrite_all(self.fd, &self.buffer()[..whole], at)
    }
}

/// Writes all of `bytes` to `fd` at `offset`: one `pwrite`, inline (the common case: all
/// written at once), then [`pwrite_rest`] for a short write, an interruption or an error.
#[cfg(target_os = "linux")]
#[inline]
fn pwrite_all(fd: libc::c_int, bytes: &[u8], offset: usize) -> io::Result<()> {
    // SAFETY: a valid buffer and a descriptor we own; the range was committed.
    let n = unsafe {
        libc::pwrite(
            fd,
            bytes.as_ptr() as *const libc::c_void,
            bytes.len(),
            offset as libc::off_t,
        )
    };
    if n as usize == bytes.len() {
        return Ok(());
    }
    pwrite_rest(fd, bytes, offset, n)
}

/// What [`pwrite_all`]'s first `pwrite` (which returned `first`) left to do.
#[cfg(target_os = "linux")]
#[cold]
#[inline(never)]
fn pwrite_rest(fd: libc::c_int, bytes: &[u8], offset: usize, first: isize) -> io::Result<()> {
    let (mut done, mut n) = (0, first);
    loop {
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::new(e.kind(), format!("pwrite (code): {e}")));
            }
        } else if n == 0 && done < bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwrite (code) wrote nothing",
            ));
        } else {
            done += n as usize;
        }
        if done >= bytes.len() {
            return Ok(());
        }
        let rest = &bytes[done..];
        // SAFETY: as in `pwrite_all`.
        n = unsafe {
            libc::pwrite(
                fd,
                rest.as_ptr() as *const libc::c_void,
                rest.len(),
                (offset + done) as libc::off_t,
            )
        };
    }
}

#[cfg(target_os = "linux")]
impl Drop for Window {
    fn drop(&mut self) {
        if self.lent.is_null() {
            // Direct, or the window's own buffer (freed with it).
            return;
        }
        let buffer = self.buffer();
        if buffer.capacity() > KEEP_BYTES {
            *buffer = Vec::new();
        }
        // SAFETY: the thread's staging (see `Window::staged`), still alive.
        unsafe { &*self.lent }.set(false);
    }
}

/// Linux: the thread's buffer for code bytes `offset..offset + len`, unstaged (the caller
/// stages it whole or in windows: address 0), or with a persistent alias the alias's bytes
/// themselves; returns it and its address.
// Inline into its one caller, `CodeSource::open`: one build left it out of line, 22
// instructions more per trace (callgrind, straight-10).
#[cfg(target_os = "linux")]
#[inline]
pub(crate) fn open_window(
    _code_rx: usize,
    handle: Handle,
    offset: usize,
    len: usize,
) -> io::Result<(Window, usize)> {
    let _ = len;
    let offset_in_file = handle.base + offset;
    if handle.alias == 0 {
        return Ok((Window::staged(handle.fd, offset_in_file), 0));
    }
    let window = Window {
        fd: handle.fd,
        offset: offset_in_file,
        buffer: std::ptr::null_mut(),
        lent: std::ptr::null(),
        _own: None,
        whole: 0,
        direct: true,
        _access: handle.key.map(super::pkey::WriteAccess::open),
    };
    Ok((window, handle.alias + offset))
}

/// macOS x86_64: a writable mapping of some of the object's pages, unmapped on drop (POSIX
/// shared memory objects cannot be written with `pwrite` there).
#[cfg(not(target_os = "linux"))]
pub(crate) struct Window {
    base: usize,
    len: usize,
}

#[cfg(not(target_os = "linux"))]
impl Window {
    /// Nothing to do: the bytes were written through the mapping.
    pub(crate) fn publish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: our own mapping, made by `open_window`; nothing refers to it any more.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// macOS x86_64: maps the pages holding code bytes `offset..offset + len` writable; returns
/// the window and the address of byte `offset` in it.
#[cfg(not(target_os = "linux"))]
pub(crate) fn open_window(
    _code_rx: usize,
    fd: Handle,
    offset: usize,
    len: usize,
) -> io::Result<(Window, usize)> {
    let page = granularity();
    let first = offset & !(page - 1);
    let end = (offset + len.max(1)).div_ceil(page) * page;
    // SAFETY: a fresh shared mapping of committed pages of our object, placed by the kernel.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            end - first,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            first as libc::off_t,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(os_error("mmap (code write window)"));
    }
    let base = at as usize;
    Ok((
        Window {
            base,
            len: end - first,
        },
        base + (offset - first),
    ))
}

/// With `object.alias` (Linux only, [`super::PERSISTENT_ALIAS`]): also reserve a persistent
/// RW alias of the code part.
pub(crate) fn map_at(
    code_len: usize,
    data_len: usize,
    at: usize,
    object: &CodeObject,
) -> io::Result<Option<Region>> {
    map(code_len, data_len, at, object).map(Some)
}

pub(crate) fn map_anywhere(
    code_len: usize,
    data_len: usize,
    object: &CodeObject,
) -> io::Result<Region> {
    map(code_len, data_len, 0, object)
}

/// An anonymous shared memory object of `len` bytes, as an owned file descriptor. macOS
/// lets a POSIX shared memory object be sized only once, so it is sized for the whole code
/// part here (its pages are backed only once touched), and each region has its own.
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
            // SAFETY: the same NUL-terminated name.
            unsafe { libc::shm_unlink(name) };
            return truncate(fd, len);
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(os_error("shm_open"));
        }
    }
    Err(os_error("shm_open"))
}

#[cfg(not(target_os = "linux"))]
fn truncate(fd: libc::c_int, len: usize) -> io::Result<libc::c_int> {
    // SAFETY: fd is a valid descriptor we own.
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
        let e = os_error("ftruncate");
        // SAFETY: fd is ours and closed once, here.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

/// Linux: a range of the arena's code object for the code part, the reservation of both
/// parts, and of the alias if asked for.
#[cfg(target_os = "linux")]
fn map(code_len: usize, data_len: usize, hint: usize, object: &CodeObject) -> io::Result<Region> {
    let total = code_len + data_len;
    let file = object.file()?;
    let base = file.take(code_len, granularity())?;
    let reserved = reserve(hint, total, "mmap (reserve code and data)").and_then(|at| {
        if !object.alias {
            return Ok((at, 0));
        }
        // The alias goes anywhere (the kernel chooses): nothing needs to reach it.
        match reserve(0, code_len, "mmap (reserve the code's writable alias)") {
            Ok(alias) => Ok((at, alias as usize)),
            Err(e) => {
                // SAFETY: our own reservation, not used elsewhere.
                unsafe { libc::munmap(at, total) };
                Err(e)
            }
        }
    });
    let (at, alias) = match reserved {
        Ok(reserved) => reserved,
        Err(e) => {
            file.give_back(base, code_len, 0);
            return Err(e);
        }
    };
    let key = object.key;
    let mapping = Mapping {
        file,
        base,
        alias,
        key,
    };
    Ok(adjacent(at as usize, code_len, data_len, mapping))
}

/// macOS x86_64: an object of the region's own, and the reservation of both parts.
#[cfg(not(target_os = "linux"))]
fn map(code_len: usize, data_len: usize, hint: usize, object: &CodeObject) -> io::Result<Region> {
    debug_assert!(!object.alias, "a persistent alias off Linux");
    let total = code_len + data_len;
    let fd = shared_object(code_len)?;
    let at = match reserve(hint, total, "mmap (reserve code and data)") {
        Ok(at) => at,
        Err(e) => {
            // SAFETY: fd is ours and not used elsewhere.
            unsafe { libc::close(fd) };
            return Err(e);
        }
    };
    Ok(adjacent(at as usize, code_len, data_len, Mapping { fd }))
}

/// The region reserved at `at`: its code part there, its data part right after it.
fn adjacent(at: usize, code_len: usize, data_len: usize, mapping: Mapping) -> Region {
    Region::reserved((at, code_len), (at + code_len, data_len), mapping)
}

/// Maps `fd`'s bytes `offset..offset + len` at `at` with `prot` (`at` is part of the
/// region's code reservation or its alias's).
fn map_object(
    at: usize,
    len: usize,
    prot: libc::c_int,
    fd: libc::c_int,
    offset: usize,
    what: &str,
) -> io::Result<()> {
    // SAFETY: replaces part of a reservation or view this region owns; no live trace uses
    // bytes past the committed prefix.
    let mapped = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            prot,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            offset as libc::off_t,
        )
    };
    if mapped == libc::MAP_FAILED {
        return Err(os_error(what));
    }
    Ok(())
}

/// The object's descriptor and the file offset of the region's code (macOS: 0, the object
/// is the region's own), its alias (0 if none).
pub(crate) fn object_of(region: &Region) -> (libc::c_int, usize, usize) {
    #[cfg(target_os = "linux")]
    let m = &region.mapping;
    #[cfg(target_os = "linux")]
    return (m.file.fd, m.base, m.alias);
    #[cfg(not(target_os = "linux"))]
    return (region.mapping.fd, 0, 0);
}

/// The protection key of the region's alias, if it has a keyed one.
fn key_of(_region: &Region) -> Option<u32> {
    #[cfg(target_os = "linux")]
    return _region.mapping.key;
    #[cfg(not(target_os = "linux"))]
    return None;
}

/// Commits code bytes `from..to` (page-aligned): grows the object (Linux; macOS sized it
/// whole), then maps the new range into the RX view. If a step fails, a later commit of the
/// same range redoes every step (each is idempotent), so nothing is half-usable.
pub(crate) fn commit_code(region: &Region, from: usize, to: usize) -> io::Result<()> {
    let (fd, base, alias) = object_of(region);
    #[cfg(target_os = "linux")]
    region.mapping.file.grow(base + to)?;
    let rx = libc::PROT_READ | libc::PROT_EXEC;
    let len = to - from;
    let what = "mmap (commit code, RX view)";
    map_object(region.code_rx + from, len, rx, fd, base + from, what)?;
    if alias != 0 {
        // A keyed alias is mapped inaccessible, then tagged: never writable without the key.
        let key = key_of(region);
        let rw = match key {
            Some(_) => libc::PROT_NONE,
            None => libc::PROT_READ | libc::PROT_WRITE,
        };
        let what = "mmap (commit code, writable alias)";
        map_object(alias + from, len, rw, fd, base + from, what)?;
        #[cfg(target_os = "linux")]
        if let Some(key) = key {
            super::pkey::protect(alias + from, len, key)?;
        }
    }
    Ok(())
}

/// Unmaps the region; its code range goes back to the arena's object, its pages freed
/// (Linux), or its own object is closed (macOS).
pub(crate) fn unmap(region: &mut Region) {
    let (_fd, _base, alias) = object_of(region);
    // SAFETY: the region owns both ranges; no trace can use them any more.
    unsafe {
        libc::munmap(
            region.code_rx as *mut libc::c_void,
            region.code_len + region.data_len,
        );
        if alias != 0 {
            libc::munmap(alias as *mut libc::c_void, region.code_len);
        }
    }
    #[cfg(target_os = "linux")]
    region
        .mapping
        .file
        .give_back(_base, region.code_len, region.code_committed);
    // SAFETY: the region's own descriptor, closed once, here.
    #[cfg(not(target_os = "linux"))]
    unsafe {
        libc::close(_fd)
    };
}

/// Replaces the RX view's pages over `offset..offset + len` of the code part with a fresh
/// mapping of the same bytes (`MAP_FIXED`, same file offset and protection: atomic for other
/// threads, which at most take a minor fault).
///
/// Needed only under emulation: qemu-user caches translated code per guest address and
/// drops it only when the range is unmapped or remapped; writes through a window are
/// invisible to it, so a freed block reused for new code would run the old translation.
/// Hardware needs nothing beyond the icache flush, so this runs where aarch64 and riscv64
/// Linux are tested under qemu (whose `riscv_flush_icache` is a no-op), once per freed trace.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "aarch64", target_arch = "riscv64")
))]
pub(crate) fn retire_code(region: &Region, offset: usize, len: usize) {
    let page = granularity();
    let start = offset & !(page - 1);
    // Freed blocks lie in the committed prefix; past it there is nothing to remap.
    let end = ((offset + len + page - 1) & !(page - 1)).min(region.code_committed);
    if end <= start {
        return;
    }
    let (fd, base, _) = object_of(region);
    // SAFETY: replaces part of our own RX view with the same file pages and protection.
    unsafe {
        libc::mmap(
            (region.code_rx + start) as *mut libc::c_void,
            end - start,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            (base + start) as libc::off_t,
        );
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "aarch64", target_arch = "riscv64")
)))]
pub(crate) fn retire_code(_region: &Region, _offset: usize, _len: usize) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::pwrite_all;

    /// A write over several pages at an offset arrives whole; a failed one is an error that
    /// names the call and the system's reason.
    #[test]
    fn pwrite_all_writes_every_byte_or_names_the_error() {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::syscall(libc::SYS_memfd_create, c"t".as_ptr(), 0) } as i32;
        assert!(fd >= 0);
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        pwrite_all(fd, &bytes, 100).unwrap();
        let mut back = vec![0u8; bytes.len()];
        // SAFETY: a buffer of the length read, a descriptor this test owns.
        let n = unsafe { libc::pread(fd, back.as_mut_ptr().cast(), back.len(), 100) };
        assert_eq!((n as usize, &back), (bytes.len(), &bytes));
        let e = pwrite_all(-1, &bytes, 0).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("pwrite (code): ") && text.contains("os error 9"),
            "{text}"
        );
        // SAFETY: closed once, here.
        unsafe { libc::close(fd) };
    }
}
