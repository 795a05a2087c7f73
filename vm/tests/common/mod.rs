//! Shared test support: running a program in a mode and rendering its observable result
//! (printed output, then `error: ...` if it failed), and the random program generator.
#![allow(dead_code)]

pub mod gen;

use cpjit_vm::{Config, Mode, Stats, Vm};

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
pub fn run_compiled(
    text: &str,
    compiler: std::rc::Rc<dyn cpjit_vm::jit::TraceCompiler>,
    base: Config,
) -> (String, Stats) {
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
