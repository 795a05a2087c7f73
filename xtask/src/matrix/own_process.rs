//! A target with its own Rust target is one file, also when its row runs: in a throwaway
//! checkout whose `targets/` lacks the x86-64 target that brings its own linker (the musl
//! one, natively run), adding that one file gives a matrix row that builds a test binary
//! for its Rust target with the file's linker and C compiler and runs it as a process of its
//! own. The row's suite is a small crate of the checkout (a build script that records the
//! Rust target it was built for, one test that checks it against the row's), so the test
//! costs seconds, not the runtime's release build. The toolchain side (its stencil crate,
//! the facade): `toolchain/tests/seventh_target.rs`.

use super::*;
use crate::targets::{self, TargetFacts};

/// The tiny suite: built for the row's Rust target, it finds that target's name (the build
/// script's `TARGET`) equal to the row's triple (`CPJIT_STENCILS`), which for a native row
/// is its Rust target.
const SUITE_FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        "[package]\nname = \"own-process\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[workspace]\n\n[profile.matrix]\ninherits = \"dev\"\n",
    ),
    (
        "build.rs",
        "fn main() {\n    let target = std::env::var(\"TARGET\").unwrap();\n    \
         println!(\"cargo:rustc-env=BUILT_FOR={target}\");\n}\n",
    ),
    ("src/lib.rs", "//! The throwaway checkout's one suite.\n"),
    (
        "tests/row.rs",
        "#[test]\nfn runs_as_a_process_of_the_rows_rust_target() {\n    \
         let row = std::env::var(\"CPJIT_STENCILS\").unwrap();\n    \
         assert_eq!(env!(\"BUILT_FOR\"), row);\n    \
         let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();\n    \
         assert_eq!(&exe[..4], b\"\\x7fELF\");\n}\n",
    ),
];

/// The checkout's `ci/matrix.toml`: every suite the target file names (as is) runs the tiny
/// crate.
fn matrix_file(suites: &[String]) -> String {
    let mut text = String::from("[build]\nprofile = \"matrix\"\n");
    for s in suites {
        text.push_str(&format!("[suites.{s}]\npackage = \"own-process\"\n"));
    }
    text.push_str("[check]\npackages = [\"own-process\"]\n");
    text.push_str(&format!("[self_test]\nsuites = [\"{}\"]\n", suites[0]));
    text
}

#[test]
fn a_new_target_file_with_its_own_rust_target_runs_as_its_own_process() {
    let root = crate::util::root();
    let real = targets::load_all(&root.join("targets")).unwrap();
    let own = real
        .iter()
        .find(|t| t.test.execution == Execution::Native && t.test.linker.is_some())
        .expect("a native target with its own linker");
    let kit = tempfile::tempdir().unwrap();
    let dir = kit.path();
    std::fs::create_dir_all(dir.join("targets")).unwrap();
    for t in &real {
        if t.triple != own.triple {
            let name = format!("{}.toml", t.triple);
            std::fs::copy(
                root.join("targets").join(&name),
                dir.join("targets").join(&name),
            )
            .unwrap();
        }
    }
    for (path, text) in SUITE_FILES {
        std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
        std::fs::write(dir.join(path), text).unwrap();
    }
    let suites = own
        .test
        .suites
        .clone()
        .unwrap_or_else(|| vec!["own".into()]);
    std::fs::create_dir_all(dir.join("ci")).unwrap();
    std::fs::write(dir.join("ci/matrix.toml"), matrix_file(&suites)).unwrap();
    // The kit's nextest profile the matrix runs (the other profiles' overrides name the
    // kit's packages, which nextest refuses in a checkout without them).
    let nextest: toml::Table = std::fs::read_to_string(root.join(".config/nextest.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let mut profile = toml::Table::new();
    profile.insert(PROFILE.into(), nextest["profile"][PROFILE].clone());
    let mut config = toml::Table::new();
    config.insert("profile".into(), profile.into());
    std::fs::create_dir_all(dir.join(".config")).unwrap();
    std::fs::write(dir.join(".config/nextest.toml"), config.to_string()).unwrap();
    // The row reports its stencil count from the target's generated crate.
    let crate_dir = dir.join("stencils").join(&own.triple);
    std::fs::create_dir_all(crate_dir.join("src")).unwrap();
    for file in ["Cargo.toml", "src/lib.rs", crate::sidecar::FILE] {
        let from = root.join("stencils").join(&own.triple).join(file);
        std::fs::copy(&from, crate_dir.join(file)).unwrap();
    }
    let opts = Options {
        targets: vec![own.triple.clone()],
        ..Default::default()
    };

    // Without the file: no row, and no cargo setting names its Rust target.
    let matrix = Matrix::load(dir).unwrap();
    assert!(matrix.row(&own.triple).is_none());
    let upper = own.test.rust_target.to_uppercase().replace('-', "_");
    let vars = crate::cargo_env::all_variables(dir).unwrap();
    assert!(!vars.iter().any(|(k, _)| k.contains(&upper)), "{vars:?}");

    // The one file added: its row builds and runs the suite for its Rust target.
    let name = format!("{}.toml", own.triple);
    std::fs::copy(
        root.join("targets").join(&name),
        dir.join("targets").join(&name),
    )
    .unwrap();
    let facts: Vec<TargetFacts> = targets::load_all(&dir.join("targets")).unwrap();
    assert_eq!(facts.len(), real.len());
    let matrix = Matrix::load(dir).unwrap();
    let report = run_matrix_in(dir, &matrix, &opts, &BTreeMap::new()).unwrap();
    assert_eq!(report.builds.len(), 1, "{:?}", report.builds);
    assert_eq!(report.builds[0].rust_target, own.test.rust_target);
    let [row] = report.rows.as_slice() else {
        panic!("one row expected: {:?}", report.rows)
    };
    assert!(
        row.passed() && row.counts.passed > 0 && row.counts.failed == 0,
        "{row:?}\n{}",
        std::fs::read_to_string(nextest::log_path(dir)).unwrap_or_default()
    );
    // Built by cargo for that Rust target, in the checkout's own target directory.
    let built = dir
        .join("target")
        .join(&own.test.rust_target)
        .join("matrix");
    assert!(built.is_dir(), "{}", built.display());
}
