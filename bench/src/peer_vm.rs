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
//!
//! Backends are timed alternately, run by run (compile: copy-and-patch, -O0, -O2; run: the
//! interpreter, copy-and-patch, -O0, -O2), and ratios to copy-and-patch are per run.

use crate::examples::{self, Example};
use crate::harness::{alternate, cpu_ratios, ratios, time, Measured, Rounds, Timed};
use crate::peer::{self, library, library::Library, Level};
use crate::peer_compiler::{resolve, vm_trace_spec, LlvmTraceCompiler};
use crate::results::PeerRow;
use crate::workload::TraceSpec;
use cpjit_vm::jit::TraceCompiler;
use cpjit_vm::{ops, Config, Mode, Stats, Vm};
use inkwell::context::Context;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

const RUN_UNIT: &str = "per program run, compile excluded";

/// Runs `ex` once from a fresh VM; returns its statistics and the time outside compiles
/// (ns). Fails on wrong output.
pub fn run_once(ex: &Example, config: Config, backend: &str) -> Result<(Stats, Measured), String> {
    let vm = Vm::new(ex.program.clone(), config)
        .map_err(|e| format!("vm/examples/{}.vm: cannot create the VM: {e}", ex.name))?;
    let (result, t) = time(|| vm.run());
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
    }
    if out != ex.expected {
        return Err(format!(
            "vm/examples/{}.vm with {backend} printed\n{out}\nexpected\n{}",
            ex.name, ex.expected
        ));
    }
    let stats = vm.stats();
    // The VM times its compiles on the wall clock; both clocks leave them out.
    let compile = stats.compile_time.as_nanos() as f64;
    let run = Measured {
        wall: (t.wall - compile).max(0.0),
        cpu: (t.cpu - compile).max(0.0),
    };
    Ok((stats, run))
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
    .map_err(|e| format!("vm/examples/{}.vm: {e}", ex.name))?;
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

/// The VM ops' template IR as LLVM modules, ready to compile any trace the VM builds, with
/// the stencil set the VM's own backend uses.
pub struct VmIr {
    pub set: &'static cpjit_runtime::model::StencilSet<'static>,
    pub context: &'static Context,
    pub lib: Rc<Library<'static>>,
}

impl VmIr {
    pub fn load(root: &Path) -> Result<VmIr, String> {
        let set = cpjit_vm::jit::set_for(library::triple())
            .ok_or_else(|| format!("the VM has no {} stencil set linked", library::triple()))?;
        let ir = library::template_bitcode(
            &root.join("vm/templates"),
            &root.join("targets"),
            &["shim.c", "ops.c"],
        )?;
        // Every VM op that has a stencil, so that any trace a run builds can be lowered.
        let mut stencils = vec!["vm_entry"];
        stencils.extend(
            ops::OPS
                .iter()
                .map(|o| o.stencil)
                .filter(|s| set.index_of(s).is_some()),
        );
        // Traces compiled inside a VM own their code for as long as the VM keeps them
        // (`'static` in `CompiledTrace`), so the LLVM context they borrow lives for the whole
        // process.
        let context: &'static Context = Box::leak(Box::new(Context::create()));
        let lib = Rc::new(library::Library::new(context, &ir, &stencils)?);
        Ok(VmIr { set, context, lib })
    }
}

pub fn run(root: &Path, quick: bool) -> Result<Vec<PeerRow>, String> {
    let VmIr { set, context, lib } = VmIr::load(root)?;
    let backend = cpjit_vm::jit::Backend::new(set)?;
    let examples = examples::load(&root.join("vm/examples"))?;
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
        let label = format!("vm/examples/{}.vm: {} trace(s)", ex.name, traces.len());
        let compile = compile_rounds(&backend, context, &lib, &traces, &specs, runs, &label)?;
        let run = run_rounds(ex, set, context, &lib, runs)?;
        // Rounds: compile [copy-and-patch, -O0, -O2]; run [interpreter, copy-and-patch,
        // -O0, -O2].
        let names = ["interpreter", "copy-and-patch", "LLVM -O0", "LLVM -O2"];
        for (i, name) in names.into_iter().enumerate() {
            let c = i.checked_sub(1);
            rows.push(PeerRow {
                trace: label.clone(),
                backend: name.into(),
                opt_level: None,
                instances,
                compile: c.map(|c| compile.sample(c, 1)),
                run: Some(run.sample(i, 1)),
                run_unit: RUN_UNIT.into(),
                compile_ratio: c.filter(|&c| c > 0).and_then(|c| ratios(&compile, c, 0)),
                compile_cpu: c.map(|c| compile.cpu_sample(c, 1)),
                compile_cpu_ratio: c
                    .filter(|&c| c > 0)
                    .and_then(|c| cpu_ratios(&compile, c, 0)),
                run_ratio: (i > 1).then(|| ratios(&run, i, 1)).flatten(),
                compile_ratio_to_alias: None,
                compile_cpu_ratio_to_alias: None,
            });
        }
    }
    Ok(rows)
}

/// Compile time of an example's traces, alternated: copy-and-patch (the VM's own backend),
/// LLVM -O0, LLVM -O2, each timed run right after an untimed one of its own.
fn compile_rounds(
    backend: &cpjit_vm::jit::Backend,
    context: &'static Context,
    lib: &Library<'static>,
    traces: &[cpjit_vm::trace::Trace],
    specs: &[TraceSpec],
    runs: usize,
    label: &str,
) -> Result<Rounds, String> {
    let mut ops = vec![Timed::new(2, runs * 3, || {
        let (compiled, t) = time(|| {
            traces
                .iter()
                .map(|t| backend.compile(t))
                .collect::<Result<Vec<_>, _>>()
        });
        compiled.map_err(|e| format!("{label}: copy-and-patch: {e}"))?;
        Ok(t)
    })
    .primed()];
    for level in [Level::O0, Level::O2] {
        ops.push(
            Timed::new(0, runs, move || {
                let (compiled, t) = time(|| {
                    specs
                        .iter()
                        .map(|s| peer::compile(context, lib, s, level, resolve))
                        .collect::<Result<Vec<_>, _>>()
                });
                compiled?;
                Ok(t)
            })
            .primed(),
        );
    }
    alternate(&mut ops)
}

/// Run time of the whole program, alternated: the interpreter, then `jit` mode with
/// copy-and-patch, LLVM -O0 and LLVM -O2 as the trace compiler. Checks that every backend
/// built as many traces as copy-and-patch (or more, where copy-and-patch linked into loop
/// bodies, which LLVM's traces cannot), without a failed compile.
fn run_rounds(
    ex: &Example,
    set: &'static cpjit_runtime::model::StencilSet<'static>,
    context: &'static Context,
    lib: &Rc<Library<'static>>,
    runs: usize,
) -> Result<Rounds, String> {
    let stats: Vec<Cell<Option<Stats>>> = (0..4).map(|_| Cell::new(None)).collect();
    let errors: Vec<RefCell<Option<String>>> = (0..4).map(|_| RefCell::new(None)).collect();
    let names = ["the interpreter", "copy-and-patch", "LLVM -O0", "LLVM -O2"];
    let mut ops: Vec<Timed> = (0..4)
        .map(|i| {
            let (stats, error) = (&stats[i], &errors[i]);
            Timed::new(1, runs, move || {
                let level = if i == 2 { Level::O0 } else { Level::O2 };
                let llvm =
                    (i >= 2).then(|| Rc::new(LlvmTraceCompiler::new(context, lib.clone(), level)));
                let compiler: Option<Rc<dyn TraceCompiler>> = match i {
                    0 => None,
                    1 => Some(Rc::new(cpjit_vm::jit::Backend::new(set)?)),
                    _ => llvm.clone().map(|c| c as Rc<dyn TraceCompiler>),
                };
                let config = Config {
                    mode: if i == 0 { Mode::Interp } else { Mode::Jit },
                    compiler,
                    ..Config::default()
                };
                let (s, t) = run_once(ex, config, names[i])?;
                if let Some(e) = llvm.and_then(|l| l.error()) {
                    *error.borrow_mut() = Some(e);
                }
                stats.set(Some(s));
                Ok(t)
            })
        })
        .collect();
    let rounds = alternate(&mut ops)?;
    drop(ops);
    let stats: Vec<Stats> = stats
        .into_iter()
        .map(|s| s.into_inner().expect("at least one run"))
        .collect();
    if stats[1].compile_failures != 0 {
        return Err(format!(
            "vm/examples/{}.vm: copy-and-patch failed {} compile(s) inside the VM",
            ex.name, stats[1].compile_failures
        ));
    }
    for i in 2..4 {
        if let Some(e) = errors[i].borrow().as_ref() {
            return Err(format!("vm/examples/{}.vm: {e}", ex.name));
        }
        // A trace compiled outside the VM has no entry into a loop's body past its preamble
        // (`CompiledTrace::loop_body_address`): where copy-and-patch linked side traces into
        // loop bodies, LLVM's enter at the preamble, whose own exits can grow side traces
        // copy-and-patch never needs (collatz: 6 against 5). Fewer never.
        let same_traces = if stats[1].loop_body_links > 0 && stats[i].loop_body_links == 0 {
            stats[i].traces >= stats[1].traces
        } else {
            stats[i].traces == stats[1].traces
        };
        if !same_traces || stats[i].compile_failures != 0 {
            return Err(format!(
                "vm/examples/{}.vm with {}: {} trace(s), {} failed compile(s); copy-and-patch built {}",
                ex.name, names[i], stats[i].traces, stats[i].compile_failures, stats[1].traces
            ));
        }
    }
    Ok(rounds)
}
