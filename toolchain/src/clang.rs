//! Driving `clang-19` (through `duct`): version check, the mandatory flags, compiling a
//! source file to LLVM bitcode (stdout) together with the list of files clang read (its
//! `-MD` dependency file), building a precompiled header, and (for the bench's peers)
//! preprocessing and compiling preprocessed C.
//!
//! Stencil sources are compiled as they are written, never as preprocessed text: clang's
//! warnings then see macros as macros (`if (EQ(a, b))` with `#define EQ(a, b) ((a) == (b))`
//! is not `-Wparentheses-equality`), and each unit is parsed once, not twice.

use crate::error::{Error, Result};
use crate::manifest::{Limits, Manifest};
use crate::target::Target;
use std::path::{Path, PathBuf};
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

/// [`version`], remembered in `cache` for the executable clang resolves to, keyed by its
/// canonical path, size and modification time (as ccache keys compilers): a no-op build
/// then spawns no process at all, and a replaced clang is asked again. Without a cache, or
/// when the executable cannot be found on `PATH`, clang is asked.
pub fn version_cached(cache: &crate::cache::Cache) -> Result<String> {
    let program = clang_program();
    let Some(key) = executable_key(&program) else {
        return version_of(&program);
    };
    if let Some(text) = cache
        .get("clangver", &key)
        .and_then(|b| String::from_utf8(b).ok())
    {
        if text.contains("clang version 19.") {
            return Ok(text);
        }
        cache.reject("clangver", &key, "not a clang 19 version line");
    }
    let text = version_of(&program)?;
    cache.put("clangver", &key, text.as_bytes());
    Ok(text)
}

/// The cache key of executable `program` (a path, or a name looked up on `PATH`).
fn executable_key(program: &str) -> Option<String> {
    let named = Path::new(program);
    let found = if named.components().count() > 1 {
        Some(named.to_path_buf())
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    }?;
    let canonical = found.canonicalize().ok()?;
    let meta = std::fs::metadata(&canonical).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some(crate::cache::key(&[
        b"clangver",
        canonical.to_string_lossy().as_bytes(),
        &meta.len().to_le_bytes(),
        &mtime.to_le_bytes(),
    ]))
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
    let per_target = manifest.flags_for(target).cloned().unwrap_or_default();
    let mut flags = vec![format!("--target={}", target.llvm_triple())];
    flags.extend(MANDATORY_FLAGS.iter().map(|s| s.to_string()));
    if crate::frame::reads_unwind_tables(target) {
        // ELF `.eh_frame`, x64 COFF `.pdata`/`.xdata`: where `frame` reads the layouts.
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

/// What compiling one source file produced: its bitcode and every file clang read for it
/// (the source, its headers, and the headers behind a precompiled header), as absolute
/// paths in clang's order.
#[derive(Debug)]
pub struct Compiled {
    pub bitcode: Vec<u8>,
    pub inputs: Vec<PathBuf>,
}

/// Compiles `source` to LLVM bitcode with `flags`, after the precompiled header `pch` if
/// given, in at most `limit` of wall time; the inputs come from clang's dependency file.
pub fn compile_source_within(
    flags: &[String],
    source: &Path,
    pch: Option<&Path>,
    limit: Duration,
) -> Result<Compiled> {
    compile_within(flags, Input::File(source), pch, limit)
}

/// [`compile_source_within`] for C text given on stdin (a generated unit, such as a batch
/// of units); `what` names it in errors. The text itself is not among the inputs (clang's
/// dependency list names the files it included).
pub fn compile_text_within(
    flags: &[String],
    what: &str,
    text: &[u8],
    pch: Option<&Path>,
    limit: Duration,
) -> Result<Compiled> {
    compile_within(flags, Input::Text { what, text }, pch, limit)
}

/// What clang compiles: a file, or C text on stdin.
enum Input<'a> {
    File(&'a Path),
    Text { what: &'a str, text: &'a [u8] },
}

fn compile_within(
    flags: &[String],
    input: Input,
    pch: Option<&Path>,
    limit: Duration,
) -> Result<Compiled> {
    let scratch = scratch_dir()?;
    let depfile = scratch.path().join("unit.d");
    let mut args: Vec<String> = flags.to_vec();
    if let Some(pch) = pch {
        args.extend(pch_use_flags(pch));
    }
    args.extend(["-emit-llvm".into(), "-c".into()]);
    args.extend(depfile_flags(&depfile));
    let (name, stdin) = match input {
        Input::File(source) => {
            args.push(source.display().to_string());
            (source.to_path_buf(), None)
        }
        Input::Text { what, text } => {
            args.extend(["-x".into(), "c".into(), "-".into()]);
            (PathBuf::from(what), Some(text))
        }
    };
    args.extend(["-o".into(), "-".into()]);
    let bitcode = run(&clang_program(), &args, stdin, limit)?;
    let inputs = read_depfile(&depfile, &name)?;
    Ok(Compiled { bitcode, inputs })
}

/// Precompiles `header` (as C) with `flags` into `out`; returns the files clang read.
pub fn precompile_header_within(
    flags: &[String],
    header: &Path,
    out: &Path,
    limit: Duration,
) -> Result<Vec<PathBuf>> {
    let scratch = scratch_dir()?;
    let depfile = scratch.path().join("header.d");
    let mut args: Vec<String> = flags.to_vec();
    args.extend(["-x".into(), "c-header".into()]);
    args.extend(depfile_flags(&depfile));
    args.extend([
        header.display().to_string(),
        "-o".into(),
        out.display().to_string(),
    ]);
    run(&clang_program(), &args, None, limit)?;
    read_depfile(&depfile, header)
}

/// The flags that make clang start a unit with the precompiled header `pch`. Clang's own
/// validation (header modification times) is off: the toolchain keys each PCH by the
/// content of every file it was built from, so a touched but unchanged header keeps it,
/// and a changed one never reaches clang with the old PCH.
pub fn pch_use_flags(pch: &Path) -> [String; 4] {
    [
        "-include-pch".into(),
        pch.display().to_string(),
        "-Xclang".into(),
        "-fno-validate-pch".into(),
    ]
}

pub(crate) fn depfile_flags(depfile: &Path) -> [String; 3] {
    ["-MD".into(), "-MF".into(), depfile.display().to_string()]
}

/// A private directory for one clang run's inputs and outputs, removed when dropped: in
/// memory ([`ram_scratch_root`]) where the system has a RAM file system, else in the
/// temporary directory.
pub(crate) fn scratch_dir() -> Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("cpjit-clang-");
    if let Some(dir) = ram_scratch_root().and_then(|root| builder.tempdir_in(root).ok()) {
        return Ok(dir);
    }
    builder
        .tempdir()
        .map_err(|e| Error(format!("cannot create a temporary directory: {e}")))
}

/// Where scratch directories go when `$TMPDIR` does not say: Linux's `/dev/shm` (tmpfs).
/// Every wrapper and bitcode file of a group costs an ext4 inode allocation, slow after
/// many deletions, and a write-back; in memory none of it is I/O. (A group's dependency
/// lists, which `clang -cc1` writes n(n+1)/2 times for n inputs, go to its stdout: see
/// `cc1::Cc1Command::compile_group`.)
fn ram_scratch_root() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    (cfg!(target_os = "linux") && std::env::var_os("TMPDIR").is_none() && shm.is_dir())
        .then_some(shm)
}

/// Reads the dependency file clang wrote for `source`.
pub(crate) fn read_depfile(depfile: &Path, source: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(depfile).map_err(|e| {
        Error(format!(
            "clang wrote no dependency file for {} ({}: {e})",
            source.display(),
            depfile.display()
        ))
    })?;
    parse_depfile(&text).map_err(|why| {
        Error(format!(
            "cannot read clang's dependency file for {}: {why}",
            source.display()
        ))
    })
}

/// The prerequisites of a make-syntax dependency file (`out: a.c b.h \` continued lines,
/// `\ ` for a space in a name, `$$` for `$`), deduplicated in first-seen order.
pub fn parse_depfile(text: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut names: Vec<String> = Vec::new();
    let mut rules = 0;
    for line in joined.lines().filter(|l| !l.trim().is_empty()) {
        rules += 1;
        let colon = find_rule_colon(line).ok_or_else(|| format!("no `target:` in `{line}`"))?;
        let mut current = String::new();
        let mut chars = line[colon + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if matches!(chars.peek(), Some(' ' | '#')) => {
                    current.push(chars.next().expect("peeked"));
                }
                '$' if chars.peek() == Some(&'$') => {
                    chars.next();
                    current.push('$');
                }
                c if c.is_whitespace() => {
                    if !current.is_empty() {
                        names.push(std::mem::take(&mut current));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            names.push(current);
        }
    }
    if rules == 0 {
        return Err("it is empty".into());
    }
    let mut seen = std::collections::HashSet::new();
    Ok(names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .map(PathBuf::from)
        .collect())
}

/// The colon ending a rule's target: the first `:` followed by whitespace or the end (a
/// Windows drive letter `C:\` is part of a name).
fn find_rule_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len())
        .find(|&i| bytes[i] == b':' && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace()))
}

/// Runs `program` with `args` (and `stdin`), killing it once it has run for `limit`;
/// returns its stdout and prints its stderr (warnings are not fatal, but never hidden).
fn run(program: &str, args: &[String], stdin: Option<&[u8]>, limit: Duration) -> Result<Vec<u8>> {
    let out = run_captured(program, args, stdin, limit, None)?;
    if !out.stderr.is_empty() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr).trim_end());
    }
    Ok(out.stdout)
}

/// [`run`] in directory `cwd` (the caller's when `None`), returning stdout and stderr as
/// they are: the caller decides what of stderr to show.
pub(crate) fn run_captured(
    program: &str,
    args: &[String],
    stdin: Option<&[u8]>,
    limit: Duration,
    cwd: Option<&Path>,
) -> Result<std::process::Output> {
    let mut expr = duct::cmd(program, args)
        .stdout_capture()
        .stderr_capture()
        .unchecked();
    if let Some(input) = stdin {
        expr = expr.stdin_bytes(input.to_vec());
    }
    if let Some(dir) = cwd {
        expr = expr.dir(dir);
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
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The kit's fix under clang's words, for the mistakes it recognises.
        let advice: String = crate::advice::for_clang(&stderr)
            .iter()
            .map(|line| format!("\n{line}"))
            .collect();
        return Err(Error(format!(
            "clang failed ({}):\n{}{advice}",
            out.status,
            stderr.trim_end()
        )));
    }
    Ok(out)
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

    /// Linux without `$TMPDIR` puts scratch directories in `/dev/shm`; elsewhere, or with
    /// `$TMPDIR` set, in the temporary directory; either way they go when dropped.
    #[test]
    fn scratch_dirs_are_in_memory_on_linux_unless_tmpdir_says_otherwise() {
        let in_memory = cfg!(target_os = "linux")
            && std::env::var_os("TMPDIR").is_none()
            && Path::new("/dev/shm").is_dir();
        assert_eq!(ram_scratch_root().is_some(), in_memory);
        let dir = scratch_dir().unwrap();
        let root = match in_memory {
            true => PathBuf::from("/dev/shm"),
            false => std::env::temp_dir(),
        };
        assert!(dir.path().starts_with(&root), "{}", dir.path().display());
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("group.d"), "x.bc: x.c\n").unwrap();
        drop(dir);
        assert!(!path.exists(), "{} outlived its TempDir", path.display());
    }

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
    fn the_version_is_remembered_per_executable_and_a_bad_entry_is_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = crate::cache::Cache::new(dir.path().to_path_buf());
        let first = version_cached(&cache).unwrap();
        assert_eq!(first, version().unwrap());
        let key = executable_key(&clang_program()).unwrap();
        assert_eq!(
            cache.get("clangver", &key).as_deref(),
            Some(first.as_bytes())
        );
        assert_eq!(version_cached(&cache).unwrap(), first, "from the cache");
        cache.put("clangver", &key, b"clang version 18.1.0");
        assert_eq!(version_cached(&cache).unwrap(), first, "asked again");
        assert_ne!(executable_key("/bin/sh"), Some(key));
        assert_eq!(executable_key("no-such-program-cpjit"), None);
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
    fn dependency_files_are_parsed_with_continuations_and_escapes() {
        let text = "/o/x.bc: /t/a.c /t/inc/big.h \\\n  /t/my\\ dir/b.h /t/$$c.h \\\n  /t/a.c\n";
        assert_eq!(
            parse_depfile(text).unwrap(),
            ["/t/a.c", "/t/inc/big.h", "/t/my dir/b.h", "/t/$c.h"].map(PathBuf::from)
        );
        let windows = "C:\\o\\x.bc: C:\\t\\a.c\n";
        assert_eq!(
            parse_depfile(windows).unwrap(),
            [PathBuf::from("C:\\t\\a.c")]
        );
        assert!(parse_depfile("").unwrap_err().contains("empty"));
        assert!(parse_depfile("no rule here\n")
            .unwrap_err()
            .contains("target:"));
    }

    #[test]
    fn a_compiled_source_reports_what_it_read_and_a_pch_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("inc");
        std::fs::create_dir(&inc).unwrap();
        std::fs::write(
            inc.join("big.h"),
            "#ifndef BIG_H\n#define BIG_H\n#define EQ(a, b) ((a) == (b))\nstatic inline int same(int a, int b) { if (EQ(a, b)) return 1; return 0; }\n#endif\n",
        )
        .unwrap();
        let unit = dir.path().join("u.c");
        std::fs::write(
            &unit,
            "#include \"big.h\"\nint f(int x) { return same(x, 3); }\n",
        )
        .unwrap();
        let flags: Vec<String> = vec!["-O2".into(), format!("-I{}", inc.display())];
        let limit = Duration::from_secs(120);
        let plain = compile_source_within(&flags, &unit, None, limit).unwrap();
        assert_eq!(&plain.bitcode[..4], b"BC\xc0\xde");
        assert_eq!(plain.inputs, [unit.clone(), inc.join("big.h")]);
        let pch = dir.path().join("big.pch");
        let read = precompile_header_within(&flags, &inc.join("big.h"), &pch, limit).unwrap();
        assert_eq!(read, [inc.join("big.h")]);
        let with = compile_source_within(&flags, &unit, Some(&pch), limit).unwrap();
        assert_eq!(&with.bitcode[..4], b"BC\xc0\xde");
        assert!(
            with.inputs.contains(&inc.join("big.h")),
            "{:?}",
            with.inputs
        );
        let err = compile_source_within(&flags, &dir.path().join("missing.c"), None, limit)
            .unwrap_err()
            .0;
        assert!(err.contains("missing.c"), "{err}");
    }

    #[test]
    fn line_markers_name_included_files() {
        let pp = b"# 1 \"/t/a.c\"\n# 1 \"<built-in>\" 1\n# 1 \"/t/include/cpjit.h\" 1\nint x;\n# 3 \"/t/a.c\" 2\n";
        assert_eq!(included_files(pp), ["/t/a.c", "/t/include/cpjit.h"]);
    }
}
