//! Two kit checkouts sharing one target directory: the xtask binary (built by this checkout)
//! acts on the checkout it runs in, or the one `--kit`/`CPJIT_KIT` names, never on the
//! checkout it was compiled in, and fails outside any checkout naming what it looked for.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// This checkout (the one that built the binary under test).
fn this_checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A minimal checkout at `dir`: the kit's marker files, its matrix (with the full-system
/// rows it names) and one target file.
fn checkout(dir: &Path, target_file: &Path) {
    let real = this_checkout();
    let files = [
        "Cargo.toml",
        "toolchain/Cargo.toml",
        "ci/matrix.toml",
        "qemu/system-rows.toml",
    ];
    for file in files {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::copy(real.join(file), dir.join(file)).unwrap();
    }
    std::fs::create_dir_all(dir.join("targets")).unwrap();
    std::fs::copy(
        target_file,
        dir.join("targets").join(target_file.file_name().unwrap()),
    )
    .unwrap();
}

/// The xtask binary with `args` in `cwd`, sharing `target_dir`, with `kit_env` as CPJIT_KIT.
fn xtask(cwd: &Path, target_dir: &Path, kit_env: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.current_dir(cwd)
        .args(args)
        .env("CARGO_TARGET_DIR", target_dir)
        // Not run by `cargo run`: no rebuild (kit.rs), whatever the test's own environment.
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CPJIT_KIT");
    if let Some(kit) = kit_env {
        cmd.env("CPJIT_KIT", kit);
    }
    cmd.output().unwrap()
}

fn stdout_path(out: &Output) -> PathBuf {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        .canonicalize()
        .unwrap()
}

#[test]
fn each_checkout_is_acted_on_by_the_commands_run_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path().canonicalize().unwrap();
    let target_dir = tmp.join("shared-target");
    let mut files: Vec<PathBuf> = std::fs::read_dir(this_checkout().join("targets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    checkout(&a, &files[0]);
    checkout(&b, &files[1]);
    let triple = |f: &Path| f.file_stem().unwrap().to_string_lossy().into_owned();
    let (triple_a, triple_b) = (triple(&files[0]), triple(&files[1]));

    // The checkout holding the current directory, from any depth.
    std::fs::create_dir_all(a.join("ci/deeper")).unwrap();
    assert_eq!(
        stdout_path(&xtask(&a.join("ci/deeper"), &target_dir, None, &["kit"])),
        a
    );
    assert_eq!(stdout_path(&xtask(&b, &target_dir, None, &["kit"])), b);
    // Named explicitly: --kit wins over CPJIT_KIT, which wins over the current directory.
    assert_eq!(
        stdout_path(&xtask(&a, &target_dir, None, &["--kit", "../b", "kit"])),
        b
    );
    assert_eq!(stdout_path(&xtask(&b, &target_dir, Some(&a), &["kit"])), a);
    assert_eq!(
        stdout_path(&xtask(&b, &target_dir, Some(&a), &["--kit", ".", "kit"])),
        b
    );

    // A task reads its own checkout's files: each lists only its own target file.
    for (dir, own, other) in [(&a, &triple_a, &triple_b), (&b, &triple_b, &triple_a)] {
        let out = xtask(
            dir,
            &target_dir,
            None,
            &["test-matrix", "--target", "nonesuch"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains(&format!("targets/*.toml has: {own})")) && !err.contains(other.as_str()),
            "{}: {err}",
            dir.display()
        );
    }

    // Outside any checkout: an error naming the directory, what was looked for and the flag.
    let out = xtask(&tmp, &target_dir, None, &["kit"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for needle in [
        &tmp.display().to_string(),
        "no cpjit kit checkout",
        "toolchain/Cargo.toml",
        "--kit DIR",
        "CPJIT_KIT",
    ] {
        assert!(err.contains(needle), "{err} lacks {needle}");
    }
    // The binary's own checkout was never the answer.
    assert!(
        !err.contains(&this_checkout().display().to_string()),
        "{err}"
    );
}
