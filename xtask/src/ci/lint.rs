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
//! compile it, once. The lint passes cost about a tenth of a compile: the toolchain's
//! library rebuilt alternately without and with them took 11.7 against 13.2 and 12.7 s of
//! CPU (load 20-23, wave 27), so about 11 s on the workspace's 106 s.
//!
//! Cargo hashes the wrapper into a workspace crate's artifacts: a build with it and one
//! without are two builds of every workspace crate. So every dev build of the run uses it,
//! the test runs too ([`LintInBuild::apply`]): wave 26's nextest step, without it, rebuilt
//! the whole workspace after the linted build (a fresh target directory, load 16-24: the
//! linted test build 173.9 s of CPU, the plain rebuild after it 106.4 s). The variable
//! and `--config build.rustc-workspace-wrapper` give the same artifacts (cargo 1.95); the
//! test runs take the `--config` form, which the tests (some run cargo in throwaway
//! checkouts) do not inherit. In a target directory with dev builds already, this would
//! build the workspace a second time: it holds only where `.ci/run` found none ([`VAR`]);
//! anywhere else `cargo xtask ci` runs `cargo clippy` as before.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Set to `1` by `.ci/run` when it built xtask, in a target directory without a dev build,
/// with `ci/lint-wrapper`: every later dev build of the run is to use it too.
pub const VAR: &str = "CPJIT_CI_LINT_IN_BUILD";

/// The environment of the dev builds that lint as they compile.
pub struct LintInBuild {
    envs: Vec<(&'static str, OsString)>,
    /// `build.rustc-workspace-wrapper="<ci/lint-wrapper>"`, for `--config`.
    config: String,
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
        let wrapper = root.join("ci/lint-wrapper");
        let text = wrapper.to_str().ok_or_else(|| {
            format!(
                "{}: a wrapper path that is not UTF-8 cannot be given to cargo's --config; \
                 move the checkout",
                wrapper.display()
            )
        })?;
        // A TOML string, quoted and escaped as `--config` reads it.
        let config = format!(
            "build.rustc-workspace-wrapper={}",
            toml::Value::String(text.to_string())
        );
        Ok(Some(LintInBuild {
            envs: vec![
                ("RUSTC_WORKSPACE_WRAPPER", wrapper.into_os_string()),
                ("CPJIT_UNLINTED", dirs),
            ],
            config,
        }))
    }

    /// The variables a dev build needs to lint as it compiles.
    pub fn envs(&self) -> &[(&'static str, OsString)] {
        &self.envs
    }

    /// `cmd`, a cargo command whose subcommand's arguments are given, with the wrapper as
    /// `--config` (which the processes it runs, unlike an environment variable, do not
    /// inherit) and the unlinted directories for the wrapper.
    pub fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        let unlinted = self.envs.iter().filter(|(k, _)| *k == "CPJIT_UNLINTED");
        cmd.args(["--config", &self.config])
            .envs(unlinted.map(|(k, v)| (k, v)))
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
            let out = Command::new(wrapper)
                .envs(lint.envs().iter().map(|(k, v)| (k, v)))
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

    /// The steps that run tests name the wrapper in cargo's `--config` (as a TOML string,
    /// so any path reads back), never in a variable the tests would inherit.
    #[test]
    fn test_runs_name_the_wrapper_in_cargos_config_not_the_environment() {
        let root = Path::new("/a \"quoted\" checkout");
        let lint = LintInBuild::from_value(Some("1".into()), root, &[Path::new("/gen")])
            .unwrap()
            .unwrap();
        let mut cmd = Command::new("cargo");
        lint.apply(cmd.args(["nextest", "run"]));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(args[..3], ["nextest", "run", "--config"]);
        let value: toml::Table = toml::from_str(args[3]).unwrap();
        assert_eq!(
            value["build"]["rustc-workspace-wrapper"].as_str(),
            Some("/a \"quoted\" checkout/ci/lint-wrapper")
        );
        assert_eq!(args.len(), 4);
        let envs: Vec<_> = cmd.get_envs().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(envs, ["CPJIT_UNLINTED"]);
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
