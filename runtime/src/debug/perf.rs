//! The perf map and the jitdump file, the two ways Linux profilers learn about JIT code.
//!
//! **perf map** (`/tmp/perf-<pid>.map`): one text line per symbol, `START SIZE NAME` with
//! start and size in hex without `0x`, appended as traces are finished. `perf report`,
//! `perf script` and `samply` read it at report time, resolving an address by the last line
//! that covers it, so a dropped trace's lines stay useful until its code is reused. A JIT
//! that makes and drops traces without end would grow the file without end (560 MB in 20 s
//! in a stress run), so the map is bounded: when appending would take it past
//! [`PERF_MAP_COMPACT_BYTES`] and at least half of it describes dropped traces, it is
//! rewritten (a new file renamed over it, so a reader sees the old or the new one) with the
//! lines of the live traces only. Samples taken in a dropped trace's code before a
//! compaction then lose their names; the file stays within the bound plus one trace, or
//! twice the live traces' lines where those alone are larger.
//!
//! **jitdump** (`jit-<pid>.dump` in the temp directory): the binary format of the Linux
//! kernel's `tools/perf/Documentation/jitdump-specification.txt`, version 1: a 40-byte
//! file header, then one `JIT_CODE_LOAD` record per symbol with its code bytes.
//! Timestamps are `CLOCK_MONOTONIC`, so record with `perf record -k mono`. The file is
//! mapped once, read+exec, which is how `perf record` notices it; `perf inject --jit`
//! then turns each record into a small ELF file so that `perf annotate` shows the code.
//!
//! Both files are per process and written under one lock, each trace with one `write`.

use super::CodeSymbol;
use crate::Error;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Mutex;

/// Where this process's perf map is.
pub fn perf_map_path() -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()))
}

/// Where this process's jitdump file is.
pub fn jitdump_path() -> PathBuf {
    std::env::temp_dir().join(format!("jit-{}.dump", std::process::id()))
}

fn failed(what: &'static str, path: PathBuf) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Debug {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// The size past which the perf map is compacted when at least half of it describes dropped
/// traces (see the module doc).
pub const PERF_MAP_COMPACT_BYTES: u64 = 64 << 20;

static PERF_MAP: Mutex<Option<MapFile>> = Mutex::new(None);

/// The perf map file and the lines of the traces still alive (what a compaction keeps).
struct MapFile {
    path: PathBuf,
    file: File,
    /// Bytes in the file.
    len: u64,
    /// By trace id, the lines written for it while it lives.
    live: BTreeMap<u64, String>,
    live_bytes: u64,
    limit: u64,
}

impl MapFile {
    fn create(path: PathBuf, limit: u64) -> io::Result<MapFile> {
        Ok(MapFile {
            file: File::create(&path)?,
            path,
            len: 0,
            live: BTreeMap::new(),
            live_bytes: 0,
            limit,
        })
    }

    /// Appends trace `id`'s lines, compacting first if the file would pass its limit and
    /// at least half of it is dropped traces'.
    fn add(&mut self, id: u64, text: String) -> io::Result<()> {
        let n = text.len() as u64;
        let dead = self.len - self.live_bytes;
        if self.len + n > self.limit && dead >= self.len / 2 {
            self.compact()?;
        }
        self.file.write_all(text.as_bytes())?;
        self.len += n;
        self.live_bytes += n;
        self.live.insert(id, text);
        Ok(())
    }

    /// Forgets dropped trace `id`'s lines (they stay in the file until a compaction).
    fn remove(&mut self, id: u64) {
        if let Some(text) = self.live.remove(&id) {
            self.live_bytes -= text.len() as u64;
        }
    }

    /// Rewrites the file with the live traces' lines: written next to it and renamed over
    /// it, so that a reader never sees a partial file.
    fn compact(&mut self) -> io::Result<()> {
        let mut name = self.path.clone().into_os_string();
        name.push(".compacting");
        let tmp = PathBuf::from(name);
        let mut file = File::create(&tmp)?;
        for text in self.live.values() {
            file.write_all(text.as_bytes())?;
        }
        std::fs::rename(&tmp, &self.path)?;
        self.file = file;
        self.len = self.live_bytes;
        Ok(())
    }
}

/// Opens (creates, truncating a stale file of an earlier process with the same pid) the
/// perf map, once per process.
pub(crate) fn open_map() -> Result<(), Error> {
    let mut map = PERF_MAP.lock().unwrap_or_else(|e| e.into_inner());
    if map.is_none() {
        if !cfg!(unix) {
            return Err(failed("perf map", perf_map_path())(io::Error::new(
                io::ErrorKind::Unsupported,
                "the perf map convention exists on Linux and macOS only",
            )));
        }
        let path = perf_map_path();
        *map = Some(
            MapFile::create(path.clone(), PERF_MAP_COMPACT_BYTES)
                .map_err(failed("perf map", path))?,
        );
    }
    Ok(())
}

/// The perf map lines of `symbols`.
pub(crate) fn map_lines(symbols: &[CodeSymbol<'_>]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(symbols.len() * 40);
    for s in symbols {
        let _ = writeln!(text, "{:x} {:x} {s}", s.start, s.size);
    }
    text
}

/// Appends trace `id`'s lines; the returned entry forgets them when the trace is dropped.
pub(crate) fn write_map(id: u64, symbols: &[CodeSymbol<'_>]) -> Result<MapEntry, Error> {
    let text = map_lines(symbols);
    let mut map = PERF_MAP.lock().unwrap_or_else(|e| e.into_inner());
    let map = map.as_mut().expect("perf map opened by Jit::with_options");
    map.add(id, text)
        .map_err(failed("perf map", map.path.clone()))?;
    Ok(MapEntry(id))
}

/// A live trace's lines in the perf map: dropping it (with the trace) marks them dropped.
#[derive(Debug)]
pub(crate) struct MapEntry(u64);

impl Drop for MapEntry {
    fn drop(&mut self) {
        let mut map = PERF_MAP.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = map.as_mut() {
            map.remove(self.0);
        }
    }
}

/// `'JiTD'`, written in native byte order (readers detect the order from it).
pub const JITDUMP_MAGIC: u32 = 0x4A69_5444;
pub const JITDUMP_VERSION: u32 = 1;
pub const JITDUMP_HEADER_SIZE: u32 = 40;
/// Record type of a code load.
pub const JIT_CODE_LOAD: u32 = 0;
/// Fixed part of a code-load record: record header (16) + pid, tid, vma, code_addr,
/// code_size, code_index (40).
pub const JIT_CODE_LOAD_FIXED: usize = 56;

struct JitDump {
    file: File,
    next_index: u64,
}

static JITDUMP: Mutex<Option<JitDump>> = Mutex::new(None);

/// Creates the jitdump file with its header and maps its first page read+exec, once per
/// process.
pub(crate) fn open_jitdump() -> Result<(), Error> {
    let mut dump = JITDUMP.lock().unwrap_or_else(|e| e.into_inner());
    if dump.is_some() {
        return Ok(());
    }
    let path = jitdump_path();
    let fail = || failed("jitdump", jitdump_path());
    if !cfg!(target_os = "linux") {
        return Err(fail()(io::Error::new(
            io::ErrorKind::Unsupported,
            "jitdump is read by Linux perf only",
        )));
    }
    // Readable too: the mapping below needs a descriptor open for reading.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(fail())?;
    file.write_all(&jitdump_header(elf_machine(), now_ns()))
        .map_err(fail())?;
    mark_for_perf(&file).map_err(fail())?;
    *dump = Some(JitDump {
        file,
        next_index: 0,
    });
    Ok(())
}

fn elf_machine() -> u32 {
    if cfg!(target_arch = "aarch64") {
        183 // EM_AARCH64
    } else {
        62 // EM_X86_64
    }
}

/// The 40-byte file header: magic, version, header size, ELF machine, padding, pid,
/// timestamp, flags.
fn jitdump_header(machine: u32, timestamp: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(JITDUMP_HEADER_SIZE as usize);
    for word in [
        JITDUMP_MAGIC,
        JITDUMP_VERSION,
        JITDUMP_HEADER_SIZE,
        machine,
        0,
        std::process::id(),
    ] {
        h.extend_from_slice(&word.to_ne_bytes());
    }
    h.extend_from_slice(&timestamp.to_ne_bytes());
    h.extend_from_slice(&0u64.to_ne_bytes());
    h
}

pub(crate) fn write_jitdump(symbols: &[CodeSymbol<'_>]) -> Result<(), Error> {
    let timestamp = now_ns();
    let tid = thread_id();
    let mut dump = JITDUMP.lock().unwrap_or_else(|e| e.into_inner());
    let dump = dump.as_mut().expect("jitdump opened by Jit::with_options");
    let mut records = Vec::new();
    for s in symbols {
        let at = records.len();
        records.extend_from_slice(&JIT_CODE_LOAD.to_ne_bytes());
        records.extend_from_slice(&0u32.to_ne_bytes()); // total size, filled in below
        records.extend_from_slice(&timestamp.to_ne_bytes());
        records.extend_from_slice(&std::process::id().to_ne_bytes());
        records.extend_from_slice(&tid.to_ne_bytes());
        for v in [s.start, s.start, s.size, dump.next_index] {
            records.extend_from_slice(&v.to_ne_bytes());
        }
        let _ = write!(records, "{s}\0");
        // SAFETY: the symbol lies in the trace's code, which is mapped readable and not
        // written while the trace is being registered.
        let code = unsafe { std::slice::from_raw_parts(s.start as *const u8, s.size as usize) };
        records.extend_from_slice(code);
        let total = (records.len() - at) as u32;
        records[at + 4..at + 8].copy_from_slice(&total.to_ne_bytes());
        dump.next_index += 1;
    }
    dump.file
        .write_all(&records)
        .map_err(failed("jitdump", jitdump_path()))
}

#[cfg(target_os = "linux")]
fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(not(target_os = "linux"))]
fn now_ns() -> u64 {
    0
}

#[cfg(target_os = "linux")]
fn thread_id() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

#[cfg(not(target_os = "linux"))]
fn thread_id() -> u32 {
    0
}

/// `perf record` learns of a jitdump file from an executable mapping of it (the mapping is
/// never used and stays for the life of the process).
#[cfg(target_os = "linux")]
fn mark_for_perf(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a new private read+exec mapping of an open file; nothing reads through it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn mark_for_perf(_: &File) -> io::Result<()> {
    Ok(())
}

// The perf map is a Linux and macOS convention (`open_map` refuses other systems), and a
// compaction renames over the open file, which Windows refuses.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn map(limit: u64) -> (tempfile_dir::Dir, MapFile) {
        let dir = tempfile_dir::Dir::new();
        let map = MapFile::create(dir.0.join("perf.map"), limit).unwrap();
        (dir, map)
    }

    /// A directory removed when dropped (the runtime has no tempfile dependency).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "cpjit-perf-map-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn lines(id: u64) -> String {
        format!(
            "{:x} 40 trace{id}:op_a\n{:x} 8 trace{id}:tail\n",
            0x1000 * id,
            0x1000 * id + 64
        )
    }

    /// Traces made and dropped without end: the file stays within its limit plus one
    /// trace, and holds exactly the live traces' lines after each compaction.
    #[test]
    fn a_churning_map_stays_bounded_and_keeps_the_live_traces() {
        let (_dir, mut map) = map(4096);
        let kept = 1u64;
        map.add(kept, lines(kept)).unwrap();
        let mut compactions = 0;
        for id in 2..2000 {
            let before = map.len;
            map.add(id, lines(id)).unwrap();
            if map.len < before {
                compactions += 1;
            }
            assert!(
                map.len <= 4096 + lines(id).len() as u64,
                "{} bytes",
                map.len
            );
            map.remove(id);
        }
        assert!(compactions > 10, "{compactions} compactions");
        let text = std::fs::read_to_string(&map.path).unwrap();
        assert_eq!(text.len() as u64, map.len);
        assert!(text.starts_with(&lines(kept)), "{text}");
        assert!(
            !text.contains("trace2:"),
            "a dropped trace's lines survived compaction"
        );
    }

    /// Live traces are never lost: past the limit with nothing dropped, the map grows.
    #[test]
    fn live_traces_are_kept_past_the_limit() {
        let (_dir, mut map) = map(256);
        for id in 1..50 {
            map.add(id, lines(id)).unwrap();
        }
        let text = std::fs::read_to_string(&map.path).unwrap();
        for id in 1..50 {
            assert!(text.contains(&lines(id)), "trace {id} lost");
        }
        // Less than half dropped: no compaction would gain enough, the map grows.
        for id in (1..50).filter(|id| id % 3 == 1) {
            map.remove(id);
        }
        let before = map.len;
        map.add(50, lines(50)).unwrap();
        assert!(map.len > before);
        // Two thirds dropped: the next append compacts to the live third.
        for id in (1..50).filter(|id| id % 3 == 2) {
            map.remove(id);
        }
        map.add(51, lines(51)).unwrap();
        let text = std::fs::read_to_string(&map.path).unwrap();
        assert!(
            text.contains(&lines(48)) && text.contains(&lines(50)) && text.contains(&lines(51))
        );
        for dropped in [1, 2, 47, 49] {
            assert!(
                !text.contains(&lines(dropped)),
                "trace {dropped} survived compaction"
            );
        }
    }
}
