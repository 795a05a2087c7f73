//! The benchmark results: one row type per table, serialised to `bench/report/results.json`
//! and rendered as markdown tables.

use crate::harness::{human_ns, Sample};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub machine: Vec<(String, String)>,
    pub command: String,
    pub toolchain: Vec<ToolchainRow>,
    pub stitch: Vec<StitchRow>,
    pub memory: Vec<MemoryRow>,
    pub peer: Vec<PeerRow>,
    pub exec: Vec<ExecRow>,
    /// The examples against CPython and PyPy (`pyvm` group); absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pyvm: Vec<PyVmRow>,
    /// examples/ebpf-jit against rbpf 0.4 (`ebpf` group); absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ebpf: Vec<crate::ebpf::EbpfRow>,
    /// Groups that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Groups not run this time (`--only`) whose figures come from the previous
    /// `results.json`, with the command that measured them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried_over: Vec<(String, String)>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ToolchainRow {
    pub case: String,
    pub targets: usize,
    /// Stencils built (all targets), or 0 for a no-op.
    pub stencils: usize,
    pub wall: Sample,
    /// Median user + system time of the toolchain and its clang children, ns.
    pub cpu_ns: f64,
}

impl ToolchainRow {
    pub fn cpu_use(&self) -> f64 {
        self.cpu_ns / self.wall.median_ns
    }
    pub fn ms_per_stencil(&self) -> Option<f64> {
        (self.stencils > 0 && self.case.starts_with("clean"))
            .then(|| self.wall.median_ms() / self.stencils as f64)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct StitchRow {
    pub case: String,
    pub instances: usize,
    pub code_bytes: usize,
    /// Per trace.
    pub sample: Sample,
    /// A `memcpy` of the trace's code bytes, timed in the same rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcpy: Option<Sample>,
    /// Stitching ÷ that `memcpy`, run by run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_memcpy: Option<Sample>,
    /// The same runs' CPU time of the stitching thread, per trace: wall time less the time
    /// the thread was not running (on a loaded machine it waits for a core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_cpu: Option<Sample>,
    /// The `memcpy`'s thread CPU time, and stitching ÷ `memcpy` on that clock, run by run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcpy_cpu: Option<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ratio_to_memcpy: Option<Sample>,
}

impl StitchRow {
    pub fn new(case: &str, instances: usize, code_bytes: usize, sample: Sample) -> StitchRow {
        StitchRow {
            case: case.into(),
            instances,
            code_bytes,
            sample,
            memcpy: None,
            ratio_to_memcpy: None,
            thread_cpu: None,
            memcpy_cpu: None,
            cpu_ratio_to_memcpy: None,
        }
    }
    pub fn ns_per_instance(&self) -> f64 {
        self.sample.median_ns / self.instances as f64
    }
    pub fn mb_per_s(&self) -> f64 {
        self.code_bytes as f64 / self.sample.median_ns * 1e3
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MemoryRow {
    pub case: String,
    pub traces: usize,
    pub instances_per_trace: usize,
    pub chunk_bytes: usize,
    /// Sum of the traces' code and data ranges.
    pub real_bytes: usize,
    /// The arena's live blocks (granule-rounded).
    pub used_bytes: usize,
    /// Bytes the arena has committed (made accessible), code counted once + data.
    pub mapped_bytes: usize,
    /// Pages overlapped by live traces' code and data.
    pub touched_bytes: usize,
    /// Of those, resident according to `mincore`.
    pub resident_bytes: usize,
    pub chunks: usize,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PeerRow {
    pub trace: String,
    pub backend: String,
    /// The backend's optimisation setting where `backend` does not name it (Cranelift's
    /// `opt_level`: `none` or `speed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opt_level: Option<String>,
    pub instances: usize,
    /// `None` for the interpreter (VM examples), which compiles nothing.
    pub compile: Option<Sample>,
    /// Run time per loop round (counting loop) or per program run (VM examples).
    pub run: Option<Sample>,
    pub run_unit: String,
    /// Compile time ÷ copy-and-patch's, run by run (alternated rounds), where measured so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_ratio: Option<Sample>,
    /// Run time ÷ copy-and-patch's, run by run, where measured so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_ratio: Option<Sample>,
    /// The compile runs' thread CPU time, and its ratio to copy-and-patch's run by run:
    /// on a loaded machine the steadier figures (wall time also counts waiting for a core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cpu: Option<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cpu_ratio: Option<Sample>,
    /// Compile time ÷ that of copy-and-patch writing code through a persistent alias
    /// (`CodeWrites::PersistentAlias`, no system call per trace), run by run, wall and
    /// thread CPU; on the rows of traces where that mode was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ratio_to_alias: Option<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cpu_ratio_to_alias: Option<Sample>,
}

/// Whether a peer row is the VM's (a `vm-peer` row: an example program with LLVM as the
/// VM's trace compiler) rather than the kit's (a synthetic trace of the `peer` group).
pub fn is_vm_row(row: &PeerRow) -> bool {
    row.trace.starts_with("vm/examples/")
}

impl PeerRow {
    /// The backend with its opt level, e.g. `cranelift-ssa (speed)`.
    pub fn label(&self) -> String {
        match &self.opt_level {
            Some(o) => format!("{} ({o})", self.backend),
            None => self.backend.clone(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ExecRow {
    pub example: String,
    pub mode: String,
    pub run: Sample,
    pub traces: u64,
    pub uops: u64,
    pub compile_ns: f64,
    /// `jit` mode: the same clock as `compile_ns` on a warm VM, per micro-op (the last run's
    /// traces compiled again by its backend, round after round: `exec::warm_compile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_compile: Option<Sample>,
    pub code_bytes: u64,
}

/// One runner on one example in the `pyvm` group (see `pyvm.rs` for what each runner is).
#[derive(Debug, Serialize, Deserialize)]
pub struct PyVmRow {
    pub example: String,
    /// `cpjit interp`, `cpjit jit`, `LLVM -O2`, or a Python implementation with its version
    /// (`CPython 3.11.7`, `PyPy 7.3.11`).
    pub runner: String,
    /// The program's run inside the process, start-up excluded: `Vm::run` from a fresh VM
    /// (tier-up and compiles included), or the Python program's `main()` in a fresh process.
    pub in_process: Sample,
    /// The same runs less the time the VM spent compiling traces (`cpjit jit`, `LLVM -O2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_excluded: Option<Sample>,
    /// This runner's time ÷ `cpjit jit`'s, run by run: in-process, or compile excluded on
    /// both sides for `LLVM -O2`. `None` for `cpjit jit` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_jit: Option<Sample>,
    /// Whole process, spawn to exit (`cpjit-vm run` for the cpjit modes; none for LLVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_process: Option<Sample>,
    /// Whole process ÷ `cpjit-vm run --mode jit`'s, run by run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_vs_jit: Option<Sample>,
}

pub(crate) fn table(out: &mut String, header: &[&str], rows: Vec<Vec<String>>) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

pub(crate) fn range(s: &Sample) -> String {
    format!("{} – {}", human_ns(s.min_ns), human_ns(s.max_ns))
}

/// A per-run ratio: `median× (min – max)`, with fewer decimals for large ratios.
pub(crate) fn ratio_range(s: &Sample) -> String {
    let f = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    };
    format!("{}× ({} – {})", f(s.median_ns), f(s.min_ns), f(s.max_ns))
}

fn kib(b: usize) -> String {
    format!("{:.1} KiB", b as f64 / 1024.0)
}

/// Renders one table.
type Render = fn(&Results, &mut String);

impl Results {
    pub fn toolchain_md(&self, out: &mut String) {
        table(
            out,
            &[
                "case",
                "targets",
                "stencils",
                "wall (median)",
                "range",
                "ms/stencil",
                "CPU (user+sys)",
                "CPU use",
            ],
            self.toolchain
                .iter()
                .map(|r| {
                    vec![
                        r.case.clone(),
                        r.targets.to_string(),
                        r.stencils.to_string(),
                        human_ns(r.wall.median_ns),
                        range(&r.wall),
                        r.ms_per_stencil().map_or("–".into(), |m| format!("{m:.2}")),
                        human_ns(r.cpu_ns),
                        format!("{:.0} %", 100.0 * r.cpu_use()),
                    ]
                })
                .collect(),
        );
    }

    pub fn stitch_md(&self, out: &mut String) {
        table(
            out,
            &[
                "case",
                "instances",
                "code bytes",
                "per trace (median)",
                "range",
                "ns/instance",
                "MB/s of code",
                "memcpy of the code",
                "÷ memcpy (per run: median, min – max)",
                "thread CPU ns/instance (median, min – max)",
                "thread CPU ÷ memcpy's (per run)",
            ],
            self.stitch
                .iter()
                .map(|r| {
                    vec![
                        r.case.clone(),
                        r.instances.to_string(),
                        r.code_bytes.to_string(),
                        human_ns(r.sample.median_ns),
                        range(&r.sample),
                        format!("{:.1}", r.ns_per_instance()),
                        format!("{:.0}", r.mb_per_s()),
                        r.memcpy
                            .as_ref()
                            .map_or("–".into(), |m| human_ns(m.median_ns)),
                        r.ratio_to_memcpy.as_ref().map_or("–".into(), ratio_range),
                        r.thread_cpu.as_ref().map_or("–".into(), |c| {
                            let per = |ns: f64| ns / r.instances as f64;
                            format!(
                                "{:.1} ({:.1} – {:.1})",
                                per(c.median_ns),
                                per(c.min_ns),
                                per(c.max_ns)
                            )
                        }),
                        r.cpu_ratio_to_memcpy
                            .as_ref()
                            .map_or("–".into(), ratio_range),
                    ]
                })
                .collect(),
        );
    }

    pub fn memory_md(&self, out: &mut String) {
        table(
            out,
            &[
                "case",
                "traces × instances",
                "chunk",
                "real",
                "used",
                "mapped",
                "mapped/used",
                "pages touched",
                "resident",
                "touched/used",
            ],
            self.memory
                .iter()
                .map(|r| {
                    vec![
                        r.case.clone(),
                        format!("{} × {}", r.traces, r.instances_per_trace),
                        kib(r.chunk_bytes),
                        kib(r.real_bytes),
                        kib(r.used_bytes),
                        kib(r.mapped_bytes),
                        format!("{:.2}", r.mapped_bytes as f64 / r.used_bytes as f64),
                        kib(r.touched_bytes),
                        kib(r.resident_bytes),
                        format!("{:.2}", r.touched_bytes as f64 / r.used_bytes as f64),
                    ]
                })
                .collect(),
        );
    }

    pub fn peer_md(&self, out: &mut String) {
        let find = |r: &PeerRow, backend: &str| {
            self.peer
                .iter()
                .find(|c| c.trace == r.trace && c.backend == backend)
        };
        let dash = || "–".to_string();
        table(
            out,
            &[
                "trace",
                "backend",
                "instances",
                "compile (median)",
                "compile range",
                "compile ÷ copy-and-patch",
                "compile, thread CPU (median)",
                "thread CPU ÷ copy-and-patch",
                "run (median)",
                "run range",
                "run ÷ copy-and-patch",
                "speed-up vs interpreter",
                "run unit",
            ],
            self.peer
                .iter()
                .map(|r| {
                    let cp = find(r, "copy-and-patch");
                    let interp = find(r, "interpreter");
                    // Per-run ratios from alternated rounds where measured so, else the
                    // ratio of the medians.
                    let ratio = |per_run: Option<&Sample>,
                                 a: Option<&Sample>,
                                 b: Option<&Sample>,
                                 digits: usize| {
                        if let Some(s) = per_run {
                            return ratio_range(s);
                        }
                        a.zip(b).map_or_else(dash, |(a, b)| {
                            format!("{:.*}×", digits, a.median_ns / b.median_ns)
                        })
                    };
                    let cp_compile = cp.and_then(|c| c.compile.as_ref());
                    let cp_run = cp.and_then(|c| c.run.as_ref());
                    vec![
                        r.trace.clone(),
                        r.label(),
                        r.instances.to_string(),
                        r.compile
                            .as_ref()
                            .map_or_else(dash, |s| human_ns(s.median_ns)),
                        r.compile.as_ref().map_or_else(dash, range),
                        ratio(r.compile_ratio.as_ref(), r.compile.as_ref(), cp_compile, 0),
                        r.compile_cpu
                            .as_ref()
                            .map_or_else(dash, |s| human_ns(s.median_ns)),
                        r.compile_cpu_ratio.as_ref().map_or_else(dash, ratio_range),
                        r.run.as_ref().map_or_else(dash, |s| human_ns(s.median_ns)),
                        r.run.as_ref().map_or_else(dash, range),
                        ratio(r.run_ratio.as_ref(), r.run.as_ref(), cp_run, 2),
                        ratio(None, interp.and_then(|i| i.run.as_ref()), r.run.as_ref(), 2),
                        r.run_unit.clone(),
                    ]
                })
                .collect(),
        );
    }

    /// Compile time per stencil instance of the synthetic traces (straight traces and the
    /// counting loop), every backend, with the per-run ratio to copy-and-patch.
    pub fn compile_per_instance_md(&self, out: &mut String) {
        let synthetic = |r: &&PeerRow| !is_vm_row(r) && r.compile.is_some();
        table(
            out,
            &[
                "trace",
                "backend",
                "ns/instance (median)",
                "range",
                "÷ copy-and-patch (per run: median, min – max)",
                "thread CPU ns/instance (median)",
                "thread CPU ÷ copy-and-patch (per run)",
            ],
            self.peer
                .iter()
                .filter(synthetic)
                .map(|r| {
                    let s = r.compile.as_ref().expect("filtered");
                    let per = |ns: f64| format!("{:.1}", ns / r.instances as f64);
                    vec![
                        r.trace.clone(),
                        r.label(),
                        per(s.median_ns),
                        format!("{} – {}", per(s.min_ns), per(s.max_ns)),
                        r.compile_ratio.as_ref().map_or("–".into(), ratio_range),
                        r.compile_cpu
                            .as_ref()
                            .map_or("–".into(), |c| per(c.median_ns)),
                        r.compile_cpu_ratio.as_ref().map_or("–".into(), ratio_range),
                    ]
                })
                .collect(),
        );
    }

    pub fn exec_md(&self, out: &mut String) {
        table(
            out,
            &[
                "example",
                "mode",
                "run (median)",
                "range",
                "vs interp",
                "traces",
                "micro-ops",
                "compile",
                "compile per micro-op",
                "warm compile per micro-op",
                "code bytes",
            ],
            self.exec
                .iter()
                .map(|r| {
                    let interp = self
                        .exec
                        .iter()
                        .find(|c| c.example == r.example && c.mode == "interp");
                    vec![
                        r.example.clone(),
                        r.mode.clone(),
                        human_ns(r.run.median_ns),
                        range(&r.run),
                        interp.map_or("–".into(), |i| {
                            format!("{:.2}×", i.run.median_ns / r.run.median_ns)
                        }),
                        r.traces.to_string(),
                        r.uops.to_string(),
                        human_ns(r.compile_ns),
                        // The VM's whole backend compile (lowering, push, finish) over
                        // the stencil instances it stitched (issue 36's per-micro-op cost).
                        if r.compile_ns > 0.0 && r.uops > 0 {
                            human_ns(r.compile_ns / r.uops as f64)
                        } else {
                            "–".into()
                        },
                        // The same clock on a warm VM (issue 36's criterion), median and
                        // range over rounds.
                        r.warm_compile.as_ref().map_or("–".into(), |w| {
                            format!("{} ({})", human_ns(w.median_ns), range(w))
                        }),
                        r.code_bytes.to_string(),
                    ]
                })
                .collect(),
        );
    }

    /// The `pyvm` group, every runner on every example.
    pub fn pyvm_md(&self, out: &mut String) {
        let dash = || "–".to_string();
        let ratio = |s: &Option<Sample>| s.as_ref().map_or_else(dash, ratio_range);
        table(
            out,
            &[
                "example",
                "runner",
                "in-process (median)",
                "range",
                "compile excluded",
                "÷ jit (per run)",
                "whole process (median)",
                "range",
                "÷ cpjit-vm jit (per run)",
            ],
            self.pyvm
                .iter()
                .map(|r| {
                    vec![
                        r.example.clone(),
                        r.runner.clone(),
                        human_ns(r.in_process.median_ns),
                        range(&r.in_process),
                        r.compile_excluded
                            .as_ref()
                            .map_or_else(dash, |s| human_ns(s.median_ns)),
                        ratio(&r.vs_jit),
                        r.whole_process
                            .as_ref()
                            .map_or_else(dash, |s| human_ns(s.median_ns)),
                        r.whole_process.as_ref().map_or_else(dash, range),
                        ratio(&r.whole_vs_jit),
                    ]
                })
                .collect(),
        );
    }

    /// Per example, each runner's time ÷ `cpjit jit`'s (median of the per-run ratios; above
    /// 1 means `jit` is faster): start-up excluded, then included.
    pub fn pyvm_ratios_md(&self, out: &mut String) {
        let mut examples: Vec<&str> = self.pyvm.iter().map(|r| r.example.as_str()).collect();
        examples.dedup();
        let mut runners: Vec<&str> = Vec::new();
        for r in self.pyvm.iter().filter(|r| r.runner != "cpjit jit") {
            if !runners.contains(&r.runner.as_str()) {
                runners.push(r.runner.as_str());
            }
        }
        let mut header = vec!["example".to_string()];
        header.extend(runners.iter().map(|r| format!("{r} ÷ jit")));
        header.extend(
            runners
                .iter()
                .filter(|r| **r != "LLVM -O2")
                .map(|r| format!("{r} ÷ jit, whole process")),
        );
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let cell = |example: &str, runner: &str, whole: bool| {
            self.pyvm
                .iter()
                .find(|r| r.example == example && r.runner == runner)
                .and_then(|r| (if whole { &r.whole_vs_jit } else { &r.vs_jit }).as_ref())
                .map_or("–".into(), |s| format!("{:.2}", s.median_ns))
        };
        table(
            out,
            &header,
            examples
                .iter()
                .map(|e| {
                    let mut row = vec![e.to_string()];
                    row.extend(runners.iter().map(|r| cell(e, r, false)));
                    row.extend(
                        runners
                            .iter()
                            .filter(|r| **r != "LLVM -O2")
                            .map(|r| cell(e, r, true)),
                    );
                    row
                })
                .collect(),
        );
    }

    /// All tables, each under a heading.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let sections: [(&str, bool, Render); 9] = [
            (
                "Toolchain",
                !self.toolchain.is_empty(),
                Results::toolchain_md,
            ),
            ("Stitching", !self.stitch.is_empty(), Results::stitch_md),
            ("Memory", !self.memory.is_empty(), Results::memory_md),
            (
                "Peer: copy-and-patch vs LLVM and Cranelift as a JIT",
                !self.peer.is_empty(),
                Results::peer_md,
            ),
            (
                "Peer: compile time per instance",
                self.peer.iter().any(|r| r.compile_ratio.is_some()),
                Results::compile_per_instance_md,
            ),
            (
                "Execution of the examples",
                !self.exec.is_empty(),
                Results::exec_md,
            ),
            (
                "Peers: CPython and PyPy on the examples, ratios to `jit`",
                !self.pyvm.is_empty(),
                Results::pyvm_ratios_md,
            ),
            (
                "Peers: CPython and PyPy on the examples, every runner",
                !self.pyvm.is_empty(),
                Results::pyvm_md,
            ),
            (
                "Example: examples/ebpf-jit against rbpf 0.4 (interpreter, JIT, Cranelift)",
                !self.ebpf.is_empty(),
                |r, out| crate::ebpf::markdown(&r.ebpf, out),
            ),
        ];
        for (title, present, render) in sections {
            if present {
                let _ = writeln!(out, "### {title}\n");
                render(self, &mut out);
            }
        }
        for (group, why) in &self.skipped {
            let _ = writeln!(out, "- skipped `{group}`: {why}");
        }
        for (group, command) in &self.carried_over {
            let _ = writeln!(
                out,
                "- `{group}`: not run this time; figures carried over from an earlier `{command}`"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ns: f64) -> Sample {
        Sample::from_times(vec![ns], 1)
    }

    fn row(backend: &str, compile: Option<f64>, run: f64) -> PeerRow {
        PeerRow {
            trace: "vm/examples/sum.vm: 1 trace(s)".into(),
            backend: backend.into(),
            opt_level: None,
            instances: 16,
            compile: compile.map(sample),
            run: Some(sample(run)),
            run_unit: "per program run, compile excluded".into(),
            compile_ratio: None,
            run_ratio: None,
            compile_cpu: None,
            compile_cpu_ratio: None,
            compile_ratio_to_alias: None,
            compile_cpu_ratio_to_alias: None,
        }
    }

    #[test]
    fn peer_table_relates_run_times_to_copy_and_patch_and_the_interpreter() {
        let r = Results {
            peer: vec![
                row("interpreter", None, 80e6),
                row("copy-and-patch", Some(2e3), 8e6),
                row("LLVM -O0", Some(2e6), 16e6),
            ],
            ..Results::default()
        };
        let mut out = String::new();
        r.peer_md(&mut out);
        let lines: Vec<&str> = out.trim_end().lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        // The interpreter compiles nothing; it is 10× slower than copy-and-patch.
        assert!(
            lines[2].contains("| interpreter | 16 | – | – | – | – | – | 80.00 ms |")
                && lines[2].contains("| 10.00× | 1.00× |"),
            "{}",
            lines[2]
        );
        // LLVM -O0: 1000× the compile time, 2× the run time, 5× faster than the interpreter.
        assert!(
            lines[4].contains("| 1000× | – | – | 16.00 ms |")
                && lines[4].contains("| 2.00× | 5.00× |"),
            "{}",
            lines[4]
        );
    }
}
