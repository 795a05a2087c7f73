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
        .any(|(p, _)| p.to_string_lossy().contains("dep3-")));

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

/// Builds `set` for one target with the `cpjit` binary, its clang a wrapper that logs every
/// run to `log`; returns the generated crate's `lib.rs`.
fn build_logging_clang(set: &Path, out: &Path, cache: &Path, log: &Path) -> String {
    let wrapper = log.with_extension("sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec clang-19 \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let result = common::cpjit_build(set, out, cache)
        .env("CPJIT_CLANG", &wrapper)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::read_to_string(out.join(common::first_target()).join("src/lib.rs")).unwrap()
}

/// The compiler runs `log` records (not the version question).
fn compiles(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("--version"))
        .map(str::to_string)
        .collect()
}

#[test]
fn an_edit_reverted_is_a_cache_hit_batched_or_not() {
    use cpjit_toolchain::scale_set::ScaleSet;
    for batch_size in [None, Some(3)] {
        let set = tempfile::tempdir().unwrap();
        ScaleSet {
            ops: 5,
            header_lines: 400,
            batch_size,
        }
        .write(set.path())
        .unwrap();
        let (out, cache, logs) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let log = logs.path().join("clang.log");
        let build = || build_logging_clang(set.path(), out.path(), cache.path(), &log);
        let original = build();
        assert!(!compiles(&log).is_empty(), "the first build compiles");
        let unit = set.path().join("ops/op_0002.c");
        let text = std::fs::read_to_string(&unit).unwrap();
        let edited_text = text.replacen("+ (int64_t)", "- (int64_t)", 1);
        assert_ne!(edited_text, text);
        std::fs::write(&unit, &edited_text).unwrap();
        std::fs::remove_file(&log).unwrap();
        let edited = build();
        assert_ne!(edited, original, "{batch_size:?}");
        assert!(
            !compiles(&log).is_empty(),
            "an edit compiles ({batch_size:?})"
        );
        // Back to the first contents (a revert, a branch switched back): nothing to compile.
        std::fs::write(&unit, &text).unwrap();
        std::fs::remove_file(&log).unwrap();
        let reverted = build();
        assert_eq!(
            compiles(&log),
            Vec::<String>::new(),
            "a revert compiles nothing ({batch_size:?})"
        );
        assert_eq!(reverted, original, "{batch_size:?}");
    }
}

#[test]
fn the_same_set_in_another_directory_finds_the_cache_entries() {
    use cpjit_toolchain::scale_set::ScaleSet;
    // Units one by one without a precompiled header, and batched with one: a header is
    // built per checkout (it names the files it was built from by their paths), nothing
    // else is compiled again.
    for (batch_size, pch) in [(None, false), (Some(3), true)] {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let size = ScaleSet {
            ops: 5,
            header_lines: 400,
            batch_size,
        };
        for dir in [&first, &second] {
            size.write(dir.path()).unwrap();
            if !pch {
                let manifest = dir.path().join("manifest.toml");
                let text = std::fs::read_to_string(&manifest).unwrap();
                let text = text.replace("precompiled_header = \"include/scale.h\"\n", "");
                std::fs::write(&manifest, text).unwrap();
            }
        }
        let (cache, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let log = logs.path().join("clang.log");
        let build = |set: &Path| {
            let out = tempfile::tempdir().unwrap();
            build_logging_clang(set, out.path(), cache.path(), &log)
        };
        let original = build(first.path());
        assert!(!compiles(&log).is_empty(), "the first checkout compiles");
        std::fs::remove_file(&log).unwrap();
        let other = build(second.path());
        let units: Vec<String> = compiles(&log)
            .into_iter()
            .filter(|run| !run.contains("c-header"))
            .collect();
        assert_eq!(
            units,
            Vec::<String>::new(),
            "the second checkout compiles units ({batch_size:?})"
        );
        if !pch {
            assert_eq!(compiles(&log), Vec::<String>::new());
        }
        assert_eq!(other, original, "{batch_size:?}");
    }
}
