//! Unit tests of the target-file schema.

use super::*;

const GOOD: &str = r#"
triple = "aarch64-example-os"
arch = "aarch64"
format = "macho"
abi = "aapcs64"
cflags = []
code_model = "small"
reloc_model = "pic"
nop = "1f2003d5"
code_align = 4
reserved_registers = ["x18"]
[test]
execution = "host-abi"
rust_target = "aarch64-alpine-linux-musl"
"#;

fn parse(text: &str) -> Result<TargetFile, String> {
    TargetFile::parse(
        "targets/aarch64-example-os.toml",
        "aarch64-example-os",
        text.as_bytes().to_vec(),
    )
}

#[test]
fn a_good_file_gives_its_facts() {
    let t = parse(GOOD).unwrap();
    assert_eq!(
        (t.arch, t.format, t.abi),
        (Arch::Aarch64, ObjectFormat::MachO, Abi::Aapcs64)
    );
    assert_eq!(t.nop, [0x1f, 0x20, 0x03, 0xd5]);
    assert_eq!(t.reserved_register_names(), ["x18", "w18"]);
    assert_eq!(t.op_calling_convention, OpCallingConvention::PreserveNone);
    assert_eq!(t.llvm_triple(), "aarch64-example-os");
    let test = t.test_facts().unwrap();
    assert_eq!(
        (test.execution, test.check_target.as_deref()),
        (Execution::HostAbi, None)
    );
    assert_eq!(t.bytes, GOOD.as_bytes());
}

#[test]
fn unknown_keys_name_file_and_key_in_the_file_and_its_test_table() {
    let err = parse(&GOOD.replace("code_align", "codealign = 4\ncode_align")).unwrap_err();
    assert!(
        err.contains("targets/aarch64-example-os.toml") && err.contains("codealign"),
        "{err}"
    );
    let err = parse(&GOOD.replace("rust_target", "rust_targets")).unwrap_err();
    assert!(err.contains("rust_targets"), "{err}");
}

#[test]
fn bad_values_name_the_key_and_what_was_expected() {
    for (from, to, key, expected) in [
        ("\"macho\"", "\"wasm\"", "`format`", "elf, macho or coff"),
        (
            "\"aarch64\"",
            "\"arm\"",
            "`arch`",
            "x86_64, aarch64 or riscv64",
        ),
        (
            "\"aapcs64\"",
            "\"eabi\"",
            "`abi`",
            "sysv64, win64, aapcs64 or lp64d",
        ),
        ("1f2003d5", "1f2003d", "`nop`", "in hex"),
        (
            "\"x18\"",
            "\"r18\"",
            "`reserved_registers`",
            "AArch64 general register",
        ),
        (
            "\"pic\"",
            "\"pie\"",
            "`reloc_model`",
            "static, pic or dynamic-no-pic",
        ),
        (
            "\"small\"",
            "\"tiny\"",
            "`code_model`",
            "small, kernel, medium or large",
        ),
        (
            "code_align = 4",
            "code_align = 6",
            "`code_align`",
            "power of two",
        ),
    ] {
        let err = parse(&GOOD.replace(from, to)).unwrap_err();
        assert!(
            err.contains(key) && err.contains(expected),
            "{from} -> {to}: {err}"
        );
    }
    let err = parse(&GOOD.replace(
        "reserved_registers",
        "op_calling_convention = \"fast\"\nreserved_registers",
    ))
    .unwrap_err();
    assert!(err.contains("op_calling_convention"), "{err}");
}

#[test]
fn a_format_or_arch_that_contradicts_the_triple_is_named_as_such() {
    for (triple, from, to, message) in [
        (
            "aarch64-apple-ios",
            "format = \"macho\"",
            "format = \"elf\"",
            "key `format`: `elf` contradicts the triple `aarch64-apple-ios`, whose \
             objects are macho; set format = \"macho\", or correct the triple",
        ),
        (
            "aarch64-pc-windows-gnu",
            "format = \"macho\"",
            "format = \"macho\"",
            "key `format`: `macho` contradicts the triple `aarch64-pc-windows-gnu`, whose \
             objects are coff",
        ),
        (
            "x86_64-apple-ios",
            "arch = \"aarch64\"",
            "arch = \"aarch64\"",
            "key `arch`: `aarch64` contradicts the triple `x86_64-apple-ios`, whose \
             architecture is x86_64",
        ),
    ] {
        let text = GOOD.replace("aarch64-example-os", triple).replace(from, to);
        let file = format!("targets/{triple}.toml");
        let err = TargetFile::parse(&file, triple, text.into_bytes()).unwrap_err();
        assert!(err.starts_with(&format!("{file}: {message}")), "{err}");
    }
    // An OS the schema does not know implies nothing (GOOD's own triple).
    parse(GOOD).unwrap();
}

#[test]
fn the_triple_must_match_the_file_name() {
    let err = TargetFile::parse("targets/x.toml", "x", GOOD.as_bytes().to_vec()).unwrap_err();
    assert!(
        err.contains("targets/x.toml") && err.contains("triple"),
        "{err}"
    );
}

#[test]
fn a_test_table_whose_process_cannot_run_the_stencils_is_an_error() {
    let t = parse(&GOOD.replace("aarch64-alpine-linux-musl", "x86_64-alpine-linux-musl")).unwrap();
    let err = t.test_facts().unwrap_err();
    assert!(err.contains("cannot run these stencils"), "{err}");
    let t = parse(&GOOD.replace("\"host-abi\"", "\"native\"")).unwrap();
    let err = t.test_facts().unwrap_err();
    assert!(err.contains("execution `native`"), "{err}");
    let t = parse(GOOD.split("[test]").next().unwrap()).unwrap();
    assert!(t.test_facts().unwrap_err().contains("no [test] table"));
}

#[test]
fn a_test_table_gives_its_rust_targets_settings_and_emulated_rows_need_a_runner() {
    let own = GOOD
        .replace("aarch64-example-os", "aarch64-alpine-linux-musl")
        .replace("format = \"macho\"", "format = \"elf\"")
        .replace("reserved_registers = [\"x18\"]", "")
        .replace("\"host-abi\"", "\"qemu\"");
    let parse_own = |text: &str| {
        let file = "targets/aarch64-alpine-linux-musl.toml";
        let t = TargetFile::parse(file, "aarch64-alpine-linux-musl", text.into())?;
        t.test_facts().cloned()
    };
    let settings = "linker = \"rust-lld\"\ncc = \"clang-19\"\n\
                    runner = [\"qemu-aarch64\", \"-cpu\", \"max\"]\n\
                    packages = [\"qemu-user\"]\n";
    let test = parse_own(&format!("{own}{settings}")).unwrap();
    assert_eq!(
        (test.linker.as_deref(), test.cc.as_deref()),
        (Some("rust-lld"), Some("clang-19"))
    );
    assert_eq!(test.runner.unwrap(), ["qemu-aarch64", "-cpu", "max"]);
    assert_eq!(test.packages, ["qemu-user"]);
    let err = parse_own(&own).unwrap_err();
    assert!(
        err.contains("execution `qemu` needs a `runner`") && err.contains("[test]"),
        "{err}"
    );
    let err = parse_own(&format!("{own}runner = []\n")).unwrap_err();
    assert!(err.contains("[test] runner: empty"), "{err}");
    // A host-ABI row leaves them to the row of its Rust target.
    let test = parse(GOOD).unwrap().test_facts().unwrap().clone();
    assert_eq!((test.linker, test.cc, test.runner), (None, None, None));
    assert!(test.packages.is_empty());
}

#[test]
fn the_kits_own_target_files_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
    let all = load_all(&dir).unwrap();
    assert!(all.len() >= 6);
    for t in &all {
        t.test_facts().unwrap();
    }
    let empty = tempdir_in_target("empty");
    let errs = load_all(&empty).unwrap_err();
    let _ = std::fs::remove_dir_all(&empty);
    assert!(errs[0].contains("no target files"), "{errs:?}");
}

#[test]
fn same_code_as_names_another_file_with_the_same_code_facts() {
    let dir = tempdir_in_target("twins");
    let elf = GOOD.replace("format = \"macho\"", "format = \"elf\"");
    let own = elf.replace("aarch64-example-os", "aarch64-alpine-linux-musl");
    let twin = |key: &str, from: &str, to: &str| {
        let text = elf.replace("aarch64-example-os", "aarch64-example-linux");
        format!("same_code_as = \"{key}\"\n{}", text.replace(from, to))
    };
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    };
    let musl = "aarch64-alpine-linux-musl";
    write(musl, &own);
    // Equal facts, another [test] table: accepted.
    write("aarch64-example-linux", &twin(musl, "host-abi", "native"));
    let all = load_all(&dir).unwrap();
    assert_eq!(all[1].same_code_as.as_deref(), Some(musl));
    // A fact that reaches the code differs: named with the file and the key.
    write(
        "aarch64-example-linux",
        &twin(musl, "code_align = 4", "code_align = 8"),
    );
    let errs = load_all(&dir).unwrap_err();
    assert!(
        errs[0].contains("aarch64-example-linux.toml: key `same_code_as`")
            && errs[0].contains("differs in `code_align`;"),
        "{errs:?}"
    );
    // No such file; a twin of a twin; the file's own triple.
    write("aarch64-example-linux", &twin("nowhere", "", ""));
    let errs = load_all(&dir).unwrap_err();
    assert!(
        errs[0].contains("no target file `nowhere.toml`"),
        "{errs:?}"
    );
    write("aarch64-example-linux", &twin(musl, "", ""));
    write(
        musl,
        &format!("same_code_as = \"aarch64-example-linux\"\n{own}"),
    );
    let errs = load_all(&dir).unwrap_err();
    assert!(
        errs.iter().any(|e| e.contains("has `same_code_as")),
        "{errs:?}"
    );
    let err = TargetFile::parse(
        "t.toml",
        musl,
        format!("same_code_as = \"{musl}\"\n{own}").into_bytes(),
    )
    .unwrap_err();
    assert!(err.contains("names the file's own triple"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh empty directory per test (no dev-dependency for two tests).
fn tempdir_in_target(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cpjit-targets-schema-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
