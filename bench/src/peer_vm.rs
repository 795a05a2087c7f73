//! The LLVM peer on the VM's own traces, for every example program:
//! - compile time: the traces a `jit` run built are taken from its executors and compiled
//!   again by copy-and-patch (the VM's own `Backend`) and by LLVM -O0/-O2 from the VM ops'
//!   template IR;
//! - run time: the whole program from a fresh VM in `interp` mode, and in `jit` mode with
//!   each backend installed as the VM's trace compiler ([`LlvmTraceCompiler`]); the time the
//!   VM spent compiling is subtracted, so the figure is execution (interpreter, traces, side
//!   exits, helpers) only. Every run's output is checked against `examples/<name>.expected`,
//!   and every LLVM run must build the same number of traces as copy-and-patch without a
//!   failed compile.

use crate::examples::{self, Example};
use crate::harness::{measure, Sample};
use crate::peer::{self, library, Level};
use crate::peer_compiler::{resolve, vm_trace_spec, LlvmTraceCompiler};
use crate::results::PeerRow;
use crate::workload::TraceSpec;
use cpjit_vm::jit::TraceCompiler;
use cpjit_vm::{ops, Config, Mode, Stats, Vm};
use inkwell::context::Context;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

const RUN_UNIT: &str = "per program run, compile excluded";

/// Runs `ex` once from a fresh VM; returns its statistics and the time outside compiles
/// (ns). Fails on wrong output.
fn run_once(ex: &Example, config: Config, backend: &str) -> Result<(Stats, f64), String> {
    let vm = Vm::new(ex.program.clone(), config)
        .map_err(|e| format!("examples/{}.vm: cannot create the VM: {e}", ex.name))?;
    let start = Instant::now();
    let result = vm.run();
    let wall = start.elapsed();
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
    }
    if out != ex.expected {
        return Err(format!(
            "examples/{}.vm with {backend} printed\n{out}\nexpected\n{}",
            ex.name, ex.expected
        ));
    }
    let stats = vm.stats();
    let run = wall.saturating_sub(stats.compile_time).as_nanos() as f64;
    Ok((stats, run))
}

/// One warm-up run, then `runs` timed ones.
fn run_sample(
    ex: &Example,
    runs: usize,
    backend: &str,
    config: impl Fn() -> Config,
) -> Result<(Stats, Sample), String> {
    let (stats, _) = run_once(ex, config(), backend)?;
    let times = (0..runs.max(1))
        .map(|_| run_once(ex, config(), backend).map(|(_, t)| t))
        .collect::<Result<Vec<f64>, String>>()?;
    Ok((stats, Sample::from_times(times, 1)))
}

/// The traces a `jit` run of `ex` built, from its executors.
fn traces_of(ex: &Example) -> Result<Vec<cpjit_vm::trace::Trace>, String> {
    let vm = Vm::new(
        ex.program.clone(),
        Config {
            mode: Mode::Jit,
            ..Config::default()
        },
    )
    .map_err(|e| format!("examples/{}.vm: {e}", ex.name))?;
    let _ = vm.run(); // a runtime error (overflow.vm) still leaves its traces
    Ok((0..ex.program.functions.len())
        .flat_map(|f| {
            vm.function_state(f)
                .executors
                .borrow()
                .iter()
                .map(|e| e.trace.clone())
                .collect::<Vec<_>>()
        })
        .collect())
}

pub fn run(root: &Path, quick: bool) -> Result<Vec<PeerRow>, String> {
    let set = cpjit_vm::jit::set_for(library::TRIPLE)
        .ok_or_else(|| format!("the VM has no {} stencil set linked", library::TRIPLE))?;
    let backend = cpjit_vm::jit::Backend::new(set)?;
    let examples = examples::load(&root.join("examples"))?;
    let ir = library::template_bitcode(
        &root.join("templates"),
        &root.join("targets"),
        &["shim.c", "vm/ops.c"],
    )?;
    // Every VM op that has a stencil, so that any trace a run builds can be lowered.
    let mut stencils = vec!["cpjit_entry"];
    stencils.extend(
        ops::OPS
            .iter()
            .map(|o| o.stencil)
            .filter(|s| set.index_of(s).is_some()),
    );
    // Traces compiled inside a VM own their code for as long as the VM keeps them (`'static`
    // in `CompiledTrace`), so the LLVM context they borrow lives for the whole process.
    let context: &'static Context = Box::leak(Box::new(Context::create()));
    let lib = Rc::new(library::Library::new(context, &ir, &stencils)?);
    let runs = if quick { 1 } else { 5 };
    let mut rows = Vec::new();
    for ex in &examples {
        let traces = traces_of(ex)?;
        if traces.is_empty() {
            continue;
        }
        let specs: Vec<TraceSpec> = traces
            .iter()
            .enumerate()
            .map(|(i, t)| vm_trace_spec(format!("{}#{i}", ex.name), t))
            .collect();
        let instances = traces.iter().map(|t| t.uops.len() + 1).sum();
        let label = format!("examples/{}.vm: {} trace(s)", ex.name, traces.len());
        let row = |backend: &str, compile: Option<Sample>, run: Sample| PeerRow {
            trace: label.clone(),
            backend: backend.into(),
            instances,
            compile,
            run: Some(run),
            run_unit: RUN_UNIT.into(),
        };

        let mut failure = None;
        let cp_compile = measure(2, runs * 3, || {
            traces
                .iter()
                .map(|t| backend.compile(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| failure = Some(format!("{label}: copy-and-patch: {e}")))
                .ok()
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let (_, interp) = run_sample(ex, runs, "the interpreter", || Config {
            mode: Mode::Interp,
            ..Config::default()
        })?;
        rows.push(row("interpreter", None, interp));
        let (cp_stats, cp_run) = run_sample(ex, runs, "copy-and-patch", || Config {
            mode: Mode::Jit,
            compiler: Some(Rc::new(
                cpjit_vm::jit::Backend::new(set).expect("made above"),
            )),
            ..Config::default()
        })?;
        if cp_stats.compile_failures != 0 {
            return Err(format!(
                "examples/{}.vm: copy-and-patch failed {} compile(s) inside the VM",
                ex.name, cp_stats.compile_failures
            ));
        }
        rows.push(row("copy-and-patch", Some(cp_compile), cp_run));

        for level in [Level::O0, Level::O2] {
            let compile = measure(0, runs, || {
                specs
                    .iter()
                    .map(|s| peer::compile(context, &lib, s, level, resolve))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| failure = Some(e))
                    .ok()
            });
            if let Some(e) = failure {
                return Err(e);
            }
            let last = std::cell::RefCell::new(None);
            let (stats, run) = run_sample(ex, runs, level.name(), || {
                let compiler = Rc::new(LlvmTraceCompiler::new(context, lib.clone(), level));
                *last.borrow_mut() = Some(compiler.clone());
                Config {
                    mode: Mode::Jit,
                    compiler: Some(compiler as Rc<dyn TraceCompiler>),
                    ..Config::default()
                }
            })?;
            let compiler = last.borrow_mut().take().expect("at least one run");
            if let Some(e) = compiler.error() {
                return Err(format!("examples/{}.vm: {e}", ex.name));
            }
            if (stats.traces, stats.compile_failures) != (cp_stats.traces, 0) {
                return Err(format!(
                    "examples/{}.vm with {}: {} trace(s), {} failed compile(s); copy-and-patch built {}",
                    ex.name,
                    level.name(),
                    stats.traces,
                    stats.compile_failures,
                    cp_stats.traces
                ));
            }
            rows.push(row(level.name(), Some(compile), run));
        }
    }
    Ok(rows)
}
