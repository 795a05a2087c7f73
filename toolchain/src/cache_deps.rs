//! What the build cache's dependency entries hold (see `cache`): the files a compilation
//! read with the content hash each had ([`DepEntry`]), the last few such lists of a unit
//! ([`DepList`], so that contents compiled before are found again: the cache is addressed
//! by content, not by the unit's last build), and each file's hash computed once per build
//! ([`FileHashes`]).
//!
//! Keys and lists spell the set's directory as [`SET_ROOT`] ([`portable`]): the same set
//! in another directory (a second checkout, a moved tree) computes the same keys and finds
//! the same entries, and a listed file under the set is looked for under the set being
//! built ([`FileHashes::local`]).

use crate::cache::key;
use std::path::{Path, PathBuf};

/// How cache keys and dependency lists spell the set's root directory.
pub const SET_ROOT: &str = "$SET";

/// `text` (flags, a batch's source, a file path) with each mention of `root` (followed by
/// a path separator, `=`, a quote, a NUL or the end) spelled [`SET_ROOT`].
pub fn portable(text: &str, root: &Path) -> String {
    let root = root.to_string_lossy();
    if root.is_empty() || root == "/" {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(root.as_ref()) {
        let after = &rest[at + root.len()..];
        out.push_str(&rest[..at]);
        let boundary = after.is_empty() || after.starts_with(['/', '=', '"', '\0', '\n']);
        out.push_str(if boundary { SET_ROOT } else { &root });
        rest = after;
    }
    out.push_str(rest);
    out
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
            .all(|(file, hash)| hashes.hash(&hashes.local(file)).as_deref() == Some(hash.as_str()))
    }

    /// The listed files where they are in the set being built.
    pub fn local_files(&self, hashes: &FileHashes) -> Vec<PathBuf> {
        self.files.iter().map(|(f, _)| hashes.local(f)).collect()
    }
}

/// Content hashes of files, each file read and hashed at most once per build: every unit of
/// a large set lists the same headers, which are then hashed once, not once per unit.
#[derive(Debug, Default)]
pub struct FileHashes {
    known: std::sync::Mutex<std::collections::HashMap<PathBuf, Option<String>>>,
    /// The root of the set being built, which [`SET_ROOT`] stands for.
    root: Option<PathBuf>,
}

impl FileHashes {
    /// Hashes for a build of the set at `root`.
    pub fn for_set(root: &Path) -> FileHashes {
        FileHashes {
            root: Some(root.to_path_buf()),
            ..FileHashes::default()
        }
    }

    /// A listed file (as [`portable`] spells it) where it is in the set being built.
    pub fn local(&self, file: &str) -> PathBuf {
        match (file.strip_prefix(SET_ROOT), &self.root) {
            (Some(rest), Some(root)) if rest.is_empty() || rest.starts_with('/') => {
                PathBuf::from(format!("{}{rest}", root.display()))
            }
            _ => PathBuf::from(file),
        }
    }

    /// `path` as keys and lists spell it (see [`portable`]).
    pub fn portable(&self, path: &Path) -> String {
        let text = path.display().to_string();
        match &self.root {
            Some(root) => portable(&text, root),
            None => text,
        }
    }

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

    #[test]
    fn the_sets_root_is_spelt_the_same_in_every_checkout() {
        let root = Path::new("/work/a/set");
        assert_eq!(
            portable(
                "-I/work/a/set/include\0-ffile-prefix-map=/work/a/set=.\0-I/work/a/settle",
                root
            ),
            "-I$SET/include\0-ffile-prefix-map=$SET=.\0-I/work/a/settle"
        );
        assert_eq!(
            portable("#include \"/work/a/set/ops/x.c\"\n", root),
            "#include \"$SET/ops/x.c\"\n"
        );
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("a.h"), "one").unwrap();
        let hashes = FileHashes::for_set(other.path());
        assert_eq!(hashes.portable(&other.path().join("a.h")), "$SET/a.h");
        assert_eq!(hashes.local("$SET/a.h"), other.path().join("a.h"));
        assert_eq!(
            hashes.local("/usr/include/x.h"),
            Path::new("/usr/include/x.h")
        );
        let entry = DepEntry {
            files: vec![("$SET/a.h".into(), key(&[b"one"]))],
        };
        assert!(entry.is_fresh(&hashes));
        assert!(!entry.is_fresh(&FileHashes::for_set(Path::new("/nonexistent"))));
    }
}
