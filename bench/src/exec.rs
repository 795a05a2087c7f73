//! Execution of every example program (`examples/*.vm`) in `interp`, `uops` and `jit` mode.
//! A run is the whole program from a fresh VM (parse excluded; tier-up, tracing and
//! compilation included); every run's output is checked against `examples/<name>.expected`.
//! The three modes of an example are timed alternately, run by run.

use crate::examples::Example;
use crate::harness::{alternate, time, Measured, Timed};
use crate::results::ExecRow;
use cpjit_vm::{Config, Mode, Stats, Vm};
use std::cell::Cell;
use std::path::Path;

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
        for (i, ((_, mode_name), stats)) in MODES.iter().zip(stats).enumerate() {
            let stats = stats.into_inner().expect("at least one run");
            rows.push(ExecRow {
                example: name.clone(),
                mode: (*mode_name).into(),
                run: rounds.sample(i, 1),
                traces: stats.traces,
                uops: stats.uops,
                compile_ns: stats.compile_time.as_nanos() as f64,
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
