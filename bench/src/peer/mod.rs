//! The peer: LLVM as a JIT for the same traces. A trace is lowered to LLVM IR by linking the
//! template IR of its stencils ([`lower`]), optionally optimised with the `default<O2>`
//! pipeline, and compiled in-process by MCJIT (inkwell's `ExecutionEngine`), which also
//! loads and relocates the code — the job `cpjit-runtime` does for copy-and-patch.
//! Compile time is everything from the trace description to a callable entry address.

pub mod library;
pub mod lower;
mod widen;

use crate::workload::TraceSpec;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::passes::PassBuilderOptions;
use inkwell::OptimizationLevel;
use library::Library;

/// How much LLVM optimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// No IR passes; the code generator at `-O0` (fast instruction selection).
    O0,
    /// The `default<O2>` IR pipeline (inlining the instances into each other, among others),
    /// then the code generator at `-O2`.
    O2,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::O0 => "LLVM -O0",
            Level::O2 => "LLVM -O2",
        }
    }
}

/// A trace compiled by LLVM: the engine owns the code.
pub struct Compiled<'ctx> {
    _engine: ExecutionEngine<'ctx>,
    entry: cpjit_runtime::EntryFn,
    /// The code of the instances kept callable ([`compile_with_entries`]), in their order.
    entries: Vec<u64>,
}

impl Compiled<'_> {
    /// The shim, `int64_t cpjit_entry(struct cpjit_frame *, uint64_t *)`.
    pub fn entry(&self) -> cpjit_runtime::EntryFn {
        self.entry
    }

    /// The code of the instances [`compile_with_entries`] kept callable, in its order
    /// (empty after [`compile`]), each with the ops' calling convention.
    pub fn entries(&self) -> &[u64] {
        &self.entries
    }

    /// Runs the trace from its shim; returns the exit status.
    pub fn run(&self, spec: &TraceSpec) -> i64 {
        let mut stack = vec![0u64; spec.stack_slots];
        // SAFETY: the entry is the lowered shim (C ABI); the test ops use at most
        // `stack_slots` slots and ignore the frame.
        unsafe { (self.entry)(std::ptr::null_mut(), stack.as_mut_ptr()) }
    }
}

/// Lowers and compiles `spec` at `level`; `resolve` gives the helpers' addresses.
pub fn compile<'ctx>(
    context: &'ctx Context,
    library: &Library<'ctx>,
    spec: &TraceSpec,
    level: Level,
    resolve: fn(&str) -> Option<u64>,
) -> Result<Compiled<'ctx>, String> {
    compile_with_entries(context, library, spec, level, resolve, &[])
}

/// As [`compile`], and keeps the instances `keep` (indices, not the shim) external
/// functions whose addresses [`Compiled::entries`] gives: the VM's other traces jump there
/// through their link slots, so -O2 must not inline them away.
pub fn compile_with_entries<'ctx>(
    context: &'ctx Context,
    library: &Library<'ctx>,
    spec: &TraceSpec,
    level: Level,
    resolve: fn(&str) -> Option<u64>,
    keep: &[usize],
) -> Result<Compiled<'ctx>, String> {
    let module = lower::lower(context, library, spec)?;
    for &k in keep {
        let f = module
            .get_function(&lower::instance_name(k))
            .ok_or_else(|| format!("{}: the trace has no instance {k} to keep", spec.name))?;
        f.set_linkage(inkwell::module::Linkage::External);
    }
    if level == Level::O2 {
        module
            .run_passes(
                "default<O2>",
                &library.machine,
                PassBuilderOptions::create(),
            )
            .map_err(|e| format!("{}: default<O2>: {e}", spec.name))?;
    }
    let codegen = match level {
        Level::O0 => OptimizationLevel::None,
        Level::O2 => OptimizationLevel::Default,
    };
    let engine = module
        .create_jit_execution_engine(codegen)
        .map_err(|e| format!("{}: MCJIT: {e}", spec.name))?;
    for f in module.get_functions() {
        if f.count_basic_blocks() > 0 {
            continue;
        }
        let name = f.get_name().to_string_lossy();
        if name.starts_with("llvm.") {
            continue; // intrinsics are the code generator's
        }
        let address = resolve(&name).ok_or_else(|| {
            format!(
                "{}: the trace calls {name}, which the symbol table lacks",
                spec.name
            )
        })?;
        engine.add_global_mapping(&f, address as usize);
    }
    let address = engine
        .get_function_address(&lower::instance_name(0))
        .map_err(|e| format!("{}: no entry after code generation: {e:?}", spec.name))?;
    // SAFETY: instance 0 is the shim, `int64_t cpjit_entry(struct cpjit_frame *, uint64_t *)`.
    let entry = unsafe { std::mem::transmute::<usize, cpjit_runtime::EntryFn>(address) };
    let entries = keep
        .iter()
        .map(|&k| {
            engine
                .get_function_address(&lower::instance_name(k))
                .map(|a| a as u64)
                .map_err(|e| {
                    format!(
                        "{}: no instance {k} after code generation: {e:?}",
                        spec.name
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(Compiled {
        _engine: engine,
        entry,
        entries,
    })
}

#[cfg(test)]
mod tests {
    //! The lowering on hand-written template IR (no clang needed): holes replaced, instances
    //! linked, the result runs at both levels, and a missing operand is a clear error.
    use super::*;
    use crate::workload::Instance;
    use inkwell::memory_buffer::MemoryBuffer;

    /// Template IR for `TRIPLE` (replaced by the peer's triple).
    const TEMPLATES: &str = r#"
target triple = "TRIPLE"

@_JIT_OPERAND0 = external global i8
declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr)

define i64 @cpjit_entry(ptr %f, ptr %sp) {
  %r = call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %r
}

define preserve_nonecc i64 @op_test_push(ptr %f, ptr %sp) {
  store i64 ptrtoint (ptr @_JIT_OPERAND0 to i64), ptr %sp
  %n = getelementptr i64, ptr %sp, i64 1
  %r = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %n)
  ret i64 %r
}

define preserve_nonecc i64 @op_test_add(ptr %f, ptr %sp) {
  %pb = getelementptr i64, ptr %sp, i64 -1
  %pa = getelementptr i64, ptr %sp, i64 -2
  %b = load i64, ptr %pb
  %a = load i64, ptr %pa
  %s = add i64 %a, %b
  store i64 %s, ptr %pa
  %r = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %pb)
  ret i64 %r
}

define preserve_nonecc i64 @op_test_exit(ptr %f, ptr %sp) {
  %p = getelementptr i64, ptr %sp, i64 -1
  %v = load i64, ptr %p
  ret i64 %v
}
"#;

    fn library(context: &Context) -> Library<'_> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(
            TEMPLATES.replace("TRIPLE", library::triple()).as_bytes(),
            "t.ll",
        );
        let unit = context.create_module_from_ir(buffer).unwrap();
        let ir = library::TemplateIr {
            hole_prefix: "_JIT_".into(),
            units: vec![(
                "t.ll".into(),
                unit.write_bitcode_to_memory().as_slice().to_vec(),
            )],
            members: Vec::new(),
        };
        let names = ["cpjit_entry", "op_test_push", "op_test_add", "op_test_exit"];
        Library::new(context, &ir, &names).unwrap()
    }

    fn inst(stencil: &'static str, operand: Option<u64>) -> Instance {
        Instance {
            stencil,
            operands: operand.map(|v| ("OPERAND0", v)).into_iter().collect(),
            targets: vec![],
        }
    }

    fn spec(instances: Vec<Instance>) -> TraceSpec {
        TraceSpec {
            name: "t".into(),
            instances,
            stack_slots: 8,
        }
    }

    #[test]
    fn a_lowered_trace_runs_at_both_levels() {
        let context = Context::create();
        let lib = library(&context);
        let trace = spec(vec![
            inst("cpjit_entry", None),
            inst("op_test_push", Some(40)),
            inst("op_test_push", Some(2)),
            inst("op_test_add", None),
            inst("op_test_exit", None),
        ]);
        for level in [Level::O0, Level::O2] {
            let compiled = compile(&context, &lib, &trace, level, |_| None).unwrap();
            assert_eq!(compiled.run(&trace), 42, "{level:?}");
        }
    }

    #[test]
    fn a_missing_operand_or_end_is_named() {
        let context = Context::create();
        let lib = library(&context);
        let missing = spec(vec![
            inst("cpjit_entry", None),
            inst("op_test_push", None),
            inst("op_test_exit", None),
        ]);
        let err = compile(&context, &lib, &missing, Level::O0, |_| None)
            .err()
            .unwrap();
        assert!(
            err.contains("instance 1 (op_test_push)") && err.contains("_JIT_OPERAND0"),
            "{err}"
        );
        let open_end = spec(vec![
            inst("cpjit_entry", None),
            inst("op_test_push", Some(1)),
        ]);
        let err = compile(&context, &lib, &open_end, Level::O0, |_| None)
            .err()
            .unwrap();
        assert!(err.contains("continues past the end of the trace"), "{err}");
    }
}
