//! What the build cache's dependency entries hold (see `cache`): the files a compilation
//! read with the content hash each had ([`DepEntry`]), the last few such lists of a unit
//! ([`DepList`], so that contents compiled before are found again: the cache is addressed
//! by content, not by the unit's last build), and each file's hash computed once per build
//! ([`FileHashes`]).

use crate::cache::key;
use std::path::{Path, PathBuf};

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

/// The last dependency lists of one unit, most recent first: a unit whose files have the
/// contents of any of them is a hit (the bitcode entry keyed by that list's contents).
pub struct DepList {
    pub entries: Vec<DepEntry>,
}

impl DepList {
    /// How many lists a unit keeps: the edits an undo, a revert or a branch switch back
    /// may step over.
    pub const KEEP: usize = 16;

    /// The lists, separated by an empty line.
    pub fn encode(&self) -> Vec<u8> {
        let parts: Vec<Vec<u8>> = self.entries.iter().map(DepEntry::encode).collect();
        parts.join(&b"\n"[..])
    }

    pub fn decode(bytes: &[u8]) -> Option<DepList> {
        let text = std::str::from_utf8(bytes).ok()?;
        let entries = text
            .split("\n\n")
            .map(|part| DepEntry::decode(part.as_bytes()))
            .collect::<Option<Vec<_>>>()?;
        (!entries.is_empty()).then_some(DepList { entries })
    }

    /// The lists whose every file still has the recorded content, most recent first.
    pub fn fresh<'a>(&'a self, hashes: &'a FileHashes) -> impl Iterator<Item = &'a DepEntry> {
        self.entries.iter().filter(|e| e.is_fresh(hashes))
    }

    /// `previous` (if any) with `entry` first, once, and at most [`DepList::KEEP`] lists.
    pub fn with(previous: Option<DepList>, entry: DepEntry) -> DepList {
        let mut entries = vec![entry];
        for old in previous.map(|p| p.entries).unwrap_or_default() {
            if entries.len() < Self::KEEP && old.files != entries[0].files {
                entries.push(old);
            }
        }
        DepList { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_keeps_the_last_contents_most_recent_first_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.h");
        let entry = |text: &str| {
            std::fs::write(&file, text).unwrap();
            DepEntry {
                files: vec![(
                    file.display().to_string(),
                    FileHashes::default().hash(&file).unwrap(),
                )],
            }
        };
        let (one, two) = (entry("one"), entry("two"));
        let list = DepList::with(Some(DepList::with(None, one)), two);
        let list = DepList::decode(&list.encode()).unwrap();
        assert_eq!(list.entries.len(), 2);
        // The file is back to `one`: the older list is the fresh one.
        std::fs::write(&file, "one").unwrap();
        let hashes = FileHashes::default();
        let fresh: Vec<&DepEntry> = list.fresh(&hashes).collect();
        assert_eq!(fresh.len(), 1);
        assert!(std::ptr::eq(fresh[0], &list.entries[1]));
        let mut many = None;
        for i in 0..40 {
            many = Some(DepList::with(many, entry(&i.to_string())));
        }
        assert_eq!(many.unwrap().entries.len(), DepList::KEEP);
        assert!(DepList::decode(b"not a list").is_none());
    }
}
