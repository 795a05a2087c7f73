//! End-to-end tests of the pipeline (need clang-19; LLVM is linked in): the default set on
//! all six targets, determinism, `--check`, one-stencil-per-unit naming, and one test per
//! validation error class, using the small sets in `tests/sets/`.

use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use cpjit_toolchain::writer::Sidecar;
use std::path::{Path, PathBuf};

use crate::common;
use common::{first_target, options, set, workspace};
use cpjit_model::{Arch, ObjectFormat};

/// The triple of the target file with `arch` and `format`.
fn t(arch: Arch, format: ObjectFormat) -> String {
    common::target(arch, format)
}

fn shared_cache() -> Cache {
    Cache::new(Cache::default_dir(&workspace()))
}

/// Builds test set `name` for `target` and returns the error message.
fn build_error(name: &str, target: &str) -> String {
    common::build_error(&set(name), target)
}

/// Builds test set `name` for `target`, which must be refused with an error that says each
/// of `says` and names none of `accepted` (what the set does right).
fn assert_refused(name: &str, target: &str, says: &[&str], accepted: &[&str]) {
    let err = build_error(name, target);
    common::assert_says(&err, says, target);
    for fine in accepted {
        assert!(!err.contains(fine), "`{fine}` is accepted: {err}");
    }
}

/// Every file under `root`: (path relative to `root`, bytes), sorted.
fn read_tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn default_set_builds_for_all_targets_and_is_deterministic() {
    // Every target is built through the shared cache and must give the committed crates'
    // code: `cargo xtask build-stencils --check`, which CI runs first and on a fresh clone
    // without a cache, proves those equal to the uncached build of every target, so this
    // test need not compile the 530 stencils of a target uncached once more, nor build all
    // seven twice (it did both: 48 s of CI). That the cache is transparent (uncached = miss
    // = hit) is checked on the `family` set, which has every kind of cache entry.
    for target in [t(Arch::X86_64, ObjectFormat::Elf), first_target()] {
        let cache_dir = tempfile::tempdir().unwrap();
        let trees = [Cache::disabled(), Cache::new(cache_dir.path().into())].map(|cache| {
            let out = tempfile::tempdir().unwrap();
            let mut opts = options(set("family"), &[&target], out.path(), cache);
            opts.force = true;
            driver::build_stencils(&opts).unwrap();
            // With a cache: a miss, then a hit.
            driver::build_stencils(&opts).unwrap();
            read_tree(out.path())
        });
        assert!(!trees[0].is_empty());
        assert!(
            trees[0] == trees[1],
            "{target}: the family set differs between an uncached build and a build \
             through the cache"
        );
    }
    let b = tempfile::tempdir().unwrap();
    let json = b.path().join("stencils.json");
    let mut cached = options(workspace().join("templates"), &[], b.path(), shared_cache());
    cached.json = Some(json.clone());
    let report = driver::build_stencils(&cached).unwrap();
    // Every target file is built (the count is derived, not a list to keep up to date).
    let targets = common::target_files();
    assert_eq!(report.built.len(), targets.len(), "{:?}", report.lines);
    assert!(targets.len() >= 7);
    let tb: Vec<_> = read_tree(b.path())
        .into_iter()
        .filter(|(p, _)| p != Path::new("stencils.json"))
        .collect();
    // Cargo.toml, src/lib.rs and stencil-set.json per target, and the facade's two files.
    assert_eq!(tb.len(), 3 * targets.len() + 2);
    // The code of every crate and the facade; their Cargo.toml (and so the sidecar's digest
    // of it) name the model by a path relative to the output directory.
    let committed = workspace().join("stencils");
    let mut compared = 0;
    for (path, bytes) in tb.iter().filter(|(p, _)| p.ends_with("src/lib.rs")) {
        compared += 1;
        assert!(
            std::fs::read(committed.join(path)).ok().as_ref() == Some(bytes),
            "stencils/{} differs from a build through the cache (if the committed crates \
             are stale, `cargo xtask build-stencils --check` fails too)",
            path.display()
        );
    }
    assert_eq!(compared, targets.len() + 1);
    let ta = tb;
    let lib = String::from_utf8(
        ta.iter()
            .find(|(p, _)| {
                p.ends_with(format!("{}/src/lib.rs", t(Arch::X86_64, ObjectFormat::Elf)))
            })
            .unwrap()
            .1
            .clone(),
    )
    .unwrap();
    assert!(lib.starts_with(
        "//! Generated by `cpjit build-stencils`, do not edit.\n//! Inputs digest: sha256:"
    ));
    assert!(
        lib.contains("pub const op_test_dec_jump_nz: usize"),
        "index constants"
    );
    assert!(
        !lib.contains(workspace().to_str().unwrap()),
        "no absolute paths in generated code"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(json.as_object().unwrap().len(), targets.len());
    let sidecar = Sidecar::read(&b.path().join(t(Arch::X86_64, ObjectFormat::Elf))).unwrap();
    assert_eq!(sidecar.triple, t(Arch::X86_64, ObjectFormat::Elf));
    assert_eq!(sidecar.template_set, "default");
    assert!(lib.contains(&format!("//! Inputs digest: {}\n", sidecar.inputs_digest)));
    assert_eq!(
        sidecar.files["src/lib.rs"],
        cpjit_toolchain::writer::sha256_tag(lib.as_bytes())
    );
    assert_eq!(
        sidecar.counts.stencils,
        lib.matches(": Stencil<'static> = Stencil {").count()
    );
    assert_eq!(
        sidecar.counts.elided_jumps,
        lib.matches("falls_through: true").count()
    );
    // Continuing stencils: those that fall through plus those that keep a jump to the
    // continuation (`continue` holes; the shim's call is one, and it is not counted).
    let jumps = lib
        .split(": Stencil<'static> = Stencil {")
        .skip(1)
        .filter(|s| {
            let body = &s[..s.find("\n    };").unwrap()];
            body.contains("falls_through: false") && body.contains("HoleValue::Continue")
        })
        .count();
    assert_eq!(
        sidecar.counts.continuing,
        sidecar.counts.elided_jumps + jumps - 1
    );
    let elf = &json[&t(Arch::X86_64, ObjectFormat::Elf)];
    assert_eq!(elf["continuing"], sidecar.counts.continuing);
    assert_eq!(elf["falls_through"], sidecar.counts.elided_jumps);
    assert_eq!(
        json[&t(Arch::Aarch64, ObjectFormat::MachO)]["shim"],
        "cpjit_entry"
    );
}

#[test]
fn check_detects_a_stale_crate_and_up_to_date_crates_are_skipped() {
    let out = tempfile::tempdir().unwrap();
    let target = &t(Arch::X86_64, ObjectFormat::Elf);
    let opts = options(
        workspace().join("templates"),
        &[target],
        out.path(),
        shared_cache(),
    );
    driver::build_stencils(&opts).unwrap();
    let mut check = opts.clone();
    check.check = true;
    driver::build_stencils(&check).expect("a fresh crate passes --check");
    // A no-op rebuild skips the target: its digest matches.
    let again = driver::build_stencils(&opts).unwrap();
    assert!(
        again.built.is_empty() && again.lines[0].contains("up to date"),
        "{:?}",
        again.lines
    );

    let lib = out.path().join(target).join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let marker = "    pub const op_test_add: Stencil<'static> = Stencil {";
    let at = text.find(marker).unwrap();
    // The first byte of the stencil's code (a byte string: `code: b"\x49…`).
    let byte = at + text[at..].find("code: b\"\\x").unwrap() + "code: b\"".len();
    let changed = format!(
        "{}\\x{}{}",
        &text[..byte],
        if &text[byte + 2..byte + 4] == "ff" {
            "00"
        } else {
            "ff"
        },
        &text[byte + 4..]
    );
    std::fs::write(&lib, changed).unwrap();
    let err = driver::build_stencils(&check).unwrap_err().0;
    assert!(
        err.contains(target) && err.contains("stale") && err.contains("stencil `op_test_add`"),
        "{err}"
    );
    assert!(err.contains("first difference at line"), "{err}");
}

#[test]
fn one_stencil_per_translation_unit_is_named_after_the_file() {
    let out = tempfile::tempdir().unwrap();
    let opts = options(
        set("per_unit"),
        &[&t(Arch::Aarch64, ObjectFormat::Elf)],
        out.path(),
        Cache::disabled(),
    );
    driver::build_stencils(&opts).unwrap();
    let lib = std::fs::read_to_string(
        out.path()
            .join(t(Arch::Aarch64, ObjectFormat::Elf))
            .join("src/lib.rs"),
    )
    .unwrap();
    assert!(
        lib.contains("pub const drop: usize = 0;\n    pub const push7: usize = 1;"),
        "{lib}"
    );
    assert!(lib.contains("shim: None,"));
}

#[test]
fn missing_musttail_names_the_stencil() {
    let target = t(Arch::X86_64, ObjectFormat::Elf);
    let stencil = format!("{target}: op.c: stencil `op_plain_call`");
    let says = [&stencil[..], "without musttail", "_JIT_CONTINUE"];
    assert_refused("no_musttail", &target, &says, &["op_fine"]);
}

#[test]
fn thread_local_is_rejected() {
    let says = ["stencil `op_tls`", "thread-local global `tls_counter`"];
    assert_refused(
        "thread_local",
        &t(Arch::Aarch64, ObjectFormat::Elf),
        &says,
        &[],
    );
}

#[test]
fn stack_protector_is_rejected() {
    let says = ["stencil `op_guarded`", "stack-protector attribute `sspreq`"];
    assert_refused(
        "stack_protector",
        &t(Arch::X86_64, ObjectFormat::Elf),
        &says,
        &[],
    );
}

#[test]
fn disallowed_symbol_is_rejected() {
    let says = ["stencil `op_reads_global`", "references `forbidden_global`"];
    let target = t(Arch::X86_64, ObjectFormat::Elf);
    assert_refused("bad_symbol", &target, &says, &["`allowed_helper`"]);
}

#[test]
fn x18_is_rejected_on_apple_and_windows_aarch64_only() {
    for target in [
        &t(Arch::Aarch64, ObjectFormat::MachO),
        &t(Arch::Aarch64, ObjectFormat::Coff),
    ] {
        let err = build_error("reserved_x18", target);
        assert!(
            err.contains(&format!(
                "{target}: op.c: stencil `op_clobbers_x18`: code offset 0x"
            )),
            "{err}"
        );
        assert!(
            err.contains("str x18, [x21") && err.contains("reserved register x18"),
            "{err}"
        );
    }
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        set("reserved_x18"),
        &[&t(Arch::Aarch64, ObjectFormat::Elf)],
        out.path(),
        Cache::disabled(),
    ))
    .expect("x18 is an ordinary register on Linux");
}

#[test]
fn duplicate_stencil_names_are_rejected() {
    let says = ["duplicate stencil `op_twice` in a.c and b.c"];
    assert_refused("duplicate", &t(Arch::X86_64, ObjectFormat::Elf), &says, &[]);
}

#[test]
fn unknown_target_and_bad_target_files_are_named() {
    let out = tempfile::tempdir().unwrap();
    let err = driver::build_stencils(&options(
        set("per_unit"),
        &["riscv64-unknown-linux-gnu"],
        out.path(),
        Cache::disabled(),
    ))
    .unwrap_err()
    .0;
    assert!(
        err.contains("unknown target `riscv64-unknown-linux-gnu`"),
        "{err}"
    );

    let targets = tempfile::tempdir().unwrap();
    let file = format!("{}.toml", common::first_target());
    let good = std::fs::read_to_string(workspace().join("targets").join(&file)).unwrap();
    let bad_path = targets.path().join(&file);
    std::fs::write(
        &bad_path,
        good.replace("code_align", "alignment = 1\ncode_align"),
    )
    .unwrap();
    let mut opts = options(set("per_unit"), &[], out.path(), Cache::disabled());
    opts.common.targets_dir = targets.path().to_path_buf();
    let err = driver::build_stencils(&opts).unwrap_err().0;
    assert!(
        err.contains(&bad_path.display().to_string()) && err.contains("alignment"),
        "{err}"
    );
}

/// Inline assembly is refused, naming the stencil and the fix, but for `cpjit.h`'s
/// opaque-value barrier `CPJIT_OPAQUE` (an empty template), which is admitted on every
/// architecture; its form made volatile or with a memory operand is refused.
#[test]
fn inline_assembly_is_rejected_naming_the_stencil() {
    for target in [
        &t(Arch::X86_64, ObjectFormat::Elf),
        &t(Arch::Aarch64, ObjectFormat::MachO),
        &t(Arch::Riscv64, ObjectFormat::Elf),
    ] {
        let says: Vec<String> = [
            "op_asm_ret",
            "op_asm_volatile_empty",
            "op_asm_memory_operand",
        ]
        .iter()
        .map(|op| format!("{target}: op.c: stencil `{op}`: inline assembly"))
        .chain([
            "fix: write the op in C".to_string(),
            "CPJIT_OPAQUE(x)".to_string(),
        ])
        .collect();
        let says: Vec<&str> = says.iter().map(String::as_str).collect();
        assert_refused("inline_asm", target, &says, &["op_opaque", "op_fine"]);
    }
}

#[test]
fn writable_statics_are_rejected_and_instance_data_is_explicit() {
    let says = [
        "stencil `op_count_hits`: writable static `hits`",
        "stencil `op_local_static`: writable static `op_local_static.last`",
        "CPJIT_INSTANCE_DATA",
    ];
    // Marked per-instance data and const tables are accepted.
    let accepted = ["op_instance", "`table`"];
    assert_refused(
        "statics",
        &t(Arch::X86_64, ObjectFormat::Elf),
        &says,
        &accepted,
    );
}

#[test]
fn calling_convention_and_signature_are_checked_against_the_abi() {
    let says = [
        "stencil `op_no_cc`: calling convention is the C calling convention but the set's ABI requires preserve_none",
        "stencil `op_three_args`: signature is `i32 (ptr, ptr, i64)` but the set's ABI requires `i64 (ptr, ptr)`",
        "stencil `entry`: calling convention is preserve_none but the set's ABI requires the C calling convention",
    ];
    assert_refused(
        "abi",
        &t(Arch::X86_64, ObjectFormat::Coff),
        &says,
        &["op_fine"],
    );
}

#[test]
fn an_op_over_the_ir_budget_is_rejected_before_code_generation() {
    let says = [
        "stencil `op_huge`: ",
        "IR instructions (helpers included) exceed the limit [limits] ir_instructions = 40",
    ];
    let target = t(Arch::Aarch64, ObjectFormat::Elf);
    assert_refused("big_op", &target, &says, &["op_small"]);
}

#[test]
fn missing_sources_and_unmatched_globs_are_errors() {
    let says = [
        "`gone.c` does not exist",
        "the glob `extra/*.c` matches no file",
        "allow_empty",
    ];
    assert_refused(
        "missing_source",
        &t(Arch::X86_64, ObjectFormat::Elf),
        &says,
        &[],
    );
}

/// A copy of test set `name` in a temporary directory, with `extra` prepended to its
/// manifest and the include directory made absolute.
fn set_copy(name: &str, extra: &str) -> tempfile::TempDir {
    set_copy_with(name, extra, "")
}

/// [`set_copy`] with `tail` appended to the manifest too (e.g. a `[limits]` table).
fn set_copy_with(name: &str, extra: &str, tail: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(set(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let manifest = dir.path().join("manifest.toml");
    let include = workspace().join("templates/include");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "../../../../templates/include",
        &include.display().to_string(),
    );
    std::fs::write(&manifest, format!("{extra}{text}{tail}")).unwrap();
    dir
}

#[test]
fn a_set_without_stencils_is_an_error_unless_allow_empty() {
    let target = t(Arch::X86_64, ObjectFormat::Elf);
    let err = build_error("empty", &target);
    assert!(
        err.contains(&format!("{target}: the set `empty` defines no stencils (no function matches `op_*` in 1 translation unit(s))"))
            && err.contains("allow_empty = true"),
        "{err}"
    );
    let allowed = set_copy("empty", "allow_empty = true\n");
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        allowed.path().to_path_buf(),
        &[&t(Arch::X86_64, ObjectFormat::Elf)],
        out.path(),
        Cache::disabled(),
    ))
    .expect("allow_empty accepts an empty set");
}

#[test]
fn a_32_mib_static_array_hits_the_named_data_limit_not_a_corrupt_object() {
    for target in [
        &t(Arch::X86_64, ObjectFormat::Elf),
        &t(Arch::Aarch64, ObjectFormat::MachO),
        &t(Arch::X86_64, ObjectFormat::Coff),
    ] {
        let err = build_error("big_data", target);
        assert!(
            err.contains("limit exceeded") && err.contains("op_histogram"),
            "{target}: {err}"
        );
        assert!(
            err.contains("33554432 B of data")
                && err.contains("[limits] data_bytes = 1048576 in manifest.toml"),
            "{target}: {err}"
        );
        assert!(!err.contains("corrupt"), "{target}: {err}");
    }
}

#[test]
fn torn_or_edited_output_is_rebuilt_by_a_plain_run_and_check_names_the_fix() {
    let out = tempfile::tempdir().unwrap();
    let target = &t(Arch::Aarch64, ObjectFormat::Elf);
    let opts = options(set("per_unit"), &[target], out.path(), shared_cache());
    // `stale_crates` names what a plain run would build, building nothing.
    assert_eq!(driver::stale_crates(&opts).unwrap(), [target.as_str()]);
    driver::build_stencils(&opts).unwrap();
    assert!(driver::stale_crates(&opts).unwrap().is_empty());
    let crate_dir = out.path().join(target);
    let lib = crate_dir.join("src/lib.rs");
    let cargo = crate_dir.join("Cargo.toml");
    let (good_lib, good_cargo) = (std::fs::read(&lib).unwrap(), std::fs::read(&cargo).unwrap());

    // A torn lib.rs (the header, with its digest, intact).
    std::fs::write(&lib, &good_lib[..good_lib.len() / 2]).unwrap();
    assert_eq!(driver::stale_crates(&opts).unwrap(), [target.as_str()]);
    let mut check = opts.clone();
    check.check = true;
    let err = driver::build_stencils(&check).unwrap_err().0;
    let fix = format!(
        "to fix: run `cargo xtask build-stencils --templates {} --out {} --target {target}`",
        set("per_unit").display(),
        out.path().display()
    );
    assert!(err.contains("stale") && err.contains(&fix), "{err}");
    let report = driver::build_stencils(&opts).unwrap();
    assert_eq!(report.built, [target.as_str()], "{:?}", report.lines);
    assert_eq!(std::fs::read(&lib).unwrap(), good_lib);
    driver::build_stencils(&check).expect("the plain run repaired the crate");

    // A hand-edited Cargo.toml, and a deleted sidecar.
    std::fs::write(&cargo, b"[package]\n").unwrap();
    assert_eq!(
        driver::build_stencils(&opts).unwrap().built,
        [target.as_str()]
    );
    assert_eq!(std::fs::read(&cargo).unwrap(), good_cargo);
    std::fs::remove_file(crate_dir.join("stencil-set.json")).unwrap();
    assert_eq!(
        driver::build_stencils(&opts).unwrap().built,
        [target.as_str()]
    );
    let again = driver::build_stencils(&opts).unwrap();
    assert!(again.built.is_empty(), "{:?}", again.lines);
    assert_eq!(
        again.lines,
        [format!(
            "{target}: up to date (2 stencils, 12 B code, 0 B data, 0 holes)"
        )]
    );
}

#[test]
fn check_advice_for_the_default_layout_is_the_plain_command() {
    let opts = options(
        workspace().join("templates"),
        &[],
        &workspace().join("stencils"),
        Cache::disabled(),
    );
    assert_eq!(
        driver::fix_command(&opts, &[&t(Arch::X86_64, ObjectFormat::Elf)]),
        format!(
            "run `cargo xtask build-stencils --target {}`",
            t(Arch::X86_64, ObjectFormat::Elf)
        )
    );
}

#[test]
fn static_helpers_called_directly_or_through_a_table_travel_with_the_stencil() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("stencils.json");
    let mut opts = options(set("static_helpers"), &[], out.path(), Cache::disabled());
    opts.json = Some(json.clone());
    driver::build_stencils(&opts).unwrap_or_else(|e| panic!("{e}"));
    let all: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    for (target, set) in all.as_object().unwrap() {
        let stencil = |name: &str| common::json_stencil(set, target, name);
        // Helpers are copied into the stencil's cold part.
        let code_holes = |s: &serde_json::Value, section: &str| {
            s["holes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|h| h["section"] == section && h["value"] == "cold")
                .count()
        };
        // The table's four entries point at helpers copied into the stencil's cold part.
        let apply = stencil("op_apply");
        assert_eq!(code_holes(&apply, "data"), 4, "{target}: {apply}");
        // Both helpers' addresses are taken in code.
        let pick = stencil("op_pick");
        assert!(code_holes(&pick, "code") >= 2, "{target}: {pick}");
    }
}

#[test]
fn zero_fill_within_a_raised_limit_builds_a_crate_proportional_to_the_object() {
    let templates = set_copy_with("big_data", "", "\n[limits]\ndata_bytes = 40000000\n");
    let out = tempfile::tempdir().unwrap();
    let target = &t(Arch::X86_64, ObjectFormat::Elf);
    driver::build_stencils(&options(
        templates.path().to_path_buf(),
        &[target],
        out.path(),
        Cache::disabled(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let crate_dir = out.path().join(target);
    let lib = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    assert!(
        lib.len() < 64 * 1024,
        "32 MiB of zero-fill is not spelled out ({} B)",
        lib.len()
    );
    assert!(
        lib.contains("        init_data: &[],\n        data_len: 33554432,\n"),
        "{lib}"
    );
    assert!(
        lib.contains("ZeroFill { name: \"op.c:") && lib.contains("size: 33554432"),
        "{lib}"
    );
    assert_eq!(
        Sidecar::read(&crate_dir).unwrap().counts.data_bytes,
        32 << 20
    );
    // The generated crate compiles, and its data has the full length.
    std::fs::create_dir_all(crate_dir.join("tests")).unwrap();
    std::fs::write(
        crate_dir.join("tests/len.rs"),
        format!(
            "#[test]\nfn len() {{ let set = &cpjit_stencils_{}::SET; assert_eq!(set.stencils[0].data_len, 32 << 20); assert_eq!(set.zero_fill[0].size, 32 << 20); assert!(set.stencils[0].init_data.is_empty()); }}\n",
            target.replace('-', "_")
        ),
    )
    .unwrap();
    let status = std::process::Command::new(env!("CARGO"))
        .args(["test", "--offline", "--quiet", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", out.path().join("target"))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the generated crate builds and its data is 32 MiB"
    );
}

/// Zero-fill is described once per set, however many stencils hold it: three ops of one unit
/// share a 512 KiB array, and on every target the crate has one table entry that the three
/// stencils reference (per-instance semantics: each instance still gets 512 KiB of zeros).
#[test]
fn zero_fill_is_described_once_per_set_and_referenced_by_each_stencil() {
    let out = tempfile::tempdir().unwrap();
    driver::build_stencils(&options(
        set("shared_zero_fill"),
        &[],
        out.path(),
        shared_cache(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    for target in common::all_targets() {
        let crate_dir = out.path().join(&target);
        let lib = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
        assert!(lib.len() < 64 * 1024, "{target}: {} B", lib.len());
        let entries: Vec<&str> = lib.lines().filter(|l| l.contains("ZeroFill {")).collect();
        assert_eq!(entries.len(), 1, "{target}: {entries:?}");
        assert!(
            entries[0].contains("name: \"op.c:") && entries[0].contains("size: 524288"),
            "{target}: {}",
            entries[0]
        );
        let uses = lib
            .lines()
            .filter(|l| l.contains("zero_fill: &[ZeroFillUse { section: 0, offset: 0x0 }],"))
            .count();
        assert_eq!(
            uses, 3,
            "{target}: every op references the one entry\n{lib}"
        );
        assert!(!lib.contains("zero_extended"), "{target}");
        assert_eq!(
            Sidecar::read(&crate_dir).unwrap().counts.data_bytes,
            3 * 524288,
            "{target}: data per instance, counted per stencil"
        );
    }
}
