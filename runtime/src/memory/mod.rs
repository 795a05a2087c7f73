//! Executable memory that is never writable and executable at the same time.
//!
//! A [`Region`] is one arena chunk: a *code* part and a *data* part, mapped next to each other
//! so that code can reach its data and GOT with RIP-relative (±2 GiB) and `adrp` (±4 GiB)
//! addressing.
//!
//! Why dual mapping: other threads may be executing earlier traces on the very page a new
//! trace is being written to, so flipping a page between RW and RX (`mprotect`) is not an
//! option, and a page that is W and X at once is what W^X forbids. Instead the code part is
//! one shared memory object mapped as an **RX view** (the addresses that execute) for the
//! chunk's life, and written only through a [`CodeWriter`] while a trace is finished (or a
//! freed trace is overwritten with traps, unless `JitOptions::trap_freed_code` is off).
//! The invariant: **no thread can write a page of live code except the one stitching
//! thread inside a write window that closes before the trace is returned; no view of code
//! is ever W+X, and no view that any other thread could write through persists.** So a
//! stray write elsewhere in the process cannot change live code.
//!
//! - Linux x86-64 with memory protection keys (`pku`, `ospke`; the default,
//!   `CodeWrites::Transient`): the memfd is also mapped read-write, never executable, at a
//!   second address tagged with the process's one protection key, which every thread's PKRU
//!   denies outside write windows and signal handlers always deny; a [`CodeWriter`] is a
//!   *write window*: its thread grants itself the key (`wrpkru`) until the writer is
//!   dropped, and writes the code in place through the alias, with no system call
//!   ([`pkey`]). Reads of code go through the RX view (key 0), open to every thread.
//! - Linux without keys (or with `CodeWrites::WithoutKeys`, or `CPJIT_NO_PROTECTION_KEYS`
//!   set): `memfd_create`, mapped R+X; one memfd per arena, each chunk's code part a range
//!   of it (`code_file.rs`), so a JIT holds one descriptor for its code however many chunks
//!   it has, and a chunk returned to the system punches its pages out of the file. There
//!   is no writable view at all: a trace is
//!   assembled in a private buffer and written to the memfd with one `pwrite`, which the
//!   RX view then shows ([`unix_dual`]); a trace longer than [`STAGE_BYTES`] is assembled
//!   and written window by window, so that the buffer (kept per thread) stays bounded and
//!   a huge trace needs no heap copy of itself. Unless the JIT opted for
//!   [`CodeWrites::PersistentAlias`](crate::CodeWrites): then the memfd is also mapped RW
//!   (never X) at a second, kernel-chosen address for the region's life, and traces are
//!   written straight through it, with no system call per trace; that alias is the one
//!   writable view of live code this module ever keeps, and only when asked for.
//! - macOS x86_64: `shm_open` (unlinked at once), mapped R+X, and written through a window
//!   (an RW `mmap` of the object's pages being written, unmapped when the writer is
//!   dropped: macOS shared memory objects cannot be `pwrite`n) ([`unix_dual`]).
//! - macOS arm64: the kernel refuses executable shared mappings for hardened processes, so
//!   Apple's model is used instead: one `MAP_JIT` mapping whose write permission is toggled
//!   *per thread* by `pthread_jit_write_protect_np`; a thread that writes cannot execute
//!   the region meanwhile, other threads keep executing it ([`macos_jit`]). A hardened
//!   runtime needs the `com.apple.security.cs.allow-jit` entitlement.
//! - Windows: a pagefile-backed section (`CreateFileMappingW`) mapped with `MapViewOfFileEx`
//!   (`FILE_MAP_READ | FILE_MAP_EXECUTE`) for the chunk's life, and with `MapViewOfFile`
//!   (`FILE_MAP_WRITE`) for each window, unmapped after ([`windows`]); this also works under
//!   wine 8.
//!
//! The data part (stencil data and per-trace GOT) is plain private RW memory, never X.
//!
//! **Why `pwrite` on Linux without protection keys.** Measured (issue 36, a 2-core VM with
//! no `pku`, kernel 6.18, load about 20; thread CPU per write of a 400-byte trace into a
//! memfd mapped R+X): `pwrite` 0.31–0.47 µs (a bare `getppid` 0.10 µs, so about 0.2 µs is
//! the shmem write path; 64 to 3,000 bytes cost the same); a private alias `mprotect`ed RW
//! and back to `PROT_NONE` around the copy 4.4–6.1 µs; an RW `mmap` window unmapped after
//! 5.4–6.6 µs (both flush the TLB of every thread); `process_vm_writev` and a write to
//! `/proc/self/mem` are refused on the shared R+X mapping. So the one cheaper path is no
//! system call at all: the persistent alias (opt-in, weaker), or a per-thread write window
//! where the processor has protection keys ([`pkey`], the default there).
//!
//! Measured again (wave 33, the same VM, load 2–9; CPU time per write of a 1,088-byte
//! trace, C loops of 200,000): `pwrite` 237–256 ns (a raw `syscall` the same, `pwritev`
//! 272–285, 176 bytes 222–229; the file offset, 0 to 2^40, changes nothing; a write across
//! a page boundary 352–354, the shmem path working page by page), a bare `getppid` 70–74;
//! against it, code written to fresh private RW pages then `mprotect`ed RX before use (one
//! call per trace, the pages made RW again 64 at a time) 1,198–1,219 ns, RW → RX → RW per
//! trace 2,980–3,005 (a real protection change splits the mapping and flushes the TLB;
//! rbpf's `mprotect` per compile, 132–155 ns, changes nothing: its allocator hands back the
//! page it made W+X before), and a `pwrite` to `/proc/self/mem` at a private R+X mapping
//! 380–408 (`process_vm_writev` refused). The `pwrite` stays; its ~170 ns above a bare
//! system call is the shmem write path (perf: the copy 17 %, then the page-cache lookup,
//! folio lock and dirtying, the inode lock).
//!
//! The page's state (wave 34, the same VM and kernel, load about 6; CPU per `pwrite` of 1,088
//! bytes into a page the file already holds, C loops of 200,000): one page written again
//! and again 222–228 ns; 256 pages in turn 256–275 (their page-cache entries colder); 64
//! bytes 208–219; a whole aligned page 234–251. A page the file does not hold yet (punched
//! out, or never written) costs 1.1–1.2 µs more on its first write (the kernel allocates
//! and clears it); one allocated ahead by `fallocate` still about 0.25 µs more, and the
//! `fallocate` itself about 0.8 µs per page: prefaulting moves the cost, it does not
//! remove it, and only a trace's first write to a page pays it ([`Jit::reserve`] pays it
//! before the first traces). Perf over the warm write: the copy 15 %, the system call's
//! entry 13 %, the rest the shmem write path (page-cache look-up, folio lock, dirtying,
//! inode lock, time stamps): a path the kit chooses nothing of but the bytes and the pages
//! it writes. So placement keeps each write on as few pages as it can
//! (`arena/free_list.rs`).
//!
//! Every path the kernel offers instead, measured again on an AMD EPYC guest where the
//! `pwrite` costs 445–500 ns (wave 37; io_uring, AIO, `pwritev2` flags, tmpfs and huge
//! pages, `O_DIRECT`, `mprotect`, `mremap`, `/proc/self/mem`, `UFFDIO_COPY`), and where its
//! time goes in the kernel: `code_file.rs`. None is cheaper.
//!
//! [`Jit::reserve`]: crate::Jit::reserve
//!
//! **Reserve, then commit on demand.** [`Region::map`] only *reserves* address space for
//! both parts (inaccessible, costing no memory): a chunk must be reserved whole up front so
//! that code and data stay adjacent and within reach of each other. [`Region::commit`] then
//! makes a page-rounded prefix of each part accessible (committed) as the arena hands out
//! blocks further into it; the committed prefix only grows, and freed blocks inside it are
//! reused. So the memory really mapped follows the arena's high-water mark, not the chunk
//! size. Per platform, committing code means:
//!
//! - Linux: grow the arena's memfd (`ftruncate`) to the end of the chunk's range committed,
//!   and map the new file range R+X over the
//!   `PROT_NONE` reservation of the RX view (`MAP_FIXED`), and RW over the alias's
//!   reservation if there is one (a keyed alias: mapped `PROT_NONE`, then made RW under the
//!   key with `pkey_mprotect`, so that no thread can write it in between).
//! - macOS x86_64: the same with the `shm_open` object, which is sized once when created
//!   (macOS refuses to resize it) and is backed only as pages are touched.
//! - macOS arm64: the `MAP_JIT` region is mapped whole (its pages cost nothing until
//!   touched) and the committed prefix is the arena's page-rounded high-water mark.
//! - Windows: the section is created `SEC_RESERVE`; the new range is committed with
//!   `VirtualAlloc(MEM_COMMIT)` through the RX view (`PAGE_EXECUTE_READ`); a window commits
//!   its range again through itself (`PAGE_READWRITE`), so each view keeps its own, never
//!   W+X, protection.
//!
//! Committing data maps fresh private RW pages over the data reservation
//! (`VirtualAlloc(MEM_COMMIT)` on Windows).

#[cfg(all(target_os = "macos", target_arch = "aarch64"))]
mod macos_jit;
#[cfg(unix)]
mod unix_common;
#[cfg(all(target_os = "macos", target_arch = "aarch64"))]
use macos_jit as imp;

#[cfg(all(unix, not(all(target_os = "macos", target_arch = "aarch64"))))]
mod unix_dual;
#[cfg(all(unix, not(all(target_os = "macos", target_arch = "aarch64"))))]
use unix_dual as imp;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

#[cfg(target_os = "linux")]
mod code_file;
#[cfg(target_os = "linux")]
pub(crate) use code_file::CodeObject;
#[cfg(target_os = "linux")]
pub(crate) mod pkey;
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod pkey_tests;

use crate::Error;
use std::io;

// Used by the window tests, which run on x86-64 Linux only.
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
pub(crate) use imp::staged_capacity;

/// Whether code can keep a persistent writable alias here
/// ([`crate::CodeWrites::PersistentAlias`]): on Linux, where the code memfd can be mapped a
/// second time. The platform modules of other systems never map one.
pub(crate) const PERSISTENT_ALIAS: bool = cfg!(target_os = "linux");

/// What the chunks of one arena share for their code: nothing but the option here (macOS
/// sizes a shared memory object only once, a Windows section's maximum size is fixed when
/// it is created, so each region has its own object there); on Linux, one memfd
/// (`code_file.rs`).
#[cfg(not(target_os = "linux"))]
pub(crate) struct CodeObject {
    /// Whether chunks keep a persistent writable alias (never set off Linux).
    pub(crate) alias: bool,
}

#[cfg(not(target_os = "linux"))]
impl CodeObject {
    pub(crate) fn new(alias: bool) -> CodeObject {
        CodeObject { alias }
    }

    /// No protection keys off Linux.
    pub(crate) fn key(&self) -> Option<u32> {
        None
    }
}

/// The code object of a new arena: with a persistent alias if `alias`; else, if `keys` and
/// the process has a protection key for code writes ([`pkey::write_key`], x86-64 Linux),
/// a keyed alias that only write windows may write; else none (`pwrite` on Linux).
pub(crate) fn code_object(alias: bool, keys: bool) -> CodeObject {
    #[cfg(target_os = "linux")]
    if keys && !alias {
        if let Some(key) = pkey::write_key() {
            return CodeObject::keyed(key);
        }
    }
    let _ = keys;
    CodeObject::new(alias)
}

/// Runs `f`, the caller's code, with this thread's write window on code closed if one is
/// open (see [`pkey::closed_while`]; nothing to close without protection keys).
pub(crate) fn closed_while<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_os = "linux")]
    return pkey::closed_while(f);
    #[cfg(not(target_os = "linux"))]
    return f();
}

/// One chunk of JIT memory: a code part (executable view, written through short-lived
/// windows) and an adjacent RW data part.
pub(crate) struct Region {
    /// Start of the executable (RX) view of the code part.
    pub code_rx: usize,
    /// Bytes reserved for the code part.
    pub code_len: usize,
    /// Start of the data part (RW, never X).
    pub data: usize,
    /// Bytes reserved for each part (multiples of [`granularity`]).
    pub data_len: usize,
    /// Bytes at the start of the code part and of the data part that are committed
    /// (accessible), multiples of [`page_size`] (or the part's whole length).
    pub code_committed: usize,
    pub data_committed: usize,
    mapping: imp::Mapping,
}

// SAFETY: the region is a set of raw mappings owned by this value; which bytes may be
// accessed when is coordinated by the arena (disjoint blocks per trace).
unsafe impl Send for Region {}
// SAFETY: as for Send: shared access to the mappings is coordinated by the arena.
unsafe impl Sync for Region {}

impl Region {
    /// A region a platform module has just reserved: the code part at `code_rx` (its
    /// executable view) and the data part at `data`, nothing committed yet.
    fn reserved(
        (code_rx, code_len): (usize, usize),
        (data, data_len): (usize, usize),
        mapping: imp::Mapping,
    ) -> Region {
        Region {
            code_rx,
            code_len,
            data,
            data_len,
            code_committed: 0,
            data_committed: 0,
            mapping,
        }
    }

    /// Reserves a chunk with `code_len` bytes of code and `data_len` bytes of data (both
    /// multiples of [`granularity`]), preferably within `near.1` bytes of address `near.0`.
    /// Nothing is committed yet: see [`Region::commit`].
    ///
    /// The code part comes from `object` (on Linux a range of the arena's one memfd); with
    /// `object.alias` the code part is also mapped read-write at a second address for the
    /// region's life, and code written through it ([`crate::CodeWrites::PersistentAlias`];
    /// Linux).
    pub fn map(
        code_len: usize,
        data_len: usize,
        near: Option<(u64, u64)>,
        object: &CodeObject,
    ) -> io::Result<Region> {
        // `Jit::with_options` refuses the option where it is not implemented, naming it.
        debug_assert!(
            !object.alias || PERSISTENT_ALIAS,
            "a persistent alias off Linux"
        );
        let total = code_len + data_len;
        if let Some((hint, reach)) = near {
            for candidate in placement_candidates(hint, reach, total) {
                if let Some(region) = imp::map_at(code_len, data_len, candidate, object)? {
                    if within(hint, reach, region.code_rx, total) {
                        return Ok(region);
                    }
                    drop(region);
                }
            }
        }
        imp::map_anywhere(code_len, data_len, object)
    }
}

/// What it takes to open a [`CodeWriter`] on a region's code without holding the region:
/// copied into each block, so that writers are opened outside the arena's lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodeSource {
    code_rx: usize,
    handle: imp::Handle,
}

impl CodeSource {
    /// A writable view of code bytes `offset..offset + len` of the region, until dropped.
    /// The region must outlive the writer, and nothing else may write those bytes meanwhile.
    // Inline: the writer is then made in its caller's frame, not returned through memory.
    #[inline]
    pub fn open(&self, offset: usize, len: usize) -> Result<CodeWriter, Error> {
        // (On macOS arm64 the handle is `()`: the thread's write access is all it takes.)
        #[allow(clippy::unit_arg)]
        let (window, start) =
            imp::open_window(self.code_rx, self.handle, offset, len).map_err(Error::Map)?;
        #[allow(unused_mut)]
        let mut writer = CodeWriter {
            start,
            len,
            window,
            _not_send: std::marker::PhantomData,
        };
        // Linux stages code in the thread's buffer: a short write whole, a longer one in
        // windows (`stage`, `put`), so that no copy of a huge trace is ever on the heap.
        #[cfg(target_os = "linux")]
        if start == 0 && len <= STAGE_BYTES {
            writer.start = writer.window.stage(len, true)?.as_mut_ptr() as usize;
        }
        Ok(writer)
    }
}

/// The most code bytes staged at once in a thread's private buffer (Linux, without a
/// persistent alias): a longer write goes in windows of about this size, each written with
/// its own `pwrite`, so a huge trace needs no heap copy of itself and the buffer a thread
/// keeps stays small. (Per window, the `pwrite` costs ~1 µs against ~100 µs of stitching.)
pub(crate) const STAGE_BYTES: usize = 1 << 20;

/// A writable view of some code bytes, published by [`CodeWriter::publish`]; the view is
/// gone (a private buffer freed, a window unmapped, or on macOS arm64 this thread's write
/// access revoked) when this is dropped.
pub(crate) struct CodeWriter {
    /// Address of the view of the first byte, or 0 when the bytes are staged in windows.
    start: usize,
    len: usize,
    window: imp::Window,
    /// macOS arm64 toggles write access per thread: close on the thread that opened.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl CodeWriter {
    /// Whether [`bytes`](CodeWriter::bytes) can show the whole range at once: `false` only
    /// on Linux for a range longer than [`STAGE_BYTES`], which is written with
    /// [`stage`](CodeWriter::stage) and [`put`](CodeWriter::put) instead.
    #[inline]
    pub fn whole(&self) -> bool {
        self.start != 0
    }

    /// The bytes, through the writable view (on Linux a private buffer whose initial
    /// contents are unspecified: every byte must be written).
    ///
    /// # Panics
    /// Unless [`whole`](CodeWriter::whole).
    pub fn bytes(&mut self) -> &mut [u8] {
        assert!(self.whole(), "code staged in windows has no whole view");
        // SAFETY: `start..start + len` is writable while `self` lives (a buffer or window it
        // owns), and the opener guaranteed exclusive use of those code bytes.
        unsafe { std::slice::from_raw_parts_mut(self.start as *mut u8, self.len) }
    }

    /// A writable view of bytes `from..from + len` of the range, which
    /// [`put`](CodeWriter::put)`(from, len)` writes out (its initial contents are
    /// unspecified). Fails with [`Error::AllocationFailed`] if the buffer cannot grow to it.
    pub fn stage(&mut self, from: usize, len: usize) -> Result<&mut [u8], Error> {
        #[cfg(target_os = "linux")]
        if !self.whole() {
            debug_assert!(from + len <= self.len);
            return self.window.stage(len, false);
        }
        Ok(&mut self.bytes()[from..from + len])
    }

    /// Writes out what [`stage`](CodeWriter::stage)`(from, len)` gave (staged in windows:
    /// one `pwrite`; otherwise the bytes are in the view already).
    pub fn put(&mut self, from: usize, len: usize) -> Result<(), Error> {
        #[cfg(target_os = "linux")]
        if !self.whole() {
            return self.window.put(from, len).map_err(Error::Map);
        }
        let _ = (from, len);
        Ok(())
    }

    /// Writes `byte` over the whole range, in windows if it is staged in windows.
    pub fn fill(&mut self, byte: u8) -> Result<(), Error> {
        if self.whole() {
            self.bytes().fill(byte);
            return Ok(());
        }
        let mut from = 0;
        while from < self.len {
            let n = (self.len - from).min(STAGE_BYTES);
            self.stage(from, n)?.fill(byte);
            self.put(from, n)?;
            from += n;
        }
        Ok(())
    }

    /// Writes `bytes` at `from`, in windows if the range is staged in windows.
    pub fn copy_to(&mut self, from: usize, bytes: &[u8]) -> Result<(), Error> {
        for (k, chunk) in bytes.chunks(STAGE_BYTES).enumerate() {
            let at = from + k * STAGE_BYTES;
            self.stage(at, chunk.len())?.copy_from_slice(chunk);
            self.put(at, chunk.len())?;
        }
        Ok(())
    }

    /// Makes what was written the code's content (on Linux: one `pwrite` to the code
    /// object, unless every window was written by `put`; elsewhere the bytes are already
    /// in place), then closes the view.
    #[inline]
    pub fn publish(mut self) -> io::Result<()> {
        self.window.publish()
    }
}

impl Region {
    /// Commits whole pages so that at least the first `code_end` bytes of the code part and
    /// the first `data_end` bytes of the data part are accessible. The committed prefixes
    /// only grow; on an error they stay as they were, except that the code part may be
    /// committed and the data part not (callers read both fields afterwards).
    pub fn commit(&mut self, code_end: usize, data_end: usize) -> io::Result<()> {
        assert!(
            code_end <= self.code_len && data_end <= self.data_len,
            "commit past the reservation"
        );
        // The common case once a chunk is warm: a block inside the committed prefixes.
        if code_end <= self.code_committed && data_end <= self.data_committed {
            return Ok(());
        }
        let page = page_size();
        let code_to = round_up(code_end, page).min(self.code_len);
        if code_to > self.code_committed {
            imp::commit_code(self, self.code_committed, code_to)?;
            self.code_committed = code_to;
        }
        let data_to = round_up(data_end, page).min(self.data_len);
        if data_to > self.data_committed {
            imp::commit_data(self, self.data_committed, data_to)?;
            self.data_committed = data_to;
        }
        Ok(())
    }

    /// How to open writers on this region's code.
    pub fn code_source(&self) -> CodeSource {
        CodeSource {
            code_rx: self.code_rx,
            handle: imp::handle(&self.mapping),
        }
    }

    /// Called when code at `offset..offset + len` of the code part is freed, so that an
    /// emulator forgets its translations of it (a no-op except on aarch64 Linux).
    pub fn retire_code(&self, offset: usize, len: usize) {
        imp::retire_code(self, offset, len);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        imp::unmap(self);
    }
}

/// The size multiple in which regions are mapped (page size; 64 KiB on Windows).
pub(crate) fn granularity() -> usize {
    imp::granularity()
}

/// The size multiple in which reserved memory is committed (the page size).
pub(crate) fn page_size() -> usize {
    imp::page_size()
}

/// The last OS error, prefixed with the call that failed.
fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn round_up(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}

/// `true` when `[start, start + len)` lies entirely within `reach` bytes of `hint`.
fn within(hint: u64, reach: u64, start: usize, len: usize) -> bool {
    let lo = start as u64;
    let hi = lo + len as u64;
    hint.abs_diff(lo) <= reach && hint.abs_diff(hi) <= reach
}

/// Start addresses to try, nearest first: just below and just above `hint`, then at
/// doubling distances, as long as the whole region stays within `reach`. Below comes
/// first because a process's heap usually grows upwards from just above its binary.
fn placement_candidates(hint: u64, reach: u64, total: usize) -> impl Iterator<Item = usize> {
    const ALIGN: u64 = 1 << 21;
    const FIRST_GAP: u64 = 16 << 20;
    let total = total as u64;
    let mut gap = FIRST_GAP;
    let mut out = Vec::new();
    while gap + total <= reach {
        if let Some(below) = hint.checked_sub(gap + total) {
            out.push(below & !(ALIGN - 1));
        }
        if let Some(above) = hint.checked_add(gap + ALIGN - 1) {
            if above < (1 << 47) {
                out.push(above & !(ALIGN - 1));
            }
        }
        gap *= 2;
    }
    out.into_iter().filter(|&a| a != 0).map(|a| a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_stay_within_reach_and_start_near() {
        let hint = 0x5555_0000_0000u64;
        let reach = 128 << 20;
        let c: Vec<usize> = placement_candidates(hint, reach, 2 << 20).collect();
        assert!(!c.is_empty());
        for a in &c {
            assert!(within(hint, reach + (2 << 21), *a, 2 << 20), "{a:#x}");
        }
        assert!(hint.abs_diff(c[0] as u64) <= (18 << 20) + (2 << 21));
    }

    /// A short write after a long one changes only its own bytes: on Linux the thread's
    /// private buffer keeps the long write's length (so that it is not zero-filled again),
    /// and publishing must not write that stale tail too.
    #[test]
    fn a_short_write_after_a_long_one_writes_only_its_own_bytes() {
        for alias in [false, PERSISTENT_ALIAS] {
            let r = region_of_1024(alias);
            for (at, len, byte) in [(0, 256, 0xaa), (512, 16, 0xbb)] {
                let mut w = r.code_source().open(at, len).unwrap();
                w.bytes().fill(byte);
                w.publish().unwrap();
            }
            let runs = [
                (0, 256, 0xaa),
                (256, 512, 0),
                (512, 528, 0xbb),
                (528, 1024, 0),
            ];
            assert_code(&r, &runs, alias);
        }
    }

    /// A region whose first 1024 code bytes are committed (`alias`: written through a
    /// persistent alias).
    fn region_of_1024(alias: bool) -> Region {
        let g = granularity();
        let mut r = Region::map(g, g, None, &CodeObject::new(alias)).unwrap();
        r.commit(1024, 0).unwrap();
        r
    }

    /// Asserts that each run `(from, to, byte)` of `r`'s code (its committed first 1024
    /// bytes) holds `byte` only.
    fn assert_code(r: &Region, runs: &[(usize, usize, u8)], alias: bool) {
        // SAFETY: the first 1024 bytes of the RX view are committed; nothing writes them.
        let code = unsafe { std::slice::from_raw_parts(r.code_rx as *const u8, 1024) };
        for &(from, to, byte) in runs {
            assert!(
                code[from..to].iter().all(|&b| b == byte),
                "bytes {from}..{to} are not {byte:#x} (alias: {alias})"
            );
        }
    }

    /// Writers open at once on one thread (a window opened while another is): the later
    /// one stages in a buffer of its own (on Linux the thread's is lent to the first), each
    /// publishes only its own bytes, and a writer opened after both takes the thread's again.
    #[test]
    fn writers_open_at_once_each_publish_their_own_bytes() {
        for alias in [false, PERSISTENT_ALIAS] {
            let r = region_of_1024(alias);
            let mut first = r.code_source().open(0, 64).unwrap();
            first.bytes().fill(0xaa);
            let mut second = r.code_source().open(128, 64).unwrap();
            second.bytes().fill(0xbb);
            first.bytes()[0] = 0xa0;
            second.publish().unwrap();
            first.publish().unwrap();
            let mut third = r.code_source().open(256, 8).unwrap();
            third.bytes().fill(0xcc);
            third.publish().unwrap();
            let runs = [
                (0, 1, 0xa0),
                (1, 64, 0xaa),
                (64, 128, 0),
                (128, 192, 0xbb),
                (192, 256, 0),
                (256, 264, 0xcc),
                (264, 1024, 0),
            ];
            assert_code(&r, &runs, alias);
        }
    }

    #[test]
    fn mapping_is_near_the_hint_and_data_follows_code() {
        mapping_near_the_hint(false);
        #[cfg(target_os = "linux")]
        mapping_near_the_hint(true);
    }

    /// With `alias`, the writes below go through the persistent alias (no `pwrite`).
    fn mapping_near_the_hint(alias: bool) {
        let g = granularity();
        let hint = candidates_stay_within_reach_and_start_near as *const () as usize as u64;
        let object = CodeObject::new(alias);
        let mut r = Region::map(4 * g, 4 * g, Some((hint, 1 << 31)), &object).unwrap();
        assert_eq!(
            (r.code_committed, r.data_committed),
            (0, 0),
            "only reserved"
        );
        r.commit(6, 8).unwrap();
        let page = page_size();
        assert_eq!((r.code_committed, r.data_committed), (page, page));
        assert!(
            within(hint, 1 << 31, r.code_rx, 8 * g),
            "{:#x} vs {hint:#x}",
            r.code_rx
        );
        assert!(within(r.code_rx as u64, 1 << 31, r.data, r.data_len));
        // Writes through a window are seen through the RX view.
        let mut w = r.code_source().open(5, 1).unwrap();
        w.bytes()[0] = 0xa5;
        w.publish().unwrap();
        // SAFETY: committed code bytes are readable through the RX view,
        // committed data is RW; every address is inside what `commit` made accessible.
        assert_eq!(unsafe { *(r.code_rx as *const u8).add(5) }, 0xa5);
        // SAFETY: see above.
        unsafe { *(r.data as *mut u64) = 7 };
        // Growing keeps what was written and commits whole pages, up to the reservation.
        r.commit(4 * g, page + 1).unwrap();
        assert_eq!((r.code_committed, r.data_committed), (4 * g, 2 * page));
        // SAFETY: see above.
        assert_eq!(unsafe { *(r.code_rx as *const u8).add(5) }, 0xa5);
        // SAFETY: see above.
        assert_eq!(unsafe { *(r.data as *const u64) }, 7);
        let mut w = r.code_source().open(4 * g - 3, 3).unwrap();
        w.bytes().copy_from_slice(&[1, 2, 0x5a]);
        w.publish().unwrap();
        // SAFETY: see above.
        assert_eq!(unsafe { *((r.code_rx + 4 * g - 1) as *const u8) }, 0x5a);
        // SAFETY: see above.
        unsafe { *((r.data + 2 * page - 1) as *mut u8) = 0x5a };
        // Committing less than is committed changes nothing.
        r.commit(1, 0).unwrap();
        assert_eq!((r.code_committed, r.data_committed), (4 * g, 2 * page));
    }
}
