//! The build cache as an attacker or a disk fault would meet it: flipped bytes, truncated
//! and empty entries are misses that are rebuilt and replaced, never a wrong stencil and
//! never a permanent error (issue 15, items 1 and 2).

use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use std::path::{Path, PathBuf};

use crate::common;

/// Builds the `family` test set (a hand-written op and a family: every kind of cache entry,
/// in seconds; the default set has ten times the stencils and adds nothing here).
fn build(cache: &Path, out: &Path) -> String {
    let target = common::first_target();
    let mut opts = common::options(
        common::set("family"),
        &[&target],
        out,
        Cache::new(cache.to_path_buf()),
    );
    opts.force = true;
    driver::build_stencils(&opts).unwrap_or_else(|e| panic!("{e}"));
    std::fs::read_to_string(out.join(&target).join("src/lib.rs")).unwrap()
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    all.sort();
    all
}

#[test]
fn corrupt_truncated_and_empty_entries_are_rebuilt_and_replaced() {
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let reference = build(cache.path(), out.path());
    let good: Vec<(PathBuf, Vec<u8>)> = entries(cache.path())
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert!(good
        .iter()
        .any(|(p, _)| p.to_string_lossy().contains("obj-")));
    assert!(good
        .iter()
        .any(|(p, _)| p.to_string_lossy().contains("bc2-")));
    assert!(good
        .iter()
        .any(|(p, _)| p.to_string_lossy().contains("dep2-")));

    type Damage = fn(&[u8]) -> Vec<u8>;
    let damages: [(&str, Damage); 4] = [
        ("one flipped byte near the end", |b| {
            let mut b = b.to_vec();
            let at = b.len() - 7;
            b[at] ^= 0x01;
            b
        }),
        ("one flipped byte in the middle", |b| {
            let mut b = b.to_vec();
            let at = b.len() / 2;
            b[at] ^= 0x80;
            b
        }),
        ("truncated to half", |b| b[..b.len() / 2].to_vec()),
        ("empty", |_| Vec::new()),
    ];
    for (what, damage) in damages {
        for (path, bytes) in &good {
            std::fs::write(path, damage(bytes)).unwrap();
        }
        let rebuilt = build(cache.path(), out.path());
        assert!(
            rebuilt == reference,
            "{what}: the rebuilt crate differs from the reference"
        );
        for (path, bytes) in &good {
            assert_eq!(
                &std::fs::read(path).unwrap(),
                bytes,
                "{what}: {} was not replaced by a good entry",
                path.display()
            );
        }
    }
}
