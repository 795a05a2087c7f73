//! The side-by-side bench: the same traces compiled by copy-and-patch, LLVM -O0 and
//! LLVM -O2; compile time for straight traces of 10/100/1,000 instances, compile and run
//! time for the counting loop. Every backend's run is checked against copy-and-patch's
//! (exit status and helper checksum).

use crate::copy_patch;
use crate::harness::{measure, Sample};
use crate::peer::{self, library, Level};
use crate::results::PeerRow;
use crate::workload::{self, counting_loop, straight, TraceSpec, LOOP_BODY_INSTANCES};
use inkwell::context::Context;
use std::path::Path;
use std::time::Instant;

/// The test stencils the synthetic traces use.
const STENCILS: &[&str] = &[
    "cpjit_entry",
    "op_test_push",
    "op_test_push2",
    "op_test_add",
    "op_test_helper",
    "op_test_table",
    "op_test_counter",
    "op_test_addr_addend",
    "op_test_dec_jump_nz",
    "op_test_pop",
    "op_test_exit",
];

pub fn run(root: &Path, sizes: &[usize], quick: bool) -> Result<Vec<PeerRow>, String> {
    let ir = library::template_bitcode(
        &root.join("templates"),
        &root.join("targets"),
        &["shim.c", "testing/holes.c"],
    )?;
    let context = Context::create();
    let lib = library::Library::new(&context, &ir, STENCILS)?;
    let jit = copy_patch::jit()?;
    let runs = if quick { 3 } else { 7 };
    let mut rows = Vec::new();

    for &n in sizes {
        let spec = straight(n);
        let cp = measure(2, runs * 3, || copy_patch::compile(&jit, &spec));
        let cp_trace = copy_patch::compile(&jit, &spec)?;
        workload::take_checksum();
        let expected = (copy_patch::run(&cp_trace, &spec), workload::take_checksum());
        rows.push(row(&spec, "copy-and-patch", cp, None, ""));
        for level in [Level::O0, Level::O2] {
            // The largest -O2 compile takes seconds: fewer runs.
            let level_runs = if n >= 1000 && level == Level::O2 {
                runs.min(3)
            } else {
                runs
            };
            let mut failure = None;
            let sample = measure(1, level_runs, || {
                peer::compile(&context, &lib, &spec, level, workload::resolve)
                    .map_err(|e| failure = Some(e))
                    .ok()
            });
            if let Some(e) = failure {
                return Err(e);
            }
            let compiled = peer::compile(&context, &lib, &spec, level, workload::resolve)?;
            let got = (compiled.run(&spec), workload::take_checksum());
            check(&spec, level.name(), expected, got)?;
            rows.push(row(&spec, level.name(), sample, None, ""));
        }
    }

    // The counting loop: compile and run.
    let rounds: u64 = if quick { 200_000 } else { 2_000_000 };
    let spec = counting_loop(rounds);
    let per_round = |ns: f64| ns / rounds as f64;
    let cp_compile = measure(2, runs * 3, || copy_patch::compile(&jit, &spec));
    let cp_trace = copy_patch::compile(&jit, &spec)?;
    let cp_run = time_runs(runs, || copy_patch::run(&cp_trace, &spec), per_round);
    workload::take_checksum();
    let expected = (copy_patch::run(&cp_trace, &spec), workload::take_checksum());
    rows.push(row(
        &spec,
        "copy-and-patch",
        cp_compile,
        Some(cp_run),
        "ns/round",
    ));
    for level in [Level::O0, Level::O2] {
        let mut failure = None;
        let compile = measure(1, runs, || {
            peer::compile(&context, &lib, &spec, level, workload::resolve)
                .map_err(|e| failure = Some(e))
                .ok()
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let compiled = peer::compile(&context, &lib, &spec, level, workload::resolve)?;
        let run = time_runs(runs, || compiled.run(&spec), per_round);
        workload::take_checksum();
        let got = (compiled.run(&spec), workload::take_checksum());
        check(&spec, level.name(), expected, got)?;
        rows.push(row(&spec, level.name(), compile, Some(run), "ns/round"));
    }
    Ok(rows)
}

/// Times `runs` runs after one warm-up, scaled by `scale`.
fn time_runs(runs: usize, mut f: impl FnMut() -> i64, scale: impl Fn(f64) -> f64) -> Sample {
    std::hint::black_box(f());
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            scale(start.elapsed().as_nanos() as f64)
        })
        .collect();
    Sample::from_times(times, 1)
}

fn check(
    spec: &TraceSpec,
    backend: &str,
    expected: (i64, u64),
    got: (i64, u64),
) -> Result<(), String> {
    if expected == got {
        Ok(())
    } else {
        Err(format!(
            "{}: {backend} computed (status, checksum) {got:?}, copy-and-patch {expected:?}",
            spec.name
        ))
    }
}

fn row(
    spec: &TraceSpec,
    backend: &str,
    compile: Sample,
    run: Option<Sample>,
    unit: &str,
) -> PeerRow {
    let name = if spec.name == "counting-loop" {
        format!("counting loop ({} instances/round)", LOOP_BODY_INSTANCES)
    } else {
        spec.name.clone()
    };
    PeerRow {
        trace: name,
        backend: backend.into(),
        instances: spec.instances.len(),
        compile: Some(compile),
        run,
        run_unit: unit.into(),
    }
}
