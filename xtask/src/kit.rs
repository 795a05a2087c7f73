//! Which kit checkout xtask acts on: the one `--kit DIR` or `CPJIT_KIT` names, else the one
//! holding the current directory. Never the checkout the binary was compiled in: two
//! checkouts sharing one `CARGO_TARGET_DIR` run each other's binaries (cargo hashes a
//! workspace member by its path relative to the workspace, so checkout B's `cargo xtask`
//! finds checkout A's build fresh and runs it), and a compiled-in `CARGO_MANIFEST_DIR` would
//! then read and write A's tree. [`stale_build`] catches that case and [`rerun_command`]
//! rebuilds xtask from the right checkout. `toolchain/src/cli.rs` applies the same rule
//! ([`is_kit`]) for the `cpjit` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming a kit checkout (as `--kit` does).
pub const ENV: &str = "CPJIT_KIT";

/// Set on the rerun after a rebuild, so that a rebuild that does not help fails instead of
/// looping.
const REBUILT_ENV: &str = "CPJIT_XTASK_REBUILT";

/// What marks a kit checkout's root, for error messages.
const MARKER: &str =
    "a Cargo.toml with a [workspace] table beside toolchain/Cargo.toml of package cpjit-toolchain";

/// Whether `dir` is the root of a kit checkout ([`MARKER`]). Nested workspaces (e.g.
/// `examples/bf-jit/`) are not: they have no `toolchain/` of the kit.
pub fn is_kit(dir: &Path) -> bool {
    let table = |path: PathBuf| -> Option<toml::Table> {
        toml::from_str(&std::fs::read_to_string(path).ok()?).ok()
    };
    let workspace = table(dir.join("Cargo.toml")).is_some_and(|t| t.contains_key("workspace"));
    workspace
        && table(dir.join("toolchain/Cargo.toml")).is_some_and(|t| {
            t.get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                == Some("cpjit-toolchain")
        })
}

/// The kit checkout: `explicit` (from `--kit` or [`ENV`], relative to `cwd`) if given,
/// which must be a kit's root, else the nearest kit root at or above `cwd`.
pub fn find(explicit: Option<&Path>, cwd: &Path) -> Result<PathBuf, String> {
    if let Some(dir) = explicit {
        let dir = cwd.join(dir);
        return if is_kit(&dir) {
            Ok(dir)
        } else {
            Err(format!(
                "--kit/{ENV} {}: not the root of a cpjit kit checkout (expected {MARKER}); \
                 name the directory that holds the kit's Cargo.toml",
                dir.display()
            ))
        };
    }
    cwd.ancestors()
        .find(|dir| is_kit(dir))
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "no cpjit kit checkout at or above the current directory {} (looked for \
                 {MARKER}); run in a checkout of the kit, or name one with \
                 `cargo xtask --kit DIR ...` or {ENV}=DIR",
                cwd.display()
            )
        })
}

/// Whether this binary, compiled in `compiled` (its `CARGO_MANIFEST_DIR` at build time),
/// must be rebuilt from `root`, whose xtask sources it is not: when `cargo run` ran it for
/// `root`'s xtask (`run_for`: `CARGO_MANIFEST_DIR` at run time, which cargo sets), cargo
/// reused another checkout's build from a shared target directory; when it was run
/// directly (`run_for` is `None`, e.g. by `.ci/run` after its `cargo build`) in `root`
/// without `explicit`ly naming a kit, the same. A kit named with `--kit`/`CPJIT_KIT` from
/// another checkout's binary is that binary's to act on, and a directory without xtask
/// sources has nothing to rebuild from.
pub fn stale_build(compiled: &Path, run_for: Option<&Path>, root: &Path, explicit: bool) -> bool {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    let own = root.join("xtask");
    if !own.join("src/main.rs").is_file() || same(compiled, &own) {
        return false;
    }
    match run_for {
        Some(r) => same(r, &own),
        None => !explicit,
    }
}

/// Rebuilds and reruns xtask from `root` with `args` when [`stale_build`] says it must; the
/// exit status of the rerun. Every workspace member's crate root is touched
/// ([`touch_members`]): cargo's fingerprint of the other checkout's builds sees nothing else
/// that differs.
pub fn rerun_from(
    root: &Path,
    compiled: &Path,
    args: &[std::ffi::OsString],
) -> Result<i32, String> {
    if std::env::var_os(REBUILT_ENV).is_some() {
        return Err(format!(
            "cargo still runs an xtask compiled in {} for the checkout {} after rebuilding it; \
             run `cargo clean -p xtask` in {} and retry",
            compiled.display(),
            root.display(),
            root.display()
        ));
    }
    eprintln!(
        "xtask: this binary was compiled in {} (a shared target directory); rebuilding it from {}",
        compiled.display(),
        root.display()
    );
    touch_members(root)?;
    let mut cmd = rerun_command(root, args);
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    Ok(status.code().unwrap_or(1))
}

/// Touches the crate root of every member of `root`'s workspace ([`touch`]), so that cargo
/// rebuilds them all. Touching only the binary's own crate is not enough: its library
/// dependencies in the workspace (`cpjit-model`, the toolchain's library, the generated
/// crates) have the same artifact names in both checkouts too, so cargo would find the
/// other checkout's builds of them fresh and link those into this checkout's binary.
/// Members are read from the workspace `Cargo.toml` (`dir` or `dir/*`).
pub fn touch_members(root: &Path) -> Result<usize, String> {
    let roots = member_crate_roots(root)?;
    for file in &roots {
        touch(file)?;
    }
    Ok(roots.len())
}

/// The crate root files (`src/lib.rs`, `src/main.rs`) of every member of `root`'s workspace.
pub fn member_crate_roots(root: &Path) -> Result<Vec<PathBuf>, String> {
    let manifest = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let members = value
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .ok_or_else(|| format!("{}: no [workspace] members list", manifest.display()))?;
    let mut dirs = Vec::new();
    for member in members {
        let member = member
            .as_str()
            .ok_or_else(|| format!("{}: a workspace member is not a string", manifest.display()))?;
        match member.strip_suffix("/*") {
            Some(parent) => {
                let parent = root.join(parent);
                let Ok(entries) = std::fs::read_dir(&parent) else {
                    continue;
                };
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|d| d.join("Cargo.toml").is_file())
                    .collect();
                found.sort();
                dirs.extend(found);
            }
            None if member.contains('*') => {
                return Err(format!(
                    "{}: workspace member `{member}`: only `dir` and `dir/*` are understood",
                    manifest.display()
                ))
            }
            None => dirs.push(root.join(member)),
        }
    }
    Ok(dirs
        .iter()
        .flat_map(|d| [d.join("src/lib.rs"), d.join("src/main.rs")])
        .filter(|f| f.is_file())
        .collect())
}

/// Sets the modification time of `file` to now, so that cargo rebuilds its crate: what
/// makes it rebuild a crate whose build it found fresh in another checkout.
pub fn touch(file: &Path) -> Result<(), String> {
    std::fs::File::options()
        .append(true)
        .open(file)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()))
        .map_err(|e| format!("cannot touch {} to rebuild its crate: {e}", file.display()))
}

/// `cargo run` of `root`'s xtask with `args` (what the `cargo xtask` alias runs).
fn rerun_command(root: &Path, args: &[std::ffi::OsString]) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["run", "--quiet", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .args(["--package", "xtask", "--"])
        .args(args)
        .env(REBUILT_ENV, "1");
    cmd
}

/// (Tests) A minimal kit checkout in `dir`: the marker files only.
#[cfg(test)]
pub fn fake(dir: &Path) {
    std::fs::create_dir_all(dir.join("toolchain")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\"toolchain\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("toolchain/Cargo.toml"),
        "[package]\nname = \"cpjit-toolchain\"\n",
    )
    .unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kit_is_the_nearest_checkout_above_the_current_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fake(&a);
        fake(&b);
        // A nested workspace of its own (like examples/bf-jit/) is not a kit.
        let nested = a.join("examples/x");
        std::fs::create_dir_all(nested.join("src")).unwrap();
        std::fs::write(nested.join("Cargo.toml"), "[workspace]\n").unwrap();
        assert_eq!(find(None, &nested.join("src")).unwrap(), a);
        assert_eq!(find(None, &b).unwrap(), b);
        assert_eq!(find(Some(Path::new("../b")), &a).unwrap(), a.join("../b"));
        let outside = find(None, dir.path()).unwrap_err();
        for needle in [&dir.path().display().to_string(), "--kit DIR", ENV, MARKER] {
            assert!(outside.contains(needle), "{outside} lacks {needle}");
        }
        let not_root = find(Some(&nested), dir.path()).unwrap_err();
        assert!(
            not_root.contains(&nested.display().to_string()) && not_root.contains("not the root"),
            "{not_root}"
        );
        // The real checkout, found from this crate's directory.
        assert!(is_kit(
            Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
        ));
    }

    #[test]
    fn every_member_crate_root_is_found_for_a_rebuild() {
        // This checkout: the libraries a binary links (the model, the toolchain's library)
        // and the generated crates are rebuilt with the binaries.
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let roots = member_crate_roots(real).unwrap();
        for needle in [
            "model/src/lib.rs",
            "toolchain/src/lib.rs",
            "toolchain/src/main.rs",
            "xtask/src/main.rs",
            "stencils/facade/src/lib.rs",
            "vm/stencils/facade/src/lib.rs",
        ] {
            assert!(roots.contains(&real.join(needle)), "{needle} missing");
        }
        // Every generated crate (one per target and set), found through the `dir/*` globs.
        for set in ["stencils", "stencils-threearg", "vm/stencils"] {
            for dir in std::fs::read_dir(real.join(set)).unwrap() {
                let lib = dir.unwrap().path().join("src/lib.rs");
                assert!(roots.contains(&lib), "{} missing", lib.display());
            }
        }
        // A fixture: a plain member, a glob, a glob dir entry without a crate, a bad glob.
        let dir = tempfile::tempdir().unwrap();
        let kit = dir.path();
        for crate_dir in ["a", "sets/x", "sets/y"] {
            std::fs::create_dir_all(kit.join(crate_dir).join("src")).unwrap();
            std::fs::write(kit.join(crate_dir).join("Cargo.toml"), "").unwrap();
            std::fs::write(kit.join(crate_dir).join("src/lib.rs"), "").unwrap();
        }
        std::fs::create_dir_all(kit.join("sets/not-a-crate")).unwrap();
        std::fs::write(
            kit.join("Cargo.toml"),
            "[workspace]\nmembers = [\"a\", \"sets/*\"]\n",
        )
        .unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        for f in ["a/src/lib.rs", "sets/x/src/lib.rs", "sets/y/src/lib.rs"] {
            let file = std::fs::File::options().append(true).open(kit.join(f));
            file.unwrap().set_modified(old).unwrap();
        }
        assert_eq!(touch_members(kit).unwrap(), 3);
        for f in ["a/src/lib.rs", "sets/x/src/lib.rs", "sets/y/src/lib.rs"] {
            let modified = std::fs::metadata(kit.join(f)).unwrap().modified().unwrap();
            assert!(modified > old, "{f} was not touched");
        }
        std::fs::write(
            kit.join("Cargo.toml"),
            "[workspace]\nmembers = [\"s*ts\"]\n",
        )
        .unwrap();
        let e = member_crate_roots(kit).unwrap_err();
        assert!(e.contains("`s*ts`") && e.contains("dir/*"), "{e}");
    }

    #[test]
    fn a_binary_cargo_ran_for_another_checkout_is_rebuilt_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for kit in [&a, &b] {
            fake(kit);
            std::fs::create_dir_all(kit.join("xtask/src")).unwrap();
            std::fs::write(kit.join("xtask/src/main.rs"), "").unwrap();
        }
        let compiled_in_a = a.join("xtask");
        // `cargo run` in b reused a's build, or a's binary was run directly in b: stale.
        assert!(stale_build(
            &compiled_in_a,
            Some(&b.join("xtask")),
            &b,
            false
        ));
        assert!(stale_build(
            &compiled_in_a,
            Some(&b.join("xtask")),
            &b,
            true
        ));
        assert!(stale_build(&compiled_in_a, None, &b, false));
        // Its own build; a's binary told to act on b; one that cargo ran for another
        // package; a kit without xtask sources: nothing to rebuild.
        assert!(!stale_build(
            &compiled_in_a,
            Some(&a.join("xtask")),
            &a,
            false
        ));
        assert!(!stale_build(&compiled_in_a, None, &a, false));
        assert!(!stale_build(&compiled_in_a, None, &b, true));
        assert!(!stale_build(&compiled_in_a, Some(&b.join("vm")), &b, false));
        std::fs::remove_file(b.join("xtask/src/main.rs")).unwrap();
        assert!(!stale_build(&compiled_in_a, None, &b, false));
        let cmd = rerun_command(&b, &["ci".into()]);
        let argv: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            argv,
            [
                "run",
                "--quiet",
                "--manifest-path",
                &b.join("Cargo.toml").display().to_string(),
                "--package",
                "xtask",
                "--",
                "ci"
            ]
        );
        assert!(cmd.get_envs().any(|(k, _)| k == REBUILT_ENV));
    }
}
