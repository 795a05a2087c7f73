//! The `pyvm` group: the reference VM against CPython and PyPy, as a user would compare them.
//! Every example program has a Python version (`examples/<name>.py`: same algorithm, same
//! output as `<name>.expected`). Per example, one round runs each of these once, in this
//! order, and the rounds alternate (1 warm-up round, then the timed rounds):
//!
//! - `cpjit interp` and `cpjit jit`: `Vm::run` from a fresh VM in this process (parse
//!   excluded; tier-up, tracing and compiles included), as the `exec` group times it;
//! - `LLVM -O2`: the same in `jit` mode with LLVM -O2 as the VM's trace compiler
//!   ([`LlvmTraceCompiler`]), as the `peer` group runs it; its ratio to `jit` is taken with
//!   the compile time excluded on both sides (LLVM's compiles cost thousands of times more);
//! - the `cpjit-vm` binary in `interp` and `jit` mode as a child process: whole-process time,
//!   spawn to exit;
//! - `python3` and `pypy3` (each if present; the interpreter itself, `sys.executable`, so
//!   that a launcher such as a pyenv shim is not timed): one fresh process per run, running
//!   `bench/python/timed_main.py`, which calls the program's `main()` once and writes its
//!   in-process time (`time.perf_counter_ns`, interpreter start-up and loading the program
//!   excluded) and output to a JSON file; the bench also times the process, spawn to exit.
//!
//! One run per fresh process or VM, so every figure includes the runner's warm-up (tracing
//! and compiling for cpjit, PyPy's JIT warm-up), as a user running the program once sees it.
//! Every run's output is checked against `examples/<name>.expected`. Ratios to `jit` are per
//! round (in-process ÷ `cpjit jit` in-process; whole process ÷ `cpjit-vm --mode jit`).

use crate::examples::{self, Example};
use crate::exec;
use crate::harness::{alternate, ratios, Measured, Rounds, Timed};
use crate::peer::Level;
use crate::peer_compiler::LlvmTraceCompiler;
use crate::peer_vm::{self, VmIr};
use crate::results::PyVmRow;
use cpjit_vm::{Config, Mode};
use serde::Deserialize;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

/// The Python interpreters the group compares with, by command name.
pub const PYTHONS: [&str; 2] = ["python3", "pypy3"];

/// What `bench/python/timed_main.py` writes.
#[derive(Debug, Deserialize)]
pub struct DriverReport {
    /// `sys.implementation.name`: `cpython`, `pypy`, ...
    pub implementation: String,
    /// `sys.implementation.version`, e.g. `7.3.11` for PyPy, `3.11.7` for CPython.
    pub implementation_version: String,
    pub runs: Vec<DriverRun>,
}

/// One call of the program's `main()`.
#[derive(Debug, Deserialize)]
pub struct DriverRun {
    /// In-process time of the call.
    pub ns: u64,
    /// What it printed, then `error: <message>` if it raised.
    pub output: String,
}

impl DriverReport {
    /// The runner's name in the tables, e.g. `CPython 3.11.7`, `PyPy 7.3.11`.
    pub fn label(&self) -> String {
        match self.implementation.as_str() {
            "cpython" => format!("CPython {}", self.implementation_version),
            "pypy" => format!("PyPy {}", self.implementation_version),
            other => format!("{other} {}", self.implementation_version),
        }
    }
}

/// The interpreter `python` (a command on `PATH`) runs as: its `sys.executable`, or `None`
/// if it does not run. The bench times that file, not a launcher in front of it (a pyenv
/// shim is a shell script that adds hundreds of milliseconds to every start).
pub fn executable(python: &str) -> Option<PathBuf> {
    let out = Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    path.is_file().then_some(path)
}

/// `program` (an example's `.py`) run once by `python` through the driver in a fresh process;
/// returns the process's wall time (ns) and the driver's report of the run, whose output must
/// be `expected`.
pub fn run_python(
    python: &Path,
    driver: &Path,
    program: &Path,
    expected: &str,
    json: &Path,
) -> Result<(f64, DriverReport), String> {
    let _ = std::fs::remove_file(json); // a stale report must not pass for this run's
    let mut cmd = Command::new(python);
    // -B: no `__pycache__` next to the examples; every process compiles the program afresh.
    cmd.arg("-B").arg(driver).arg(program).arg(json).arg("1");
    let start = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", python.display()))?;
    let whole = start.elapsed().as_nanos() as f64;
    let what = format!(
        "`{} {}` on {}",
        python.display(),
        driver.display(),
        program.display()
    );
    if !out.status.success() {
        return Err(format!(
            "{what}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text =
        std::fs::read_to_string(json).map_err(|e| format!("{what}: {}: {e}", json.display()))?;
    let report: DriverReport =
        serde_json::from_str(&text).map_err(|e| format!("{what}: {}: {e}", json.display()))?;
    let [run] = report.runs.as_slice() else {
        return Err(format!(
            "{what}: {} run(s) in {}, asked for 1",
            report.runs.len(),
            json.display()
        ));
    };
    if run.output != expected {
        return Err(format!(
            "{what} printed\n{}\nexpected\n{expected}",
            run.output
        ));
    }
    Ok((whole, report))
}

/// The `cpjit-vm` binary running `program` (a `.vm`) once in `mode`: the process's wall time
/// (ns). Its output must be `expected`: what it printed, then `error: <message>` where it
/// stopped with a runtime error (exit status 1, `<file>: <message>` on stderr).
pub fn run_vm_binary(vm: &Path, program: &Path, mode: &str, expected: &str) -> Result<f64, String> {
    let file = program.display().to_string();
    let start = Instant::now();
    let out = Command::new(vm)
        .args(["run", &file, "--mode", mode])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", vm.display()))?;
    let whole = start.elapsed().as_nanos() as f64;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
    match out.status.code() {
        Some(0) => {}
        Some(1) => match stderr.strip_prefix(&format!("{file}: ")) {
            Some(message) => printed.push_str(&format!("error: {message}")),
            None => return Err(format!("`cpjit-vm run {file} --mode {mode}`: {stderr}")),
        },
        _ => {
            return Err(format!(
                "`cpjit-vm run {file} --mode {mode}`: {}\n{stderr}",
                out.status
            ))
        }
    }
    if printed != expected {
        return Err(format!(
            "`cpjit-vm run {file} --mode {mode}` printed\n{printed}\nexpected\n{expected}"
        ));
    }
    Ok(whole)
}

/// Where the group finds its programs and tools.
pub struct Setup {
    /// The workspace root (`examples/`, `bench/python/timed_main.py`).
    pub root: PathBuf,
    /// The `cpjit-vm` binary.
    pub vm: PathBuf,
}

/// Runs the group over every example; peers that are missing are listed in `skipped`.
pub fn run(
    setup: &Setup,
    quick: bool,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<PyVmRow>, String> {
    if !setup.vm.is_file() {
        return Err(format!(
            "no cpjit-vm binary at {} (`cargo build --release -p cpjit-vm`; `cargo xtask bench` builds it)",
            setup.vm.display()
        ));
    }
    let mut pythons: Vec<PathBuf> = Vec::new();
    for p in PYTHONS {
        match executable(p) {
            Some(path) => pythons.push(path),
            None => {
                let how = if p == "pypy3" {
                    "`bash ci/setup.sh --bench` installs it (`cargo xtask bench` runs it)"
                } else {
                    "`bash ci/setup.sh` installs it"
                };
                skipped.push((format!("pyvm: {p}"), format!("`{p}` does not run; {how}")));
            }
        }
    }
    let ir = VmIr::load(&setup.root)?;
    let scratch = std::env::temp_dir().join(format!("cpjit-bench-pyvm-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let (warmup, runs) = if quick { (1, 1) } else { (1, 5) };
    let mut rows = Vec::new();
    for ex in examples::load(&setup.root.join("vm/examples"))? {
        let example = ExampleRun {
            setup,
            ex: &ex,
            ir: &ir,
            pythons: &pythons,
            scratch: &scratch,
        };
        rows.extend(example.rounds(warmup, runs)?);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(rows)
}

/// One example's alternated rounds.
struct ExampleRun<'a> {
    setup: &'a Setup,
    ex: &'a Example,
    ir: &'a VmIr,
    /// The interpreters' executables.
    pythons: &'a [PathBuf],
    scratch: &'a Path,
}

/// The in-process runs' columns of the combined rounds (see [`ExampleRun::rounds`]).
const INTERP: usize = 0;
const JIT: usize = 1;
const JIT_EXCL: usize = 2;
const LLVM: usize = 3;
const LLVM_EXCL: usize = 4;
const VM_INTERP: usize = 5;
const VM_JIT: usize = 6;
/// Python interpreter `k`'s in-process and whole-process columns are `PY + 2k` and `PY + 2k + 1`.
const PY: usize = 7;

impl ExampleRun<'_> {
    /// Times every runner alternately and returns one row per runner.
    fn rounds(&self, warmup: usize, runs: usize) -> Result<Vec<PyVmRow>, String> {
        let (ex, name) = (self.ex, &self.ex.name);
        let vm_file = self.setup.root.join(format!("vm/examples/{name}.vm"));
        let py_file = self.setup.root.join(format!("vm/examples/{name}.py"));
        if !py_file.is_file() {
            return Err(format!(
                "vm/examples/{name}.vm has no Python version ({} is missing)",
                py_file.display()
            ));
        }
        let driver = self.setup.root.join("bench/python/timed_main.py");
        // Each op returns one time to `alternate`; a second figure from the same run (compile
        // excluded, or the Python run's in-process time) goes here, one entry per call.
        let second: Vec<RefCell<Vec<f64>>> = (0..2 + self.pythons.len())
            .map(|_| RefCell::new(Vec::new()))
            .collect();
        let labels: Vec<RefCell<String>> = self
            .pythons
            .iter()
            .map(|p| RefCell::new(p.display().to_string()))
            .collect();
        let mut ops = vec![
            Timed::new(warmup, runs, || {
                Ok(exec::run_once(ex, Mode::Interp, "interp")?.1)
            }),
            Timed::new(warmup, runs, || {
                let (stats, t) = exec::run_once(ex, Mode::Jit, "jit")?;
                second[0]
                    .borrow_mut()
                    .push(t.wall - stats.compile_time.as_nanos() as f64);
                Ok(t)
            }),
            Timed::new(warmup, runs, || {
                let (exec_ns, compile_ns) = self.llvm_o2()?;
                second[1].borrow_mut().push(exec_ns);
                Ok(Measured::wall_only(exec_ns + compile_ns))
            }),
            Timed::new(warmup, runs, || {
                run_vm_binary(&self.setup.vm, &vm_file, "interp", &ex.expected)
                    .map(Measured::wall_only)
            }),
            Timed::new(warmup, runs, || {
                run_vm_binary(&self.setup.vm, &vm_file, "jit", &ex.expected)
                    .map(Measured::wall_only)
            }),
        ];
        for (k, python) in self.pythons.iter().enumerate() {
            let (driver, py_file, second, label) = (&driver, &py_file, &second, &labels[k]);
            let json = self.scratch.join(format!("python-{k}.json"));
            ops.push(Timed::new(warmup, runs, move || {
                let (whole, report) = run_python(python, driver, py_file, &ex.expected, &json)?;
                second[2 + k].borrow_mut().push(report.runs[0].ns as f64);
                *label.borrow_mut() = report.label();
                Ok(Measured::wall_only(whole))
            }));
        }
        let timed = alternate(&mut ops)?;
        drop(ops);
        // The combined rounds, columns as the constants above say.
        let mut second: Vec<Vec<Option<Measured>>> = second
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .split_off(warmup)
                    .into_iter()
                    .map(|ns| Some(Measured::wall_only(ns)))
                    .collect()
            })
            .collect();
        let mut op = timed.0.into_iter();
        let mut next = || op.next().expect("one column per op");
        let mut cols = vec![next(), next(), std::mem::take(&mut second[0])];
        cols.extend([next(), std::mem::take(&mut second[1]), next(), next()]);
        for k in 0..self.pythons.len() {
            cols.extend([std::mem::take(&mut second[2 + k]), next()]);
        }
        let r = Rounds(cols);
        Ok(self.rows(&r, labels.into_iter().map(RefCell::into_inner).collect()))
    }

    /// One run in `jit` mode with LLVM -O2 as the trace compiler: (time outside compiles,
    /// compile time) in ns. Fails on wrong output or a failed compile.
    fn llvm_o2(&self) -> Result<(f64, f64), String> {
        let llvm = Rc::new(LlvmTraceCompiler::new(
            self.ir.context,
            self.ir.lib.clone(),
            Level::O2,
        ));
        let config = Config {
            mode: Mode::Jit,
            compiler: Some(llvm.clone()),
            ..Config::default()
        };
        let (stats, exec) = peer_vm::run_once(self.ex, config, "LLVM -O2")?;
        let exec_ns = exec.wall;
        let name = &self.ex.name;
        if let Some(e) = llvm.error() {
            return Err(format!("vm/examples/{name}.vm: {e}"));
        }
        if stats.compile_failures != 0 {
            return Err(format!(
                "vm/examples/{name}.vm with LLVM -O2: {} failed compile(s)",
                stats.compile_failures
            ));
        }
        Ok((exec_ns, stats.compile_time.as_nanos() as f64))
    }

    fn rows(&self, r: &Rounds, python_labels: Vec<String>) -> Vec<PyVmRow> {
        let row = |runner: String, in_process: usize| PyVmRow {
            example: self.ex.name.clone(),
            runner,
            in_process: r.sample(in_process, 1),
            compile_excluded: None,
            vs_jit: ratios(r, in_process, JIT),
            whole_process: None,
            whole_vs_jit: None,
        };
        let whole = |mut row: PyVmRow, col: usize| {
            row.whole_process = Some(r.sample(col, 1));
            row.whole_vs_jit = ratios(r, col, VM_JIT);
            row
        };
        let mut rows = vec![
            whole(row("cpjit interp".into(), INTERP), VM_INTERP),
            PyVmRow {
                compile_excluded: Some(r.sample(JIT_EXCL, 1)),
                vs_jit: None,
                ..whole(row("cpjit jit".into(), JIT), VM_JIT)
            },
            PyVmRow {
                compile_excluded: Some(r.sample(LLVM_EXCL, 1)),
                vs_jit: ratios(r, LLVM_EXCL, JIT_EXCL),
                ..row("LLVM -O2".into(), LLVM)
            },
        ];
        for (k, label) in python_labels.into_iter().enumerate() {
            rows.push(whole(row(label, PY + 2 * k), PY + 2 * k + 1));
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        crate::root()
    }

    /// `python`'s executable if it runs; a missing `python3` fails under CI (`CI=true`),
    /// where `ci/setup.sh` installs it, and is skipped with the reason elsewhere.
    fn usable(python: &str) -> Option<PathBuf> {
        if let Some(path) = executable(python) {
            return Some(path);
        }
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !(ci && python == "python3"),
            "CI=true but `python3` does not run: `bash ci/setup.sh` installs it"
        );
        eprintln!("skipped: `{python}` is not installed (`bash ci/setup.sh --bench` installs it)");
        None
    }

    fn example_names(ext: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root().join("vm/examples"))
            .unwrap()
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(ext).map(String::from)
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_example_has_a_python_version_and_every_python_version_an_example() {
        let (vm, py) = (example_names(".vm"), example_names(".py"));
        assert!(vm.len() >= 9, "{vm:?}");
        assert_eq!(vm, py, "vm/examples/*.vm and vm/examples/*.py differ");
    }

    /// `python examples/<name>.py` prints `<name>.expected`, for every example, run as a user
    /// would (the programs run in parallel: CPython takes seconds on some).
    fn python_versions_print_the_expected_output(python: &str) {
        if usable(python).is_none() {
            return;
        }
        let dir = root().join("vm/examples");
        let children: Vec<(String, std::process::Child)> = example_names(".py")
            .into_iter()
            .map(|name| {
                let child = Command::new(python)
                    .arg("-B")
                    .arg(dir.join(format!("{name}.py")))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
                (name, child)
            })
            .collect();
        let mut failures = Vec::new();
        for (name, child) in children {
            let out = child.wait_with_output().unwrap();
            let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
            let printed = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || printed != expected {
                failures.push(format!(
                    "{python} examples/{name}.py: {}\n{printed}{}expected\n{expected}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn cpython_runs_every_examples_python_version_to_its_expected_output() {
        python_versions_print_the_expected_output("python3");
    }

    #[test]
    fn pypy_runs_every_examples_python_version_to_its_expected_output() {
        python_versions_print_the_expected_output("pypy3");
    }

    /// A scratch directory of its own for each test.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cpjit-pyvm-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_driver_reports_each_runs_time_and_output_and_an_error_as_the_vm_does() {
        for python in PYTHONS {
            let Some(exe) = usable(python) else {
                continue;
            };
            let dir = scratch(&format!("driver-{python}"));
            let program = dir.join("p.py");
            // A program whose main prints, counts its calls, and raises on the second call;
            // its `__main__` block must not run under the driver.
            std::fs::write(
                &program,
                "calls = []\n\
                 def main():\n    calls.append(1)\n    print('n', len(calls))\n    \
                 if len(calls) == 2:\n        raise OverflowError('line 1:2 in main: too big')\n\
                 if __name__ == '__main__':\n    print('not under the driver')\n",
            )
            .unwrap();
            let json = dir.join("out.json");
            let driver = root().join("bench/python/timed_main.py");
            let out = Command::new(python)
                .arg("-B")
                .arg(&driver)
                .arg(&program)
                .arg(&json)
                .arg("2")
                .output()
                .unwrap();
            assert!(out.status.success(), "{python}: {out:?}");
            assert!(out.stdout.is_empty(), "{python}: {out:?}");
            let report: DriverReport =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let outputs: Vec<&str> = report.runs.iter().map(|r| r.output.as_str()).collect();
            assert_eq!(
                outputs,
                ["n 1\n", "n 2\nerror: line 1:2 in main: too big\n"],
                "{python}"
            );
            assert!(report.runs.iter().all(|r| r.ns > 0), "{report:?}");
            let expected = if python == "pypy3" {
                "PyPy "
            } else {
                "CPython 3."
            };
            assert!(report.label().starts_with(expected), "{}", report.label());
            // run_python checks the output and that exactly one run was made.
            let (whole, _) = run_python(&exe, &driver, &program, "n 1\n", &json).unwrap();
            assert!(whole > 0.0);
            let wrong = run_python(&exe, &driver, &program, "n 2\n", &json).unwrap_err();
            assert!(wrong.contains("printed\nn 1\n\nexpected\nn 2\n"), "{wrong}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    /// A stand-in for `cpjit-vm` (a shell script): prints `stdout`, then `stderr`, exits with
    /// `code`, as `cpjit-vm run FILE --mode MODE` does.
    #[cfg(unix)]
    fn fake_vm(dir: &Path, stdout: &str, stderr: &str, code: i32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(format!("vm-{code}"));
        std::fs::write(
            &path,
            format!("#!/bin/sh\nprintf '{stdout}'\nprintf '{stderr}' >&2\nexit {code}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn a_vm_binarys_runtime_error_is_its_outputs_error_line() {
        let dir = scratch("vm-binary");
        let program = dir.join("p.vm");
        let file = program.display().to_string();
        // Exit status 1: a runtime error, `<file>: <message>` on stderr.
        let vm = fake_vm(
            &dir,
            "1 2\\n",
            &format!("{file}: line 3:4 in main: E\\n"),
            1,
        );
        let expected = "1 2\nerror: line 3:4 in main: E\n";
        assert!(run_vm_binary(&vm, &program, "jit", expected).unwrap() > 0.0);
        let wrong = run_vm_binary(&vm, &program, "jit", "1 2\n").unwrap_err();
        assert!(wrong.contains("printed\n1 2\nerror: line 3:4"), "{wrong}");
        // Exit status 2: the VM could not run the program at all.
        let vm = fake_vm(&dir, "", "cpjit-vm: bad flag\\n", 2);
        let err = run_vm_binary(&vm, &program, "jit", "").unwrap_err();
        assert!(
            err.contains("--mode jit`: exit status: 2\ncpjit-vm: bad flag"),
            "{err}"
        );
        // A missing binary is named.
        let err = run_vm_binary(&dir.join("none"), &program, "jit", "").unwrap_err();
        assert!(err.contains("cannot run") && err.contains("none"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_driver_names_what_is_wrong_with_its_arguments() {
        let Some(python3) = usable("python3") else {
            return;
        };
        let dir = scratch("driver-args");
        let driver = root().join("bench/python/timed_main.py");
        let json = dir.join("out.json");
        let missing = dir.join("missing.py");
        let no_main = dir.join("no_main.py");
        std::fs::write(&no_main, "x = 1\n").unwrap();
        let cases: [(&Path, &str, &str); 3] = [
            (&missing, "1", "cannot read"),
            (&no_main, "1", "has no main() function"),
            (&no_main, "0", "RUNS must be at least 1, not 0"),
        ];
        for (program, runs, message) in cases {
            let out = Command::new(&python3)
                .arg(&driver)
                .arg(program)
                .arg(&json)
                .arg(runs)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(message),
                "{stderr}"
            );
        }
        // A report that is not there is an error naming the file.
        let err = run_python(&python3, &driver, &missing, "", &json).unwrap_err();
        assert!(
            err.contains("cannot read") && err.contains("missing.py"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
