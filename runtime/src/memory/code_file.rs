//! One code object per arena (Linux): every chunk's code part is a range of one `memfd`.
//!
//! A descriptor per chunk made the descriptors a long-running JIT holds grow with its chunks
//! (4 KiB chunks: 11,921 descriptors, and `memfd_create` failing under `ulimit -n 1024`).
//! Instead, an arena's chunks share one memfd: each chunk is given a page-aligned range of
//! file offsets (first fit, so ranges of returned chunks are reused and the file stays as
//! long as the most code ever reserved at once), the file grows with `ftruncate` as chunks
//! commit, and a chunk returned to the system gives its pages back with
//! `fallocate(PUNCH_HOLE)` (and a free tail of the file is cut off with `ftruncate`). So a
//! JIT holds one descriptor for its code, however many chunks it has.
//!
//! The object is made when the arena reserves its first chunk and closed when the arena and
//! its last chunk are gone.
//!
//! **Why one `pwrite` per trace is the floor without protection keys** (wave 37: an AMD EPYC
//! firecracker guest, 2 cores, kernel 6.18, no `pku`, load 10–12). Thread CPU per write of a
//! 300-byte trace into a page the file already holds, the C loop `publish_paths.c` beside
//! this file, every path once per round in rotated order, 11 rounds: median [min–max], and
//! the median [min–max] of the per-round ratios to `pwrite`:
//!
//! | path | ns | ÷ `pwrite` |
//! |---|---|---|
//! | `pwrite` to the memfd (this module) | 498 [482–505] | 1 |
//! | the same as a raw `syscall` | 498 [482–518] | 1.01 [0.96–1.04] |
//! | 64 B / a whole aligned page | 484 / 513 | 0.97 / 1.05 |
//! | memfd 1 GiB long, sealed (shrink, grow), `O_NOATIME`; a `/dev/shm` file; a file on a `huge=always` tmpfs (one 2 MiB folio) | 502–506 | 1.01–1.03 |
//! | `O_DIRECT` (tmpfs takes it and writes through the page cache; 4 KiB) | 522 | 1.05 |
//! | `pwritev2`, flags 0 / `RWF_HIPRI` / `RWF_DSYNC` (the iovec import) | 575 / 570 / 572 | 1.14–1.15 |
//! | `pwritev2` `RWF_NOWAIT`, `RWF_DONTCACHE` | refused (`EOPNOTSUPP` on shmem) | |
//! | AIO `io_submit` (runs the write inline; completion read from the ring) | 815 | 1.64 |
//! | io_uring `WRITE`, `io_uring_enter(1, 1)`; fixed file and buffer; `DEFER_TASKRUN` | 2,825 / 2,809 / 2,517 | 5.0–5.8 |
//! | `/proc/self/mem` at a private R+X mapping | 979 | 1.97 |
//! | a fresh private RW page per trace, `mprotect`ed R+X | 1,176 | 2.35 |
//! | private R+X page: `mprotect` RW, copy, `mprotect` R+X | 4,869 | 9.9 |
//! | a fresh page made R+X and `mremap`ped over the code page | 12,260 | 24.6 |
//! | `process_vm_writev`; `/proc/self/mem` at the shared R+X view | refused (`EFAULT`; `EIO`) | |
//! | a memfd with `MFD_HUGETLB` (no huge pages reserved here) | `pwrite` refused (`EINVAL`) | |
//! | bare `getppid` / `memcpy` of the 300 bytes | 136 / 7 | 0.27 / 0.01 |
//!
//! None is cheaper: each is a system call at least, and the memfd's flags, size and pages
//! change nothing. What the others do to the write invariant (ARCHITECTURE.md, invariant 7)
//! and to other threads: the memfd paths keep it (no writable view; the descriptor is the
//! only way in); io_uring punts every write to a kernel worker of the process (shmem has no
//! non-blocking write: process CPU 5.0–5.7 µs, twice the thread's), and a polling thread
//! would only move the work off the clock; `/proc/self/mem` needs private code pages; the
//! `mprotect` flips make the page non-executable for every thread meanwhile (a thread
//! running an earlier trace there faults) and shoot down the TLB of every CPU running the
//! process (with a second thread spinning: 5,113 [4,759–6,654] ns); a fresh page per trace
//! wastes most of a page per short trace. Only for a trace that starts a page the file does
//! not hold yet is there a cheaper call: `UFFDIO_COPY` of the whole page into a view
//! registered with a userfaultfd, 1,781 [1,721–2,224] ns against `pwrite`'s 1,996
//! [1,912–2,168] into a hole (per-round ratio 0.89 [0.85–1.12]). It is not used: it saves
//! once per new page (placement keeps pages warm, and [`crate::Jit::reserve`] fills them
//! ahead), it writes whole pages only (no second trace on that page), and a thread touching
//! a page not yet written would block on the userfaultfd instead of reading zeros.
//!
//! Where the 498 ns go (`perf record -e cpu-clock -g`, 67,332 samples of a `pwrite` loop;
//! this kernel has no `function_graph` tracer): a bare system call costs 136 (`getppid`).
//! Of the whole call: entry, exit, the libc wrapper and the loop ≈ 17 %; `fdget` and the
//! checks (`rw_verify_area` with the LSM hook, `generic_write_checks`) ≈ 11 %; `vfs_write`
//! and `shmem_file_write_iter` themselves ≈ 13.5 %; the inode lock ≈ 3 %; the mtime/ctime
//! update ≈ 5 %; privileges ≈ 1 %; and `generic_perform_write` ≈ 48.5 %: the page-cache
//! look-up and folio lock (`shmem_write_begin`) 22 %, the copy 4.5 %, dirtying and
//! unlocking the folio (`shmem_write_end`) 10.5 %, dirty-page throttling 1.4 %, the loop
//! 9.6 %. No fsnotify (no watchers). The caller chooses none of it beyond the bytes and the
//! page: tmpfs cannot skip the time stamps (`S_NOCMTIME` is a file system's to set) nor the
//! folio lock. The same path cost 195–205 ns on the machine of waves 28–36 (a bare call 63);
//! probably because this kernel returns through the SRSO "Safe RET" thunk
//! (`srso_return_thunk` in the profile) and calls indirectly through retpolines, which the
//! path's few dozen returns and its indirect calls (`write_iter`, `write_begin`,
//! `write_end`, `dirty_folio`, the LSM hook) pay.
//!
//! Inside a client the call costs more than in the C loop, whose kernel path stays warm.
//! `examples/ebpf-jit`'s `--profile-compile N 11000 versus` (batches of 1,000 compiles and
//! drops, the engines alternated; three runs, load 3–5), thread CPU per compile, median: 10
//! instructions 1,206 / 970 / 907 ns, through the persistent alias 363 / 283 / 262, rbpf's
//! JIT 968 / 859 / 728; 100 instructions 2,845 / 1,848 / 1,830, through the alias 1,997 /
//! 1,175 / 1,193. So the one `pwrite` (one per compile, `strace -c`) costs ≈ 640–840 ns
//! there: perf puts the call at 57 % of the compile at 10, the rest is the client's own code
//! running slower after it. `cargo xtask bench --only stitch,peer`: straight-10 669 ns, 147
//! through the alias. So on a machine without keys, cheaper publication means no system
//! call at all: the persistent alias (opt-in, weaker: [`crate::CodeWrites::PersistentAlias`]);
//! with keys, the default write window (`pkey.rs`).

use super::os_error;
use crate::arena::FreeList;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// The code object of one arena: made on first use (see the module docs).
pub(crate) struct CodeObject {
    /// Whether chunks also map their code read-write at a second address
    /// ([`crate::CodeWrites::PersistentAlias`]); the object is named for it.
    pub(crate) alias: bool,
    /// The protection key that guards writes through the alias (`pkey.rs`), if any.
    pub(crate) key: Option<u32>,
    file: Mutex<Option<Arc<CodeFile>>>,
}

impl CodeObject {
    pub(crate) fn new(alias: bool) -> CodeObject {
        CodeObject {
            alias,
            key: None,
            file: Mutex::new(None),
        }
    }

    /// The protection key of the object's alias, if it is keyed.
    pub(crate) fn key(&self) -> Option<u32> {
        self.key
    }

    /// An object whose chunks are written through an alias that only a thread inside a
    /// write window may write: tagged with `key` ([`super::pkey`]).
    pub(crate) fn keyed(key: u32) -> CodeObject {
        CodeObject {
            key: Some(key),
            ..CodeObject::new(true)
        }
    }

    /// The arena's memfd, made now if it has none yet.
    pub(crate) fn file(&self) -> io::Result<Arc<CodeFile>> {
        let mut file = lock(&self.file);
        if let Some(file) = &*file {
            return Ok(file.clone());
        }
        let name = match (self.key, self.alias) {
            (Some(_), _) => c"cpjit-code-keyed",
            (None, true) => c"cpjit-aliased-code",
            (None, false) => c"cpjit-code",
        };
        let made = Arc::new(CodeFile::create(name)?);
        *file = Some(made.clone());
        Ok(made)
    }
}

/// The largest file offset a range may end at (`off_t` is signed).
const FILE_SPACE: usize = i64::MAX as usize;

/// A memfd shared by the chunks of one arena, and which of its offsets they hold.
pub(crate) struct CodeFile {
    pub(crate) fd: libc::c_int,
    space: Mutex<Space>,
}

struct Space {
    /// File offsets no chunk holds (the whole `0..FILE_SPACE` at first).
    free: FreeList,
    /// The file's length, as last set by `ftruncate`.
    len: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a single step: a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CodeFile {
    /// An empty anonymous memfd named `name`: objects with a persistent writable alias, or
    /// a keyed one, get their own names, so that `/proc/self/maps` tells them apart.
    fn create(name: &std::ffi::CStr) -> io::Result<CodeFile> {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::syscall(libc::SYS_memfd_create, name.as_ptr(), libc::MFD_CLOEXEC) }
            as libc::c_int;
        if fd < 0 {
            return Err(os_error("memfd_create"));
        }
        Ok(CodeFile {
            fd,
            space: Mutex::new(Space {
                free: FreeList::new(FILE_SPACE),
                len: 0,
            }),
        })
    }

    /// A range of `len` file offsets (a multiple of `align`, the page size) for one chunk's
    /// code part: its first offset. Nothing is allocated in the file until committed.
    pub(crate) fn take(&self, len: usize, align: usize) -> io::Result<usize> {
        lock(&self.space).free.alloc(len, align).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                "the arena's code object has no room left for another chunk",
            )
        })
    }

    /// Makes the file at least `end` bytes long, so that its pages up to there can be mapped.
    pub(crate) fn grow(&self, end: usize) -> io::Result<()> {
        let mut space = lock(&self.space);
        if end <= space.len {
            return Ok(());
        }
        // SAFETY: a descriptor this object owns; growing only appends zero pages.
        if unsafe { libc::ftruncate(self.fd, end as libc::off_t) } != 0 {
            return Err(os_error("ftruncate (commit code)"));
        }
        space.len = end;
        Ok(())
    }

    /// Gives back a chunk's range `base..base + len`, whose first `committed` bytes it may
    /// have written: their pages are freed (the range then reads as zeros), the range can be
    /// taken again, and a free tail of the file is cut off. Nothing maps the range any more.
    pub(crate) fn give_back(&self, base: usize, len: usize, committed: usize) {
        let mut space = lock(&self.space);
        let written = committed.min(space.len.saturating_sub(base));
        if written != 0 {
            // SAFETY: a descriptor this object owns; the range is this chunk's, unmapped.
            // On failure (a kernel without hole punching for shared memory) the pages stay
            // until the range is reused or the file cut or closed: memory, not correctness.
            unsafe {
                libc::fallocate(
                    self.fd,
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    base as libc::off_t,
                    written as libc::off_t,
                )
            };
        }
        space.free.free(base, len);
        if let Some((start, _)) = space.free.last().filter(|&(s, l)| s + l == FILE_SPACE) {
            // SAFETY: as above; no chunk holds an offset at or past `start`, so nothing
            // maps the pages cut off.
            if start < space.len && unsafe { libc::ftruncate(self.fd, start as libc::off_t) } == 0 {
                space.len = start;
            }
        }
    }

    /// The file's length and the bytes of memory its pages take (for tests).
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        // SAFETY: fstat fills the struct it is given, for a descriptor we own.
        let blocks = unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(self.fd, &mut stat), 0);
            stat.st_blocks as usize
        };
        (lock(&self.space).len, blocks * 512)
    }
}

impl Drop for CodeFile {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once, here; no chunk maps it any more
        // (each holds this object until it is unmapped).
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::super::{granularity, imp, Region};
    use super::*;

    /// Chunks of one arena share its descriptor, each on its own range; a chunk unmapped
    /// frees its pages (a hole punched, or the file's free tail cut) and its range is
    /// taken again, reading as zeros.
    #[test]
    fn regions_share_one_memfd_and_give_their_pages_back() {
        let g = granularity();
        let object = CodeObject::new(false);
        let region = |fill: u8| {
            let mut r = Region::map(4 * g, g, None, &object).unwrap();
            r.commit(2 * g, 0).unwrap();
            let mut w = r.code_source().open(0, 2 * g).unwrap();
            w.bytes().fill(fill);
            w.publish().unwrap();
            r
        };
        let read = |r: &Region| {
            // SAFETY: the region's first two pages are committed; nothing writes them now.
            unsafe { std::slice::from_raw_parts(r.code_rx as *const u8, 2 * g) }.to_vec()
        };
        let (a, b) = (region(0xaa), region(0xbb));
        let ((fd_a, base_a, _), (fd_b, base_b, _)) = (imp::object_of(&a), imp::object_of(&b));
        assert_eq!(fd_a, fd_b, "one descriptor for the arena's chunks");
        assert_eq!((base_a, base_b), (0, 4 * g), "a range each");
        assert!(read(&a).iter().all(|&x| x == 0xaa) && read(&b).iter().all(|&x| x == 0xbb));
        let file = object.file().unwrap();
        assert_eq!(file.sizes(), (6 * g, 4 * g), "length; pages written");
        drop(a);
        assert_eq!(
            file.sizes(),
            (6 * g, 2 * g),
            "a's pages punched, b's range kept"
        );
        // The next chunk takes a's range, and finds zeros, not a's code.
        let mut c = Region::map(4 * g, g, None, &object).unwrap();
        assert_eq!(imp::object_of(&c).1, 0);
        c.commit(2 * g, 0).unwrap();
        assert!(read(&c).iter().all(|&x| x == 0), "a's code freed");
        assert!(read(&b).iter().all(|&x| x == 0xbb), "b untouched");
        drop(b);
        assert_eq!(file.sizes().0, 4 * g, "the free tail cut off");
        drop(c);
        assert_eq!(file.sizes(), (0, 0), "every chunk gone: an empty file");
    }
}
