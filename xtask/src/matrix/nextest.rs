//! The matrix on cargo-nextest: each Rust target's test binaries are built once into a
//! nextest archive; each row runs the archive with its environment (`CPJIT_STENCILS`)
//! through the Rust target's cargo runner (qemu, wine), and its results are read from the
//! JUnit report of the `matrix` profile (`.config/nextest.toml`).

use quick_xml::events::{BytesStart, Event};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

/// The nextest profile whose JUnit report the matrix reads.
pub const PROFILE: &str = "matrix";

/// `cargo` for the matrix in checkout `root`, building in `root/target`, where the matrix
/// reads nextest's reports and keeps its archives ([`junit_path`]).
fn cargo(root: &Path) -> std::process::Command {
    let mut cmd = crate::util::cargo_in(root);
    cmd.env("CARGO_TARGET_DIR", root.join("target"));
    cmd
}

/// Builds the test binaries of `packages` for `rust_target` in the cargo `profile` into an
/// archive and returns its path and the CPU seconds the build took. The host's binaries are
/// built without `--target`, so that they share artifacts with the native runs of `cargo
/// xtask ci`.
pub fn archive(
    root: &Path,
    rust_target: &str,
    host: &str,
    profile: &str,
    packages: &[String],
) -> Result<(PathBuf, f64), String> {
    let path = root
        .join("target/nextest-archives")
        .join(format!("{rust_target}.tar.zst"));
    let dir = path.parent().expect("archives live in a directory");
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut cmd = cargo(root);
    cmd.args(["nextest", "archive", "--archive-file"])
        .arg(&path);
    cmd.args(["--cargo-profile", profile]);
    if rust_target != host {
        cmd.args(["--target", rust_target]);
    }
    for p in packages {
        cmd.args(["-p", p]);
    }
    let what = format!("building the nextest archive for {rust_target}");
    let (cpu, saw_no_space) = run_counting_cpu(&mut cmd);
    let cpu = cpu.map_err(|e| {
        let dirs = [dir.to_path_buf(), std::env::temp_dir()];
        match crate::ci::disk::full_disk_line(&what, &dirs, saw_no_space) {
            Some(full) => format!("{full}\n{what}: {e}"),
            None => format!("{what}: {e}"),
        }
    })?;
    Ok((path, cpu))
}

/// Runs `cmd` to its end and returns the CPU seconds (user + system) of its process tree
/// (cargo and the rustc, linker and build-script processes it waited for), from `wait4`:
/// the CI's matrix step runs the long runs beside it, so the CPU of all xtask's children
/// would not say what the builds cost. Fails with the command line and exit status if it
/// does not succeed. Its stderr is passed on as it comes; the flag returned beside says
/// whether it said "No space left on device" (`ci/disk.rs`).
fn run_counting_cpu(cmd: &mut std::process::Command) -> (Result<f64, String>, bool) {
    let mut child = match cmd.stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) => return (Err(format!("cannot start {cmd:?}: {e}")), false),
    };
    let (saw_no_space, copier) =
        crate::ci::disk::forward_watching(child.stderr.take().expect("stderr is piped"));
    let cpu = wait_counting_cpu(cmd, child.id());
    // The copy ends when the tree's last writer of the pipe does.
    let _ = copier.join();
    (cpu, saw_no_space.load(std::sync::atomic::Ordering::Relaxed))
}

/// Waits for process `pid` (started by `cmd`) with `wait4`: the CPU seconds of its tree.
fn wait_counting_cpu(cmd: &std::process::Command, pid: u32) -> Result<f64, String> {
    let pid = libc::pid_t::try_from(pid).map_err(|e| format!("process id: {e}"))?;
    let mut status = 0;
    let usage = loop {
        // SAFETY: `usage` is a zeroed `rusage` that wait4 fills; `status` is a valid int.
        let (got, usage) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            (libc::wait4(pid, &mut status, 0, &mut usage), usage)
        };
        if got == pid {
            break usage;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waiting for {cmd:?}: wait4: {error}"));
        }
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(seconds(usage.ru_utime) + seconds(usage.ru_stime))
    } else {
        Err(format!("{cmd:?} failed: {}", ExitStatus::from_raw(status)))
    }
}

/// What one `cargo nextest run` reported.
#[derive(Debug)]
pub struct RunOutcome {
    pub status: ExitStatus,
    /// `None`: nextest wrote no JUnit report (it failed before running tests, e.g. a test
    /// binary crashed while listing its tests).
    pub cases: Option<Vec<TestCase>>,
    /// nextest's stderr (its progress and failing tests' output).
    pub log: String,
}

/// Runs the tests `filters` select (nextest filtersets, one per suite) from `archive` with
/// `env` in the environment.
pub fn run_archive(
    root: &Path,
    archive: &Path,
    filters: &[&str],
    env: &BTreeMap<String, String>,
) -> Result<RunOutcome, String> {
    let report = junit_path(root);
    let _ = std::fs::remove_file(&report);
    let filter = filters
        .iter()
        .map(|f| format!("({f})"))
        .collect::<Vec<_>>()
        .join(" | ");
    let mut cmd = cargo(root);
    cmd.args(["nextest", "run", "--profile", PROFILE, "--archive-file"])
        .arg(archive)
        .arg("--workspace-remap")
        .arg(root)
        // A suite without tests is reported per suite by the caller, which names it.
        .args(["--no-fail-fast", "--no-tests", "pass", "--color", "never"])
        .args(["-E", &filter])
        .envs(env);
    // The log goes to a file, not a pipe: wine leaves helper processes behind that inherit
    // the output handles and would hold a pipe open for seconds after the tests ended.
    let log_path = log_path(root);
    std::fs::create_dir_all(log_path.parent().expect("has a parent"))
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log_file = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let log = String::from_utf8_lossy(&std::fs::read(&log_path).unwrap_or_default()).into_owned();
    let cases = match std::fs::read_to_string(&report) {
        Ok(xml) => Some(parse_junit(&xml).map_err(|e| format!("{}: {e}", report.display()))?),
        Err(_) => None,
    };
    Ok(RunOutcome { status, cases, log })
}

/// Where the `matrix` profile writes its JUnit report.
pub fn junit_path(root: &Path) -> PathBuf {
    root.join("target/nextest").join(PROFILE).join("junit.xml")
}

/// Where a row's nextest output (its progress and failing tests' output) is written.
pub fn log_path(root: &Path) -> PathBuf {
    root.join("target/nextest").join(PROFILE).join("run.log")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Failed, crashed, timed out or leaked (any `<failure>` or `<error>`).
    Failed,
    Skipped,
}

/// One `<testcase>` of a JUnit report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// nextest's binary id, e.g. `cpjit-runtime` or `cpjit-runtime::patch_fixtures`.
    pub binary: String,
    pub name: String,
    pub outcome: Outcome,
}

impl TestCase {
    /// The package the test binary belongs to.
    pub fn package(&self) -> &str {
        self.binary.split("::").next().unwrap_or(&self.binary)
    }
}

/// The test cases of a nextest JUnit report.
pub fn parse_junit(xml: &str) -> Result<Vec<TestCase>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut cases = Vec::new();
    let mut open: Option<TestCase> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("invalid XML at byte {}: {e}", reader.buffer_position()))?;
        match &event {
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"testcase" => {
                let case = TestCase {
                    binary: attribute(e, "classname")?,
                    name: attribute(e, "name")?,
                    outcome: Outcome::Passed,
                };
                // `<testcase .../>` has no children: it passed.
                if matches!(event, Event::Start(_)) {
                    open = Some(case);
                } else {
                    cases.push(case);
                }
            }
            Event::Start(e) | Event::Empty(e) => {
                if let Some(case) = &mut open {
                    match e.name().as_ref() {
                        b"failure" | b"error" => case.outcome = Outcome::Failed,
                        b"skipped" if case.outcome == Outcome::Passed => {
                            case.outcome = Outcome::Skipped
                        }
                        _ => {}
                    }
                }
            }
            Event::End(e) if e.name().as_ref() == b"testcase" => {
                cases.extend(open.take());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if open.is_some() {
        return Err("unterminated <testcase>".into());
    }
    Ok(cases)
}

fn attribute(e: &BytesStart<'_>, key: &str) -> Result<String, String> {
    let tag = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    let attr = e
        .try_get_attribute(key)
        .map_err(|err| format!("<{tag}>: {err}"))?
        .ok_or_else(|| format!("<{tag}> without `{key}`"))?;
    attr.unescape_value()
        .map(|v| v.into_owned())
        .map_err(|err| format!("<{tag}> {key}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="4" failures="1" errors="1" uuid="x" timestamp="t" time="1.0">
    <testsuite name="cpjit-runtime" tests="2" disabled="0" errors="0" failures="1">
        <testcase name="arena::tests::reuse" classname="cpjit-runtime" timestamp="t" time="0.1">
        </testcase>
        <testcase name="patch::tests::a &amp; b" classname="cpjit-runtime" timestamp="t" time="0.1">
            <failure type="test failure">thread panicked</failure>
            <system-out>output</system-out>
        </testcase>
    </testsuite>
    <testsuite name="cpjit-vm::examples" tests="2" disabled="0" errors="1" failures="0">
        <testcase name="fib" classname="cpjit-vm::examples" timestamp="t" time="0.1"/>
        <testcase name="crash" classname="cpjit-vm::examples" timestamp="t" time="0.1">
            <error type="SIGSEGV" message="test aborted"/>
        </testcase>
    </testsuite>
</testsuites>
"#;

    #[test]
    fn junit_cases_with_their_outcome_and_package() {
        let cases = parse_junit(REPORT).unwrap();
        let got: Vec<(&str, &str, Outcome)> = cases
            .iter()
            .map(|c| (c.package(), c.name.as_str(), c.outcome))
            .collect();
        assert_eq!(
            got,
            [
                ("cpjit-runtime", "arena::tests::reuse", Outcome::Passed),
                ("cpjit-runtime", "patch::tests::a & b", Outcome::Failed),
                ("cpjit-vm", "fib", Outcome::Passed),
                ("cpjit-vm", "crash", Outcome::Failed),
            ]
        );
    }

    #[test]
    fn broken_reports_are_errors() {
        assert!(
            parse_junit("<testsuites><testcase name=\"a\" classname=\"b\">")
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(parse_junit("<testcase classname=\"b\"/>")
            .unwrap_err()
            .contains("without `name`"));
        assert_eq!(parse_junit("<testsuites/>").unwrap(), []);
    }
}
