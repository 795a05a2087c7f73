//! The installed `cpjit` command as an outside project uses it: run from the project's own
//! directory with relative paths, it builds that project's set there (never the kit's),
//! emits `cpjit.h`, and writes crates that depend on `cpjit-model` by version. Needs
//! clang-19, like `pipeline.rs`.

use std::path::Path;
use std::process::{Command, Output};

/// The kit's target triples (the stems of `targets/*.toml`), sorted.
fn triples() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
    let mut triples: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".toml").map(String::from)
        })
        .collect();
    triples.sort();
    assert!(triples.len() >= 2);
    triples
}

/// `cpjit ARGS` run in `dir`, outside the kit's checkout, naming the kit as an outside
/// project does (README, "Using the kit from your own crate": `CPJIT_KIT`).
fn cpjit(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpjit"))
        .current_dir(dir)
        .env(
            "CPJIT_KIT",
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        )
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A temporary project directory with a one-op set in `tmpl/`, including cpjit.h through
/// `cpjit header`.
fn outside_project() -> tempfile::TempDir {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();
    let t = dir.join("tmpl");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(
        t.join("manifest.toml"),
        "name = \"outside\"\nsources = [\"*.c\"]\ninclude_dirs = [\"inc\"]\ncflags = [\"-O2\"]\n\
         [stencils]\nfunctions = \"op_*\"\nshim = \"entry\"\n",
    )
    .unwrap();
    std::fs::write(
        t.join("ops.c"),
        "#include \"cpjit.h\"\n\
         int64_t entry(struct cpjit_frame *f, uint64_t *sp) { return _JIT_CONTINUE(f, sp); }\n\
         CPJIT_CC int64_t op_done(struct cpjit_frame *f, uint64_t *sp) { (void)f; return (int64_t)sp[0]; }\n",
    )
    .unwrap();
    ok(cpjit(dir, &["header", "--out", "tmpl/inc"]));
    project
}

/// `build-stencils` of the project's `tmpl/` into `gen/`, relative paths only.
fn build_args<'a>(target: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "build-stencils",
        "--templates",
        "tmpl",
        "--out",
        "gen",
        "--target",
    ];
    args.push(target);
    args.extend_from_slice(extra);
    args
}

#[test]
fn relative_paths_are_the_callers() {
    let dir = outside_project();
    let triple = &triples()[0];
    let args = build_args(triple, &["--no-cache"]);
    let text = ok(cpjit(dir.path(), &args));
    assert!(
        text.contains(&format!("{triple}: 2 stencils")),
        "built another set than the caller's:\n{text}"
    );
    let cargo =
        std::fs::read_to_string(dir.path().join("gen").join(triple).join("Cargo.toml")).unwrap();
    assert!(
        cargo.contains("cpjit-model = \"0.1.0\"\n"),
        "without --model-path the dependency is by version only:\n{cargo}"
    );
    // --check from the same directory finds the same crates fresh.
    let mut check = args.clone();
    check.push("--check");
    ok(cpjit(dir.path(), &check));
    // From a subdirectory, the same relative paths name nothing: an error naming the path.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = cpjit(&dir.path().join("sub"), &args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sub/tmpl/manifest.toml"), "{err}");
}

/// `--list-stale` names the targets whose crates a plain run would build, and builds
/// nothing: a missing crate, then none after a build, then the crate again once a template
/// changed (what a client's build script asks to refuse stale crates).
#[test]
fn list_stale_names_missing_and_stale_crates_and_builds_nothing() {
    let dir = outside_project();
    let triple = &triples()[0];
    let list = build_args(triple, &["--list-stale"]);
    assert_eq!(ok(cpjit(dir.path(), &list)), format!("{triple}\n"));
    assert!(
        !dir.path().join("gen").exists(),
        "--list-stale built something"
    );
    ok(cpjit(dir.path(), &build_args(triple, &[])));
    assert_eq!(ok(cpjit(dir.path(), &list)), "");
    let ops = dir.path().join("tmpl/ops.c");
    let mut text = std::fs::read_to_string(&ops).unwrap();
    text.push_str("/* changed */\n");
    std::fs::write(&ops, text).unwrap();
    assert_eq!(ok(cpjit(dir.path(), &list)), format!("{triple}\n"));
    let out = cpjit(
        dir.path(),
        &build_args(triple, &["--list-stale", "--check"]),
    );
    assert!(!out.status.success(), "--list-stale with --check");
}

#[test]
fn model_path_is_relative_to_the_caller_and_recorded_with_the_version() {
    let dir = outside_project();
    std::fs::create_dir(dir.path().join("model")).unwrap();
    let triple = &triples()[1];
    let args = build_args(triple, &["--model-path", "model"]);
    ok(cpjit(dir.path(), &args));
    let cargo =
        std::fs::read_to_string(dir.path().join("gen").join(triple).join("Cargo.toml")).unwrap();
    assert!(
        cargo.contains("cpjit-model = { version = \"0.1.0\", path = \"../../model\" }"),
        "{cargo}"
    );
}

#[test]
fn usage_and_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let help = ok(cpjit(dir.path(), &["--help"]));
    for command in ["build-stencils", "stencils", "header"] {
        assert!(help.contains(command), "{help}");
    }
    let out = cpjit(dir.path(), &["build-stencils", "--bogus"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
}
