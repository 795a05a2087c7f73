//! The `ebpf` group: `examples/ebpf-jit` (an eBPF JIT built on the kit from outside, issue
//! 39) against rbpf 0.4's interpreter, hand-written x86-64 JIT and Cranelift JIT. The
//! example is its own Cargo workspace with its own generated stencil crates, so the group
//! runs its bench as a user would, `cargo bench --bench compare --features cranelift --
//! --json FILE` in
//! `examples/ebpf-jit/` (target directory `examples/ebpf-jit/target`, its own: its `ci.sh`
//! builds in the kit's `target/examples/`, shared by the examples' CI in the dev profile),
//! and reads every run's time from that file: compile time (verify + compile) on
//! straight-line programs of 10 to 4,000 instructions, run time on loop-heavy programs. The
//! bench alternates the engines round by round and checks that every engine returns the same
//! r0; ratios to ebpf-jit are taken round by round here.

use crate::harness::{human_ns, Sample};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// One engine on one program.
#[derive(Debug, Serialize, Deserialize)]
pub struct EbpfRow {
    /// `straight N` (compile) or a loop-heavy program (run).
    pub program: String,
    /// `compile` or `run`.
    pub measure: String,
    /// `ebpf-jit`, `ebpf-jit interpreter`, `rbpf interpreter`, `rbpf JIT`, `rbpf Cranelift`.
    pub engine: String,
    /// `None` where the engine cannot run the program (`skipped` says why).
    pub sample: Option<Sample>,
    /// This engine's time ÷ ebpf-jit's JIT, round by round (above 1: ebpf-jit is faster).
    pub vs_ebpf_jit: Option<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Where it ran, e.g. `x86_64-linux`.
    pub target: String,
}

/// What `benches/compare.rs` writes.
#[derive(Deserialize)]
struct Report {
    target: String,
    rows: Vec<ReportRow>,
}

#[derive(Deserialize)]
struct ReportRow {
    program: String,
    measure: String,
    engine: String,
    times_ns: Vec<f64>,
    skipped: Option<String>,
}

/// Runs the example's bench; an example whose stencil crates are not built is a skipped
/// group (with the command that builds them), not an error.
pub fn run(
    root: &Path,
    quick: bool,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<EbpfRow>, String> {
    let dir = root.join("examples/ebpf-jit");
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let stencils = dir.join("stencils").join(&host).join("Cargo.toml");
    if !cfg!(target_os = "linux") || !stencils.is_file() {
        skipped.push((
            "ebpf".into(),
            format!(
                "{} is missing: build the example's stencil crates first \
                 (`examples/ebpf-jit/ci.sh`, or its `cpjit build-stencils` step)",
                stencils.display()
            ),
        ));
        return Ok(Vec::new());
    }
    let json = std::env::temp_dir().join(format!("cpjit-bench-ebpf-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&json); // a stale report must not pass for this run's
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .args([
            "bench",
            "--quiet",
            "--bench",
            "compare",
            "--features",
            "cranelift",
            "--",
        ])
        .arg("--json")
        .arg(&json);
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd
        .output()
        .map_err(|e| format!("ebpf: cannot run cargo in {}: {e}", dir.display()))?;
    if !out.status.success() {
        return Err(format!(
            "ebpf: `cargo bench --bench compare` in {} failed ({}):\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text =
        std::fs::read_to_string(&json).map_err(|e| format!("ebpf: {}: {e}", json.display()))?;
    let _ = std::fs::remove_file(&json);
    let report: Report =
        serde_json::from_str(&text).map_err(|e| format!("ebpf: {}: {e}", json.display()))?;
    rows(report)
}

/// Samples and round-by-round ratios from the bench's runs.
fn rows(report: Report) -> Result<Vec<EbpfRow>, String> {
    let base = |r: &ReportRow| {
        report
            .rows
            .iter()
            .find(|b| b.program == r.program && b.measure == r.measure && b.engine == "ebpf-jit")
    };
    let mut out = Vec::new();
    for r in &report.rows {
        let base = base(r).ok_or_else(|| {
            format!(
                "ebpf: the bench's report has no ebpf-jit row for {} ({})",
                r.program, r.measure
            )
        })?;
        let measured = r.skipped.is_none() && !r.times_ns.is_empty();
        if measured && r.times_ns.len() != base.times_ns.len() {
            return Err(format!(
                "ebpf: {} ({}, {}): {} runs but ebpf-jit has {}; rounds must pair up",
                r.program,
                r.measure,
                r.engine,
                r.times_ns.len(),
                base.times_ns.len()
            ));
        }
        let ratios: Vec<f64> = r
            .times_ns
            .iter()
            .zip(&base.times_ns)
            .map(|(a, b)| a / b)
            .collect();
        out.push(EbpfRow {
            program: r.program.clone(),
            measure: r.measure.clone(),
            engine: r.engine.clone(),
            sample: measured.then(|| Sample::from_times(r.times_ns.clone(), 1)),
            vs_ebpf_jit: (measured && r.engine != "ebpf-jit")
                .then(|| Sample::from_times(ratios, 1)),
            skipped: r.skipped.clone(),
            target: report.target.clone(),
        });
    }
    Ok(out)
}

/// The group's table: one line per program and measure, one column pair per engine.
pub fn markdown(rows: &[EbpfRow], out: &mut String) {
    let mut engines: Vec<&str> = Vec::new();
    let mut programs: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
        if !programs.contains(&(r.program.as_str(), r.measure.as_str())) {
            programs.push((&r.program, &r.measure));
        }
    }
    let mut header = vec!["program".to_string(), "measure".to_string()];
    for e in &engines {
        header.push(format!("{e} (median, range)"));
        if *e != "ebpf-jit" {
            header.push(format!("{e} ÷ ebpf-jit"));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let cells = programs
        .iter()
        .map(|&(program, measure)| {
            let mut line = vec![program.to_string(), measure.to_string()];
            for e in &engines {
                let r = rows
                    .iter()
                    .find(|r| r.program == program && r.measure == measure && r.engine == *e);
                let time = match r {
                    Some(EbpfRow {
                        sample: Some(s), ..
                    }) => format!("{} ({})", human_ns(s.median_ns), crate::results::range(s)),
                    Some(EbpfRow {
                        skipped: Some(why), ..
                    }) => format!("– ({why})"),
                    _ => "–".into(),
                };
                line.push(time);
                if *e != "ebpf-jit" {
                    line.push(
                        r.and_then(|r| r.vs_ebpf_jit.as_ref())
                            .map_or("–".into(), crate::results::ratio_range),
                    );
                }
            }
            line
        })
        .collect();
    crate::results::table(out, &header, cells);
    let target = rows.first().map_or("", |r| r.target.as_str());
    out.push_str(&format!(
        "On {target}. `ebpf-jit` checks every load and store against the memory, the \
         metadata buffer and the stack, as rbpf's interpreter and its Cranelift JIT do; \
         **rbpf's hand-written JIT checks no memory access** (and writes its code into one \
         4 KiB page, so it refuses long programs). Compile: `EbpfVm::new` (verify) + \
         register a helper + compile, bytecode to callable, each engine's. Above 1 in a \
         ÷ column: ebpf-jit is faster.\n\n"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, times: &[f64], skipped: Option<&str>) -> ReportRow {
        ReportRow {
            program: "p".into(),
            measure: "run".into(),
            engine: engine.into(),
            times_ns: times.to_vec(),
            skipped: skipped.map(String::from),
        }
    }

    #[test]
    fn ratios_are_taken_round_by_round_and_skipped_engines_keep_their_reason() {
        let report = Report {
            target: "x86_64-linux".into(),
            rows: vec![
                row("ebpf-jit", &[10.0, 20.0, 40.0], None),
                row("rbpf JIT", &[5.0, 30.0, 40.0], None),
                row("rbpf Cranelift", &[], Some("no backend")),
            ],
        };
        let rows = rows(report).unwrap();
        let ratio = rows[1].vs_ebpf_jit.as_ref().unwrap();
        assert_eq!(
            (ratio.min_ns, ratio.median_ns, ratio.max_ns),
            (0.5, 1.0, 1.5)
        );
        assert!(rows[0].vs_ebpf_jit.is_none());
        assert_eq!(rows[2].skipped.as_deref(), Some("no backend"));
        let mut md = String::new();
        markdown(&rows, &mut md);
        assert!(md.contains("– (no backend)"), "{md}");
        assert!(md.contains("1.00× (0.50 – 1.50)"), "{md}");
    }

    #[test]
    fn unpaired_rounds_are_an_error_naming_the_row() {
        let report = Report {
            target: "x86_64-linux".into(),
            rows: vec![
                row("ebpf-jit", &[1.0, 2.0], None),
                row("rbpf JIT", &[1.0], None),
            ],
        };
        let err = rows(report).unwrap_err();
        assert!(err.contains("p (run, rbpf JIT)"), "{err}");
    }
}
