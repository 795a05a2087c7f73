//! The set's flags are the code's flags (issue 43): with the set's own
//! `-fno-asynchronous-unwind-tables`, each stencil's code is what `clang -c` gives for the
//! same flags, and the stencils left without frame layouts are named in one notice per
//! target; `[stencils] layout = "compiler"` keeps clang's own block layout on x86-64 too.

use crate::common;

use common::*;
use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::manifest::Manifest;
use cpjit_toolchain::object::{read_stencils, ReadOptions};
use cpjit_toolchain::scale_set::ScaleSet;
use cpjit_toolchain::target::Target;
use std::path::Path;

const SMALL: ScaleSet = ScaleSet {
    ops: 3,
    header_lines: 200,
    batch_size: None,
};

/// The stencil names of [`SMALL`].
const NAMES: [&str; 4] = ["op_0000", "op_0001", "op_0002", "shim"];

/// [`SMALL`] in `dir` with `extra` added to its `cflags` and `layout` as its
/// `[stencils] layout` (the kit's default when `None`).
fn write_set(dir: &Path, extra: &[&str], layout: Option<&str>) {
    SMALL.write(dir).unwrap();
    let path = dir.join("manifest.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let flags: String = extra.iter().map(|f| format!(", \"{f}\"")).collect();
    text = text.replace("cflags = [\"-O2\"]", &format!("cflags = [\"-O2\"{flags}]"));
    if let Some(layout) = layout {
        text.push_str(&format!("layout = \"{layout}\"\n"));
    }
    std::fs::write(&path, text).unwrap();
}

/// Builds `set` for `triples` with the `cpjit` binary: its stderr, JSON dump and each
/// target's generated `lib.rs`.
fn build(set: &Path, triples: &[&str]) -> (String, serde_json::Value, Vec<String>) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("set.json");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"));
    cmd.args(["build-stencils", "--templates"])
        .arg(set)
        .arg("--targets-dir")
        .arg(workspace().join("targets"))
        .arg("--out")
        .arg(out.path().join("crates"))
        .arg("--json")
        .arg(&json)
        .env("CPJIT_STENCIL_CACHE", out.path().join("cache"));
    for t in triples {
        cmd.args(["--target", t]);
    }
    let result = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    assert!(result.status.success(), "{stderr}");
    let json = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let libs = triples
        .iter()
        .map(|t| std::fs::read_to_string(out.path().join("crates").join(t).join("src/lib.rs")))
        .collect::<Result<_, _>>()
        .unwrap();
    (stderr, json, libs)
}

/// Each unit of `set` compiled by `clang-19 -c` with the flags the kit gives clang for
/// `triple` (plus `-ffunction-sections`, which the kit applies in-process and which moves
/// no instruction), read by the kit's object reader: `(stencil name, code hex)`.
fn direct(set: &Path, triple: &str) -> Vec<(String, String)> {
    let manifest = Manifest::load(set).unwrap();
    let target = Target::load(&workspace().join(format!("targets/{triple}.toml"))).unwrap();
    let flags = cpjit_toolchain::clang::compile_flags(&manifest, &target);
    let objects = tempfile::tempdir().unwrap();
    let select = |name: &str| name == "_JIT_ENTRY";
    let mut out = Vec::new();
    for unit in manifest.translation_units().unwrap() {
        let object = objects.path().join("unit.o");
        let status = std::process::Command::new("clang-19")
            .args(&flags)
            .args(["-ffunction-sections", "-c"])
            .arg(manifest.root.join(&unit))
            .arg("-o")
            .arg(&object)
            .status()
            .unwrap();
        assert!(status.success(), "clang-19 -c {}", unit.display());
        let bytes = std::fs::read(&object).unwrap();
        let template = unit.display().to_string();
        let options = ReadOptions {
            target: triple,
            arch: target.arch,
            format: target.format,
            template: &template,
            hole_prefix: &manifest.hole_prefix,
            target_suffix: &manifest.target_suffix,
            select: &select,
            limits: &manifest.limits,
            move_cold_tail: false,
        };
        let [stencil] = &read_stencils(&bytes, &options).unwrap()[..] else {
            panic!("{template}: not one stencil");
        };
        let name = unit.file_stem().unwrap().to_string_lossy().into_owned();
        let code: String = stencil.code.iter().map(|b| format!("{b:02x}")).collect();
        out.push((name, code));
    }
    out.sort();
    out
}

/// The built stencils of `triple` in `json`: `(name, code hex)`, by name.
fn built(json: &serde_json::Value, triple: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = json[triple]["stencils"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn without_unwind_tables_the_code_is_clangs_and_the_notice_names_every_stencil() {
    let arm = target(Arch::Aarch64, ObjectFormat::Elf);
    let x86 = target(Arch::X86_64, ObjectFormat::Elf);
    let without = tempfile::tempdir().unwrap();
    write_set(
        without.path(),
        &["-fno-asynchronous-unwind-tables"],
        Some("compiler"),
    );
    let (stderr, json, libs) = build(without.path(), &[&arm, &x86]);
    for triple in [&arm, &x86] {
        assert_eq!(
            built(&json, triple),
            direct(without.path(), triple),
            "{triple}: the stencils' code is not what clang -c gives for the set's flags"
        );
        let notice = stderr
            .lines()
            .find(|l| l.starts_with(&format!("notice: {triple}: ")))
            .unwrap_or_else(|| panic!("no notice for {triple}:\n{stderr}"));
        assert!(
            notice.contains(&format!("{} of {} stencils", NAMES.len(), NAMES.len()))
                && notice.contains(&NAMES.join(", "))
                && notice.contains("-fno-asynchronous-unwind-tables")
                && notice.contains("Nothing unwinds through them")
                && !notice.contains("_JIT_ENTRY"),
            "{notice}"
        );
    }
    // The layouts' reasons in the crates name the stencil, not the unit's entry symbol.
    for lib in &libs {
        assert!(
            lib.contains("stencil `op_0001`, code offset 0x0")
                && !lib.contains("stencil `_JIT_ENTRY`"),
            "{lib}"
        );
    }

    // With the kit's unwind tables: every layout known, no notice.
    let with = tempfile::tempdir().unwrap();
    write_set(with.path(), &[], Some("compiler"));
    let (stderr, _, libs) = build(with.path(), &[&arm, &x86]);
    assert!(!stderr.contains("no frame layout"), "{stderr}");
    assert!(libs.iter().all(|lib| !lib.contains("FrameLayout::Unknown")));
}

/// A guard whose exit is not a lone tail call in clang's output: clang's layout branches
/// over a jump to the exit (`jno` over `jmp`), the kit's pass makes the exit one
/// conditional tail call (`jo` to the hole).
const GUARD: &str = r#"#include "scale.h"

extern void _JIT_CONTINUE;
extern void _JIT_EXIT_TARGET;

JIT_CC int64_t _JIT_ENTRY(frame_t *frame, int64_t *sp, thread_t *ts) {
  int64_t a = sp[-2], b = sp[-1], r;
  if (__builtin_add_overflow(a, b, &r)) {
    sp[-2] = a;
    TAIL_CALL(_JIT_EXIT_TARGET);
  }
  sp[-2] = r;
  sp -= 1;
  TAIL_CALL(_JIT_CONTINUE);
}
"#;

#[test]
fn the_kits_layout_pass_runs_unless_the_set_keeps_the_compilers() {
    let x86 = target(Arch::X86_64, ObjectFormat::Elf);
    let kit = tempfile::tempdir().unwrap();
    write_set(kit.path(), &[], None);
    let compiler = tempfile::tempdir().unwrap();
    write_set(compiler.path(), &[], Some("compiler"));
    for set in [&kit, &compiler] {
        std::fs::write(set.path().join("ops/op_0001.c"), GUARD).unwrap();
    }
    let (_, kit_json, _) = build(kit.path(), &[&x86]);
    let (_, compiler_json, _) = build(compiler.path(), &[&x86]);
    let compilers = built(&compiler_json, &x86);
    assert_eq!(compilers, direct(compiler.path(), &x86));
    let kits = built(&kit_json, &x86);
    assert_eq!(kits[1].0, "op_0001");
    assert!(
        kits[1].1.len() < compilers[1].1.len(),
        "the kit's pass did not shorten the guard: {} against clang's {}",
        kits[1].1,
        compilers[1].1
    );
}
