//! The workspace lints inside the dev builds of a fresh target directory, instead of a
//! `cargo clippy` step of their own.
//!
//! `cargo clippy --workspace --tests` type-checks every crate of the workspace and every
//! dependency a second time (clippy's check builds share nothing with the test builds):
//! 72.4 s of CPU in wave 25's clean-clone run, of which the Cranelift peer's crates, LLVM's
//! bindings and the rest of the dependencies are most. Cargo runs a workspace crate through
//! `RUSTC_WORKSPACE_WRAPPER` when it compiles it, and `ci/lint-wrapper` compiles it with
//! clippy-driver (rustc with clippy's lints): the builds `.ci/run` and the CI steps make of
//! the workspace (xtask, the toolchain, the test binaries) then lint each crate as they
//! compile it, once. Cargo does not count the wrapper in a build's freshness, so a crate
//! built before without it would not be linted: this holds only in a target directory with
//! no dev build yet, which `.ci/run` checks before its first build ([`VAR`]); anywhere
//! else `cargo xtask ci` runs `cargo clippy` as before.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Set to `1` by `.ci/run` when it built xtask, in a target directory without a dev build,
/// with `ci/lint-wrapper`: every later dev build of the run is to use it too.
pub const VAR: &str = "CPJIT_CI_LINT_IN_BUILD";

/// The environment of the dev builds that lint as they compile.
pub struct LintInBuild {
    envs: Vec<(&'static str, OsString)>,
}

impl LintInBuild {
    /// `Some` when `.ci/run` set [`VAR`]; the crates under `unlinted` (the generated
    /// stencil crates: data without lints, which `cargo clippy` leaves out too) are
    /// compiled by rustc alone.
    pub fn from_env(root: &Path, unlinted: &[&Path]) -> Result<Option<LintInBuild>, String> {
        Self::from_value(std::env::var_os(VAR), root, unlinted)
    }

    /// [`LintInBuild::from_env`] with [`VAR`]'s `value`.
    fn from_value(
        value: Option<OsString>,
        root: &Path,
        unlinted: &[&Path],
    ) -> Result<Option<LintInBuild>, String> {
        if value.is_none_or(|v| v != "1") {
            return Ok(None);
        }
        let mut dirs = OsString::new();
        for (i, dir) in unlinted.iter().enumerate() {
            let dir = std::path::absolute(dir)
                .map_err(|e| format!("{}: cannot make it absolute: {e}", dir.display()))?;
            if dir.as_os_str().to_string_lossy().contains(':') {
                return Err(format!(
                    "{}: a directory of generated crates whose path holds `:` cannot be \
                     listed in CPJIT_UNLINTED; move the checkout",
                    dir.display()
                ));
            }
            if i > 0 {
                dirs.push(":");
            }
            dirs.push(dir);
        }
        Ok(Some(LintInBuild {
            envs: vec![
                (
                    "RUSTC_WORKSPACE_WRAPPER",
                    root.join("ci/lint-wrapper").into_os_string(),
                ),
                ("CPJIT_UNLINTED", dirs),
            ],
        }))
    }

    /// The variables a dev build needs to lint as it compiles.
    pub fn envs(&self) -> &[(&'static str, OsString)] {
        &self.envs
    }

    /// `cmd` with [`LintInBuild::envs`].
    pub fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.envs(self.envs.iter().map(|(k, v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrapper compiles a crate with clippy-driver unless its source is under one of
    /// the unlinted directories, where rustc alone compiles it.
    #[test]
    fn the_wrapper_lints_every_crate_but_the_unlinted_ones() {
        let root = crate::util::root();
        let dir = tempfile::tempdir().unwrap();
        // Stand-ins that say which ran: a `rustc` and a `clippy-driver` first on PATH.
        let rustc = dir.path().join("rustc");
        std::fs::write(&rustc, "#!/bin/sh\necho rustc \"$@\"\n").unwrap();
        let driver = dir.path().join("clippy-driver");
        std::fs::write(&driver, "#!/bin/sh\necho clippy \"$@\"\n").unwrap();
        for f in [&rustc, &driver] {
            let status = Command::new("chmod").arg("+x").arg(f).status().unwrap();
            assert!(status.success());
        }
        let generated = dir.path().join("stencils");
        let unlinted = [generated.as_path(), Path::new("/elsewhere")];
        let lint = LintInBuild::from_value(Some("1".into()), &root, &unlinted)
            .unwrap()
            .unwrap();
        let path = format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let run = |source: &Path| {
            let wrapper = &lint.envs()[0].1;
            let out = lint
                .apply(&mut Command::new(wrapper))
                .arg(&rustc)
                .args(["--crate-name", "c", "--edition=2021"])
                .arg(source)
                .env("PATH", &path)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let member = run(Path::new("runtime/src/lib.rs"));
        assert!(
            member.starts_with(&format!("clippy {} --crate-name c", rustc.display())),
            "{member}"
        );
        let data = run(&generated.join("some-target/src/lib.rs"));
        assert!(data.starts_with("rustc --crate-name c"), "{data}");
        // A directory's name that only begins like an unlinted one is linted.
        let beside = run(&dir.path().join("stencils-other/src/lib.rs"));
        assert!(beside.starts_with("clippy "), "{beside}");
    }

    #[test]
    fn without_the_variable_the_lints_stay_a_step_of_their_own() {
        let root = crate::util::root();
        assert!(LintInBuild::from_value(None, &root, &[]).unwrap().is_none());
        assert!(LintInBuild::from_value(Some("0".into()), &root, &[])
            .unwrap()
            .is_none());
        let lint = LintInBuild::from_value(Some("1".into()), &root, &[Path::new("/a:b")]);
        assert!(lint.is_err_and(|e| e.contains("holds `:`")));
    }
}
