//! Refuses to build the example against stale generated stencil crates: a crate that builds
//! but was generated from other templates, or by another toolchain, no longer matches
//! `src/` and fails in ways that name no cause (wave 27: `Error::OutOfBounds { insn: 4 }`
//! after a pull). It asks the `cpjit` command which crates a plain `cpjit build-stencils`
//! would rebuild (`--list-stale`: their inputs digests, compiling nothing) and stops with
//! the crates and the commands that regenerate them. `cpjit` is `$CPJIT`, else the one on
//! `PATH`; without one, the build goes on with a warning (nothing can be checked).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The generated stencil crates `Cargo.toml` depends on: (package, triple), from its
/// `<package> = { path = "stencils/<triple>" }` lines.
fn stencil_crates(manifest: &str) -> Vec<(String, String)> {
    manifest
        .lines()
        .filter_map(|line| {
            let (package, rest) = line.split_once(" = { path = \"stencils/")?;
            let (triple, _) = rest.split_once('"')?;
            Some((package.trim().to_string(), triple.to_string()))
        })
        .collect()
}

/// The `cpjit` to ask: `$CPJIT`, else the first on `PATH`.
fn find_cpjit() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CPJIT") {
        return Some(PathBuf::from(path));
    }
    let name = if cfg!(windows) { "cpjit.exe" } else { "cpjit" };
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The commands that regenerate the crates of `triples`, run in this directory.
fn regenerate(cpjit: &Path, triples: &[String]) -> String {
    let targets: Vec<String> = triples.iter().map(|t| format!("--target {t}")).collect();
    format!(
        "in examples/ebpf-jit, run\n  {cpjit} header --out templates/include\n  {cpjit} \
         build-stencils --templates templates --out stencils --model-path ../../model {}\n\
         (after a pull of the kit, first rebuild `cpjit`: `cargo install --locked --path \
         ../../toolchain`, or set CPJIT to a build of this checkout's), or run ./ci.sh",
        targets.join(" "),
        cpjit = cpjit.display(),
    )
}

/// Stops the build with `message` (cargo prints a failed build script's standard error).
fn fail(message: String) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}

fn main() {
    // What the crates' inputs digest covers, as far as a pull changes it: the templates,
    // the kit's toolchain (its sources, the model and ISA crates) and its target files.
    for path in [
        "Cargo.toml",
        "templates",
        "stencils",
        "../../toolchain/src",
        "../../model/src",
        "../../isa/src",
        "../../targets",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-env-changed=CPJIT");
    println!("cargo:rerun-if-env-changed=PATH");
    let manifest = std::fs::read_to_string("Cargo.toml").expect("the example's Cargo.toml");
    let crates = stencil_crates(&manifest);
    assert!(
        !crates.is_empty(),
        "build.rs: no `<package> = {{ path = \"stencils/<triple>\" }}` dependency in Cargo.toml"
    );
    let Some(cpjit) = find_cpjit() else {
        println!(
            "cargo:warning=cannot check that the generated stencil crates are current: no \
             `cpjit` on PATH and CPJIT unset (see README.md, \"Build, test and run\")"
        );
        return;
    };
    let mut cmd = Command::new(&cpjit);
    cmd.args([
        "build-stencils",
        "--templates",
        "templates",
        "--out",
        "stencils",
    ])
    .args(["--model-path", "../../model", "--list-stale"]);
    for (_, triple) in &crates {
        cmd.args(["--target", triple]);
    }
    let out = match cmd.output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => fail(format!(
            "`{} build-stencils --list-stale` failed ({}); an older cpjit has no --list-stale: \
             rebuild it (`cargo install --locked --path ../../toolchain`):\n{}",
            cpjit.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => fail(format!(
            "cannot run {} (from CPJIT or PATH): {e}",
            cpjit.display()
        )),
    };
    let stale: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    if stale.is_empty() {
        return;
    }
    let named: Vec<String> = crates
        .iter()
        .filter(|(_, t)| stale.contains(t))
        .map(|(package, t)| format!("{package} (stencils/{t})"))
        .collect();
    fail(format!(
        "the generated stencil crates {} are stale: not generated from the current \
         templates/ by this toolchain ({}), so their stencils no longer match src/; \
         regenerate them: {}",
        named.join(", "),
        cpjit.display(),
        regenerate(&cpjit, &stale)
    ));
}
