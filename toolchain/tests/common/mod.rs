//! Shared by the integration tests: the workspace, test sets and build options.
#![allow(dead_code)]

use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver::{BuildOptions, Options};
use std::path::{Path, PathBuf};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every target file of the workspace (`targets/`), in name order.
pub fn target_files() -> Vec<cpjit_toolchain::target::Target> {
    cpjit_toolchain::target::Target::load_all(&workspace().join("targets"))
        .unwrap_or_else(|e| panic!("the workspace's target files: {e}"))
}

/// A target to build for: the first target file (tests that only need some target take it
/// from `targets/`, the one place triples are written).
pub fn first_target() -> String {
    target_files()
        .into_iter()
        .next()
        .expect("a target file")
        .triple
        .clone()
}

/// Test set `name` (in `tests/sets/`).
pub fn set(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sets")
        .join(name)
}

/// `build-stencils` of `templates` for `only` (all targets when empty) into `out`.
pub fn options(templates: PathBuf, only: &[&str], out: &Path, cache: Cache) -> BuildOptions {
    BuildOptions {
        common: Options {
            templates,
            targets_dir: workspace().join("targets"),
            only: only.iter().map(|s| s.to_string()).collect(),
            jobs: 2,
            cache,
        },
        out: out.to_path_buf(),
        model_dir: Some(workspace().join("model")),
        check: false,
        json: None,
        force: false,
    }
}

/// The triple of the target file with architecture `arch` and object format `format` (the
/// first in name order), so tests name what they need ("AArch64 Mach-O") instead of a
/// triple. Panics naming the pair if no target file has it.
pub fn target(arch: cpjit_model::Arch, format: cpjit_model::ObjectFormat) -> String {
    target_files()
        .into_iter()
        .find(|t| t.arch == arch && t.format == format)
        .unwrap_or_else(|| panic!("no target file for {} {}", arch.name(), format.name()))
        .triple
        .clone()
}

/// Every (architecture, format) pair of the target files: one target per object reader
/// and instruction set.
pub fn all_targets() -> Vec<String> {
    target_files()
        .into_iter()
        .map(|t| t.triple.clone())
        .collect()
}

/// Every target compiled on its own: the target files without `same_code_as` (a target
/// with it is compiled as its twin, and its errors name the twin).
pub fn compiled_targets() -> Vec<String> {
    target_files()
        .into_iter()
        .filter(|t| t.same_code_as.is_none())
        .map(|t| t.triple.clone())
        .collect()
}

/// Architecture and object format of `triple`, read from its target file once per test
/// process: the readers' robustness tests ask for every truncation of every fixture, and
/// parsing the TOML file each time was most of their run time (20 of 24 s).
pub fn arch_and_format(triple: &str) -> (cpjit_model::Arch, cpjit_model::ObjectFormat) {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock};
    type Facts = BTreeMap<String, (cpjit_model::Arch, cpjit_model::ObjectFormat)>;
    static READ: OnceLock<Mutex<Facts>> = OnceLock::new();
    let mut read = READ
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *read.entry(triple.to_string()).or_insert_with(|| {
        let t = cpjit_toolchain::target::Target::load(
            &workspace().join("targets").join(format!("{triple}.toml")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (t.arch, t.format)
    })
}

/// The triples that have committed object fixtures (`tests/golden/obj/<triple>/`), sorted;
/// each must have a target file.
pub fn fixture_triples() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/obj");
    let mut triples: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    triples.sort();
    assert!(!triples.is_empty(), "no fixtures in {}", dir.display());
    triples
}

/// Removes the `;` after `TAIL_CALL(_JIT_CONTINUE)` in `unit` (a scale-set op): a compile
/// error; returns its line (1-based), which the error must name.
pub fn break_continuation(unit: &Path) -> usize {
    let text = std::fs::read_to_string(unit).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("TAIL_CALL(_JIT_CONTINUE)"))
        .unwrap()
        + 1;
    std::fs::write(
        unit,
        text.replace("TAIL_CALL(_JIT_CONTINUE);", "TAIL_CALL(_JIT_CONTINUE)"),
    )
    .unwrap();
    line
}

/// How many entries of the build cache in `dir` have names starting with `prefix` (a kind:
/// `bc2-`, `pch-`, ...).
pub fn cache_entries(dir: &Path, prefix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(prefix)
        })
        .count()
}

/// Copies the directory tree `from` to `to` (created).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// Builds `set` for `only` (all targets when empty) with the JSON dump; returns it with
/// every target's inputs digest removed (compared sets differ in their manifests, e.g. in
/// `batch_size`).
pub fn build_json(set: &Path, only: &[&str], cache: Cache) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("set.json");
    let mut opts = options(set.to_path_buf(), only, &out.path().join("crates"), cache);
    opts.json = Some(json.clone());
    cpjit_toolchain::driver::build_stencils(&opts).unwrap();
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    for (_, target) in value.as_object_mut().unwrap() {
        target.as_object_mut().unwrap().remove("digest");
    }
    value
}

/// The error of building `set` for `triple` alone, without the cache (the build must fail).
pub fn build_error(set: &Path, triple: &str) -> String {
    build_uncached(set, &[triple]).expect_err("the build must fail")
}

/// Asserts that `text` (an error message) says each of `says`; a failure names the missing
/// part, `context` (e.g. the target) and the whole text.
pub fn assert_says(text: &str, says: &[&str], context: &str) {
    for said in says {
        assert!(
            text.contains(said),
            "{context}: `{said}` missing in: {text}"
        );
    }
}

/// Writes a template set into `dir`: `cpjit.h` as `cpjit header` writes it (in `include/`),
/// the `sources` (file name, text) and the manifest `manifest`.
pub fn write_set(dir: &Path, sources: &[(&str, &str)], manifest: &str) {
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/cpjit.h"), cpjit_toolchain::cli::HEADER).unwrap();
    for (name, text) in sources {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
}

/// Builds the set in `dir` for `triples` (all targets when empty), without the cache, into
/// a temporary directory; an error as its text.
pub fn build_uncached(
    dir: &Path,
    triples: &[&str],
) -> Result<cpjit_toolchain::driver::Report, String> {
    let out = tempfile::tempdir().unwrap();
    let opts = options(dir.to_path_buf(), triples, out.path(), Cache::disabled());
    cpjit_toolchain::driver::build_stencils(&opts).map_err(|e| e.0)
}

/// The stencils of the object `bytes` for `triple`, read as a set of `template` whose
/// stencils are its `op_*` functions and `cpjit_entry` (the fixtures' conventions).
#[allow(clippy::result_large_err)] // ObjectError carries its full context by value
pub fn read_fixture(
    triple: &str,
    template: &str,
    bytes: &[u8],
) -> Result<Vec<cpjit_toolchain::stencil::StencilBuf>, cpjit_toolchain::object::ObjectError> {
    let (arch, format) = arch_and_format(triple);
    let select = |f: &str| f.starts_with("op_") || f == "cpjit_entry";
    let opts = cpjit_toolchain::object::ReadOptions {
        target: triple,
        arch,
        format,
        template,
        hole_prefix: "_JIT_",
        target_suffix: "_TARGET",
        select: &select,
        limits: &cpjit_toolchain::manifest::Limits::default(),
        move_cold_tail: false,
    };
    cpjit_toolchain::object::read_stencils(bytes, &opts)
}

/// The `cpjit build-stencils` command for the first target: `set` into `out`, with the
/// build cache in `cache` (`--force`: every crate written).
pub fn cpjit_build(set: &Path, out: &Path, cache: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"));
    command
        .args(["build-stencils", "--force", "--templates"])
        .arg(set)
        .arg("--targets-dir")
        .arg(workspace().join("targets"))
        .arg("--out")
        .arg(out)
        .args(["--target", &first_target()])
        .env("CPJIT_STENCIL_CACHE", cache);
    command
}

/// The stencil constant `def::NAME`'s item text, from its `pub const` line to the `};`.
pub fn stencil_item<'a>(lib: &'a str, name: &str) -> &'a str {
    let start = lib
        .find(&format!("pub const {name}: Stencil"))
        .unwrap_or_else(|| panic!("no stencil {name}"));
    let end = start + lib[start..].find("\n    };").unwrap();
    &lib[start..end]
}

/// The stencil `name` of one target's set in a JSON dump (`--json`); `target` names it in
/// the panic when it is missing.
pub fn json_stencil(set: &serde_json::Value, target: &str, name: &str) -> serde_json::Value {
    set["stencils"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{target}: no {name}"))
        .clone()
}

/// A shared header whose inline helper `helper(sp, k)` keeps 14 values live through three
/// rounds of mixing (so callers need every register and spill), with a static table and
/// two extern functions `{prefix}fatal`/`{prefix}note` for the ops to call; `sp_type` is
/// the stack element type of the set's ops.
pub fn register_hungry_header(guard: &str, prefix: &str, helper: &str, sp_type: &str) -> String {
    let lanes = 14;
    let mut text = format!(
        "#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n\
         extern _Noreturn void {prefix}fatal(const char *where, const char *what);\n\
         extern void {prefix}note(const char *what);\n\
         static const int64_t {helper}_weights[8] = {{3, 5, 7, 11, 13, 17, 19, 23}};\n\
         static inline int64_t {helper}({sp_type} *sp, int64_t k) {{\n"
    );
    for i in 0..lanes {
        text.push_str(&format!(
            "  int64_t a{i} = (int64_t)sp[-{}] * {};\n",
            i + 1,
            2 * i + 1
        ));
    }
    text.push_str("  for (int r = 0; r < 3; r++) {\n");
    for i in 0..lanes {
        let (j, l) = ((i + 1) % lanes, (i + 5) % lanes);
        text.push_str(&format!(
            "    a{i} = a{i} * a{j} + (a{l} >> 3) + {helper}_weights[(a{j} + k) & 7];\n"
        ));
    }
    let terms: Vec<String> = (0..lanes)
        .map(|i| format!("a{i} * a{}", (i + 3) % lanes))
        .collect();
    text.push_str(&format!(
        "  }}\n  return {};\n}}\n#endif\n",
        terms.join(" ^ ")
    ));
    text
}
