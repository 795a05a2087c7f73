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
use crate::peer_compiler::{
    peer_name, resolve, vm_lowered_spec, vm_trace_spec, LlvmTraceCompiler, PeerLowering,
};
use crate::results::PeerRow;
use crate::workload::TraceSpec;
use cpjit_runtime::model::StencilSet;
use cpjit_vm::jit::{Backend, TraceCompiler};
use cpjit_vm::{ops, Config, Mode, Stats, Vm};
use inkwell::context::Context;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

const RUN_UNIT: &str = "per program run, compile excluded";

/// Runs `ex` once from a fresh VM; returns its statistics and the time outside compiles
/// (ns). Fails on wrong output.
pub fn run_once(ex: &Example, config: Config, backend: &str) -> Result<(Stats, Measured), String> {
    let (stats, t) = run_whole(ex, config, backend)?;
    // The VM times its compiles on the wall clock; both clocks leave them out.
    let compile = stats.compile_time.as_nanos() as f64;
    let run = Measured {
        wall: (t.wall - compile).max(0.0),
        cpu: (t.cpu - compile).max(0.0),
    };
    Ok((stats, run))
}

/// Runs `ex` once from a fresh VM; returns its statistics and the whole run's time (ns),
/// compiles included. Fails on wrong output.
pub fn run_whole(ex: &Example, config: Config, backend: &str) -> Result<(Stats, Measured), String> {
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
    Ok((vm.stats(), t))
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
        let (templates, targets) = (root.join("vm/templates"), root.join("targets"));
        let ir = library::template_bitcode(&templates, &targets, &["shim.c", "ops.c"])?;
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
        // The family members the VM's lowering picks are compiled when first used; those of
        // the examples' traces now, in one go, off every clock.
        let lib = library::Library::new(context, &ir, &stencils)?
            .with_members(library::MemberSource { templates, targets });
        lib.load_members(&examples_members(root, set)?)?;
        let lib = Rc::new(lib);
        Ok(VmIr { set, context, lib })
    }
}

/// The stencils the VM's lowering picks for the traces of the examples' `jit` runs.
fn examples_members(
    root: &Path,
    set: &'static StencilSet<'static>,
) -> Result<Vec<&'static str>, String> {
    let backend = Backend::new(set)?;
    let mut names = Vec::new();
    for ex in examples::load(&root.join("vm/examples"))? {
        for trace in traces_of(&ex)? {
            let lowered = backend
                .lower_stencils(&trace)
                .map_err(|e| format!("vm/examples/{}.vm: {e}", ex.name))?;
            names.extend(lowered.instances.iter().map(|x| x.stencil));
        }
    }
    names.sort_unstable();
    names.dedup();
    Ok(names)
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
        let same = Backend::new(set)?;
        let specs = [
            traces
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    Ok(vm_lowered_spec(
                        format!("{}#{i}", ex.name),
                        &same.lower_stencils(t)?,
                    ))
                })
                .collect::<Result<Vec<TraceSpec>, String>>()?,
            traces
                .iter()
                .enumerate()
                .map(|(i, t)| vm_trace_spec(format!("{}#{i}", ex.name), t))
                .collect(),
        ];
        let instances = specs[0].iter().map(|s| s.instances.len()).sum();
        let label = format!("vm/examples/{}.vm: {} trace(s)", ex.name, traces.len());
        let compile = compile_rounds(&backend, context, &lib, &traces, &specs, runs, &label)?;
        let run = run_rounds(ex, set, context, &lib, runs)?;
        // Rounds: compile [copy-and-patch, then the peers]; run [interpreter,
        // copy-and-patch, then the peers].
        let mut names = vec!["interpreter".to_string(), "copy-and-patch".to_string()];
        names.extend(PEERS.iter().map(|&(level, same)| peer_name(level, same)));
        for (i, name) in names.into_iter().enumerate() {
            let c = i.checked_sub(1);
            rows.push(PeerRow {
                trace: label.clone(),
                backend: name,
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

/// The LLVM peers after copy-and-patch, in round order: (level, whether it compiles the
/// VM's own lowering rather than the uncached ops).
const PEERS: [(Level, bool); 3] = [(Level::O0, true), (Level::O2, true), (Level::O2, false)];

/// Compile time of an example's traces, alternated: copy-and-patch (the VM's own backend),
/// then each of [`PEERS`] (`specs`: the VM's own lowering, the uncached ops), each timed
/// run right after an untimed one of its own.
fn compile_rounds(
    backend: &cpjit_vm::jit::Backend,
    context: &'static Context,
    lib: &Library<'static>,
    traces: &[cpjit_vm::trace::Trace],
    specs: &[Vec<TraceSpec>; 2],
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
    for (level, same) in PEERS {
        let specs = &specs[usize::from(!same)];
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
    let n = 2 + PEERS.len();
    let stats: Vec<Cell<Option<Stats>>> = (0..n).map(|_| Cell::new(None)).collect();
    let errors: Vec<RefCell<Option<String>>> = (0..n).map(|_| RefCell::new(None)).collect();
    let mut names = vec!["the interpreter".to_string(), "copy-and-patch".to_string()];
    names.extend(PEERS.iter().map(|&(level, same)| peer_name(level, same)));
    let mut ops: Vec<Timed> = (0..n)
        .map(|i| {
            let (stats, error, name) = (&stats[i], &errors[i], &names[i]);
            Timed::new(1, runs, move || {
                let llvm = match i.checked_sub(2).map(|p| PEERS[p]) {
                    Some((level, same)) => {
                        let lowering = if same {
                            PeerLowering::same(set)?
                        } else {
                            PeerLowering::Uncached
                        };
                        Some(Rc::new(LlvmTraceCompiler::new(
                            context,
                            lib.clone(),
                            level,
                            lowering,
                        )))
                    }
                    None => None,
                };
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
                let (s, t) = run_once(ex, config, name)?;
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
    for i in 2..n {
        if let Some(e) = errors[i].borrow().as_ref() {
            return Err(format!("vm/examples/{}.vm: {e}", ex.name));
        }
        // The uncached ops have no entry into a loop's body past its preamble
        // (`CompiledTrace::loop_body_address`): where copy-and-patch linked side traces into
        // loop bodies, those enter at the preamble, whose own exits can grow side traces
        // copy-and-patch never needs (collatz: 6 against 5). Fewer never. The VM's own
        // lowering is entered where the stitched code is: the same traces.
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
