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
