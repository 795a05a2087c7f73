//! The JIT: one trace per program. Five eBPF registers are pinned in machine registers for
//! the whole trace (the most used, `emit::Scan::pins`), the others live in the frame; each
//! instruction becomes one instance of the stencil for its opcode and the places of its
//! registers (none for LE64, the identity, and the second half of an LD_DW); jumps and calls
//! name their destination as `Target::Instance`. This module holds the frame, the helper
//! trampoline, the stencil tables and running; `emit` compiles. Written only against
//! `cpjit-runtime`'s public API and the host's generated stencil crate.

use crate::emit;
use crate::insn::{decode, AluOp, Cond, Kind, Width, STACK_SIZE};
use crate::{Error, Helper};
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Trace};
use std::collections::HashMap;
use std::ffi::c_void;

/// The generated stencil set this process can run.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &ebpf_stencils_x86_64_unknown_linux_gnu::SET;
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
pub static HOST_SET: &StencilSet<'static> = &ebpf_stencils_aarch64_unknown_linux_gnu::SET;

/// `struct cpjit_frame` of `templates/include/ebpf.h`.
#[repr(C)]
struct Frame {
    /// r0..r10, then a scratch word (the home of an unused pinned slot).
    r: [u64; 12],
    lo: [u64; 3],
    lim: [[u64; 4]; 3],
    depth: u64,
    ret_site: u64,
    fault_insn: u64,
    fault_addr: u64,
    fault_len: u64,
    calls: [[u64; 5]; crate::MAX_CALL_DEPTH],
}

/// `uint64_t ebpf_call_helper(uint64_t fn, uint64_t r1, .., uint64_t r5)`: r0 = fn(r1, .., r5)
/// (the helper has Rust's ABI, which C cannot call).
extern "C" fn ebpf_call_helper(helper: u64, r1: u64, r2: u64, r3: u64, r4: u64, r5: u64) -> u64 {
    // SAFETY: `helper` is a `Helper` the compiler put into the trace as an operand
    // (`Compiler::compile_pinned`); fn pointers and usize have the same size.
    let helper: Helper = unsafe { std::mem::transmute::<usize, Helper>(helper as usize) };
    helper(r1, r2, r3, r4, r5)
}

/// The helpers the template set may call (`allowed_symbols` in its manifest).
fn resolve(symbol: &str) -> Option<u64> {
    (symbol == "ebpf_call_helper").then_some(
        ebpf_call_helper as extern "C" fn(u64, u64, u64, u64, u64, u64) -> u64 as usize as u64,
    )
}

/// Stencil indices, looked up once, and each stencil's operands.
pub(crate) struct Stencils {
    /// Per stencil, where each operand's value is in an instruction's values
    /// (`emit::value_index`).
    pub(crate) picks: Vec<Box<[u8]>>,
    /// Whether the stencil has its jump target (a compare of a register with itself folds
    /// to always or never).
    pub(crate) jumps: Vec<bool>,
    by_name: HashMap<&'static str, usize>,
}

impl Stencils {
    fn find(set: &'static StencilSet<'static>) -> Result<Stencils, Error> {
        let mut picks = Vec::new();
        let mut jumps = Vec::new();
        let mut by_name = HashMap::new();
        for (i, s) in set.stencils.iter().enumerate() {
            let mut v = Vec::new();
            for &name in s.operands {
                v.push(emit::value_index(name).ok_or_else(|| {
                    Error::Jit(cpjit_runtime::Error::UnknownStencilName {
                        name: format!("{} (operand {name})", s.name),
                    })
                })?);
            }
            picks.push(v.into_boxed_slice());
            jumps.push(!s.targets.is_empty());
            by_name.insert(s.name, i);
        }
        Ok(Stencils {
            picks,
            jumps,
            by_name,
        })
    }

    fn get(&self, name: &str) -> Result<usize, Error> {
        self.by_name.get(name).copied().ok_or_else(|| {
            Error::Jit(cpjit_runtime::Error::UnknownStencilName {
                name: name.to_string(),
            })
        })
    }
}

fn alu_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "add",
        AluOp::Sub => "sub",
        AluOp::Mul => "mul",
        AluOp::Div => "div",
        AluOp::Or => "or",
        AluOp::And => "and",
        AluOp::Lsh => "lsh",
        AluOp::Rsh => "rsh",
        AluOp::Neg => "neg",
        AluOp::Mod => "mod",
        AluOp::Xor => "xor",
        AluOp::Mov => "mov",
        AluOp::Arsh => "arsh",
    }
}

fn cond_name(c: Cond) -> &'static str {
    match c {
        Cond::Eq => "jeq",
        Cond::Gt => "jgt",
        Cond::Ge => "jge",
        Cond::Set => "jset",
        Cond::Ne => "jne",
        Cond::Sgt => "jsgt",
        Cond::Sge => "jsge",
        Cond::Lt => "jlt",
        Cond::Le => "jle",
        Cond::Slt => "jslt",
        Cond::Sle => "jsle",
    }
}

fn width_name(w: Width) -> &'static str {
    match w {
        Width::B => "b",
        Width::H => "h",
        Width::W => "w",
        Width::Dw => "dw",
    }
}

/// The stencil name of an instruction of `kind` (`None`: no instance).
fn stencil_name(kind: Kind, imm: i32, src: u8) -> Option<String> {
    let reg = |r: bool| if r { "reg" } else { "imm" };
    Some(match kind {
        Kind::Alu {
            op: AluOp::Neg,
            wide,
            ..
        } => format!("op_neg{}", if wide { 64 } else { 32 }),
        Kind::Alu { op, wide, reg: r } => format!(
            "op_{}{}_{}",
            alu_name(op),
            if wide { 64 } else { 32 },
            reg(r)
        ),
        Kind::End { to_be: false } if imm == 64 => return None,
        Kind::End { to_be } => format!("op_{}{imm}", if to_be { "be" } else { "le" }),
        Kind::LdDw => "op_lddw".into(),
        Kind::LdAbs(w) => format!("op_ldabs{}", width_name(w)),
        Kind::LdInd(w) => format!("op_ldind{}", width_name(w)),
        Kind::Ldx(w) => format!("op_ldx{}", width_name(w)),
        Kind::St(w) => format!("op_st{}", width_name(w)),
        Kind::Stx(w) => format!("op_stx{}", width_name(w)),
        Kind::Ja => "op_ja".into(),
        Kind::Jmp { cond, wide, reg: r } => format!(
            "op_{}{}_{}",
            cond_name(cond),
            if wide { "" } else { "32" },
            reg(r)
        ),
        Kind::Call if src == 0 => "op_call_helper".into(), // family `rr`: r0, r1
        Kind::Call => "op_call_local".into(),
        Kind::Exit => "op_exit".into(),
        Kind::Xadd | Kind::TailCall => "op_invalid".into(),
    })
}

/// Which family an instruction's stencils belong to (templates/manifest.toml).
enum Family {
    /// `rr`: a destination and a source register, each pinned or in the frame.
    Rr,
    /// `r`: a destination register only.
    R,
    /// A single op.
    None,
}

fn family_of(kind: Kind) -> Family {
    match kind {
        Kind::Alu { op: AluOp::Neg, .. } => Family::R,
        Kind::Alu { reg: true, .. }
        | Kind::Jmp { reg: true, .. }
        | Kind::Ldx(_)
        | Kind::Stx(_)
        | Kind::LdInd(_) => Family::Rr,
        Kind::Alu { .. }
        | Kind::Jmp { .. }
        | Kind::End { .. }
        | Kind::LdDw
        | Kind::St(_)
        | Kind::LdAbs(_) => Family::R,
        Kind::Ja | Kind::Call | Kind::Exit | Kind::Xadd | Kind::TailCall => Family::None,
    }
}

/// A helper call's stencil is the `rr` member of the places of r0 (D) and r1 (S).
const HELPER_REGS: (u8, u8) = (0, 1);

/// The (destination, source) registers an instruction names, as its family uses them
/// (LD_ABS and LD_IND write r0).
pub(crate) fn registers(kind: Kind, dst: u8, src: u8) -> (Option<u8>, Option<u8>) {
    match (family_of(kind), kind) {
        (_, Kind::LdAbs(_)) => (Some(0), None),
        (_, Kind::LdInd(_)) => (Some(0), Some(src)),
        (_, Kind::Call) if src == 0 => (Some(HELPER_REGS.0), Some(HELPER_REGS.1)),
        (Family::Rr, _) => (Some(dst), Some(src)),
        (Family::R, _) => (Some(dst), None),
        (Family::None, _) => (None, None),
    }
}

/// How many eBPF registers live in machine registers (templates/include/ops.h: slots 0..4;
/// place 5 is the frame).
pub const PINS: usize = 5;
pub(crate) const FRAME: usize = PINS;

/// The slot of the pinned register of each rank (`Compiler::compile_pinned`): slot 2 (c2,
/// x86-64's `rdx`, which `mul` and `div` clobber) holds the least used of the five.
pub(crate) const SLOT_OF_RANK: [usize; PINS] = [0, 1, 3, 4, 2];

/// Compiles eBPF programs into traces; one per process is enough (traces share its
/// executable memory).
pub struct Compiler {
    pub(crate) jit: Jit<'static>,
    pub(crate) stencils: Stencils,
    /// Stencil indices, looked up once.
    pub(crate) table: Table,
}

/// The stencil of each opcode (for CALL: of a helper call), LE/BE by width (16, 32, 64;
/// `None`: no instance), and the ops no opcode names.
pub(crate) struct Table {
    /// [opcode][place of dst][place of src] (a place: pinned slot 0..4, or 5 the frame).
    pub(crate) by_opcode: Vec<[[Option<usize>; PINS + 1]; PINS + 1]>,
    /// [BE][width 16, 32, 64][place of dst].
    pub(crate) end: [[[Option<usize>; PINS + 1]; 3]; 2],
    pub(crate) enter: usize,
    /// [place of r0][place of r1].
    pub(crate) call_helper: [[usize; PINS + 1]; PINS + 1],
    pub(crate) call_local: usize,
    pub(crate) unknown_helper: usize,
    pub(crate) ret_case: usize,
    pub(crate) fell_off: usize,
    pub(crate) invalid: usize,
    pub(crate) oob_load: usize,
    pub(crate) oob_store: usize,
}

/// A compiled program.
pub struct Compiled {
    pub(crate) trace: Trace,
    pub(crate) entry: InstanceId,
    /// The program, to name what a faulting instruction was.
    pub(crate) prog: Vec<u8>,
}

impl Compiler {
    /// A compiler over the host's stencil set.
    pub fn new() -> Result<Compiler, Error> {
        Compiler::with_set(HOST_SET)
    }

    /// A compiler over `set` (it must be runnable on this host).
    pub fn with_set(set: &'static StencilSet<'static>) -> Result<Compiler, Error> {
        Compiler::with_options(set, JitOptions::default())
    }

    /// A compiler over `set` whose executable memory is made with `options` (e.g.
    /// `CodeWrites::PersistentAlias` on Linux: no system call per compile, at the price the
    /// kit's documentation of it names).
    pub fn with_options(
        set: &'static StencilSet<'static>,
        options: JitOptions,
    ) -> Result<Compiler, Error> {
        let stencils = Stencils::find(set)?;
        // Family members are named op_<element>_3_<D>[_<S>] (templates/manifest.toml).
        let by = |kind: Kind, imm: i32, d: usize, s: usize| -> Result<Option<usize>, Error> {
            let Some(name) = stencil_name(kind, imm, 0) else {
                return Ok(None);
            };
            let name = match family_of(kind) {
                Family::Rr => format!("{name}_3_{d}_{s}"),
                Family::R => format!("{name}_3_{d}"),
                Family::None => name,
            };
            stencils.get(&name).map(Some)
        };
        let mut by_opcode = vec![[[None; PINS + 1]; PINS + 1]; 256];
        for opc in 0..=255u8 {
            match decode(opc) {
                // By width, below; CALL by its kind in `compile`.
                None | Some(Kind::End { .. } | Kind::Call) => {}
                Some(kind) => {
                    for (d, row) in by_opcode[usize::from(opc)].iter_mut().enumerate() {
                        for (s, entry) in row.iter_mut().enumerate() {
                            *entry = by(kind, 0, d, s)?;
                        }
                    }
                }
            }
        }
        let mut end = [[[None; PINS + 1]; 3]; 2];
        for (b, to_be) in [false, true].into_iter().enumerate() {
            for (w, imm) in [16, 32, 64].into_iter().enumerate() {
                for (d, entry) in end[b][w].iter_mut().enumerate() {
                    *entry = by(Kind::End { to_be }, imm, d, 0)?;
                }
            }
        }
        let table = Table {
            by_opcode,
            end,
            enter: stencils.get("op_enter")?,
            call_helper: call_helper_table(&stencils)?,
            call_local: stencils.get("op_call_local")?,
            unknown_helper: stencils.get("op_unknown_helper")?,
            ret_case: stencils.get("op_ret_case")?,
            fell_off: stencils.get("op_fell_off")?,
            invalid: stencils.get("op_invalid")?,
            oob_load: stencils.get("op_oob_load")?,
            oob_store: stencils.get("op_oob_store")?,
        };
        Ok(Compiler {
            jit: Jit::with_options(set, resolve, options)?,
            stencils,
            table,
        })
    }
}

/// The helper call's stencil by the places of r0 and r1 (family `rr`).
fn call_helper_table(stencils: &Stencils) -> Result<[[usize; PINS + 1]; PINS + 1], Error> {
    let mut table = [[0; PINS + 1]; PINS + 1];
    for (d, row) in table.iter_mut().enumerate() {
        for (s, entry) in row.iter_mut().enumerate() {
            *entry = stencils.get(&format!("op_call_helper_3_{d}_{s}"))?;
        }
    }
    Ok(table)
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
        // An access of 1 << k bytes at addr fits region i iff addr - lo < lim[i][k].
        let lim = |lo: u64, hi: u64| [0u32, 1, 2, 3].map(|k| (hi - lo + 1).saturating_sub(1 << k));
        let mut frame = Frame {
            r: [0; 12],
            lo: [stack_lo, mem_lo, mbuff_lo],
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
        };
        frame.r[10] = stack_hi;
        if mbuff_hi > mbuff_lo {
            frame.r[1] = mbuff_lo;
        } else if mem_hi > mem_lo {
            frame.r[1] = mem_lo;
        }
        let entry = self
            .trace
            .entry_fn(self.entry)
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
                id: crate::insn(&self.prog, insn).imm as u32,
            }),
            4 => Err(Error::CallDepth { insn }),
            5 => Err(Error::FellOffEnd { insn }),
            6 => Err(Error::InvalidInstruction { insn }),
            _ => panic!("trace returned unknown status {status}"),
        }
    }

    /// The machine code of the trace (for size figures and debugging).
    pub fn code_bytes(&self) -> &[u8] {
        self.trace.code_bytes()
    }
}
