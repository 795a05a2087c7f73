//! Disk space as a cause of failure: a step that fails on a full disk says so in one line,
//! naming the directory and the bytes free, rather than leaving it to the tool's own error
//! deep in the log (the CI's matrix once ended with "No space left on device" while
//! `cargo nextest archive` wrote its archives, on a disk other work also fills).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Below this many free bytes a failed step names the disk as a likely cause: a clean
/// clone's run writes about 4 GB, and a failed write may leave some of its space freed.
pub const LOW: u64 = 1 << 30;

/// The text a tool prints for `ENOSPC` (`std::io::Error`'s, `strerror`'s).
pub const NO_SPACE: &str = "No space left on device";

/// Bytes an unprivileged process may still write on the file system holding `path` (or,
/// if it does not exist yet, its nearest existing ancestor).
pub fn free_bytes(path: &Path) -> Result<u64, String> {
    let existing = path
        .ancestors()
        .find(|p| p.exists())
        .ok_or_else(|| format!("{}: no existing ancestor", path.display()))?;
    let c_path = std::ffi::CString::new(existing.as_os_str().as_encoded_bytes())
        .map_err(|e| format!("{}: {e}", existing.display()))?;
    // SAFETY: `c_path` is a NUL-terminated path; statvfs fills the zeroed struct it is given.
    let (got, stat) = unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c_path.as_ptr(), &mut stat), stat)
    };
    if got != 0 {
        let error = std::io::Error::last_os_error();
        return Err(format!("statvfs {}: {error}", existing.display()));
    }
    // Both fields are u64 on Linux, narrower on other systems (macOS's f_bavail is u32).
    #[allow(clippy::useless_conversion)]
    let free = u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize));
    Ok(free)
}

/// The one line a failure gets when the disk is its likely cause: `saw_no_space` (the
/// tool printed [`NO_SPACE`]) or fewer than [`LOW`] bytes free on the file system of one of
/// `dirs`; `None` otherwise. It names the fullest of `dirs` and its free bytes.
pub fn full_disk_line(what: &str, dirs: &[PathBuf], saw_no_space: bool) -> Option<String> {
    let fullest = dirs
        .iter()
        .filter_map(|d| free_bytes(d).ok().map(|free| (free, d)))
        .min_by_key(|(free, _)| *free);
    let (free, dir) = fullest?;
    if !saw_no_space && free >= LOW {
        return None;
    }
    let cause = if saw_no_space {
        format!("the disk is full (\"{NO_SPACE}\")")
    } else {
        "the disk is nearly full".to_string()
    };
    Some(format!(
        "{what}: {cause}: {} free on the file system of {} (a clean clone's run needs about 4 GB)",
        bytes(free),
        dir.display()
    ))
}

/// The directories whose file systems the CI writes to: the checkout's `target/` and the
/// temporary directory (nextest extracts each archive there).
pub fn written_dirs(root: &Path) -> Vec<PathBuf> {
    vec![root.join("target"), std::env::temp_dir()]
}

/// `n` bytes for a reader: `123456789 bytes (117.7 MiB)`.
pub fn bytes(n: u64) -> String {
    format!("{n} bytes ({:.1} MiB)", n as f64 / (1u64 << 20) as f64)
}

/// Whether this run builds a fresh clone once (`CI=true` or `1`, as `.ci/run` reads it):
/// what a step leaves that no later step reads is then written, never read again.
pub fn built_once() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Runs `cmd`, a `cargo nextest run --no-run`, with cargo's messages as JSON on a pipe
/// (diagnostics still rendered to stderr) and returns the test executables it built or
/// found fresh.
pub fn build_listing_test_binaries(cmd: &mut Command) -> Result<Vec<PathBuf>, String> {
    let mut child = cmd
        .args(["--cargo-message-format", "json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let mut messages = String::new();
    let read = child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut messages);
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed: {status}"));
    }
    read.map_err(|e| format!("reading cargo's messages: {e}"))?;
    Ok(test_executables(&messages))
}

/// The executables of test targets among cargo's JSON messages (`compiler-artifact` of
/// a `test` profile; other lines are skipped).
pub fn test_executables(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .collect()
}

/// Deletes `files` (those already gone are skipped) and returns the bytes freed.
pub fn remove_files(files: &[PathBuf]) -> u64 {
    let mut freed = 0;
    for file in files {
        let size = std::fs::metadata(file).map_or(0, |m| m.len());
        match std::fs::remove_file(file) {
            Ok(()) => freed += size,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("ci: cannot remove {}: {e}", file.display()),
        }
    }
    freed
}

/// Copies `from` (a child's stderr) to this process's stderr line by line and sets the
/// flag it returns if a line says [`NO_SPACE`]; the copy runs on its own thread, which
/// ends with the stream.
pub fn forward_watching<R: Read + Send + 'static>(
    from: R,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let saw = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&saw);
    let copier = std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if contains(&line, NO_SPACE.as_bytes()) {
                flag.store(true, Ordering::Relaxed);
            }
            let _ = std::io::stderr().write_all(&line);
            line.clear();
        }
    });
    (saw, copier)
}

/// Whether `haystack` holds `needle` (a log's bytes need not be UTF-8).
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_bytes_reads_the_nearest_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).unwrap();
        assert!(free > 0);
        // A directory not made yet (a fresh clone's target/) is its parent's file system.
        let later = free_bytes(&dir.path().join("target/nextest-archives")).unwrap();
        assert!(later.abs_diff(free) < (64 << 20), "{later} vs {free}");
    }

    #[test]
    fn a_full_disk_gets_one_line_naming_the_directory_and_the_bytes_free() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        let line = full_disk_line("building the archive", &dirs, true).unwrap();
        assert!(
            line.starts_with(
                "building the archive: the disk is full (\"No space left on device\"): "
            ) && line.contains(&dir.path().display().to_string())
                && line.contains(" bytes ("),
            "{line}"
        );
        assert!(!line.contains('\n'));
        // Without the tool's message it only speaks when the space is low.
        let low = free_bytes(dir.path()).unwrap() < LOW;
        assert_eq!(full_disk_line("x", &dirs, false).is_some(), low);
        assert_eq!(full_disk_line("x", &[], true), None);
    }

    #[test]
    fn test_executables_come_from_test_profile_artifacts_only() {
        let messages = r#"{"reason":"compiler-artifact","profile":{"test":true},"executable":"/t/deps/a-1","fresh":true}
{"reason":"compiler-artifact","profile":{"test":false},"executable":"/t/cpjit"}
{"reason":"compiler-artifact","profile":{"test":true},"executable":null}
{"reason":"build-finished","success":true}
not json
{"reason":"compiler-artifact","profile":{"test":true},"executable":"/t/deps/b-2"}"#;
        assert_eq!(
            test_executables(messages),
            [PathBuf::from("/t/deps/a-1"), PathBuf::from("/t/deps/b-2")]
        );
    }

    #[test]
    fn removed_files_count_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, [0u8; 1000]).unwrap();
        std::fs::write(&b, [0u8; 24]).unwrap();
        let gone = dir.path().join("gone");
        assert_eq!(remove_files(&[a.clone(), gone, b.clone()]), 1024);
        assert!(!a.exists() && !b.exists());
    }

    #[test]
    fn bytes_come_with_their_mebibytes() {
        assert_eq!(bytes(0), "0 bytes (0.0 MiB)");
        assert_eq!(bytes(123_456_789), "123456789 bytes (117.7 MiB)");
    }

    #[test]
    fn the_forwarded_output_flags_no_space() {
        let text =
            b"   Compiling a\nerror: failed to write x: No space left on device (os error 28)\n";
        let (saw, copier) = forward_watching(&text[..]);
        copier.join().unwrap();
        assert!(saw.load(Ordering::Relaxed));
        let (saw, copier) = forward_watching(&b"   Compiling a\nok"[..]);
        copier.join().unwrap();
        assert!(!saw.load(Ordering::Relaxed));
    }
}
