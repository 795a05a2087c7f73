//! The perf map and the jitdump file, the two ways Linux profilers learn about JIT code.
//!
//! **perf map** (`/tmp/perf-<pid>.map`): one text line per symbol, `START SIZE NAME` with
//! start and size in hex without `0x`, appended as traces are finished. `perf report`,
//! `perf script` and `samply` read it at report time; it is never rewritten, so a dropped
//! trace's lines stay (perf resolves by the last line covering an address).
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

static PERF_MAP: Mutex<Option<File>> = Mutex::new(None);

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
        *map = Some(File::create(&path).map_err(failed("perf map", path))?);
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

pub(crate) fn write_map(symbols: &[CodeSymbol<'_>]) -> Result<(), Error> {
    let text = map_lines(symbols);
    let mut map = PERF_MAP.lock().unwrap_or_else(|e| e.into_inner());
    let file = map.as_mut().expect("perf map opened by Jit::with_options");
    file.write_all(text.as_bytes())
        .map_err(failed("perf map", perf_map_path()))
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
