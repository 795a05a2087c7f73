//! The JIT: one trace per program, one stencil instance per op, loops as jump targets
//! between instances. Written only against `cpjit-runtime`'s public API and the generated
//! stencil crate of the host.

use crate::{Op, Outcome, Status, TAPE_CELLS};
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{Error, InstanceId, Jit, Target, Trace};
use std::ffi::c_void;

/// The generated stencil set this process can run.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &cpjit_stencils_x86_64_unknown_linux_gnu::SET;
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &cpjit_stencils_aarch64_unknown_linux_gnu::SET;
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &cpjit_stencils_riscv64gc_unknown_linux_gnu::SET;

/// `struct cpjit_frame` of `templates/include/bf.h`.
#[repr(C)]
struct Frame {
    tape_lo: *mut u8,
    tape_hi: *mut u8,
    io: *mut c_void,
}

/// The I/O state the helpers reach through `Frame::io`.
struct Io<'a> {
    input: std::slice::Iter<'a, u8>,
    output: Vec<u8>,
}

/// `void bf_putc(struct cpjit_frame *, uint8_t)`, called by `op_output` with the C ABI.
extern "C" fn bf_putc(frame: *mut Frame, byte: u8) {
    // SAFETY: only traces run by `Compiled::run` call this, with the frame it passes, whose
    // `io` points to that run's `Io`.
    let io = unsafe { &mut *((*frame).io as *mut Io<'_>) };
    io.output.push(byte);
}

/// `int32_t bf_getc(struct cpjit_frame *)`: the next input byte, -1 at the end.
extern "C" fn bf_getc(frame: *mut Frame) -> i32 {
    // SAFETY: as in `bf_putc`.
    let io = unsafe { &mut *((*frame).io as *mut Io<'_>) };
    io.input.next().map_or(-1, |&b| i32::from(b))
}

/// The helpers the template set may call (`allowed_symbols` in its manifest).
fn resolve(symbol: &str) -> Option<u64> {
    match symbol {
        "bf_putc" => Some(bf_putc as extern "C" fn(*mut Frame, u8) as usize as u64),
        "bf_getc" => Some(bf_getc as extern "C" fn(*mut Frame) -> i32 as usize as u64),
        _ => None,
    }
}

/// Stencil indices of the set, looked up once.
struct Stencils {
    add: usize,
    moves: usize,
    clear: usize,
    loop_start: usize,
    loop_end: usize,
    output: usize,
    input: usize,
    exit: usize,
}

impl Stencils {
    fn find(set: &StencilSet<'_>) -> Result<Stencils, Error> {
        let index = |name: &str| {
            set.index_of(name).ok_or_else(|| Error::UnknownStencilName {
                name: name.to_string(),
            })
        };
        Ok(Stencils {
            add: index("op_add")?,
            moves: index("op_move")?,
            clear: index("op_clear")?,
            loop_start: index("op_loop_start")?,
            loop_end: index("op_loop_end")?,
            output: index("op_output")?,
            input: index("op_input")?,
            exit: index("op_exit")?,
        })
    }
}

/// Compiles Brainfuck programs into traces; one per process is enough (traces share its
/// executable memory).
pub struct Compiler {
    jit: Jit<'static>,
    stencils: Stencils,
}

/// A compiled program.
pub struct Compiled {
    trace: Trace,
    entry: InstanceId,
}

impl Compiler {
    /// A compiler over the host's stencil set.
    pub fn new() -> Result<Compiler, Error> {
        Compiler::with_set(HOST_SET)
    }

    /// A compiler over `set` (it must be runnable on this host).
    pub fn with_set(set: &'static StencilSet<'static>) -> Result<Compiler, Error> {
        Ok(Compiler {
            jit: Jit::new(set, resolve)?,
            stencils: Stencils::find(set)?,
        })
    }

    /// Stitches `ops` into one trace: the entry shim, one instance per op, `op_exit`.
    /// Op `i` is instance `i + 1`, so a loop's jump targets are known before they are pushed.
    pub fn compile(&self, ops: &[Op]) -> Result<Compiled, Error> {
        let instance = |op: usize| Target::Instance(InstanceId::from_index(op + 1));
        let s = &self.stencils;
        let mut trace = self.jit.trace();
        let entry = trace.push_shim()?;
        for &op in ops {
            match op {
                Op::Add(n) => trace.push(s.add, &[u64::from(n)], &[])?,
                Op::Move(d) => trace.push(s.moves, &[d as i64 as u64], &[])?,
                Op::Clear => trace.push(s.clear, &[], &[])?,
                Op::LoopStart { end } => trace.push(s.loop_start, &[], &[instance(end + 1)])?,
                Op::LoopEnd { start } => trace.push(s.loop_end, &[], &[instance(start + 1)])?,
                Op::Output => trace.push(s.output, &[], &[])?,
                Op::Input => trace.push(s.input, &[], &[])?,
            };
        }
        trace.push(s.exit, &[], &[])?;
        Ok(Compiled {
            trace: trace.finish()?,
            entry,
        })
    }
}

impl Compiled {
    /// Runs the program on a fresh tape with `input`.
    pub fn run(&self, input: &[u8]) -> Outcome {
        let mut tape = vec![0u8; TAPE_CELLS];
        let mut io = Io {
            input: input.iter(),
            output: Vec::new(),
        };
        let range = tape.as_mut_ptr_range();
        let mut frame = Frame {
            tape_lo: range.start,
            tape_hi: range.end,
            io: &mut io as *mut Io<'_> as *mut c_void,
        };
        // SAFETY: the trace was stitched from this crate's template set, whose ops read the
        // frame as `Frame` and keep the data pointer inside [tape_lo, tape_hi) (op_move
        // checks); both outlive the call.
        let code = unsafe {
            self.trace
                .entry_fn(self.entry)
                .expect("the trace starts with its shim")(
                &mut frame as *mut Frame as *mut c_void,
                range.start as *mut u64,
            )
        };
        Outcome {
            output: io.output,
            status: Status::from_code(code)
                .unwrap_or_else(|| panic!("trace returned unknown status {code}")),
        }
    }

    /// The machine code of the trace (for size figures and debugging).
    pub fn code_bytes(&self) -> &[u8] {
        self.trace.code_bytes()
    }
}
