//! Command-line interface of the `cpjit` binary (what `cargo xtask build-stencils` and
//! `cargo xtask stencils` run, and what `cargo install --path toolchain` installs).
//!
//! Every relative path on the command line, and the defaults `templates/` and `stencils/`,
//! are resolved against the caller's current directory, never against the kit's: an outside
//! crate runs `cpjit build-stencils` from its own directory. Only the target files default
//! to the kit checkout this binary was built from (`--targets-dir` overrides that).

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
    /// The target files (<triple>.toml) [default: targets/ of the kit this binary was built from].
    #[arg(long, value_name = "DIR")]
    pub targets_dir: Option<PathBuf>,
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

/// The kit checkout this binary was built from (the parent of the toolchain crate).
pub fn kit_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("toolchain/ is inside the kit")
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
    /// The driver's options, with relative paths resolved against `cwd`.
    pub fn options(&self, cwd: &Path) -> Options {
        let targets_dir = match &self.targets_dir {
            Some(dir) => resolve(cwd, dir),
            None => kit_root().join("targets"),
        };
        Options {
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
                Cache::new(Cache::default_dir(kit_root()))
            },
        }
    }
}

impl BuildArgs {
    /// The driver's options, with relative paths resolved against `cwd`.
    pub fn options(&self, cwd: &Path) -> BuildOptions {
        BuildOptions {
            common: self.common.options(cwd),
            out: resolve(cwd, &self.out),
            model_dir: self.model_path.as_deref().map(|p| resolve(cwd, p)),
            check: self.check,
            json: self.json.as_deref().map(|p| resolve(cwd, p)),
            force: self.force,
        }
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

    fn build(s: &str, cwd: &str) -> BuildOptions {
        match parse(s).unwrap().command {
            Command::BuildStencils(b) => b.options(Path::new(cwd)),
            other => panic!("{other:?}"),
        }
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
        assert_eq!(b.common.targets_dir, kit_root().join("targets"));
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
