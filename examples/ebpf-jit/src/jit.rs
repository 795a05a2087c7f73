//! The JIT: one trace per program, compiled in one pass over the instructions. Each
//! instruction becomes one stencil instance (none for LE64, the identity, and the second
//! half of an LD_DW); jumps and calls name their destination as `Target::Instance`.
//! Written only against `cpjit-runtime`'s public API and the host's generated stencil crate.

use crate::insn::{decode, insn, AluOp, Cond, Kind, Width, STACK_SIZE};
use crate::{Error, Helper};
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, Target, Trace};
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
    r: [u64; 11],
    lo: [u64; 3],
    lim: [[u64; 4]; 3],
    depth: u64,
    ret_site: u64,
    fault_insn: u64,
    fault_addr: u64,
    fault_len: u64,
    calls: [[u64; 5]; crate::MAX_CALL_DEPTH],
}

/// `void ebpf_call_helper(struct cpjit_frame *, uint64_t fn)`: r0 = fn(r1, .., r5).
extern "C" fn ebpf_call_helper(frame: *mut Frame, helper: u64) {
    // SAFETY: `helper` is a `Helper` the compiler put into the trace as an operand
    // (`Compiler::compile`); fn pointers and usize have the same size.
    let helper: Helper = unsafe { std::mem::transmute::<usize, Helper>(helper as usize) };
    // SAFETY: only traces run by `Compiled::run` call this, with the frame it passes.
    let f = unsafe { &mut *frame };
    f.r[0] = helper(f.r[1], f.r[2], f.r[3], f.r[4], f.r[5]);
}

/// The helpers the template set may call (`allowed_symbols` in its manifest).
fn resolve(symbol: &str) -> Option<u64> {
    (symbol == "ebpf_call_helper")
        .then_some(ebpf_call_helper as extern "C" fn(*mut Frame, u64) as usize as u64)
}

/// The operands a stencil may take, by name.
#[derive(Clone, Copy)]
enum Slot {
    DstAt,
    SrcAt,
    Imm,
    Off,
    Idx,
    Site,
    Value,
    Fn,
}

/// The values of one instance's operands.
#[derive(Clone, Copy, Default)]
struct Operands {
    dst_at: u64,
    src_at: u64,
    imm: u64,
    off: u64,
    idx: u64,
    site: u64,
    value: u64,
    fun: u64,
}

/// Where an instance jumps.
#[derive(Clone, Copy)]
enum Dest {
    None,
    /// The first instance of instruction `n` (n = the program's length: `op_fell_off`).
    Insn(usize),
    /// The chain of `op_ret_case` instances that EXIT returns through.
    Returns,
}

/// Stencil indices, looked up once, and each stencil's operand order.
struct Stencils {
    slots: Vec<Vec<Slot>>,
    by_name: HashMap<&'static str, usize>,
}

impl Stencils {
    fn find(set: &'static StencilSet<'static>) -> Result<Stencils, Error> {
        let mut slots = Vec::new();
        let mut by_name = HashMap::new();
        for (i, s) in set.stencils.iter().enumerate() {
            let mut v = Vec::new();
            for &name in s.operands {
                v.push(match name {
                    "DST_AT" => Slot::DstAt,
                    "SRC_AT" => Slot::SrcAt,
                    "IMM" => Slot::Imm,
                    "OFF" => Slot::Off,
                    "IDX" => Slot::Idx,
                    "SITE" => Slot::Site,
                    "VALUE" => Slot::Value,
                    "FN" => Slot::Fn,
                    _ => {
                        return Err(Error::Jit(cpjit_runtime::Error::UnknownStencilName {
                            name: format!("{} (operand {name})", s.name),
                        }))
                    }
                });
            }
            slots.push(v);
            by_name.insert(s.name, i);
        }
        Ok(Stencils { slots, by_name })
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
        Kind::Call if src == 0 => "op_call_helper".into(),
        Kind::Call => "op_call_local".into(),
        Kind::Exit => "op_exit".into(),
        Kind::Xadd | Kind::TailCall => "op_invalid".into(),
    })
}

/// Compiles eBPF programs into traces; one per process is enough (traces share its
/// executable memory).
pub struct Compiler {
    jit: Jit<'static>,
    stencils: Stencils,
    /// Stencil indices, looked up once.
    table: Table,
}

/// The stencil of each opcode (for CALL: of a helper call), LE/BE by width (16, 32, 64;
/// `None`: no instance), and the ops no opcode names.
struct Table {
    by_opcode: [Option<usize>; 256],
    end: [[Option<usize>; 3]; 2],
    call_local: usize,
    unknown_helper: usize,
    ret_case: usize,
    fell_off: usize,
    invalid: usize,
}

/// A compiled program.
pub struct Compiled {
    trace: Trace,
    entry: InstanceId,
    /// The program, to name what a faulting instruction was.
    prog: Vec<u8>,
}

/// One planned instance.
struct Item {
    stencil: usize,
    ops: Operands,
    dest: Dest,
}

impl Compiler {
    /// A compiler over the host's stencil set.
    pub fn new() -> Result<Compiler, Error> {
        Compiler::with_set(HOST_SET)
    }

    /// A compiler over `set` (it must be runnable on this host).
    pub fn with_set(set: &'static StencilSet<'static>) -> Result<Compiler, Error> {
        let stencils = Stencils::find(set)?;
        let by = |kind: Kind, imm: i32, src: u8| -> Result<Option<usize>, Error> {
            stencil_name(kind, imm, src)
                .map(|name| stencils.get(&name))
                .transpose()
        };
        let mut by_opcode = [None; 256];
        for opc in 0..=255u8 {
            match decode(opc) {
                // By width, below.
                None | Some(Kind::End { .. }) => {}
                Some(kind) => by_opcode[usize::from(opc)] = by(kind, 0, 0)?,
            }
        }
        let mut end = [[None; 3]; 2];
        for (b, to_be) in [false, true].into_iter().enumerate() {
            for (w, imm) in [16, 32, 64].into_iter().enumerate() {
                end[b][w] = by(Kind::End { to_be }, imm, 0)?;
            }
        }
        let table = Table {
            by_opcode,
            end,
            call_local: stencils.get("op_call_local")?,
            unknown_helper: stencils.get("op_unknown_helper")?,
            ret_case: stencils.get("op_ret_case")?,
            fell_off: stencils.get("op_fell_off")?,
            invalid: stencils.get("op_invalid")?,
        };
        Ok(Compiler {
            jit: Jit::new(set, resolve)?,
            stencils,
            table,
        })
    }

    /// Compiles a verified program (see [`crate::verify`]) calling `helpers`.
    pub fn compile(&self, prog: &[u8], helpers: &HashMap<u32, Helper>) -> Result<Compiled, Error> {
        let n = prog.len() / 8;
        let t = &self.table;
        // Local call targets that are the second half of an LD_DW get an op_invalid.
        let mut second_half = vec![false; n];
        let mut call_target = vec![false; n];
        let mut i = 0;
        while i < n {
            let ins = insn(prog, i);
            if ins.opc == 0x18 && i + 1 < n {
                second_half[i + 1] = true;
                i += 1;
            } else if ins.opc == 0x85 && ins.src == 1 {
                let to = (i as i64 + 1 + i64::from(ins.imm)) as usize;
                call_target[to] = true;
            }
            i += 1;
        }

        // One pass: the instances of each instruction, and the first one of each.
        let mut items: Vec<Item> = Vec::with_capacity(n + 2);
        let mut first = vec![0usize; n + 1];
        let mut sites = Vec::new();
        for i in 0..n {
            first[i] = items.len();
            let ins = insn(prog, i);
            if second_half[i] {
                if call_target[i] {
                    items.push(Item {
                        stencil: t.invalid,
                        ops: Operands {
                            idx: i as u64,
                            ..Operands::default()
                        },
                        dest: Dest::None,
                    });
                }
                continue;
            }
            let kind = decode(ins.opc).expect("a verified program");
            let mut ops = Operands {
                dst_at: u64::from(ins.dst) * 8,
                src_at: u64::from(ins.src) * 8,
                imm: ins.imm as i64 as u64,
                off: ins.off as i64 as u64,
                idx: i as u64,
                ..Operands::default()
            };
            let jump = || Dest::Insn((i as i64 + 1 + i64::from(ins.off)) as usize);
            let (stencil, dest) = match kind {
                Kind::LdDw => {
                    let hi = insn(prog, i + 1).imm as u32;
                    ops.value = u64::from(ins.imm as u32) | (u64::from(hi) << 32);
                    (t.by_opcode[usize::from(ins.opc)], Dest::None)
                }
                Kind::Ja | Kind::Jmp { .. } => (t.by_opcode[usize::from(ins.opc)], jump()),
                Kind::Call if ins.src == 0 => match helpers.get(&(ins.imm as u32)) {
                    Some(&h) => {
                        ops.fun = h as usize as u64;
                        (t.by_opcode[usize::from(ins.opc)], Dest::None)
                    }
                    None => (Some(t.unknown_helper), Dest::None),
                },
                Kind::Call => {
                    ops.site = (i + 1) as u64;
                    sites.push(i + 1);
                    let callee = (i as i64 + 1 + i64::from(ins.imm)) as usize;
                    (Some(t.call_local), Dest::Insn(callee))
                }
                Kind::Exit => (t.by_opcode[usize::from(ins.opc)], Dest::Returns),
                Kind::End { to_be } => {
                    let w = match ins.imm {
                        16 => 0,
                        32 => 1,
                        _ => 2,
                    };
                    (t.end[usize::from(to_be)][w], Dest::None)
                }
                _ => (t.by_opcode[usize::from(ins.opc)], Dest::None),
            };
            // LE64 is the identity: no instance.
            let Some(stencil) = stencil else { continue };
            items.push(Item { stencil, ops, dest });
        }
        first[n] = items.len();
        items.push(Item {
            stencil: t.fell_off,
            ops: Operands {
                idx: n as u64,
                ..Operands::default()
            },
            dest: Dest::None,
        });
        let returns = items.len();
        for &site in &sites {
            items.push(Item {
                stencil: t.ret_case,
                ops: Operands {
                    site: site as u64,
                    ..Operands::default()
                },
                dest: Dest::Insn(site),
            });
        }
        // The end of the return chain, never reached (every popped site is in it).
        items.push(Item {
            stencil: t.invalid,
            ops: Operands {
                idx: n as u64,
                ..Operands::default()
            },
            dest: Dest::None,
        });

        // Instance k + 1 is item k (the shim is instance 0).
        let instance = |item: usize| Target::Instance(InstanceId::from_index(item + 1));
        let mut trace = self.jit.trace();
        let entry = trace.push_shim()?;
        let mut operands = Vec::with_capacity(4);
        for item in &items {
            operands.clear();
            for slot in &self.stencils.slots[item.stencil] {
                let o = &item.ops;
                operands.push(match slot {
                    Slot::DstAt => o.dst_at,
                    Slot::SrcAt => o.src_at,
                    Slot::Imm => o.imm,
                    Slot::Off => o.off,
                    Slot::Idx => o.idx,
                    Slot::Site => o.site,
                    Slot::Value => o.value,
                    Slot::Fn => o.fun,
                });
            }
            let target = match item.dest {
                Dest::None => None,
                Dest::Insn(i) => Some(instance(first[i])),
                Dest::Returns => Some(instance(returns)),
            };
            match target {
                Some(t) => trace.push(item.stencil, &operands, &[t])?,
                None => trace.push(item.stencil, &operands, &[])?,
            };
        }
        Ok(Compiled {
            trace: trace.finish()?,
            entry,
            prog: prog.to_vec(),
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
        // An access of 1 << k bytes at addr fits region i iff addr - lo < lim[i][k].
        let lim = |lo: u64, hi: u64| [0u32, 1, 2, 3].map(|k| (hi - lo + 1).saturating_sub(1 << k));
        let mut frame = Frame {
            r: [0; 11],
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
        // SAFETY: the trace was stitched from this crate's template set, whose ops read the
        // frame as `Frame` and touch memory only inside [lo, hi) of its three regions
        // (checked before every access); the stack, mem and mbuff outlive the call.
        let status = unsafe {
            self.trace.entry_fn(self.entry)(
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
