//! The `pyvm` group: the reference VM against CPython and PyPy, as a user would compare them.
//! Every example program has a Python version (`examples/<name>.py`: same algorithm, same
//! output as `<name>.expected`). The group runs the examples at their real sizes
//! (`vm/examples/real-sizes.json`: PyPy runs each for at least half a second; the output
//! checked against `vm/examples/real/<name>.expected`), and measures start-up apart:
//!
//! - start-up ([`STARTUP`]): the `cpjit-vm` binary and each of `python3` and `pypy3` (the
//!   interpreter itself, `sys.executable`, so that a launcher such as a pyenv shim is not
//!   timed) running an empty program as a fresh process, spawn to exit;
//! - steady state, per example, in-process CPU time (one round runs each once, in this
//!   order; the rounds alternate, 1 warm-up round, then the timed rounds): `cpjit jit`
//!   (`Vm::run` from a fresh VM in this process, parse excluded; tier-up, tracing and
//!   compiles included, and excluded in a second figure); `LLVM -O2`: the same with LLVM -O2
//!   as the VM's trace compiler, compiling the very lowering copy-and-patch stitches
//!   ([`PeerLowering::Same`]), its ratio to `jit` taken with the compile time excluded on
//!   both sides (LLVM's compiles cost thousands of times more); and `pypy3` in a fresh
//!   process running `bench/python/timed_main.py`, which calls the program's `main()` once
//!   and writes its CPU time (`time.process_time_ns`, start-up and loading the program
//!   excluded, PyPy's JIT warm-up included) and output to a JSON file. CPython and
//!   `cpjit interp` would take minutes per run at these sizes and run start-up only.
//!
//! Every run's output is checked. Ratios to `jit` are per round.

use crate::examples::{self, Example};
use crate::exec;
use crate::harness::{alternate, ratios, Measured, Rounds, Timed};
use crate::peer::Level;
use crate::peer_compiler::{LlvmTraceCompiler, PeerLowering};
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
    /// In-process CPU time of the call (the process's, its JIT's work included; the
    /// driver's `ns`, the wall clock, is not read).
    pub cpu_ns: u64,
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

/// The interpreters the examples at their real sizes run on (CPython takes minutes there);
/// every one of [`PYTHONS`] runs the empty program.
pub const TIMED_PYTHONS: [&str; 1] = ["pypy3"];

/// The example whose rows are start-up: an empty program, each runner a fresh process.
pub const STARTUP: &str = "(start-up: empty program)";

/// Runs the group: start-up, then every example at its real size; peers that are missing
/// are listed in `skipped`.
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
    let mut pythons: Vec<(&str, PathBuf)> = Vec::new();
    for p in PYTHONS {
        match executable(p) {
            Some(path) => pythons.push((p, path)),
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
    skipped.push((
        "pyvm: CPython and `cpjit interp` at real sizes".into(),
        "each would take minutes per run; CPython runs the empty program (start-up)".into(),
    ));
    let ir = VmIr::load(&setup.root)?;
    let scratch = std::env::temp_dir().join(format!("cpjit-bench-pyvm-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let (warmup, runs) = if quick { (0, 1) } else { (1, 5) };
    let all: Vec<PathBuf> = pythons.iter().map(|(_, p)| p.clone()).collect();
    let empty = Example {
        name: STARTUP.into(),
        program: cpjit_vm::parse(EMPTY_VM).map_err(|e| format!("the empty program: {e}"))?,
        expected: String::new(),
        vm_source: EMPTY_VM.into(),
        py_source: EMPTY_PY.into(),
    };
    let mut rows = ExampleRun {
        setup,
        ex: &empty,
        ir: &ir,
        pythons: &all,
        scratch: &scratch,
    }
    .startup_rounds(warmup, runs)?;
    let timed: Vec<PathBuf> = pythons
        .iter()
        .filter(|(p, _)| TIMED_PYTHONS.contains(p))
        .map(|(_, path)| path.clone())
        .collect();
    for ex in examples::load_real(&setup.root.join("vm/examples"))? {
        let example = ExampleRun {
            setup,
            ex: &ex,
            ir: &ir,
            pythons: &timed,
            scratch: &scratch,
        };
        rows.extend(example.rounds(warmup, runs)?);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(rows)
}

/// The empty program in both languages: what start-up runs.
const EMPTY_VM: &str = "func main()\n  const none; return\nend\n";
const EMPTY_PY: &str = "def main():\n    pass\n";

/// One example's alternated rounds.
struct ExampleRun<'a> {
    setup: &'a Setup,
    ex: &'a Example,
    ir: &'a VmIr,
    /// The interpreters' executables.
    pythons: &'a [PathBuf],
    scratch: &'a Path,
}

/// The columns of an example's combined rounds (see [`ExampleRun::rounds`]): in-process CPU
/// time, compile included and excluded; Python interpreter `k`'s in-process CPU time is
/// column `PY + k`.
const JIT: usize = 0;
const JIT_EXCL: usize = 1;
const LLVM: usize = 2;
const LLVM_EXCL: usize = 3;
const PY: usize = 4;

impl ExampleRun<'_> {
    /// The example's two sources written where child processes read them.
    fn sources(&self) -> Result<(PathBuf, PathBuf), String> {
        let write = |ext: &str, text: &str| {
            let path = self.scratch.join(format!("program.{ext}"));
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok::<PathBuf, String>(path)
        };
        Ok((
            write("vm", &self.ex.vm_source)?,
            write("py", &self.ex.py_source)?,
        ))
    }

    /// Start-up: the `cpjit-vm` binary and each Python interpreter running the empty
    /// program, spawn to exit, alternated; one row per runner, ratios to `cpjit-vm`.
    fn startup_rounds(&self, warmup: usize, runs: usize) -> Result<Vec<PyVmRow>, String> {
        let (vm_file, py_file) = self.sources()?;
        let driver = self.setup.root.join("bench/python/timed_main.py");
        let labels: Vec<RefCell<String>> = self
            .pythons
            .iter()
            .map(|p| RefCell::new(p.display().to_string()))
            .collect();
        let mut ops = vec![Timed::new(warmup, runs, || {
            run_vm_binary(&self.setup.vm, &vm_file, "jit", "").map(Measured::wall_only)
        })];
        for (k, python) in self.pythons.iter().enumerate() {
            let (driver, py_file, label) = (&driver, &py_file, &labels[k]);
            let json = self.scratch.join(format!("python-{k}.json"));
            ops.push(Timed::new(warmup, runs, move || {
                let (whole, report) = run_python(python, driver, py_file, "", &json)?;
                *label.borrow_mut() = report.label();
                Ok(Measured::wall_only(whole))
            }));
        }
        let r = alternate(&mut ops)?;
        drop(ops);
        let row = |runner: String, col: usize| PyVmRow {
            example: STARTUP.into(),
            runner,
            in_process: r.sample(col, 1),
            compile_excluded: None,
            vs_jit: None,
            whole_process: Some(r.sample(col, 1)),
            whole_vs_jit: (col > 0).then(|| ratios(&r, col, 0)).flatten(),
        };
        let mut rows = vec![row("cpjit-vm".into(), 0)];
        for (k, label) in labels.into_iter().enumerate() {
            rows.push(row(label.into_inner(), 1 + k));
        }
        Ok(rows)
    }

    /// Times `cpjit jit`, LLVM -O2 and each Python interpreter alternately, in-process CPU
    /// time, and returns one row per runner.
    fn rounds(&self, warmup: usize, runs: usize) -> Result<Vec<PyVmRow>, String> {
        let ex = self.ex;
        let (_, py_file) = self.sources()?;
        let driver = self.setup.root.join("bench/python/timed_main.py");
        // Each op returns one time to `alternate`; the VM's runs' second figure (compile
        // excluded) goes here, one entry per call.
        let second: Vec<RefCell<Vec<f64>>> = (0..2).map(|_| RefCell::new(Vec::new())).collect();
        let labels: Vec<RefCell<String>> = self
            .pythons
            .iter()
            .map(|p| RefCell::new(p.display().to_string()))
            .collect();
        let mut ops = vec![
            Timed::new(warmup, runs, || {
                let (stats, t) = exec::run_once(ex, Mode::Jit, "jit")?;
                second[0]
                    .borrow_mut()
                    .push(t.cpu - stats.compile_time.as_nanos() as f64);
                Ok(Measured::wall_only(t.cpu))
            }),
            Timed::new(warmup, runs, || {
                let (exec_ns, compile_ns) = self.llvm_o2()?;
                second[1].borrow_mut().push(exec_ns);
                Ok(Measured::wall_only(exec_ns + compile_ns))
            }),
        ];
        for (k, python) in self.pythons.iter().enumerate() {
            let (driver, py_file, label) = (&driver, &py_file, &labels[k]);
            let json = self.scratch.join(format!("python-{k}.json"));
            ops.push(Timed::new(warmup, runs, move || {
                let (_, report) = run_python(python, driver, py_file, &ex.expected, &json)?;
                *label.borrow_mut() = report.label();
                Ok(Measured::wall_only(report.runs[0].cpu_ns as f64))
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
        let mut cols = vec![next(), std::mem::take(&mut second[0])];
        cols.extend([next(), std::mem::take(&mut second[1])]);
        cols.extend((0..self.pythons.len()).map(|_| next()));
        let r = Rounds(cols);
        Ok(self.rows(&r, labels.into_iter().map(RefCell::into_inner).collect()))
    }

    /// One run in `jit` mode with LLVM -O2 compiling the VM's own lowering as the trace
    /// compiler: (CPU time outside compiles, compiles' CPU time) in ns, the compiles clocked
    /// by the compiler itself (the VM's clock is the wall's). Fails on wrong output or a
    /// failed compile.
    fn llvm_o2(&self) -> Result<(f64, f64), String> {
        let llvm = Rc::new(LlvmTraceCompiler::new(
            self.ir.context,
            self.ir.lib.clone(),
            Level::O2,
            PeerLowering::same(self.ir.set)?,
        ));
        let config = Config {
            mode: Mode::Jit,
            compiler: Some(llvm.clone()),
            ..Config::default()
        };
        let (stats, whole) = peer_vm::run_whole(self.ex, config, "LLVM -O2")?;
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
        let compile = llvm.compile_cpu();
        Ok(((whole.cpu - compile).max(0.0), compile))
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
        let mut rows = vec![
            PyVmRow {
                compile_excluded: Some(r.sample(JIT_EXCL, 1)),
                vs_jit: None,
                ..row("cpjit jit".into(), JIT)
            },
            PyVmRow {
                compile_excluded: Some(r.sample(LLVM_EXCL, 1)),
                vs_jit: ratios(r, LLVM_EXCL, JIT_EXCL),
                ..row("LLVM -O2".into(), LLVM)
            },
        ];
        for (k, label) in python_labels.into_iter().enumerate() {
            rows.push(row(label, PY + k));
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
            assert!(report.runs.iter().all(|r| r.cpu_ns > 0), "{report:?}");
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
