//! Compiling one program: a scan of the bytecode (instance numbers, loop depth, which
//! registers to pin), then one pass pushing an instance per instruction. Short programs are
//! compiled about as often as they run, so the passes allocate three vectors and pick each
//! instance's operands by a per-stencil table of indices (`Stencils::picks`) into the
//! instruction's [`Values`].

use crate::insn::{decode, insn, Kind};
use crate::jit::{registers, Compiled, Compiler, Stencils, Table, FRAME, PINS, SLOT_OF_RANK};
use crate::{Error, Helper};
use cpjit_runtime::{InstanceId, Target, TraceBuilder};
use std::collections::HashMap;

/// Where an operand's value is in an instruction's [`Values`] (`Stencils::picks`).
pub(crate) const DST_AT: u8 = 0;
pub(crate) const SRC_AT: u8 = 1;
pub(crate) const IMM: u8 = 2;
pub(crate) const OFF: u8 = 3;
pub(crate) const IDX: u8 = 4;
pub(crate) const SITE: u8 = 5;
pub(crate) const VALUE: u8 = 6;
pub(crate) const FN: u8 = 7;
/// `PIN0_AT`; slot k's is `PIN_AT + k`.
pub(crate) const PIN_AT: u8 = 8;
/// How many values an instance's operands are picked from.
pub(crate) const VALUES: usize = PIN_AT as usize + PINS;
/// The values an instance's operands are picked from.
type Values = [u64; VALUES];

/// The value of operand `OFF` for offset `off`: a u16 holding `off + 0x8000`, which the ops
/// subtract again where it folds into a displacement (templates/include/ops.h, `OFF64`).
fn off_operand(off: i16) -> u64 {
    (i64::from(off) + 0x8000) as u64
}

/// The operand value index of an operand named `name` in the template set.
pub(crate) fn value_index(name: &str) -> Option<u8> {
    Some(match name {
        "DST_AT" => DST_AT,
        "SRC_AT" => SRC_AT,
        "IMM" => IMM,
        "OFF" => OFF,
        "IDX" => IDX,
        "SITE" => SITE,
        "VALUE" => VALUE,
        "FN" => FN,
        "PIN0_AT" => PIN_AT,
        "PIN1_AT" => PIN_AT + 1,
        "PIN2_AT" => PIN_AT + 2,
        "PIN3_AT" => PIN_AT + 3,
        "PIN4_AT" => PIN_AT + 4,
        _ => return None,
    })
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

/// The weight of a use under k backward jumps, k = 0..=8.
const LOOP_WEIGHT: [u64; 9] = [
    1,
    1 << 4,
    1 << 8,
    1 << 12,
    1 << 16,
    1 << 20,
    1 << 24,
    1 << 28,
    1 << 32,
];

/// `Scan::flags`: the second half of an LD_DW.
const SECOND_HALF: u8 = 1;
/// `Scan::flags`: the target of a local call.
const CALL_TARGET: u8 = 2;

/// What the passes before the pushes find.
struct Scan {
    /// Per instruction, `SECOND_HALF` and `CALL_TARGET`.
    flags: Vec<u8>,
    /// The first instance of each instruction (none for LE64 and the second half of an
    /// LD_DW: then the next one's), and at `n` op_fell_off's.
    first: Vec<u32>,
    /// How many local calls (one `op_ret_case` each).
    calls: usize,
    /// Uses of r0..r10 (and of r11..r15, which no verified program names), an instruction
    /// under k backward jumps counting 16^k.
    uses: [u64; 16],
}

impl Scan {
    fn of(prog: &[u8]) -> Scan {
        let n = prog.len() / 8;
        // Flags, and the loop depth per instruction as a difference array over the ranges
        // of backward jumps.
        let mut flags = vec![0u8; n];
        let mut delta = vec![0i32; n + 1];
        let mut i = 0;
        while i < n {
            let ins = insn(prog, i);
            match ins.opc {
                0x18 if i + 1 < n => {
                    flags[i + 1] |= SECOND_HALF;
                    i += 1;
                }
                0x85 if ins.src == 1 => {
                    flags[(i as i64 + 1 + i64::from(ins.imm)) as usize] |= CALL_TARGET;
                }
                _ if ins.off < 0
                    && matches!(decode(ins.opc), Some(Kind::Ja | Kind::Jmp { .. })) =>
                {
                    let to = (i as i64 + 1 + i64::from(ins.off)).max(0) as usize;
                    delta[to] += 1;
                    delta[i + 1] -= 1;
                }
                _ => {}
            }
            i += 1;
        }
        // Instance numbers and register uses. Instance 0 is the shim, 1 the entry op.
        let mut first = vec![0u32; n + 1];
        let mut uses = [0u64; 16];
        let (mut next, mut calls, mut depth) = (2u32, 0, 0i32);
        for i in 0..n {
            first[i] = next;
            depth += delta[i];
            if flags[i] & SECOND_HALF != 0 {
                next += u32::from(flags[i] & CALL_TARGET != 0);
                continue;
            }
            let ins = insn(prog, i);
            let Some(kind) = decode(ins.opc) else {
                next += 1;
                continue;
            };
            next += match kind {
                Kind::End { to_be: false } if ins.imm == 64 => 0,
                Kind::Call if ins.src == 1 => {
                    calls += 1;
                    1
                }
                _ => 1,
            };
            // At most 16^8 per instruction and 2^20 instructions: no overflow.
            let weight = LOOP_WEIGHT[depth.clamp(0, 8) as usize];
            let (d, s) = registers(kind, ins.dst, ins.src);
            if let Some(r) = d {
                uses[usize::from(r & 15)] += weight;
            }
            if let Some(r) = s {
                uses[usize::from(r & 15)] += weight;
            }
        }
        first[n] = next;
        Scan {
            flags,
            first,
            calls,
            uses,
        }
    }

    /// The eBPF registers to pin, most used first (ties: the lower number).
    fn pins(&self) -> ([u8; PINS], usize) {
        let mut pins = [0u8; PINS];
        let mut taken = [false; 11];
        let mut len = 0;
        while len < PINS {
            // The most used register not yet taken, if any is used at all.
            let mut best: Option<u8> = None;
            for r in 0..11u8 {
                let u = self.uses[usize::from(r)];
                if u > 0
                    && !taken[usize::from(r)]
                    && best.is_none_or(|b| u > self.uses[usize::from(b)])
                {
                    best = Some(r);
                }
            }
            let Some(r) = best else { break };
            taken[usize::from(r)] = true;
            pins[len] = r;
            len += 1;
        }
        (pins, len)
    }
}

/// A load's or store's fault exit, pushed after the program.
struct Fault {
    stencil: usize,
    /// The base register, the access width in bytes, the offset, the instruction index.
    base: u8,
    width: u8,
    off: i16,
    idx: u32,
}

impl Compiler {
    /// Compiles a verified program (see [`crate::verify`]) calling `helpers`.
    /// The eBPF registers kept in machine registers are the five most used ones (see
    /// [`Compiler::compile_pinned`]).
    pub fn compile(&self, prog: &[u8], helpers: &HashMap<u32, Helper>) -> Result<Compiled, Error> {
        let scan = Scan::of(prog);
        let (pins, len) = scan.pins();
        self.emit(prog, helpers, &pins[..len], &scan)
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
        self.emit(prog, helpers, pins, &Scan::of(prog))
    }

    /// Pushes the instances: the shim, the entry op, one per instruction, then op_fell_off,
    /// the return chain (one op_ret_case per local call, then op_invalid) and the loads' and
    /// stores' fault exits.
    fn emit(
        &self,
        prog: &[u8],
        helpers: &HashMap<u32, Helper>,
        pins: &[u8],
        scan: &Scan,
    ) -> Result<Compiled, Error> {
        let n = prog.len() / 8;
        let t = &self.table;
        // The pinned registers, their slots and homes in the frame (r[11]: scratch).
        let mut place = [FRAME; 16];
        let mut sync: Values = [0; VALUES];
        sync[usize::from(PIN_AT)..].fill(11 * 8);
        for (rank, &r) in pins.iter().enumerate() {
            let k = SLOT_OF_RANK[rank];
            place[usize::from(r)] = k;
            sync[usize::from(PIN_AT) + k] = u64::from(r) * 8;
        }
        let returns = scan.first[n] as usize + 1;
        let mut out = Emit {
            trace: self.jit.trace(),
            stencils: &self.stencils,
            table: t,
            first: &scan.first,
            returns,
            fault_base: returns + scan.calls + 1,
        };
        let entry = out.trace.push_shim()?;
        out.push(t.enter, &sync, Dest::None)?;
        let mut sites = Vec::new();
        let mut faults = Vec::new();
        for i in 0..n {
            let ins = insn(prog, i);
            let mut v = sync;
            v[usize::from(IDX)] = i as u64;
            if scan.flags[i] & SECOND_HALF != 0 {
                if scan.flags[i] & CALL_TARGET != 0 {
                    out.push(t.invalid, &v, Dest::None)?;
                }
                continue;
            }
            let kind = decode(ins.opc).expect("a verified program");
            let (dreg, sreg) = registers(kind, ins.dst, ins.src);
            let d = dreg.map_or(FRAME, |r| place[usize::from(r)]);
            let s = sreg.map_or(FRAME, |r| place[usize::from(r)]);
            v[usize::from(DST_AT)] = u64::from(dreg.unwrap_or(0)) * 8;
            v[usize::from(SRC_AT)] = u64::from(sreg.unwrap_or(0)) * 8;
            v[usize::from(IMM)] = ins.imm as i64 as u64;
            v[usize::from(OFF)] = off_operand(ins.off);
            let by_opcode = t.by_opcode[usize::from(ins.opc)][d][s];
            let jump = || Dest::Insn((i as i64 + 1 + i64::from(ins.off)) as usize);
            let (stencil, dest) = match kind {
                Kind::LdDw => {
                    let hi = insn(prog, i + 1).imm as u32;
                    v[usize::from(VALUE)] = u64::from(ins.imm as u32) | (u64::from(hi) << 32);
                    (by_opcode, Dest::None)
                }
                Kind::Ja | Kind::Jmp { .. } => (by_opcode, jump()),
                Kind::Call if ins.src == 0 => match helpers.get(&(ins.imm as u32)) {
                    Some(&h) => {
                        v[usize::from(FN)] = h as usize as u64;
                        (Some(t.call_helper[d][s]), Dest::None)
                    }
                    None => (Some(t.unknown_helper), Dest::None),
                },
                Kind::Call => {
                    v[usize::from(SITE)] = (i + 1) as u64;
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
                    faults.push(Fault {
                        stencil,
                        base,
                        width: w.bytes() as u8,
                        off: ins.off,
                        idx: i as u32,
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
            out.push(stencil, &v, dest)?;
        }
        out.epilogue(&sync, n, &sites, &faults)?;
        Ok(Compiled {
            trace: out.trace.finish()?,
            entry,
            prog: prog.to_vec(),
        })
    }
}

/// Pushes instances into a trace, their jumps resolved by instance number.
struct Emit<'a, 'j, 's> {
    trace: TraceBuilder<'j, 's>,
    stencils: &'a Stencils,
    table: &'a Table,
    first: &'a [u32],
    returns: usize,
    fault_base: usize,
}

impl Emit<'_, '_, '_> {
    /// Pushes an instance of `stencil`, its operands picked from `v`.
    fn push(&mut self, stencil: usize, v: &Values, dest: Dest) -> Result<(), Error> {
        let picks = &self.stencils.picks[stencil];
        let mut operands = [0u64; VALUES];
        for (o, &k) in operands.iter_mut().zip(picks.iter()) {
            *o = v[usize::from(k)];
        }
        let operands = &operands[..picks.len()];
        let target = match dest {
            _ if !self.stencils.jumps[stencil] => None,
            Dest::None => None,
            Dest::Insn(i) => Some(self.first[i] as usize),
            Dest::Returns => Some(self.returns),
            Dest::Fault(k) => Some(self.fault_base + k),
        };
        match target {
            Some(k) => {
                let t = Target::Instance(InstanceId::from_index(k));
                self.trace.push(stencil, operands, &[t])?
            }
            None => self.trace.push(stencil, operands, &[])?,
        };
        Ok(())
    }

    /// What follows the program: op_fell_off, the return chain and the fault exits.
    fn epilogue(
        &mut self,
        sync: &Values,
        n: usize,
        sites: &[usize],
        faults: &[Fault],
    ) -> Result<(), Error> {
        let t = self.table;
        let mut v = *sync;
        v[usize::from(IDX)] = n as u64;
        self.push(t.fell_off, &v, Dest::None)?;
        for &site in sites {
            let mut v = *sync;
            v[usize::from(SITE)] = site as u64;
            self.push(t.ret_case, &v, Dest::Insn(site))?;
        }
        // The end of the return chain, never reached (every popped site is in it).
        self.push(t.invalid, &v, Dest::None)?;
        for f in faults {
            let mut v = *sync;
            v[usize::from(DST_AT)] = u64::from(f.base) * 8;
            v[usize::from(IMM)] = u64::from(f.width);
            v[usize::from(OFF)] = off_operand(f.off);
            v[usize::from(IDX)] = u64::from(f.idx);
            self.push(f.stencil, &v, Dest::None)?;
        }
        Ok(())
    }
}
