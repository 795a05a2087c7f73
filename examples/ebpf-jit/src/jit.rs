//! The JIT: one trace per program, compiled in one pass over the instructions. Three eBPF
//! registers are pinned in machine registers for the whole trace (`choose_pins`), the others
//! live in the frame; each instruction becomes one instance of the stencil for its opcode and
//! the places of its registers (none for LE64, the identity, and the second half of an
//! LD_DW); jumps and calls name their destination as `Target::Instance`. Written only against
//! `cpjit-runtime`'s public API and the host's generated stencil crate.

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
    Pin(usize),
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
    pin_at: [u64; 3],
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
    /// Whether the stencil has its jump target (a compare of a register with itself folds
    /// to always or never).
    jumps: Vec<bool>,
    by_name: HashMap<&'static str, usize>,
}

impl Stencils {
    fn find(set: &'static StencilSet<'static>) -> Result<Stencils, Error> {
        let mut slots = Vec::new();
        let mut jumps = Vec::new();
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
                    "PIN0_AT" => Slot::Pin(0),
                    "PIN1_AT" => Slot::Pin(1),
                    "PIN2_AT" => Slot::Pin(2),
                    _ => {
                        return Err(Error::Jit(cpjit_runtime::Error::UnknownStencilName {
                            name: format!("{} (operand {name})", s.name),
                        }))
                    }
                });
            }
            slots.push(v);
            jumps.push(!s.targets.is_empty());
            by_name.insert(s.name, i);
        }
        Ok(Stencils {
            slots,
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
        Kind::Call if src == 0 => "op_call_helper".into(),
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

/// The (destination, source) registers an instruction names, as its family uses them
/// (LD_ABS and LD_IND write r0).
fn registers(kind: Kind, dst: u8, src: u8) -> (Option<u8>, Option<u8>) {
    match (family_of(kind), kind) {
        (_, Kind::LdAbs(_)) => (Some(0), None),
        (_, Kind::LdInd(_)) => (Some(0), Some(src)),
        (Family::Rr, _) => (Some(dst), Some(src)),
        (Family::R, _) => (Some(dst), None),
        (Family::None, _) => (None, None),
    }
}

/// The eBPF registers to pin in the three cache registers: the most used, an instruction
/// inside a loop (under a backward jump) counting 16 times per loop.
fn choose_pins(prog: &[u8]) -> Vec<u8> {
    let n = prog.len() / 8;
    // Loop depth per instruction, by a difference array over backward-jump ranges.
    let mut delta = vec![0i64; n + 1];
    for i in 0..n {
        let ins = insn(prog, i);
        if matches!(decode(ins.opc), Some(Kind::Ja | Kind::Jmp { .. })) && ins.off < 0 {
            let to = (i as i64 + 1 + i64::from(ins.off)).max(0) as usize;
            delta[to] += 1;
            delta[i + 1] -= 1;
        }
    }
    let mut uses = [0u64; 11];
    let mut depth = 0i64;
    let mut i = 0;
    while i < n {
        depth += delta[i];
        let ins = insn(prog, i);
        let weight = 16u64.saturating_pow(depth.clamp(0, 8) as u32);
        if let Some(kind) = decode(ins.opc) {
            let (d, s) = registers(kind, ins.dst, ins.src);
            for r in [d, s].into_iter().flatten() {
                if let Some(u) = uses.get_mut(usize::from(r)) {
                    *u = u.saturating_add(weight);
                }
            }
        }
        i += 1;
    }
    let mut regs: Vec<u8> = (0..11).filter(|&r| uses[usize::from(r)] > 0).collect();
    regs.sort_by_key(|&r| (std::cmp::Reverse(uses[usize::from(r)]), r));
    regs.truncate(3);
    regs
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
    /// [opcode][place of dst][place of src] (a place: pinned slot 0..2, or 3 the frame).
    by_opcode: Vec<[[Option<usize>; 4]; 4]>,
    /// [BE][width 16, 32, 64][place of dst].
    end: [[[Option<usize>; 4]; 3]; 2],
    enter: usize,
    call_helper: usize,
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
        let mut by_opcode = vec![[[None; 4]; 4]; 256];
        for opc in 0..=255u8 {
            match decode(opc) {
                // By width, below; CALL by its kind in `compile`.
                None | Some(Kind::End { .. } | Kind::Call) => {}
                Some(kind) => {
                    for d in 0..4 {
                        for s in 0..4 {
                            by_opcode[usize::from(opc)][d][s] = by(kind, 0, d, s)?;
                        }
                    }
                }
            }
        }
        let mut end = [[[None; 4]; 3]; 2];
        for (b, to_be) in [false, true].into_iter().enumerate() {
            for (w, imm) in [16, 32, 64].into_iter().enumerate() {
                for d in 0..4 {
                    end[b][w][d] = by(Kind::End { to_be }, imm, d, 0)?;
                }
            }
        }
        let table = Table {
            by_opcode,
            end,
            enter: stencils.get("op_enter")?,
            call_helper: stencils.get("op_call_helper")?,
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
    /// The eBPF registers kept in machine registers are the three most used ones (see
    /// [`Compiler::compile_pinned`]).
    pub fn compile(&self, prog: &[u8], helpers: &HashMap<u32, Helper>) -> Result<Compiled, Error> {
        self.compile_pinned(prog, helpers, &choose_pins(prog))
    }

    /// Compiles a verified program keeping the eBPF registers `pins` (at most three distinct
    /// ones of r0..r10) in machine registers and the others in the frame.
    pub fn compile_pinned(
        &self,
        prog: &[u8],
        helpers: &HashMap<u32, Helper>,
        pins: &[u8],
    ) -> Result<Compiled, Error> {
        assert!(
            pins.len() <= 3
                && pins.iter().all(|&r| r <= 10)
                && (0..pins.len()).all(|i| !pins[..i].contains(&pins[i])),
            "at most three distinct registers r0..r10 can be pinned, not {pins:?}"
        );
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

        // The pinned registers, their slots and homes in the frame (r[11]: scratch).
        let mut place = [3usize; 16];
        let mut pin_at = [11 * 8u64; 3];
        for (k, &r) in pins.iter().enumerate() {
            place[usize::from(r)] = k;
            pin_at[k] = u64::from(r) * 8;
        }
        let sync = Operands {
            pin_at,
            ..Operands::default()
        };

        // One pass: the instances of each instruction, and the first one of each. The
        // first instance loads the pinned registers.
        let mut items: Vec<Item> = Vec::with_capacity(n + 3);
        items.push(Item {
            stencil: t.enter,
            ops: sync,
            dest: Dest::None,
        });
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
                            ..sync
                        },
                        dest: Dest::None,
                    });
                }
                continue;
            }
            let kind = decode(ins.opc).expect("a verified program");
            let (dreg, sreg) = registers(kind, ins.dst, ins.src);
            let d = dreg.map_or(3, |r| place[usize::from(r)]);
            let s = sreg.map_or(3, |r| place[usize::from(r)]);
            let mut ops = Operands {
                dst_at: u64::from(dreg.unwrap_or(0)) * 8,
                src_at: u64::from(sreg.unwrap_or(0)) * 8,
                imm: ins.imm as i64 as u64,
                off: ins.off as i64 as u64,
                idx: i as u64,
                ..sync
            };
            let by_opcode = t.by_opcode[usize::from(ins.opc)][d][s];
            let jump = || Dest::Insn((i as i64 + 1 + i64::from(ins.off)) as usize);
            let (stencil, dest) = match kind {
                Kind::LdDw => {
                    let hi = insn(prog, i + 1).imm as u32;
                    ops.value = u64::from(ins.imm as u32) | (u64::from(hi) << 32);
                    (by_opcode, Dest::None)
                }
                Kind::Ja | Kind::Jmp { .. } => (by_opcode, jump()),
                Kind::Call if ins.src == 0 => match helpers.get(&(ins.imm as u32)) {
                    Some(&h) => {
                        ops.fun = h as usize as u64;
                        (Some(t.call_helper), Dest::None)
                    }
                    None => (Some(t.unknown_helper), Dest::None),
                },
                Kind::Call => {
                    ops.site = (i + 1) as u64;
                    sites.push(i + 1);
                    let callee = (i as i64 + 1 + i64::from(ins.imm)) as usize;
                    (Some(t.call_local), Dest::Insn(callee))
                }
                Kind::Exit => (by_opcode, Dest::Returns),
                Kind::End { to_be } => {
                    let w = match ins.imm {
                        16 => 0,
                        32 => 1,
                        _ => 2,
                    };
                    (t.end[usize::from(to_be)][w][d], Dest::None)
                }
                _ => (by_opcode, Dest::None),
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
                ..sync
            },
            dest: Dest::None,
        });
        let returns = items.len();
        for &site in &sites {
            items.push(Item {
                stencil: t.ret_case,
                ops: Operands {
                    site: site as u64,
                    ..sync
                },
                dest: Dest::Insn(site),
            });
        }
        // The end of the return chain, never reached (every popped site is in it).
        items.push(Item {
            stencil: t.invalid,
            ops: Operands {
                idx: n as u64,
                ..sync
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
                    Slot::Pin(k) => o.pin_at[*k],
                });
            }
            let target = match item.dest {
                Dest::None => None,
                Dest::Insn(i) => Some(instance(first[i])),
                Dest::Returns => Some(instance(returns)),
            };
            match target {
                Some(t) if self.stencils.jumps[item.stencil] => {
                    trace.push(item.stencil, &operands, &[t])?
                }
                _ => trace.push(item.stencil, &operands, &[])?,
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
