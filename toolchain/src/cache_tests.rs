//! Unit tests of `cache.rs`: keys, tags, entries and their refusals (a module of its own
//! to keep `cache.rs` short).

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
    let why =
        |owner, mode, forbidden| unsafe_because("cache directory", p, owner, mode, 1000, forbidden);
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
