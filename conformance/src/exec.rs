//! Stitching a [`Program`] with the runtime and running it through the set's entry shim.

use crate::program::{Outcome, Program, STACK_CAPACITY};
use cpjit_model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target, Trace};

/// The external helper `op_test_helper` calls. `extern "C"` is the ABI the stencils of this
/// process's compatible sets expect (Win64 in a Windows process, System V or AAPCS64 else).
pub extern "C" fn cpjit_test_mul_add(a: i64, b: i64, c: i64) -> i64 {
    crate::program::mul_add(a, b, c)
}

/// The helper the float-cached test ops call (`templates/families/float.c`, `fhelper`):
/// `x / 2 + 1`, two roundings, as the reference computes it.
pub extern "C" fn cpjit_test_fscale(x: f64) -> f64 {
    x * 0.5 + 1.0
}

/// The caller's symbol table for the test ops.
pub fn resolve(name: &str) -> Option<u64> {
    match name {
        "cpjit_test_mul_add" => Some(cpjit_test_mul_add as *const () as usize as u64),
        "cpjit_test_fscale" => Some(cpjit_test_fscale as *const () as usize as u64),
        _ => None,
    }
}

/// A JIT for `set` resolving the test helper; `near` as in [`JitOptions::near`].
pub fn jit<'s>(set: &'s StencilSet<'s>, near: Option<u64>) -> Jit<'s> {
    let options = JitOptions {
        near,
        ..JitOptions::default()
    };
    Jit::with_options(set, resolve, options)
        .unwrap_or_else(|e| panic!("{}: cannot create a JIT: {e}", set.target))
}

/// A stitched program: the trace and its entry shim instance.
pub struct Compiled {
    pub trace: Trace,
    pub shim: InstanceId,
}

/// Stitches `program` behind the entry shim (instruction `i` is instance `i + 1`).
pub fn compile(jit: &Jit<'_>, program: &Program) -> Result<Compiled, String> {
    let set = jit.stencil_set();
    let mut b = jit.trace();
    let shim = b
        .push_shim()
        .map_err(|e| format!("{}: push shim: {e}", set.target))?;
    for (i, instr) in program.instrs.iter().enumerate() {
        let name = instr.op.stencil_name();
        let index = set
            .index_of(name)
            .ok_or_else(|| format!("{}: the set has no stencil `{name}`", set.target))?;
        let targets: Vec<Target> = instr
            .target
            .map(|t| Target::Instance(InstanceId::from_index(t + 1)))
            .into_iter()
            .collect();
        b.push(index, &instr.operands, &targets)
            .map_err(|e| format!("{}: instruction {i} ({name}): {e}", set.target))?;
    }
    let trace = b
        .finish()
        .map_err(|e| format!("{}: finish: {e}", set.target))?;
    Ok(Compiled { trace, shim })
}

impl Compiled {
    /// Runs the trace once on a fresh stack of [`STACK_CAPACITY`] values; returns the exit
    /// value and the first `depth` stack values (the depth the reference ended with).
    pub fn run(&self, depth: usize) -> Outcome {
        // Guard values around the stack catch writes outside it.
        const GUARD: u64 = 0xdead_beef_cafe_f00d;
        let mut memory = vec![GUARD; STACK_CAPACITY + 16];
        let mut frame = [0u64; 4];
        let entry = self
            .trace
            .entry_fn(self.shim)
            .expect("the trace starts with its shim");
        // SAFETY: the trace was stitched from a valid, terminating program whose stack use
        // the reference bounded by STACK_CAPACITY; the shim is instance `self.shim`.
        let exit = unsafe { entry(frame.as_mut_ptr().cast(), memory.as_mut_ptr().add(8)) };
        assert!(
            memory[..8].iter().all(|&g| g == GUARD),
            "the trace wrote below its stack"
        );
        Outcome {
            exit,
            stack: memory[8..8 + depth].to_vec(),
        }
    }
}
