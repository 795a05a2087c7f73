//! The matrix result: one row per target plus the compile-only checks, printed as a table
//! for people or as JSON for machines.

use super::nextest::Outcome;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// Tests counted from one or more runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Tests that ran (passed + failed).
    pub run: u64,
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.run += other.run;
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
    }

    pub fn add_case(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Passed => {
                self.run += 1;
                self.passed += 1;
            }
            Outcome::Failed => {
                self.run += 1;
                self.failed += 1;
            }
            Outcome::Skipped => self.ignored += 1,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RowResult {
    pub triple: String,
    /// Stencils in the generated crate (`None`: unknown, see the problems).
    pub stencils: Option<u64>,
    /// How the stencils were executed, e.g. `host-abi: <rust target>`.
    pub executed: String,
    pub counts: Counts,
    /// Wall time spent running the row's tests.
    pub time: Duration,
    /// Why the row failed (empty when it passed).
    pub problems: Vec<String>,
}

impl RowResult {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

#[derive(Clone, Debug)]
pub struct CheckResult {
    pub target: String,
    pub packages: Vec<String>,
    pub time: Duration,
    pub error: Option<String>,
}

/// The build of one Rust target's test archive.
#[derive(Clone, Debug)]
pub struct ArchiveBuild {
    pub rust_target: String,
    pub time: Duration,
    /// User plus system CPU seconds of the build's processes (cargo, rustc, the linkers).
    pub cpu: f64,
    /// Why it failed, if it did (every row of its Rust target then fails with it).
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub rows: Vec<RowResult>,
    pub checks: Vec<CheckResult>,
    /// The test archives built, one per Rust target.
    pub builds: Vec<ArchiveBuild>,
    pub total_time: Duration,
}

/// The JSON form of a [`Report`] (`--json`).
#[derive(Serialize)]
struct JsonReport<'a> {
    rows: Vec<JsonRow<'a>>,
    checks: Vec<JsonCheck<'a>>,
    passed: u64,
    failed: u64,
    ok: bool,
    seconds: f64,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    target: &'a str,
    stencils: Option<u64>,
    executed: &'a str,
    tests: u64,
    passed: u64,
    failed: u64,
    ignored: u64,
    seconds: f64,
    ok: bool,
    problems: &'a [String],
}

#[derive(Serialize)]
struct JsonCheck<'a> {
    target: &'a str,
    packages: &'a [String],
    seconds: f64,
    ok: bool,
    error: Option<&'a str>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.rows.iter().all(RowResult::passed) && self.checks.iter().all(|c| c.error.is_none())
    }

    /// Tests passed and failed over all rows, counting each compile-only check as one.
    pub fn totals(&self) -> (u64, u64) {
        let mut passed: u64 = self.rows.iter().map(|r| r.counts.passed).sum();
        let mut failed: u64 = self.rows.iter().map(|r| r.counts.failed).sum();
        for r in &self.rows {
            // A row can fail without a failed test (crash, no tests, missing stencils).
            if !r.passed() && r.counts.failed == 0 {
                failed += 1;
            }
        }
        for c in &self.checks {
            if c.error.is_none() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
        (passed, failed)
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let header = [
            "target", "stencils", "executed", "tests", "passed", "failed", "time", "result",
        ];
        let mut cells: Vec<[String; 8]> = vec![header.map(String::from)];
        for r in &self.rows {
            cells.push([
                r.triple.clone(),
                r.stencils.map_or("-".into(), |n| n.to_string()),
                r.executed.clone(),
                r.counts.run.to_string(),
                r.counts.passed.to_string(),
                r.counts.failed.to_string(),
                secs(r.time),
                if r.passed() { "ok" } else { "FAILED" }.into(),
            ]);
        }
        let widths: Vec<usize> = (0..8)
            .map(|i| cells.iter().map(|c| c[i].len()).max().unwrap_or(0))
            .collect();
        for c in &cells {
            let mut line = String::new();
            for (i, cell) in c.iter().enumerate() {
                // Text columns left-aligned, numbers right-aligned.
                if matches!(i, 0 | 2 | 7) {
                    let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
                } else {
                    let _ = write!(line, "{cell:>w$}  ", w = widths[i]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        for r in self.rows.iter().filter(|r| !r.passed()) {
            for p in &r.problems {
                let _ = writeln!(out, "  {}: {p}", r.triple);
            }
        }
        for c in &self.checks {
            let _ = writeln!(
                out,
                "cargo check {} --target {}: {} ({})",
                c.packages.join(" "),
                c.target,
                if c.error.is_none() { "ok" } else { "FAILED" },
                secs(c.time)
            );
            // The exit status: a cargo that dies without a word (a signal) still names it.
            if let Some(e) = &c.error {
                let _ = writeln!(out, "  {e}");
            }
        }
        let builds: Vec<String> = self
            .builds
            .iter()
            .map(|b| format!("{} {} ({:.1}s CPU)", b.rust_target, secs(b.time), b.cpu))
            .collect();
        if !builds.is_empty() {
            let _ = writeln!(out, "test archives built: {}", builds.join(", "));
        }
        let (passed, failed) = self.totals();
        let rows_ok = self.rows.iter().filter(|r| r.passed()).count();
        let _ = writeln!(
            out,
            "matrix: {rows_ok}/{} rows passed; {passed} passed, {failed} failed; total {}",
            self.rows.len(),
            secs(self.total_time)
        );
        out
    }

    pub fn json(&self) -> Result<String, String> {
        let (passed, failed) = self.totals();
        let report = JsonReport {
            rows: self
                .rows
                .iter()
                .map(|r| JsonRow {
                    target: &r.triple,
                    stencils: r.stencils,
                    executed: &r.executed,
                    tests: r.counts.run,
                    passed: r.counts.passed,
                    failed: r.counts.failed,
                    ignored: r.counts.ignored,
                    seconds: r.time.as_secs_f64(),
                    ok: r.passed(),
                    problems: &r.problems,
                })
                .collect(),
            checks: self
                .checks
                .iter()
                .map(|c| JsonCheck {
                    target: &c.target,
                    packages: &c.packages,
                    seconds: c.time.as_secs_f64(),
                    ok: c.error.is_none(),
                    error: c.error.as_deref(),
                })
                .collect(),
            passed,
            failed,
            ok: self.passed(),
            seconds: self.total_time.as_secs_f64(),
        };
        serde_json::to_string_pretty(&report).map_err(|e| format!("matrix report as JSON: {e}"))
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        Report {
            rows: vec![
                RowResult {
                    triple: "one".into(),
                    stencils: Some(42),
                    executed: "native".into(),
                    counts: Counts {
                        run: 10,
                        passed: 10,
                        failed: 0,
                        ignored: 1,
                    },
                    time: Duration::from_millis(1500),
                    problems: vec![],
                },
                RowResult {
                    triple: "two".into(),
                    stencils: None,
                    executed: "host-abi: other".into(),
                    problems: vec!["stencil crate \"missing\"".into()],
                    ..Default::default()
                },
            ],
            checks: vec![CheckResult {
                target: "three".into(),
                packages: vec!["cpjit-runtime".into()],
                time: Duration::from_secs(2),
                error: None,
            }],
            builds: vec![ArchiveBuild {
                rust_target: "one".into(),
                time: Duration::from_millis(2500),
                cpu: 4.0,
                error: None,
            }],
            total_time: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_failed_check_names_its_exit_status() {
        let mut report = sample();
        report.checks.push(CheckResult {
            target: "four".into(),
            packages: vec!["p".into()],
            time: Duration::from_secs(7),
            error: Some("`cargo check` failed: signal: 9 (SIGKILL)".into()),
        });
        let t = report.table();
        assert!(
            t.contains(
                "cargo check p --target four: FAILED (7.0s)\n  `cargo check` failed: signal: 9"
            ),
            "{t}"
        );
    }

    #[test]
    fn table_has_one_line_per_row_and_a_summary() {
        let t = sample().table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("target ") && lines[0].ends_with("result"));
        assert!(lines[1].starts_with("one ") && lines[1].ends_with("ok"));
        assert!(lines[2].starts_with("two ") && lines[2].ends_with("FAILED"));
        assert!(t.contains("two: stencil crate"));
        assert!(
            t.contains("test archives built: one 2.5s (4.0s CPU)\n"),
            "{t}"
        );
        // 10 tests + 1 check passed; the failed row without failed tests counts as one.
        assert!(
            t.ends_with("matrix: 1/2 rows passed; 11 passed, 1 failed; total 5.0s\n"),
            "{t}"
        );
    }

    #[test]
    fn json_is_valid_and_complete() {
        let v: serde_json::Value = serde_json::from_str(&sample().json().unwrap()).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["rows"].as_array().unwrap().len(), 2);
        assert_eq!(v["rows"][0]["passed"], 10);
        assert!(v["rows"][1]["stencils"].is_null());
        assert_eq!(v["rows"][1]["problems"][0], "stencil crate \"missing\"");
        assert_eq!(v["checks"][0]["ok"], true);
        assert_eq!(
            (v["passed"].as_u64(), v["failed"].as_u64()),
            (Some(11), Some(1))
        );
    }
}
