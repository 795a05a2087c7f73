//! `cargo xtask build-stencils` and `cargo xtask stencils show`: check the set-up, then run
//! the LLVM-linked `cpjit` binary (package `cpjit-toolchain`) with the same arguments.
//!
//! The toolchain runs in the caller's directory, so relative paths on the command line are
//! the caller's; the kit checkout (`--kit`, whose `targets/` and build cache the toolchain
//! uses) and its `templates/`, `stencils/` and `model/` are passed first as defaults, and
//! later (the caller's) options override them. The toolchain is built from that checkout's
//! `Cargo.toml`, so a kit that is not where the binary was compiled is acted on as a whole.
//!
//! The repository has more than one template set ([`kit_sets`]): the kit's own, `templates/`
//! and each `templates/<name>/` with a `manifest.toml` of its own, built into `stencils/`
//! and `stencils-<name>/`; and those of the clients that are workspace members
//! ([`CLIENT_SETS`]: the reference VM's `vm/templates/` into `vm/stencils/`). Without
//! `--templates` or `--out`, `build-stencils` runs the toolchain once per set, with the same
//! arguments; with either, once, as the caller says.
//!
//! The toolchain runs in the dev profile (see the workspace `Cargo.toml`): the heavy work
//! happens in clang and in LLVM's prebuilt libraries, so a release build would save little
//! per full build but cost a second LLVM-linked build next to the one `cargo test` makes.
//! For the same reason it is built with `--workspace --bin cpjit`: cargo then resolves the
//! dependencies' features for the whole workspace, as `cargo test --workspace` does, and
//! the workspace tests reuse the toolchain and every crate under it. Built with
//! `-p cpjit-toolchain`, ten of its dependencies and the toolchain itself differ in their
//! features (e.g. `memchr/default`, enabled by xtask's XML reader) and were built twice.

use crate::util::{cargo, root, run};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn build_stencils(args: &[String]) -> Result<(), String> {
    let names_a_set = args.iter().any(|a| {
        ["--templates", "--out"]
            .iter()
            .any(|o| a == o || a.starts_with(&format!("{o}=")))
    });
    if names_a_set {
        return toolchain(&["build-stencils"], args, None);
    }
    build_every_set(&prepared_toolchain()?, args)
}

/// `build-stencils` with `args` on every set of the kit ([`kit_sets`]) by the toolchain
/// `binary` ([`prepared_toolchain`]): no cargo runs here, so a cargo command can run beside.
pub fn build_every_set(binary: &Path, args: &[String]) -> Result<(), String> {
    let mut failed = Vec::new();
    for set in kit_sets(&root())? {
        // Every set is built (or checked) even when one fails, so one run reports all.
        if let Err(e) = run_toolchain(binary, &["build-stencils"], args, Some(&set)) {
            failed.push(e);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// One of the kit's template sets and where its crates go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KitSet {
    pub templates: PathBuf,
    pub out: PathBuf,
}

/// The template sets of clients that live beside the kit in this workspace (their directory,
/// their crates' directory), built and checked with the kit's own so that the workspace
/// builds. Clients outside the workspace (examples/bf-jit) build their own.
pub const CLIENT_SETS: &[(&str, &str)] = &[("vm/templates", "vm/stencils")];

/// The repository's template sets: `templates/` → `stencils/`, then each `templates/<name>/`
/// that holds a `manifest.toml` → `stencils-<name>/`, sorted by name, then [`CLIENT_SETS`].
/// A hidden directory (`.name`) is never a set: tests copy sets beside themselves there.
pub fn kit_sets(root: &Path) -> Result<Vec<KitSet>, String> {
    let templates = root.join("templates");
    let mut sets = vec![KitSet {
        templates: templates.clone(),
        out: root.join("stencils"),
    }];
    let entries = std::fs::read_dir(&templates)
        .map_err(|e| format!("{}: cannot read: {e}", templates.display()))?;
    let mut nested: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", templates.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && entry.path().join("manifest.toml").is_file() {
            nested.push(name);
        }
    }
    nested.sort();
    sets.extend(nested.into_iter().map(|name| KitSet {
        templates: templates.join(&name),
        out: root.join(format!("stencils-{name}")),
    }));
    sets.extend(CLIENT_SETS.iter().map(|(templates, out)| KitSet {
        templates: root.join(templates),
        out: root.join(out),
    }));
    Ok(sets)
}

pub fn stencils(args: &[String]) -> Result<(), String> {
    match args.split_first() {
        Some((sub, rest)) if sub == "show" => toolchain(&["stencils", "show"], rest, None),
        // Let the toolchain report the unknown subcommand with its usage text.
        _ => toolchain(&["stencils"], args, None),
    }
}

/// The line printed before the toolchain binary is first built (its build links LLVM).
const FIRST_BUILD_NOTICE: &str =
    "xtask: building the LLVM-linked toolchain (first time takes minutes; cargo shows progress)...";

/// The notice to print when the toolchain binary in `target_dir` does not exist yet.
fn first_build_notice(target_dir: &Path) -> Option<&'static str> {
    let binary = target_dir
        .join("debug")
        .join(format!("cpjit{}", std::env::consts::EXE_SUFFIX));
    (!binary.is_file()).then_some(FIRST_BUILD_NOTICE)
}

/// Runs the toolchain's `command` on `set` (the default set without one) with `args`.
fn toolchain(command: &[&str], args: &[String], set: Option<&KitSet>) -> Result<(), String> {
    run_toolchain(&prepared_toolchain()?, command, args, set)
}

/// Checks the set-up and builds the toolchain binary (cargo), returning its path.
pub fn prepared_toolchain() -> Result<PathBuf, String> {
    prepared_toolchain_with(&[])
}

/// [`prepared_toolchain`] with `envs` set for cargo (`cargo xtask ci`: the lints in the
/// build, `ci.rs`).
pub fn prepared_toolchain_with(envs: &[(&str, OsString)]) -> Result<PathBuf, String> {
    crate::setup::ensure()?;
    let root = root();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let notice = first_build_notice(&target_dir);
    if let Some(line) = notice {
        eprintln!("{line}");
    }
    toolchain_of(&root, notice.is_none(), envs)
}

/// Runs the toolchain `binary`'s `command` on `set` (the default set without one) with
/// `args`.
fn run_toolchain(
    binary: &Path,
    command: &[&str],
    args: &[String],
    set: Option<&KitSet>,
) -> Result<(), String> {
    let root = root();
    let caller =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let default_set = KitSet {
        templates: root.join("templates"),
        out: root.join("stencils"),
    };
    run(&mut toolchain_command(
        binary,
        &root,
        set.unwrap_or(&default_set),
        &caller,
        command,
        args,
    ))
}

/// `cargo build` of the toolchain binary with the workspace's features (see the module
/// doc); quiet unless it first builds.
fn build_command(root: &Path, quiet: bool) -> Command {
    let mut cmd = cargo();
    cmd.arg("build");
    if quiet {
        cmd.arg("--quiet");
    }
    cmd.arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--workspace", "--bin", "cpjit"])
        .arg("--message-format=json-render-diagnostics");
    cmd
}

/// Builds the toolchain binary and returns its path, as cargo reports it.
fn build_toolchain(root: &Path, quiet: bool, envs: &[(&str, OsString)]) -> Result<PathBuf, String> {
    let mut cmd = build_command(root, quiet);
    cmd.envs(envs.iter().map(|(k, v)| (k, v)));
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", out.status));
    }
    toolchain_executable(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| format!("{cmd:?} reported no `cpjit` executable"))
}

/// As `toolchain/src/cli.rs`: the variable naming the checkout a `cpjit` must have been
/// compiled in, and its exit status when it was not.
const EXPECT_CHECKOUT_ENV: &str = "CPJIT_EXPECT_CHECKOUT";
const OTHER_CHECKOUT_STATUS: i32 = 3;

/// Builds `root`'s toolchain binary and returns its path. A binary compiled in another
/// checkout (cargo reuses builds across checkouts that share a target directory, see
/// `kit.rs`) is rebuilt from `root` once, after touching every workspace member's crate root
/// (its library dependencies were built there too).
fn toolchain_of(root: &Path, quiet: bool, envs: &[(&str, OsString)]) -> Result<PathBuf, String> {
    let binary = build_toolchain(root, quiet, envs)?;
    if !compiled_elsewhere(&binary, root)? {
        return Ok(binary);
    }
    eprintln!(
        "xtask: {} was compiled in another checkout (a shared target directory); rebuilding it from {}",
        binary.display(),
        root.display()
    );
    crate::kit::touch_members(root)?;
    let binary = build_toolchain(root, false, envs)?;
    if compiled_elsewhere(&binary, root)? {
        return Err(format!(
            "cargo still builds a cpjit compiled in another checkout for {}; run `cargo clean \
             -p cpjit-toolchain` there and retry",
            root.display()
        ));
    }
    Ok(binary)
}

/// Whether `binary` says it was compiled elsewhere than in `root` (it checks before parsing
/// its arguments, so `--version` is a probe that does nothing else).
fn compiled_elsewhere(binary: &Path, root: &Path) -> Result<bool, String> {
    let out = Command::new(binary)
        .arg("--version")
        .env(EXPECT_CHECKOUT_ENV, root)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    Ok(out.status.code() == Some(OTHER_CHECKOUT_STATUS))
}

/// The path of the `cpjit` executable in cargo's JSON messages (one object per line).
fn toolchain_executable(messages: &str) -> Option<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Message {
        reason: String,
        target: Option<Target>,
        executable: Option<PathBuf>,
    }
    #[derive(serde::Deserialize)]
    struct Target {
        name: String,
    }
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Message>(line).ok())
        .filter(|m| m.reason == "compiler-artifact")
        .filter(|m| m.target.as_ref().is_some_and(|t| t.name == "cpjit"))
        .find_map(|m| m.executable)
}

/// The toolchain `binary` run in the caller's directory, with the kit's paths first and
/// the caller's arguments after them (so that theirs win). `--kit` is passed, not left to
/// the toolchain's own search from the caller's directory, which may be outside the kit.
fn toolchain_command(
    binary: &Path,
    root: &Path,
    set: &KitSet,
    caller: &Path,
    command: &[&str],
    args: &[String],
) -> Command {
    let mut cmd = Command::new(binary);
    cmd.env(EXPECT_CHECKOUT_ENV, root)
        .current_dir(caller)
        .args(command)
        .arg("--kit")
        .arg(root)
        .arg("--templates")
        .arg(&set.templates);
    if command == ["build-stencils"] {
        cmd.arg("--out")
            .arg(&set.out)
            .arg("--model-path")
            .arg(root.join("model"));
    }
    cmd.args(args);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_in_the_callers_directory_with_the_kits_paths_as_overridable_defaults() {
        let args = ["--templates".to_string(), "mine".to_string()];
        let kit = KitSet {
            templates: "/kit/templates".into(),
            out: "/kit/stencils".into(),
        };
        let bin = Path::new("/kit/target/debug/cpjit");
        let cmd = toolchain_command(
            bin,
            Path::new("/kit"),
            &kit,
            Path::new("/home/me/proj"),
            &["build-stencils"],
            &args,
        );
        assert_eq!(cmd.get_program(), bin);
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/home/me/proj")));
        let argv: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "build-stencils",
                "--kit",
                "/kit",
                "--templates",
                "/kit/templates",
                "--out",
                "/kit/stencils",
                "--model-path",
                "/kit/model",
                "--templates",
                "mine"
            ]
        );
        let show = toolchain_command(
            bin,
            Path::new("/kit"),
            &kit,
            Path::new("/x"),
            &["stencils", "show"],
            &[],
        );
        let argv: Vec<_> = show
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "stencils",
                "show",
                "--kit",
                "/kit",
                "--templates",
                "/kit/templates"
            ]
        );
    }

    /// The toolchain is built with the whole workspace's features, so that
    /// `cargo test --workspace` reuses it, and quietly once it exists.
    #[test]
    fn the_toolchain_builds_with_the_workspaces_features() {
        let argv = |quiet| -> Vec<String> {
            build_command(Path::new("/kit"), quiet)
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let quiet = argv(true);
        assert!(quiet.contains(&"--quiet".to_string()));
        assert!(quiet
            .windows(3)
            .any(|w| w == ["--workspace", "--bin", "cpjit"]));
        assert!(
            !quiet
                .iter()
                .any(|a| a == "-p" || a.starts_with("--package")),
            "{quiet:?}"
        );
        assert!(
            !argv(false).contains(&"--quiet".to_string()),
            "the first build shows cargo's progress"
        );
    }

    /// The probe of a toolchain binary's checkout, against a stand-in that answers as
    /// `cpjit` does (exit status 3 unless CPJIT_EXPECT_CHECKOUT is its own checkout).
    #[test]
    fn a_toolchain_compiled_in_another_checkout_is_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        let stand_in = dir.path().join("cpjit");
        std::fs::write(
            &stand_in,
            format!(
                "#!/bin/sh\n[ \"${EXPECT_CHECKOUT_ENV}\" = \"{}\" ] || exit {OTHER_CHECKOUT_STATUS}\n\
                 echo cpjit\n",
                own.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A just-written executable may be busy while another test thread forks: retry.
        let probe = |root: &Path| {
            for _ in 0..50 {
                match compiled_elsewhere(&stand_in, root) {
                    Err(e) if e.contains("busy") => {
                        std::thread::sleep(std::time::Duration::from_millis(20))
                    }
                    other => return other.unwrap(),
                }
            }
            panic!("{} stays busy", stand_in.display())
        };
        assert!(!probe(&own));
        assert!(probe(&dir.path().join("other")));
        let cmd = toolchain_command(
            &stand_in,
            &own,
            &KitSet {
                templates: own.join("templates"),
                out: own.join("stencils"),
            },
            &own,
            &["build-stencils"],
            &[],
        );
        assert!(cmd
            .get_envs()
            .any(|(k, v)| k == EXPECT_CHECKOUT_ENV && v == Some(own.as_os_str())));
    }

    #[test]
    fn the_toolchain_executable_is_read_from_cargos_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"cpjit_toolchain"},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"cpjit"},"executable":"/t/debug/cpjit"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        assert_eq!(
            toolchain_executable(messages),
            Some(PathBuf::from("/t/debug/cpjit"))
        );
        assert_eq!(toolchain_executable(messages.lines().next().unwrap()), None);
    }

    #[test]
    fn the_sets_are_templates_each_nested_manifest_and_the_clients() {
        let sets = kit_sets(&root()).unwrap();
        assert_eq!(sets[0].templates, root().join("templates"));
        assert_eq!(sets[0].out, root().join("stencils"));
        assert!(sets.contains(&KitSet {
            templates: root().join("templates").join("threearg"),
            out: root().join("stencils-threearg"),
        }));
        assert!(sets.contains(&KitSet {
            templates: root().join("vm").join("templates"),
            out: root().join("vm").join("stencils"),
        }));
        for set in &sets {
            assert!(set.templates.join("manifest.toml").is_file(), "{set:?}");
        }
    }

    #[test]
    fn first_build_prints_what_it_is_doing() {
        let dir = std::env::temp_dir().join(format!("xtask-notice-{}", std::process::id()));
        let bin = dir.join("debug");
        std::fs::create_dir_all(&bin).unwrap();
        assert_eq!(first_build_notice(&dir), Some(FIRST_BUILD_NOTICE));
        assert!(FIRST_BUILD_NOTICE.contains("building the LLVM-linked toolchain"));
        std::fs::write(
            bin.join(format!("cpjit{}", std::env::consts::EXE_SUFFIX)),
            "",
        )
        .unwrap();
        assert_eq!(first_build_notice(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
