//! Execution of every example program (`examples/*.vm`) in `interp`, `uops` and `jit` mode.
//! A run is the whole program from a fresh VM (parse excluded; tier-up, tracing and
//! compilation included); every run's output is checked against `examples/<name>.expected`.

use crate::harness::Sample;
use crate::results::ExecRow;
use cpjit_vm::{Config, Mode, Vm};
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
    for example in crate::examples::load(&root.join("examples"))? {
        let (name, program, expected) = (&example.name, &example.program, &example.expected);
        for (mode, mode_name) in MODES {
            let mut times = Vec::new();
            let mut stats = None;
            for _ in 0..=runs {
                let config = Config {
                    mode,
                    ..Config::default()
                };
                let vm = Vm::new(program.clone(), config)
                    .map_err(|e| format!("examples/{name}.vm: cannot create the VM: {e}"))?;
                let start = Instant::now();
                let result = vm.run();
                times.push(start.elapsed().as_nanos() as f64);
                let mut out = vm.output();
                if let Err(e) = result {
                    out.push_str(&format!("error: {e}\n"));
                }
                if out != *expected {
                    return Err(format!(
                        "examples/{name}.vm in {mode_name} mode printed\n{out}\nexpected\n{expected}"
                    ));
                }
                stats = Some(vm.stats());
            }
            times.remove(0); // the warm-up run
            let stats = stats.expect("at least one run");
            rows.push(ExecRow {
                example: name.clone(),
                mode: mode_name.into(),
                run: Sample::from_times(times, 1),
                traces: stats.traces,
                uops: stats.uops,
                compile_ns: stats.compile_time.as_nanos() as f64,
                code_bytes: stats.code_bytes,
            });
        }
    }
    Ok(rows)
}
