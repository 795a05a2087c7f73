//! Loops whose memory checks one guard at the loop's entry can prove, of two shapes:
//!
//! - *Pointer loops*: `head: ... jlt p, q, head` whose body runs straight through, moves
//!   its pointer p by one `add p, STEP` (STEP > 0) per iteration, never writes p otherwise
//!   nor q, and whose every access is at p plus a constant. The iterations that run see p
//!   at the accesses take the values `p0 + k STEP` below q (p0 at the entry; past the
//!   `add`, STEP more), the last of them `p0 + last`, so the accesses lie in
//!   `[p0 + lo, p0 + last + lo + span)` (`op_loop_guard`, templates/families/ops.c).
//! - *Index loops*: `head: jge i, N, out; ... ja head` whose body runs straight through
//!   and whose every access is at `b + i` plus a constant, `b + i` computed in the body
//!   (`mov x, b; add x, i`) from i as the head tested it (below N) and a base b the loop
//!   never writes: the accesses lie in `[b + lo, b + N - 1 + lo + span)`
//!   (`op_index_guard`), whatever i starts at and however the body moves it.
//!
//! One test of that range at the entry proves every access inside the memory. The
//! compiler pushes the guard before the loop's head and, after the program, a copy of the
//! loop whose accesses are unchecked (`<op>_u`), which the guard jumps to when it holds;
//! otherwise the loop runs as written, every access checked, so an access that faults
//! still faults at its instruction with the same error (issue 39).
//!
//! A guard is one more instance before its head: instruction `t` is instance `FIRST + t`
//! plus the guards before it ([`Emit::at`]). Jumps to a head go to its guard, but the loop's
//! own backward jump, which goes to the checked head.

use super::SRC_AT2;
use super::{off_operand, Emit, DST_AT, DST_AT2, FIRST, IMM, OFF, SITE, SRC_AT};
use crate::helper::HelperMap;
use crate::scan::word;
use crate::shape::{Action, SHAPES};
use crate::Error;

/// JLT of two registers (64-bit), and JGT, the same with them swapped.
const JLT_REG: u64 = 0xad;
const JGT_REG: u64 = 0x2d;
/// JGE and JLT of an immediate (64-bit), JA.
const JGE_IMM: u64 = 0x35;
const JLT_IMM: u64 = 0xa5;
const JA: u64 = 0x05;
/// ALU64 ADD of an immediate and of a register, MOV of a register.
const ADD64_IMM: u64 = 0x07;
const ADD64_REG: u64 = 0x0f;
const MOV64_REG: u64 = 0xbf;
/// LD_DW's first half (a loop's head must not be its second).
const LD_DW: u8 = 0x18;

/// What bounds a guarded loop's accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// A pointer loop's bound register q and step.
    Pointer { q: u8, step: u32 },
    /// An index loop's N (the JGE's immediate, zero-extended as the JGE reads it).
    Index { n: i32 },
}

/// A loop the compiler guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loop {
    /// Its first instruction and its backward jump.
    pub head: usize,
    pub end: usize,
    /// The register the accesses are at: a pointer loop's p, an index loop's base b.
    pub p: u8,
    pub bound: Bound,
    /// The lowest access's offset from p or `b + i` (in a pointer loop at the iteration's
    /// start: past the `add`, its offset plus STEP).
    pub lo: i16,
    /// From the lowest access's start to the highest access's end, in bytes.
    pub span: u32,
    /// Where its copy starts among the copies after the program.
    pub copy_at: usize,
}

impl Loop {
    /// The instances of its copy: the loop (an index loop's rotated: its head, its body,
    /// the head's test inverted jumping back to the body) and a JA to the instruction after
    /// it.
    fn copy_len(&self) -> usize {
        self.end - self.head + 2
    }
}

/// The loops of `prog` the compiler guards, by their heads (they cannot overlap: a guarded
/// loop's body has no jump).
pub(crate) fn find(prog: &[u8]) -> Vec<Loop> {
    let mut loops: Vec<Loop> = Vec::new();
    let mut copy_at = 0;
    for end in 0..prog.len() / crate::INSN_SIZE {
        let w = word(prog, end);
        let off = (w >> 16) as i16;
        // (A backward jump's target: the offset of anything else means no such thing.)
        if off >= 0 || !matches!(w & 0xff, JLT_REG | JGT_REG | JA) {
            continue;
        }
        let head = (end as i64 + 1 + i64::from(off)) as usize;
        if head > 0 && word(prog, head - 1) as u8 == LD_DW {
            continue;
        }
        let found = match w & 0xff {
            JLT_REG | JGT_REG => pointer_loop(prog, head, end, w),
            JA => index_loop(prog, head, end),
            _ => None,
        };
        if let Some(mut l) = found {
            l.copy_at = copy_at;
            copy_at += l.copy_len();
            loops.push(l);
        }
    }
    loops
}

/// The lowest start and highest end of accesses, from a register.
struct Extent {
    lo: i64,
    hi: i64,
}

impl Extent {
    const NONE: Extent = Extent {
        lo: i64::MAX,
        hi: i64::MIN,
    };

    fn add(&mut self, at: i64, width: u8) {
        self.lo = self.lo.min(at);
        self.hi = self.hi.max(at + i64::from(width));
    }

    /// The loop with this extent (`None` without accesses or out of the operands' ranges).
    fn of(self, head: usize, end: usize, p: u8, bound: Bound) -> Option<Loop> {
        Some(Loop {
            head,
            end,
            p,
            bound,
            lo: i16::try_from(self.lo).ok()?,
            span: u32::try_from(self.hi.checked_sub(self.lo)?).ok()?,
            copy_at: 0,
        })
    }
}

/// The pointer loop `head..=end` closed by jump `w`, if a guard can prove its accesses.
fn pointer_loop(prog: &[u8], head: usize, end: usize, w: u64) -> Option<Loop> {
    let (d, s) = (((w >> 8) & 15) as u8, ((w >> 12) & 15) as u8);
    let (p, q) = if w & 0xff == JLT_REG { (d, s) } else { (s, d) };
    if p == q {
        return None;
    }
    let mut step: Option<i64> = None;
    let mut extent = Extent::NONE;
    for j in head..end {
        let w = word(prog, j);
        let shape = &SHAPES[w as usize & 255];
        let (dr, sr) = shape.regs.of(w);
        let (dr, sr) = (dr as u8, sr as u8);
        let base = match shape.action {
            Action::Plain | Action::End => {
                if dr == q || (dr == p && step.is_some()) {
                    return None;
                }
                if dr == p {
                    let c = (w >> 32) as i32;
                    if w & 0xff != ADD64_IMM || c < 1 {
                        return None;
                    }
                    step = Some(i64::from(c));
                }
                continue;
            }
            Action::Load if dr != p && dr != q => sr,
            Action::Store => dr,
            _ => return None,
        };
        if base != p {
            return None;
        }
        extent.add(i64::from((w >> 16) as i16) + step.unwrap_or(0), shape.width);
    }
    let step = u32::try_from(step?).ok()?;
    extent.of(head, end, p, Bound::Pointer { q, step })
}

/// What a register holds in an index loop's body, as far as the guard needs: unknown,
/// i as the head tested it, an invariant register's value (the register), or the sum
/// of both.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    Unknown,
    Index,
    Invariant(u8),
    BasePlusIndex(u8),
}

/// The index loop `head..=end` (`end` a JA back to `head`), if a guard can prove its
/// accesses.
fn index_loop(prog: &[u8], head: usize, end: usize) -> Option<Loop> {
    let w = word(prog, head);
    let exit = head as i64 + 1 + i64::from((w >> 16) as i16);
    if w & 0xff != JGE_IMM || exit <= end as i64 {
        return None;
    }
    let i = ((w >> 8) & 15) as usize;
    // The registers the body writes (straight through, or none of it is guarded).
    let mut written = 0u16;
    for j in head + 1..end {
        let w = word(prog, j);
        let shape = &SHAPES[w as usize & 255];
        match shape.action {
            Action::Plain | Action::End | Action::Load => written |= 1 << shape.regs.of(w).0,
            Action::Store => {}
            _ => return None,
        }
    }
    let mut value = [Value::Unknown; 16];
    for (r, v) in value.iter_mut().enumerate().take(11) {
        if r == i {
            *v = Value::Index;
        } else if written & 1 << r == 0 {
            *v = Value::Invariant(r as u8);
        }
    }
    let (mut base, mut extent) = (None, Extent::NONE);
    for j in head + 1..end {
        let w = word(prog, j);
        let shape = &SHAPES[w as usize & 255];
        let (dr, sr) = shape.regs.of(w);
        let at = match shape.action {
            Action::Load => sr,
            Action::Store => dr,
            _ => {
                value[dr] = match (w & 0xff, value[dr], value[sr]) {
                    (MOV64_REG, _, v) => v,
                    (ADD64_REG, Value::Invariant(b), Value::Index)
                    | (ADD64_REG, Value::Index, Value::Invariant(b)) => Value::BasePlusIndex(b),
                    _ => Value::Unknown,
                };
                continue;
            }
        };
        let Value::BasePlusIndex(b) = value[at] else {
            return None;
        };
        if *base.get_or_insert(b) != b {
            return None;
        }
        extent.add(i64::from((w >> 16) as i16), shape.width);
        if shape.action == Action::Load {
            value[dr] = Value::Unknown;
        }
    }
    extent.of(
        head,
        end,
        base?,
        Bound::Index {
            n: (w >> 32) as i32,
        },
    )
}

impl Emit<'_, '_> {
    /// The instance of instruction `t` as jump `from`'s target ([`super::loops`]: after
    /// the guards before it; a head is its guard's, but for the head's own loop's jump).
    #[inline(always)]
    pub(super) fn at(&self, from: usize, t: usize) -> usize {
        if self.loops.is_empty() {
            FIRST + t
        } else {
            self.at_guarded(from, t)
        }
    }

    /// [`Emit::at`] in a program with guarded loops.
    #[cold]
    #[inline(never)]
    fn at_guarded(&self, from: usize, t: usize) -> usize {
        if t == self.copying.0 {
            return self.copying.1;
        }
        let below = self.loops.iter().take_while(|l| l.head < t).count();
        let own = self
            .loops
            .get(below)
            .is_some_and(|l| l.head == t && l.end == from);
        FIRST + t + below + usize::from(own)
    }

    /// Pushes the guard of the guarded loop whose head is instruction `head` (before it);
    /// returns the next one's head (`usize::MAX` after the last).
    #[cold]
    #[inline(never)]
    pub(super) fn guard(&mut self, head: usize) -> Result<usize, Error> {
        let k = self.loops.partition_point(|l| l.head < head);
        let l = self.loops[k];
        let p = usize::from(l.p);
        let (q, imm) = match l.bound {
            Bound::Pointer { q, step } => (usize::from(q), u64::from(step)),
            Bound::Index { n } => (p, i64::from(n) as u64),
        };
        let v = &mut self.v;
        (v[usize::from(DST_AT)], v[usize::from(DST_AT2)]) = (p as u64 * 8, p as u64 * 8);
        (v[usize::from(SRC_AT)], v[usize::from(SRC_AT2)]) = (q as u64 * 8, q as u64 * 8);
        v[usize::from(IMM)] = imm;
        v[usize::from(OFF)] = off_operand(l.lo);
        v[usize::from(SITE)] = u64::from(l.span);
        let d = usize::from(self.place[p]);
        let stencil = match l.bound {
            Bound::Pointer { .. } => self.table.loop_guard[d][usize::from(self.place[q])],
            Bound::Index { .. } => self.table.index_guard[d],
        };
        self.push(stencil, Some(self.copies_at + l.copy_at))?;
        Ok(self.loops.get(k + 1).map_or(usize::MAX, |l| l.head))
    }

    /// Pushes guarded loop `k`'s copy (after the fault exits), its instructions pushed as
    /// the program's but for `copying` (`Emit::target`: its accesses unchecked, [`Emit::at`]:
    /// its jumps to its head to the copy's), then a JA to the instruction after the loop.
    /// An index loop's copy is rotated: its head's `jge i, N, out` once, then the body and
    /// `jlt i, N` back to the body's start instead of the JA back to the head, so that an
    /// iteration takes one branch, not two.
    #[cold]
    #[inline(never)]
    pub(super) fn copy(&mut self, k: usize, helpers: &impl HelperMap) -> Result<(), Error> {
        let l = self.loops[k];
        let start = self.copies_at + l.copy_at;
        let (back, after) = match l.bound {
            Bound::Pointer { .. } => (l.head, l.end + 1),
            Bound::Index { .. } => {
                let head = self.word(l.head);
                (
                    l.head + 1,
                    (l.head as i64 + 1 + i64::from((head >> 16) as i16)) as usize,
                )
            }
        };
        self.copying = (back, start + back - l.head);
        let mut j = l.head;
        while j < l.end {
            j += self.instruction(j, self.word(j), helpers)?;
        }
        let end = match l.bound {
            Bound::Pointer { .. } => self.word(l.end),
            // JLT of the head's register and immediate, to the body's start.
            Bound::Index { .. } => {
                let head = self.word(l.head);
                let to_body = (l.head as i64 - l.end as i64) as u16;
                JLT_IMM | (head & 0x0f00) | u64::from(to_body) << 16 | (head >> 32) << 32
            }
        };
        self.instruction(l.end, end, helpers)?;
        self.copying = (usize::MAX, 0);
        let after = self.at(usize::MAX, after);
        self.push(self.table.ja, Some(after))
    }

    /// Pushes the unchecked member of load or store word `w` (registers `dr`, `sr`), in a
    /// guarded loop's copy.
    pub(super) fn unchecked(&mut self, w: u64, (dr, sr): (usize, usize)) -> Result<(), Error> {
        self.v[usize::from(OFF)] = off_operand((w >> 16) as i16);
        let (d, s) = (usize::from(self.place[dr]), usize::from(self.place[sr]));
        let m = self.table.unchecked[unchecked_index(w as u8)][d & 7][s & 7];
        self.push_counted(m, &[])
    }
}

/// The index of an LDX, ST or STX opcode in `Table::unchecked`: its class (1: LDX, 2: ST,
/// 3: STX) and size field.
pub(crate) fn unchecked_index(opc: u8) -> usize {
    (usize::from(opc & 7) - 1) * 4 + usize::from(opc >> 3 & 3)
}

/// How many [`unchecked_index`]es there are.
pub(crate) const UNCHECKED: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    type Raw = (u8, u8, u8, i16, i32);

    /// The loops found in `prog` with instruction `k` replaced by `insn`.
    fn find_changed(prog: &[Raw], k: usize, insn: Raw) -> Vec<Loop> {
        let mut p = prog.to_vec();
        p[k] = insn;
        find(&asm(&p))
    }

    /// The bytecode of (opcode, dst, src, off, imm) tuples.
    fn asm(insns: &[Raw]) -> Vec<u8> {
        let insn = |&(opc, dst, src, off, imm)| crate::Insn {
            opc,
            dst,
            src,
            off,
            imm,
        };
        insns.iter().flat_map(|i| insn(i).encode()).collect()
    }

    /// The checksum loop of benches/compare.rs, with a second load past the `add`.
    const CHECKSUM: [Raw; 7] = [
        (0xbf, 2, 1, 0, 0),  // mov r2, r1
        (0x69, 4, 2, 0, 0),  // loop: ldxh r4, [r2]
        (0x0f, 0, 4, 0, 0),  // add r0, r4
        (0x07, 2, 0, 0, 2),  // add r2, 2
        (0x71, 5, 2, -3, 0), // ldxb r5, [r2 - 3]
        (0xad, 2, 3, -5, 0), // jlt r2, r3, loop
        (0x95, 0, 0, 0, 0),  // exit
    ];

    #[test]
    fn a_pointer_loop_is_guarded_with_its_accesses_extent() {
        let loops = find(&asm(&CHECKSUM));
        // Accesses at p + 0 (2 bytes) and p + 2 - 3 (1 byte): [p - 1, p + 2).
        assert_eq!(
            loops,
            [Loop {
                head: 1,
                end: 5,
                p: 2,
                bound: Bound::Pointer { q: 3, step: 2 },
                lo: -1,
                span: 3,
                copy_at: 0
            }]
        );
        let mut swapped = CHECKSUM;
        swapped[5] = (0x2d, 3, 2, -5, 0); // jgt r3, r2, loop
        assert_eq!(find(&asm(&swapped)), loops);
    }

    #[test]
    fn loops_a_guard_cannot_prove_are_not_guarded() {
        for (k, insn, why) in [
            (3, (0x07, 2, 0, 0, 0), "a step of 0"),
            (3, (0x07, 2, 0, 0, -2), "a negative step"),
            (3, (0x04, 2, 0, 0, 2), "a 32-bit add"),
            (2, (0x0f, 3, 4, 0, 0), "q written"),
            (2, (0x0f, 2, 4, 0, 0), "p written twice"),
            (1, (0x69, 4, 1, 0, 0), "an access at another base"),
            (1, (0x69, 2, 2, 0, 0), "p loaded"),
            (2, (0x55, 4, 0, 1, 0), "a jump in the body"),
            (2, (0x85, 0, 0, 0, 1), "a call in the body"),
            (5, (0xad, 2, 2, -5, 0), "p compared with itself"),
            (5, (0xa5, 2, 0, -5, 9), "a bound that is an immediate"),
            (5, (0xcd, 2, 3, -5, 0), "a signed compare"),
        ] {
            assert_eq!(find_changed(&CHECKSUM, k, insn), [], "{why}");
        }
        // No `add` at all.
        let mut p = CHECKSUM.to_vec();
        p.remove(3);
        p[4].3 = -4;
        assert_eq!(find(&asm(&p)), [], "no add");
    }

    /// The sieve's inner loop of benches/compare.rs, with a load past the store.
    const SIEVE: [Raw; 9] = [
        (0xbf, 5, 2, 0, 0),     // mov r5, r2
        (0x35, 5, 0, 6, 16384), // inner: jge r5, N, next
        (0xbf, 3, 1, 0, 0),     // mov r3, r1
        (0x0f, 3, 5, 0, 0),     // add r3, r5
        (0x72, 3, 0, 0, 1),     // stb [r3], 1
        (0x0f, 5, 2, 0, 0),     // add r5, r2
        (0x61, 4, 3, -2, 0),    // ldxw r4, [r3 - 2]
        (0x05, 0, 0, -7, 0),    // ja inner
        (0x95, 0, 0, 0, 0),     // next: exit
    ];

    #[test]
    fn an_index_loop_is_guarded_with_its_base_and_bound() {
        // Accesses at r1 + r5 + 0 (1 byte) and - 2 (4 bytes): [b + i - 2, b + i + 2).
        assert_eq!(
            find(&asm(&SIEVE)),
            [Loop {
                head: 1,
                end: 7,
                p: 1,
                bound: Bound::Index { n: 16384 },
                lo: -2,
                span: 4,
                copy_at: 0
            }]
        );
        let mut swapped = SIEVE;
        swapped[3] = (0x0f, 3, 1, 0, 0); // mov r3, r5; add r3, r1
        swapped[2] = (0xbf, 3, 5, 0, 0);
        assert_eq!(find(&asm(&swapped)).len(), 1);
    }

    #[test]
    fn index_loops_a_guard_cannot_prove_are_not_guarded() {
        for (k, insn, why) in [
            (5, (0x0f, 1, 2, 0, 0), "the base written"),
            (2, (0xbf, 3, 4, 0, 0), "a base the loop writes (r4, loaded)"),
            (3, (0x07, 3, 0, 0, 1), "no index added"),
            (3, (0x1f, 3, 5, 0, 0), "the index subtracted"),
            (2, (0x07, 5, 0, 0, 1), "the index moved before the address"),
            (1, (0x3d, 5, 2, 6, 0), "a bound in a register"),
            (1, (0x35, 5, 0, 1, 16384), "an exit inside the loop"),
            (1, (0x75, 5, 0, 6, 16384), "a signed bound"),
            (6, (0x71, 4, 10, -2, 0), "an access at another base"),
            (6, (0x55, 4, 0, 0, 0), "a jump in the body"),
        ] {
            assert_eq!(find_changed(&SIEVE, k, insn), [], "{why}");
        }
    }

    #[test]
    fn copies_follow_each_other() {
        let mut p = CHECKSUM.to_vec();
        p.pop();
        p.extend_from_slice(&CHECKSUM);
        let loops = find(&asm(&p));
        assert_eq!(loops.len(), 2);
        assert_eq!((loops[1].head, loops[1].copy_at), (7, 6));
    }

    #[test]
    fn unchecked_indices_cover_every_access_opcode_once() {
        let mut seen = [false; UNCHECKED];
        for opc in [
            0x61, 0x69, 0x71, 0x79, 0x62, 0x6a, 0x72, 0x7a, 0x63, 0x6b, 0x73, 0x7b,
        ] {
            let k = unchecked_index(opc);
            assert!(!seen[k], "{opc:#x}");
            seen[k] = true;
        }
    }
}
