//! ebpf-jit: an eBPF JIT built with the copy-and-patch kit, as an outside crate would, with
//! the semantics of rbpf 0.4's interpreter (checked against it by `tests/`).
//!
//! [`EbpfVm`] has rbpf's shape: construct from bytecode (verified as rbpf verifies it),
//! register helpers, [`EbpfVm::jit_compile`], then run with a memory slice. Every load and
//! store is checked against the program's regions (the memory, the metadata buffer and the
//! 512-byte stack); an access outside them is an [`Error`], never a crash.
//! [`EbpfVm::interpret`] runs the same program with this crate's reference interpreter.
//! [`Compiler::compile_batch`] and [`EbpfVm::jit_compile_batch`] compile many programs
//! together, with one publish of their code (`batch`).

mod batch;
mod canon;
pub mod cli;
mod emit;
mod helper;
mod insn;
mod interp;
mod jit;
mod scan;
mod shape;
mod table;
mod verifier;

pub use helper::Helper;
pub use insn::{
    decode, encode_kind, insn, AluOp, Cond, Insn, Kind, Width, INSN_SIZE,
    LOCAL_FUNCTION_STACK_SIZE, MAX_CALL_DEPTH, PROG_MAX_INSNS, STACK_SIZE,
};
pub use jit::{Compiled, Compiler, HOST_SET};

use std::fmt;

/// Why a program was refused or stopped.
#[derive(Debug)]
pub enum Error {
    /// The verifier refused the program (rbpf's verifier refuses it too).
    Verifier { insn: Option<usize>, reason: String },
    /// A load or store outside the memory, the metadata buffer and the stack.
    OutOfBounds {
        insn: usize,
        store: bool,
        addr: u64,
        len: u64,
    },
    /// A call of a helper id nobody registered.
    UnknownHelper { insn: usize, id: u32 },
    /// An eBPF-to-eBPF call nested deeper than [`MAX_CALL_DEPTH`].
    CallDepth { insn: usize },
    /// Execution ran past the last instruction (rbpf's interpreter panics there).
    FellOffEnd { insn: usize },
    /// A local call reached the second half of an LD_DW (rbpf's interpreter panics there).
    InvalidInstruction { insn: usize },
    /// `execute_jit` before `jit_compile`.
    NotCompiled,
    /// The kit refused the trace.
    Jit(cpjit_runtime::Error),
    /// Program `program` of a batch ([`Compiler::compile_batch`]) was refused, for `source`;
    /// the batch compiled none of its programs.
    InBatch { program: usize, source: Box<Error> },
}

/// The kind of an [`Error`], what the differential tests compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Verifier,
    OutOfBoundsLoad,
    OutOfBoundsStore,
    UnknownHelper,
    CallDepth,
    FellOffEnd,
    InvalidInstruction,
    NotCompiled,
    Jit,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Verifier { .. } => ErrorKind::Verifier,
            Error::OutOfBounds { store: false, .. } => ErrorKind::OutOfBoundsLoad,
            Error::OutOfBounds { store: true, .. } => ErrorKind::OutOfBoundsStore,
            Error::UnknownHelper { .. } => ErrorKind::UnknownHelper,
            Error::CallDepth { .. } => ErrorKind::CallDepth,
            Error::FellOffEnd { .. } => ErrorKind::FellOffEnd,
            Error::InvalidInstruction { .. } => ErrorKind::InvalidInstruction,
            Error::NotCompiled => ErrorKind::NotCompiled,
            Error::Jit(_) => ErrorKind::Jit,
            Error::InBatch { source, .. } => source.kind(),
        }
    }

    /// The index of the instruction the error is about, if it is about one.
    pub fn insn(&self) -> Option<usize> {
        match *self {
            Error::Verifier { insn, .. } => insn,
            Error::OutOfBounds { insn, .. }
            | Error::UnknownHelper { insn, .. }
            | Error::CallDepth { insn }
            | Error::FellOffEnd { insn }
            | Error::InvalidInstruction { insn } => Some(insn),
            Error::NotCompiled | Error::Jit(_) => None,
            Error::InBatch { ref source, .. } => source.insn(),
        }
    }

    /// The index in its batch of the program the error is about, if it is about a batch.
    pub fn program(&self) -> Option<usize> {
        match *self {
            Error::InBatch { program, .. } => Some(program),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verifier {
                insn: Some(i),
                reason,
            } => write!(f, "instruction #{i}: refused by the verifier: {reason}"),
            Error::Verifier { insn: None, reason } => {
                write!(f, "refused by the verifier: {reason}")
            }
            Error::OutOfBounds {
                insn,
                store,
                addr,
                len,
            } => write!(
                f,
                "instruction #{insn}: out-of-bounds {} of {len} bytes at {addr:#x} \
                 (outside the memory, the metadata buffer and the stack)",
                if *store { "store" } else { "load" }
            ),
            Error::UnknownHelper { insn, id } => {
                write!(f, "instruction #{insn}: call of unknown helper {id:#x}")
            }
            Error::CallDepth { insn } => write!(
                f,
                "instruction #{insn}: eBPF-to-eBPF calls nested deeper than {MAX_CALL_DEPTH}"
            ),
            Error::FellOffEnd { insn } => {
                write!(
                    f,
                    "instruction #{insn}: execution ran past the last instruction"
                )
            }
            Error::InvalidInstruction { insn } => write!(
                f,
                "instruction #{insn}: executed the second half of an LD_DW"
            ),
            Error::NotCompiled => write!(f, "the program is not compiled (call jit_compile)"),
            Error::Jit(e) => write!(f, "the JIT refused the trace: {e}"),
            Error::InBatch { program, source } => {
                write!(f, "program #{program} of the batch: {source}")
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<cpjit_runtime::Error> for Error {
    fn from(e: cpjit_runtime::Error) -> Error {
        Error::Jit(e)
    }
}

/// Verifies `prog` as rbpf 0.4's verifier does.
pub fn verify(prog: &[u8]) -> Result<(), Error> {
    verifier::check(prog).map(drop)
}

/// `f` with this thread's [`Compiler`], made on the thread's first compile.
#[inline(always)]
fn with_thread_compiler(f: impl FnOnce(&Compiler) -> Result<(), Error>) -> Result<(), Error> {
    thread_local! {
        static COMPILER: std::cell::OnceCell<Compiler> = const { std::cell::OnceCell::new() };
    }
    COMPILER.with(|cell| {
        if cell.get().is_none() {
            let _ = cell.set(Compiler::new()?);
        }
        f(cell.get().expect("set above"))
    })
}

/// A verified program, its helpers and, once compiled, its trace. It borrows the program,
/// as rbpf's VMs do (a copy was a tenth of a 10-instruction program's compile).
pub struct EbpfVm<'a> {
    prog: &'a [u8],
    /// What the verifier found for the compiler.
    scan: scan::Plan,
    helpers: helper::Helpers,
    compiled: Option<Compiled>,
}

impl<'a> EbpfVm<'a> {
    /// Verifies `prog` (raw little-endian bytecode) as rbpf does.
    pub fn new(prog: &'a [u8]) -> Result<EbpfVm<'a>, Error> {
        let scan = verifier::check(prog)?;
        Ok(EbpfVm {
            prog,
            scan,
            helpers: helper::Helpers::default(),
            compiled: None,
        })
    }

    /// Registers helper `id` (replacing one of the same id): rbpf's `fn(r1, .., r5) -> r0`
    /// or a closure of that shape. Register helpers before compiling: a compiled trace
    /// calls the helpers registered when it was compiled.
    pub fn register_helper<F>(&mut self, id: u32, helper: F)
    where
        F: Fn(u64, u64, u64, u64, u64) -> u64 + Send + Sync + 'static,
    {
        self.helpers.insert(id, Helper::new(helper));
    }

    /// The program's bytecode.
    pub fn program(&self) -> &'a [u8] {
        self.prog
    }

    /// Compiles the program into a trace, with this thread's [`Compiler`] (made on the
    /// thread's first compile: its stencil tables and executable memory are built once, so a
    /// compile costs what the program costs).
    pub fn jit_compile(&mut self) -> Result<(), Error> {
        with_thread_compiler(|c| self.jit_compile_with(c))
    }

    /// Compiles the program with `compiler` (reuse one for many programs).
    pub fn jit_compile_with(&mut self, compiler: &Compiler) -> Result<(), Error> {
        compiler.compile_scanned(self.prog, &self.helpers, &self.scan, &mut self.compiled)
    }

    /// Runs the compiled program with `mem` (r1 points to it unless it is empty): rbpf's
    /// `EbpfVmRaw::execute_program`.
    pub fn execute_jit(&self, mem: &mut [u8]) -> Result<u64, Error> {
        self.execute_jit_mbuff(mem, &mut [])
    }

    /// Runs the compiled program with `mem` and a metadata buffer `mbuff` (r1 points to
    /// `mbuff` unless it is empty): rbpf's `EbpfVmMbuff::execute_program`.
    pub fn execute_jit_mbuff(&self, mem: &mut [u8], mbuff: &mut [u8]) -> Result<u64, Error> {
        self.compiled
            .as_ref()
            .ok_or(Error::NotCompiled)?
            .run(mem, mbuff)
    }

    /// The compiled trace's listing, if compiled by a compiler whose `JitOptions` ask for
    /// listings (see [`Compiled::listing`]).
    pub fn listing(&self) -> Option<&str> {
        self.compiled.as_ref()?.listing()
    }

    /// Runs the program with the reference interpreter.
    pub fn interpret(&self, mem: &mut [u8]) -> Result<u64, Error> {
        self.interpret_mbuff(mem, &mut [])
    }

    /// Runs the program with the reference interpreter, with a metadata buffer.
    pub fn interpret_mbuff(&self, mem: &mut [u8], mbuff: &mut [u8]) -> Result<u64, Error> {
        interp::run(self.prog, &self.helpers, mem, mbuff)
    }
}
