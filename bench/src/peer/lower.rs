//! Lowering a trace to one LLVM module: per instance, a clone of its stencil's template
//! module with the holes replaced — operands by `inttoptr` constants, `_JIT_CONTINUE` by
//! the next instance's function, jump targets by the target instance's function — and the
//! stencil function renamed `cpjit_i<index>`; then all clones are linked into one module.
//! Each clone keeps its own copy of the stencil's static data, like a stitched instance.

use super::library::Library;
use super::widen;
use crate::workload::TraceSpec;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::AsValueRef;
use inkwell::AddressSpace;

fn unused(value: inkwell::llvm_sys::prelude::LLVMValueRef) -> bool {
    // SAFETY: a valid value of a live module.
    unsafe { inkwell::llvm_sys::core::LLVMGetFirstUse(value).is_null() }
}

/// Name of instance `i`'s function in the lowered module.
pub fn instance_name(i: usize) -> String {
    format!("cpjit_i{i}")
}

/// Whether `name` is an instance's function in the lowered module.
pub fn is_instance_name(name: &str) -> bool {
    name.strip_prefix("cpjit_i")
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// What a hole symbol (without the prefix) stands for in instance `i` of `spec`.
#[derive(Debug)]
enum HoleUse {
    Function(usize),
    Constant(u64),
}

fn hole_use(spec: &TraceSpec, i: usize, hole: &str) -> Result<HoleUse, String> {
    let x = &spec.instances[i];
    let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
    if hole == "CONTINUE" {
        if i + 1 >= spec.instances.len() {
            return Err(format!("{}: continues past the end of the trace", at()));
        }
        return Ok(HoleUse::Function(i + 1));
    }
    if let Some(&(_, t)) = x.targets.iter().find(|(n, _)| *n == hole) {
        return Ok(HoleUse::Function(t));
    }
    if let Some(&(_, v)) = x.operands.iter().find(|(n, _)| *n == hole) {
        return Ok(HoleUse::Constant(v));
    }
    // A half of a 64-bit operand (`CPJIT_DECLARE_OPERAND_HALVES`): the trace gives the
    // whole operand, as it does to the runtime.
    if let Some((name, part)) = cpjit_toolchain::narrow::operand_half(hole) {
        if let Some(&(_, v)) = x.operands.iter().find(|(n, _)| *n == name) {
            return Ok(HoleUse::Constant(part.of(v)));
        }
    }
    Err(format!(
        "{}: the template uses hole _JIT_{hole}, but the trace gives it no value",
        at()
    ))
}

/// Lowers `spec` into a new module of `context`; instance 0 (the shim) stays external,
/// every other instance becomes internal so that the optimiser may inline and drop it.
pub fn lower<'ctx>(
    context: &'ctx Context,
    library: &Library<'ctx>,
    spec: &TraceSpec,
) -> Result<Module<'ctx>, String> {
    let prefix = library.hole_prefix.as_str();
    let trace = context.create_module(&spec.name);
    let ptr = context.ptr_type(AddressSpace::default());
    let i64t = context.i64_type();
    // Members and uncached ops mixed: one signature for all (`widen`).
    let stencils: Vec<&str> = spec.instances.iter().map(|x| x.stencil).collect();
    library
        .load_members(&stencils)
        .map_err(|e| format!("{}: {e}", spec.name))?;
    let wide = widen::widest(stencils[1..].iter().filter_map(|s| library.stencil_type(s)));
    for (i, x) in spec.instances.iter().enumerate() {
        let m = library
            .template(x.stencil)
            .map_err(|e| format!("{}: {e}", spec.name))?;
        let own = m
            .get_function(x.stencil)
            .expect("library modules define their stencil");
        own.as_global_value().set_name(&instance_name(i));
        for f in m.get_functions().collect::<Vec<_>>() {
            let name = f.get_name().to_string_lossy().into_owned();
            let Some(hole) = name.strip_prefix(prefix) else {
                continue;
            };
            if unused(f.as_value_ref()) {
                // Declared by a shared header but not used by this stencil.
                // SAFETY: no uses.
                unsafe { f.delete() };
                continue;
            }
            match hole_use(spec, i, hole)? {
                HoleUse::Function(t) => match m.get_function(&instance_name(t)) {
                    // A jump to itself, or a second hole naming the same instance (e.g. a
                    // conditional jump to the next one): reuse that function, since renaming
                    // would clash.
                    Some(existing) => {
                        f.replace_all_uses_with(existing);
                        // SAFETY: no uses remain.
                        unsafe { f.delete() };
                    }
                    None => f.as_global_value().set_name(&instance_name(t)),
                },
                HoleUse::Constant(_) => {
                    return Err(format!(
                        "{}: instance {i} ({}): _JIT_{hole} is called but is an operand",
                        spec.name, x.stencil
                    ))
                }
            }
        }
        for g in m.get_globals().collect::<Vec<_>>() {
            let name = g.get_name().to_string_lossy().into_owned();
            let Some(hole) = name.strip_prefix(prefix) else {
                continue;
            };
            if unused(g.as_value_ref()) {
                // SAFETY: no uses.
                unsafe { g.delete() };
                continue;
            }
            match hole_use(spec, i, hole)? {
                HoleUse::Constant(v) => {
                    g.as_pointer_value()
                        .replace_all_uses_with(i64t.const_int(v, false).const_to_pointer(ptr));
                    // SAFETY: no uses remain.
                    unsafe { g.delete() };
                }
                HoleUse::Function(_) => {
                    return Err(format!(
                        "{}: instance {i} ({}): _JIT_{hole} is read as data but is a jump",
                        spec.name, x.stencil
                    ))
                }
            }
        }
        if let Some(wide) = wide {
            let own = (i > 0).then_some(own);
            widen::agree(&m, own, wide, is_instance_name);
        }
        trace
            .link_in_module(m)
            .map_err(|e| format!("{}: linking instance {i}: {e}", spec.name))?;
    }
    for i in 1..spec.instances.len() {
        if let Some(f) = trace.get_function(&instance_name(i)) {
            f.set_linkage(Linkage::Internal);
        }
    }
    trace
        .verify()
        .map_err(|e| format!("{}: the lowered module is invalid: {e}", spec.name))?;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Instance;

    fn spec(operands: Vec<(&'static str, u64)>) -> TraceSpec {
        let instance = |stencil, operands| Instance {
            stencil,
            operands,
            targets: Vec::new(),
        };
        TraceSpec {
            name: "t".to_string(),
            instances: vec![
                instance("vm_entry", Vec::new()),
                instance("op_EXIT_TRACE", operands),
            ],
            stack_slots: 0,
        }
    }

    #[test]
    fn a_halves_hole_takes_its_half_of_the_whole_operand() {
        let s = spec(vec![("LINK_SLOT", 0x1234_5678_9abc_def0)]);
        for (hole, half) in [("LINK_SLOT_HI", 0x1234_5678), ("LINK_SLOT_LO", 0x9abc_def0)] {
            match hole_use(&s, 1, hole) {
                Ok(HoleUse::Constant(v)) => assert_eq!(v, half, "{hole}"),
                other => panic!("{hole}: {other:?}"),
            }
        }
        let Err(e) = hole_use(&s, 1, "PC_HI") else {
            panic!("a half of an operand the trace does not give was filled");
        };
        assert!(e.contains("_JIT_PC_HI"), "{e}");
    }
}
