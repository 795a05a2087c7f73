//! The JIT: one trace per program, compiled in one pass over the instructions. Five eBPF
//! registers are pinned in machine registers for the whole trace (`choose_pins`), the others
//! live in the frame; each instruction becomes one instance of the stencil for its opcode and
//! the places of its registers (none for LE64, the identity, and the second half of an
//! LD_DW); jumps and calls name their destination as `Target::Instance`. Written only against
//! `cpjit-runtime`'s public API and the host's generated stencil crate.

use crate::insn::{decode, insn, AluOp, Cond, Kind, Width, STACK_SIZE};
use crate::{Error, Helper};
use cpjit_runtime::model::StencilSet;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target, Trace};
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
    pin_at: [u64; PINS],
}

/// Where an instance jumps.
#[derive(Clone, Copy)]
enum Dest {
    None,
    /// The first instance of instruction `n` (n = the program's length: `op_fell_off`).
    Insn(usize),
    /// The chain of `op_ret_case` instances that EXIT returns through.
    Returns,
    /// A load's or store's fault exit: the `k`th `op_oob_*` instance after the program.
    Fault(usize),
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
                    "PIN3_AT" => Slot::Pin(3),
                    "PIN4_AT" => Slot::Pin(4),
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

/// How many eBPF registers live in machine registers (templates/include/ops.h: slots 0..4;
/// place 5 is the frame).
pub const PINS: usize = 5;
const FRAME: usize = PINS;

/// The slot of the pinned register of each rank (`Compiler::compile_pinned`): slot 2 (c2,
/// x86-64's `rdx`, which `mul` and `div` clobber) holds the least used of the five.
const SLOT_OF_RANK: [usize; PINS] = [0, 1, 3, 4, 2];

/// The eBPF registers to pin, most used first: an instruction inside a loop (under a
/// backward jump) counts 16 times per loop.
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
    regs.truncate(PINS);
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
    /// [opcode][place of dst][place of src] (a place: pinned slot 0..4, or 5 the frame).
    by_opcode: Vec<[[Option<usize>; PINS + 1]; PINS + 1]>,
    /// [BE][width 16, 32, 64][place of dst].
    end: [[[Option<usize>; PINS + 1]; 3]; 2],
    enter: usize,
    call_helper: usize,
    call_local: usize,
    unknown_helper: usize,
    ret_case: usize,
    fell_off: usize,
    invalid: usize,
    oob_load: usize,
    oob_store: usize,
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
            call_helper: stencils.get("op_call_helper")?,
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

    /// Compiles a verified program (see [`crate::verify`]) calling `helpers`.
    /// The eBPF registers kept in machine registers are the five most used ones (see
    /// [`Compiler::compile_pinned`]).
    pub fn compile(&self, prog: &[u8], helpers: &HashMap<u32, Helper>) -> Result<Compiled, Error> {
        self.compile_pinned(prog, helpers, &choose_pins(prog))
    }

    /// Compiles a verified program keeping the eBPF registers `pins` (at most five distinct
    /// ones of r0..r10, most used first: the last of five goes to the slot `mul` and `div`
    /// clobber on x86-64) in machine registers and the others in the frame.
    pub fn compile_pinned(
        &self,
        prog: &[u8],
        helpers: &HashMap<u32, Helper>,
        pins: &[u8],
    ) -> Result<Compiled, Error> {
        assert!(
            pins.len() <= PINS
                && pins.iter().all(|&r| r <= 10)
                && (0..pins.len()).all(|i| !pins[..i].contains(&pins[i])),
            "at most five distinct registers r0..r10 can be pinned, not {pins:?}"
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
        let mut place = [FRAME; 16];
        let mut pin_at = [11 * 8u64; PINS];
        for (rank, &r) in pins.iter().enumerate() {
            let k = SLOT_OF_RANK[rank];
            place[usize::from(r)] = k;
            pin_at[k] = u64::from(r) * 8;
        }
        let sync = Operands {
            pin_at,
            ..Operands::default()
        };

        // The instance numbers first: the first instance of each instruction (none for LE64
        // and the second half of an LD_DW), then after the program op_fell_off, the return
        // chain (one op_ret_case per local call, then op_invalid) and the loads' and stores'
        // fault exits. Instance 0 is the shim, 1 the entry op that loads the pinned registers.
        let mut first = vec![0usize; n + 1];
        let mut next = 2;
        let mut calls = 0;
        for i in 0..n {
            first[i] = next;
            let ins = insn(prog, i);
            next += match decode(ins.opc) {
                _ if second_half[i] => usize::from(call_target[i]),
                Some(Kind::End { to_be: false }) if ins.imm == 64 => 0,
                Some(Kind::Call) if ins.src == 1 => {
                    calls += 1;
                    1
                }
                _ => 1,
            };
        }
        first[n] = next;
        let returns = next + 1;
        let fault_base = returns + calls + 1;

        // One pass, pushing each instance as it comes; the return chain and the fault exits
        // are pushed after the program.
        let mut out = Emit {
            trace: self.jit.trace(),
            stencils: &self.stencils,
            operands: Vec::with_capacity(8),
            first: &first,
            returns,
            fault_base,
        };
        let entry = out.trace.push_shim()?;
        out.push(&Item {
            stencil: t.enter,
            ops: sync,
            dest: Dest::None,
        })?;
        let mut sites = Vec::new();
        let mut faults: Vec<Item> = Vec::new();
        for i in 0..n {
            let ins = insn(prog, i);
            if second_half[i] {
                if call_target[i] {
                    out.push(&Item {
                        stencil: t.invalid,
                        ops: Operands {
                            idx: i as u64,
                            ..sync
                        },
                        dest: Dest::None,
                    })?;
                }
                continue;
            }
            let kind = decode(ins.opc).expect("a verified program");
            let (dreg, sreg) = registers(kind, ins.dst, ins.src);
            let d = dreg.map_or(FRAME, |r| place[usize::from(r)]);
            let s = sreg.map_or(FRAME, |r| place[usize::from(r)]);
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
                Kind::Ldx(w) | Kind::St(w) | Kind::Stx(w) => {
                    let (stencil, base) = match kind {
                        Kind::Ldx(_) => (t.oob_load, ins.src),
                        _ => (t.oob_store, ins.dst),
                    };
                    faults.push(Item {
                        stencil,
                        ops: Operands {
                            dst_at: u64::from(base) * 8,
                            imm: w.bytes() as u64,
                            ..ops
                        },
                        dest: Dest::None,
                    });
                    (by_opcode, Dest::Fault(faults.len() - 1))
                }
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
            out.push(&Item { stencil, ops, dest })?;
        }
        out.push(&Item {
            stencil: t.fell_off,
            ops: Operands {
                idx: n as u64,
                ..sync
            },
            dest: Dest::None,
        })?;
        for &site in &sites {
            out.push(&Item {
                stencil: t.ret_case,
                ops: Operands {
                    site: site as u64,
                    ..sync
                },
                dest: Dest::Insn(site),
            })?;
        }
        // The end of the return chain, never reached (every popped site is in it).
        out.push(&Item {
            stencil: t.invalid,
            ops: Operands {
                idx: n as u64,
                ..sync
            },
            dest: Dest::None,
        })?;
        for item in &faults {
            out.push(item)?;
        }
        Ok(Compiled {
            trace: out.trace.finish()?,
            entry,
            prog: prog.to_vec(),
        })
    }
}

/// Pushes planned instances into a trace, their jumps resolved by instance number.
struct Emit<'a, 'j, 's> {
    trace: cpjit_runtime::TraceBuilder<'j, 's>,
    stencils: &'a Stencils,
    operands: Vec<u64>,
    first: &'a [usize],
    returns: usize,
    fault_base: usize,
}

impl Emit<'_, '_, '_> {
    fn push(&mut self, item: &Item) -> Result<(), Error> {
        let o = &item.ops;
        self.operands.clear();
        self.operands.extend(
            self.stencils.slots[item.stencil]
                .iter()
                .map(|slot| match slot {
                    Slot::DstAt => o.dst_at,
                    Slot::SrcAt => o.src_at,
                    Slot::Imm => o.imm,
                    Slot::Off => o.off,
                    Slot::Idx => o.idx,
                    Slot::Site => o.site,
                    Slot::Value => o.value,
                    Slot::Fn => o.fun,
                    Slot::Pin(k) => o.pin_at[*k],
                }),
        );
        let instance = |k: usize| Target::Instance(InstanceId::from_index(k));
        let target = match item.dest {
            Dest::None => None,
            Dest::Insn(i) => Some(instance(self.first[i])),
            Dest::Returns => Some(instance(self.returns)),
            Dest::Fault(k) => Some(instance(self.fault_base + k)),
        };
        match target {
            Some(t) if self.stencils.jumps[item.stencil] => {
                self.trace.push(item.stencil, &self.operands, &[t])?
            }
            _ => self.trace.push(item.stencil, &self.operands, &[])?,
        };
        Ok(())
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
