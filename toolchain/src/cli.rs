//! Command-line parsing for the `cpjit-toolchain` binary (what `cargo xtask build-stencils`
//! and `cargo xtask stencils` run).

use crate::cache::Cache;
use crate::driver::{BuildOptions, Options};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

pub const USAGE: &str = "\
usage: cpjit-toolchain build-stencils [--target T]... [--all] [--templates DIR] [--out DIR]
                                      [--check] [--json FILE] [-j N] [--force] [--no-cache]
       cpjit-toolchain stencils show [--target T]... [--templates DIR] [-j N] [NAME]

  --target T       build only this target (repeatable; default: all targets/*.toml)
  --all            all targets (the default)
  --templates DIR  the template set (DIR/manifest.toml; default: templates/)
  --out DIR        where the crates go, one per target (default: stencils/)
  --check          regenerate in memory and fail if a committed crate differs
  --json FILE      also write the normalized stencils of every target as JSON
  -j N             parallel jobs (default: number of cores)
  --force          rebuild even when a crate's inputs digest is unchanged
  --no-cache       neither read nor write the build cache
";

/// A parsed command.
#[derive(Debug)]
pub enum Command {
    Build(BuildOptions),
    Show(Options, Option<String>),
    Help,
}

/// Parses arguments (without the program name); `root` is the workspace root.
pub fn parse(args: &[String], root: &Path) -> Result<Command> {
    let Some((command, rest)) = args.split_first() else {
        return Err(Error(format!("missing command\n{USAGE}")));
    };
    let rest: &[String] = match command.as_str() {
        "build-stencils" => rest,
        "stencils" => match rest.split_first() {
            Some((sub, more)) if sub == "show" => more,
            _ => {
                return Err(Error(format!(
                    "`stencils` needs the subcommand `show`\n{USAGE}"
                )))
            }
        },
        "-h" | "--help" | "help" => return Ok(Command::Help),
        other => return Err(Error(format!("unknown command `{other}`\n{USAGE}"))),
    };
    let show = command == "stencils";
    let mut common = Options {
        templates: root.join("templates"),
        targets_dir: root.join("targets"),
        only: Vec::new(),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cache: Cache::new(Cache::default_dir(root)),
    };
    let (mut out, mut check, mut json, mut force, mut name) =
        (root.join("stencils"), false, None, false, None);
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Error(format!("`{flag}` needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--target" => common.only.push(value("--target")?),
            "--all" => {}
            "--templates" => common.templates = PathBuf::from(value("--templates")?),
            "-j" | "--jobs" => {
                let v = value("-j")?;
                common.jobs = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| Error(format!("`-j {v}`: expected a positive number")))?;
            }
            "--no-cache" => common.cache = Cache::disabled(),
            "--out" if !show => out = PathBuf::from(value("--out")?),
            "--check" if !show => check = true,
            "--json" if !show => json = Some(PathBuf::from(value("--json")?)),
            "--force" if !show => force = true,
            "-h" | "--help" => return Ok(Command::Help),
            s if show && !s.starts_with('-') && name.is_none() => name = Some(s.to_string()),
            other => return Err(Error(format!("unexpected argument `{other}`\n{USAGE}"))),
        }
    }
    if show {
        return Ok(Command::Show(common, name));
    }
    Ok(Command::Build(BuildOptions {
        common,
        out,
        model_dir: root.join("model"),
        check,
        json,
        force,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn build_options() {
        let Command::Build(b) = parse(
            &args("build-stencils --target a --target b --check -j 3 --out o"),
            Path::new("/r"),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(b.common.only, ["a", "b"]);
        assert!(b.check);
        assert_eq!(b.common.jobs, 3);
        assert_eq!(b.out, PathBuf::from("o"));
        assert_eq!(b.common.templates, PathBuf::from("/r/templates"));
    }

    #[test]
    fn show_takes_a_name() {
        let Command::Show(o, name) =
            parse(&args("stencils show --target t op_add"), Path::new("/r")).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.only, ["t"]);
        assert_eq!(name.as_deref(), Some("op_add"));
    }

    #[test]
    fn errors_name_the_argument() {
        assert!(parse(&args("build-stencils --bogus"), Path::new("/r"))
            .unwrap_err()
            .0
            .contains("--bogus"));
        assert!(parse(&args("build-stencils -j 0"), Path::new("/r"))
            .unwrap_err()
            .0
            .contains("-j 0"));
        assert!(parse(&args("stencils list"), Path::new("/r"))
            .unwrap_err()
            .0
            .contains("show"));
        assert!(parse(&args("build-stencils --out"), Path::new("/r"))
            .unwrap_err()
            .0
            .contains("--out"));
    }
}
