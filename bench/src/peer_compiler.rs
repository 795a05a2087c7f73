//! The LLVM peer as the VM's trace compiler: a [`TraceCompiler`] installed with
//! `cpjit_vm::Config::compiler`, so that the VM runs LLVM -O0/-O2 code in place of
//! copy-and-patch code. By default the trace is lowered exactly as the VM's own backend
//! stitches it ([`PeerLowering::Same`], [`vm_lowered_spec`]: the shim, then the register-
//! cached members, spills, `BOX`es, `PIN`s, `UNPIN`s and `LINK`s the VM's lowering chose),
//! linked from the same template IR (each family member's own), and compiled with the
//! instances the VM enters from outside kept callable (the first, a peeled loop's body, the
//! pinned entry), since other traces' exits jump there through their link slots; the VM
//! then links to them as to the stitched code. [`PeerLowering::Uncached`] compiles each
//! micro-op's uncached stencil instead ([`vm_trace_spec`]), the row that shows what the
//! register cache is worth under LLVM.

use crate::peer::{self, library::Library, Level};
use crate::workload::{Instance, TraceSpec};
use cpjit_runtime::model::StencilSet;
use cpjit_vm::jit::{Backend, CompiledTrace, LoweredId, LoweredTrace, TraceCompiler};
use cpjit_vm::ops;
use cpjit_vm::trace::Trace;
use inkwell::context::Context;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Helper addresses of the VM (what its copy-and-patch backend resolves too).
pub fn resolve(name: &str) -> Option<u64> {
    cpjit_vm::helpers::symbols()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a as u64)
}

/// One VM trace as a [`TraceSpec`]: the shim, then micro-op `i` as instance `i + 1`, with
/// the VM's operand and target conventions (`cpjit_vm::jit::operand_value`; `JUMP_TARGET`
/// and `EXIT_TARGET` both go to `Inst::target`, as in the VM's own backend).
pub fn vm_trace_spec(name: String, trace: &Trace) -> TraceSpec {
    let mut instances = vec![Instance {
        stencil: "vm_entry",
        operands: vec![],
        targets: vec![],
    }];
    for u in &trace.uops {
        let target = u.target as usize + 1;
        instances.push(Instance {
            stencil: ops::info(u.op).stencil,
            operands: cpjit_vm::jit::OPERAND_NAMES
                .iter()
                .filter_map(|&n| Some((n, cpjit_vm::jit::operand_value(n, u)?)))
                .collect(),
            targets: vec![("JUMP_TARGET", target), ("EXIT_TARGET", target)],
        });
    }
    TraceSpec {
        name,
        instances,
        stack_slots: 0,
    }
}

/// A VM trace lowered as copy-and-patch stitches it ([`Backend::lower_stencils`]) as a
/// [`TraceSpec`]: the shim, then lowered instance `k` as instance `k + 1`.
pub fn vm_lowered_spec(name: String, lowered: &LoweredTrace) -> TraceSpec {
    let mut instances = vec![Instance {
        stencil: "vm_entry",
        operands: vec![],
        targets: vec![],
    }];
    instances.extend(lowered.instances.iter().map(|x| {
        Instance {
            stencil: x.stencil,
            operands: x.operands.clone(),
            targets: x
                .targets
                .iter()
                .map(|&(n, k)| (n, k.instance().index()))
                .collect(),
        }
    }));
    TraceSpec {
        name,
        instances,
        stack_slots: 0,
    }
}

/// What the LLVM peer compiles of a VM trace.
pub enum PeerLowering {
    /// The VM's own lowering: the register-cached members, pinned locals and glue that
    /// copy-and-patch stitches, so that LLVM's code and the stitched code differ only in
    /// code quality.
    Same(Box<Backend>),
    /// Each micro-op's uncached stencil (memory stack, locals in the frame).
    Uncached,
}

impl PeerLowering {
    /// The VM's own lowering of `set`.
    pub fn same(set: &'static StencilSet<'static>) -> Result<PeerLowering, String> {
        Ok(PeerLowering::Same(Box::new(Backend::new(set)?)))
    }
}

/// The name of the LLVM peer at `level` compiling the VM's own lowering (`same`) or the
/// uncached ops, as the tables show it.
pub fn peer_name(level: Level, same: bool) -> String {
    if same {
        level.name().to_string()
    } else {
        format!("{} (uncached ops)", level.name())
    }
}

/// Compiles the VM's traces with LLVM at one level.
pub struct LlvmTraceCompiler {
    context: &'static Context,
    library: Rc<Library<'static>>,
    level: Level,
    lowering: PeerLowering,
    name: String,
    /// Traces compiled so far (names them in errors).
    compiled: Cell<usize>,
    /// Thread CPU time spent compiling so far, ns (the VM clocks its compiles on the wall).
    compile_cpu: Cell<f64>,
    /// The first error: the VM only counts failed compiles, the bench must say why.
    error: RefCell<Option<String>>,
}

impl LlvmTraceCompiler {
    pub fn new(
        context: &'static Context,
        library: Rc<Library<'static>>,
        level: Level,
        lowering: PeerLowering,
    ) -> LlvmTraceCompiler {
        LlvmTraceCompiler {
            context,
            library,
            level,
            name: peer_name(level, matches!(lowering, PeerLowering::Same(_))),
            lowering,
            compiled: Cell::new(0),
            compile_cpu: Cell::new(0.0),
            error: RefCell::new(None),
        }
    }

    /// The first compile error, if any.
    pub fn error(&self) -> Option<String> {
        self.error.borrow().clone()
    }

    /// The thread CPU time its compiles took so far (ns).
    pub fn compile_cpu(&self) -> f64 {
        self.compile_cpu.get()
    }

    fn compile_trace(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let n = self.compiled.replace(self.compiled.get() + 1);
        let name = format!("VM trace {n}");
        let compile = |spec: &TraceSpec, keep: &[usize]| {
            peer::compile_with_entries(self.context, &self.library, spec, self.level, resolve, keep)
        };
        match &self.lowering {
            PeerLowering::Uncached => {
                let compiled = compile(&vm_trace_spec(name, trace), &[1])?;
                let body = compiled.entries()[0];
                // SAFETY: the entry is the lowered shim and the body instance 1, compiled
                // from the very IR of the VM's stencils (same calling convention, exit
                // statuses and frame fields); the execution engine in `compiled` owns the
                // code until the VM drops it.
                Ok(unsafe {
                    CompiledTrace::from_external(
                        &self.name,
                        compiled.entry(),
                        body,
                        0,
                        Box::new(compiled),
                    )
                })
            }
            PeerLowering::Same(backend) => {
                let lowered = backend.lower_stencils(trace)?;
                let keep: Vec<usize> = lowered
                    .entries
                    .iter()
                    .map(|k| k.instance().index())
                    .collect();
                let compiled = compile(&vm_lowered_spec(name, &lowered), &keep)?;
                let addresses: Vec<(LoweredId, u64)> = lowered
                    .entries
                    .iter()
                    .copied()
                    .zip(compiled.entries().iter().copied())
                    .collect();
                let address = |k: LoweredId| {
                    addresses
                        .iter()
                        .find(|(e, _)| *e == k)
                        .map(|&(_, a)| a)
                        .expect("the VM asks only for the lowering's entries")
                };
                // SAFETY: as above, from the IR of the very members the lowering chose (same
                // register conventions and pinned registers); each kept entry is its
                // instance's code with the ops' calling convention.
                Ok(unsafe {
                    CompiledTrace::from_external_lowering(
                        &self.name,
                        compiled.entry(),
                        trace,
                        &lowered,
                        address,
                        0,
                        Box::new(compiled),
                    )
                })
            }
        }
    }
}

impl TraceCompiler for LlvmTraceCompiler {
    fn name(&self) -> &str {
        &self.name
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let (compiled, t) = crate::harness::time(|| self.compile_trace(trace));
        self.compile_cpu.set(self.compile_cpu.get() + t.cpu);
        compiled.inspect_err(|e| {
            self.error
                .borrow_mut()
                .get_or_insert_with(|| format!("{}: {e}", self.name));
        })
    }
}
