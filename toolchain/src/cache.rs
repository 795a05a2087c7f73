//! The content-addressed build cache (under the cargo target directory,
//! `cpjit-stencil-cache/`). Three kinds of entries, each a file named by a SHA-256 key:
//!
//! - `dep-<key>`: "direct mode" (as in ccache): key = clang version + flags + translation
//!   unit bytes; value = the preprocessed-text hash and the hash of every included file, so
//!   an unchanged unit needs no `clang -E` spawn at all;
//! - `bc-<key>`: key = clang version + flags + preprocessed text; value = LLVM bitcode;
//! - `obj-<key>`: key = LLVM version + target machine settings + bitcode; value = object.
//!
//! Entries are written to a temporary name and renamed, so concurrent builds never see a
//! partial file. A corrupt or unreadable entry is a miss, never an error.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

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

impl Cache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Cache {
        Cache { dir: Some(dir) }
    }

    /// A cache that never hits and stores nothing.
    pub fn disabled() -> Cache {
        Cache { dir: None }
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

    pub fn get(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        let dir = self.dir.as_ref()?;
        std::fs::read(dir.join(format!("{kind}-{key}"))).ok()
    }

    pub fn put(&self, kind: &str, key: &str, value: &[u8]) {
        let Some(dir) = &self.dir else { return };
        // A cache that cannot be written only costs time; the build itself must not fail.
        let _ = std::fs::create_dir_all(dir);
        let tmp = dir.join(format!(".{kind}-{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, value).is_ok() {
            let _ = std::fs::rename(&tmp, dir.join(format!("{kind}-{key}")));
        }
    }
}

/// A direct-mode entry: the preprocessed hash and the (file, content hash) of each include.
pub struct DepEntry {
    pub preprocessed: String,
    pub files: Vec<(String, String)>,
}

impl DepEntry {
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{}\n", self.preprocessed);
        for (file, hash) in &self.files {
            s.push_str(&format!("{hash} {file}\n"));
        }
        s.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Option<DepEntry> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        let preprocessed = lines.next()?.to_string();
        let files = lines
            .map(|l| {
                l.split_once(' ')
                    .map(|(h, f)| (f.to_string(), h.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(DepEntry {
            preprocessed,
            files,
        })
    }

    /// Whether every recorded file still has the recorded content.
    pub fn is_fresh(&self) -> bool {
        self.files
            .iter()
            .all(|(file, hash)| std::fs::read(file).is_ok_and(|bytes| key(&[&bytes]) == *hash))
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
        let e = DepEntry {
            preprocessed: "aa".into(),
            files: vec![("/a b/c.h".into(), "ff".into())],
        };
        let d = DepEntry::decode(&e.encode()).unwrap();
        assert_eq!(d.preprocessed, "aa");
        assert_eq!(d.files, [("/a b/c.h".to_string(), "ff".to_string())]);
        assert!(!d.is_fresh());
    }
}
