//! Per-stencil patch programs, compiled once in [`Jit::new`](crate::Jit::new) so that
//! `finish` does per instance only a copy and a tight loop over a short list of steps.
//!
//! A [`Program`] holds what never changes between instances of one stencil: its code,
//! prepared and padded to 16-byte blocks (so that the copy is a block copy), its data bytes
//! (initialized part and zero-fill, padded with zeros to 16-byte blocks) with their
//! alignment, and one [`Step`] per hole (or per
//! AArch64 GOT `adrp` + `ldr` pair) saying where in the instance the hole is, where its value
//! comes from and how it is written: a [`Fast`] form chosen once, where the instruction
//! allows one, with the full [`Action`] as fallback. The commonest whole programs also
//! have a [`Quick`] form, and the GOT slots and veneers an instance may need are counted
//! behind a [`NeedFilter`]. The per-architecture facts `finish` needs (trap byte, tail
//! jump, veneer builder) are gathered once in [`ArchFacts`], so that the stitcher has no
//! `match` on the architecture.
//!
//! A set's programs keep their code, data, steps, needs and cold parts in one buffer each
//! ([`pool`]), not an allocation each.

mod arch;
#[cfg(test)]
mod fixtures;
mod need;
mod operand;
mod pool;
mod rel;

use crate::patch;
pub(crate) use arch::{ArchFacts, WriteVeneer};
use cpjit_isa::x86_64 as x86;
use cpjit_model::{
    Hole, HoleKind, HoleValue, OperandPart, OperandRange, Section, Stencil, StencilSet,
};
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) use fixtures::X86_RET;
#[cfg(test)]
pub(crate) use fixtures::{code_hole, host_set};
pub(crate) use need::{Bound, Key, Need, NeedFilter};
pub(crate) use operand::OperandStep;
#[cfg(test)]
pub(crate) use pool::Alone;
use pool::Pool;
pub(crate) use pool::{Pooled, PooledCold, Programs};
use rel::flat_quick;
pub(crate) use rel::{RelSite, RelTo, MIXED_SITES};

/// Where a hole's value comes from, per instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// A plain tag byte (no niche in a field): `push` and `write` dispatch on it directly.
#[repr(u8)]
pub(crate) enum Source {
    /// The instance's operand `i` (a constant), or one 32-bit half of it.
    Operand(u16, OperandPart),
    /// The instance's jump target `i`.
    Target(u16),
    /// The next instance, or the trace's continuation after the last one.
    Continue,
    /// The instance's own code (run for a cold part, that part: see [`Program::cold`]).
    Code,
    /// The other part of the instance's code: the cold part for its hot code, the hot code
    /// for its cold part.
    Cold,
    /// The instance's own data.
    Data,
    /// External symbol `i`, resolved through the [`Jit`](crate::Jit)'s cache.
    Symbol(u16),
}

/// How a hole is written once its value is known; decided once per stencil from its kind,
/// addend and neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Patched as is (`S + A`).
    Plain,
    /// A direct branch: through a veneer if the destination is outside the trace and out
    /// of range.
    Branch,
    /// A load through a GOT slot holding the value.
    Got,
    /// An x86-64 GOT load (`REX_GOTPCRELX`, addend −4): relaxed to an immediate or a direct
    /// address where the value allows it, otherwise through a GOT slot.
    RelaxableGot,
    /// An AArch64 `adrp` + `ldr` GOT pair (this step is the `adrp`; the `ldr` is the
    /// stencil's hole `ldr_hole` at `ldr_offset`): relaxed to code that materialises the
    /// value where possible, otherwise both patched through a GOT slot.
    GotPair { ldr_hole: u16, ldr_offset: u32 },
}

/// One hole of a stencil, ready to patch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    /// Offset of the hole into the instance's code or data.
    pub offset: u32,
    /// Index of the hole in the stencil (for errors).
    pub hole: u16,
    pub section: Section,
    pub kind: HoleKind,
    pub source: Source,
    pub addend: i64,
    pub action: Action,
    /// What was checked once, on the stencil's own bytes, of the instruction around the hole.
    pub checked: Checked,
    /// The per-instance fast form, if the hole has one.
    pub fast: Fast,
    /// The stencil's 3 bytes before the field: for [`Fast::Imm32`], its GOT load's REX, opcode
    /// and ModRM, put back for an operand too wide for the immediate form without a look at
    /// the stencil (a cold call, 41 instructions per such operand in the VM's calls trace).
    pub before: [u8; 3],
}

/// How a hole is written per instance when its value allows it, chosen once per stencil by
/// [`Program::compile`]. Each form writes exactly the bytes the full path ([`Action`], the
/// patch functions) would write for such a value; any other value (out of range, an
/// unknown symbol, a missing instance) takes the full path, which writes the other form or
/// reports the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// A plain tag byte (no niche in a field): `push` and `write` dispatch on it directly.
#[repr(u8)]
pub(crate) enum Fast {
    /// None: always the full path.
    Full,
    /// An x86-64 rel32 field of a checked instruction ([`Checked::Rel32`]): one range check
    /// and a 4-byte store of `value + addend - place`.
    Rel32,
    /// As `Rel32`, on a GOT reference that [`Program::code`] already holds in its direct
    /// form (`lea`, `addr32 call`); the fallback first restores the stencil's instruction.
    Direct,
    /// A 64-bit GOT load of an operand that [`Program::code`] already holds in its `imm32`
    /// form (`mov r64, imm32`, `op r64, imm32`): if the operand fits a sign-extended
    /// 32-bit immediate, a 4-byte store of it; otherwise the stencil's instruction is
    /// restored and the full path loads it (directly or through a GOT slot). The operand
    /// (its index and part) is the hole's value, here so that the store needs no look at
    /// the step's [`Source`].
    Imm32 { operand: u16, part: OperandPart },
    /// An x86-64 absolute 32-bit field ([`HoleKind::X86Abs32`]) of an operand: if the
    /// operand plus the addend lies in `i32::MIN..=u32::MAX`, a 4-byte store of its low
    /// half, as `patch_x86_abs32` writes it; otherwise the full path reports it. (A client's
    /// local offsets and small constants: most of the reference VM's operand holes.)
    Abs32 { operand: u16, part: OperandPart },
    /// A narrow operand's range check ([`HoleKind::operand_check`], no bytes): nothing to
    /// do if the operand plus the addend is in `range`; otherwise the full path reports it.
    Check {
        operand: u16,
        part: OperandPart,
        range: OperandRange,
    },
    /// An x86-64 GOT load of an operand by an instruction with no immediate form
    /// ([`Action::Got`] on a checked rel32 field, such as `mul r/m64`): the operand's GOT
    /// slot (one per value and trace, as the full path shares it) and a 4-byte store of the
    /// slot's displacement; the full path if the displacement does not fit. (A client's
    /// 64-bit constants: the reference VM's division magic numbers.)
    Got { operand: u16, part: OperandPart },
}

/// What [`Program::compile`] checked of a hole's instruction on the stencil's bytes, so that
/// `finish` only repeats the checks that depend on the value (range, alignment). Holes
/// checked here are x86-64 rel32 fields, whose instruction bytes (before the field) are the
/// stencil's own and never change between instances; every other hole, and one whose check
/// failed here, is checked in full by [`patch::patch`] per instance (which reports the
/// error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Nothing: the patch function checks everything.
    Nothing,
    /// An x86-64 rel32 field whose instruction is the class its kind patches: writing it
    /// only needs the displacement's range.
    Rel32,
    /// As `Rel32`, and a relaxable GOT reference decoded once into its site.
    X86GotSite(cpjit_isa::x86_64::GotSite),
}

/// The whole patch program of the commonest stencils in one form `write` runs without a
/// loop or a dispatch per step: one or two `imm32` fields of whole operands, or one or two
/// rel32 references from the code to the instance's own data. Every other program is
/// [`Quick::General`]. A quick form only writes when all its values fit; otherwise `write`
/// runs the steps, which write the same bytes or take the full path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quick {
    /// No steps: nothing to patch.
    Nothing,
    /// One or two [`Fast::Imm32`] steps: the `imm32` field at the offset of each site takes
    /// the whole operand it names (sign-extended 32-bit). A program of one step has its
    /// site twice (storing it twice costs less than a test of the count).
    Imm32 { sites: [(u32, u16); 2] },
    /// One or two [`Fast::Rel32`] steps from the code to the instance's data: the field at
    /// the offset of each site takes `data - place + k`, where `k` is the step's addend less
    /// its offset (the same for every instance). One step's site is there twice.
    DataRel32 { sites: [(u32, i64); 2] },
    /// Any number of steps that each take an operand ([`Fast::Imm32`], [`Fast::Abs32`],
    /// [`Fast::Check`]), run in one loop without a dispatch per step: the [`OperandStep`]s
    /// `from..from + len` of the JIT's flat array (see [`compile`]): at least one, each
    /// storing its field (a program with a range check of its own is [`Quick::Mixed`]).
    Operands { from: u32, len: u32 },
    /// One [`Fast::Rel32`] or [`Fast::Direct`] step to a symbol (a helper's `call`): the
    /// field at `offset` takes `symbol - code + k`, where `k` is the step's addend less
    /// `offset`, once the symbol is resolved (its first use resolves it, out of line).
    Symbol { offset: u32, symbol: u16, k: i64 },
    /// One [`Fast::Rel32`] step to jump target `target` (a branch's), the same field: it
    /// takes `to - code + k` when the target is an instance of the trace; another target
    /// (an address) goes to the steps.
    Target { offset: u32, target: u16, k: i64 },
    /// Operand steps (`from..from + len` of the flat array, as [`Quick::Operands`]) and
    /// `count` (0 to [`MIXED_SITES`]) rel32 fields ([`RelSite`]): branches into the cold
    /// part, to jump targets and the next instance, references to data, code and symbols
    /// (see [`rel`]).
    Mixed {
        from: u32,
        len: u16,
        count: u8,
        sites: [RelSite; MIXED_SITES],
    },
    /// Anything else: the steps, one by one.
    General,
}

impl Quick {
    /// The quick form of these steps of a stencil of `code_len` bytes of code. Each site's
    /// field lies inside the code (`write` stores it without a bounds check), and each
    /// `imm32` site's operand is below `operands` (read without one).
    fn of(steps: &[Step], code_len: u32, operands: u16) -> Quick {
        if steps.is_empty() {
            return Quick::Nothing;
        }
        if steps.len() > 2 {
            return Quick::General;
        }
        let inside = |s: &Step| {
            s.section == Section::Code && s.offset.checked_add(4).is_some_and(|e| e <= code_len)
        };
        let imm32 = |s: &Step| match s.fast {
            Fast::Imm32 {
                operand,
                part: OperandPart::Whole,
            } if inside(s) && operand < operands => Some((s.offset, operand)),
            _ => None,
        };
        let data = |s: &Step| {
            (s.fast == Fast::Rel32 && s.source == Source::Data && inside(s))
                .then(|| (s.offset, s.addend.wrapping_sub(s.offset as i64)))
        };
        if let [s] = steps {
            if let (Fast::Rel32 | Fast::Direct, Source::Symbol(symbol), true) =
                (s.fast, s.source, inside(s))
            {
                let k = s.addend.wrapping_sub(s.offset as i64);
                return Quick::Symbol {
                    offset: s.offset,
                    symbol,
                    k,
                };
            }
            if let (Fast::Rel32, Source::Target(target), true) = (s.fast, s.source, inside(s)) {
                let k = s.addend.wrapping_sub(s.offset as i64);
                return Quick::Target {
                    offset: s.offset,
                    target,
                    k,
                };
            }
        }
        let last = steps.len() - 1;
        if let (Some(a), Some(b)) = (imm32(&steps[0]), imm32(&steps[last])) {
            return Quick::Imm32 { sites: [a, b] };
        }
        if let (Some(a), Some(b)) = (data(&steps[0]), data(&steps[last])) {
            return Quick::DataRel32 { sites: [a, b] };
        }
        Quick::General
    }
}

/// Everything `finish` needs of one stencil.
pub(crate) struct Program {
    /// Its steps in a quick form, where they have one.
    pub quick: Quick,
    pub steps: Pooled<Step>,
    /// The steps that may need a GOT slot or a veneer.
    pub needs: Pooled<Need>,
    /// Whether an instance's needs can count at all (tested by `push` first).
    pub filter: NeedFilter,
    /// How many of `needs` are [`Bound::Continue`] (counted by `finish` for the last
    /// instance only: whether an instance is the last is not known when it is pushed).
    pub continue_needs: u16,
    /// The stencil's code with its holes' [`Fast`] forms applied, padded with the trap byte
    /// to a multiple of 16 bytes: copied in 16-byte blocks.
    pub code: Pooled<u8>,
    /// The stencil's data: initialized bytes, then zeros (its zero-fill), `data_len` bytes,
    /// padded with zeros to a multiple of 16 bytes: copied in 16-byte blocks.
    pub data: Pooled<u8>,
    /// The stencil's code and data sizes and alignments (copied here so that laying out a
    /// trace reads one table).
    pub code_len: u32,
    pub data_len: u32,
    pub code_align: u32,
    pub data_align: u32,
    /// Operands and jump targets an instance takes, and whether the stencil is the set's
    /// entry shim.
    pub operands: u16,
    pub targets: u16,
    pub shim: bool,
    /// Whether execution can go on to the next instance pushed: the stencil falls through
    /// or has a continue hole (its cold part's included); for `bind`, which reads it here
    /// rather than in the stencil's own (colder) record.
    pub continues: bool,
    /// Whether an instance is placed by its code length alone: no data, no cold part, code
    /// alignment 1 (every x86-64 stencil of the repository's sets but those with data or a
    /// cold part). `push` and `write` then skip the rounding and the tests of both parts.
    pub plain: bool,
    /// The operand and jump-target counts `push` accepts on its fast path: the stencil's,
    /// except that the entry shim's `push_targets` is `usize::MAX`, which no slice's length
    /// equals, so that one comparison per count is the whole check of the common case and
    /// the shim (allowed only as instance 0) is pushed by the cold path.
    pub push_operands: u32,
    /// The operands `push_ops` takes for an instance in a straight run: `push_operands`,
    /// or `u32::MAX` (more than any run has left, so that one comparison ends the run) for
    /// a stencil with jump targets and the shim, which it leaves to `push_op`.
    pub run_operands: u32,
    pub push_targets: usize,
    /// The stencil's cold part ([`Stencil::cold_len`]), compiled on its own, and its length
    /// and alignment (copied here for `push`). Its steps see the cold part as the
    /// instance's code ([`Source::Code`]) and the hot code as the other part
    /// ([`Source::Cold`]): the writer runs them with the trace's cold area as its code. Its
    /// needs are counted with this program's (`needs`, `filter`; its own `needs` is empty).
    pub cold: Option<PooledCold>,
    pub cold_len: u32,
    pub cold_align: u32,
    /// Bytes of the hot code before the cold part in the stencil's code (where the cold
    /// part's hole offsets start).
    pub hot_len: u32,
}

// Three cache lines: at 208 bytes `push` and `write` were slower (wave 26).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Program>() == 192);

impl Program {
    /// [`Program::compile`] with buffers of its own, for tests.
    #[cfg(test)]
    pub fn alone(stencil: &Stencil<'_>, shim: bool, trap: u8) -> Alone {
        let mut c = Compiler::new(std::slice::from_ref(stencil), trap);
        let p = Program::compile(stencil, shim, &mut c);
        Alone(Programs::new(Box::new([p]), c.pool))
    }

    /// Compiles `stencil`'s holes, which [`Jit::new`](crate::Jit::new) has validated (each
    /// lies inside its section and refers to an operand, target or symbol that exists),
    /// with `c`'s buffers, into its pool.
    fn compile(stencil: &Stencil<'_>, shim: bool, c: &mut Compiler) -> Program {
        // The parts append their needs here, the hot part's first.
        c.scratch.needs.clear();
        let mut p = if stencil.cold_len == 0 || stencil.cold_len as usize > stencil.code.len() {
            Program::part(stencil, shim, Renumber::NONE, c)
        } else {
            Program::split(stencil, shim, c)
        };
        // The whole stencil's needs, one per slot or veneer (its filter, of every need,
        // rules out no less).
        need::merge_shared(&mut c.scratch.needs);
        p.needs = c.pool.needs(&c.scratch.needs);
        p.continues =
            stencil.falls_through || stencil.holes.iter().any(|h| h.value == HoleValue::Continue);
        p.plain = p.code_align <= 1 && p.data_len == 0 && p.cold_len == 0;
        p
    }

    /// The program of a stencil with a cold part: one for its hot code and data, one for
    /// its cold part (see [`Program::cold`]), whose needs it counts.
    fn split(stencil: &Stencil<'_>, shim: bool, c: &mut Compiler) -> Program {
        let hot_len = stencil.hot_len();
        // Holes are sorted by (section, offset): hot code, cold code, then data.
        let holes = stencil.holes;
        let a =
            holes.partition_point(|h| h.section == Section::Code && (h.offset as usize) < hot_len);
        let b = holes.partition_point(|h| h.section == Section::Code);
        let other = |v: HoleValue| match v {
            HoleValue::Code => HoleValue::Cold,
            HoleValue::Cold => HoleValue::Code,
            v => v,
        };
        // Taken out of `scratch` while the parts are compiled with its other buffers.
        let (mut hot_holes, mut cold_holes) = std::mem::take(&mut c.scratch.holes);
        hot_holes.clear();
        hot_holes.extend(holes[..a].iter().chain(&holes[b..]));
        cold_holes.clear();
        cold_holes.extend(holes[a..b].iter().map(|h| Hole {
            offset: h.offset - hot_len as u32,
            value: other(h.value),
            ..*h
        }));
        let hot = Stencil {
            code: &stencil.code[..hot_len],
            holes: &hot_holes,
            cold_len: 0,
            ..*stencil
        };
        let cold = Stencil {
            code: &stencil.code[hot_len..],
            holes: &cold_holes,
            init_data: &[],
            data_len: 0,
            zero_fill: &[],
            cold_len: 0,
            ..*stencil
        };
        // Steps name their holes (in errors) by index into the stencil's own list.
        let (a16, gap) = (a as u16, (b - a) as u16);
        let hot_holes_at = Renumber {
            from: a16,
            add: gap,
        };
        let mut p = Program::part(&hot, shim, hot_holes_at, c);
        let cold_holes_at = Renumber { from: 0, add: a16 };
        let part = Program::part(&cold, false, cold_holes_at, c);
        c.scratch.holes = (hot_holes, cold_holes);
        p.continue_needs += part.continue_needs;
        p.filter = NeedFilter::of(&c.scratch.needs);
        p.cold_len = part.code_len;
        p.cold_align = part.code_align;
        p.hot_len = hot_len as u32;
        p.cold = Some(c.pool.cold(part));
        p
    }

    /// The program of `stencil`'s code (all of it: its cold part is split off by
    /// [`Program::split`] first); its steps name their holes `holes_at` of the stencil's.
    fn part(stencil: &Stencil<'_>, shim: bool, holes_at: Renumber, c: &mut Compiler) -> Program {
        let (trap, pool) = (c.trap, &mut c.pool);
        let Scratch {
            probe,
            paired,
            steps,
            needs,
            code,
            ..
        } = &mut c.scratch;
        steps.clear();
        // (Appended to the needs of the stencil's parts compiled before, see `compile`.)
        let first_need = needs.len();
        // Padded as `pool.bytes` pads it: `fast` sees the program's code.
        padded(code, stencil.code, trap);
        // The `ldr` holes already taken by their `adrp`'s step.
        paired.clear();
        paired.resize(stencil.holes.len(), false);
        for (i, h) in stencil.holes.iter().enumerate() {
            if h.kind == HoleKind::EntryParameters || paired[i] {
                // A marker (the shim's parameter count, see `Jit::shim`): nothing to patch;
                // or the `ldr` of a GOT pair, patched by its `adrp`'s step.
                continue;
            }
            let action = match got_pair_ldr(stencil, i) {
                Some(j) => {
                    paired[j] = true;
                    Action::GotPair {
                        ldr_hole: holes_at.map(j as u16),
                        ldr_offset: stencil.holes[j].offset,
                    }
                }
                _ if h.kind.is_relaxable_x86_got() && h.addend == -4 => Action::RelaxableGot,
                _ if h.kind.uses_got() => Action::Got,
                _ if h.kind.is_branch() => Action::Branch,
                _ => Action::Plain,
            };
            needs.extend(Need::of(stencil, h, action, probe));
            let checked = checked(stencil, h, probe);
            // The stencil's own bytes, as `fast` may rewrite the program's code.
            let at = (h.offset as usize).wrapping_sub(3);
            let before = match stencil.code.get(at..at.wrapping_add(3)) {
                Some(&[a, b, c]) if h.section == Section::Code => [a, b, c],
                _ => [0; 3],
            };
            steps.push(Step {
                offset: h.offset,
                hole: holes_at.map(i as u16),
                section: h.section,
                kind: h.kind,
                source: source(h.value),
                addend: h.addend,
                action,
                checked,
                fast: fast(code, h, action, checked, probe),
                before,
            });
        }
        let needs = &needs[first_need..];
        Program {
            continue_needs: needs.iter().filter(|n| n.bound == Bound::Continue).count() as u16,
            filter: NeedFilter::of(needs),
            quick: Quick::of(
                steps,
                stencil.code.len() as u32,
                stencil.operands.len() as u16,
            ),
            // Copied out of the scratch buffers into the set's pool.
            steps: pool.steps(steps),
            // Set by `compile`, for the whole stencil.
            needs: pool.needs(&[]),
            code: pool.bytes(code, trap, code.len()),
            data: pool.bytes(stencil.init_data, 0, stencil.data_len as usize),
            code_len: stencil.code.len() as u32,
            data_len: stencil.data_len,
            code_align: stencil.code_align,
            data_align: stencil.data_align,
            operands: stencil.operands.len() as u16,
            targets: stencil.targets.len() as u16,
            shim,
            continues: false,
            // Set by `compile`, once the cold part is known.
            plain: false,
            push_operands: stencil.operands.len() as u32,
            run_operands: if shim || !stencil.targets.is_empty() {
                u32::MAX
            } else {
                stencil.operands.len() as u32
            },
            push_targets: if shim {
                usize::MAX
            } else {
                stencil.targets.len()
            },
            cold: None,
            cold_len: 0,
            cold_align: 1,
            hot_len: stencil.code.len() as u32,
        }
    }
}

/// The programs of every stencil of `set`, by stencil index, and the [`OperandStep`]s of
/// those (and of their cold parts) that are [`Quick::Operands`] or [`Quick::Mixed`] (see
/// [`flat_quick`]), one flat array.
pub(crate) fn compile(set: &StencilSet<'_>) -> (Programs, Box<[OperandStep]>) {
    let mut c = Compiler::new(set.stencils, ArchFacts::of(set.arch).trap);
    let mut programs: Box<[Program]> = set
        .stencils
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let shim = set.shim == Some(i as u16);
            Program::compile(s, shim, &mut c)
        })
        .collect();
    let mut flat = Vec::new();
    let mut operand_steps = Vec::new();
    for p in programs.iter_mut() {
        p.quick = flat_quick(p, false, &mut flat, &mut operand_steps);
        if let Some(cold) = p.cold.as_mut().map(PooledCold::get_mut) {
            cold.quick = flat_quick(cold, true, &mut flat, &mut operand_steps);
        }
    }
    (Programs::new(programs, c.pool), flat.into_boxed_slice())
}

/// Where the steps of a part of a stencil find their holes in the stencil's own list: hole
/// `i` of the part is the stencil's `i + add` from `from` on (see [`Program::split`]).
#[derive(Clone, Copy)]
struct Renumber {
    from: u16,
    add: u16,
}

impl Renumber {
    /// A whole stencil's holes.
    const NONE: Renumber = Renumber { from: 0, add: 0 };

    fn map(self, i: u16) -> u16 {
        if i >= self.from {
            i + self.add
        } else {
            i
        }
    }
}

/// The fast form of hole `h` (see [`Fast`]), and `code` (the program's copy of the
/// stencil's code) rewritten into the form it writes into. Only x86-64 rel32 fields whose
/// instruction was checked once qualify; the rewrites are the ISA crate's relaxations, run
/// once here on the stencil's bytes.
fn fast(code: &mut [u8], h: &Hole, action: Action, checked: Checked, probe: &mut Vec<u8>) -> Fast {
    let offset = h.offset as usize;
    // An operand's abs32 field or range check in the code: a store or a compare (the full
    // path, `Action::Plain`, patches exactly that; its field lies inside the code, which
    // `Jit::new` validated).
    if let (Some((operand, part)), Section::Code, Action::Plain) =
        (h.value.operand(), h.section, action)
    {
        if h.kind == HoleKind::X86Abs32 {
            return Fast::Abs32 { operand, part };
        }
        if let Some(range) = h.kind.operand_check() {
            return Fast::Check {
                operand,
                part,
                range,
            };
        }
    }
    match (action, checked) {
        (_, Checked::Nothing) => Fast::Full,
        (Action::Plain | Action::Branch, _) => Fast::Rel32,
        (Action::Got, Checked::Rel32) => match h.value.operand() {
            Some((operand, part)) => Fast::Got { operand, part },
            None => Fast::Full,
        },
        (Action::RelaxableGot, Checked::X86GotSite(site)) => {
            let immediate = x86::relax_got_to_immediate(copy(probe, code), offset, site, 0);
            match h.value {
                // An operand (or a half): the immediate form whenever the instruction has one.
                HoleValue::Operand(_) | HoleValue::OperandHigh(_) | HoleValue::OperandLow(_)
                    if immediate =>
                {
                    code.copy_from_slice(probe);
                    let (operand, part) = h.value.operand().expect("an operand value");
                    Fast::Imm32 { operand, part }
                }
                // The full path tries the immediate form first for values from outside the
                // trace; a symbol's address is one of those, so only a site without an
                // immediate form (`call`, a 32-bit `mov`) takes the direct form directly.
                HoleValue::Code | HoleValue::Cold | HoleValue::Data | HoleValue::Symbol(_)
                    if !(immediate && matches!(h.value, HoleValue::Symbol(_)))
                        && matches!(site.usage, x86::GotUse::Mov | x86::GotUse::Call) =>
                {
                    // `jmp` moves its field one byte earlier: not a plain rel32 store.
                    if x86::relax_got_to_direct(copy(probe, code), offset, site, 0, 0) {
                        code.copy_from_slice(probe);
                        Fast::Direct
                    } else {
                        Fast::Full
                    }
                }
                _ => Fast::Full,
            }
        }
        _ => Fast::Full,
    }
}

/// The destination of a branch hole with value `value` (`S + A`) is `S + A + bias`: x86
/// rel32 is relative to the end of the 4-byte field, AArch64 and RISC-V offsets to the
/// instruction itself.
pub(crate) fn branch_bias(kind: HoleKind) -> u64 {
    match kind {
        HoleKind::X86Branch32 => 4,
        _ => 0,
    }
}

/// What can be checked once of hole `h`'s instruction (see [`Checked`]): the patch
/// function itself is the judge, run on a copy of the stencil's code with a value (0 at
/// place 0) that is in range for every rel32.
fn checked(stencil: &Stencil<'_>, h: &Hole, probe: &mut Vec<u8>) -> Checked {
    let rel32 = matches!(
        h.kind,
        HoleKind::X86Pc32
            | HoleKind::X86GotPc32
            | HoleKind::X86Branch32
            | HoleKind::X86GotPc32Relaxable
            | HoleKind::X86RexGotPc32Relaxable
    );
    if !rel32 || h.section != Section::Code {
        return Checked::Nothing;
    }
    let offset = h.offset as usize;
    if patch::patch(h.kind, copy(probe, stencil.code), offset, 0, 0).is_err() {
        return Checked::Nothing;
    }
    if !h.kind.is_relaxable_x86_got() {
        return Checked::Rel32;
    }
    let has_rex = h.kind == HoleKind::X86RexGotPc32Relaxable;
    match cpjit_isa::x86_64::decode_got_site(stencil.code, offset, has_rex) {
        Ok(site) => Checked::X86GotSite(site),
        Err(_) => Checked::Nothing,
    }
}

/// What [`Program::compile`] compiles with: the byte that pads code, the buffers it reuses
/// from stencil to stencil, and the pool it puts the programs' parts in.
struct Compiler {
    trap: u8,
    scratch: Scratch,
    pool: Pool,
}

impl Compiler {
    /// For `stencils` (the pool's size) of an architecture whose trap byte is `trap`.
    fn new(stencils: &[Stencil<'_>], trap: u8) -> Compiler {
        Compiler {
            trap,
            scratch: Scratch::default(),
            pool: Pool::for_stencils(stencils),
        }
    }
}

/// The buffers [`compile`] reuses from stencil to stencil, so that compiling a program
/// allocates only what the program keeps (allocations were most of `Jit::new`).
#[derive(Default)]
pub(crate) struct Scratch {
    /// A copy of a stencil's code to try a patch or a relaxation on ([`copy`]).
    probe: Vec<u8>,
    /// Per hole of the stencil: whether it is the `ldr` of an `adrp`'s GOT pair.
    paired: Vec<bool>,
    steps: Vec<Step>,
    needs: Vec<Need>,
    /// The program's code, padded, as its fast forms rewrite it ([`padded`]).
    code: Vec<u8>,
    /// The hot and the cold part's holes of a split stencil ([`Program::split`]).
    holes: (Vec<Hole>, Vec<Hole>),
}

/// `code` copied into `probe`, to be patched there and thrown away.
pub(crate) fn copy<'p>(probe: &'p mut Vec<u8>, code: &[u8]) -> &'p mut [u8] {
    probe.clear();
    probe.extend_from_slice(code);
    probe
}

/// `code` padded with `trap` to a multiple of 16 bytes, into `out`.
fn padded(out: &mut Vec<u8>, code: &[u8], trap: u8) {
    out.clear();
    out.extend_from_slice(code);
    out.resize(code.len().next_multiple_of(16), trap);
}

fn source(value: HoleValue) -> Source {
    match value {
        HoleValue::Operand(i) => Source::Operand(i, OperandPart::Whole),
        HoleValue::OperandHigh(i) => Source::Operand(i, OperandPart::High),
        HoleValue::OperandLow(i) => Source::Operand(i, OperandPart::Low),
        HoleValue::Target(i) => Source::Target(i),
        HoleValue::Continue => Source::Continue,
        HoleValue::Code => Source::Code,
        HoleValue::Cold => Source::Cold,
        HoleValue::Data => Source::Data,
        HoleValue::Symbol(i) => Source::Symbol(i),
    }
}

/// The `ldr` hole of the AArch64 GOT load that hole `i` starts, if it is one the runtime
/// may relax: `adrp xN, G` followed by its `ldr xN, [xN, lo12(G)]` of the same value, with
/// no addend, either immediately or after only other GOT loads' `adrp`/`ldr` holes of other
/// registers (what compilers emit for several GOT loads at once, e.g. the halves of one
/// operand on COFF: `adrp x8; adrp x9; ldr x8; ldr x9`). Those read and write only their
/// own registers (relaxed or not), so nothing in between can see xN, and the `ldr`
/// overwrites it: rewriting the pair cannot change what any other instruction sees. The
/// `ldr`'s registers are checked when it is relaxed (`relax_aarch64_got_pair`, which
/// declines a mismatch).
pub(crate) fn got_pair_ldr(stencil: &Stencil<'_>, i: usize) -> Option<usize> {
    let adrp = stencil.holes.get(i)?;
    if adrp.section != Section::Code
        || adrp.kind != HoleKind::Aarch64AdrGotPage21
        || adrp.addend != 0
    {
        return None;
    }
    let insn = |offset: u32| cpjit_isa::aarch64::read_insn(stencil.code, offset.into());
    // Decoded only when there is something in between (an adjacent pair is paired as the
    // holes say; its relaxation checks the instructions).
    let reg = || cpjit_isa::aarch64::adrp_rd(insn(adrp.offset)?);
    let mut next = adrp.offset + 4;
    for (j, h) in stencil.holes.iter().enumerate().skip(i + 1) {
        // Markers and check holes patch nothing.
        if h.kind.width() == 0 {
            continue;
        }
        if h.section != Section::Code || h.offset != next {
            return None;
        }
        if h.kind == HoleKind::Aarch64Ld64GotLo12 && h.value == adrp.value && h.addend == 0 {
            return Some(j);
        }
        let (word, reg) = (insn(h.offset)?, reg()?);
        let independent = match h.kind {
            HoleKind::Aarch64AdrGotPage21 => {
                cpjit_isa::aarch64::adrp_rd(word).is_some_and(|d| d != reg)
            }
            HoleKind::Aarch64Ld64GotLo12 => {
                cpjit_isa::aarch64::ldr_x_registers(word).is_some_and(|(t, n)| t != reg && n != reg)
            }
            _ => false,
        };
        if !independent {
            return None;
        }
        next += 4;
    }
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod mixed_tests;
#[cfg(test)]
mod tests;
