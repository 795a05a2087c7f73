//! One clang `-cc1` process for a group of units.
//!
//! Most of a small unit's compile time is clang's process start (the dynamic loader
//! relocating libLLVM and libclang-cpp, page faults), not compiling. The clang driver with
//! several inputs still starts one `-cc1` process per input; `clang -cc1` itself, given
//! several inputs, compiles each as its own translation unit in one process. So the
//! pipeline asks the driver once per flag set for the `-cc1` job it would run
//! ([`Cc1Command::from_driver`]: `clang-19 -### ...` on a placeholder input), checks the
//! job's shape, and runs that command line with many inputs ([`Cc1Command::compile_group`]).
//!
//! Each input is a small generated file in a private directory ([`wrapper`]): the
//! defines of a family member (which cannot go on the shared command line), then an
//! `#include` of the unit's source by its absolute path, the path the unit alone is
//! compiled with, so `__FILE__` is unchanged (`__BASE_FILE__` and `__INCLUDE_LEVEL__`
//! are not; templates do not use them). A wrapper's name is derived from the unit alone
//! ([`input_name`]), so a unit's bitcode (whose `source_filename` is that name) does not
//! depend on the group it was compiled in. clang writes one bitcode file per input beside
//! it, and dependency lists on stdout whose union names what every input read (not a
//! file: `-cc1` rewrites it n(n+1)/2 times for n inputs), which the pipeline records for
//! each unit of the group (a change to any of them rebuilds the unit, which is safe). A group clang rejects is compiled unit by unit by the pipeline, so an
//! error names the unit's own file and line.

use crate::clang;
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `-cc1` command line the clang driver runs for one flag set, without its input,
/// output, main-file name and dependency-file options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cc1Command {
    /// The clang executable the driver runs (an absolute path).
    pub program: String,
    /// The arguments after the program, `-cc1` first.
    pub args: Vec<String>,
}

/// The placeholder input, output and dependency file the driver is asked about; each must
/// appear in its job exactly where the real ones go.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub input: PathBuf,
    pub output: PathBuf,
    pub depfile: PathBuf,
}

/// A unit as one input of a group: the file name (in the group's directory, ending in
/// `.c`) and its C text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInput {
    pub name: String,
    pub text: String,
}

/// What a group produced: each input's bitcode (in input order) and every file the group
/// read (absolute paths, the group's own directory left out).
#[derive(Debug)]
pub struct GroupOutput {
    pub bitcode: Vec<Vec<u8>>,
    pub inputs: Vec<PathBuf>,
}

impl Cc1Command {
    /// Asks the clang driver (`-###`) for the job it runs to compile a C file to bitcode
    /// with `flags` after the precompiled header `pch`, the way a unit alone is compiled
    /// (`clang::compile_source_within`).
    pub fn from_driver(
        flags: &[String],
        pch: Option<&Path>,
        limit: Duration,
    ) -> Result<Cc1Command> {
        Self::from_driver_for(flags, pch, limit, &["-emit-llvm", "-c"])
    }

    /// [`Cc1Command::from_driver`] for the driver's `action` (`-emit-llvm -c`, or `-E`).
    fn from_driver_for(
        flags: &[String],
        pch: Option<&Path>,
        limit: Duration,
        action: &[&str],
    ) -> Result<Cc1Command> {
        let scratch = clang::scratch_dir()?;
        let places = Placeholders {
            input: scratch.path().join("cpjit-placeholder.c"),
            output: scratch.path().join("cpjit-placeholder.bc"),
            depfile: scratch.path().join("cpjit-placeholder.d"),
        };
        // The driver checks that its input exists.
        std::fs::write(&places.input, b"")
            .map_err(|e| Error(format!("cannot write {}: {e}", places.input.display())))?;
        let mut args = vec!["-###".to_string()];
        args.extend(flags.iter().cloned());
        if let Some(pch) = pch {
            args.extend(clang::pch_use_flags(pch));
        }
        args.extend(action.iter().map(|a| a.to_string()));
        args.extend(clang::depfile_flags(&places.depfile));
        args.extend([
            places.input.display().to_string(),
            "-o".into(),
            places.output.display().to_string(),
        ]);
        let out = clang::run_captured(&clang::clang_program(), &args, None, limit, None)?;
        // `-###` prints the jobs on stderr.
        parse_job(&String::from_utf8_lossy(&out.stderr), &places).map_err(|why| {
            Error(format!(
                "the clang driver's job for one unit (`{} -### ...`) is not what a group \
                 compile needs: {why}",
                clang::clang_program()
            ))
        })
    }

    /// Compiles `inputs` in one process (each its own translation unit), within `limit`
    /// of wall time. Warnings are printed (without the wrappers' `In file included from`
    /// lines); errors are returned.
    pub fn compile_group(&self, inputs: &[GroupInput], limit: Duration) -> Result<GroupOutput> {
        let scratch = clang::scratch_dir()?;
        let dir = scratch.path();
        let mut seen = std::collections::HashSet::new();
        for input in inputs {
            let stem = input.name.strip_suffix(".c").unwrap_or_default();
            if stem.is_empty() || stem.contains(['/', '\\']) || !seen.insert(input.name.as_str()) {
                return Err(Error(format!(
                    "group input `{}`: the name must be a unique plain file name ending in `.c`",
                    input.name
                )));
            }
            let path = dir.join(&input.name);
            std::fs::write(&path, &input.text)
                .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))?;
        }
        let mut args = self.args.clone();
        // On stdout, not in a file: `-cc1` adds a dependency writer per input that writes at
        // the end of every later input (n(n+1)/2 writes for n inputs, the last the union),
        // which as a file is an `O_TRUNC` rewrite each time; on the pipe it is text to parse.
        args.extend([
            "-dependency-file".into(),
            "-".into(),
            "-MT".into(),
            "group".into(),
        ]);
        // Relative names: clang names each module after its input as given, so the
        // bitcode does not depend on the (random) directory.
        args.extend(inputs.iter().map(|i| i.name.clone()));
        let out = clang::run_captured(&self.program, &args, None, limit, Some(dir))?;
        let warnings = without_wrapper_lines(&String::from_utf8_lossy(&out.stderr), inputs);
        if !warnings.is_empty() {
            eprintln!("{warnings}");
        }
        let mut bitcode = Vec::with_capacity(inputs.len());
        for input in inputs {
            let stem = input.name.strip_suffix(".c").expect("checked above");
            let path = dir.join(format!("{stem}.bc"));
            let bytes = std::fs::read(&path).map_err(|e| {
                Error(format!(
                    "clang -cc1 wrote no bitcode for group input {} ({}: {e})",
                    input.name,
                    path.display()
                ))
            })?;
            bitcode.push(bytes);
        }
        let read = clang::parse_depfile(&String::from_utf8_lossy(&out.stdout)).map_err(|why| {
            Error(format!(
                "cannot read the dependency lists clang -cc1 wrote for a group of units \
                 (its stdout): {why}"
            ))
        })?;
        let inputs = read
            .into_iter()
            .map(|p| if p.is_absolute() { p } else { dir.join(p) })
            .filter(|p| !p.starts_with(dir))
            .collect();
        Ok(GroupOutput { bitcode, inputs })
    }
}

/// The `clang -cc1 -E` job of a flag set, which preprocesses many inputs in one process
/// (each its own translation unit), as the driver preprocesses one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preprocessor(Cc1Command);

impl Preprocessor {
    /// Asks the clang driver for its job preprocessing a C file with `flags` after the
    /// precompiled header `pch`.
    pub fn from_driver(flags: &[String], pch: Option<&Path>, limit: Duration) -> Result<Self> {
        Cc1Command::from_driver_for(flags, pch, limit, &["-E"]).map(Preprocessor)
    }

    /// The preprocessed text of each of `inputs` (with line markers), in one process within
    /// `limit`: clang writes them one after the other, each starting with its name's
    /// line marker.
    pub fn run(&self, inputs: &[GroupInput], limit: Duration) -> Result<Vec<String>> {
        let scratch = clang::scratch_dir()?;
        let dir = scratch.path();
        for input in inputs {
            let path = dir.join(&input.name);
            std::fs::write(&path, &input.text)
                .map_err(|e| Error(format!("cannot write {}: {e}", path.display())))?;
        }
        // No dependency file: nothing reads one here (the batch's text is the key), and
        // `-cc1` would rewrite it n(n+1)/2 times for n inputs (see `compile_group`).
        let mut args = self.0.args.clone();
        args.extend(inputs.iter().map(|i| i.name.clone()));
        let out = clang::run_captured(&self.0.program, &args, None, limit, Some(dir))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut starts = Vec::with_capacity(inputs.len());
        let mut from = 0;
        for input in inputs {
            let marker = format!("# 1 \"{}\"\n", input.name);
            let at = text[from..]
                .match_indices(&marker)
                .map(|(at, _)| from + at)
                .find(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')
                .ok_or_else(|| {
                    Error(format!(
                        "clang -cc1 -E wrote no text for input {} of a group",
                        input.name
                    ))
                })?;
            starts.push(at);
            from = at + marker.len();
        }
        Ok((0..starts.len())
            .map(|i| text[starts[i]..starts.get(i + 1).copied().unwrap_or(text.len())].to_string())
            .collect())
    }
}

/// The `clang -cc1` job that optimises front-end bitcode (`-x ir`) the way clang optimises a
/// unit compiled from C with the same flags: clang's `-O` pipeline, its tuning and target
/// options, so a module that is what the front end gives for a unit alone comes out as the
/// bitcode of that unit alone (see `batch_split`). Runs many modules in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Optimizer(Cc1Command);

impl Optimizer {
    /// Asks the clang driver for its job compiling bitcode to bitcode with `flags`.
    pub fn from_driver(flags: &[String], limit: Duration) -> Result<Optimizer> {
        let scratch = clang::scratch_dir()?;
        let input = scratch.path().join("cpjit-placeholder.in");
        let output = scratch.path().join("cpjit-placeholder.bc");
        std::fs::write(&input, b"")
            .map_err(|e| Error(format!("cannot write {}: {e}", input.display())))?;
        let mut args = vec!["-###".to_string()];
        args.extend(flags.iter().cloned());
        args.extend(["-emit-llvm".into(), "-c".into(), "-x".into(), "ir".into()]);
        args.extend([
            input.display().to_string(),
            "-o".into(),
            output.display().to_string(),
        ]);
        let out = clang::run_captured(&clang::clang_program(), &args, None, limit, None)?;
        let text = String::from_utf8_lossy(&out.stderr);
        let shape = |why: String| {
            Error(format!(
                "the clang driver's job for optimising bitcode (`{} -### ... -x ir`) is not \
                 what a batch needs: {why}",
                clang::clang_program()
            ))
        };
        let jobs: Vec<&str> = text.lines().filter(|l| l.starts_with(" \"")).collect();
        let [line] = jobs.as_slice() else {
            return Err(shape(format!("expected one job:\n{}", text.trim_end())));
        };
        let mut words = shlex::split(line).ok_or_else(|| shape(format!("unquoted: {line}")))?;
        if words.len() < 3
            || words[1] != "-cc1"
            || words.last() != Some(&input.display().to_string())
        {
            return Err(shape(format!("not `clang -cc1 ... <input>`: {line}")));
        }
        words.pop();
        let main = input.file_name().map(|n| n.to_string_lossy().into_owned());
        take_option(&mut words, "-o", Some(&output.display().to_string())).map_err(shape)?;
        take_option(&mut words, "-main-file-name", main.as_deref()).map_err(shape)?;
        let program = words.remove(0);
        Ok(Optimizer(Cc1Command {
            program,
            args: words,
        }))
    }

    /// Optimises each of `modules` (bitcode) in one process, within `limit`.
    pub fn run(&self, modules: &[Vec<u8>], limit: Duration) -> Result<Vec<Vec<u8>>> {
        let scratch = clang::scratch_dir()?;
        let dir = scratch.path();
        let mut names = Vec::with_capacity(modules.len());
        for (i, module) in modules.iter().enumerate() {
            let name = format!("m{i}.in");
            std::fs::write(dir.join(&name), module)
                .map_err(|e| Error(format!("cannot write {}: {e}", dir.join(&name).display())))?;
            names.push(name);
        }
        let mut args = self.0.args.clone();
        args.extend(names.iter().cloned());
        let out = clang::run_captured(&self.0.program, &args, None, limit, Some(dir))?;
        let warnings = String::from_utf8_lossy(&out.stderr);
        if !warnings.trim().is_empty() {
            eprintln!("{}", warnings.trim_end());
        }
        (0..modules.len())
            .map(|i| {
                let path = dir.join(format!("m{i}.bc"));
                std::fs::read(&path).map_err(|e| {
                    Error(format!(
                        "clang -cc1 wrote no optimised bitcode {}: {e}",
                        path.display()
                    ))
                })
            })
            .collect()
    }
}

/// The `-cc1` command in the driver's `-###` output `text` for a compile of `places`:
/// exactly one job, `-cc1`, with the placeholder input last and the placeholder output,
/// main-file name and dependency file each given once (all four are taken out). The error
/// says what was unexpected, with the job line.
pub fn parse_job(text: &str, places: &Placeholders) -> std::result::Result<Cc1Command, String> {
    // Job lines are the quoted command lines (the others are the version, the target,
    // the thread model, the installation directory and ` (in-process)`).
    let jobs: Vec<&str> = text.lines().filter(|l| l.starts_with(" \"")).collect();
    let [line] = jobs.as_slice() else {
        return Err(format!(
            "expected exactly one job, found {}:\n{}",
            jobs.len(),
            text.trim_end()
        ));
    };
    let mut words =
        shlex::split(line).ok_or_else(|| format!("the job line is not shell-quoted: {line}"))?;
    let shape = |why: &str| format!("{why} in the job line: {line}");
    if words.len() < 3 || words[1] != "-cc1" {
        return Err(shape("the job is not `clang -cc1`"));
    }
    let input = places.input.display().to_string();
    if words.last() != Some(&input) {
        return Err(shape(&format!(
            "the input `{input}` is not the last argument"
        )));
    }
    words.pop();
    let main_file = places
        .input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for (option, value) in [
        ("-o", Some(places.output.display().to_string())),
        ("-main-file-name", Some(main_file)),
        (
            "-dependency-file",
            Some(places.depfile.display().to_string()),
        ),
        ("-MT", None),
    ] {
        take_option(&mut words, option, value.as_deref()).map_err(|why| shape(&why))?;
    }
    let program = words.remove(0);
    Ok(Cc1Command {
        program,
        args: words,
    })
}

/// Removes `option` and its value from `words`; it must occur exactly once, with the value
/// `expected` when given.
fn take_option(
    words: &mut Vec<String>,
    option: &str,
    expected: Option<&str>,
) -> std::result::Result<(), String> {
    let at: Vec<usize> = (0..words.len()).filter(|&i| words[i] == option).collect();
    let [i] = at.as_slice() else {
        return Err(format!(
            "`{option}` occurs {} times, expected once",
            at.len()
        ));
    };
    let value = words
        .get(i + 1)
        .ok_or_else(|| format!("`{option}` has no value"))?;
    if let Some(want) = expected {
        if value != want {
            return Err(format!("`{option}` is `{value}`, expected `{want}`"));
        }
    }
    words.drain(*i..i + 2);
    Ok(())
}

/// The input name of a unit labelled `label` (its path relative to the set, or a family
/// member's stencil name): readable, unique (a hash of the label), the same in every group.
pub fn input_name(label: &str) -> String {
    let readable: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = Sha256::digest(label.as_bytes());
    format!("{readable}-{}.c", crate::cache::hex(&digest[..4]))
}

/// The input text that compiles `source` (an absolute path) with `defines` (`NAME=VALUE`
/// or `NAME`, as given to `-D`), or `None` when they cannot be written as C (a line break
/// in a define, a `"` or line break in the path, a path that is not UTF-8): such a unit is
/// compiled alone.
pub fn wrapper(source: &Path, defines: &[String]) -> Option<String> {
    let path = source.to_str()?;
    if path.contains(['"', '\n', '\r']) || !source.is_absolute() {
        return None;
    }
    let mut text = String::from("/* One unit of a group compile (generated by cpjit). */\n");
    for define in defines {
        if define.contains(['\n', '\r']) {
            return None;
        }
        // `-DNAME=VALUE` is `#define NAME VALUE`, `-DNAME` is `#define NAME 1`.
        match define.split_once('=') {
            Some((name, value)) => text.push_str(&format!("#define {name} {value}\n")),
            None => text.push_str(&format!("#define {define} 1\n")),
        }
    }
    // Header names are taken literally (no escapes), so the path is written as it is.
    text.push_str(&format!("#include \"{path}\"\n"));
    Some(text)
}

/// `stderr` without the `In file included from <input>:<line>:` lines that name a group's
/// generated inputs (each unit's own diagnostics then read as if it was compiled alone).
fn without_wrapper_lines(stderr: &str, inputs: &[GroupInput]) -> String {
    stderr
        .lines()
        .filter(|line| {
            !line
                .strip_prefix("In file included from ")
                .is_some_and(|rest| {
                    inputs.iter().any(|i| {
                        rest.strip_prefix(i.name.as_str())
                            .is_some_and(|r| r.starts_with(':'))
                    })
                })
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Placeholders {
        Placeholders {
            input: "/tmp/s/cpjit-placeholder.c".into(),
            output: "/tmp/s/cpjit-placeholder.bc".into(),
            depfile: "/tmp/s/cpjit-placeholder.d".into(),
        }
    }

    const JOB: &str = r#"Debian clang version 19.1.7 (3~deb12u1)
Target: x86_64-example-linux-gnu
Thread model: posix
InstalledDir: /usr/lib/llvm-19/bin
 (in-process)
 "/usr/lib/llvm-19/bin/clang" "-cc1" "-triple" "x86_64-example-linux-gnu" "-emit-llvm-bc" "-main-file-name" "cpjit-placeholder.c" "-fdebug-compilation-dir=/w/my dir" "-dependency-file" "/tmp/s/cpjit-placeholder.d" "-MT" "/tmp/s/cpjit-placeholder.bc" "-sys-header-deps" "-I" "/t/inc" "-D" "Q=\"a\\b\"" "-O2" "-o" "/tmp/s/cpjit-placeholder.bc" "-x" "c" "/tmp/s/cpjit-placeholder.c"
"#;

    #[test]
    fn the_driver_job_loses_its_input_output_and_dependency_options() {
        let job = parse_job(JOB, &places()).unwrap();
        assert_eq!(job.program, "/usr/lib/llvm-19/bin/clang");
        assert_eq!(
            job.args,
            [
                "-cc1",
                "-triple",
                "x86_64-example-linux-gnu",
                "-emit-llvm-bc",
                "-fdebug-compilation-dir=/w/my dir",
                "-sys-header-deps",
                "-I",
                "/t/inc",
                "-D",
                "Q=\"a\\b\"",
                "-O2",
                "-x",
                "c"
            ]
        );
    }

    #[test]
    fn a_malformed_driver_job_is_a_clear_error() {
        let two = format!("{JOB}{}", JOB.lines().last().unwrap());
        let err = parse_job(&two, &places()).unwrap_err();
        assert!(
            err.starts_with("expected exactly one job, found 2"),
            "{err}"
        );
        let none = "clang version 19\nTarget: x\n";
        assert!(parse_job(none, &places())
            .unwrap_err()
            .starts_with("expected exactly one job, found 0"));
        let not_cc1 = JOB.replace("\"-cc1\"", "\"-cc2\"");
        let err = parse_job(&not_cc1, &places()).unwrap_err();
        assert!(
            err.starts_with("the job is not `clang -cc1` in the job line:"),
            "{err}"
        );
        let moved = JOB.replace(
            "\"-x\" \"c\" \"/tmp/s/cpjit-placeholder.c\"",
            "\"/tmp/s/cpjit-placeholder.c\" \"-x\" \"c\"",
        );
        assert!(parse_job(&moved, &places())
            .unwrap_err()
            .starts_with("the input `/tmp/s/cpjit-placeholder.c` is not the last argument"));
        let no_output = JOB.replace("\"-o\" \"/tmp/s/cpjit-placeholder.bc\" ", "");
        assert!(parse_job(&no_output, &places())
            .unwrap_err()
            .starts_with("`-o` occurs 0 times, expected once"));
        let other_dep = JOB.replace("cpjit-placeholder.d", "elsewhere.d");
        let err = parse_job(&other_dep, &places()).unwrap_err();
        assert!(
            err.starts_with(
                "`-dependency-file` is `/tmp/s/elsewhere.d`, expected `/tmp/s/cpjit-placeholder.d`"
            ),
            "{err}"
        );
        let unquoted = JOB.replace("\"-O2\"", "\"-O2");
        assert!(parse_job(&unquoted, &places())
            .unwrap_err()
            .starts_with("the job line is not shell-quoted"));
    }

    #[test]
    fn the_driver_gives_a_cc1_job_for_real_flags() {
        let job = Cc1Command::from_driver(&["-O2".into()], None, Duration::from_secs(60)).unwrap();
        assert_eq!(job.args[0], "-cc1");
        assert!(job.args.iter().any(|a| a == "-O2"), "{job:?}");
        assert!(
            !job.args.iter().any(|a| a.contains("cpjit-placeholder")),
            "{job:?}"
        );
    }

    #[test]
    fn wrappers_define_then_include_and_names_are_stable_and_unique() {
        let text = wrapper(
            Path::new("/set/vm/ops.c"),
            &["CPJIT_OP=add".into(), "FLAG".into(), "F(x)=(x)+1".into()],
        )
        .unwrap();
        assert!(text.ends_with(
            "#define CPJIT_OP add\n#define FLAG 1\n#define F(x) (x)+1\n#include \"/set/vm/ops.c\"\n"
        ));
        assert_eq!(wrapper(Path::new("/set/a\"b.c"), &[]), None);
        assert_eq!(wrapper(Path::new("rel/a.c"), &[]), None);
        assert_eq!(wrapper(Path::new("/a.c"), &["X=1\n2".into()]), None);
        let a = input_name("vm/ops.c");
        assert!(a.starts_with("vm_ops_c-") && a.ends_with(".c"), "{a}");
        assert_eq!(a, input_name("vm/ops.c"));
        assert_ne!(input_name("a/b_c.c"), input_name("a_b/c.c"));
    }

    #[test]
    fn a_group_compiles_each_input_as_its_own_unit_with_the_union_of_dependencies() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("one.h"), "#define ONE 1\n").unwrap();
        std::fs::write(root.join("two.h"), "#define TWO 2\n").unwrap();
        // Both define `f` and a static `h`: separate translation units, no clash.
        std::fs::write(
            root.join("a.c"),
            "#include \"one.h\"\nstatic int h(int x) { return x + ONE; }\nint f(int x) { return h(x) * K; }\n",
        )
        .unwrap();
        std::fs::write(
            root.join("b.c"),
            "#include \"two.h\"\nstatic int h(int x) { return x - TWO; }\nint f(int x) { return h(x); }\n",
        )
        .unwrap();
        let flags = vec!["-O2".to_string()];
        let limit = Duration::from_secs(120);
        let job = Cc1Command::from_driver(&flags, None, limit).unwrap();
        let inputs = vec![
            GroupInput {
                name: input_name("a.c (K=3)"),
                text: wrapper(&root.join("a.c"), &["K=3".into()]).unwrap(),
            },
            GroupInput {
                name: input_name("b.c"),
                text: wrapper(&root.join("b.c"), &[]).unwrap(),
            },
        ];
        let out = job.compile_group(&inputs, limit).unwrap();
        assert_eq!(out.bitcode.len(), 2);
        let mut want: Vec<PathBuf> = ["a.c", "one.h", "b.c", "two.h"]
            .iter()
            .map(|f| root.join(f))
            .collect();
        let mut got = out.inputs.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "the union, without the generated inputs");
        // Each module is what its unit alone gives (the same source, the -D on the command
        // line), but for its source_filename.
        let context = inkwell::context::Context::create();
        for (input, (unit, defines)) in inputs
            .iter()
            .zip([("a.c", vec!["-DK=3".to_string()]), ("b.c", vec![])])
        {
            let mut alone_flags = flags.clone();
            alone_flags.extend(defines);
            let alone =
                clang::compile_source_within(&alone_flags, &root.join(unit), None, limit).unwrap();
            let grouped = &out.bitcode[inputs.iter().position(|i| i == input).unwrap()];
            let text = |bc: &[u8]| {
                let m = crate::llvm::parse_bitcode(&context, bc, "t").unwrap();
                m.set_source_file_name("x");
                m.print_to_string().to_string()
            };
            assert_eq!(text(grouped), text(&alone.bitcode), "{unit}");
        }
        // A unit with an error fails the group, naming its own file and line.
        std::fs::write(root.join("b.c"), "int f(int x) {\n  return x +;\n}\n").unwrap();
        let err = job.compile_group(&inputs, limit).unwrap_err().0;
        assert!(err.contains("b.c:2:"), "{err}");
    }
}
