//! BENCHMARKS.md: the machine, the command, the headline ratios against the issue's targets,
//! the tables and the plots, all from one run. Hand-written analysis lives in
//! `bench/report/notes.md` and is included verbatim, so regenerating keeps it.

use crate::results::Results;
use std::fmt::Write as _;
use std::process::Command;

/// Facts about this machine and the tools, as (key, value) pairs.
pub fn machine() -> Vec<(String, String)> {
    let first_line = |program: &str, args: &[&str]| -> String {
        Command::new(program)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
            .unwrap_or_else(|| format!("unknown (`{program}` did not run)"))
    };
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    vec![
        ("CPU".into(), cpu_model),
        ("cores (nproc)".into(), cores.to_string()),
        ("kernel".into(), first_line("uname", &["-sr"])),
        ("rustc".into(), first_line("rustc", &["--version"])),
        (
            "clang".into(),
            first_line(&cpjit_toolchain::clang::clang_program(), &["--version"]),
        ),
        (
            "LLVM (linked)".into(),
            cpjit_toolchain::llvm::version().unwrap_or_else(|e| e.to_string()),
        ),
        (
            "load average (1, 5, 15 min) when the run started".into(),
            std::fs::read_to_string("/proc/loadavg")
                .ok()
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
                .unwrap_or_else(|| "unknown".into()),
        ),
    ]
}

/// Loop-heavy examples for the `jit` ≥ 3× `interp` target.
const LOOP_HEAVY: [&str; 6] = ["sum", "fib", "nested", "mandelbrot", "nbody", "sieve"];

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**missed**"
    }
}

/// The issue's targets with this run's figures.
fn targets(r: &Results) -> String {
    let mut out = String::new();
    jit_vs_interp(r, &mut out);
    counting_loop_vs_o0(r, &mut out);
    examples_vs_o0(r, &mut out);
    versus_cranelift(r, &mut out);
    stitching(r, &mut out);
    memory_and_toolchain(r, &mut out);
    if out.is_empty() {
        return out;
    }
    format!("| target | this run | verdict |\n|---|---|---|\n{out}")
}

/// The `jit` mode against the interpreter on the loop-heavy examples.
fn jit_vs_interp(r: &Results, out: &mut String) {
    let speedups: Vec<(String, f64)> = LOOP_HEAVY
        .iter()
        .filter_map(|name| {
            let t = |mode: &str| {
                r.exec
                    .iter()
                    .find(|e| e.example == *name && e.mode == mode)
                    .map(|e| e.run.median_ns)
            };
            Some((name.to_string(), t("interp")? / t("jit")?))
        })
        .collect();
    if !speedups.is_empty() {
        let all = speedups.iter().all(|(_, s)| *s >= 3.0);
        let list: Vec<String> = speedups
            .iter()
            .map(|(n, s)| format!("{n} {s:.2}×"))
            .collect();
        let _ = writeln!(
            out,
            "| `jit` ≥ 3× faster than `interp` on loop-heavy examples | {} | {} |",
            list.join(", "),
            verdict(all)
        );
    }
}

/// Compile ratio and run time against LLVM -O0, on the counting loop.
fn counting_loop_vs_o0(r: &Results, out: &mut String) {
    let find = |backend: &str| {
        r.peer
            .iter()
            .find(|p| p.trace.starts_with("counting loop") && p.backend == backend)
            .filter(|p| p.run.is_some() && p.compile.is_some())
    };
    if let (Some(cp), Some(o0)) = (find("copy-and-patch"), find("LLVM -O0")) {
        let compile = |p: &crate::results::PeerRow| p.compile.as_ref().expect("filtered").median_ns;
        let ratio = compile(o0) / compile(cp);
        let _ = writeln!(
            out,
            "| copy-and-patch compiles ≥ 50× faster than LLVM -O0 ({}) | {ratio:.0}× | {} |",
            cp.trace,
            verdict(ratio >= 50.0)
        );
        let (a, b) = (
            cp.run.as_ref().expect("filtered").median_ns,
            o0.run.as_ref().expect("filtered").median_ns,
        );
        let _ = writeln!(
            out,
            "| copy-and-patch run time no worse than LLVM -O0 | {a:.2} vs {b:.2} ns/round ({:.2}×) | {} |",
            b / a,
            verdict(a <= b * 1.02)
        );
    }
}

/// Stitching speed per instance, end to end and pre-lowered.
fn stitching(r: &Results, out: &mut String) {
    // End to end (the kit's selection + push + finish, issue 36) and stitching alone
    // (pre-lowered: members selected beforehand, push + finish).
    for (case, goal) in [
        (
            "warm arena, end to end (selection + push + finish)",
            "end to end (selection + push + finish)",
        ),
        (
            "warm arena, pre-lowered (push + finish)",
            "stitching pre-lowered traces (push + finish)",
        ),
    ] {
        let Some(s) = r
            .stitch
            .iter()
            .find(|s| s.case == case && s.instances == 1000)
        else {
            continue;
        };
        let per = |ns: f64| ns / s.instances as f64;
        let memcpy = s.ratio_to_memcpy.as_ref().map_or(String::new(), |m| {
            format!(
                "; {:.1}× a memcpy of the same bytes (per run, median)",
                m.median_ns
            )
        });
        // Judged on the thread's CPU time where measured: stitching is single-threaded
        // work, and on a loaded machine wall time also counts the time the thread waited
        // for a core (the scheduler, not the stitcher); wall time is quoted beside it.
        let wall = format!(
            "wall {:.1} ns ({:.1} – {:.1})",
            per(s.sample.median_ns),
            per(s.sample.min_ns),
            per(s.sample.max_ns)
        );
        let (judged, clock, shown) = match &s.thread_cpu {
            Some(c) => (
                per(c.median_ns),
                "thread CPU time (wall time also counts waiting for a core on a loaded machine)",
                format!(
                    "thread CPU {:.1} ns ({:.1} – {:.1}); {wall}",
                    per(c.median_ns),
                    per(c.min_ns),
                    per(c.max_ns)
                ),
            ),
            None => (per(s.sample.median_ns), "wall time", wall),
        };
        let _ = writeln!(
            out,
            "| {goal} ≤ 30 ns per instance, 1,000 instances, warm arena; judged on {clock} | {shown}{memcpy} | {} |",
            verdict(judged <= 30.0)
        );
    }
}

/// Bytes mapped against bytes used, and the stencil build times.
fn memory_and_toolchain(r: &Results, out: &mut String) {
    if let Some(m) = r
        .memory
        .iter()
        .find(|m| m.traces == 1000 && m.chunk_bytes == 1 << 20)
    {
        let mapped = m.mapped_bytes as f64 / m.used_bytes as f64;
        let touched = m.touched_bytes as f64 / m.used_bytes as f64;
        let _ = writeln!(
            out,
            "| bytes mapped ≤ 1.1 × bytes used, 1,000 tiny traces | mapped/used {mapped:.2} (committed pages; chunks reserve 1 MiB + 1 MiB of address space); pages touched/used {touched:.2} | {} |",
            verdict(mapped <= 1.1)
        );
    }
    if let Some(n) = r.toolchain.iter().find(|t| t.case.starts_with("no-op")) {
        let _ = writeln!(
            out,
            "| no-op stencil rebuild < 0.3 s | {:.3} s | {} |",
            n.wall.median_ns / 1e9,
            verdict(n.wall.median_ns < 0.3e9)
        );
    }
    if let Some(c) = r
        .toolchain
        .iter()
        .find(|t| t.case.starts_with("clean build, default"))
    {
        let _ = writeln!(
            out,
            "| clean stencil build, all {} targets, 2 cores (report) | {:.2} s, {} stencils, CPU use {:.0} % | – |",
            c.targets,
            c.wall.median_ns / 1e9,
            c.stencils,
            100.0 * c.cpu_use()
        );
    }
}

/// The examples issue 37 times at real sizes (`overflow` stops at an error after 5,000
/// rounds: a test of error reporting, not a workload).
const TIMED_EXAMPLES: [&str; 11] = [
    "calls",
    "collatz",
    "fib",
    "insertion",
    "integrate",
    "mandelbrot",
    "nbody",
    "nested",
    "recursion",
    "sieve",
    "sum",
];

/// Issue 11's "Done when" lines on the `pyvm` group's figures: medians of the per-run ratios
/// to `jit`, in-process (start-up excluded); LLVM -O2 with compile time excluded on both
/// sides. Empty when the group did not run.
fn issue11_targets(r: &Results) -> String {
    // (example, ratio) for a runner, over the timed examples it ran.
    let ratios = |runner: &dyn Fn(&str) -> bool, whole: bool| -> Vec<(String, f64)> {
        TIMED_EXAMPLES
            .iter()
            .filter_map(|name| {
                let row = r
                    .pyvm
                    .iter()
                    .find(|p| p.example == *name && runner(&p.runner))?;
                let s = if whole {
                    &row.whole_vs_jit
                } else {
                    &row.vs_jit
                };
                Some((name.to_string(), s.as_ref()?.median_ns))
            })
            .collect()
    };
    let list = |v: &[(String, f64)], f: &dyn Fn(f64) -> f64| {
        v.iter()
            .map(|(n, x)| format!("{n} {:.2}", f(*x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let of =
        |v: &[(String, f64)]| format!("{} of {} timed examples", v.len(), TIMED_EXAMPLES.len());
    let mut out = String::new();
    let pypy = ratios(&|n| n.starts_with("PyPy"), false);
    if !pypy.is_empty() {
        let faster = pypy.iter().filter(|(_, x)| *x > 1.0).count();
        // PyPy ÷ jit ≥ 1/1.5: jit within 1.5× of PyPy.
        let within = pypy.iter().all(|(_, x)| *x >= 1.0 / 1.5);
        let _ = writeln!(
            out,
            "| `jit` faster than PyPy on ≥ 8 of the 11 examples at real sizes and within 1.5× on the rest (PyPy ÷ `jit`, in-process CPU time) | faster on {faster} of {}: {} | {} |",
            pypy.len(),
            list(&pypy, &|x| x),
            verdict(faster >= 8 && within && pypy.len() == TIMED_EXAMPLES.len())
        );
    }
    let interp = ratios(&|n| n == "cpjit interp", false);
    if !interp.is_empty() {
        let _ = writeln!(
            out,
            "| `jit` ≥ 5× faster than `interp` on every example (`interp` ÷ `jit`, in-process; {}) | {} | {} |",
            of(&interp),
            list(&interp, &|x| x),
            verdict(interp.len() == TIMED_EXAMPLES.len() && interp.iter().all(|(_, x)| *x >= 5.0))
        );
    }
    let llvm = ratios(&|n| n == "LLVM -O2", false);
    if !llvm.is_empty() {
        // LLVM -O2 ÷ jit per run; jit is within 1.5× when jit ÷ LLVM -O2 ≤ 1.5.
        let _ = writeln!(
            out,
            "| `jit` within 1.5× of LLVM -O2 compiling the same lowered traces, on every example (`jit` ÷ LLVM -O2, in-process CPU time, compile excluded; {}) | {} | {} |",
            of(&llvm),
            list(&llvm, &|x| 1.0 / x),
            verdict(
                llvm.len() == TIMED_EXAMPLES.len() && llvm.iter().all(|(_, x)| 1.0 / x <= 1.5)
            )
        );
    }
    let cpython = ratios(&|n| n.starts_with("CPython"), false);
    if !cpython.is_empty() {
        let _ = writeln!(
            out,
            "| (report) CPython ÷ `jit`, in-process | {} | – |",
            list(&cpython, &|x| x)
        );
    }
    for (name, starts) in [("PyPy", "PyPy"), ("CPython", "CPython")] {
        let whole = ratios(&|n| n.starts_with(starts), true);
        if !whole.is_empty() {
            let _ = writeln!(
                out,
                "| (report) {name} ÷ `cpjit-vm --mode jit`, whole process (start-up included) | {} | – |",
                list(&whole, &|x| x)
            );
        }
    }
    if out.is_empty() {
        return out;
    }
    format!("| target | this run | verdict |\n|---|---|---|\n{out}")
}

/// Compile and run time of copy-and-patch against LLVM -O0 on the VM examples' traces
/// (run time: whole program, compile excluded).
fn examples_vs_o0(r: &Results, out: &mut String) {
    let median = |s: &Option<crate::harness::Sample>| s.as_ref().map(|s| s.median_ns);
    let (mut compile, mut run) = (Vec::new(), Vec::new());
    for cp in r
        .peer
        .iter()
        .filter(|p| crate::results::is_vm_row(p) && p.backend == "copy-and-patch")
    {
        let Some(o0) = r
            .peer
            .iter()
            .find(|p| p.trace == cp.trace && p.backend == "LLVM -O0")
        else {
            continue;
        };
        let name = cp.trace.split(':').next().unwrap_or(&cp.trace);
        let name = name
            .trim_start_matches("vm/examples/")
            .trim_end_matches(".vm");
        if let (Some(a), Some(b)) = (median(&cp.compile), median(&o0.compile)) {
            compile.push((name.to_string(), b / a));
        }
        if let (Some(a), Some(b)) = (median(&cp.run), median(&o0.run)) {
            run.push((name.to_string(), b / a));
        }
    }
    let line = |v: &[(String, f64)], digits: usize| {
        v.iter()
            .map(|(n, x)| format!("{n} {x:.digits$}×"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !compile.is_empty() {
        let _ = writeln!(
            out,
            "| copy-and-patch compiles ≥ 50× faster than LLVM -O0 (examples' traces; ratio O0 ÷ c&p) | {} | {} |",
            line(&compile, 0),
            verdict(compile.iter().all(|(_, x)| *x >= 50.0))
        );
    }
    if !run.is_empty() {
        let _ = writeln!(
            out,
            "| copy-and-patch run time no worse than LLVM -O0 (examples, compile excluded; ratio O0 ÷ c&p) | {} | {} |",
            line(&run, 2),
            verdict(run.iter().all(|(_, x)| *x >= 1.0 / 1.02))
        );
    }
}

/// Copy-and-patch against every Cranelift variant on every synthetic trace: the smallest
/// per-run compile-time ratio (median of the runs) must be ≥ 100×. One line per clock:
/// thread CPU time (the steadier on a loaded machine) and wall time; then the same against
/// copy-and-patch writing code through a persistent alias (`CodeWrites::PersistentAlias`,
/// no system call per trace), where that mode was measured.
fn versus_cranelift(r: &Results, out: &mut String) {
    type RatioOf = fn(&crate::results::PeerRow) -> Option<f64>;
    let lines: [(&str, &str, RatioOf); 4] = [
        ("default", "thread CPU time", |p| {
            Some(p.compile_cpu_ratio.as_ref()?.median_ns)
        }),
        ("default", "wall time", |p| {
            Some(p.compile_ratio.as_ref()?.median_ns)
        }),
        ("alias", "thread CPU time", |p| {
            Some(p.compile_cpu_ratio_to_alias.as_ref()?.median_ns)
        }),
        ("alias", "wall time", |p| {
            Some(p.compile_ratio_to_alias.as_ref()?.median_ns)
        }),
    ];
    for (mode, clock, ratio_of) in lines {
        let ratios: Vec<(String, String, f64)> = r
            .peer
            .iter()
            .filter(|p| p.backend.starts_with("cranelift"))
            .filter_map(|p| Some((p.trace.clone(), p.label(), ratio_of(p)?)))
            .collect();
        let Some((trace, label, worst)) = ratios.iter().min_by(|a, b| a.2.total_cmp(&b.2)).cloned()
        else {
            continue;
        };
        let traces: std::collections::BTreeSet<&str> =
            ratios.iter().map(|r| r.0.as_str()).collect();
        let met = ratios.iter().filter(|r| r.2 >= 100.0).count();
        let what = if mode == "alias" {
            "the same, with code written through a persistent alias (`CodeWrites::PersistentAlias`, opt-in: no system call per trace)"
        } else {
            "copy-and-patch compiles ≥ 100× faster than every Cranelift variant on every trace"
        };
        let _ = writeln!(
            out,
            "| {what} ({} traces × {} variants), {clock} | {met} of {} cells ≥ 100×; smallest: {worst:.0}× ({label}, {trace}) | {} |",
            traces.len(),
            ratios.len() / traces.len().max(1),
            ratios.len(),
            verdict(worst >= 100.0)
        );
    }
}

/// The whole BENCHMARKS.md.
pub fn benchmarks_md(r: &Results, plots: &[(String, String)]) -> String {
    let mut out = String::from(
        "# Benchmarks\n\n\
         Generated by `cargo xtask bench --report` (crate `bench/`, package `cpjit-bench`); the raw \
         figures are in [`bench/report/results.json`](bench/report/results.json). Times are medians \
         of several runs after warm-up (range = min – max). This is a benchmark, not a test: \
         nothing asserts on timing; every run's *result* is checked (examples against their \
         expected output, LLVM- and Cranelift-compiled traces against copy-and-patch's exit status \
         and helper checksum). Backends, modes and sizes that are compared are timed \
         alternately, round by round (A, B, C, A, B, C …), and ratios are computed run by run \
         from the same round; in the compile-time rows each timed run directly follows an \
         untimed run of the same backend, so that no row's time depends on which backend ran \
         before it.\n\n\
         **Which figures are whose.** The kit's groups measure the kit on its own test ops and \
         synthetic traces: `toolchain` (stencil builds), `stitch` and `memory` (the runtime), \
         `peer` (the same traces through LLVM and Cranelift as JITs). The reference VM's groups \
         measure a client of the kit on its example programs: `vm-peer` (LLVM as the VM's \
         trace compiler), `exec` (every mode) and `pyvm` (against CPython and PyPy). The \
         examples' group `ebpf` measures `examples/ebpf-jit`, an eBPF JIT built on the kit \
         from outside, against rbpf 0.4's interpreter, hand-written JIT and Cranelift JIT. \
         Each group runs alone with `cargo xtask bench --only GROUP`, each kind with `--only kit` or \
         `--only vm`.\n\n",
    );
    let _ = writeln!(out, "## Machine\n");
    for (k, v) in &r.machine {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let _ = writeln!(out, "\nCommand: `{}`\n", r.command);
    let t = targets(r);
    if !t.is_empty() {
        let _ = writeln!(out, "## Targets (issues 6 and 9)\n\n{t}");
    }
    let t = issue11_targets(r);
    if !t.is_empty() {
        let _ = writeln!(
            out,
            "## Targets (issues 11 and 37): against PyPy and LLVM -O2 at real sizes\n\n\
             Medians of per-run ratios from the `pyvm` group's alternated rounds (tables \
             *Peers: CPython and PyPy* below; examples at their real sizes); above 1 means \
             `jit` is faster, except in the LLVM line (`jit` ÷ LLVM -O2: at most 1.5 is \
             met).\n\n{t}"
        );
    }
    if let Ok(notes) = std::fs::read_to_string(crate::root().join("bench/report/notes.md")) {
        let _ = writeln!(out, "{}\n", notes.trim_end());
    }
    if !plots.is_empty() {
        let _ = writeln!(out, "## Plots\n");
        for (file, caption) in plots {
            let _ = writeln!(out, "![{caption}](bench/report/{file})\n\n*{caption}.*\n");
        }
    }
    let _ = writeln!(out, "## Tables\n");
    out.push_str(&r.markdown());
    let _ = writeln!(out, "\n## How each figure is measured\n\n{METHOD}");
    out
}

const METHOD: &str = "\
- **Toolchain**: the release `cpjit-toolchain` binary as a child process, output and cache in a \
temporary directory. *Clean*: fresh cache (`CPJIT_STENCIL_CACHE`), `--force`. *No-op*: the \
same command again (inputs digest matches). *Touch one op*: a copy of `templates/` built once, \
then `op_test_push` edited before each timed build (its translation unit is recompiled for every \
target). *Synthetic*: generated sets of 50/150/300 ops (operands, branches, a side exit, helper \
calls; 25 ops per file). CPU = user + system time of the toolchain and its clang children \
(`getrusage(RUSAGE_CHILDREN)`); CPU use 200 % = both cores busy.
- **Stitching**: `cpjit-runtime` building straight traces of the test stencils \
(`templates/testing/holes.c`; every hole kind of the x86-64 ELF set): `push` each instance, \
`finish` (copy, patch, GOT, publish with one `pwrite` to the chunk's memfd, icache flush; the \
RX view already exists, so making code executable is amortised over the chunk). The trace \
description is resolved once into an op list (op ids of the register-cached family, \
operands, labels), as a JIT's opcode table would be. *End to end*: the timed compile is the \
kit's member selection and `push` per op (`TraceBuilder::push_ops` per straight run, \
`push_op` per jump) and `finish`. \
*Pre-lowered*: the members the kit selected, resolved once into a plan (stencil indices, \
operands and targets in stencil order), and the timed compile is `push` per instance and \
`finish`: stitching alone. Traces are dropped outside the timed region. *Floor* rows: a null system call \
(`getppid`) and a `pwrite` of the 10-instance trace's code to a memfd, timed in the same \
rounds: what publishing code without any writable view of it costs the kernel at least. *New Jit*: a fresh `Jit` whose first trace reserves, commits and faults in a chunk. \
*memcpy of the code*: `copy_from_slice` of the trace's code bytes into one cache-warm buffer, \
timed in the same rounds as stitching (the floor of any stitcher; the ratio survives machine \
load). *Thread CPU*: the same stitching runs timed with `CLOCK_THREAD_CPUTIME_ID`, which \
does not count the time the thread waits for a core on a loaded machine.
- **Memory**: live traces; *used* = the arena's live blocks, *mapped* = the pages its chunks have \
committed (each chunk reserves 1 MiB code + 1 MiB data of address space and commits up to \
its high-water mark), *pages touched* = distinct pages overlapped by the traces' \
code and data, *resident* = of those, resident by `mincore`.
- **Peer**: the same trace description compiled by every backend, all backends of a trace \
timed alternately round by round (ratios to copy-and-patch are per run, from the same round). Copy-and-patch as above. LLVM: \
the IR clang-19 produced for the stencils (same flags as the stencil build, via \
`cpjit_toolchain::clang`) split into one module per stencil ahead of time; per trace, each \
instance's module is cloned, its holes replaced (operands → `inttoptr` constants, \
`_JIT_CONTINUE`/targets → the other instances' functions), linked into one module and compiled \
in-process by MCJIT (inkwell `ExecutionEngine`, which also relocates and loads the code). \
-O0: no IR passes, code generator at -O0. -O2: `default<O2>` pipeline, code generator at -O2. \
Cranelift 0.135 (`cranelift-jit`, native ISA, verifier off): the test ops lowered by hand \
(`bench/src/cranelift.rs`; Cranelift cannot read the templates' C), one function per trace, \
blocks only at jump targets and after branches; *cranelift-mem* keeps the value stack in \
memory behind an `sp` variable like the stencils, *cranelift-ssa* makes each stack slot a \
frontend variable (SSA values, block parameters at merges); `opt_level` none and speed. One \
`JITModule` per variant on `ArenaMemoryProvider` (one address-space reservation per \
module), freed and made anew outside the clock after each timed run. The VM examples have \
no Cranelift lowering (their ops exist only as templates), so they are not compiled by \
Cranelift. Compile time = trace description → callable entry. Run time: the counting loop, per round; for the examples, the whole program from a fresh VM in `jit` mode with each backend installed as the VM's trace compiler (`Config::compiler`; `LLVM -O0`/`-O2` compile the VM's own lowering, the members copy-and-patch stitches, with the instances the VM enters kept callable: the first, a loop's body, the pinned entry; `LLVM -O2 (uncached ops)` each micro-op's uncached stencil), minus the time the VM spent compiling, output checked against `vm/examples/*.expected`; *interpreter* = the same in `interp` mode.
- **Execution**: every `vm/examples/*.vm` from a fresh VM per run (tier-up, tracing and compiling \
included), output checked against `vm/examples/*.expected`. *Compile*: the VM's whole backend \
compile of the last run, summed over its traces (wall clock around `Backend::compile`: the \
lowering onto stencils and the kit's member selection, `push`, `finish` with allocation, \
publish and icache flush); *per micro-op*: that ÷ the stencil instances stitched (the \
*micro-ops* column in `jit` mode). Each run's compiles are a fresh VM's first, so this \
figure includes what a first compile meets: cold caches and branch predictors between \
runs of interpreted code, and the first look at each table (the code arena, its code \
object and the pinning's op table are made with the VM, its start-up). *Warm compile per \
micro-op*: the same clock on a warm VM: after the timed rounds, the program once more from \
a fresh VM, then the traces its executors hold compiled again by that VM's own backend, 50 \
rounds after an untimed one (`--quick`: 5), per round summed over the traces ÷ their \
micro-ops, the code dropped outside the clock; median (min – max). The VM's traces have no \
Cranelift lowering, so this clock has no Cranelift beside it; the synthetic traces of \
*Peer* do.
- **Peers: CPython and PyPy** (`pyvm`): every example also exists in Python \
(`vm/examples/*.py`: the same algorithm and output; float operations in the same order, so the \
same bits), and runs at its real size (`vm/examples/real-sizes.json`: PyPy runs it for at least \
0.5 s; `calls`' `x * x` leaves the 48-bit tagged range from 11.86 M rounds on and stays in \
64-bit registers, vm/templates/cached/wide_stack.h; output checked against \
`vm/examples/real/*.expected`, PyPy's). *Start-up* is measured apart: the `cpjit-vm` binary, `python3` and `pypy3` running an \
empty program as fresh processes, spawn to exit. *Steady state*, per example, one round runs \
in this order: `cpjit jit` (`Vm::run` from a fresh VM in the bench's process, tier-up and \
compiles included; *compile excluded* less them), `LLVM -O2` (the same with LLVM -O2 as the \
VM's trace compiler, compiling the very lowering copy-and-patch stitches: the register-cached \
members, pinned locals and glue the VM chose, as *Peer*'s `LLVM -O2` row), and `pypy3` \
(Debian's package; `ci/setup.sh --bench` installs it) as a fresh process running \
`bench/python/timed_main.py`, which calls the program's `main()` once and writes its CPU time \
(`time.process_time_ns`, PyPy's JIT included) and output to a JSON file. *In-process* is CPU \
time (the VM's thread; PyPy's process), start-up excluded, each runner's warm-up included. One \
warm-up round, then 5 timed rounds (`--quick`: 1, no warm-up). Ratios to `jit` are per round \
(LLVM -O2: both with the VM's compile time excluded, which the VM clocks on the wall). CPython \
and `cpjit interp` take minutes per run at these sizes and run start-up only.

### What each compile clock contains

Every compile row starts from the same input: the trace's op list with its names already \
mapped to each backend's own ids once per trace (a JIT's opcode table), and ends with \
callable code. Outside every clock: that mapping, creating the backend (`Jit` and the \
family's `RunTable` for it, LLVM's per-stencil modules, the Cranelift `JITModule` and its \
arena), and freeing the code.

| clock | front end (op list → backend input) | code generation | allocation | publish (code made executable) | icache flush | finalize / link |
|---|---|---|---|---|---|---|
| copy-and-patch, end to end (the `copy-and-patch` rows; ratios are to it) | the kit's member selection per op (`TraceBuilder::push_ops` per straight run, one `RunTable` row per op, `push_op` per jump: glue, labels) | copy and patch per instance (`finish`) | a block of the warm arena's chunk | one `pwrite` to the chunk's memfd (*alias* rows: stores through the persistent writable view) | yes (a no-op on x86-64) | GOT slots and veneers, in `finish` |
| copy-and-patch, pre-lowered (labelled *pre-lowered*) | none: members selected beforehand, off the clock | as above | as above | as above | as above | as above |
| LLVM -O0 / -O2 (MCJIT) | each instance's stencil module found by name (a hash look-up, on this clock only) and cloned, holes replaced, modules linked | IR passes (-O2) and code generation | MCJIT's memory manager | MCJIT's `finalizeObject` (page protections) | by MCJIT | relocation by MCJIT |
| Cranelift none / speed (`cranelift-jit`) | the op list's analysis (stack depths, blocks; names were mapped to ops once, `cranelift::op_list`) and translation with `FunctionBuilder` (`use_var`/`def_var` for *ssa*) | `define_function` | `ArenaMemoryProvider`: space inside one reservation per module | `finalize_definitions` (page protections inside the arena) | by `cranelift-jit` | relocation in `finalize_definitions` |
| the VM's backend compile (*Execution*, per micro-op: a fresh VM's compiles, and *warm*: the same traces again on that VM) | the VM's lowering onto cached ops, then the kit's selection | as copy-and-patch | as copy-and-patch | as copy-and-patch | as copy-and-patch | as copy-and-patch |
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Sample;
    use crate::results::PyVmRow;

    fn row(example: &str, runner: &str, vs_jit: f64) -> PyVmRow {
        let s = |ns: f64| Sample::from_times(vec![ns], 1);
        PyVmRow {
            example: example.into(),
            runner: runner.into(),
            in_process: s(1e6),
            compile_excluded: None,
            vs_jit: Some(s(vs_jit)),
            whole_process: Some(s(2e6)),
            whole_vs_jit: Some(s(vs_jit * 2.0)),
        }
    }

    #[test]
    fn issue_11_targets_count_examples_and_read_the_llvm_ratio_the_other_way_round() {
        let mut r = Results::default();
        for (i, name) in TIMED_EXAMPLES.iter().enumerate() {
            // PyPy slower than jit on 8 examples, 1.4× faster on the rest; interp 5× or
            // more everywhere but sum; LLVM -O2 ÷ jit 0.5 (jit 2× slower) on calls, 0.8
            // elsewhere.
            r.pyvm
                .push(row(name, "PyPy 7.3.11", if i < 8 { 1.5 } else { 0.7 }));
            r.pyvm.push(row(
                name,
                "cpjit interp",
                if *name == "sum" { 4.0 } else { 6.0 },
            ));
            r.pyvm.push(row(
                name,
                "LLVM -O2",
                if *name == "calls" { 0.5 } else { 0.8 },
            ));
        }
        // overflow is not one of the timed examples.
        r.pyvm.push(row("overflow", "PyPy 7.3.11", 0.1));
        let t = issue11_targets(&r);
        let line = |start: &str| {
            t.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no `{start}` in\n{t}"))
                .to_string()
        };
        let pypy = line("| `jit` faster than PyPy");
        assert!(
            pypy.contains("faster on 8 of 11: calls 1.50,") && pypy.ends_with("| met |"),
            "{pypy}"
        );
        let interp = line("| `jit` ≥ 5× faster than `interp`");
        assert!(
            interp.contains("sum 4.00") && interp.ends_with("| **missed** |"),
            "{interp}"
        );
        let llvm = line("| `jit` within 1.5× of LLVM -O2");
        assert!(
            llvm.contains("calls 2.00, collatz 1.25") && llvm.ends_with("| **missed** |"),
            "{llvm}"
        );
        assert!(line("| (report) PyPy ÷ `cpjit-vm --mode jit`").contains("calls 3.00"));
        // One example fewer for PyPy: the target cannot be met on 10 of 11.
        r.pyvm
            .retain(|p| !(p.example == "calls" && p.runner.starts_with("PyPy")));
        let t = issue11_targets(&r);
        let pypy = t.lines().find(|l| l.contains("faster on 7 of 10"));
        assert!(pypy.is_some_and(|l| l.ends_with("| **missed** |")), "{t}");
        // PyPy more than 1.5× faster on one example: missed, though faster on 8.
        for p in r
            .pyvm
            .iter_mut()
            .filter(|p| p.example == "sum" && p.runner.starts_with("PyPy"))
        {
            p.vs_jit = Some(Sample::from_times(vec![0.6], 1));
        }
        r.pyvm.push(row("calls", "PyPy 7.3.11", 1.5));
        let t = issue11_targets(&r);
        let pypy = t.lines().find(|l| l.contains("faster on 8 of 11"));
        assert!(pypy.is_some_and(|l| l.ends_with("| **missed** |")), "{t}");
        // No pyvm figures: no section.
        assert!(issue11_targets(&Results::default()).is_empty());
    }
}
