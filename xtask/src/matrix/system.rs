//! Full-system QEMU rows (`qemu/system-rows.toml`, named by `ci/matrix.toml`'s `[system]`): a package's test binaries run
//! in a Linux guest whose emulated processor has what this host's lacks (protection keys:
//! `qemu-system-x86_64 -accel tcg -cpu max` has `pku`). qemu-user cannot do this: it passes
//! system calls such as `pkey_alloc` to the host's kernel.
//!
//! A row builds the package's test binaries and the guest's `/init` (`qemu/guest`, crate
//! `cpjit-qemu-guest`) for its Rust target (a static musl one), packs them and the plan
//! into an initramfs, boots a Debian kernel (fetched by `cargo xtask setup` with `apt-get
//! download`, never installed) and reads the guest's typed result lines from a file that
//! QEMU writes its second serial port to. The guest's console goes to `console.log`
//! beside it, kept for a failed row.

use super::{Counts, RowResult};
use cpjit_qemu_guest::{initramfs, read_lines, Entry, Line, Outcome, Plan, Run, PLAN_PATH};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The rows of `file` (relative to `root`), `[[row]]` tables.
pub fn load(root: &Path, file: &str) -> Result<Vec<SystemRow>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RowsFile {
        row: Vec<SystemRow>,
    }
    let path = root.join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let rows: RowsFile =
        toml::from_str(&text).map_err(|e| format!("{file}: {}", e.to_string().trim_end()))?;
    Ok(rows.row)
}

/// One `[[row]]` of the system rows' file as written.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemRow {
    /// The row's name in the matrix's table (and for `--target`).
    pub name: String,
    /// The Rust target of the guest's binaries: static, so the initramfs needs no libraries.
    pub rust_target: String,
    /// The package whose test binaries (unit and integration) the guest runs.
    pub package: String,
    /// The QEMU system emulator and its `-cpu` model.
    pub qemu: String,
    pub cpu: String,
    /// Flags the guest's `/proc/cpuinfo` must list (else the row fails, naming them).
    pub cpu_flags: Vec<String>,
    pub processors: usize,
    pub memory_mib: usize,
    pub timeout_seconds: u64,
    /// Debian packages `cargo xtask setup` installs for the row, and the kernel package it
    /// fetches (`apt-get download`, unpacked under `kernel_dir`).
    pub packages: Vec<String>,
    pub kernel_package: String,
    /// Tests the guest does not run, by exact name, each with why.
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
    pub runs: Vec<SystemRun>,
}

/// One run of every test binary of the package in the guest.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemRun {
    pub name: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Only the tests whose names start with one of these (all when empty).
    #[serde(default)]
    pub only: Vec<String>,
}

/// The rows `opts` selects: all, unless it names targets (then those named), runs the
/// native rows only, or selects suites (the system rows are no suite's).
pub fn selected<'a>(rows: &'a [SystemRow], opts: &super::Options) -> Vec<&'a SystemRow> {
    if opts.native || !opts.suites.is_empty() {
        return Vec::new();
    }
    rows.iter()
        .filter(|r| opts.targets.is_empty() || opts.targets.contains(&r.name))
        .collect()
}

/// Where setup.sh unpacks kernels: `$CPJIT_KERNEL_DIR`, else `~/.cache/cpjit/kernels`; its
/// `current` link names the kernel image last fetched.
pub fn kernel_dir() -> PathBuf {
    match std::env::var_os("CPJIT_KERNEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cpjit/kernels")
        }
    }
}

/// Builds, boots and reads one row.
pub fn run(root: &Path, profile: &str, row: &SystemRow) -> RowResult {
    let mut result = RowResult {
        triple: row.name.clone(),
        executed: format!(
            "{} -cpu {}: {} ({})",
            row.qemu, row.cpu, row.rust_target, row.package
        ),
        ..Default::default()
    };
    let start = Instant::now();
    let dir = root
        .join("target/nextest/matrix/system")
        .join(crate::ci::slug(&row.name));
    match boot(root, profile, row, &dir) {
        Ok(lines) => judge(row, &lines, &mut result),
        Err(e) => result.problems.push(e),
    }
    if !result.passed() {
        let console = dir.join("console.log");
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        result.problems.push(format!(
            "the guest's console is in {}; its last lines:\n{}",
            console.display(),
            tail.join("\n")
        ));
    }
    result.time = start.elapsed();
    result
}

/// The guest's result lines, after building what it runs and booting it in `dir`.
fn boot(root: &Path, profile: &str, row: &SystemRow, dir: &Path) -> Result<Vec<Line>, String> {
    let kernel = kernel_dir().join("current");
    if !kernel.is_file() {
        return Err(format!(
            "no kernel for {} ({} is missing): run cargo xtask setup, which fetches {} with \
             apt-get download",
            row.name,
            kernel.display(),
            row.kernel_package
        ));
    }
    let guest = built(
        root,
        profile,
        row,
        &["build", "-p", "cpjit-qemu-guest"],
        false,
    )?;
    let tests = built(
        root,
        profile,
        row,
        &["test", "--no-run", "-p", &row.package],
        true,
    )?;
    let init = guest
        .first()
        .ok_or("cargo built no cpjit-qemu-guest binary")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let initrd = dir.join("initramfs.cpio");
    pack(row, &init.1, &tests, &initrd)?;
    let (console, results) = (dir.join("console.log"), dir.join("results.jsonl"));
    let _ = std::fs::remove_file(&results);
    let mut qemu = Command::new(&row.qemu);
    qemu.args([
        "-accel",
        "tcg",
        "-cpu",
        &row.cpu,
        "-nographic",
        "-no-reboot",
    ])
    .args(["-smp", &row.processors.to_string()])
    .args(["-m", &row.memory_mib.to_string()])
    .arg("-kernel")
    .arg(&kernel)
    .arg("-initrd")
    .arg(&initrd)
    .args([
        "-append",
        "console=ttyS0 quiet panic=-1",
        "-monitor",
        "none",
    ])
    .arg("-serial")
    .arg(format!("file:{}", console.display()))
    .arg("-serial")
    .arg(format!("file:{}", results.display()));
    wait(qemu, Duration::from_secs(row.timeout_seconds), &row.qemu)?;
    let text = std::fs::read_to_string(&results)
        .map_err(|e| format!("the guest wrote no results ({}): {e}", results.display()))?;
    read_lines(&text)
}

/// Runs `cargo <args>` for the row's target and profile; returns each executable built
/// (of test targets if `tests`, else of binaries): its target's name and path.
fn built(
    root: &Path,
    profile: &str,
    row: &SystemRow,
    args: &[&str],
    tests: bool,
) -> Result<Vec<(String, PathBuf)>, String> {
    let mut cmd = crate::util::cargo_in(root);
    cmd.args(args)
        .args(["--target", &row.rust_target, "--profile", profile])
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", out.status));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Artifact>(line) else {
            continue; // another kind of cargo message
        };
        if let (Some(exe), true) = (message.executable, message.profile.test == tests) {
            found.push((message.target.name, exe));
        }
    }
    Ok(found)
}

/// The fields of cargo's `compiler-artifact` message the row reads.
#[derive(Deserialize)]
struct Artifact {
    target: ArtifactTarget,
    profile: ArtifactProfile,
    executable: Option<PathBuf>,
}

#[derive(Deserialize)]
struct ArtifactTarget {
    name: String,
}

#[derive(Deserialize)]
struct ArtifactProfile {
    test: bool,
}

/// Writes the initramfs: `/init`, each test binary as `/bin/<target name>`, and the plan.
fn pack(
    row: &SystemRow,
    init: &Path,
    tests: &[(String, PathBuf)],
    to: &Path,
) -> Result<(), String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut files = vec![("init".to_string(), read(init)?)];
    for (name, path) in tests {
        files.push((format!("bin/{name}"), read(path)?));
    }
    let plan = plan(row, tests);
    let plan = serde_json::to_vec_pretty(&plan).map_err(|e| e.to_string())?;
    files.push((PLAN_PATH.to_string(), plan));
    let mut entries = vec![
        Entry {
            path: "bin",
            mode: 0o755,
            contents: None,
        },
        Entry {
            path: "cpjit",
            mode: 0o755,
            contents: None,
        },
    ];
    entries.extend(files.iter().map(|(path, bytes)| Entry {
        path,
        mode: 0o755,
        contents: Some(bytes),
    }));
    std::fs::write(to, initramfs(&entries)).map_err(|e| format!("{}: {e}", to.display()))
}

/// Every run of the row over every test binary.
fn plan(row: &SystemRow, tests: &[(String, PathBuf)]) -> Plan {
    let mut runs = Vec::new();
    for r in &row.runs {
        for (name, _) in tests {
            runs.push(Run {
                name: format!("{} {name}", r.name),
                binary: format!("/bin/{name}"),
                env: r.env.clone(),
                skip: row.skip.clone(),
                only: r.only.clone(),
            });
        }
    }
    Plan {
        runs,
        results: "/dev/ttyS1".into(),
        jobs: row.processors,
    }
}

/// Runs QEMU to its end, killing it after `timeout`.
fn wait(mut qemu: Command, timeout: Duration, name: &str) -> Result<(), String> {
    let mut child = qemu.spawn().map_err(|e| {
        format!("cannot run {name}: {e}; run cargo xtask setup (package qemu-system-x86)")
    })?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{name} exited with {status}")),
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{name} ran longer than {timeout:?}: killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("waiting for {name}: {e}")),
        }
    }
}

/// The row's counts and problems from the guest's lines: a missing processor flag, a
/// failed test, an error of the guest, or no final line fail it.
fn judge(row: &SystemRow, lines: &[Line], result: &mut RowResult) {
    let mut counts = Counts::default();
    let mut finished = false;
    for line in lines {
        match line {
            Line::Guest { kernel, cpu_flags } => {
                let missing: Vec<&String> = row
                    .cpu_flags
                    .iter()
                    .filter(|f| !cpu_flags.contains(f))
                    .collect();
                if !missing.is_empty() {
                    result.problems.push(format!(
                        "the guest's processor ({} -cpu {}, kernel {kernel}) lacks {missing:?}",
                        row.qemu, row.cpu
                    ));
                }
            }
            Line::Test(t) => {
                use super::Outcome as Case;
                counts.add_case(match t.outcome {
                    Outcome::Passed => Case::Passed,
                    Outcome::Failed => Case::Failed,
                    Outcome::Ignored | Outcome::Skipped => Case::Skipped,
                });
                if t.outcome == Outcome::Failed {
                    result
                        .problems
                        .push(format!("failed test ({}): {}\n{}", t.run, t.name, t.output));
                }
            }
            Line::Done { .. } => finished = true,
            Line::Error { message } => result.problems.push(format!("the guest: {message}")),
        }
    }
    if !finished {
        result
            .problems
            .push("the guest stopped before its last test".into());
    }
    if counts.run == 0 {
        result.problems.push("no tests ran in the guest".into());
    }
    result.counts = counts;
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_qemu_guest::TestResult;

    fn real_row() -> SystemRow {
        let rows = load(&crate::util::root(), "qemu/system-rows.toml").unwrap();
        assert_eq!(rows.len(), 1, "one system row");
        rows.into_iter().next().unwrap()
    }

    #[test]
    fn the_keys_row_asks_for_keys_and_runs_every_binary_in_each_run() {
        let row = real_row();
        assert!(row.cpu_flags.iter().any(|f| f == "pku"));
        let expects = |r: &SystemRun| r.env.contains_key("CPJIT_EXPECT_PROTECTION_KEYS");
        assert!(row.runs.iter().any(expects), "{:?}", row.runs);
        let tests = [
            ("lib".to_string(), PathBuf::new()),
            ("it".into(), PathBuf::new()),
        ];
        let plan = plan(&row, &tests);
        assert_eq!(plan.runs.len(), 2 * row.runs.len());
        assert_eq!(plan.runs[1].binary, "/bin/it");
        assert_eq!(plan.jobs, row.processors);
    }

    #[test]
    fn system_rows_run_unless_the_selection_leaves_them_out() {
        let rows = [real_row()];
        let opts = |f: &dyn Fn(&mut super::super::Options)| {
            let mut o = super::super::Options::default();
            f(&mut o);
            selected(&rows, &o).len()
        };
        assert_eq!(opts(&|_| {}), 1);
        assert_eq!(opts(&|o| o.targets = vec![rows[0].name.clone()]), 1);
        assert_eq!(opts(&|o| o.targets = vec!["another".into()]), 0);
        assert_eq!(opts(&|o| o.native = true), 0);
        assert_eq!(opts(&|o| o.suites = vec!["runtime".into()]), 0);
    }

    fn test(outcome: Outcome) -> Line {
        Line::Test(TestResult {
            run: "keys lib".into(),
            name: "a::b".into(),
            outcome,
            seconds: 0.1,
            output: "out".into(),
        })
    }

    #[test]
    fn a_row_fails_on_a_missing_flag_a_failed_test_an_error_or_no_last_line() {
        let row = real_row();
        let judged = |lines: &[Line]| {
            let mut r = RowResult::default();
            judge(&row, lines, &mut r);
            r
        };
        let guest = |flags: &[&str]| Line::Guest {
            kernel: "6.1".into(),
            cpu_flags: flags.iter().map(|f| f.to_string()).collect(),
        };
        let done = Line::Done { tests: 2 };
        let ok = judged(&[
            guest(&["pku", "ospke"]),
            test(Outcome::Passed),
            test(Outcome::Skipped),
            done.clone(),
        ]);
        assert!(ok.passed(), "{:?}", ok.problems);
        assert_eq!((ok.counts.passed, ok.counts.ignored), (1, 1));
        let no_keys = judged(&[guest(&["sse"]), test(Outcome::Passed), done.clone()]);
        assert!(no_keys.problems[0].contains("lacks [\"pku\", \"ospke\"]"));
        let failed = judged(&[guest(&["pku", "ospke"]), test(Outcome::Failed), done]);
        assert!(
            failed.problems[0].contains("a::b\nout"),
            "{:?}",
            failed.problems
        );
        let cut = judged(&[guest(&["pku", "ospke"]), test(Outcome::Passed)]);
        assert!(cut.problems[0].contains("stopped before its last test"));
        let error = Line::Error {
            message: "mount".into(),
        };
        let broken = judged(&[guest(&["pku", "ospke"]), error]);
        assert_eq!(broken.problems.len(), 3, "{:?}", broken.problems);
    }
}
