//! `cpjit-vm run FILE [--mode interp|uops|jit] [--stats] [--dump-trace] [--perf-map]
//! [--jitdump] [--gdb] [--unwind]`:
//! runs a program of the reference VM and prints its output (statistics and trace listings
//! go to stderr). `--perf-map` appends each trace's instances to `/tmp/perf-<pid>.map` for
//! `perf report`/`samply`, `--jitdump` writes `jit-<pid>.dump` for `perf inject --jit`;
//! `--gdb` registers each trace with GDB's JIT interface so that
//! backtraces name the stencils, and `--unwind` registers unwind information from the stencil
//! set's frame layouts so that they walk through the traces (see vm/examples/README.md).
//!
//! `cpjit-vm compile-time FILE... [--rounds N]`: the backend's whole compile (lowering,
//! checks, push, finish) per stitched instance. Runs each program once in `jit` mode, takes
//! the traces its executors hold, then compiles them all again `N` times (default 200) with
//! a fresh backend for the host's set and prints, per round, nanoseconds per instance
//! (micro-ops plus the entry shim; wall clock around the compiles, dropping the code
//! excluded): the median, min and max. Under callgrind, `--toggle-collect=*compile_round*`
//! counts the compiles' instructions alone.

use cpjit_vm::{Config, Mode, Vm};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: cpjit-vm compile-time FILE... [--rounds N]
       cpjit-vm run FILE [--mode interp|uops|jit] [--stats] [--dump-trace]
                   [--perf-map] [--jitdump] [--gdb] [--unwind]
                   [--backedge-threshold N] [--call-threshold N] [--side-exit-threshold N]
                   [--no-inline] [--no-pin] [--no-merge]
  --no-inline: traces call small pure functions instead of inlining them
  --no-pin: loop traces keep every local in the frame (no pinned registers)
  --no-merge: side traces ending at their loop's head are linked, not merged into the loop
  CPJIT_STENCILS=<triple> picks the stencil set for jit mode (default: the host's)";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cpjit-vm: {e}");
            ExitCode::from(2)
        }
    }
}

fn number<T: std::str::FromStr>(flag: &str, v: Option<&String>) -> Result<T, String> {
    v.and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number\n{USAGE}"))
}

fn run(args: Vec<String>) -> Result<ExitCode, String> {
    if args.first().map(String::as_str) == Some("compile-time") {
        return compile_time(&args[1..]);
    }
    if args.first().map(String::as_str) != Some("run") {
        return Err(USAGE.into());
    }
    let mut file = None;
    let mut config = Config {
        print_live: true,
        ..Config::default()
    };
    let mut stats = false;
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mode" => {
                let m = it.next().ok_or(USAGE)?;
                config.mode =
                    Mode::parse(m).ok_or_else(|| format!("unknown mode `{m}`\n{USAGE}"))?;
            }
            "--stats" => stats = true,
            "--dump-trace" => config.dump_traces = true,
            "--perf-map" => config.perf_map = true,
            "--gdb" => config.gdb = true,
            "--unwind" => config.unwind = true,
            "--jitdump" => config.jitdump = true,
            "--no-inline" => config.inline_calls = false,
            "--no-pin" => config.pin_locals = false,
            "--no-merge" => config.merge_branches = false,
            "--backedge-threshold" => config.backedge_threshold = number(a, it.next())?,
            "--call-threshold" => config.call_threshold = number(a, it.next())?,
            "--side-exit-threshold" => config.side_exit_threshold = number(a, it.next())?,
            f if !f.starts_with('-') && file.is_none() => file = Some(f.to_string()),
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}")),
        }
    }
    let file = file.ok_or(USAGE)?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    let program = cpjit_vm::parse(&text).map_err(|e| format!("{file}:{e}"))?;
    let vm = Vm::new(program, config.clone())?;
    let t0 = Instant::now();
    let result = vm.run();
    let elapsed = t0.elapsed();
    if config.dump_traces {
        eprint!("{}", vm.trace_dump());
    }
    if stats {
        let s = vm.stats();
        eprintln!(
            "mode: {:?}, run time: {:.3} ms",
            config.mode,
            elapsed.as_secs_f64() * 1e3
        );
        eprintln!(
            "traces compiled: {} (loop {}, entry {}, side {}), compile failures: {}, recordings abandoned: {}",
            s.traces, s.loop_traces, s.entry_traces, s.side_traces, s.compile_failures, s.recordings_abandoned
        );
        eprintln!(
            "micro-ops stitched: {}, side exits taken: {}, executor runs: {}, invalidations: {}, links into loop bodies: {}, loops with pinned locals: {}",
            s.uops, s.side_exits, s.executor_runs, s.invalidations, s.loop_body_links, s.pinned_loops
        );
        eprintln!(
            "side traces inheriting pinned locals: {}, links with pinned registers live: {}, side traces merged into their loop: {}",
            s.inherited_pins, s.pinned_links, s.merged_branches
        );
        eprintln!(
            "compile time: {:.3} ms, code bytes: {}, calls from compiled into compiled code: {}, calls inlined: {}",
            s.compile_time.as_secs_f64() * 1e3,
            s.code_bytes,
            s.direct_calls,
            s.inlined_calls
        );
    }
    // The process ends here, and the system takes its memory back: dropping every trace,
    // program and table first was 1.1 M instructions, a seventh of an empty program's run
    // (callgrind). The debug facilities still drop, to retire what they registered.
    if !(config.perf_map || config.jitdump || config.gdb || config.unwind) {
        std::mem::forget(vm);
    }
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            if e.traceback.len() > 1 {
                eprintln!("{file}: traceback (most recent call last):");
                for frame in &e.traceback {
                    eprintln!("  {frame}");
                }
            }
            eprintln!("{file}: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `compile-time` (see the module doc).
fn compile_time(args: &[String]) -> Result<ExitCode, String> {
    let mut files = Vec::new();
    let mut rounds = 200usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = number(a, it.next())?,
            f if !f.starts_with('-') => files.push(f.to_string()),
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}")),
        }
    }
    if files.is_empty() || rounds == 0 {
        return Err(format!(
            "compile-time needs a file and --rounds > 0\n{USAGE}"
        ));
    }
    let backend = cpjit_vm::jit::Backend::host()?;
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let program = cpjit_vm::parse(&text).map_err(|e| format!("{file}:{e}"))?;
        let config = Config {
            mode: Mode::Jit,
            ..Config::default()
        };
        let vm = Vm::new(program, config)?;
        let _ = vm.run(); // a runtime error (overflow.vm) still leaves its traces
        let traces = vm.traces();
        let instances: usize = traces.iter().map(|t| t.uops.len() + 1).sum();
        if instances == 0 {
            println!("{file}: no traces");
            continue;
        }
        // The compiled traces go into one vector made here, not in a round: its allocation
        // is no part of the compile (the bench's warm clock times each compile alone), and
        // cost sum.vm's one-trace round 13 instructions per instance (a `malloc` after the
        // last round's traces were freed). Dropped outside the clock.
        let mut compiled = Vec::with_capacity(traces.len());
        compile_round(&backend, &traces, &mut compiled).map_err(|e| format!("{file}: {e}"))?;
        compiled.clear();
        let mut ns = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t0 = Instant::now();
            let round = compile_round(&backend, &traces, &mut compiled);
            ns.push(t0.elapsed().as_nanos() as f64 / instances as f64);
            round.map_err(|e| format!("{file}: {e}"))?;
            compiled.clear();
        }
        ns.sort_by(f64::total_cmp);
        println!(
            "{file}: {} trace(s), {instances} instances: {:.1} ns/instance (median of {rounds}; min {:.1}, max {:.1})",
            traces.len(),
            ns[rounds / 2],
            ns[0],
            ns[rounds - 1]
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Compiles every trace once into `out`, which has room for them (kept out of line so that
/// callgrind can count it alone).
#[inline(never)]
fn compile_round(
    backend: &cpjit_vm::jit::Backend,
    traces: &[cpjit_vm::trace::Trace],
    out: &mut Vec<cpjit_vm::jit::CompiledTrace>,
) -> Result<(), String> {
    for trace in traces {
        out.push(backend.compile(trace)?);
    }
    Ok(())
}
