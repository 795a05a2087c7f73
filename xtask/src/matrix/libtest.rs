//! Counting tests from libtest's human output (`running N tests` ... `test result: ok. P
//! passed; F failed; I ignored; ...`), the format every Rust test binary prints on stable.

/// Tests counted from one or more test-binary runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

/// What one test binary's output says.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    pub counts: Counts,
    /// A `test result:` line was found (absent when the binary crashed or is not libtest).
    pub complete: bool,
    /// Names of the failed tests (`test NAME ... FAILED`).
    pub failed_names: Vec<String>,
}

/// Parses the stdout of one libtest binary.
pub fn parse(stdout: &str) -> Summary {
    let mut counts = Counts::default();
    let mut complete = false;
    let mut failed_names = Vec::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("test result: ") {
            complete = true;
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                // "... ok. 3 passed" -> last two words are "3", "passed".
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                match what {
                    "passed" => counts.passed += n,
                    "failed" => counts.failed += n,
                    "ignored" => counts.ignored += n,
                    _ => {}
                }
            }
        } else if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            failed_names.push(name.to_string());
        }
    }
    counts.run = counts.passed + counts.failed;
    Summary {
        counts,
        complete,
        failed_names,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_passed_failed_ignored() {
        let out = "\nrunning 4 tests\ntest a ... ok\ntest b::c ... FAILED\ntest d ... ignored\n\
                   test e ... ok\n\nfailures:\n\ntest result: FAILED. 2 passed; 1 failed; 1 ignored; \
                   0 measured; 0 filtered out; finished in 0.01s\n\n";
        let s = parse(out);
        assert!(s.complete);
        assert_eq!(
            s.counts,
            Counts {
                run: 3,
                passed: 2,
                failed: 1,
                ignored: 1
            }
        );
        assert_eq!(s.failed_names, ["b::c"]);
    }

    #[test]
    fn a_crash_has_no_result_line() {
        let s = parse("running 2 tests\ntest a ... ok\n");
        assert!(!s.complete);
        assert_eq!(s.counts, Counts::default());
    }

    #[test]
    fn zero_tests_is_complete_with_zero_run() {
        let s = parse("running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n");
        assert!(s.complete);
        assert_eq!(s.counts.run, 0);
    }
}
