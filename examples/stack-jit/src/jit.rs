//! The JIT: one trace per program, one instance per op (plus the glue the kit inserts).
//! Written only against `cpjit-runtime`'s public API and the generated stencil crate of the
//! host.
//!
//! **No cache-state code here.** In [`Mode::Cached`] each op is pushed *by op id* with
//! [`TraceBuilder::push_op`]; the kit reads the generated selection table for the state the
//! previous instance left, picks the member (say `op_add_2_1`), and inserts a spill or fill
//! (`op_move_*`) where needed. Jump targets are [`Label`]s: bound where their op is pushed,
//! named as [`Target::Label`] by the jumps, and the kit makes every edge into a label agree
//! on its state. [`Mode::Uncached`] pushes the members entered and left with nothing
//! cached (`op_*_0_0`, the plain ops) by stencil index, for comparison.

use crate::{verify, Op, Outcome, VerifyError, LOCALS, MAX_STACK};
use cpjit_runtime::model::{Family, StencilSet};
use cpjit_runtime::{Error, InstanceId, Jit, Label, Selector, Target, Trace, TraceBuilder};
use std::ffi::c_void;
use std::fmt;

#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
use stack_stencils_aarch64_unknown_linux_gnu as host;
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
use stack_stencils_riscv64gc_unknown_linux_gnu as host;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use stack_stencils_x86_64_unknown_linux_gnu as host;

/// The ids of the family's ops, the same on every target (generated: `mod op`).
use host::op::stack as op;

/// The generated stencil set this process can run.
pub static HOST_SET: &StencilSet<'static> = &host::SET;

/// The family every op belongs to (`[[family]] stack` in the manifest).
static HOST_FAMILY: &Family<'static> = &host::FAMILIES[host::family::stack];

/// How a program is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every op keeps the whole stack in memory (the `op_*_0_0` members).
    Uncached,
    /// Up to three top-of-stack values in registers, members chosen by the kit.
    Cached,
}

/// `struct cpjit_frame` of `templates/include/stack.h`.
#[repr(C)]
struct Frame {
    locals: [i64; LOCALS],
    out: *mut Vec<i64>,
}

/// `void stack_print(struct cpjit_frame *, int64_t)`, called by `op_print_*`.
extern "C" fn stack_print(frame: *mut Frame, value: i64) {
    // SAFETY: only traces run by `Compiled::run` call this, with the frame it passes, whose
    // `out` points to that run's output vector.
    unsafe { (*(*frame).out).push(value) };
}

/// `int64_t stack_mix(int64_t, int64_t)`, called by `op_mix_*`.
extern "C" fn stack_mix(a: i64, b: i64) -> i64 {
    crate::mix(a, b)
}

/// The helpers the template set may call (`allowed_symbols` in its manifest).
fn resolve(symbol: &str) -> Option<u64> {
    match symbol {
        "stack_print" => Some(stack_print as extern "C" fn(*mut Frame, i64) as usize as u64),
        "stack_mix" => Some(stack_mix as extern "C" fn(i64, i64) -> i64 as usize as u64),
        _ => None,
    }
}

/// Why a program did not compile.
#[derive(Debug)]
pub enum CompileError {
    /// The program failed [`verify`].
    Verify(VerifyError),
    /// The kit refused (out of memory, a selection it cannot make, ...).
    Kit(Error),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Verify(e) => write!(f, "the program is invalid: {e}"),
            CompileError::Kit(e) => write!(f, "the kit refused the trace: {e}"),
        }
    }
}

impl std::error::Error for CompileError {}

impl From<Error> for CompileError {
    fn from(e: Error) -> CompileError {
        CompileError::Kit(e)
    }
}

/// Compiles programs into traces; one per process is enough (traces share its executable
/// memory).
pub struct Compiler {
    jit: Jit<'static>,
    selector: Selector<'static>,
    /// Per op id, the stencil index of its plain member (`op_*_0_0`), for [`Mode::Uncached`].
    plain: Vec<usize>,
}

/// A compiled program.
pub struct Compiled {
    trace: Trace,
    entry: InstanceId,
    instances: usize,
}

/// `op` as the family's op id, its operand and its jump target.
fn lower(o: Op) -> (u16, Option<u64>, Option<u32>) {
    match o {
        Op::Const(v) => (op::CONST, Some(v as u64), None),
        Op::Load(n) => (op::LOAD, Some(u64::from(n)), None),
        Op::Store(n) => (op::STORE, Some(u64::from(n)), None),
        Op::Add => (op::ADD, None, None),
        Op::Sub => (op::SUB, None, None),
        Op::Mul => (op::MUL, None, None),
        Op::And => (op::AND, None, None),
        Op::Shr => (op::SHR, None, None),
        Op::Lt => (op::LT, None, None),
        Op::Eq => (op::EQ, None, None),
        Op::Dup => (op::DUP, None, None),
        Op::Drop => (op::DROP, None, None),
        Op::Swap => (op::SWAP, None, None),
        Op::Mix => (op::MIX, None, None),
        Op::Print => (op::PRINT, None, None),
        Op::Jump(t) => (op::JUMP, None, Some(t)),
        Op::Jz(t) => (op::JZ, None, Some(t)),
        Op::Jnz(t) => (op::JNZ, None, Some(t)),
        Op::Ret => (op::RET, None, None),
    }
}

impl Compiler {
    /// A compiler over the host's stencil set.
    pub fn new() -> Result<Compiler, Error> {
        let selector = Selector::new(HOST_FAMILY)?;
        // The table's member entered and left with nothing cached, per op.
        let plain = (0..selector.table().ops() as u16)
            .map(|op| usize::from(selector.table().member(op, 0, 0)))
            .collect();
        Ok(Compiler {
            jit: Jit::new(HOST_SET, resolve)?,
            selector,
            plain,
        })
    }

    /// Stitches `ops` (after [`verify`]) into one trace starting with the entry shim.
    pub fn compile(&self, ops: &[Op], mode: Mode) -> Result<Compiled, CompileError> {
        verify(ops).map_err(CompileError::Verify)?;
        let mut trace = self.jit.trace();
        let entry = trace.push_shim()?;
        match mode {
            Mode::Uncached => self.push_uncached(&mut trace, ops)?,
            Mode::Cached => self.push_cached(&mut trace, ops)?,
        }
        let instances = trace.len();
        Ok(Compiled {
            trace: trace.finish()?,
            entry,
            instances,
        })
    }

    /// One plain instance per op: op `i` is instance `i + 1`, so targets are known ahead.
    fn push_uncached(&self, trace: &mut TraceBuilder<'_, '_>, ops: &[Op]) -> Result<(), Error> {
        for &o in ops {
            let (id, operand, target) = lower(o);
            let target = target.map(|t| Target::Instance(InstanceId::from_index(t as usize + 1)));
            trace.push(
                self.plain[id as usize],
                operand.as_slice(),
                target.as_slice(),
            )?;
        }
        Ok(())
    }

    /// Every op by id; a label at every op some jump goes to.
    fn push_cached(&self, trace: &mut TraceBuilder<'_, '_>, ops: &[Op]) -> Result<(), Error> {
        let sel = &self.selector;
        let mut labels: Vec<Option<Label>> = vec![None; ops.len()];
        for &o in ops {
            if let (_, _, Some(t)) = lower(o) {
                if labels[t as usize].is_none() {
                    labels[t as usize] = Some(trace.label()?);
                }
            }
        }
        for (&o, label) in ops.iter().zip(&labels) {
            if let Some(label) = *label {
                trace.bind(sel, label)?;
            }
            let (id, operand, target) = lower(o);
            let target = target.map(|t| Target::Label(labels[t as usize].expect("made above")));
            trace.push_op(sel, id, operand.as_slice(), target.as_slice())?;
        }
        Ok(())
    }
}

impl Compiled {
    /// Runs the program with all locals 0.
    pub fn run(&self) -> Outcome {
        let mut output = Vec::new();
        let mut frame = Frame {
            locals: [0; LOCALS],
            out: &mut output,
        };
        let mut stack = [0u64; MAX_STACK];
        let entry = self
            .trace
            .entry_fn(self.entry)
            .expect("the trace starts with its shim");
        // SAFETY: the trace was stitched from this crate's template set from a verified
        // program: its ops read the frame as `Frame`, index locals below LOCALS and keep the
        // value stack within MAX_STACK slots of `stack`; both outlive the call.
        let result = unsafe { entry(&mut frame as *mut Frame as *mut c_void, stack.as_mut_ptr()) };
        Outcome { result, output }
    }

    /// The machine code of the trace (for size figures and debugging).
    pub fn code_bytes(&self) -> &[u8] {
        self.trace.code_bytes()
    }

    /// The number of instances stitched (the shim and the kit's glue included).
    pub fn instances(&self) -> usize {
        self.instances
    }
}
