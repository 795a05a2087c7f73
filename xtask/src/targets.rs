//! The target files, `targets/<triple>.toml`: the one place a stencil target and its facts
//! are written; `cpjit-targets-schema` (shared with the toolchain) parses and checks them.
//! xtask keeps the facts it needs (architecture, ABI, reserved registers and the `[test]`
//! table that says how the matrix executes the target's stencils). The list of targets is
//! the list of files.

use cpjit_model::{Abi, Arch};
use cpjit_targets_schema::TargetFile;
pub use cpjit_targets_schema::{Execution, TestFacts};
use std::path::Path;

/// What xtask needs of one target file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetFacts {
    pub triple: String,
    pub arch: Arch,
    pub abi: Abi,
    pub reserved_registers: Vec<String>,
    pub test: TestFacts,
}

impl TargetFacts {
    /// The facts of a parsed file, which must have a `[test]` table the matrix can run.
    pub(crate) fn of(file: TargetFile) -> Result<TargetFacts, String> {
        let test = file.test_facts()?.clone();
        Ok(TargetFacts {
            triple: file.triple,
            arch: file.arch,
            abi: file.abi,
            reserved_registers: file.reserved_registers,
            test,
        })
    }
}

/// Every target file in `dir`, sorted by triple; all errors are reported together.
pub fn load_all(dir: &Path) -> Result<Vec<TargetFacts>, String> {
    let files = cpjit_targets_schema::load_all(dir).map_err(|errors| errors.join("\n"))?;
    let (mut facts, mut errors) = (Vec::new(), Vec::new());
    for file in files {
        match TargetFacts::of(file) {
            Ok(f) => facts.push(f),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        // The Rust targets' settings (linker, runner, C compiler) must not contradict each
        // other across files.
        crate::cargo_env::rust_targets(&facts)?;
        Ok(facts)
    } else {
        Err(errors.join("\n"))
    }
}

/// For tests that add a target file: a temporary directory holding copies of the real
/// target files, and the real files' facts.
#[cfg(test)]
pub fn copy_of_the_targets() -> (tempfile::TempDir, Vec<TargetFacts>) {
    let root = crate::util::root();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root.join("targets")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let real = load_all(&root.join("targets")).unwrap();
    (dir, real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str, text: &str) -> Result<TargetFacts, String> {
        let file = format!("targets/{name}.toml");
        TargetFacts::of(TargetFile::parse(&file, name, text.as_bytes().to_vec())?)
    }

    const FREEBSD: &str = r#"
triple = "x86_64-unknown-freebsd"
arch = "x86_64"
format = "elf"
abi = "sysv64"
code_model = "small"
reloc_model = "pic"
nop = "90"
code_align = 1
[test]
execution = "host-abi"
rust_target = "x86_64-alpine-linux-musl"
"#;

    #[test]
    fn a_target_file_gives_its_facts() {
        let t = parse("x86_64-unknown-freebsd", FREEBSD).unwrap();
        assert_eq!((t.arch, t.abi), (Arch::X86_64, Abi::SysV64));
        assert_eq!(t.test.execution, Execution::HostAbi);
        assert_eq!(t.test.check_target, None);
    }

    #[test]
    fn a_runner_that_cannot_run_the_stencils_is_an_error() {
        let win = FREEBSD.replace("\"sysv64\"", "\"win64\"");
        let e = parse("x86_64-unknown-freebsd", &win).unwrap_err();
        assert!(
            e.contains("cannot run these stencils") && e.contains("Windows"),
            "{e}"
        );
        let native = FREEBSD.replace("\"host-abi\"", "\"native\"");
        let e = parse("x86_64-unknown-freebsd", &native).unwrap_err();
        assert!(e.contains("execution `native`"), "{e}");
        let e = parse("other", FREEBSD).unwrap_err();
        assert!(e.contains("does not match the file name"), "{e}");
        let e = parse(
            "x86_64-unknown-freebsd",
            &FREEBSD.replace("rust_target", "rust_targets"),
        )
        .unwrap_err();
        assert!(e.contains("rust_targets"), "{e}");
    }
}
