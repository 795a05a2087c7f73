//! Adding a target is adding one file: a throwaway seventh target (x86-64 FreeBSD, ELF,
//! executed with the host ABI) placed beside copies of the real target files is built from
//! the kit's three-argument template set (small: the default set's 315 stencils would cost a
//! full uncached build of one more target and prove nothing more) and listed by the
//! generated facade, with nothing else touched. So is a target with its own Rust target: a
//! copy of the kit's native target that brings its own linker (x86-64 musl) under another
//! name. (The matrix side is `xtask`'s `a_seventh_target_file_is_a_matrix_row` and
//! `a_target_with_its_own_rust_target_is_one_file` tests.) A target whose code objects are
//! another's (`same_code_as`, the musl targets) is compiled once with its twin, and its
//! crate is what compiling it on its own gives; a set giving the two different flags is
//! refused.

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
    built_and_listed(targets.path(), TRIPLE);
}

#[test]
fn a_target_with_its_own_rust_target_is_built_and_listed_by_the_facade() {
    let targets = tempfile::tempdir().unwrap();
    let mut own = None;
    for entry in std::fs::read_dir(workspace().join("targets")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, targets.path().join(path.file_name().unwrap())).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let t = text.parse::<toml::Table>().unwrap();
        let test = &t["test"];
        if test["execution"].as_str() == Some("native") && test.get("linker").is_some() {
            own = Some((t["triple"].as_str().unwrap().to_string(), text));
        }
    }
    let (triple, text) = own.expect("a native target with its own linker");
    let copy = "x86_64-cpjit-linux-musl";
    std::fs::write(
        targets.path().join(format!("{copy}.toml")),
        text.replace(&triple, copy),
    )
    .unwrap();
    built_and_listed(targets.path(), copy);
}

/// Builds the kit's three-argument set for `only` with the target files of `targets`
/// (with the user's build cache) into a temporary directory, returned with the report.
fn build_threearg(targets: &Path, only: &[&str]) -> (driver::Report, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let report = driver::build_stencils(&BuildOptions {
        common: Options {
            templates: workspace().join("templates/threearg"),
            targets_dir: targets.to_path_buf(),
            only: only.iter().map(|s| s.to_string()).collect(),
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
    (report, out)
}

/// Builds only `triple` of the target files in `targets` from the three-argument set and
/// checks its crate and that the facade lists it alone.
fn built_and_listed(targets: &Path, triple: &str) {
    let (report, out) = build_threearg(targets, &[triple]);
    assert_eq!(report.built, [triple]);

    let lib = std::fs::read_to_string(out.path().join(triple).join("src/lib.rs")).unwrap();
    assert!(lib.contains(&format!("target: \"{triple}\"")));
    assert!(lib.contains("format: ObjectFormat::Elf"));
    assert!(lib.contains("abi: Abi::SysV64"));

    let facade = out.path().join("facade");
    let cargo = std::fs::read_to_string(facade.join("Cargo.toml")).unwrap();
    assert!(cargo.contains(&format!(
        "cpjit-stencils-threearg-{triple} = {{ path = \"../{triple}\" }}"
    )));
    let facade_lib = std::fs::read_to_string(facade.join("src/lib.rs")).unwrap();
    assert!(facade_lib.contains(&format!("triple: \"{triple}\"")));
    let krate = triple.replace('-', "_");
    assert!(facade_lib.contains(&format!("&cpjit_stencils_threearg_{krate}::SET,")));
    // Only the target built: the other target files have no crate in `out` for the facade
    // to depend on.
    assert_eq!(facade_lib.matches("    Target { triple: ").count(), 1);
    assert_eq!(cargo.matches(" = { path = \"../").count(), 1, "{cargo}");
}

/// The kit's target files with `same_code_as` (twin, target): both crates from one
/// compilation, and the target's crate equal (but for its inputs digest) to the one its
/// own compilation gives, for the three-argument set (x86-64 ELF's medium code model).
#[test]
fn a_target_with_the_code_of_another_is_compiled_once_and_gets_its_own_crate() {
    let targets = Target::load_all(&workspace().join("targets")).unwrap();
    let twins: Vec<(&str, &str)> = targets
        .iter()
        .filter_map(|t| Some((t.same_code_as.as_deref()?, t.triple.as_str())))
        .collect();
    let x86 = targets
        .iter()
        .find(|t| t.same_code_as.is_some() && t.arch == cpjit_model::Arch::X86_64)
        .expect("an x86-64 target with same_code_as");
    let (twin, triple) = (x86.same_code_as.clone().unwrap(), x86.triple.clone());
    assert!(twins.contains(&(twin.as_str(), triple.as_str())));
    let (report, shared) = build_threearg(&workspace().join("targets"), &[&twin, &triple]);
    assert_eq!(report.built, [twin.clone(), triple.clone()]);
    assert_eq!(report.compiled, [twin.as_str()]);
    assert!(
        report
            .lines
            .iter()
            .any(|l| l.starts_with(&format!("{triple}: "))
                && l.contains(&format!("compiled as {twin} (same_code_as)"))),
        "{:?}",
        report.lines
    );
    // The same target file without the key: compiled for its own triple.
    let alone = tempfile::tempdir().unwrap();
    let text = String::from_utf8(x86.bytes.clone()).unwrap();
    let line = format!("same_code_as = \"{twin}\"\n");
    assert!(text.contains(&line), "{text}");
    std::fs::write(
        alone.path().join(format!("{triple}.toml")),
        text.replace(&line, ""),
    )
    .unwrap();
    let (report, own) = build_threearg(alone.path(), &[&triple]);
    assert_eq!(report.compiled, [triple.as_str()]);
    let without_digest = |out: &Path| {
        std::fs::read_to_string(out.join(&triple).join("src/lib.rs"))
            .unwrap()
            .lines()
            .filter(|l| !l.contains("digest"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (a, b) = (without_digest(shared.path()), without_digest(own.path()));
    assert!(a.contains("HoleKind::X86Imm64"), "{a}");
    assert_eq!(a, b);
}

/// A set that gives a target and its twin different flags would compile different code for
/// them: refused before anything is compiled, naming the manifest, both triples and the fix.
#[test]
fn a_set_giving_twins_different_flags_is_refused() {
    let targets = Target::load_all(&workspace().join("targets")).unwrap();
    let t = targets
        .iter()
        .find(|t| t.same_code_as.is_some())
        .expect("a target with same_code_as");
    let twin = t.same_code_as.clone().unwrap();
    let set = tempfile::tempdir().unwrap();
    let from = workspace().join("templates/threearg");
    copy_dir(&from, set.path());
    let manifest = std::fs::read_to_string(from.join("manifest.toml")).unwrap();
    std::fs::write(
        set.path().join("manifest.toml"),
        format!(
            "{manifest}\n[target.{}]\ncflags = [\"-DONLY_HERE\"]\n",
            t.triple
        ),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = driver::build_stencils(&BuildOptions {
        common: Options {
            templates: set.path().to_path_buf(),
            targets_dir: workspace().join("targets"),
            only: vec![t.triple.clone()],
            jobs: 1,
            cache: Cache::disabled(),
        },
        out: out.path().to_path_buf(),
        model_dir: Some(workspace().join("model")),
        check: false,
        json: None,
        force: false,
    })
    .unwrap_err();
    for needle in [
        "manifest.toml: ",
        &format!("`{}` and `{twin}` get different flags", t.triple),
        &format!("same_code_as = \"{twin}\""),
        "remove the key",
    ] {
        assert!(err.0.contains(needle), "{err} lacks {needle}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}
