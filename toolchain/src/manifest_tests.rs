//! Unit tests of `manifest.rs`: parsing, defaults, target tables and rules, naming and
//! every refusal with its message (a module of its own to keep `manifest.rs` short).

use super::*;

fn parse(text: &str) -> Result<Manifest> {
    Manifest::parse(
        "sets/x/manifest.toml",
        PathBuf::from("/x"),
        text.as_bytes().to_vec(),
    )
}

const MINIMAL: &str = "name = \"t\"\nsources = [\"*.c\"]\n[stencils]\nfunctions = \"op_*\"\n";

#[test]
fn defaults() {
    let m = parse(MINIMAL).unwrap();
    assert_eq!(m.hole_prefix, "_JIT_");
    assert_eq!(m.target_suffix, "_TARGET");
    assert_eq!(m.naming, Naming::Functions("op_*".into()));
    assert!(m.is_stencil_symbol("op_add"));
    assert!(!m.is_stencil_symbol("helper"));
}

#[test]
fn unknown_top_level_key_names_file_and_key() {
    let err = parse(&format!("optimise = true\n{MINIMAL}")).unwrap_err();
    assert!(err.0.contains("sets/x/manifest.toml"), "{err}");
    assert!(err.0.contains("optimise"), "{err}");
}

#[test]
fn unknown_target_key_names_file_and_key() {
    let err = parse(&format!("{MINIMAL}[target.some-target]\nflags = []\n")).unwrap_err();
    assert!(
        err.0.contains("sets/x/manifest.toml") && err.0.contains("flags"),
        "{err}"
    );
}

#[test]
fn a_target_rule_applies_to_every_target_whose_facts_match() {
    use crate::target::test_target;
    let rule = "[[target_rule]]\nwhen = { arch = \"x86_64\", format = \"elf\" }\n\
                cflags = [\"-DRULE\"]\n";
    let m = parse(&format!("{MINIMAL}{rule}")).unwrap();
    let elf = test_target(Arch::X86_64, ObjectFormat::Elf);
    assert_eq!(m.flags_for(&elf).unwrap().cflags, ["-DRULE"]);
    for (arch, format) in [
        (Arch::X86_64, ObjectFormat::Coff),
        (Arch::Aarch64, ObjectFormat::Elf),
    ] {
        assert_eq!(m.flags_for(&test_target(arch, format)), None);
    }
    // A target's own table wins over a rule.
    let own = format!(
        "{MINIMAL}[target.{}]\ncflags = [\"-DOWN\"]\n{rule}",
        elf.triple
    );
    let m = parse(&own).unwrap();
    assert_eq!(m.flags_for(&elf).unwrap().cflags, ["-DOWN"]);
    // An empty condition, an unknown value, an unknown key: named with the rule.
    for (bad, needle) in [
        ("when = {}\n", "[[target_rule]] 1: key `when` is empty"),
        (
            "when = { arch = \"x86\" }\n",
            "[[target_rule]] 1: key `when.arch`: unknown value `x86` (expected one of \
             x86_64, aarch64, riscv64)",
        ),
        ("when = { os = \"linux\" }\n", "os"),
        (
            "when = { arch = \"x86_64\" }\ncflag = [\"-DX\"]\n",
            "unknown field `cflag`, expected one of `cflags`, `remove_cflags`, \
             `code_model`, `reloc_model` (a [[target_rule]] takes `when` and the keys of a \
             [target.<triple>] table)",
        ),
        ("cflags = [\"-DX\"]\n", "missing field `when`"),
    ] {
        let err = parse(&format!("{MINIMAL}[[target_rule]]\n{bad}")).unwrap_err();
        assert!(
            err.0.starts_with("sets/x/manifest.toml: ") && err.0.contains(needle),
            "{err}"
        );
    }
}

#[test]
fn naming_needs_exactly_one_rule() {
    let both = MINIMAL.replace(
        "[stencils]\n",
        "[stencils]\ntranslation_unit_entry = \"_JIT_ENTRY\"\n",
    );
    let err = parse(&both).unwrap_err();
    assert!(err.0.contains("exactly one"), "{err}");
}

#[test]
fn limits_and_allow_empty() {
    let m = parse(MINIMAL).unwrap();
    assert_eq!(m.limits, Limits::default());
    assert!(!m.allow_empty);
    let m = parse(&format!(
        "allow_empty = true\n{MINIMAL}[limits]\nir_instructions = 5\n"
    ))
    .unwrap();
    assert!(m.allow_empty);
    assert_eq!(m.limits.ir_instructions, 5);
    assert_eq!(m.limits.data_bytes, Limits::default().data_bytes);
    let err = parse(&format!("{MINIMAL}[limits]\ntime = 5\n")).unwrap_err();
    assert!(err.0.contains("time"), "{err}");
}

#[test]
fn missing_sources_and_empty_globs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.c"), "").unwrap();
    let at = |text: &str| {
        Manifest::parse("m.toml", dir.path().to_path_buf(), text.as_bytes().to_vec()).unwrap()
    };
    let m = at("name = \"t\"\nsources = [\"a.c\", \"missing.c\", \"none/*.c\"]\n[stencils]\nfunctions = \"op_*\"\n");
    let err = m.translation_units().unwrap_err().0;
    assert!(err.contains("`missing.c` does not exist"), "{err}");
    assert!(
        err.contains("`none/*.c` matches no file") && err.contains("allow_empty"),
        "{err}"
    );
    let m = at("name = \"t\"\nallow_empty = true\nsources = [\"a.c\", \"none/*.c\"]\n[stencils]\nfunctions = \"op_*\"\n");
    assert_eq!(m.translation_units().unwrap(), [PathBuf::from("a.c")]);
    let m = at("name = \"t\"\nallow_empty = true\nsources = [\"missing.c\"]\n[stencils]\nfunctions = \"op_*\"\n");
    assert!(m
        .translation_units()
        .unwrap_err()
        .0
        .contains("does not exist"));
}

#[test]
fn precompiled_header_is_a_relative_path() {
    assert_eq!(parse(MINIMAL).unwrap().precompiled_header, None);
    let m = parse(&format!(
        "precompiled_header = \"include/big.h\"\n{MINIMAL}"
    ))
    .unwrap();
    assert_eq!(m.precompiled_header.as_deref(), Some("include/big.h"));
    for bad in ["", "/abs/big.h"] {
        let err = parse(&format!("precompiled_header = \"{bad}\"\n{MINIMAL}")).unwrap_err();
        assert!(err.0.contains("precompiled_header"), "{err}");
    }
}

#[test]
fn one_function_per_unit_sets_select_the_shim_by_unit() {
    let m = parse("name = \"t\"\nsources = [\"*.c\"]\n[stencils]\ntranslation_unit_entry = \"_JIT_ENTRY\"\nshim = \"shim\"\nparameters = 3\n").unwrap();
    assert_eq!(m.parameters, 3);
    assert!(m.is_shim("_JIT_ENTRY", "shim.c"));
    assert!(!m.is_shim("_JIT_ENTRY", "ops/op_add.c"), "not every unit");
    assert!(!m.is_stencil_symbol("shim"));
    assert_eq!(m.stencil_name("_JIT_ENTRY", "ops/op_add.c"), "op_add");
    assert_eq!(m.stencil_name("helper", "ops/op_add.c"), "helper");
    let m = parse(MINIMAL).unwrap();
    assert_eq!(m.parameters, 2);
    assert_eq!(m.package, DEFAULT_PACKAGE);
    let m = parse(&format!("package = \"my-stencils_2\"\n{MINIMAL}")).unwrap();
    assert_eq!(m.package, "my-stencils_2");
    for bad in ["My-Stencils", "2x", "a b", ""] {
        let err = parse(&format!("package = \"{bad}\"\n{MINIMAL}")).unwrap_err();
        assert!(err.0.contains("key `package`"), "{err}");
    }
    let err = parse(&format!("{MINIMAL}parameters = 0\n")).unwrap_err();
    assert!(err.0.contains("stencils.parameters"), "{err}");
}

#[test]
fn layout_is_the_kits_or_the_compilers() {
    assert_eq!(parse(MINIMAL).unwrap().layout, Layout::Kit);
    for (value, layout) in [("kit", Layout::Kit), ("compiler", Layout::Compiler)] {
        let m = parse(&format!("{MINIMAL}layout = \"{value}\"\n")).unwrap();
        assert_eq!(m.layout, layout);
    }
    let err = parse(&format!("{MINIMAL}layout = \"clang\"\n")).unwrap_err();
    assert!(
        err.0.contains("stencils.layout")
            && err.0.contains("\"clang\"")
            && err.0.contains("\"compiler\""),
        "{err:?}"
    );
}

#[test]
fn batch_size_needs_units_of_one_function_and_a_sane_size() {
    let entry =
        "name = \"t\"\nsources = [\"*.c\"]\n[stencils]\ntranslation_unit_entry = \"_JIT_ENTRY\"\n";
    assert_eq!(parse(entry).unwrap().batch_size, None);
    assert_eq!(
        parse(&format!("{entry}batch_size = 64\n"))
            .unwrap()
            .batch_size,
        Some(64)
    );
    for bad in ["0", "5000"] {
        let err = parse(&format!("{entry}batch_size = {bad}\n")).unwrap_err();
        assert!(
            err.0.contains("stencils.batch_size") && err.0.contains(bad),
            "{err}"
        );
    }
    let err = parse(&format!("{MINIMAL}batch_size = 8\n")).unwrap_err();
    assert!(
        err.0.contains("stencils.batch_size") && err.0.contains("[[family]]"),
        "{err}"
    );
    // With `functions` naming, a set's family members are what a batch holds.
    let family = "[[family]]\nname = \"f\"\nsource = \"f.c\"\nstencil = \"op_{elem}\"\n\
                  list = [\"a\"]\nlist_define = \"OP\"\n";
    let m = parse(&format!("{MINIMAL}batch_size = 8\n{family}")).unwrap();
    assert_eq!(m.batch_size, Some(8));
}

#[test]
fn defines_without_dash_d() {
    let err = parse(&format!("defines = [\"-DX\"]\n{MINIMAL}")).unwrap_err();
    assert!(err.0.contains("defines") && err.0.contains("-DX"), "{err}");
}
