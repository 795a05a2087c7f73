//! What the host and the guest of a full-system QEMU row exchange, typed on both sides:
//! the [`Plan`] the host packs into the guest's initramfs ([`initramfs`], a `newc` cpio
//! archive) and the [`Line`]s of JSON the guest's `/init` (this crate's binary) writes to
//! its second serial port, which QEMU writes to a file the host reads ([`read_lines`]).
//!
//! The guest runs each test in its own process, as nextest does on the host: tests may read
//! the whole process's mappings or re-run their own binary.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where the plan is in the guest's file system.
pub const PLAN_PATH: &str = "cpjit/plan.json";

/// What the guest runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub runs: Vec<Run>,
    /// The device the result lines go to (the second serial port: `/dev/ttyS1`).
    pub results: String,
    /// Tests run at once (the guest's processors).
    pub jobs: usize,
}

/// One run of one test binary: each of its tests in its own process, with `env`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub name: String,
    /// The binary's path in the guest.
    pub binary: String,
    pub env: BTreeMap<String, String>,
    /// Tests not run here, by exact name, each with why (reported as skipped).
    pub skip: BTreeMap<String, String>,
    /// Only the tests whose names start with one of these (all when empty).
    pub only: Vec<String>,
}

/// One line the guest writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// First: what the guest is (its kernel release and its first processor's flags).
    Guest {
        kernel: String,
        cpu_flags: Vec<String>,
    },
    Test(TestResult),
    /// Last, when every run is done: how many tests ran.
    Done {
        tests: usize,
    },
    /// The guest could not go on (a mount, the plan, a binary that cannot list its tests).
    Error {
        message: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestResult {
    pub run: String,
    pub name: String,
    pub outcome: Outcome,
    pub seconds: f64,
    /// A failed test's output (its last 4,000 bytes), or why it was skipped.
    pub output: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Passed,
    Failed,
    /// `#[ignore]`d in the binary.
    Ignored,
    /// Named in the run's `skip`.
    Skipped,
}

/// The tests a libtest binary lists with `--list --format terse` (`<name>: test` lines;
/// benchmarks left out).
pub fn listed_tests(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

/// The guest's result lines, from the file the host read them into. A line that is not a
/// [`Line`] is an error naming it (the port carries nothing else).
pub fn read_lines(text: &str) -> Result<Vec<Line>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l.trim_end_matches('\r'))
                .map_err(|e| format!("result line {}: {e}: {l:.200}", n + 1))
        })
        .collect()
}

/// A file of an initramfs: its path (without a leading `/`), mode bits and contents;
/// `None` contents make a directory.
pub struct Entry<'a> {
    pub path: &'a str,
    pub mode: u32,
    pub contents: Option<&'a [u8]>,
}

/// A `newc` cpio archive of `entries` (the format the kernel unpacks as an initramfs),
/// with parents listed before their children by the caller.
pub fn initramfs(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |ino: usize, name: &str, mode: u32, data: &[u8]| {
        let fields = [
            ino,
            mode as usize,
            0, // uid
            0, // gid
            1, // links
            0, // mtime: reproducible archives
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0, // check
        ];
        out.extend_from_slice(b"070701");
        for f in fields {
            out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(4), 0);
    };
    for (n, e) in entries.iter().enumerate() {
        let kind = if e.contents.is_some() {
            0o100000
        } else {
            0o040000
        };
        put(n + 1, e.path, kind | e.mode, e.contents.unwrap_or(&[]));
    }
    put(0, "TRAILER!!!", 0, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_tests_are_the_test_lines() {
        let out = "a::b: test\nc: test\nd: benchmark\n\n3 tests, 1 benchmark\n";
        assert_eq!(listed_tests(out), ["a::b", "c"]);
    }

    #[test]
    fn lines_round_trip_and_a_foreign_line_is_an_error() {
        let lines = vec![
            Line::Guest {
                kernel: "6.1".into(),
                cpu_flags: vec!["pku".into()],
            },
            Line::Test(TestResult {
                run: "keys".into(),
                name: "a::b".into(),
                outcome: Outcome::Passed,
                seconds: 0.5,
                output: String::new(),
            }),
            Line::Done { tests: 1 },
        ];
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\r\n")
            .collect();
        assert_eq!(read_lines(&text).unwrap(), lines);
        let e = read_lines("{\"done\":{\"tests\":1}}\n[    4.2] init: segfault\n").unwrap_err();
        assert!(e.contains("result line 2") && e.contains("segfault"), "{e}");
    }

    /// The archive's layout: each header is `070701` and 13 hex fields, name and data
    /// padded to 4 bytes, and a trailer; sizes and modes as given.
    #[test]
    fn initramfs_entries_are_newc_records() {
        let archive = initramfs(&[
            Entry {
                path: "cpjit",
                mode: 0o755,
                contents: None,
            },
            Entry {
                path: "init",
                mode: 0o755,
                contents: Some(b"abcde"),
            },
        ]);
        let field = |at: usize, k: usize| {
            let hex = std::str::from_utf8(&archive[at + 6 + 8 * k..at + 14 + 8 * k]).unwrap();
            usize::from_str_radix(hex, 16).unwrap()
        };
        assert_eq!(&archive[..6], b"070701");
        assert_eq!(field(0, 1), 0o040755, "a directory");
        assert_eq!(&archive[110..116], b"cpjit\0");
        let second = 116usize.next_multiple_of(4);
        assert_eq!(&archive[second..second + 6], b"070701");
        assert_eq!((field(second, 1), field(second, 6)), (0o100755, 5));
        let data = (second + 110 + 5).next_multiple_of(4);
        assert_eq!(&archive[data..data + 5], b"abcde");
        let trailer = (data + 5).next_multiple_of(4);
        assert_eq!(&archive[trailer + 110..trailer + 121], b"TRAILER!!!\0");
        assert_eq!(archive.len() % 4, 0);
    }
}
