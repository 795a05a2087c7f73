//! The JIT: one trace per program. Five eBPF registers are pinned in machine registers for
//! the whole trace (the most used, `scan::Scan::pins`), the others live in the frame; each
//! instruction becomes one instance of the stencil for its opcode and the places of its
//! registers (`table`); jumps and calls name their destination as `Target::Instance`. This
//! module holds the frame, the helper trampoline, the compiler and running; `emit`
//! compiles. Written only against `cpjit-runtime`'s public API and the host's generated
//! stencil crate.

use crate::emit::OFF_BIAS;
use crate::insn::STACK_SIZE;
use crate::table::{Table, PINS};
use crate::Error;
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Trace};
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

/// The generated stencil set this process can run.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &ebpf_stencils_x86_64_unknown_linux_gnu::SET;
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &ebpf_stencils_aarch64_unknown_linux_gnu::SET;
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &ebpf_stencils_riscv64gc_unknown_linux_gnu::SET;

/// `struct cpjit_frame` of `templates/include/ebpf.h`.
#[repr(C)]
struct Frame {
    /// r0..r10, then a scratch word (the home of an unused pinned slot).
    r: [u64; 12],
    mem_lo: u64,
    /// `mem_lo + OFF_BIAS`.
    mem_biased: u64,
    /// Each region's start minus `mem_lo`.
    from_mem: [u64; 3],
    lim: [[u64; 4]; 3],
    depth: u64,
    ret_site: u64,
    fault_insn: u64,
    fault_addr: u64,
    fault_len: u64,
    calls: [[u64; 5]; crate::MAX_CALL_DEPTH],
    /// Where each pinned slot's register lives (its byte offset in the frame).
    pin_at: [u64; PINS],
}

/// The symbols the template set may call: none (helpers are operands, `crate::Helper`).
fn resolve(_: &str) -> Option<u64> {
    None
}

/// The slot of the pinned register of each rank (`Compiler::compile_pinned`): slot 2 (c2,
/// x86-64's `rdx`, which `mul` and `div` clobber) holds the least used of the five.
pub(crate) const SLOT_OF_RANK: [usize; PINS] = [0, 1, 3, 4, 2];

/// Compiles eBPF programs into traces; one per process is enough (traces share its
/// executable memory).
pub struct Compiler {
    pub(crate) jit: Jit<'static>,
    /// Stencil indices and operands, looked up once.
    pub(crate) table: Table,
}

/// A compiled program.
pub struct Compiled {
    pub(crate) trace: Trace,
    /// The register in each pinned slot (the frame's `pin_at` is eight times it).
    pub(crate) pinned: [u8; PINS],
    /// The state of the helpers with state that the trace calls (it holds pointers to it);
    /// boxed, so that a `Compiled` fits in 128 bytes, which a compile moves with a few
    /// vector stores instead of a `memcpy` call (a `Vec` is three words, the box one; only
    /// a program calling a helper with state allocates it).
    #[allow(clippy::box_collection)]
    pub(crate) _helpers: Option<Box<Vec<Arc<dyn Any + Send + Sync>>>>,
}

impl Compiler {
    /// A compiler over the host's stencil set.
    pub fn new() -> Result<Compiler, Error> {
        Compiler::with_set(HOST_SET)
    }

    /// A compiler over `set` (it must be runnable on this host), with
    /// [`Compiler::default_options`].
    pub fn with_set(set: &'static StencilSet<'static>) -> Result<Compiler, Error> {
        Compiler::with_options(set, Compiler::default_options())
    }

    /// The kit's default `JitOptions` but for `trap_freed_code`, which is off: a program
    /// is compiled about as often as it runs and its trace freed with the `EbpfVm`, and no
    /// pointer into a freed trace outlives it, so overwriting the freed code with traps (on
    /// Linux a second `pwrite` per compile, as long as compiling a 10-instruction program)
    /// buys nothing rbpf's JIT has: it frees its code to the heap as it is.
    pub fn default_options() -> JitOptions {
        JitOptions {
            trap_freed_code: false,
            ..JitOptions::default()
        }
    }

    /// A compiler over `set` whose executable memory is made with `options` (e.g.
    /// `CodeWrites::PersistentAlias` on Linux: no system call per compile, at the price the
    /// kit's documentation of it names).
    pub fn with_options(
        set: &'static StencilSet<'static>,
        options: JitOptions,
    ) -> Result<Compiler, Error> {
        let table = Table::new(set)?;
        Ok(Compiler {
            jit: Jit::with_options(set, resolve, options)?,
            table,
        })
    }
}

impl Compiled {
    /// Runs the program with `mem` and `mbuff` (rbpf's `EbpfVmMbuff::execute_program`).
    pub fn run(&self, mem: &mut [u8], mbuff: &mut [u8]) -> Result<u64, Error> {
        let mut stack = [0u8; STACK_SIZE];
        let region = |s: &mut [u8]| {
            let r = s.as_mut_ptr_range();
            (r.start as u64, r.end as u64)
        };
        let (stack_lo, stack_hi) = region(&mut stack);
        let (mem_lo, mem_hi) = region(mem);
        let (mbuff_lo, mbuff_hi) = region(mbuff);
        // An access of 1 << k bytes at addr fits region i iff addr - lo < lim[i][k]
        // (templates/include/ebpf.h: the ops compute addr - lo as addr - mem_lo - from_mem[i]).
        let lim = |lo: u64, hi: u64| [0u32, 1, 2, 3].map(|k| (hi - lo + 1).saturating_sub(1 << k));
        let mut frame = Frame {
            r: [0; 12],
            mem_lo,
            mem_biased: mem_lo.wrapping_add(OFF_BIAS),
            from_mem: [stack_lo, mem_lo, mbuff_lo].map(|lo| lo.wrapping_sub(mem_lo)),
            lim: [
                lim(stack_lo, stack_hi),
                lim(mem_lo, mem_hi),
                lim(mbuff_lo, mbuff_hi),
            ],
            depth: 0,
            ret_site: 0,
            fault_insn: 0,
            fault_addr: 0,
            fault_len: 0,
            calls: [[0; 5]; crate::MAX_CALL_DEPTH],
            pin_at: self.pinned.map(|r| u64::from(r) * 8),
        };
        frame.r[10] = stack_hi;
        if mbuff_hi > mbuff_lo {
            frame.r[1] = mbuff_lo;
        } else if mem_hi > mem_lo {
            frame.r[1] = mem_lo;
        }
        let entry = self
            .trace
            .entry_fn(InstanceId::from_index(0))
            .expect("compile pushes the set's shim first, so its entry is a C-ABI entry");
        // SAFETY: the trace was stitched from this crate's template set, whose ops read the
        // frame as `Frame` and touch memory only inside [lo, hi) of its three regions
        // (checked before every access); the stack, mem and mbuff outlive the call.
        let status = unsafe {
            entry(
                &mut frame as *mut Frame as *mut c_void,
                std::ptr::null_mut(),
            )
        };
        let insn = frame.fault_insn as usize;
        match status {
            0 => Ok(frame.r[0]),
            1 | 2 => Err(Error::OutOfBounds {
                insn,
                store: status == 2,
                addr: frame.fault_addr,
                len: frame.fault_len,
            }),
            3 => Err(Error::UnknownHelper {
                insn,
                id: frame.fault_addr as u32,
            }),
            4 => Err(Error::CallDepth { insn }),
            5 => Err(Error::FellOffEnd { insn }),
            6 => Err(Error::InvalidInstruction { insn }),
            _ => panic!("trace returned unknown status {status}"),
        }
    }

    /// The trace's listing (stencils, holes, code in hex) if the compiler's `JitOptions`
    /// asked for listings.
    pub fn listing(&self) -> Option<&str> {
        self.trace.listing()
    }

    /// The machine code of the trace (for size figures and debugging).
    pub fn code_bytes(&self) -> &[u8] {
        self.trace.code_bytes()
    }
}
