//! The content-addressed build cache (under the cargo target directory,
//! `cpjit-stencil-cache/`). Three kinds of entries, each a file named by a SHA-256 key:
//!
//! - `dep3-<key>`: key = clang version + flags + precompiled-header key + the unit's path;
//!   value = the unit's last few dependency lists ([`DepList`]), each every file clang
//!   reported reading for one compilation (its `-MD` dependency list; for a unit compiled
//!   in a `clang -cc1` group, what the whole group read) with each file's content hash, so
//!   an unchanged unit needs no clang spawn at all, and neither does one whose files are
//!   back to contents compiled before (a revert, a branch switched back);
//! - `bc2-<key>`: key = clang version + flags + precompiled-header key + those (file, hash)
//!   pairs; value = LLVM bitcode;
//! - `pchdep2-<key>` and `pch-<key>`: the same two steps for a set's precompiled header;
//! - `obj-<key>`: key = LLVM version + target machine settings + bitcode; value = object.
//! - `opt-<key>`: key = clang version + flags (which give the optimiser's `-cc1` job) + a batched
//!   unit's front-end bitcode; value = its optimised bitcode (see `batch_split`).
//! - `optbatch-<key>`: key = clang version + flags + the units' names + a batch's front-end
//!   bitcode; value = every unit's optimised bitcode (an unchanged batch is not split again).
//!
//! # A trust boundary (issue 42)
//!
//! Whoever can write an entry chooses the machine code that ships, so the cache trusts
//! nothing it cannot authenticate:
//!
//! - Every entry is `MAGIC`, an HMAC-SHA256 tag, then the content. The tag covers the tool
//!   version, the entry's name (`<kind>-<key>`: an entry moved to another name fails) and
//!   the content, under a per-user key kept *outside* the cache directory: `$CPJIT_CACHE_KEY`
//!   (a file path), else `$XDG_STATE_HOME/cpjit/cache-key`, else
//!   `~/.local/state/cpjit/cache-key`. The key is 32 random bytes (64 hex digits) made on
//!   first use with mode 0600 in a 0700 directory; a key file that is not the user's, or
//!   that others can read or write, is refused like ssh refuses a private key. A plain
//!   checksum would not do: anyone able to rewrite an entry can recompute it.
//! - The directory is refused, ssh-style, when it is not owned by the current user (or
//!   root) or is group- or world-writable: [`Cache::check`] is then an error naming it, its
//!   owner and mode and the fix (`chmod go-w DIR`, or `$CPJIT_STENCIL_CACHE`). The cache
//!   creates its directory with mode 0700.
//! - `build-stencils --check` reads no entry at all ([`Cache::fill_only`]): what it tells the
//!   developer to commit comes from this run's compilers, never from a file someone else
//!   could have written. It still stores what it compiles, for later builds.
//!
//! A read verifies the tag; an entry that fails it (forged, a flipped byte, a truncated or
//! empty file, another key or tool version, an older unkeyed format), or whose content
//! later fails parsing or validation ([`Cache::reject`]), is a miss: removed, rebuilt and
//! replaced, with a one-line notice on stderr naming the entry and why (for entries of the
//! unkeyed format 1, which a cache made before issue 42 holds by the thousand, only the
//! first is named; none is ever trusted). Entries are written to a unique temporary file,
//! synced and renamed, so concurrent builds never see a partial file; the pipeline stores
//! an entry only after the output that came from it has passed validation, so a compiler
//! that exits 0 with garbage never poisons the cache.

pub use crate::cache_deps::{DepEntry, DepList, FileHashes};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The first bytes of every entry (the number is the entry format's version; 1 was the
/// unkeyed SHA-256 checksum).
const MAGIC: &[u8; 8] = b"cpjitc2\n";
/// The first bytes of an entry of the unkeyed format 1, read only to say why it is a miss.
const MAGIC_UNKEYED: &[u8; 8] = b"cpjitc1\n";
/// The tool version the tag covers: entries of another toolchain version are misses.
const TOOL_VERSION: &str = concat!("cpjit-toolchain ", env!("CARGO_PKG_VERSION"));
/// The environment variable naming the key file (tests, or a home that is not writable).
pub const KEY_ENV: &str = "CPJIT_CACHE_KEY";

/// The per-user secret entries are authenticated with (never printed).
struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

#[derive(Debug, Clone)]
enum State {
    /// `--no-cache`, or nowhere to keep a key or the directory: nothing read or written.
    Disabled,
    /// The directory or key is unsafe: nothing read or written, and [`Cache::check`] fails.
    Refused(String),
    Open {
        dir: PathBuf,
        key: Arc<Key>,
    },
}

#[derive(Debug, Clone)]
pub struct Cache {
    state: State,
    /// False for `--check` ([`Cache::fill_only`]): entries are stored, never read.
    reads: bool,
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

/// The MAC of entry `name` (`<kind>-<key>`) holding `content`.
fn mac(key: &Key, name: &str, content: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&key.0).expect("HMAC takes any key size");
    for part in [TOOL_VERSION.as_bytes(), name.as_bytes()] {
        m.update(&(part.len() as u64).to_le_bytes());
        m.update(part);
    }
    m.update(content);
    m
}

/// An entry's bytes on disk.
fn encode_entry(key: &Key, name: &str, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + content.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&mac(key, name, content).finalize().into_bytes());
    out.extend_from_slice(content);
    out
}

/// The content of entry `name`'s bytes, or why they fail authentication.
fn decode_entry<'a>(key: &Key, name: &str, bytes: &'a [u8]) -> Result<&'a [u8], &'static str> {
    if bytes.starts_with(MAGIC_UNKEYED) {
        return Err("unkeyed entry of an older toolchain");
    }
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("no entry header (truncated, empty or foreign file)")?;
    if rest.len() < 32 {
        return Err("truncated tag");
    }
    let (tag, content) = rest.split_at(32);
    // `verify_slice` compares in constant time.
    mac(key, name, content).verify_slice(tag).map_err(|_| {
        "its HMAC does not verify under your cache key \
         (forged or corrupt, or written with another key or toolchain version)"
    })?;
    Ok(content)
}

/// Distinguishes the temporary files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
/// Whether this process has said that it replaces unkeyed entries of format 1.
static TOLD_UNKEYED: AtomicBool = AtomicBool::new(false);

impl Cache {
    /// The cache in `dir` (created with mode 0700 if missing), its entries authenticated
    /// with the key of [`Cache::default_key_file`]. An unsafe directory or key gives a
    /// refused cache ([`Cache::check`]); a directory or key that cannot be created, a
    /// disabled one (a notice says so): neither ever fails a build that could run without.
    pub fn new(dir: PathBuf) -> Cache {
        match Cache::default_key_file() {
            Some(key_file) => Cache::with_key_file(dir, &key_file),
            None => {
                eprintln!(
                    "notice: no place for the build cache's key (neither ${KEY_ENV}, \
                     $XDG_STATE_HOME nor $HOME is set); building without the cache \
                     (set ${KEY_ENV} to a file path outside {})",
                    dir.display()
                );
                Cache::disabled()
            }
        }
    }

    /// [`Cache::new`] with the key in `key_file` (created if missing).
    pub fn with_key_file(dir: PathBuf, key_file: &Path) -> Cache {
        let state = match open(&dir, key_file) {
            Ok(key) => State::Open {
                dir,
                key: Arc::new(key),
            },
            Err(Problem::Unsafe(why)) => State::Refused(why),
            Err(Problem::Unavailable(why)) => {
                eprintln!("notice: {why}; building without the cache");
                State::Disabled
            }
        };
        Cache { state, reads: true }
    }

    /// A cache that never hits and stores nothing.
    pub fn disabled() -> Cache {
        Cache {
            state: State::Disabled,
            reads: false,
        }
    }

    /// This cache for `build-stencils --check`: it stores what the run compiles but reads no
    /// entry, so what `--check` vouches for never comes from a file it did not write. An
    /// unsafe directory is then left alone instead of failing the check.
    pub fn fill_only(&self) -> Cache {
        let state = match &self.state {
            State::Refused(_) => State::Disabled,
            other => other.clone(),
        };
        Cache {
            state,
            reads: false,
        }
    }

    /// An error naming the problem and its fix if the directory or key was refused.
    pub fn check(&self) -> crate::error::Result<()> {
        match &self.state {
            State::Refused(why) => Err(crate::error::Error(why.clone())),
            _ => Ok(()),
        }
    }

    /// The directory, if the cache is enabled.
    pub fn dir(&self) -> Option<&Path> {
        match &self.state {
            State::Open { dir, .. } => Some(dir),
            _ => None,
        }
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

    /// Where the key lives: `$CPJIT_CACHE_KEY`, else `$XDG_STATE_HOME/cpjit/cache-key`,
    /// else `~/.local/state/cpjit/cache-key` (per user, outside any cache directory).
    pub fn default_key_file() -> Option<PathBuf> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(file) = var(KEY_ENV) {
            return Some(PathBuf::from(file));
        }
        // The XDG spec ignores a relative $XDG_STATE_HOME.
        let state = var("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".local/state")))?;
        Some(state.join("cpjit").join("cache-key"))
    }

    /// Whether an entry exists (unverified: a bad one is found out when it is read).
    pub fn contains(&self, kind: &str, key: &str) -> bool {
        self.reads && self.path(kind, key).is_some_and(|p| p.is_file())
    }

    fn path(&self, kind: &str, key: &str) -> Option<PathBuf> {
        Some(self.dir()?.join(format!("{kind}-{key}")))
    }

    /// The authenticated content of entry `kind-key`; `None` on a miss. An entry that fails
    /// authentication is removed, with a notice.
    pub fn get(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        let State::Open { dir, key: secret } = &self.state else {
            return None;
        };
        if !self.reads {
            return None;
        }
        let name = format!("{kind}-{key}");
        let bytes = std::fs::read(dir.join(&name)).ok()?;
        match decode_entry(secret, &name, &bytes) {
            Ok(content) => Some(content.to_vec()),
            // A cache of the unkeyed format holds thousands of entries: one notice, for the
            // first, then each is removed and rebuilt quietly (none is ever trusted).
            Err(why) if bytes.starts_with(MAGIC_UNKEYED) => {
                if TOLD_UNKEYED.swap(true, Ordering::Relaxed) {
                    let _ = std::fs::remove_file(dir.join(&name));
                } else {
                    let more = format!("{why}; further ones are replaced without a notice");
                    self.reject(kind, key, &more);
                }
                None
            }
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
        let State::Open { dir, key: secret } = &self.state else {
            return;
        };
        let name = format!("{kind}-{key}");
        // A cache that cannot be written only costs time; the build itself must not fail.
        let tmp = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(&encode_entry(secret, &name, value))?;
            f.sync_all()
        });
        if written.is_err() || std::fs::rename(&tmp, dir.join(&name)).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// Why a cache cannot be opened.
#[derive(Debug)]
enum Problem {
    /// Another user could choose its entries: the command fails, naming the fix.
    Unsafe(String),
    /// It cannot be created or read: the build runs without it.
    Unavailable(String),
}

/// Creates (mode 0700) and checks `dir`, then loads or makes the key in `key_file`.
fn open(dir: &Path, key_file: &Path) -> Result<Key, Problem> {
    let key_file = &std::path::absolute(key_file)
        .map_err(|e| Problem::Unavailable(format!("cache key {}: {e}", key_file.display())))?;
    make_private_dir(dir).map_err(|e| {
        Problem::Unavailable(format!(
            "cannot create cache directory {}: {e}",
            dir.display()
        ))
    })?;
    check_owner_and_mode(dir, "cache directory", 0o022).map_err(|why| {
        Problem::Unsafe(format!(
            "{why}; another user could plant the machine code your builds ship. Fix: \
             `chmod go-w {}` if it is yours, or set $CPJIT_STENCIL_CACHE to a directory \
             only you can write (or pass --no-cache)",
            dir.display()
        ))
    })?;
    // A key inside the cache directory would be as writable as the entries it protects.
    let (Ok(canonical_dir), Some(Ok(key_dir))) = (
        dir.canonicalize(),
        key_file.parent().map(|p| {
            make_private_dir(p)?;
            p.canonicalize()
        }),
    ) else {
        return Err(Problem::Unavailable(format!(
            "cannot create the directory of the cache key {}",
            key_file.display()
        )));
    };
    if key_dir.starts_with(&canonical_dir) {
        return Err(Problem::Unsafe(format!(
            "the cache key {} is inside the cache directory {}; set ${KEY_ENV} to a file \
             outside it",
            key_file.display(),
            dir.display()
        )));
    }
    load_or_make_key(key_file)
}

/// Creates `dir` (its missing parents with default permissions, itself with 0700).
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        // A concurrent build created it first: it is checked like any existing directory.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Whether `mode` gives `forbidden` bits and `owner` is neither `euid` nor root: the
/// reason, naming what (`label path`), its owner and its mode; `None` when safe.
fn unsafe_because(
    label: &str,
    path: &Path,
    owner: u32,
    mode: u32,
    euid: u32,
    forbidden: u32,
) -> Option<String> {
    let who = |bits: u32| match (bits & 0o070 != 0, bits & 0o007 != 0) {
        (true, true) => "its group and others",
        (true, false) => "its group",
        _ => "others",
    };
    let bad = mode & forbidden;
    let what = if owner != euid && owner != 0 {
        format!("is owned by uid {owner}, not by you (uid {euid})")
    } else if bad & 0o022 != 0 {
        format!("is writable by {}", who(bad & 0o022))
    } else if bad != 0 {
        format!("is readable by {}", who(bad))
    } else {
        return None;
    };
    Some(format!(
        "{label} {} {what} (owner uid {owner}, mode {:04o})",
        path.display(),
        mode & 0o7777
    ))
}

/// [`unsafe_because`] for the file or directory at `path` (followed if a symlink, as the
/// cache opens it) and the current effective user.
fn check_owner_and_mode(path: &Path, label: &str, forbidden: u32) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read {label} {}: {e}", path.display()))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        match unsafe_because(label, path, meta.uid(), meta.mode(), euid, forbidden) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        // Windows ACLs are not modelled; the keyed tags still reject forged entries.
        let _ = (path, label, forbidden);
        Ok(())
    }
}

/// The key in `file`, made (32 random bytes as hex, mode 0600) if missing.
fn load_or_make_key(file: &Path) -> Result<Key, Problem> {
    if !file.exists() {
        make_key(file)?;
    }
    check_owner_and_mode(file, "cache key", 0o077).map_err(|why| {
        Problem::Unsafe(format!(
            "{why}; whoever can read or write it can forge cache entries. Fix: `rm {}` (a \
             new key is made on the next build; cache entries are then rebuilt once)",
            file.display()
        ))
    })?;
    let text = std::fs::read_to_string(file).map_err(|e| {
        Problem::Unavailable(format!("cannot read the cache key {}: {e}", file.display()))
    })?;
    parse_key(text.trim_end()).ok_or_else(|| {
        Problem::Unsafe(format!(
            "the cache key {} is not 64 hex digits; remove it (a new key is made on the next \
             build; cache entries are then rebuilt once)",
            file.display()
        ))
    })
}

fn parse_key(text: &str) -> Option<Key> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(Key(key))
}

/// Writes a new key to `file`: a private temporary file, hard-linked into place so that of
/// two builds making a key at once, one wins and both use its key.
fn make_key(file: &Path) -> Result<(), Problem> {
    let unavailable = |e: std::io::Error| {
        Problem::Unavailable(format!("cannot make the cache key {}: {e}", file.display()))
    };
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| unavailable(std::io::Error::other(e.to_string())))?;
    let tmp = file.with_extension(format!(
        "{}.{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(format!("{}\n", hex(&secret)).as_bytes())?;
        f.sync_all()
    });
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, file) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    linked.map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in `dir` whose key is in `keys/cache-key`.
    fn cache_in(dir: &Path, keys: &Path) -> Cache {
        let cache = Cache::with_key_file(dir.to_path_buf(), &keys.join("cache-key"));
        cache.check().unwrap();
        cache
    }

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
        let keys = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), keys.path());
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
    fn another_tool_version_an_unkeyed_entry_and_another_name_are_misses() {
        let secret = Key([7; 32]);
        let good = encode_entry(&secret, "obj-a", b"x");
        assert_eq!(decode_entry(&secret, "obj-a", &good), Ok(&b"x"[..]));
        // The same content under another version: the tag of the old format's layout.
        let mut old = <Hmac<Sha256> as Mac>::new_from_slice(&secret.0).unwrap();
        for part in [&b"cpjit-toolchain 0.0.0"[..], b"obj-a"] {
            old.update(&(part.len() as u64).to_le_bytes());
            old.update(part);
        }
        old.update(b"x");
        let mut other_version = good.clone();
        other_version[MAGIC.len()..MAGIC.len() + 32].copy_from_slice(&old.finalize().into_bytes());
        assert!(decode_entry(&secret, "obj-a", &other_version).is_err());
        // A good entry copied to another name (another op's object) is not that entry.
        assert!(decode_entry(&secret, "obj-b", &good).is_err());
        assert!(
            decode_entry(&Key([8; 32]), "obj-a", &good).is_err(),
            "another key"
        );
        // Format 1: the unkeyed checksum anyone can recompute.
        let mut unkeyed = MAGIC_UNKEYED.to_vec();
        let mut h = Sha256::new();
        h.update((TOOL_VERSION.len() as u64).to_le_bytes());
        h.update(TOOL_VERSION.as_bytes());
        h.update(b"x");
        unkeyed.extend_from_slice(&h.finalize());
        unkeyed.extend_from_slice(b"x");
        let why = decode_entry(&secret, "obj-a", &unkeyed).unwrap_err();
        assert!(why.contains("unkeyed"), "{why}");
    }

    #[test]
    fn the_key_is_made_once_private_and_outside_the_cache() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keys = tempfile::tempdir().unwrap();
        let file = keys.path().join("state/cpjit/cache-key");
        let first = Cache::with_key_file(dir.path().join("c"), &file);
        first.check().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir.path().join("c")), 0o700, "the cache directory");
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.trim_end().len(), 64);
        // A second build uses the same key: what the first stored is a hit.
        first.put("obj", "k", b"v");
        let second = Cache::with_key_file(dir.path().join("c"), &file);
        assert_eq!(second.get("obj", "k").as_deref(), Some(&b"v"[..]));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        assert_eq!(
            std::fs::read_dir(keys.path().join("state/cpjit"))
                .unwrap()
                .count(),
            1
        );

        // A key others can read is refused (it may have been read), naming the fix.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = Cache::with_key_file(dir.path().join("c"), &file)
            .check()
            .unwrap_err()
            .0;
        assert!(
            err.contains(&file.display().to_string())
                && err.contains("readable by its group")
                && err.contains("mode 0640")
                && err.contains("rm "),
            "{err}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&file, "not a key\n").unwrap();
        let err = Cache::with_key_file(dir.path().join("c"), &file)
            .check()
            .unwrap_err()
            .0;
        assert!(err.contains("not 64 hex digits"), "{err}");

        let inside = Cache::with_key_file(dir.path().join("c"), &dir.path().join("c/k/key"));
        let err = inside.check().unwrap_err().0;
        assert!(err.contains("inside the cache directory"), "{err}");
    }

    #[test]
    fn unsafe_owners_and_modes_are_named() {
        let p = Path::new("/c");
        let why = |owner, mode, forbidden| {
            unsafe_because("cache directory", p, owner, mode, 1000, forbidden)
        };
        assert_eq!(why(1000, 0o40700, 0o022), None);
        assert_eq!(why(1000, 0o40755, 0o022), None);
        assert_eq!(
            why(0, 0o40755, 0o022),
            None,
            "root's directories are trusted, as by ssh"
        );
        assert_eq!(
            why(1000, 0o40775, 0o022).unwrap(),
            "cache directory /c is writable by its group (owner uid 1000, mode 0775)"
        );
        assert!(why(1000, 0o41777, 0o022)
            .unwrap()
            .contains("writable by its group and others"));
        assert!(why(1000, 0o40757, 0o022)
            .unwrap()
            .contains("writable by others"));
        assert!(why(1001, 0o40700, 0o022)
            .unwrap()
            .contains("owned by uid 1001, not by you (uid 1000)"));
        assert!(why(1000, 0o100604, 0o077)
            .unwrap()
            .contains("readable by others"));
    }

    #[test]
    fn every_unkeyed_entry_is_a_miss_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let keys = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), keys.path());
        for name in ["obj-a", "obj-b"] {
            let mut bytes = MAGIC_UNKEYED.to_vec();
            bytes.extend_from_slice(&[0; 32]);
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        // The first with a notice, the second quietly: neither is read.
        for key in ["a", "b"] {
            assert_eq!(cache.get("obj", key), None);
            assert!(!dir.path().join(format!("obj-{key}")).exists());
        }
    }

    #[test]
    fn a_fill_only_cache_stores_but_never_reads() {
        let dir = tempfile::tempdir().unwrap();
        let keys = tempfile::tempdir().unwrap();
        let cache = cache_in(dir.path(), keys.path());
        cache.put("obj", "a", b"planted");
        let check = cache.fill_only();
        assert_eq!(check.get("obj", "a"), None);
        assert!(!check.contains("obj", "a"));
        check.put("obj", "b", b"compiled");
        assert_eq!(cache.get("obj", "b").as_deref(), Some(&b"compiled"[..]));
    }
}
