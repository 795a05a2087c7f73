//! The matrix result: one row per target plus the compile-only checks, printed as a table
//! for people or as JSON for machines.

use super::json::quote;
use super::libtest::Counts;
use std::fmt::Write as _;
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct RowResult {
    pub triple: String,
    /// Stencils in the generated crate (`None`: the crate is missing or unreadable).
    pub stencils: Option<usize>,
    /// How the stencils were executed, e.g. `host-abi: aarch64-unknown-linux-gnu (qemu)`.
    pub executed: String,
    pub counts: Counts,
    /// Wall time spent running the row's test binaries.
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

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub rows: Vec<RowResult>,
    pub checks: Vec<CheckResult>,
    /// Wall time of building the test binaries, per Rust target.
    pub builds: Vec<(String, Duration)>,
    pub total_time: Duration,
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
        }
        let builds: Vec<String> = self
            .builds
            .iter()
            .map(|(t, d)| format!("{t} {}", secs(*d)))
            .collect();
        if !builds.is_empty() {
            let _ = writeln!(out, "test binaries built: {}", builds.join(", "));
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

    pub fn json(&self) -> String {
        let mut out = String::from("{\n  \"rows\": [\n");
        for (i, r) in self.rows.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {{\"target\": {}, \"stencils\": {}, \"executed\": {}, \"tests\": {}, \
                 \"passed\": {}, \"failed\": {}, \"ignored\": {}, \"seconds\": {:.3}, \
                 \"ok\": {}, \"problems\": [{}]}}{}",
                quote(&r.triple),
                r.stencils.map_or("null".into(), |n| n.to_string()),
                quote(&r.executed),
                r.counts.run,
                r.counts.passed,
                r.counts.failed,
                r.counts.ignored,
                r.time.as_secs_f64(),
                r.passed(),
                r.problems
                    .iter()
                    .map(|p| quote(p))
                    .collect::<Vec<_>>()
                    .join(", "),
                if i + 1 < self.rows.len() { "," } else { "" }
            );
        }
        out.push_str("  ],\n  \"checks\": [\n");
        for (i, c) in self.checks.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {{\"target\": {}, \"packages\": [{}], \"seconds\": {:.3}, \"ok\": {}, \
                 \"error\": {}}}{}",
                quote(&c.target),
                c.packages
                    .iter()
                    .map(|p| quote(p))
                    .collect::<Vec<_>>()
                    .join(", "),
                c.time.as_secs_f64(),
                c.error.is_none(),
                c.error.as_deref().map_or("null".into(), quote),
                if i + 1 < self.checks.len() { "," } else { "" }
            );
        }
        let (passed, failed) = self.totals();
        let _ = write!(
            out,
            "  ],\n  \"passed\": {passed},\n  \"failed\": {failed},\n  \"ok\": {},\n  \
             \"seconds\": {:.3}\n}}\n",
            self.passed(),
            self.total_time.as_secs_f64()
        );
        out
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;

    fn sample() -> Report {
        Report {
            rows: vec![
                RowResult {
                    triple: "x86_64-unknown-linux-gnu".into(),
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
                    triple: "aarch64-apple-darwin".into(),
                    stencils: None,
                    executed: "host-abi: aarch64-unknown-linux-gnu (qemu)".into(),
                    problems: vec!["stencil crate \"missing\"".into()],
                    ..Default::default()
                },
            ],
            checks: vec![CheckResult {
                target: "aarch64-apple-darwin".into(),
                packages: vec!["cpjit-runtime".into()],
                time: Duration::from_secs(2),
                error: None,
            }],
            builds: vec![],
            total_time: Duration::from_secs(5),
        }
    }

    #[test]
    fn table_has_one_line_per_row_and_a_summary() {
        let t = sample().table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("target ") && lines[0].ends_with("result"));
        assert!(lines[1].contains("x86_64-unknown-linux-gnu") && lines[1].ends_with("ok"));
        assert!(lines[2].contains("aarch64-apple-darwin") && lines[2].ends_with("FAILED"));
        assert!(t.contains("aarch64-apple-darwin: stencil crate"));
        // 10 tests + 1 check passed; the failed row without failed tests counts as one.
        assert!(
            t.ends_with("matrix: 1/2 rows passed; 11 passed, 1 failed; total 5.0s\n"),
            "{t}"
        );
    }

    #[test]
    fn json_is_valid_and_complete() {
        let r = sample();
        let v = json::parse(&r.json()).unwrap();
        assert_eq!(v.get("ok").as_bool(), Some(false));
        let rows = v.get("rows").as_array();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].get("passed"), &json::Json::Number(10.0));
        assert_eq!(rows[1].get("stencils"), &json::Json::Null);
        assert_eq!(
            rows[1].get("problems").as_array()[0].as_str(),
            Some("stencil crate \"missing\"")
        );
        assert_eq!(
            v.get("checks").as_array()[0].get("ok").as_bool(),
            Some(true)
        );
    }
}
