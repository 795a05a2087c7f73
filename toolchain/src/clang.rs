//! Driving `clang-19` (through `duct`): version check, the mandatory flags, preprocessing
//! and compiling preprocessed C to LLVM bitcode in memory (stdin → stdout, no temp files).

use crate::error::{Error, Result};
use crate::manifest::{Limits, Manifest};
use crate::target::Target;
use std::path::Path;
use std::time::{Duration, Instant};

/// The clang executable; `CPJIT_CLANG` overrides it (tests use this to simulate a missing one).
pub fn clang_program() -> String {
    std::env::var("CPJIT_CLANG").unwrap_or_else(|_| "clang-19".into())
}

const INSTALL_HINT: &str = "install it with `sudo bash ci/setup.sh` (as root), or: \
    sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends clang-19 lld-19 llvm-19 llvm-19-dev'";

/// Runs `clang-19 --version`, checks it is 19.x and returns the first line (part of the
/// inputs digest and of every cache key).
pub fn version() -> Result<String> {
    version_of(&clang_program())
}

/// [`version`] for a given clang executable.
pub fn version_of(program: &str) -> Result<String> {
    let out = duct::cmd!(program, "--version")
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|e| Error(format!("cannot run `{program}` ({e}); {INSTALL_HINT}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default().trim().to_string();
    if !out.status.success() {
        return Err(Error(format!(
            "`{program} --version` failed ({}); {INSTALL_HINT}",
            out.status
        )));
    }
    let major = first
        .split("version ")
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    if major != Some(19) {
        return Err(Error(format!(
            "`{program}` is `{first}`, but clang 19.x is required; {INSTALL_HINT}"
        )));
    }
    Ok(first)
}

/// Flags every stencil compilation gets, before the target's and the set's own.
pub const MANDATORY_FLAGS: &[&str] = &[
    "-ffreestanding",
    "-fno-builtin",
    "-fno-asynchronous-unwind-tables",
    "-fno-jump-tables",
    "-fno-stack-protector",
    "-fno-exceptions",
    "-std=c11",
];

/// The full clang argument list (without input/output options) for `target`: mandatory
/// flags, the target file's flags, the set's flags, the set's per-target additions (after
/// its removals), include directories and defines.
pub fn compile_flags(manifest: &Manifest, target: &Target) -> Vec<String> {
    let per_target = manifest
        .targets
        .get(&target.triple)
        .cloned()
        .unwrap_or_default();
    let mut flags = vec![format!("--target={}", target.llvm_triple())];
    flags.extend(MANDATORY_FLAGS.iter().map(|s| s.to_string()));
    if target.format == cpjit_model::ObjectFormat::Elf {
        // `.eh_frame` is where `frame` reads the stencils' frame layouts from.
        flags.push("-fasynchronous-unwind-tables".into());
    }
    flags.push(format!("-ffile-prefix-map={}=.", manifest.root.display()));
    let removed = |f: &String| per_target.remove_cflags.contains(f);
    flags.extend(target.cflags.iter().filter(|f| !removed(f)).cloned());
    flags.extend(manifest.cflags.iter().filter(|f| !removed(f)).cloned());
    flags.extend(per_target.cflags.iter().cloned());
    for dir in &manifest.include_dirs {
        flags.push(format!("-I{}", manifest.root.join(dir).display()));
    }
    for define in &manifest.defines {
        flags.push(format!("-D{define}"));
    }
    flags
}

/// `clang -E`: the preprocessed text of `source` (with line markers, which name every
/// included file and so feed the cache's dependency list), within the default time limit.
pub fn preprocess(flags: &[String], source: &Path) -> Result<Vec<u8>> {
    preprocess_within(flags, source, Limits::default().clang_time())
}

/// [`preprocess`] in at most `limit` of wall time.
pub fn preprocess_within(flags: &[String], source: &Path, limit: Duration) -> Result<Vec<u8>> {
    let mut args: Vec<String> = flags.to_vec();
    args.extend([
        "-E".into(),
        source.display().to_string(),
        "-o".into(),
        "-".into(),
    ]);
    run(&clang_program(), &args, None, limit)
}

/// Compiles preprocessed C (from stdin) to LLVM bitcode (captured stdout), within the
/// default time limit.
pub fn compile_bitcode(flags: &[String], preprocessed: &[u8]) -> Result<Vec<u8>> {
    compile_bitcode_within(flags, preprocessed, Limits::default().clang_time())
}

/// [`compile_bitcode`] in at most `limit` of wall time (clang's optimiser, like the code
/// generator, is superlinear in the size of a function).
pub fn compile_bitcode_within(
    flags: &[String],
    preprocessed: &[u8],
    limit: Duration,
) -> Result<Vec<u8>> {
    let mut args: Vec<String> = flags.to_vec();
    args.extend(
        [
            "-Wno-unused-command-line-argument",
            "-x",
            "cpp-output",
            "-emit-llvm",
            "-c",
            "-o",
            "-",
            "-",
        ]
        .map(String::from),
    );
    run(&clang_program(), &args, Some(preprocessed), limit)
}

/// Runs `program` with `args` (and `stdin`), killing it once it has run for `limit`.
fn run(program: &str, args: &[String], stdin: Option<&[u8]>, limit: Duration) -> Result<Vec<u8>> {
    let mut expr = duct::cmd(program, args)
        .stdout_capture()
        .stderr_capture()
        .unchecked();
    if let Some(input) = stdin {
        expr = expr.stdin_bytes(input.to_vec());
    }
    let cannot_run =
        |e: std::io::Error| Error(format!("cannot run `{program}` ({e}); {INSTALL_HINT}"));
    let handle = expr.start().map_err(cannot_run)?;
    let start = Instant::now();
    while handle.try_wait().map_err(cannot_run)?.is_none() {
        if start.elapsed() >= limit {
            let _ = handle.kill();
            let _ = handle.wait();
            return Err(Error(format!(
                "`{program}` ran longer than the limit [limits] clang_seconds = {} in \
                 manifest.toml and was stopped; split the unit's large functions or raise the limit",
                limit.as_secs_f64()
            )));
        }
        // Short polls for the usual sub-second compilations, longer ones for slow units.
        std::thread::sleep(
            (start.elapsed() / 16).clamp(Duration::from_millis(1), Duration::from_millis(50)),
        );
    }
    let out = handle.into_output().map_err(cannot_run)?;
    if !out.status.success() {
        return Err(Error(format!(
            "clang failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    if !out.stderr.is_empty() {
        // Warnings are not fatal, but never hidden.
        eprintln!("{}", String::from_utf8_lossy(&out.stderr).trim_end());
    }
    Ok(out.stdout)
}

/// Files named by the line markers (`# 12 "path" ...`) of preprocessed output, sorted and
/// deduplicated: the translation unit and every header it included.
pub fn included_files(preprocessed: &[u8]) -> Vec<String> {
    let mut files: Vec<String> = preprocessed
        .split(|&b| b == b'\n')
        .filter(|line| line.starts_with(b"# "))
        .filter_map(|line| {
            let text = std::str::from_utf8(line).ok()?;
            let start = text.find('"')? + 1;
            let end = start + text[start..].find('"')?;
            let name = &text[start..end];
            (!name.starts_with('<')).then(|| name.to_string())
        })
        .collect();
    files.sort();
    files.dedup();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_clang_names_the_install_command() {
        let err = version_of("clang-19-that-does-not-exist").unwrap_err().0;
        assert!(err.contains("clang-19-that-does-not-exist"), "{err}");
        assert!(
            err.contains("sudo bash ci/setup.sh") && err.contains("apt-get install -y"),
            "{err}"
        );
    }

    #[test]
    fn clang_19_is_found() {
        assert!(version().unwrap().contains("clang version 19."));
    }

    #[test]
    fn a_compiler_over_its_time_limit_is_stopped_and_the_limit_named() {
        let start = Instant::now();
        let err = run("sleep", &["20".into()], None, Duration::from_millis(200))
            .unwrap_err()
            .0;
        assert!(start.elapsed() < Duration::from_secs(10), "stopped early");
        assert!(
            err.contains("`sleep` ran longer than the limit [limits] clang_seconds = 0.2"),
            "{err}"
        );
        let out = run("echo", &["hi".into()], None, Duration::from_secs(60)).unwrap();
        assert_eq!(out, b"hi\n");
    }

    #[test]
    fn line_markers_name_included_files() {
        let pp = b"# 1 \"/t/a.c\"\n# 1 \"<built-in>\" 1\n# 1 \"/t/include/cpjit.h\" 1\nint x;\n# 3 \"/t/a.c\" 2\n";
        assert_eq!(included_files(pp), ["/t/a.c", "/t/include/cpjit.h"]);
    }
}
