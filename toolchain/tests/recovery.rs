//! Clean crash recovery: what a killed run left behind is removed by the next run, and a
//! failed build leaves the output (crates and facade) as it was.

use crate::common::{first_target, options, set, workspace, write_set};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;

#[test]
fn a_temporary_file_of_a_killed_run_is_removed_by_the_next_run() {
    let target = first_target();
    let out = tempfile::tempdir().unwrap();
    let opts = options(set("per_unit"), &[&target], out.path(), Cache::disabled());
    driver::build_stencils(&opts).unwrap();
    // What `kill -9` between creating and renaming a file leaves: a pid above the kernel's
    // maximum (2^22) is never running.
    let src = out.path().join(&target).join("src");
    let torn = src.join(".lib.rs.4194305.tmp");
    let facade_torn = out.path().join("facade/.Cargo.toml.4194306.tmp");
    let mine = src.join(format!(".lib.rs.{}.tmp", std::process::id()));
    let unrelated = src.join(".notes.4194305.tmp");
    for file in [&torn, &facade_torn, &mine, &unrelated] {
        std::fs::write(file, b"half a file").unwrap();
    }
    // The crate is up to date: the run builds nothing, and cleans up all the same.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"))
        .args(["build-stencils", "--templates"])
        .arg(set("per_unit"))
        .arg("--targets-dir")
        .arg(workspace().join("targets"))
        .arg("--out")
        .arg(out.path())
        .args(["--target", &target, "--model-path"])
        .arg(workspace().join("model"))
        .env("CPJIT_STENCIL_CACHE", out.path().join("cache"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stderr}");
    assert!(stdout.contains(": up to date ("), "{stdout}");
    for file in [&torn, &facade_torn] {
        assert!(
            stderr.contains(&format!(
                "notice: removed {}, a temporary file of an interrupted run",
                file.display()
            )),
            "{stderr}"
        );
    }
    assert!(
        !torn.exists() && !facade_torn.exists(),
        "stale files are removed"
    );
    assert!(
        mine.exists(),
        "a running process's fresh file is left alone"
    );
    assert!(
        unrelated.exists(),
        "only the writer's own pattern is removed"
    );
}

/// A one-op set in `dir`, with `cpjit.h` as `cpjit header` writes it.
fn write_op_set(dir: &std::path::Path, package: &str, op: &str) {
    write_set(
        dir,
        &[("ops.c", op)],
        &format!(
            "name = \"recovery\"\npackage = \"{package}\"\nsources = [\"ops.c\"]\n\
             include_dirs = [\"include\"]\ncflags = [\"-O2\"]\n[stencils]\nfunctions = \"op_*\"\n"
        ),
    );
}

#[test]
fn a_failed_build_leaves_the_facade_as_it_was() {
    let target = first_target();
    let templates = tempfile::tempdir().unwrap();
    let good = "#include \"cpjit.h\"\n\
                CPJIT_CC int64_t op_inc(struct cpjit_frame *f, uint64_t *sp) {\n\
                \x20 sp[-1] += 1;\n  CPJIT_CONTINUE(f, sp);\n}\n";
    write_op_set(templates.path(), "recovery-stencils", good);
    let out = tempfile::tempdir().unwrap();
    let opts = options(
        templates.path().to_path_buf(),
        &[&target],
        out.path(),
        Cache::disabled(),
    );
    driver::build_stencils(&opts).unwrap();
    let facade = out.path().join("facade/src/lib.rs");
    let before = std::fs::read(&facade).unwrap();
    // The package renamed (so the facade's text changes) and a unit that does not compile.
    write_op_set(templates.path(), "renamed-stencils", "this is not C\n");
    driver::build_stencils(&opts).expect_err("the unit does not compile");
    assert_eq!(
        std::fs::read(&facade).unwrap(),
        before,
        "the facade was rewritten by a failed build"
    );
    // Once the set builds, the facade follows it.
    write_op_set(templates.path(), "renamed-stencils", good);
    let report = driver::build_stencils(&opts).unwrap();
    assert_ne!(std::fs::read(&facade).unwrap(), before);
    // What each timing line measures is said on the line.
    assert!(
        report.lines[0].starts_with(&format!("{target}: 1 stencils, "))
            && report.lines[0].ends_with(" s of job time"),
        "{:?}",
        report.lines
    );
    assert!(
        report.lines[1].starts_with("total: 1 target(s) in ")
            && report.lines[1].contains(" s of wall time (")
            && report.lines[1].ends_with(" s of job time, the targets' sum, on 2 threads)"),
        "{:?}",
        report.lines
    );
}
