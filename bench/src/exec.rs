//! Execution of every example program (`examples/*.vm`) in `interp`, `uops` and `jit` mode.
//! A run is the whole program from a fresh VM (parse excluded; tier-up, tracing and
//! compilation included); every run's output is checked against `examples/<name>.expected`.
//! The three modes of an example are timed alternately, run by run.

use crate::examples::Example;
use crate::harness::{alternate, time, Measured, Sample, Timed};
use crate::results::ExecRow;
use cpjit_vm::{Config, Mode, Stats, Vm};
use std::cell::Cell;
use std::path::Path;
use std::time::Instant;

pub const MODES: [(Mode, &str); 3] = [
    (Mode::Interp, "interp"),
    (Mode::Uops, "uops"),
    (Mode::Jit, "jit"),
];

pub fn run(root: &Path, quick: bool) -> Result<Vec<ExecRow>, String> {
    let runs = if quick { 1 } else { 7 };
    let mut rows = Vec::new();
    for example in crate::examples::load(&root.join("vm/examples"))? {
        let name = &example.name;
        // The modes alternate run by run (one warm-up round first); each op keeps the
        // statistics of its last run.
        let stats: Vec<Cell<Option<Stats>>> = MODES.iter().map(|_| Cell::new(None)).collect();
        let mut ops: Vec<Timed> = MODES
            .iter()
            .zip(&stats)
            .map(|(&(mode, mode_name), stats)| {
                let example = &example;
                Timed::new(1, runs, move || {
                    let (s, t) = run_once(example, mode, mode_name)?;
                    stats.set(Some(s));
                    Ok(t)
                })
            })
            .collect();
        let rounds = alternate(&mut ops)?;
        drop(ops);
        let warm = warm_compile(&example, if quick { 5 } else { WARM_ROUNDS })?;
        for (i, ((mode, mode_name), stats)) in MODES.iter().zip(stats).enumerate() {
            let stats = stats.into_inner().expect("at least one run");
            rows.push(ExecRow {
                example: name.clone(),
                mode: (*mode_name).into(),
                run: rounds.sample(i, 1),
                traces: stats.traces,
                uops: stats.uops,
                compile_ns: stats.compile_time.as_nanos() as f64,
                warm_compile: warm.filter(|_| *mode == Mode::Jit),
                code_bytes: stats.code_bytes,
            });
        }
    }
    Ok(rows)
}

/// The whole program once from a fresh VM in `mode` (parse excluded); checks its output.
pub fn run_once(
    example: &Example,
    mode: Mode,
    mode_name: &str,
) -> Result<(Stats, Measured), String> {
    let (name, expected) = (&example.name, &example.expected);
    let config = Config {
        mode,
        ..Config::default()
    };
    let vm = Vm::new(example.program.clone(), config)
        .map_err(|e| format!("vm/examples/{name}.vm: cannot create the VM: {e}"))?;
    let (result, t) = time(|| vm.run());
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
    }
    if out != *expected {
        return Err(format!(
            "vm/examples/{name}.vm in {mode_name} mode printed\n{out}\nexpected\n{expected}"
        ));
    }
    Ok((vm.stats(), t))
}

/// Timed rounds of [`warm_compile`] (one untimed round first).
const WARM_ROUNDS: usize = 50;

/// The *compile* clock on a warm VM, per micro-op: the program run once from a fresh VM in
/// `jit` mode, then the traces its executors hold compiled again by that VM's own backend
/// (its arena, tables and buffers already in use), round after round; per round, the wall
/// clock around each compile summed over the traces ÷ their micro-ops, the code dropped
/// outside the clock. `None` when the run leaves no trace.
fn warm_compile(example: &Example, rounds: usize) -> Result<Option<Sample>, String> {
    let name = &example.name;
    let config = Config {
        mode: Mode::Jit,
        ..Config::default()
    };
    let vm = Vm::new(example.program.clone(), config)
        .map_err(|e| format!("vm/examples/{name}.vm: cannot create the VM: {e}"))?;
    let _ = vm.run(); // a runtime error (overflow.vm) still leaves its traces
    let compiler = vm
        .compiler()
        .expect("a VM in jit mode has a trace compiler");
    let traces = vm.traces();
    let uops: usize = traces.iter().map(|t| t.uops.len()).sum();
    if uops == 0 {
        return Ok(None);
    }
    let mut per_uop = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let mut compiled = Vec::with_capacity(traces.len());
        let mut ns = 0.0;
        for trace in &traces {
            let t0 = Instant::now();
            let code = compiler.compile(trace);
            ns += t0.elapsed().as_nanos() as f64;
            compiled
                .push(code.map_err(|e| format!("vm/examples/{name}.vm: compiling again: {e}"))?);
        }
        drop(compiled);
        if round > 0 {
            per_uop.push(ns / uops as f64);
        }
    }
    Ok(Some(Sample::from_times(per_uop, 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warm figure is one sample per round over the run's traces, each a positive time
    /// per micro-op; a program that leaves no trace has none.
    #[test]
    fn warm_compile_times_every_round_of_the_runs_traces() {
        let examples = crate::examples::load(&crate::root().join("vm/examples")).unwrap();
        let sum = examples.iter().find(|e| e.name == "sum").unwrap();
        let warm = warm_compile(sum, 3)
            .unwrap()
            .expect("sum.vm compiles a loop trace");
        assert_eq!((warm.runs, warm.batch), (3, 1));
        assert!(0.0 < warm.min_ns && warm.min_ns <= warm.max_ns, "{warm:?}");
        let straight = Example {
            name: "straight".into(),
            program: cpjit_vm::parse("func main()\n  const 1; print\n  const none; return\nend\n")
                .unwrap(),
            expected: "1\n".into(),
            vm_source: String::new(),
            py_source: String::new(),
        };
        assert!(warm_compile(&straight, 3).unwrap().is_none());
    }
}
