//! Adding a target is adding one file: a throwaway seventh target (x86-64 FreeBSD, ELF,
//! executed with the host ABI) placed beside copies of the real target files is built from
//! the kit's three-argument template set (small: the default set's 315 stencils would cost a
//! full uncached build of one more target and prove nothing more) and listed by the
//! generated facade, with nothing else touched.
//! (The matrix side is `xtask`'s `a_seventh_target_file_is_a_matrix_row` test.)

use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver::{self, BuildOptions, Options};
use cpjit_toolchain::target::Target;
use std::path::{Path, PathBuf};

const TRIPLE: &str = "x86_64-unknown-freebsd";

const TARGET_FILE: &str = r#"# A throwaway target for the test: x86-64 FreeBSD is ELF with the System V ABI, so a
# Linux process runs its stencils.
triple = "x86_64-unknown-freebsd"
arch = "x86_64"
format = "elf"
abi = "sysv64"
cflags = ["-fpic"]
code_model = "small"
reloc_model = "pic"
nop = "90"
code_align = 1
reserved_registers = []

[test]
execution = "host-abi"
"#;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A copy of `targets/` plus the seventh file.
fn targets_with_seventh(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(workspace().join("targets")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        n += 1;
    }
    // Run by the process of the x86-64 native row, whatever its triple is.
    let native = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .map(|text| text.parse::<toml::Table>().unwrap())
        .find(|t| {
            t["arch"].as_str() == Some("x86_64")
                && t["test"]["execution"].as_str() == Some("native")
        })
        .expect("an x86-64 native target");
    let rust_target = native["test"]["rust_target"].as_str().unwrap();
    std::fs::write(
        dir.join(format!("{TRIPLE}.toml")),
        format!("{TARGET_FILE}rust_target = \"{rust_target}\"\n"),
    )
    .unwrap();
    n + 1
}

#[test]
fn a_seventh_target_file_is_built_and_listed_by_the_facade() {
    let targets = tempfile::tempdir().unwrap();
    let files = targets_with_seventh(targets.path());
    assert_eq!(Target::load_all(targets.path()).unwrap().len(), files);

    let out = tempfile::tempdir().unwrap();
    let report = driver::build_stencils(&BuildOptions {
        common: Options {
            templates: workspace().join("templates/threearg"),
            targets_dir: targets.path().to_path_buf(),
            only: vec![TRIPLE.to_string()],
            jobs: 2,
            cache: Cache::new(Cache::default_dir(&workspace())),
        },
        out: out.path().to_path_buf(),
        model_dir: Some(workspace().join("model")),
        check: false,
        json: None,
        force: false,
    })
    .unwrap();
    assert_eq!(report.built, [TRIPLE]);

    let lib = std::fs::read_to_string(out.path().join(TRIPLE).join("src/lib.rs")).unwrap();
    assert!(lib.contains(&format!("target: \"{TRIPLE}\"")));
    assert!(lib.contains("format: ObjectFormat::Elf"));
    assert!(lib.contains("abi: Abi::SysV64"));

    let facade = out.path().join("facade");
    let cargo = std::fs::read_to_string(facade.join("Cargo.toml")).unwrap();
    assert!(cargo.contains(&format!(
        "cpjit-stencils-threearg-{TRIPLE} = {{ path = \"../{TRIPLE}\" }}"
    )));
    let facade_lib = std::fs::read_to_string(facade.join("src/lib.rs")).unwrap();
    assert!(facade_lib.contains(&format!("triple: \"{TRIPLE}\"")));
    assert!(facade_lib.contains("&cpjit_stencils_threearg_x86_64_unknown_freebsd::SET,"));
    // Only the target built: the other target files have no crate in `out` for the facade
    // to depend on.
    assert_eq!(facade_lib.matches("    Target { triple: ").count(), 1);
    assert_eq!(cargo.matches(" = { path = \"../").count(), 1, "{cargo}");
}
