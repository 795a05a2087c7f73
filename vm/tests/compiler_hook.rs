//! The `Config::compiler` hook: an outside compiler of traces takes copy-and-patch's place.
//! The compiler here delegates to the VM's own copy-and-patch backend and re-wraps the code
//! with `CompiledTrace::from_external`, so the hook, the external trace's entry, body
//! address (links) and lifetime are exercised without LLVM.

use crate::common;

use common::{eager, run};
use cpjit_vm::jit::{Backend, CompiledTrace, LoweredId, TraceCompiler};
use cpjit_vm::trace::Trace;
use cpjit_vm::{Config, Mode, Vm};
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

/// Compiles with copy-and-patch, hands the result out as an external trace; counts calls
/// and drops of the code's owner.
struct Delegate {
    backend: Backend,
    compiles: Cell<u64>,
    fail: bool,
    dropped: Rc<Cell<u64>>,
}

/// Owner of a delegated trace: the stitched trace itself, plus a drop counter.
struct Owner {
    _code: CompiledTrace,
    dropped: Rc<Cell<u64>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.dropped.set(self.dropped.get() + 1);
    }
}

impl Delegate {
    fn new(fail: bool) -> Rc<Delegate> {
        Rc::new(Delegate {
            backend: Backend::host()
                .expect("host stencils are linked")
                .with_checks(true),
            compiles: Cell::new(0),
            fail,
            dropped: Rc::new(Cell::new(0)),
        })
    }
}

impl TraceCompiler for Delegate {
    fn name(&self) -> &str {
        "delegate"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        self.compiles.set(self.compiles.get() + 1);
        if self.fail {
            return Err("delegate: refused".into());
        }
        let code = self.backend.compile(trace)?;
        let (entry, body, bytes) = (code.entry(), code.body_address(), code.code_bytes());
        let owner = Owner {
            _code: code,
            dropped: self.dropped.clone(),
        };
        // SAFETY: entry and body are the stitched trace's, kept alive by `owner`.
        Ok(
            unsafe {
                CompiledTrace::from_external("delegate", entry, body, bytes, Box::new(owner))
            },
        )
    }
}

fn with(compiler: &Rc<Delegate>, base: Config) -> Config {
    Config {
        compiler: Some(compiler.clone() as Rc<dyn TraceCompiler>),
        ..base
    }
}

fn example(name: &str) -> (String, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let read = |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).unwrap();
    (read("vm"), read("expected"))
}

#[test]
fn every_example_runs_with_an_outside_compiler() {
    for name in [
        "sum", "fib", "nested", "collatz", "sieve", "calls", "overflow",
    ] {
        let (text, expected) = example(name);
        let delegate = Delegate::new(false);
        let program = cpjit_vm::parse(&text).unwrap();
        let vm = Vm::new(program, with(&delegate, eager(Mode::Jit))).unwrap();
        let result = vm.run();
        let mut out = vm.output();
        if let Err(e) = result {
            out.push_str(&format!("error: {e}\n"));
        }
        assert_eq!(out, expected, "examples/{name}.vm");
        let s = vm.stats();
        assert!(s.traces > 0, "{name}: {s:?}");
        // (A side trace merged into its loop compiles the loop again.)
        assert_eq!(
            delegate.compiles.get(),
            s.traces + s.merged_branches,
            "{name}: every trace went through the hook"
        );
        assert_eq!(s.compile_failures, 0, "{name}");
        drop(vm);
        assert_eq!(
            delegate.dropped.get(),
            s.traces + s.merged_branches,
            "{name}: the VM drops each external trace's owner with its executor (a merged \
             loop's replaced one too)"
        );
    }
}

#[test]
fn side_traces_of_an_outside_compiler_are_linked() {
    // A branch that flips at i = 300 and a type change at i = 600: side exits get their own
    // traces, which the exits then jump to through the external traces' body addresses.
    let text = "func main()\n  locals i s x\n  const 0; store i; const 0; store s; const 0; store x\n\
                top:\n  load i; const 900; lt; jump_if_false done\n\
                load i; const 300; lt; jump_if_false big\n  load s; const 1; add; store s\n  jump join\n\
                big:\n  load s; const 1000; add; store s\n\
                join:\n  load i; const 600; eq; jump_if_false nf\n  const 0.5; store x\n\
                nf:\n  load x; const 1; add; store x\n  load i; const 1; add; store i\n  jump top\n\
                done:\n  load s; print\n  load x; print\n  const none; return\nend\n";
    let reference = run(text, Config::default());
    assert_eq!(reference, run(text, eager(Mode::Interp)));
    let delegate = Delegate::new(false);
    let vm = Vm::new(
        cpjit_vm::parse(text).unwrap(),
        with(&delegate, eager(Mode::Jit)),
    )
    .unwrap();
    vm.run().unwrap();
    assert_eq!(vm.output(), reference);
    let s = vm.stats();
    assert!(s.side_traces > 0, "{s:?}");
    let executors = vm.function_state(0).executors.borrow().clone();
    let linked: Vec<u64> = executors
        .iter()
        .flat_map(|e| e.links.iter().flat_map(|l| [l.link.get(), l.pinned.get()]))
        .filter(|&a| a != 0)
        .collect();
    assert!(!linked.is_empty(), "no exit was linked: {s:?}");
    let bodies: Vec<u64> = executors
        .iter()
        .filter_map(|e| e.compiled.as_ref().map(|c| c.body_address()))
        .collect();
    assert!(
        linked.iter().all(|a| bodies.contains(a)),
        "links point at the external traces' bodies"
    );
}

#[test]
fn a_failing_outside_compiler_stops_tracing_the_function() {
    let (text, expected) = example("sum");
    let delegate = Delegate::new(true);
    let vm = Vm::new(
        cpjit_vm::parse(&text).unwrap(),
        with(&delegate, eager(Mode::Jit)),
    )
    .unwrap();
    vm.run().unwrap();
    assert_eq!(vm.output(), expected);
    let s = vm.stats();
    assert_eq!((s.traces, s.compile_failures), (0, delegate.compiles.get()));
    assert!(s.compile_failures >= 1, "{s:?}");
}

#[test]
fn listings_name_the_outside_compiler() {
    let (text, _) = example("sum");
    let delegate = Delegate::new(false);
    let config = Config {
        dump_traces: true,
        ..with(&delegate, eager(Mode::Jit))
    };
    let vm = Vm::new(cpjit_vm::parse(&text).unwrap(), config).unwrap();
    vm.run().unwrap();
    assert!(
        vm.trace_dump().contains("bytes by delegate, entry 0x"),
        "{}",
        vm.trace_dump()
    );
    assert!(format!("{:?}", vm.config()).contains("TraceCompiler(delegate)"));
}

#[test]
fn the_hook_is_ignored_outside_jit_mode() {
    let (text, expected) = example("sum");
    for mode in [Mode::Interp, Mode::Uops] {
        let delegate = Delegate::new(false);
        let vm = Vm::new(
            cpjit_vm::parse(&text).unwrap(),
            with(&delegate, eager(mode)),
        )
        .unwrap();
        vm.run().unwrap();
        assert_eq!(vm.output(), expected, "{mode:?}");
        assert_eq!(delegate.compiles.get(), 0, "{mode:?}");
    }
}

/// Hands copy-and-patch's code out as an outside compile of the VM's own lowering
/// (`Backend::lower_stencils`, `CompiledTrace::from_external_lowering`), each entry the
/// lowering names at the stitched code's address for it: what the benchmark's LLVM peer does
/// with its own code.
struct SameLowering {
    backend: Backend,
}

impl TraceCompiler for SameLowering {
    fn name(&self) -> &str {
        "same lowering"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let lowered = self.backend.lower_stencils(trace)?;
        assert_eq!(lowered.instances.len(), lowered.lowering.instances.len());
        let set = self.backend.set();
        for (x, inst) in lowered.instances.iter().zip(&lowered.lowering.instances) {
            assert_eq!(x.stencil, set.stencils[inst.stencil].name);
        }
        let code = self.backend.compile(trace)?;
        let body = code.body_address();
        let pinned = code.pinned_entry().map(|p| p.address);
        let loop_body = code.loop_body_address();
        let pinned_id = lowered.lowering.pinned_entry;
        let address = |k: LoweredId| {
            assert!(lowered.entries.contains(&k), "{k} is not an entry");
            match k {
                LoweredId(0) => body,
                _ if Some(k) == pinned_id => pinned.expect("a pinned entry"),
                _ => loop_body.expect("a loop body"),
            }
        };
        let (entry, bytes) = (code.entry(), code.code_bytes());
        // SAFETY: every address is the stitched trace's code of that instance, kept alive by
        // the owner.
        Ok(unsafe {
            CompiledTrace::from_external_lowering(
                "same lowering",
                entry,
                trace,
                &lowered,
                address,
                bytes,
                Box::new(code),
            )
        })
    }
}

#[test]
fn an_outside_compile_of_the_vms_lowering_is_entered_and_linked_as_the_stitched_code() {
    for name in ["sum", "nested", "collatz", "sieve", "calls", "insertion"] {
        let (text, expected) = example(name);
        let program = cpjit_vm::parse(&text).unwrap();
        let stats = |compiler: Option<Rc<dyn TraceCompiler>>| {
            let vm = Vm::new(
                program.clone(),
                Config {
                    compiler,
                    ..eager(Mode::Jit)
                },
            )
            .unwrap();
            let result = vm.run();
            let mut out = vm.output();
            if let Err(e) = result {
                out.push_str(&format!("error: {e}\n"));
            }
            assert_eq!(out, expected, "examples/{name}.vm");
            vm.stats()
        };
        let stitched = stats(None);
        let backend = Backend::host()
            .expect("host stencils are linked")
            .with_checks(true);
        let outside = stats(Some(Rc::new(SameLowering { backend })));
        assert_eq!(outside.compile_failures, 0, "{name}");
        assert_eq!(
            (
                outside.traces,
                outside.loop_body_links,
                outside.pinned_links,
                outside.inherited_pins
            ),
            (
                stitched.traces,
                stitched.loop_body_links,
                stitched.pinned_links,
                stitched.inherited_pins
            ),
            "examples/{name}.vm: the same traces, linked alike"
        );
    }
}
