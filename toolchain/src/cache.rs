//! The content-addressed build cache (under the cargo target directory,
//! `cpjit-stencil-cache/`). Three kinds of entries, each a file named by a SHA-256 key:
//!
//! - `dep2-<key>`: key = clang version + flags + precompiled-header key + the unit's path;
//!   value = every file clang reported reading for the unit (its `-MD` dependency list; for
//!   a unit compiled in a `clang -cc1` group, what the whole group read) with each file's
//!   content hash, so an unchanged unit needs no clang spawn at all;
//! - `bc2-<key>`: key = clang version + flags + precompiled-header key + those (file, hash)
//!   pairs; value = LLVM bitcode;
//! - `pchdep-<key>` and `pch-<key>`: the same two steps for a set's precompiled header;
//! - `obj-<key>`: key = LLVM version + target machine settings + bitcode; value = object.
//!
//! Every entry is `MAGIC`, a SHA-256 checksum over the tool version and the content, then
//! the content. A read verifies the checksum; an entry that fails it (a flipped byte, a
//! truncated or empty file, another tool version), or whose content later fails parsing or
//! validation ([`Cache::reject`]), is a miss: removed, rebuilt and replaced, with a one-line
//! notice on stderr. Entries are written to a unique temporary file, synced and renamed, so
//! concurrent builds never see a partial file; the pipeline stores an entry only after the
//! output that came from it has passed validation, so a compiler that exits 0 with garbage
//! never poisons the cache.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The first bytes of every entry (the number is the entry format's version).
const MAGIC: &[u8; 8] = b"cpjitc1\n";
/// The tool version the checksum covers: entries of another toolchain version are misses.
const TOOL_VERSION: &str = concat!("cpjit-toolchain ", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Clone)]
pub struct Cache {
    dir: Option<PathBuf>,
}

/// Hex SHA-256 over length-prefixed parts (so `["ab", "c"]` and `["a", "bc"]` differ).
pub fn key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The checksum stored in front of `content`.
fn checksum(content: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((TOOL_VERSION.len() as u64).to_le_bytes());
    h.update(TOOL_VERSION.as_bytes());
    h.update(content);
    h.finalize().into()
}

/// An entry's bytes on disk.
fn encode_entry(content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + content.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&checksum(content));
    out.extend_from_slice(content);
    out
}

/// The content of an entry's bytes, or why they fail verification.
fn decode_entry(bytes: &[u8]) -> Result<&[u8], &'static str> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("no entry header (truncated, empty or foreign file)")?;
    if rest.len() < 32 {
        return Err("truncated checksum");
    }
    let (sum, content) = rest.split_at(32);
    if sum != checksum(content) {
        return Err("checksum mismatch (corrupt content or another tool version)");
    }
    Ok(content)
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Cache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Cache {
        Cache { dir: Some(dir) }
    }

    /// A cache that never hits and stores nothing.
    pub fn disabled() -> Cache {
        Cache { dir: None }
    }

    /// The directory, if the cache is enabled.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The default location: `$CPJIT_STENCIL_CACHE`, else `cpjit-stencil-cache/` in the
    /// cargo target directory that holds this executable (found by its `CACHEDIR.TAG`).
    pub fn default_dir(workspace_root: &Path) -> PathBuf {
        if let Some(dir) = std::env::var_os("CPJIT_STENCIL_CACHE") {
            return PathBuf::from(dir);
        }
        let exe = std::env::current_exe().ok();
        let target_dir = exe
            .as_deref()
            .and_then(|e| e.ancestors().find(|a| a.join("CACHEDIR.TAG").is_file()))
            .map(Path::to_path_buf)
            .unwrap_or_else(|| workspace_root.join("target"));
        target_dir.join("cpjit-stencil-cache")
    }

    /// Whether an entry exists (unverified: a corrupt one is found out when it is read).
    pub fn contains(&self, kind: &str, key: &str) -> bool {
        self.path(kind, key).is_some_and(|p| p.is_file())
    }

    fn path(&self, kind: &str, key: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{kind}-{key}")))
    }

    /// The verified content of entry `kind-key`; `None` on a miss. An entry that fails
    /// verification is removed, with a notice.
    pub fn get(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        let path = self.path(kind, key)?;
        let bytes = std::fs::read(&path).ok()?;
        match decode_entry(&bytes) {
            Ok(content) => Some(content.to_vec()),
            Err(why) => {
                self.reject(kind, key, why);
                None
            }
        }
    }

    /// Removes entry `kind-key`, whose content failed verification, parsing or validation,
    /// with a one-line notice: the caller rebuilds it, and stores the result if it passes.
    pub fn reject(&self, kind: &str, key: &str, why: &str) {
        let Some(path) = self.path(kind, key) else {
            return;
        };
        let why = why.lines().next().unwrap_or_default();
        eprintln!(
            "notice: cache entry {} is invalid ({why}); rebuilding and replacing it",
            path.display()
        );
        let _ = std::fs::remove_file(&path);
    }

    /// Stores `value` as entry `kind-key` (temporary file, fsync, rename).
    pub fn put(&self, kind: &str, key: &str, value: &[u8]) {
        let (Some(dir), Some(path)) = (&self.dir, self.path(kind, key)) else {
            return;
        };
        // A cache that cannot be written only costs time; the build itself must not fail.
        let _ = std::fs::create_dir_all(dir);
        let tmp = dir.join(format!(
            ".{kind}-{key}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(&encode_entry(value))?;
            f.sync_all()
        });
        if written.is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A dependency entry: every file clang read for a unit (from its dependency file), with
/// the content hash each had when the unit was compiled.
pub struct DepEntry {
    pub files: Vec<(String, String)>,
}

impl DepEntry {
    pub fn encode(&self) -> Vec<u8> {
        let mut s = String::new();
        for (file, hash) in &self.files {
            s.push_str(&format!("{hash} {file}\n"));
        }
        s.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Option<DepEntry> {
        let text = std::str::from_utf8(bytes).ok()?;
        let files = text
            .lines()
            .map(|l| {
                l.split_once(' ')
                    .filter(|(h, f)| h.len() == 64 && !f.is_empty())
                    .map(|(h, f)| (f.to_string(), h.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        (!files.is_empty()).then_some(DepEntry { files })
    }

    /// Whether every recorded file still has the recorded content.
    pub fn is_fresh(&self, hashes: &FileHashes) -> bool {
        self.files
            .iter()
            .all(|(file, hash)| hashes.hash(Path::new(file)).as_deref() == Some(hash.as_str()))
    }
}

/// Content hashes of files, each file read and hashed at most once per build: every unit of
/// a large set lists the same headers, which are then hashed once, not once per unit.
#[derive(Debug, Default)]
pub struct FileHashes {
    known: std::sync::Mutex<std::collections::HashMap<PathBuf, Option<String>>>,
}

impl FileHashes {
    /// The hash of `path`'s content; `None` if it cannot be read.
    pub fn hash(&self, path: &Path) -> Option<String> {
        if let Some(known) = self.lock().get(path) {
            return known.clone();
        }
        let hash = std::fs::read(path).ok().map(|bytes| key(&[&bytes]));
        self.lock().insert(path.to_path_buf(), hash.clone());
        hash
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<PathBuf, Option<String>>> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_length_prefixed() {
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        assert_eq!(key(&[b"x"]).len(), 64);
    }

    #[test]
    fn dep_entry_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a b.h");
        std::fs::write(&file, "int x;").unwrap();
        let name = file.display().to_string();
        let e = DepEntry {
            files: vec![(name.clone(), key(&[b"int x;"]))],
        };
        let d = DepEntry::decode(&e.encode()).unwrap();
        assert_eq!(d.files, e.files);
        assert!(d.is_fresh(&FileHashes::default()));
        std::fs::write(&file, "int y;").unwrap();
        assert!(!d.is_fresh(&FileHashes::default()), "changed content");
        std::fs::remove_file(&file).unwrap();
        assert!(!d.is_fresh(&FileHashes::default()), "removed file");
        assert!(DepEntry::decode(b"").is_none());
        assert!(DepEntry::decode(b"ff /a.h\n").is_none(), "not a hash");
    }

    #[test]
    fn entries_are_verified_and_bad_ones_are_misses_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().to_path_buf());
        let key = key(&[b"k"]);
        assert_eq!(cache.get("obj", &key), None);
        cache.put("obj", &key, b"object bytes");
        assert_eq!(
            cache.get("obj", &key).as_deref(),
            Some(&b"object bytes"[..])
        );
        let path = dir.path().join(format!("obj-{key}"));
        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let corruptions: [&[u8]; 4] = [&flipped, &good[..good.len() - 3], &good[..10], b""];
        for bad in corruptions {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(cache.get("obj", &key), None, "{bad:?} must be a miss");
            assert!(!path.exists(), "a bad entry is removed");
        }
        cache.put("obj", &key, b"object bytes");
        cache.reject("obj", &key, "cannot read the object\nsecond line");
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no temporary files are left behind"
        );
    }

    #[test]
    fn another_tool_version_is_a_miss() {
        let mut bytes = encode_entry(b"x");
        let at = MAGIC.len();
        let mut h = Sha256::new();
        h.update(3u64.to_le_bytes());
        h.update(b"old");
        h.update(b"x");
        bytes[at..at + 32].copy_from_slice(&h.finalize());
        assert!(decode_entry(&bytes).is_err());
        assert_eq!(decode_entry(&encode_entry(b"x")), Ok(&b"x"[..]));
    }
}
