//! Compiling one program, in stages: the scan (`scan`: which registers to pin, how many
//! local calls), the places of the registers, the prologue (the shim, which also loads the
//! pinned registers), one instance per instruction (a load or store leaves the trace
//! itself where it faults), the epilogue (the fall-off exit, the return chain of local
//! calls, the guarded loops' copies) and the kit's `finish`.
//!
//! Every instruction is exactly one instance (LE64 and the second half of an LD_DW are
//! `op_nop`, which has no code), so instruction `i` is instance `i + 1` and a jump's target
//! is known without a pass to number them; in a program with loops, past the guards of
//! the loops before it (`loops`, [`Emit::at`]). Short programs are compiled about as often as
//! they run, so an instruction costs a few table reads ([`Table`]) and one `push`, and a
//! compile allocates only for the local calls it has.

use crate::canon;
use crate::helper::HelperMap;
use crate::jit::{Compiled, Compiler, SLOT_OF_RANK};
use crate::scan::{words, Plan, Scan};
use crate::table::{Action, Member, Row, Table, FRAME, MAX_OPERANDS, NONE, PINS, SMALL_IMM};
use crate::{Error, Helper};
use cpjit_runtime::{InstanceId, Target, TraceBuilder};
use std::any::Any;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

mod loops;
pub(crate) use loops::{unchecked_index, UNCHECKED};

/// Where an operand's value is in an instruction's [`Values`] (`Table::operands`). The
/// kit orders a stencil's operands by name; in this order most stencils' operands are
/// consecutive values (`[IMM]`, `[DST_AT, IMM]`, `[OFF, SRC_AT]`, `[DATA, FN, PIN0_AT ..
/// PIN4_AT]`, and with the copies [`DST_AT2`], [`SRC_AT2`] `[DST_AT, SRC_AT]`), which a
/// push passes as they are (`Operands::window`) instead of picking them one by one.
pub(crate) const DST_AT: u8 = 0;
pub(crate) const IMM: u8 = 1;
pub(crate) const OFF: u8 = 2;
pub(crate) const SRC_AT: u8 = 3;
pub(crate) const IDX: u8 = 4;
pub(crate) const SITE: u8 = 5;
pub(crate) const VALUE: u8 = 6;
pub(crate) const DATA: u8 = 7;
pub(crate) const FN: u8 = 8;
/// `PIN0_AT`; slot k's is `PIN_AT + k`.
pub(crate) const PIN_AT: u8 = 9;
/// Copies of `DST_AT` and `SRC_AT`, written with them.
pub(crate) const DST_AT2: u8 = 14;
pub(crate) const SRC_AT2: u8 = 15;
/// How many values an instance's operands are picked from.
pub(crate) const VALUES: usize = 16;
/// The values an instance's operands are picked from (16: an index masked with 15 needs
/// no bounds check).
type Values = [u64; VALUES];

/// The operand whose value is at `at` in [`Values`] (its own index but for the copies).
pub(crate) fn value_at(at: usize) -> u8 {
    match at as u8 {
        DST_AT2 => DST_AT,
        SRC_AT2 => SRC_AT,
        k => k,
    }
}

/// An instruction [`Emit::target`] pushed itself: the instruction slots it took, or why
/// the kit refused it.
type Pushed = Result<usize, Error>;

/// The jump target of instance `t`.
fn instance(t: usize) -> Target {
    Target::Instance(InstanceId::from_index(t))
}

/// The instance of instruction 0 (after the shim, which loads the pinned registers).
const FIRST: usize = 1;

/// How far [`Emit::dead_after`] looks: instructions in all, branches left to follow.
const LEAN_STEPS: usize = 64;
const LEAN_PATHS: usize = 8;

/// What operand `OFF` holds besides the offset (templates/include/ops.h, `OFF_BIAS`): a u16
/// holding `off + OFF_BIAS`, which the ops subtract again where it folds into a
/// displacement (`OFF64`) and the frame's `mem_biased` cancels in the bounds check.
pub(crate) const OFF_BIAS: u64 = 0x8000;

/// The value of operand `OFF` for offset `off`.
fn off_operand(off: i16) -> u64 {
    (i64::from(off) as u64).wrapping_add(OFF_BIAS)
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
        // A loop guard's (emit/loops.rs): it has no SITE.
        "SPAN" => SITE,
        "VALUE" => VALUE,
        "FN" => FN,
        "DATA" => DATA,
        "PIN0_AT" => PIN_AT,
        "PIN1_AT" => PIN_AT + 1,
        "PIN2_AT" => PIN_AT + 2,
        "PIN3_AT" => PIN_AT + 3,
        "PIN4_AT" => PIN_AT + 4,
        _ => return None,
    })
}

impl Compiler {
    /// Compiles a verified program (see [`crate::verify`]) calling `helpers`.
    /// The eBPF registers kept in machine registers are the five most used ones (see
    /// [`Compiler::compile_pinned`]).
    pub fn compile(&self, prog: &[u8], helpers: &HashMap<u32, Helper>) -> Result<Compiled, Error> {
        let mut compiled = None;
        self.compile_scanned(prog, helpers, &Scan::of(prog), &mut compiled)?;
        Ok(compiled.expect("set by a compile that succeeded"))
    }

    /// [`Compiler::compile`] with the program's scan (`EbpfVm` has it from the verifier)
    /// and its helpers, into `compiled` (replacing what it held): a `Compiled` returned
    /// through two `Result`s was copied twice, 256 bytes each, about a thirtieth of a
    /// 10-instruction program's compile.
    pub(crate) fn compile_scanned(
        &self,
        prog: &[u8],
        helpers: &impl HelperMap,
        scan: &Plan,
        compiled: &mut Option<Compiled>,
    ) -> Result<(), Error> {
        let pins = &scan.pins[..usize::from(scan.pin_count)];
        self.emit(prog, helpers, pins, scan, compiled)
    }

    /// Compiles a verified program keeping the eBPF registers `pins` (at most five distinct
    /// ones of r0..r10, most used first: the last of five goes to the slot `mul` and `div`
    /// clobber on x86-64) in machine registers and the others in the frame. In a program
    /// that calls a helper, pinned r1, r2 and r3 then move to the slots of the registers a C
    /// call passes them in, as [`Compiler::compile`] places them (the set has helper calls
    /// for those places only).
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
        let mut compiled = None;
        self.emit(prog, helpers, pins, &Scan::of(prog), &mut compiled)?;
        Ok(compiled.expect("set by a compile that succeeded"))
    }

    /// The stages after the scan, `pins` by rank, into `compiled`.
    fn emit(
        &self,
        prog: &[u8],
        helpers: &impl HelperMap,
        pins: &[u8],
        scan: &Plan,
        compiled: &mut Option<Compiled>,
    ) -> Result<(), Error> {
        let own = || Own(self.jit.trace());
        self.lower(prog, helpers, pins, scan, own, |own, pinned, kept| {
            *compiled = Some(Compiled {
                trace: own.0.finish()?,
                pinned,
                _helpers: kept,
            });
            Ok(())
        })
    }

    /// The stages after the scan, `pins` by rank, pushed into the builder `trace` makes (the
    /// compile's own, or a batch's: `crate::batch`), then `done` with the builder, the
    /// register in each pinned slot and the helpers' state the trace holds pointers to. (The
    /// builder is made in `Emit::new`: one made here and passed in was copied, a `memcpy`
    /// call of 29 instructions a compile.)
    #[inline(always)]
    pub(crate) fn lower<'j, B: DerefMut<Target = TraceBuilder<'j, 'static>>>(
        &'j self,
        prog: &[u8],
        helpers: &impl HelperMap,
        pins: &[u8],
        scan: &Plan,
        trace: impl FnOnce() -> B,
        done: impl FnOnce(B, [u8; PINS], Kept) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut slots = slots_of(pins);
        if scan.helper_calls {
            natural_arguments(&mut slots);
        }
        let mut out = Emit::new(self, prog, slots, scan, trace);
        out.trace.push_shim()?;
        // A local copy of the instructions: indexed below its length, with no bounds check.
        let words = out.words;
        if out.loops.is_empty() {
            let mut i = 0;
            while i < words.len() {
                i += out.instruction(i, u64::from_le_bytes(words[i]), helpers)?;
            }
        } else {
            out.guarded_instructions(helpers)?;
        }
        out.epilogue(helpers)?;
        let kept = (!out.kept.is_empty()).then(|| Box::new(out.kept));
        done(out.trace, out.pin_at.map(|at| (at / 8) as u8), kept)
    }
}

/// The state of the helpers with state that a trace calls ([`Compiled`]'s `_helpers`).
#[allow(clippy::box_collection)]
pub(crate) type Kept = Option<Box<Vec<Arc<dyn Any + Send + Sync>>>>;

/// A compile's own builder ([`Emit`] pushes through `DerefMut`, as into a batch's
/// `&mut TraceBuilder`).
struct Own<'j>(TraceBuilder<'j, 'static>);

impl<'j> Deref for Own<'j> {
    type Target = TraceBuilder<'j, 'static>;
    #[inline(always)]
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Own<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// A slot no register is pinned in (`slots_of`).
const UNUSED: u8 = u8::MAX;

/// The register of each pinned slot for `pins` by rank ([`SLOT_OF_RANK`]).
fn slots_of(pins: &[u8]) -> [u8; PINS] {
    let mut slots = [UNUSED; PINS];
    for (rank, &r) in pins.iter().enumerate() {
        slots[SLOT_OF_RANK[rank]] = r;
    }
    slots
}

/// Moves pinned r1, r2 and r3 into the slots of the registers a C call passes them in on
/// x86-64 (3: rdi, 4: rsi, 2: rdx; elsewhere a move each), swapping with what is there: then
/// a helper call passes them where they are ([`Emit::lean_call`]). Each swap leaves the
/// slots placed before it alone (they hold their own registers).
fn natural_arguments(slots: &mut [u8; PINS]) {
    for (r, natural) in [(1u8, 3usize), (2, 4), (3, 2)] {
        if let Some(k) = slots.iter().position(|&x| x == r) {
            slots.swap(k, natural);
        }
    }
}

/// One compile's state, pushing into `B` (the compile's own builder or a batch's).
struct Emit<'a, B> {
    trace: B,
    table: &'a Table,
    /// `table.rows`, read per instruction: one load less than through `table`.
    rows: &'a [Row; 256],
    /// The program's instructions.
    words: &'a [[u8; crate::INSN_SIZE]],
    scan: &'a Plan,
    /// Instructions.
    n: usize,
    /// Each register's place: a pinned slot, or `FRAME`.
    place: [u8; 16],
    /// Where each pinned slot's register lives in the frame.
    pin_at: [u64; PINS],
    /// The current instruction's values (the pinned registers' homes stay).
    v: Values,
    /// Whether `op_fell_off` follows the program (unless it ends with EXIT or JA).
    fell_off: bool,
    /// The first `op_ret_case` (one per local call).
    returns: usize,
    /// Each local call's return site.
    sites: Vec<usize>,
    /// The state of the helpers with state the trace calls.
    kept: Vec<Arc<dyn Any + Send + Sync>>,
    /// The guarded loops (`loops`; none in a program without backward jumps) and the
    /// first instance of their copies, after the return chain.
    loops: Vec<loops::Loop>,
    copies_at: usize,
    /// While a guarded loop's copy is pushed (its accesses unchecked), the loop's first and
    /// last instruction and the first one's instance in the copy (jumps into the loop go
    /// to the copy's instances); else `usize::MAX` (`loops`, `Emit::copy`).
    copying: (usize, usize, usize),
}

impl<'a, 'j, B: DerefMut<Target = TraceBuilder<'j, 'static>>> Emit<'a, B> {
    /// The places of the registers and where the instances after the program go.
    #[inline(always)]
    fn new(
        c: &'j Compiler,
        prog: &'a [u8],
        slots: [u8; PINS],
        scan: &'a Plan,
        trace: impl FnOnce() -> B,
    ) -> Emit<'a, B>
    where
        'j: 'a,
    {
        let words = words(prog);
        let n = words.len();
        let mut place = [FRAME as u8; 16];
        // Unused slots live in the scratch word r[11].
        let mut pin_at = [11 * 8; PINS];
        for (k, &r) in slots.iter().enumerate() {
            if r != UNUSED {
                place[usize::from(r)] = k as u8;
                pin_at[k] = u64::from(r) * 8;
            }
        }
        let mut v = [0; 16];
        v[usize::from(PIN_AT)..usize::from(PIN_AT) + PINS].copy_from_slice(&pin_at);
        let last = words[n - 1][0];
        let fell_off = last != 0x95 && last != 0x05;
        let loops = if scan.backward {
            loops::find(prog)
        } else {
            Vec::new()
        };
        let returns = FIRST + n + loops.len() + usize::from(fell_off);
        let chain = if scan.calls > 0 { scan.calls + 1 } else { 0 };
        Emit {
            trace: trace(),
            table: &c.table,
            rows: &c.table.rows,
            words,
            scan,
            n,
            place,
            pin_at,
            v,
            fell_off,
            returns,
            // (Reserved by the first local call: `with_capacity` tests its count here, and
            // most programs have none.)
            sites: Vec::new(),
            kept: Vec::new(),
            loops,
            copies_at: returns + chain,
            copying: (usize::MAX, 0, 0),
        }
    }

    /// Pushes an instance of `stencil`, its operands picked from the values, jumping to
    /// instance `target` if it has a jump. (For the instances besides the instructions'
    /// own, [`Emit::push_member`]: out of line, so that the kit's `push` is inlined once.)
    #[inline(never)]
    fn push(&mut self, stencil: u16, target: Option<usize>) -> Result<(), Error> {
        let m = Member::with(stencil, &self.table.operands[usize::from(stencil)]);
        match target {
            Some(t) if m.len & Member::JUMPS != 0 => self.push_counted(m, &[instance(t)]),
            _ => self.push_counted(m, &[]),
        }
    }

    /// Pushes an instance of member `m` with `targets`, whose count the caller knows: the
    /// kit's `push` (always inlined) then copies them without a loop, and the operands too
    /// for the commonest counts, consecutive values (`Operands::window`) of at most two.
    #[inline(always)]
    fn push_counted(&mut self, m: Member, targets: &[Target]) -> Result<(), Error> {
        let (v, at, s) = (&self.v, usize::from(m.window), usize::from(m.stencil));
        match m.len & !Member::JUMPS {
            0 => self.trace.push(s, &[], targets)?,
            // (A window of `len` values starts at `VALUES - len` at the latest, so the masks
            // change no index: they only spare the bounds checks.)
            1 => self.trace.push(s, &[v[at & 15]], targets)?,
            2 => self
                .trace
                .push(s, &[v[at & 15], v[(at + 1) & 15]], targets)?,
            _ => return self.push_picked(m.stencil, targets),
        };
        Ok(())
    }

    /// [`Emit::push_counted`] of a stencil whose operands are more than two or not
    /// consecutive values: picked one by one.
    #[cold]
    #[inline(never)]
    fn push_picked(&mut self, stencil: u16, targets: &[Target]) -> Result<(), Error> {
        let ops = &self.table.operands[usize::from(stencil)];
        let mut operands = [0; MAX_OPERANDS];
        for (o, &at) in operands.iter_mut().zip(&ops.at[..usize::from(ops.len)]) {
            *o = self.v[usize::from(at) & 15];
        }
        let operands = &operands[..usize::from(ops.len)];
        self.trace.push(usize::from(stencil), operands, targets)?;
        Ok(())
    }

    /// Instruction `i`'s word.
    fn word(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.words[i])
    }

    /// Pushes the instances of the instructions of a program with guarded loops, a guard
    /// before each head: a loop of its own, so that a program without them pays no test
    /// per instruction.
    #[inline(never)]
    fn guarded_instructions(&mut self, helpers: &impl HelperMap) -> Result<(), Error> {
        let words = self.words;
        let mut i = 0;
        // Where the next guarded loop's head is.
        let mut head = self.loops.first().map_or(usize::MAX, |l| l.head);
        while i < words.len() {
            if i == head {
                head = self.guard(i)?;
            }
            i += self.instruction(i, u64::from_le_bytes(words[i]), helpers)?;
        }
        Ok(())
    }

    /// Pushes the instance of instruction `i` (word `w`); returns how many instruction
    /// slots it took.
    #[inline(always)]
    fn instruction(
        &mut self,
        i: usize,
        mut w: u64,
        helpers: &impl HelperMap,
    ) -> Result<usize, Error> {
        let mut row = &self.rows[w as usize & 255];
        let (mut dr, mut sr) = row.regs.of(w);
        let (mut d, mut s) = self.places(row, w, (dr, sr));
        // (Row-major 8 x 8: one shift and one mask, no bounds check.)
        let mut member = row.members.as_flattened()[(d << 3 | s) & 63];
        if member.stencil == NONE && row.canon != 0 {
            // A member the set does not have: an equivalent instruction's (`canon`).
            w = self.canonical(row, w, (dr, sr));
            row = &self.rows[w as usize & 255];
            (dr, sr) = row.regs.of(w);
            (d, s) = self.places(row, w, (dr, sr));
            member = row.members.as_flattened()[(d << 3 | s) & 63];
        }
        let imm = (w >> 32) as i32;
        let v = &mut self.v;
        (v[usize::from(DST_AT)], v[usize::from(DST_AT2)]) = (dr as u64 * 8, dr as u64 * 8);
        (v[usize::from(SRC_AT)], v[usize::from(SRC_AT2)]) = (sr as u64 * 8, sr as u64 * 8);
        v[usize::from(IMM)] = i64::from(imm) as u64;
        // (`OFF` only loads and stores read: `Emit::target` sets it.)
        v[usize::from(IDX)] = i as u64;
        // Plain ALU instructions, the commonest, pushed here; the others out of line, so
        // that the loop keeps its values in registers.
        if row.action != Action::Plain {
            return self.special(i, w, (d, s), (dr, sr), member, helpers);
        }
        self.push_counted(member, &[])?;
        Ok(1)
    }

    /// [`Emit::instruction`] of an action other than `Plain`, its values set: pushes its
    /// member with its jump target, or ([`Emit::target`]) another table's instance.
    #[inline(never)]
    fn special(
        &mut self,
        i: usize,
        w: u64,
        places: (usize, usize),
        regs: (usize, usize),
        member: Member,
        helpers: &impl HelperMap,
    ) -> Result<usize, Error> {
        let target = match self.target(i, w, places, regs, member, helpers) {
            Ok(t) => t,
            Err(pushed) => return pushed,
        };
        // One inlined push with no target and one with one (which a compare of a register
        // with itself may not have).
        match target {
            Some(t) if member.len & Member::JUMPS != 0 => {
                self.push_counted(member, &[instance(t)])?
            }
            _ => self.push_counted(member, &[])?,
        }
        Ok(1)
    }

    /// The target of instruction `i` (word `w`, registers `dr`, `sr` in places `d`, `s`,
    /// member `member`), of an action other than `Plain`; `Err` where it pushed
    /// the instruction itself ([`Pushed`]).
    #[inline(always)]
    fn target(
        &mut self,
        i: usize,
        w: u64,
        (d, s): (usize, usize),
        (dr, sr): (usize, usize),
        member: Member,
        helpers: &impl HelperMap,
    ) -> Result<Option<usize>, Pushed> {
        let row = &self.rows[w as usize & 255];
        let off = (w >> 16) as i16;
        Ok(match row.action {
            Action::Plain => None,
            Action::Jump => Some(self.at(i, (i as i64 + 1 + i64::from(off)) as usize)),
            // Its member leaves the trace itself where the access faults (IDX is set).
            Action::Load | Action::Store if self.copying.0 == usize::MAX => {
                self.v[usize::from(OFF)] = off_operand(off);
                None
            }
            // In a guarded loop's copy (`loops`): unchecked.
            Action::Load | Action::Store => return Err(self.unchecked(w, (dr, sr)).map(|()| 1)),
            Action::End => return Err(self.end(w, d).map(|()| 1)),
            // Without local calls its row's member (`ret` by the place of r0), pushed by
            // `Emit::special` with no target: an out-of-line push of `ret[d]` cost 40
            // instructions a program more.
            Action::Exit if self.scan.calls == 0 => None,
            Action::Exit => return Err(self.push(self.table.exit, Some(self.returns)).map(|()| 1)),
            Action::Invalid => return Err(self.push(self.table.invalid, None).map(|()| 1)),
            Action::Call => return Err(self.call(i, w, (d, s), helpers).map(|()| 1)),
            Action::LdDw => return Err(self.ld_dw(i, w, member.stencil).map(|()| 2)),
        })
    }

    /// Pushes LE/BE of word `w`, its D in place `d`.
    fn end(&mut self, w: u64, d: usize) -> Result<(), Error> {
        // BE has the source bit set; the width is the immediate.
        let be = usize::from(w & 0x08 != 0);
        let width = match (w >> 32) as i32 {
            16 => 0,
            32 => 1,
            _ => 2,
        };
        self.push(self.table.end[be][width][d], None)
    }

    /// The places of instruction word `w`'s D and S registers `dr`, `sr` (of `row`), as
    /// its row's members are indexed: an op with an immediate in 0..2^31 takes its member
    /// for one ([`SMALL_IMM`]), if it has one.
    #[inline(always)]
    fn places(&self, row: &Row, w: u64, (dr, sr): (usize, usize)) -> (usize, usize) {
        let d = usize::from(self.place[dr]);
        let s = if row.small_imm && (w >> 32) as i32 >= 0 {
            SMALL_IMM
        } else {
            usize::from(self.place[sr])
        };
        (d, s)
    }

    /// Instruction word `w` (of `row`, registers `dr`, `sr`), whose member for the places
    /// of its registers the set does not have, as the equivalent instruction `canon`
    /// rewrites it into: its registers are one (`SAME`), or its destination's place is
    /// above its source's (`SWAPPED`, jumps).
    #[cold]
    #[inline(never)]
    fn canonical(&self, row: &Row, w: u64, (dr, sr): (usize, usize)) -> u64 {
        let why = if dr == sr {
            canon::SAME
        } else if self.place[dr] > self.place[sr] {
            canon::SWAPPED
        } else {
            0
        };
        if row.canon & why != 0 {
            canon::rewrite(w, why)
        } else {
            w
        }
    }

    /// LD_DW `i` (its `member`) and its second half: nothing, unless a local call goes there.
    fn ld_dw(&mut self, i: usize, w: u64, member: u16) -> Result<(), Error> {
        let hi = (self.word(i + 1) >> 32) as u32;
        self.v[usize::from(VALUE)] = u64::from((w >> 32) as u32) | (u64::from(hi) << 32);
        self.push(member, None)?;
        let half = if self.scan.call_targets.contains(&(i + 1)) {
            self.table.invalid
        } else {
            self.table.nop
        };
        self.v[usize::from(IDX)] = i as u64 + 1;
        self.push(half, None)
    }

    /// A CALL: a helper's (r0 in place `d`, r1 in place `s`) or a local call.
    fn call(
        &mut self,
        i: usize,
        w: u64,
        (d, s): (usize, usize),
        helpers: &impl HelperMap,
    ) -> Result<(), Error> {
        let (src, imm) = ((w >> 12) & 15, (w >> 32) as i32);
        if src == 0 {
            return match helpers.helper(imm as u32) {
                Some(h) => {
                    self.v[usize::from(FN)] = h.call as usize as u64;
                    self.v[usize::from(DATA)] = h.data as u64;
                    if let Some(owner) = h.owner() {
                        self.kept.push(owner.clone());
                    }
                    let members = match self.lean_call(i) {
                        Some(args) => &self.table.call_lean[args],
                        None => &self.table.call_helper,
                    };
                    self.push(members[d][s], None)
                }
                None => self.push(self.table.unknown_helper, None),
            };
        }
        self.v[usize::from(SITE)] = (i + 1) as u64;
        self.sites.reserve_exact(self.scan.calls);
        self.sites.push(i + 1);
        let callee = self.at(i, (i as i64 + 1 + i64::from(imm)) as usize);
        self.push(self.table.call_local, Some(callee))
    }

    /// Whether helper call `i` may be the lean member (family `call`, templates/families/
    /// ops.c), and which (its ARGS): each of r2..r5 lives in the frame or in the slot of its
    /// argument register (r2 in slot 4: bit 0, r3 in slot 2: bit 1), and the registers in
    /// slots 2..4 but r0, which it does not keep, are dead after it ([`Emit::dead_after`]).
    fn lean_call(&self, i: usize) -> Option<usize> {
        let mut args = 0;
        for (r, natural, bit) in [(2, 4, 1), (3, 2, 2), (4, PINS, 0), (5, PINS, 0)] {
            match usize::from(self.place[r]) {
                FRAME => {}
                k if k == natural => args |= bit,
                _ => return None,
            }
        }
        // The register in slot k (11, the scratch word, if none).
        let reg = |k: usize| self.pin_at[k] / 8;
        const R1_R10: u16 = 0b111_1111_1110;
        let kept = (2..PINS).fold(0u16, |m, k| m | 1 << reg(k)) & R1_R10;
        (kept == 0 || self.dead_after(i + 1, kept)).then_some(args)
    }

    /// Whether no register of `live` (a bit per register) is read before it is written on
    /// any path from instruction `start`. Conservative: a local call, an EXIT of a program
    /// with local calls, or a search past [`LEAN_STEPS`] instructions or [`LEAN_PATHS`]
    /// open branches (a loop that never writes one) answers no; a helper call reads r1..r5.
    fn dead_after(&self, start: usize, live: u16) -> bool {
        let mut paths = [(0usize, 0u16); LEAN_PATHS];
        paths[0] = (start, live);
        let (mut open, mut steps) = (1, 0);
        // The backward jumps followed, with what was live: a loop taken again with no more
        // live is not searched again.
        let mut looped = [(usize::MAX, 0u16); LEAN_PATHS];
        let mut loops = 0;
        const END: usize = usize::MAX;
        while open > 0 {
            open -= 1;
            let (mut pc, mut live) = paths[open];
            while live != 0 {
                steps += 1;
                if steps > LEAN_STEPS || pc >= self.n {
                    return false;
                }
                let w = self.word(pc);
                let row = &self.rows[w as usize & 255];
                let (d, s) = row.regs.of(w);
                let (d, s) = (1u16 << d, 1u16 << s);
                let mut next = pc + 1;
                let (reads, writes) = match row.action {
                    // MOV (ALU32 and ALU64 classes) does not read its destination.
                    Action::Plain if w & 0xf0 == 0xb0 && matches!(w & 7, 4 | 7) => (s, d),
                    Action::Plain | Action::End => (d | s, d),
                    Action::LdDw => {
                        next += 1;
                        (0, d)
                    }
                    Action::Load => (s, d),
                    Action::Store => (d | s, 0),
                    Action::Jump => {
                        let to = (pc as i64 + 1 + i64::from((w >> 16) as i16)) as usize;
                        let again = to <= pc
                            && looped[..loops]
                                .iter()
                                .any(|&(at, was)| at == to && live & !was == 0);
                        if to <= pc && !again {
                            if loops == LEAN_PATHS {
                                return false;
                            }
                            looped[loops] = (to, live);
                            loops += 1;
                        }
                        if w & 0xff == 0x05 {
                            // JA: the path goes on there, or ends where searched already.
                            next = if again { END } else { to };
                        } else if !again {
                            if open == LEAN_PATHS {
                                return false;
                            }
                            paths[open] = (to, live);
                            open += 1;
                        }
                        (d | s, 0)
                    }
                    Action::Call if (w >> 12) & 15 == 0 => (0b11_1110, 1),
                    Action::Exit if self.scan.calls == 0 => (1, live),
                    Action::Call | Action::Exit | Action::Invalid => return false,
                };
                if reads & live != 0 {
                    return false;
                }
                live &= !writes;
                if next == END {
                    break;
                }
                pc = next;
            }
        }
        true
    }

    /// What follows the program: op_fell_off, the return chain and the
    /// guarded loops' copies.
    fn epilogue(&mut self, helpers: &impl HelperMap) -> Result<(), Error> {
        let t = self.table;
        self.v[usize::from(IDX)] = self.n as u64;
        if self.fell_off {
            self.push(t.fell_off, None)?;
        }
        if !self.sites.is_empty() {
            for k in 0..self.sites.len() {
                let site = self.sites[k];
                self.v[usize::from(SITE)] = site as u64;
                self.push(t.ret_case, Some(self.at(usize::MAX, site)))?;
            }
            // The end of the return chain, never reached (every popped site is in it).
            self.push(t.invalid, None)?;
        }
        for k in 0..self.loops.len() {
            self.copy(k, helpers)?;
        }
        Ok(())
    }
}
