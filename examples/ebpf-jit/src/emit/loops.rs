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
//! - *Nests*: `head: ... jlt i, N, head` whose body may jump forwards inside itself and
//!   hold index loops ([`index_loop`]), every access at `b + i` plus a constant (i as the
//!   iteration started: the body does not write i before it) or in one of those loops at
//!   the same base b: i starts every iteration below N (its copy tests i once before the
//!   first), so the accesses lie in `[b + lo, b + M - 1 + lo + span)`, M the largest of N
//!   and the index loops' bounds (`op_index_guard` again). The sieve's outer loop.
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
//!
//! In a nest's copy, the first block that a forward conditional jump skips and that holds
//! an index loop is laid out of line ([`Split`]): the jump inverted to it, the block
//! after the copy's end with a JA back. Skipping it (the sieve's composites) then takes no
//! branch where it took one; entering it takes one more, paid once per run of the loop it
//! holds. rbpf's JIT on the sieve written so: 1.05-1.21x as fast over 13 placements.

use super::SRC_AT2;
use super::{off_operand, Emit, DST_AT, DST_AT2, FIRST, IMM, OFF, SITE, SRC_AT};
use crate::helper::HelperMap;
use crate::scan::word;
use crate::shape::{Action, SHAPES};
use crate::Error;
use cpjit_runtime::TraceBuilder;
use std::ops::DerefMut;

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
    /// A nest's index register i and N (the JLT's), and the largest bound of its accesses'
    /// indices (N or an inner index loop's) as the guard reads it.
    Nest { i: u8, n: i32, most: i32 },
}

/// A block of a nest laid out of line in its copy: instructions `from + 1 .. to`, which
/// the conditional jump at `from` (to `to`) skips and which hold an index loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    pub from: usize,
    pub to: usize,
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
    /// A nest's block laid out of line in its copy.
    pub split: Option<Split>,
}

impl Loop {
    /// The instances of its copy: a nest's test of i before the first iteration, the loop
    /// (an index loop's rotated: its head, its body, the head's test inverted jumping back
    /// to the body), a JA to the instruction after it and, with a split, the JA back from
    /// the block laid out of line.
    fn copy_len(&self) -> usize {
        self.end - self.head + 2 + self.lead() + usize::from(self.split.is_some())
    }

    /// Where instruction `t` of the loop lies in its copy, from the copy's head: in order
    /// but for a split's block, which follows the JA after the loop.
    fn copy_offset(&self, t: usize) -> usize {
        match self.split {
            // (Past the rest of the loop and its JA: `end - head + 2 - (to - from - 1)`.)
            Some(s) if t > s.from && t < s.to => self.end + 2 + t - self.head - s.to,
            Some(s) if t >= s.to => t - self.head - (s.to - s.from - 1),
            _ => t - self.head,
        }
    }

    /// The instances of its copy before its head's: a nest's test of i.
    fn lead(&self) -> usize {
        usize::from(matches!(self.bound, Bound::Nest { .. }))
    }
}

/// The loops of `prog` the compiler guards, by their heads (they cannot overlap but for
/// a nest's index loops: a pointer or index loop's body has no jump).
pub(crate) fn find(prog: &[u8]) -> Vec<Loop> {
    let mut loops: Vec<Loop> = Vec::new();
    for end in 0..prog.len() / crate::INSN_SIZE {
        let w = word(prog, end);
        let off = (w >> 16) as i16;
        // (A backward jump's target: the offset of anything else means no such thing.)
        if off >= 0 || !matches!(w & 0xff, JLT_REG | JGT_REG | JA | JLT_IMM) {
            continue;
        }
        let head = (end as i64 + 1 + i64::from(off)) as usize;
        if head > 0 && word(prog, head - 1) as u8 == LD_DW {
            continue;
        }
        let found = match w & 0xff {
            JLT_REG | JGT_REG => pointer_loop(prog, head, end, w),
            JA => index_loop(prog, head, end),
            _ => nest(prog, head, end, &loops),
        };
        loops.extend(found);
    }
    // (Found by their ends: a nest after the loops it holds.)
    if loops.windows(2).any(|w| w[0].head > w[1].head) {
        loops.sort_by_key(|l| l.head);
    }
    for k in 0..loops.len() {
        if let Bound::Nest { .. } = loops[k].bound {
            loops[k].split = split(prog, &loops[k], &loops[k + 1..]);
        }
    }
    let mut copy_at = 0;
    for l in &mut loops {
        l.copy_at = copy_at;
        copy_at += l.copy_len();
    }
    loops
}

/// The inverse of a conditional jump's condition (its opcode's high nibble), if it has
/// one (JSET has none).
fn inverse(cond: u8) -> Option<u8> {
    const PAIRS: [(u8, u8); 5] = [(0x1, 0x5), (0x2, 0xb), (0x3, 0xa), (0x6, 0xd), (0x7, 0xc)];
    PAIRS.iter().find_map(|&(a, b)| match cond {
        _ if cond == a => Some(b),
        _ if cond == b => Some(a),
        _ => None,
    })
}

/// Nest `l`'s first block to lay out of line in its copy: skipped by a forward conditional
/// jump with an inverse, inside the body, holding one of the index loops that follow it
/// in `after` (those of a nest come next).
fn split(prog: &[u8], l: &Loop, after: &[Loop]) -> Option<Split> {
    let inner: Vec<&Loop> = after.iter().take_while(|m| m.head < l.end).collect();
    let mut j = l.head;
    while j < l.end {
        if let Some(m) = inner.iter().find(|m| m.head == j) {
            j = m.end + 1;
            continue;
        }
        let w = word(prog, j);
        let to = j as i64 + 1 + i64::from((w >> 16) as i16);
        let conditional = matches!(w & 7, 5 | 6) && inverse(w as u8 >> 4).is_some();
        if conditional && to > j as i64 + 1 && to <= l.end as i64 {
            let to = to as usize;
            if inner.iter().any(|m| m.head > j && m.end < to) {
                return Some(Split { from: j, to });
            }
        }
        j += 1;
    }
    None
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
            split: None,
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
        visit(word(prog, j), &mut value, &mut base, &mut extent)?;
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

/// Where index loop `l` exits to (its head's JGE's target).
fn exit_of(prog: &[u8], l: &Loop) -> usize {
    (l.head as i64 + 1 + i64::from((word(prog, l.head) >> 16) as i16)) as usize
}

/// The nest `head..=end` (`end` a JLT of an immediate back to `head`), if a guard can
/// prove its accesses; `found`: the loops that end before it.
fn nest(prog: &[u8], head: usize, end: usize, found: &[Loop]) -> Option<Loop> {
    let w = word(prog, end);
    let i = ((w >> 8) & 15) as usize;
    let n = (w >> 32) as i32;
    let inner: Vec<&Loop> = found.iter().filter(|l| l.end >= head).collect();
    // Its index loops lie inside its body, exit inside it, and leave i alone.
    for l in &inner {
        let Bound::Index { .. } = l.bound else {
            return None;
        };
        if l.head <= head || exit_of(prog, l) > end || writes(prog, l.head..l.end + 1, i) {
            return None;
        }
    }
    // The registers the body writes; the places its jumps (and its loops' exits) land on.
    let mut written = 0u16;
    let mut labels = vec![false; end - head + 1];
    for j in head..end {
        let w = word(prog, j);
        let shape = &SHAPES[w as usize & 255];
        match shape.action {
            Action::Plain | Action::End | Action::Load => written |= 1 << shape.regs.of(w).0,
            Action::Store => {}
            Action::Jump => {
                let t = j as i64 + 1 + i64::from((w >> 16) as i16);
                let inside = inner.iter().any(|l| l.head <= j && j <= l.end);
                if !inside && (t <= j as i64 || t > end as i64) {
                    return None;
                }
                labels[(t as usize).max(head) - head] = true;
            }
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
    let (mut base, mut extent, mut most) = (None, Extent::NONE, i64::from(n) as u64);
    let mut j = head;
    while j < end {
        if labels[j - head] {
            // Reached from elsewhere: only invariants and i (if unwritten so far) known.
            let index = !writes(prog, head..j, i);
            for (r, v) in value.iter_mut().enumerate() {
                *v = match r {
                    _ if r == i && index => Value::Index,
                    0..=10 if r != i && written & 1 << r == 0 => Value::Invariant(r as u8),
                    _ => Value::Unknown,
                };
            }
        }
        if let Some(l) = inner.iter().find(|l| l.head == j) {
            if *base.get_or_insert(l.p) != l.p {
                return None;
            }
            extent.lo = extent.lo.min(i64::from(l.lo));
            extent.hi = extent.hi.max(i64::from(l.lo) + i64::from(l.span));
            let Bound::Index { n } = l.bound else {
                return None;
            };
            most = most.max(i64::from(n) as u64);
            for (r, v) in value.iter_mut().enumerate() {
                if writes(prog, l.head..l.end + 1, r) {
                    *v = Value::Unknown;
                }
            }
            j = l.end + 1;
            continue;
        }
        let w = word(prog, j);
        if SHAPES[w as usize & 255].action != Action::Jump {
            visit(w, &mut value, &mut base, &mut extent)?;
        }
        j += 1;
    }
    let most = most as i64 as i32;
    extent.of(
        head,
        end,
        base?,
        Bound::Nest {
            i: i as u8,
            n,
            most,
        },
    )
}

/// Whether an instruction of `range` writes register `r`.
fn writes(prog: &[u8], range: std::ops::Range<usize>, r: usize) -> bool {
    range.into_iter().any(|j| {
        let w = word(prog, j);
        let shape = &SHAPES[w as usize & 255];
        matches!(shape.action, Action::Plain | Action::End | Action::Load)
            && shape.regs.of(w).0 == r
    })
}

/// Instruction `w` of an index loop's or a nest's body, not a jump: an access's extent
/// (`None` where it is not at `b + i` plus a constant, `base` b for every access), else
/// what it leaves in its destination.
fn visit(
    w: u64,
    value: &mut [Value; 16],
    base: &mut Option<u8>,
    extent: &mut Extent,
) -> Option<()> {
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
            return Some(());
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
    Some(())
}

impl<'j, B: DerefMut<Target = TraceBuilder<'j, 'static>>> Emit<'_, B> {
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
        let (head, end, at) = self.copying;
        if (head..=end).contains(&t) {
            let k = self.loops.partition_point(|l| l.head < head);
            return at + self.loops[k].copy_offset(t);
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
            Bound::Index { n } | Bound::Nest { most: n, .. } => (p, i64::from(n) as u64),
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
            Bound::Index { .. } | Bound::Nest { .. } => self.table.index_guard[d],
        };
        self.push(stencil, Some(self.copies_at + l.copy_at))?;
        Ok(self.loops.get(k + 1).map_or(usize::MAX, |l| l.head))
    }

    /// Pushes guarded loop `k`'s copy (after the return chain), its instructions pushed as
    /// the program's but for `copying` (`Emit::target`: its accesses unchecked, [`Emit::at`]:
    /// its jumps to its head to the copy's), then a JA to the instruction after the loop.
    /// An index loop's copy is rotated: its head's `jge i, N, out` once, then the body and
    /// `jlt i, N` back to the body's start instead of the JA back to the head, so that an
    /// iteration takes one branch, not two; so are a nest's index loops in its copy where
    /// they exit to the instruction after them. A nest's copy starts with `jge i, N` to
    /// its checked head: i below N is what its guard assumed of the first iteration.
    #[cold]
    #[inline(never)]
    pub(super) fn copy(&mut self, k: usize, helpers: &impl HelperMap) -> Result<(), Error> {
        let l = self.loops[k];
        let start = self.copies_at + l.copy_at;
        let after = match l.bound {
            Bound::Index { .. } => self.exit(l.head),
            Bound::Pointer { .. } | Bound::Nest { .. } => l.end + 1,
        };
        if let Bound::Nest { i, n, .. } = l.bound {
            // i below N before the first iteration too, else the loop as written: the test
            // jumps as the loop's own backward jump does, to its checked head.
            let to_head = (l.head as i64 - l.end as i64 - 1) as u16;
            let test = JGE_IMM | u64::from(i) << 8 | u64::from(to_head) << 16;
            self.instruction(l.end, test | u64::from(n as u32) << 32, helpers)?;
        }
        self.copying = (l.head, l.end, start + l.lead());
        // (In the order of `Loop::copy_offset`.)
        let body = match l.split {
            Some(s) => [l.head..s.from + 1, s.to..l.end],
            None => [l.head..l.end, l.end..l.end],
        };
        for range in body {
            self.copy_body(k, range, helpers)?;
        }
        let end = match l.bound {
            Bound::Index { .. } => self.rotated(l.head, l.end),
            Bound::Pointer { .. } | Bound::Nest { .. } => self.word(l.end),
        };
        self.instruction(l.end, end, helpers)?;
        let after = self.at(usize::MAX, after);
        self.push(self.table.ja, Some(after))?;
        if let Some(s) = l.split {
            self.copy_body(k, s.from + 1..s.to, helpers)?;
            let back = self.at(usize::MAX, s.to);
            self.push(self.table.ja, Some(back))?;
        }
        self.copying = (usize::MAX, 0, 0);
        Ok(())
    }

    /// Pushes instructions `range` of guarded loop `k`'s copy: a nest's index loops rotated
    /// where they exit to the instruction after them, a split's jump inverted to its block.
    fn copy_body(
        &mut self,
        k: usize,
        range: std::ops::Range<usize>,
        helpers: &impl HelperMap,
    ) -> Result<(), Error> {
        let l = self.loops[k];
        let mut j = range.start;
        while j < range.end {
            let inner = self.loops[k + 1..]
                .iter()
                .take_while(|m| m.head < l.end)
                .find(|m| m.end == j && self.exit(m.head) == j + 1);
            let w = match (inner, l.split) {
                (Some(m), _) => self.rotated(m.head, m.end),
                (None, Some(s)) if s.from == j => {
                    // Offset 0: to the next instruction, the block (`Loop::copy_offset`).
                    let w = self.word(j);
                    let cond = inverse(w as u8 >> 4).expect("`split` takes invertible jumps");
                    w & !0xffff_00ff | u64::from(cond << 4 | (w as u8 & 0x0f))
                }
                _ => self.word(j),
            };
            j += self.instruction(j, w, helpers)?;
        }
        Ok(())
    }

    /// Where the index loop whose head is `head` exits to (its JGE's target).
    fn exit(&self, head: usize) -> usize {
        (head as i64 + 1 + i64::from((self.word(head) >> 16) as i16)) as usize
    }

    /// The backward jump of the index loop `head..=end` rotated: a JLT of the head's
    /// register and immediate, to the body's start.
    fn rotated(&self, head: usize, end: usize) -> u64 {
        let w = self.word(head);
        let to_body = (head as i64 - end as i64) as u16;
        JLT_IMM | (w & 0x0f00) | u64::from(to_body) << 16 | (w >> 32) << 32
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
mod tests;
