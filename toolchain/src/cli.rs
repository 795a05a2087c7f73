//! Command-line interface of the `cpjit` binary (what `cargo xtask build-stencils` and
//! `cargo xtask stencils` run, and what `cargo install --path toolchain` installs).
//!
//! Every relative path on the command line, and the defaults `templates/` and `stencils/`,
//! are resolved against the caller's current directory, never against the kit's: an outside
//! crate runs `cpjit build-stencils` from its own directory. Only the target files (and the
//! build cache, when the binary is not in a target directory) default to a kit checkout:
//! `--kit DIR`, else `CPJIT_KIT`, else the checkout holding the current directory
//! ([`find_kit`]), never the one this binary was compiled in, which with a target directory
//! shared by two checkouts may be the other one. `--targets-dir` needs no kit.

use crate::cache::Cache;
use crate::driver::{BuildOptions, Options};
use crate::error::{Error, Result};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

/// `cpjit.h`, the hole conventions every template includes, as this binary knows it.
pub const HEADER: &str = include_str!("../../templates/include/cpjit.h");

/// The copy-and-patch JIT kit's stencil toolchain: compiles a template set of C ops with
/// clang-19 into one generated stencil crate per target.
#[derive(Debug, Parser)]
#[command(name = "cpjit", version, args_override_self = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// A parsed command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build (or with --check, verify) the stencil crates of a template set.
    BuildStencils(BuildArgs),
    /// Inspect stencils.
    #[command(subcommand)]
    Stencils(StencilsCommand),
    /// Write cpjit.h (the hole conventions templates include) into a directory.
    Header(HeaderArgs),
}

#[derive(Debug, Subcommand)]
pub enum StencilsCommand {
    /// Disassemble stencils with their holes annotated.
    Show(ShowArgs),
}

/// Options shared by `build-stencils` and `stencils show`.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Build only this target (repeatable; default: every target file).
    #[arg(long = "target", value_name = "TRIPLE")]
    pub targets: Vec<String>,
    /// All targets (the default).
    #[arg(long)]
    pub all: bool,
    /// The template set: a directory holding manifest.toml.
    #[arg(long, value_name = "DIR", default_value = "templates")]
    pub templates: PathBuf,
    /// The target files (<triple>.toml) [default: targets/ of the kit checkout].
    #[arg(long, value_name = "DIR")]
    pub targets_dir: Option<PathBuf>,
    /// The kit checkout whose targets/ are the default target files [default: $CPJIT_KIT,
    /// else the checkout holding the current directory].
    #[arg(long, value_name = "DIR")]
    pub kit: Option<PathBuf>,
    /// Parallel jobs [default: number of cores].
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Neither read nor write the build cache.
    #[arg(long)]
    pub no_cache: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Where the crates go, one directory per target.
    #[arg(long, value_name = "DIR", default_value = "stencils")]
    pub out: PathBuf,
    /// A local cpjit-model crate: generated crates then depend on it by version and path
    /// [default: by version only, from the registry].
    #[arg(long, value_name = "DIR")]
    pub model_path: Option<PathBuf>,
    /// Regenerate in memory and fail if a committed crate differs.
    #[arg(long)]
    pub check: bool,
    /// Also write the normalized stencils of every target as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Rebuild even when a crate's inputs digest is unchanged.
    #[arg(long)]
    pub force: bool,
    /// Build nothing: print the targets whose crates a plain run would build (missing, or
    /// not generated from the current inputs with this toolchain), one per line, for a
    /// client's build script to refuse stale crates.
    #[arg(long, conflicts_with_all = ["check", "json", "force"])]
    pub list_stale: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Only stencils whose name matches this glob (e.g. 'op_ADD*').
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct HeaderArgs {
    /// The directory that receives cpjit.h (created if missing); list it in the
    /// manifest's include_dirs.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Fail instead of writing if DIR/cpjit.h differs from this toolchain's header.
    #[arg(long)]
    pub check: bool,
}

/// Set by xtask to the checkout it built this binary from ([`compiled_elsewhere`]).
pub const EXPECT_CHECKOUT_ENV: &str = "CPJIT_EXPECT_CHECKOUT";

/// The exit status of a binary [`compiled_elsewhere`] than xtask expects.
pub const OTHER_CHECKOUT_STATUS: u8 = 3;

/// Where this toolchain was compiled, if that is not the kit checkout `expected`: with a
/// target directory shared by two checkouts, cargo finds one checkout's build fresh for the
/// other (it hashes workspace members by their path relative to the workspace), so xtask's
/// build of `expected`'s toolchain may be the other checkout's code and source hash.
pub fn compiled_elsewhere(expected: &Path) -> Option<PathBuf> {
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let same = match (compiled.canonicalize(), expected.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => compiled == expected,
    };
    (!same).then(|| compiled.to_path_buf())
}

/// The environment variable naming a kit checkout (as `--kit` does).
pub const KIT_ENV: &str = "CPJIT_KIT";

/// What marks a kit checkout's root, for error messages (the rule of `xtask/src/kit.rs`).
const KIT_MARKER: &str =
    "a Cargo.toml with a [workspace] table beside toolchain/Cargo.toml of package cpjit-toolchain";

/// Whether `dir` is the root of a kit checkout ([`KIT_MARKER`]); a nested workspace (an
/// outside crate inside the checkout, e.g. `examples/bf-jit/`) is not.
pub fn is_kit(dir: &Path) -> bool {
    let table = |path: PathBuf| -> Option<toml::Table> {
        toml::from_str(&std::fs::read_to_string(path).ok()?).ok()
    };
    table(dir.join("Cargo.toml")).is_some_and(|t| t.contains_key("workspace"))
        && table(dir.join("toolchain/Cargo.toml")).is_some_and(|t| {
            t.get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                == Some("cpjit-toolchain")
        })
}

/// The kit checkout: `explicit` (`--kit` or [`KIT_ENV`], relative to `cwd`), which must be
/// a kit's root, else the nearest kit root at or above `cwd`.
pub fn find_kit(explicit: Option<&Path>, cwd: &Path) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        let dir = resolve(cwd, dir);
        return if is_kit(&dir) {
            Ok(dir)
        } else {
            Err(Error(format!(
                "--kit/{KIT_ENV} {}: not the root of a cpjit kit checkout (expected \
                 {KIT_MARKER}); name the directory that holds the kit's Cargo.toml",
                dir.display()
            )))
        };
    }
    cwd.ancestors()
        .find(|dir| is_kit(dir))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            Error(format!(
                "no cpjit kit checkout at or above the current directory {} (looked for \
                 {KIT_MARKER}), whose targets/ are the default target files; run in a \
                 checkout of the kit, or name one with `--kit DIR` or {KIT_ENV}=DIR, or the \
                 target files with `--targets-dir DIR`",
                cwd.display()
            ))
        })
}

/// `path` resolved against `cwd` (absolute paths are kept), with `.` and `..` removed
/// lexically so that paths derived from it (the generated crates' dependency path) are short.
fn resolve(cwd: &Path, path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

impl CommonArgs {
    /// The driver's options, with relative paths resolved against `cwd` and the kit found
    /// from `--kit`, `CPJIT_KIT` or `cwd`.
    pub fn options(&self, cwd: &Path) -> Result<Options> {
        self.options_with(cwd, std::env::var_os(KIT_ENV).map(PathBuf::from).as_deref())
    }

    /// [`CommonArgs::options`] with `kit_env` as the value of `CPJIT_KIT`.
    pub fn options_with(&self, cwd: &Path, kit_env: Option<&Path>) -> Result<Options> {
        let explicit = self.kit.as_deref().or(kit_env);
        let kit = find_kit(explicit, cwd);
        // A kit named that is not one is an error even where the kit is not needed.
        if explicit.is_some() {
            kit.clone()?;
        }
        let targets_dir = match &self.targets_dir {
            Some(dir) => resolve(cwd, dir),
            None => kit.clone()?.join("targets"),
        };
        let cache_root = kit.as_deref().unwrap_or(cwd);
        Ok(Options {
            templates: resolve(cwd, &self.templates),
            targets_dir,
            only: self.targets.clone(),
            jobs: self.jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                |n| n as usize,
            ),
            cache: if self.no_cache {
                Cache::disabled()
            } else {
                Cache::new(Cache::default_dir(cache_root))
            },
        })
    }
}

impl BuildArgs {
    /// The driver's options, with relative paths resolved against `cwd` (and `kit_env` as
    /// the value of `CPJIT_KIT`, see [`CommonArgs::options_with`]).
    pub fn options_with(&self, cwd: &Path, kit_env: Option<&Path>) -> Result<BuildOptions> {
        Ok(BuildOptions {
            common: self.common.options_with(cwd, kit_env)?,
            out: resolve(cwd, &self.out),
            model_dir: self.model_path.as_deref().map(|p| resolve(cwd, p)),
            check: self.check,
            json: self.json.as_deref().map(|p| resolve(cwd, p)),
            force: self.force,
        })
    }

    /// [`BuildArgs::options_with`] with `CPJIT_KIT` from the environment.
    pub fn options(&self, cwd: &Path) -> Result<BuildOptions> {
        self.options_with(cwd, std::env::var_os(KIT_ENV).map(PathBuf::from).as_deref())
    }
}

impl HeaderArgs {
    /// Writes (or checks) `<out>/cpjit.h`, `out` resolved against `cwd`; returns the
    /// summary line.
    pub fn run(&self, cwd: &Path) -> Result<String> {
        let path = resolve(cwd, &self.out).join("cpjit.h");
        let current = std::fs::read_to_string(&path).ok();
        if current.as_deref() == Some(HEADER) {
            return Ok(format!("{}: up to date", path.display()));
        }
        if self.check {
            return Err(Error(format!(
                "{}: {} this toolchain's cpjit.h; run `cpjit header --out {}`",
                path.display(),
                if current.is_some() {
                    "differs from"
                } else {
                    "missing, expected"
                },
                self.out.display()
            )));
        }
        std::fs::create_dir_all(resolve(cwd, &self.out))
            .and_then(|_| std::fs::write(&path, HEADER))
            .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))?;
        Ok(format!("{}: written", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("cpjit").chain(s.split_whitespace()))
    }

    /// This checkout (the tests' `CPJIT_KIT`, since their directories are made up).
    fn this_kit() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .into()
    }

    fn build(s: &str, cwd: &str) -> BuildOptions {
        match parse(s).unwrap().command {
            Command::BuildStencils(b) => b.options_with(Path::new(cwd), Some(&this_kit())),
            other => panic!("{other:?}"),
        }
        .unwrap()
    }

    /// A minimal kit checkout in `dir`: the marker files only.
    fn fake_kit(dir: &Path) {
        std::fs::create_dir_all(dir.join("toolchain")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::write(
            dir.join("toolchain/Cargo.toml"),
            "[package]\nname = \"cpjit-toolchain\"\n",
        )
        .unwrap();
    }

    /// Two checkouts: each command uses the target files of the checkout it runs in (or the
    /// one `--kit`/`CPJIT_KIT` names), never those of the checkout this binary was built in.
    #[test]
    fn the_kit_is_the_checkout_of_the_current_directory_or_the_one_named() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        fake_kit(&a);
        fake_kit(&b);
        // An outside crate inside a checkout (its own workspace) uses the checkout's.
        let outside_crate = a.join("examples/x");
        std::fs::create_dir_all(&outside_crate).unwrap();
        std::fs::write(outside_crate.join("Cargo.toml"), "[workspace]\n").unwrap();
        let options = |args: &str, cwd: &Path, env: Option<&Path>| {
            let Command::BuildStencils(b) = parse(args).unwrap().command else {
                panic!()
            };
            b.options_with(cwd, env)
        };
        let targets = |args: &str, cwd: &Path, env: Option<&Path>| {
            options(args, cwd, env).unwrap().common.targets_dir
        };
        assert_eq!(
            targets("build-stencils", &outside_crate, None),
            a.join("targets")
        );
        assert_eq!(targets("build-stencils", &b, None), b.join("targets"));
        assert_eq!(targets("build-stencils", &b, Some(&a)), a.join("targets"));
        assert_eq!(
            targets("build-stencils --kit ../b", &a, Some(&a)),
            b.join("targets")
        );
        assert_ne!(
            targets("build-stencils", &a, None),
            this_kit().join("targets")
        );

        // Outside any checkout: an error naming the directory, the marker and the flags.
        let outside = tmp.path().join("elsewhere");
        let err = options("build-stencils", &outside, None).unwrap_err().0;
        for needle in [
            &outside.display().to_string(),
            "no cpjit kit checkout",
            "toolchain/Cargo.toml",
            "--kit DIR",
            KIT_ENV,
            "--targets-dir",
        ] {
            assert!(err.contains(needle), "{err} lacks {needle}");
        }
        // Target files named explicitly need no kit; a kit named must be one.
        let explicit = options("build-stencils --targets-dir t", &outside, None).unwrap();
        assert_eq!(explicit.common.targets_dir, outside.join("t"));
        let err = options("build-stencils --kit examples/x", &a, None)
            .unwrap_err()
            .0;
        assert!(
            err.contains(&outside_crate.display().to_string()) && err.contains("not the root"),
            "{err}"
        );
        assert!(is_kit(&this_kit()));
    }

    #[test]
    fn relative_paths_resolve_against_the_callers_directory() {
        let b = build(
            "build-stencils --target a --target b --check -j 3 --out o --templates t --json s.json",
            "/home/me/proj",
        );
        assert_eq!(b.common.only, ["a", "b"]);
        assert!(b.check);
        assert_eq!(b.common.jobs, 3);
        assert_eq!(b.out, PathBuf::from("/home/me/proj/o"));
        assert_eq!(b.common.templates, PathBuf::from("/home/me/proj/t"));
        assert_eq!(b.json, Some(PathBuf::from("/home/me/proj/s.json")));
        assert_eq!(b.model_dir, None);
        assert_eq!(b.common.targets_dir, this_kit().join("targets"));
    }

    #[test]
    fn defaults_are_the_callers_templates_and_stencils() {
        let b = build("build-stencils --model-path ../../model", "/p/examples/x");
        assert_eq!(b.common.templates, PathBuf::from("/p/examples/x/templates"));
        assert_eq!(b.out, PathBuf::from("/p/examples/x/stencils"));
        assert_eq!(b.model_dir, Some(PathBuf::from("/p/model")));
        let abs = build("build-stencils --out /abs/o", "/p");
        assert_eq!(abs.out, PathBuf::from("/abs/o"));
    }

    #[test]
    fn later_options_override_earlier_ones() {
        // xtask passes the kit's own paths first; the user's arguments follow and win.
        let b = build(
            "build-stencils --templates /kit/templates --templates mine",
            "/u",
        );
        assert_eq!(b.common.templates, PathBuf::from("/u/mine"));
    }

    #[test]
    fn show_takes_a_name() {
        let Command::Stencils(StencilsCommand::Show(s)) =
            parse("stencils show --target t op_add").unwrap().command
        else {
            panic!()
        };
        assert_eq!(s.common.targets, ["t"]);
        assert_eq!(s.name.as_deref(), Some("op_add"));
    }

    #[test]
    fn errors_name_the_argument() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert!(msg("build-stencils --bogus").contains("--bogus"));
        assert!(msg("build-stencils -j 0").contains("0"));
        assert!(msg("stencils list").contains("list"));
        assert!(msg("build-stencils --out").contains("--out"));
        assert!(msg("stencils show --out o").contains("--out"));
    }

    #[test]
    fn a_toolchain_knows_whether_it_was_compiled_in_the_expected_checkout() {
        assert_eq!(compiled_elsewhere(&this_kit()), None);
        let other = tempfile::tempdir().unwrap();
        assert_eq!(compiled_elsewhere(other.path()), Some(this_kit()));
    }

    #[test]
    fn header_is_written_then_up_to_date_then_checked() {
        let dir = tempfile::tempdir().unwrap();
        let Command::Header(h) = parse("header --out inc").unwrap().command else {
            panic!()
        };
        let check = HeaderArgs {
            out: h.out.clone(),
            check: true,
        };
        assert!(check.run(dir.path()).unwrap_err().0.contains("missing"));
        assert!(h.run(dir.path()).unwrap().ends_with("written"));
        let written = std::fs::read_to_string(dir.path().join("inc/cpjit.h")).unwrap();
        assert_eq!(written, HEADER);
        assert!(check.run(dir.path()).unwrap().ends_with("up to date"));
        std::fs::write(dir.path().join("inc/cpjit.h"), "/* old */").unwrap();
        assert!(check.run(dir.path()).unwrap_err().0.contains("differs"));
    }
}
