//! Tidy checks on the whole tree, run by `cargo test -p xtask` (so by `cargo xtask ci`):
//!
//! - a target triple (the name of a file in `targets/`) is written only in `targets/`, the
//!   generated crates, fixtures and docs: everything else derives it from the target files;
//! - every Rust module starts with a `//!` doc saying what it is;
//! - every path the code map of `ARCHITECTURE.md` names exists;
//! - a crate whose integration tests are one binary (`tests/main.rs`, `autotests = false`)
//!   declares every file of its `tests/` as a module, so no test file is silently left out;
//! - the kit's packages, template set and generated crates never reach into a client (the
//!   reference VM, the examples), so a client's op change touches nothing of the kit.
//!
//! The hand-written target lists of the docs are checked against the target files by xtask's
//! own unit tests (`src/support/lists.rs`), which share the support report's facts.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The files git tracks or would track (untracked but not ignored), relative to the root.
fn files() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .expect("git ls-files runs");
    assert!(out.status.success(), "git ls-files failed");
    let mut files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|f| root().join(f).is_file())
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The target triples: the stems of `targets/*.toml`.
fn triples() -> Vec<String> {
    let mut triples: Vec<String> = std::fs::read_dir(root().join("targets"))
        .expect("targets/ exists")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "toml").then(|| path.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    triples.sort();
    assert!(!triples.is_empty());
    triples
}

/// Places that must hold triples: the target files, generated crates and their facade,
/// fixtures and golden files (bytes from real tools for real targets), and prose.
fn may_name_triples(file: &str) -> bool {
    file.starts_with("targets/")
        // The runners say which Rust target they run.
        || file.starts_with("qemu/")
        || file.starts_with("stencils/")
        || file.starts_with("stencils-")
        || file.starts_with("vm/stencils/")
        // A template set's per-target keys (`[target.<triple>]`) name their target.
        || (file.starts_with("templates/") && file.ends_with("/manifest.toml"))
        // The support report, generated from the target files (`cargo xtask support-report`).
        || file.starts_with("docs/support/")
        || file.contains("/tests/fixtures/")
        || file.contains("/tests/golden/")
        // Template sets of the toolchain's tests: per-target manifest keys are fixtures too.
        || file.contains("/tests/sets/")
        // Outside crates (the kit's examples of one): they cannot read the kit's targets/.
        || file.starts_with("examples/")
        || file.ends_with(".md")
}

#[test]
fn triples_are_written_only_where_they_must_be() {
    let triples = triples();
    let mut hits = Vec::new();
    for file in files() {
        if may_name_triples(&file) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root().join(&file)) else {
            continue; // binary
        };
        if is_generated(&text) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            for t in &triples {
                if contains_word(line, t) {
                    hits.push(format!("{file}:{}: {t}", n + 1));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "target triples outside targets/ (derive them from the target files instead):\n{}",
        hits.join("\n")
    );
}

/// Output of a generator, marked `@generated` on its first line (like the runtime's
/// hand-assembled test stencils): the generator is what is checked.
fn is_generated(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|l| l.contains("@generated"))
}

/// `needle` in `line`, not as part of a longer name (`a-b-c` is not in `a-b-c-d`, nor in
/// `x_a-b-c`).
fn contains_word(line: &str, needle: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    line.match_indices(needle).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + needle.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

#[test]
fn every_rust_module_has_a_doc() {
    let missing: Vec<String> = files()
        .into_iter()
        .filter(|f| f.ends_with(".rs"))
        .filter(|f| {
            let text = std::fs::read_to_string(root().join(f)).unwrap_or_default();
            // Output of a generator (which documents it) is exempt.
            let generated = text
                .lines()
                .next()
                .is_some_and(|l| l.contains("@generated"));
            !generated && !starts_with_module_doc(&text)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "Rust modules without a `//!` doc before their first item:\n{}",
        missing.join("\n")
    );
}

/// A `//!` line comes before the first line of code (blank lines, plain comments and inner
/// attributes may precede it).
fn starts_with_module_doc(text: &str) -> bool {
    for line in text.lines().map(str::trim_start) {
        if line.starts_with("//!") {
            return true;
        }
        if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return false;
        }
    }
    false
}

#[test]
fn the_code_map_names_existing_paths() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let map = text
        .split("## Code map")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Code map`");
    let map = map.split("\n## ").next().unwrap_or(map);
    let mut paths = Vec::new();
    // One heading per room, and under it one bullet per path: "- `path` — what it is".
    for line in map.lines() {
        let Some(item) = line.strip_prefix("- `") else {
            continue;
        };
        let path = item.split('`').next().unwrap_or("");
        paths.push(path.to_string());
    }
    let rooms = map.lines().filter(|l| l.starts_with("### ")).count();
    assert!(
        rooms >= 5,
        "the code map has {rooms} room headings (`### `), expected one per room"
    );
    assert!(paths.len() >= 10, "code map too short: {paths:?}");
    let missing: Vec<&String> = paths.iter().filter(|p| !exists(&root(), p)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map names paths that do not exist: {missing:?}"
    );
}

/// Does `pattern` (a path whose segments may hold one `<placeholder>`) name something under
/// `dir`?
fn exists(dir: &Path, pattern: &str) -> bool {
    let pattern = pattern.trim_end_matches('/');
    let (first, rest) = match pattern.split_once('/') {
        Some((f, r)) => (f, Some(r)),
        None => (pattern, None),
    };
    let candidates: Vec<PathBuf> = match first.split_once('<') {
        None => vec![dir.join(first)],
        Some((prefix, tail)) => {
            let suffix = tail.split_once('>').map_or("", |(_, s)| s);
            std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|p| {
                            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                            name.starts_with(prefix) && name.ends_with(suffix)
                        })
                        .collect()
                })
                .unwrap_or_default()
        }
    };
    candidates.iter().any(|c| match rest {
        None => c.exists(),
        Some(r) => c.is_dir() && exists(c, r),
    })
}

/// The `tests/*.rs` files (not `main.rs`) that `main` does not declare as `mod <stem>;`.
fn undeclared_test_files(main: &str, files: &[&str]) -> Vec<String> {
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    files
        .iter()
        .filter_map(|f| f.strip_suffix(".rs"))
        .filter(|stem| *stem != "main" && !declared.contains(stem))
        .map(|stem| format!("{stem}.rs"))
        .collect()
}

#[test]
fn every_test_file_is_a_module_of_its_crates_test_binary() {
    let files = files();
    let mut missing = Vec::new();
    for main in files.iter().filter(|f| f.ends_with("/tests/main.rs")) {
        let dir = main.strip_suffix("main.rs").unwrap();
        let text = std::fs::read_to_string(root().join(main)).unwrap();
        let tests: Vec<&str> = files
            .iter()
            .filter_map(|f| f.strip_prefix(dir))
            .filter(|f| !f.contains('/') && f.ends_with(".rs"))
            .collect();
        missing.extend(undeclared_test_files(&text, &tests).into_iter().map(|f| {
            format!(
                "{dir}{f} (add `mod {};` to {main})",
                f.trim_end_matches(".rs")
            )
        }));
    }
    assert!(
        missing.is_empty(),
        "test files that no test binary compiles:\n{}",
        missing.join("\n")
    );
}

/// The kit's own packages (their manifests), template sets and generated crates.
fn is_kit_input(file: &str) -> bool {
    const PACKAGES: [&str; 8] = [
        "runtime/",
        "isa/",
        "model/",
        "conformance/",
        "toolchain/",
        "targets-schema/",
        "fuzz-harness/",
        "xtask/",
    ];
    let manifest = file.ends_with("/Cargo.toml") && PACKAGES.iter().any(|p| file.starts_with(p));
    // A kit test that reads a client's templates breaks when the client changes an op
    // (xtask, which builds and runs the clients, may name them).
    let test = file.ends_with(".rs")
        && PACKAGES
            .iter()
            .filter(|p| **p != "xtask/")
            .any(|p| file.starts_with(&format!("{p}tests/")));
    let set =
        (file.starts_with("templates/") || file.starts_with("stencils")) && !file.ends_with(".md");
    manifest || test || set
}

/// How a kit file would name a client: its packages, its crates and its templates.
const CLIENT_NAMES: [&str; 6] = [
    "cpjit-vm",
    "cpjit_vm",
    "vm/templates",
    "vm/stencils",
    "../vm/",
    "examples/",
];

#[test]
fn the_kit_does_not_reach_into_its_clients() {
    let mut found = Vec::new();
    for file in files().iter().filter(|f| is_kit_input(f)) {
        let Ok(text) = std::fs::read_to_string(root().join(file)) else {
            continue;
        };
        found.extend(
            CLIENT_NAMES
                .iter()
                .filter(|name| text.contains(*name))
                .map(|name| format!("{file}: names `{name}`")),
        );
    }
    assert!(
        found.is_empty(),
        "the kit reaches into a client (a client uses the kit's public API, never the other \
         way round; move what is the client's into its own directory):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checks_themselves_work() {
    assert!(is_kit_input("runtime/Cargo.toml") && is_kit_input("templates/shim.c"));
    assert!(is_kit_input("stencils/facade/Cargo.toml") && is_kit_input("stencils-x/src/lib.rs"));
    assert!(!is_kit_input("vm/Cargo.toml") && !is_kit_input("templates/README.md"));
    assert!(!is_kit_input("runtime/src/lib.rs") && !is_kit_input("vm/stencils/facade/Cargo.toml"));
    assert!(is_kit_input("toolchain/tests/cached.rs") && !is_kit_input("xtask/tests/tidy.rs"));
    assert_eq!(
        undeclared_test_files("mod common;\nmod a;\n", &["a.rs", "b.rs", "main.rs"]),
        ["b.rs"]
    );
    assert!(contains_word("run \"a-b-c\" now", "a-b-c"));
    assert!(!contains_word("a-b-c-d", "a-b-c"));
    assert!(!contains_word("x_a-b-c", "a-b-c"));
    assert!(starts_with_module_doc("// SPDX\n\n//! Doc.\nfn f() {}"));
    assert!(!starts_with_module_doc("use x;\n//! late\n"));
    assert!(exists(&root(), "targets/<triple>.toml"));
    assert!(exists(&root(), "xtask/"));
    assert!(!exists(&root(), "nowhere/<x>.rs"));
}
