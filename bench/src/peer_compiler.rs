//! The LLVM peer as the VM's trace compiler: a [`TraceCompiler`] installed with
//! `cpjit_vm::Config::compiler`, so that the VM runs LLVM -O0/-O2 code in place of
//! copy-and-patch code. The trace is described exactly as the VM's own backend stitches it
//! ([`vm_trace_spec`]: the shim, then micro-op `i` as instance `i + 1`), lowered from the
//! same stencil IR and compiled with instance 1 kept callable, since other traces' exits
//! jump there through their link slots.

use crate::peer::{self, library::Library, Level};
use crate::workload::{Instance, TraceSpec};
use cpjit_vm::jit::{CompiledTrace, TraceCompiler};
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

/// Compiles the VM's traces with LLVM at one level.
pub struct LlvmTraceCompiler {
    context: &'static Context,
    library: Rc<Library<'static>>,
    level: Level,
    /// Traces compiled so far (names them in errors).
    compiled: Cell<usize>,
    /// The first error: the VM only counts failed compiles, the bench must say why.
    error: RefCell<Option<String>>,
}

impl LlvmTraceCompiler {
    pub fn new(
        context: &'static Context,
        library: Rc<Library<'static>>,
        level: Level,
    ) -> LlvmTraceCompiler {
        LlvmTraceCompiler {
            context,
            library,
            level,
            compiled: Cell::new(0),
            error: RefCell::new(None),
        }
    }

    /// The first compile error, if any.
    pub fn error(&self) -> Option<String> {
        self.error.borrow().clone()
    }
}

impl TraceCompiler for LlvmTraceCompiler {
    fn name(&self) -> &str {
        self.level.name()
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let n = self.compiled.replace(self.compiled.get() + 1);
        let spec = vm_trace_spec(format!("VM trace {n}"), trace);
        let compiled =
            peer::compile_with_body(self.context, &self.library, &spec, self.level, resolve)
                .inspect_err(|e| {
                    self.error
                        .borrow_mut()
                        .get_or_insert_with(|| format!("{}: {e}", self.level.name()));
                })?;
        let body = compiled.body().expect("compiled with its body");
        // SAFETY: the entry is the lowered shim and the body instance 1, compiled from the
        // very IR of the VM's stencils (same calling convention, exit statuses and frame
        // fields); the execution engine in `compiled` owns the code until the VM drops it.
        Ok(unsafe {
            CompiledTrace::from_external(
                self.level.name(),
                compiled.entry(),
                body,
                0,
                Box::new(compiled),
            )
        })
    }
}
