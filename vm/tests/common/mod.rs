//! Shared test support: running a program in a mode and rendering its observable result
//! (printed output, then `error: ...` if it failed), and the random program generator.
#![allow(dead_code)]

pub mod gen;

use cpjit_vm::jit::{Backend, CompiledTrace, Lowering, TraceCompiler};
use cpjit_vm::trace::Trace;
use cpjit_vm::{Config, Mode, Stats, Vm};
use std::cell::RefCell;
use std::rc::Rc;

/// Output of `text` in `mode`, with a final `error: ...` line if it failed.
pub fn run(text: &str, config: Config) -> String {
    let program = cpjit_vm::parse(text).unwrap_or_else(|e| panic!("parse error {e} in\n{text}"));
    let vm = Vm::new(program, config).unwrap_or_else(|e| panic!("cannot create the VM: {e}"));
    let result = vm.run();
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

/// Output of `vm` after `result`, with a final `error: ...` line and its traceback (every
/// frame with its locals and stack) if it failed.
pub fn render(vm: &Vm, result: Result<(), cpjit_vm::RuntimeError>) -> String {
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
        for frame in &e.traceback {
            out.push_str(&format!("  at {frame}\n"));
        }
    }
    out
}

/// [`run`] with the traceback of an error ([`render`]).
pub fn run_traced(text: &str, config: Config) -> String {
    let program = cpjit_vm::parse(text).unwrap_or_else(|e| panic!("parse error {e} in\n{text}"));
    let vm = Vm::new(program, config).unwrap_or_else(|e| panic!("cannot create the VM: {e}"));
    let result = vm.run();
    render(&vm, result)
}

/// [`run`] in `base`'s mode with `compiler` compiling the traces: the output (and error
/// line), and the statistics.
pub fn run_compiled(text: &str, compiler: Rc<dyn TraceCompiler>, base: Config) -> (String, Stats) {
    let program = cpjit_vm::parse(text).unwrap_or_else(|e| panic!("parse error {e} in\n{text}"));
    let config = Config {
        compiler: Some(compiler),
        ..base
    };
    let vm = Vm::new(program, config).unwrap_or_else(|e| panic!("cannot create the VM: {e}"));
    let result = vm.run();
    let mut out = vm.output();
    if let Err(e) = result {
        out.push_str(&format!("error: {e}\n"));
    }
    (out, vm.stats())
}

/// Every lowering checked in any build ([`Config::check_lowerings`]: release builds
/// skip it otherwise).
pub fn config(mode: Mode) -> Config {
    Config {
        mode,
        check_lowerings: true,
        ..Config::default()
    }
}

/// Aggressive tier-up, so that short programs get traces, side traces and linked exits.
pub fn eager(mode: Mode) -> Config {
    Config {
        mode,
        backedge_threshold: 4,
        call_threshold: 3,
        side_exit_threshold: 2,
        check_lowerings: true,
        ..Config::default()
    }
}

pub const MODES: [Mode; 3] = [Mode::Interp, Mode::Uops, Mode::Jit];

/// Checks that `text`, run with eager tier-up, does in every mode what `want` says: prints
/// exactly `Ok(output)` (the traceback included, [`render`]), or stops with an error whose
/// rendering holds `Err(error)`. `what` names the case in a failure.
pub fn assert_every_mode(text: &str, want: Result<&str, &str>, what: &str) {
    for mode in MODES {
        let out = run_traced(text, eager(mode));
        match want {
            Ok(printed) => assert_eq!(out, printed, "{what} in {mode:?}"),
            Err(error) => assert!(
                out.contains(error),
                "{what} in {mode:?} should raise {error}: {out}"
            ),
        }
    }
}

/// Runs `text` in every mode, each with `base(mode)` changed by `adjust`; checks that all
/// modes render the same (output, error, traceback) and leave no frame behind; returns that
/// rendering and the JIT's statistics.
pub fn agree_with(
    text: &str,
    base: fn(Mode) -> Config,
    adjust: impl Fn(&mut Config),
) -> (String, Stats) {
    let mut reference = None;
    let mut jit_stats = None;
    for mode in MODES {
        let mut c = base(mode);
        adjust(&mut c);
        let vm = Vm::new(cpjit_vm::parse(text).unwrap(), c).unwrap();
        let result = vm.run();
        assert!(
            vm.frames().is_empty(),
            "{mode:?}: frames left after the run"
        );
        let out = render(&vm, result);
        match &reference {
            None => reference = Some(out),
            Some(r) => assert_eq!(&out, r, "{mode:?} differs from the interpreter"),
        }
        if mode == Mode::Jit {
            jit_stats = Some(vm.stats());
        }
    }
    (reference.unwrap(), jit_stats.unwrap())
}

/// A program that counts the steps of `i` from `start` by `step` until `i <cmp> bound`
/// fails, `bound` a constant, and prints the count.
pub fn counting_loop(start: i64, cmp: &str, bound: i64, step: i64) -> String {
    format!(
        "func main()
  locals i n
  const {start}; store i
  const 0; store n
loop:
  load i; const {bound}; {cmp}; jump_if_false done
  load i; const {step}; add; store i
  load n; const 1; add; store n
  jump loop
done:
  load n; print
  const none; return
end
"
    )
}

/// `examples/{name}.{ext}` (`ext` "vm" for the program, "expected" for its output).
pub fn example(name: &str, ext: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.{ext}"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A trace compiler for tests that look at what the trace compiler made: it checks each
/// trace's lowering ([`Backend::check_cache_states`]: a test fails at the first stale
/// cache state or broken pinning protocol), keeps the trace with its lowering and compiles
/// it with the host's copy-and-patch backend, checks on.
pub struct Recorder {
    pub backend: Backend,
    pub lowerings: RefCell<Vec<(Trace, Lowering)>>,
}

impl TraceCompiler for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let lowering = self.backend.lower(trace)?;
        if let Err(e) = self.backend.check_cache_states(trace, &lowering) {
            panic!("the lowering breaks the cache protocol: {e}\n{trace:?}\n{lowering:?}");
        }
        self.lowerings.borrow_mut().push((trace.clone(), lowering));
        self.backend.compile(trace)
    }
}

impl Recorder {
    pub fn new() -> Rc<Recorder> {
        Rc::new(Recorder {
            backend: Backend::host()
                .expect("host stencils are linked")
                .with_checks(true),
            lowerings: RefCell::new(Vec::new()),
        })
    }

    /// [`run_compiled`] with this recorder compiling the traces.
    pub fn run(self: &Rc<Self>, text: &str, base: Config) -> (String, Stats) {
        run_compiled(text, self.clone(), base)
    }

    /// Every trace compiled so far, in order.
    pub fn traces(&self) -> Vec<Trace> {
        self.lowerings
            .borrow()
            .iter()
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The micro-ops of every compiled trace's body (exit stubs left out), in order.
    pub fn ops(&self) -> Vec<u32> {
        let lowerings = self.lowerings.borrow();
        let bodies = lowerings.iter().map(|(t, _)| &t.uops[..t.body_len]);
        bodies.flatten().map(|u| u.op).collect()
    }

    /// How many lowered instances keep values in registers (enter or leave with a cache).
    pub fn cached_instances(&self) -> usize {
        let lowerings = self.lowerings.borrow();
        let instances = lowerings.iter().flat_map(|(_, l)| &l.instances);
        instances
            .filter(|i| !i.entry.is_empty() || !i.exit.is_empty())
            .count()
    }
}

/// Runs `text` in jit mode with a new [`Recorder`]: the recorder and the output.
pub fn record(text: &str) -> (Rc<Recorder>, String) {
    let recorder = Recorder::new();
    let (out, _) = recorder.run(text, eager(Mode::Jit));
    (recorder, out)
}
