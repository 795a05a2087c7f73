//! The target files, `targets/<triple>.toml`: the one place a stencil target and its facts
//! are written. xtask reads the facts it needs (architecture, ABI, reserved registers and
//! the `[test]` table that says how the matrix executes the target's stencils); the
//! toolchain reads and checks the rest. The list of targets is the list of files.

use cpjit_model::{Abi, Arch, Host};
use serde::Deserialize;
use std::path::Path;

/// How a matrix row's process meets the target's stencils.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Execution {
    /// The Rust target is the stencils' own target, run on this host.
    Native,
    /// The Rust target is the stencils' own target, run under qemu-user.
    Qemu,
    /// A Windows process under wine.
    Wine,
    /// A process of another OS with the same architecture and calling convention.
    HostAbi,
}

impl Execution {
    pub fn name(self) -> &'static str {
        match self {
            Execution::Native => "native",
            Execution::Qemu => "qemu",
            Execution::Wine => "wine",
            Execution::HostAbi => "host-abi",
        }
    }
}

/// The `[test]` table of a target file: owned by the test matrix.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFacts {
    pub execution: Execution,
    /// The Rust target whose test binaries execute the stencils.
    pub rust_target: String,
    /// A Rust target on which the runtime must at least compile (`cargo check`), when no
    /// process of this host can run the target's own OS.
    pub check_target: Option<String>,
}

/// What xtask needs of one target file (the toolchain owns and checks the other keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetFacts {
    pub triple: String,
    pub arch: Arch,
    pub abi: Abi,
    pub reserved_registers: Vec<String>,
    pub test: TestFacts,
}

#[derive(Deserialize)]
struct RawTarget {
    triple: String,
    arch: String,
    abi: String,
    #[serde(default)]
    reserved_registers: Vec<String>,
    test: Option<TestFacts>,
}

impl TargetFacts {
    /// Parses one target file; `file` names it in errors and its stem must be the triple.
    pub fn parse(file: &Path, text: &str) -> Result<TargetFacts, String> {
        let name = file.display();
        let raw: RawTarget =
            toml::from_str(text).map_err(|e| format!("{name}: {}", e.to_string().trim_end()))?;
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if raw.triple != stem {
            return Err(format!(
                "{name}: key `triple`: `{}` does not match the file name",
                raw.triple
            ));
        }
        let arch = Arch::ALL
            .into_iter()
            .find(|a| a.name() == raw.arch)
            .ok_or_else(|| format!("{name}: key `arch`: unknown architecture `{}`", raw.arch))?;
        let abi = Abi::ALL
            .into_iter()
            .find(|a| a.name() == raw.abi)
            .ok_or_else(|| format!("{name}: key `abi`: unknown ABI `{}`", raw.abi))?;
        let test = raw.test.ok_or_else(|| {
            format!("{name}: no [test] table (execution, rust_target): the matrix cannot run it")
        })?;
        let facts = TargetFacts {
            triple: raw.triple,
            arch,
            abi,
            reserved_registers: raw.reserved_registers,
            test,
        };
        facts.check_runner(&name.to_string())?;
        Ok(facts)
    }

    /// The `[test]` table's Rust target must be a process that can run these stencils
    /// (the one host-compatibility rule, [`Host::runs`]).
    fn check_runner(&self, file: &str) -> Result<(), String> {
        let rust_target = &self.test.rust_target;
        let host = Host::of_triple(rust_target).ok_or_else(|| {
            format!("{file}: [test] rust_target `{rust_target}`: not a supported architecture")
        })?;
        let reserved: Vec<&str> = self.reserved_registers.iter().map(String::as_str).collect();
        if !host.runs(self.arch, self.abi, &reserved) {
            return Err(format!(
                "{file}: [test] rust_target `{rust_target}`: a {host} process cannot run these \
                 stencils ({} {}); {}",
                self.arch.name(),
                self.abi.name(),
                Host::who_runs(self.arch, self.abi, &reserved)
            ));
        }
        let same_target = *rust_target == self.triple;
        let native_like = matches!(self.test.execution, Execution::Native | Execution::Qemu);
        if native_like != same_target {
            return Err(format!(
                "{file}: [test] execution `{}` with rust_target `{rust_target}`: native and qemu \
                 rows run the stencils' own target, the others another one",
                self.test.execution.name()
            ));
        }
        Ok(())
    }
}

/// Every target file in `dir`, sorted by triple; all errors are reported together.
pub fn load_all(dir: &Path) -> Result<Vec<TargetFacts>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot read: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|x| x == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut targets = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))
            .and_then(|text| TargetFacts::parse(&path, &text));
        match parsed {
            Ok(t) => targets.push(t),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    if targets.is_empty() {
        return Err(format!("{}: no target files (*.toml)", dir.display()));
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str, text: &str) -> Result<TargetFacts, String> {
        TargetFacts::parse(Path::new(&format!("targets/{name}.toml")), text)
    }

    const FREEBSD: &str = r#"
triple = "x86_64-unknown-freebsd"
arch = "x86_64"
format = "elf"
abi = "sysv64"
nop = "90"
[test]
execution = "host-abi"
rust_target = "x86_64-unknown-linux-musl"
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
            &FREEBSD.replace("rust_target", "runner"),
        )
        .unwrap_err();
        assert!(e.contains("runner"), "{e}");
    }
}
