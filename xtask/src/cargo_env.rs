//! Cargo's settings for each Rust target the matrix builds, derived from the target files'
//! `[test]` tables (`linker`, `cc`, `runner`) and passed to every cargo that xtask starts as
//! environment variables: `CARGO_TARGET_<T>_LINKER`, `CARGO_TARGET_<T>_RUNNER` (which
//! nextest reads too) and the `cc` crate's `CC_<t>` for build scripts. Nothing about a
//! target is written in `.cargo/config.toml`, so a new target, whatever its execution, is
//! one file.
//!
//! The settings belong to the Rust target, not to the stencils: several target files may
//! name one Rust target (the host-ABI rows run in the process of a native or qemu row);
//! one of them writes the settings, the others may repeat them but not contradict them.
//! A variable the user has set wins (as `cargo` would take it over the config).

use crate::targets::TargetFacts;
use std::collections::BTreeMap;
use std::path::Path;

/// The cargo settings of one Rust target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RustTarget {
    pub linker: Option<String>,
    pub cc: Option<String>,
    /// Program and arguments as written (the program relative to the kit root if it has a
    /// slash; see [`RustTarget::runner_command`]).
    pub runner: Option<Vec<String>>,
}

impl RustTarget {
    /// The runner with its program resolved against `root` (cargo's rule for a config
    /// file's runner, whose paths are relative to the directory holding `.cargo/`).
    pub fn runner_command(&self, root: &Path) -> Option<Vec<String>> {
        let mut words = self.runner.clone()?;
        if words[0].contains('/') {
            words[0] = root.join(&words[0]).to_string_lossy().into_owned();
        }
        Some(words)
    }
}

/// Each Rust target's settings, merged over the target files that name it; a key two files
/// give different values is an error naming both files and the key.
pub fn rust_targets(targets: &[TargetFacts]) -> Result<BTreeMap<String, RustTarget>, String> {
    let mut merged: BTreeMap<String, (RustTarget, BTreeMap<&str, &str>)> = BTreeMap::new();
    let mut errors = Vec::new();
    for t in targets {
        let (settings, from) = merged.entry(t.test.rust_target.clone()).or_default();
        let mut one = Setting {
            file: &t.triple,
            rust_target: &t.test.rust_target,
            from,
            errors: &mut errors,
        };
        one.merge("linker", &mut settings.linker, &t.test.linker);
        one.merge("cc", &mut settings.cc, &t.test.cc);
        one.merge("runner", &mut settings.runner, &t.test.runner);
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    Ok(merged.into_iter().map(|(k, (s, _))| (k, s)).collect())
}

/// One target file's contribution to its Rust target's settings.
struct Setting<'a, 'b> {
    /// The file's triple.
    file: &'a str,
    rust_target: &'a str,
    /// Which file gave each key first.
    from: &'b mut BTreeMap<&'a str, &'a str>,
    errors: &'b mut Vec<String>,
}

impl<'a> Setting<'a, '_> {
    fn merge<T: Clone + PartialEq + std::fmt::Debug>(
        &mut self,
        key: &'a str,
        have: &mut Option<T>,
        value: &Option<T>,
    ) {
        let Some(value) = value else { return };
        match have {
            Some(old) if old != value => self.errors.push(format!(
                "targets/{}.toml: [test] {key} = {value:?} contradicts targets/{}.toml's \
                 {old:?} for the same rust_target `{}`; the key belongs to the Rust target: \
                 give it once, or the same value in both files",
                self.file,
                self.from.get(key).copied().unwrap_or("?"),
                self.rust_target
            )),
            Some(_) => {}
            None => {
                *have = Some(value.clone());
                self.from.insert(key, self.file);
            }
        }
    }
}

/// The environment variables that give cargo (and nextest, and build scripts) `settings`
/// of `rust_target`, with runner paths resolved against `root`.
pub fn variables(
    root: &Path,
    rust_target: &str,
    settings: &RustTarget,
) -> Result<Vec<(String, String)>, String> {
    let upper = rust_target.to_uppercase().replace(['-', '.'], "_");
    let mut vars = Vec::new();
    if let Some(linker) = &settings.linker {
        vars.push((format!("CARGO_TARGET_{upper}_LINKER"), linker.clone()));
    }
    if let Some(runner) = settings.runner_command(root) {
        // Cargo splits the variable's value at whitespace: a word with a space cannot be
        // passed this way.
        if let Some(w) = runner.iter().find(|w| w.contains(char::is_whitespace)) {
            return Err(format!(
                "the runner of {rust_target} has a word with whitespace (`{w}`), which \
                 CARGO_TARGET_{upper}_RUNNER cannot carry; move the kit to a path without \
                 spaces"
            ));
        }
        vars.push((format!("CARGO_TARGET_{upper}_RUNNER"), runner.join(" ")));
    }
    if let Some(cc) = &settings.cc {
        vars.push((
            format!("CC_{}", rust_target.replace(['-', '.'], "_")),
            cc.clone(),
        ));
    }
    Ok(vars)
}

/// The variables of every Rust target of the target files under `root`, except those the
/// user has set.
pub fn all_variables(root: &Path) -> Result<Vec<(String, String)>, String> {
    let targets = crate::targets::load_all(&root.join("targets"))?;
    let mut vars = Vec::new();
    for (rust_target, settings) in rust_targets(&targets)? {
        vars.extend(variables(root, &rust_target, &settings)?);
    }
    vars.retain(|(k, _)| std::env::var_os(k).is_none());
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::{self, Execution};

    /// A target with its own Rust target is one file: a copy of the x86-64 musl target
    /// under another name, beside copies of the real files, is a native row of its own
    /// Rust target, and cargo gets its linker and C compiler, the set-up its rustup target
    /// and packages, from that file alone. (The toolchain side, its stencils and facade
    /// entry: `toolchain/tests/seventh_target.rs`.)
    #[test]
    fn a_target_with_its_own_rust_target_is_one_file() {
        let root = crate::util::root();
        let (dir, real) = targets::copy_of_the_targets();
        // The native target that brings its own linker (x86-64 musl), whatever its triple.
        let own = real
            .iter()
            .find(|t| t.test.execution == Execution::Native && t.test.linker.is_some())
            .expect("a native target with its own linker");
        let text =
            std::fs::read_to_string(root.join(format!("targets/{}.toml", own.triple))).unwrap();
        let copy = "x86_64-cpjit-linux-musl";
        std::fs::write(
            dir.path().join(format!("{copy}.toml")),
            text.replace(&own.triple, copy),
        )
        .unwrap();
        let targets = targets::load_all(dir.path()).unwrap();

        let text = std::fs::read_to_string(root.join("ci/matrix.toml")).unwrap();
        let m = crate::matrix::Matrix::new("ci/matrix.toml", &text, &targets).unwrap();
        let row = m.row(copy).expect("a row for the new target");
        assert_eq!(
            (row.execution, row.rust_target.as_str()),
            (Execution::Native, copy)
        );

        let settings = &rust_targets(&targets).unwrap()[copy];
        let vars: BTreeMap<String, String> = variables(&root, copy, settings)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(
            vars["CARGO_TARGET_X86_64_CPJIT_LINUX_MUSL_LINKER"],
            "rust-lld"
        );
        assert_eq!(vars["CC_x86_64_cpjit_linux_musl"], "clang-19");
        assert_eq!(vars.len(), 2, "native: no runner {vars:?}");

        let (rustup, packages) = crate::setup::wanted(&targets);
        assert!(rustup.contains(copy), "{rustup:?}");
        assert!(own.test.packages.iter().all(|p| packages.contains(p)));
    }

    fn facts(triple: &str, execution: Execution, rust_target: &str, extra: &str) -> TargetFacts {
        let text = format!(
            "triple = \"{triple}\"\narch = \"aarch64\"\nformat = \"elf\"\nabi = \"aapcs64\"\n\
             code_model = \"small\"\nreloc_model = \"pic\"\nnop = \"1f2003d5\"\ncode_align = 4\n\
             [test]\nexecution = \"{}\"\nrust_target = \"{rust_target}\"\n{extra}",
            execution.name()
        );
        let file = format!("targets/{triple}.toml");
        let parsed = cpjit_targets_schema::TargetFile::parse(&file, triple, text.into_bytes());
        targets::TargetFacts::of(parsed.unwrap()).unwrap()
    }

    #[test]
    fn rows_sharing_a_rust_target_share_its_settings_and_may_not_contradict_them() {
        let own = "aarch64-example-linux-gnu";
        let qemu = facts(
            own,
            Execution::Qemu,
            own,
            "linker = \"aarch64-linux-gnu-gcc\"\nrunner = [\"qemu/run-aarch64\", \"-v\"]\n",
        );
        let other = facts("aarch64-example-os", Execution::HostAbi, own, "");
        let merged = rust_targets(&[other.clone(), qemu.clone()]).unwrap();
        assert_eq!(merged.len(), 1);
        let s = &merged[own];
        assert_eq!(s.linker.as_deref(), Some("aarch64-linux-gnu-gcc"));
        assert_eq!(s.cc, None);
        let vars = variables(Path::new("/kit"), own, s).unwrap();
        assert_eq!(
            vars,
            [
                (
                    "CARGO_TARGET_AARCH64_EXAMPLE_LINUX_GNU_LINKER".to_string(),
                    "aarch64-linux-gnu-gcc".to_string()
                ),
                (
                    "CARGO_TARGET_AARCH64_EXAMPLE_LINUX_GNU_RUNNER".to_string(),
                    "/kit/qemu/run-aarch64 -v".to_string()
                ),
            ]
        );
        // A bare program name is looked up on PATH, as cargo does.
        let bare = RustTarget {
            runner: Some(vec!["qemu-aarch64".into()]),
            ..Default::default()
        };
        assert_eq!(
            bare.runner_command(Path::new("/kit")).unwrap(),
            ["qemu-aarch64"]
        );
        let spaced = variables(Path::new("/my kit"), own, s).unwrap_err();
        assert!(spaced.contains("`/my kit/qemu/run-aarch64`"), "{spaced}");

        let same = facts(
            "aarch64-other-os",
            Execution::HostAbi,
            own,
            "linker = \"aarch64-linux-gnu-gcc\"\n",
        );
        rust_targets(&[qemu.clone(), same]).unwrap();
        let contrary = facts(
            "aarch64-other-os",
            Execution::HostAbi,
            own,
            "linker = \"ld.lld\"\n",
        );
        let e = rust_targets(&[qemu, contrary]).unwrap_err();
        assert!(
            e.starts_with("targets/aarch64-other-os.toml: [test] linker = \"ld.lld\" contradicts targets/aarch64-example-linux-gnu.toml's \"aarch64-linux-gnu-gcc\""),
            "{e}"
        );
    }
}
