//! Golden tests (Cranelift-filetest style): every committed object fixture under
//! `tests/golden/obj/<triple>/<name>.o` (made by `tests/golden/gen.sh` with clang-19 from
//! `tests/golden/src/*.c`) is read into stencils, and their text form (or the error) is
//! compared with `tests/golden/expected/<triple>/<name>.expected`.
//!
//! `BLESS=1 cargo test -p cpjit-toolchain --test integration objects_golden` rewrites the expectations.

use std::fs;
use std::path::{Path, PathBuf};

use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::object::{read_stencils, ReadOptions};

use crate::common;

/// The triples of the committed fixtures: one directory per target under
/// `tests/golden/obj/` (fixtures are where triples are written).
fn fixture_triples() -> Vec<String> {
    common::fixture_triples()
}

/// Architecture and object format of `triple`, from its target file.
fn arch_and_format(triple: &str) -> (Arch, ObjectFormat) {
    common::arch_and_format(triple)
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The text the expectation files hold: every stencil's `to_text()`, or the error.
fn render(triple: &str, name: &str, bytes: &[u8]) -> String {
    let (arch, format) = arch_and_format(triple);
    let select = |f: &str| f.starts_with("op_") || f == "cpjit_entry";
    let opts = ReadOptions {
        target: triple,
        arch,
        format,
        template: &format!("{name}.c"),
        hole_prefix: "_JIT_",
        target_suffix: "_TARGET",
        select: &select,
        limits: &cpjit_toolchain::manifest::Limits::default(),
        move_cold_tail: false,
    };
    match read_stencils(bytes, &opts) {
        Ok(stencils) => {
            let texts: Vec<String> = stencils.iter().map(|s| s.to_text()).collect();
            texts.join("\n")
        }
        Err(e) => format!("error: {e}\n"),
    }
}

#[test]
fn golden_objects_match_expectations() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = vec![];
    let mut checked = 0;
    for triple in &fixture_triples() {
        let obj_dir = golden_dir().join("obj").join(triple);
        let mut objects: Vec<PathBuf> = fs::read_dir(&obj_dir)
            .unwrap_or_else(|e| panic!("{}: {e}", obj_dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "o"))
            .collect();
        objects.sort();
        assert!(!objects.is_empty(), "no fixtures for {triple}");
        for object in objects {
            let name = object.file_stem().unwrap().to_str().unwrap().to_string();
            let actual = render(triple, &name, &fs::read(&object).unwrap());
            let expected_path = golden_dir()
                .join("expected")
                .join(triple)
                .join(format!("{name}.expected"));
            checked += 1;
            if bless {
                fs::create_dir_all(expected_path.parent().unwrap()).unwrap();
                fs::write(&expected_path, &actual).unwrap();
                continue;
            }
            match fs::read_to_string(&expected_path) {
                Ok(expected) if expected == actual => {}
                Ok(expected) => failures.push(format!(
                    "{}: differs\n{}",
                    expected_path.display(),
                    first_difference(&expected, &actual)
                )),
                Err(e) => failures.push(format!(
                    "{}: {e} (run with BLESS=1)",
                    expected_path.display()
                )),
            }
        }
    }
    assert!(checked >= 29, "only {checked} fixtures found");
    assert!(
        failures.is_empty(),
        "{} golden mismatches (BLESS=1 to accept):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    for i in 0..e.len().max(a.len()) {
        if e.get(i) != a.get(i) {
            return format!(
                "  line {}:\n  - {}\n  + {}",
                i + 1,
                e.get(i).unwrap_or(&"<end>"),
                a.get(i).unwrap_or(&"<end>")
            );
        }
    }
    String::new()
}
