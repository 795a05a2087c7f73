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
//! - `ppm-<key>`: key = clang version + flags + a family member's name and defines + its
//!   part of its batch's preprocessed text and the rest of that text without the other
//!   members' entry bodies; value = the member's optimised bitcode (`batch_members`: one
//!   changed member of a changed template compiles alone).
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
//! first is named; none is ever trusted). Entries are written to a unique temporary file
//! and renamed, so concurrent builds never see a partial file; they are not synced: an
//! entry a crash leaves empty or torn fails its tag like any damaged one (a miss, rebuilt),
//! and one `fsync` per entry (thousands per cold build) cost ext4 a journal commit each.
//! The pipeline stores an entry only after the output that came from it has passed
//! validation, so a compiler that exits 0 with garbage never poisons the cache.

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

    /// Stores `value` as entry `kind-key` (temporary file, rename; not synced, see the
    /// module doc).
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
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&encode_entry(secret, &name, value)));
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
#[path = "cache_tests.rs"]
mod tests;
