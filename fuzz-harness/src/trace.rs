//! The trace-API fuzz target and its checker.
//!
//! [`run`] turns fuzz bytes into a trace of one of the host's generated stencil sets (the
//! default set, or with the first byte's top bit the three-argument set, whose x86-64 ELF
//! stencils use the medium code model's `movabs` holes) (stencils,
//! operands at the edges of every immediate form, jump targets inside and far outside the
//! trace, helpers near and far) and finishes it. [`check`] then verifies the stitched bytes
//! without using any of the runtime's patch code: it recomputes every hole's value from the
//! trace description and *decodes* what the runtime wrote (the displacement, the direct
//! form a GOT load was relaxed to, the veneer a branch goes through, the GOT slot's
//! content), and compares every byte outside the holes with the stencil.
//!
//! Only x86-64 hosts build the target (the set is the host's own, so that a finished trace
//! is a trace this process could run); the checker decodes x86-64 encodings.

#![cfg(target_arch = "x86_64")]

use std::sync::OnceLock;

use cpjit_model::{Hole, HoleKind, HoleValue, Stencil, StencilSet};
use cpjit_runtime::{InstanceId, Jit, Target, Trace};

mod decode;
use decode::{decode_target, through_veneer};

/// The default set this process runs natively (the facade picks it by the one host rule).
fn set() -> &'static StencilSet<'static> {
    cpjit_stencils::native().expect("a stencil set for this host")
}

/// The sets a fuzz input may pick: the default set, and the three-argument set
/// (`templates/threearg/`), both this host's.
pub fn sets() -> [&'static StencilSet<'static>; 2] {
    [
        set(),
        cpjit_stencils_threearg::native().expect("a three-argument stencil set for this host"),
    ]
}

/// Where a symbol of the set resolves: even indices near this binary's code (direct calls
/// and relaxed GOT loads), odd ones far away (veneers and GOT slots).
fn symbol_address(index: usize) -> u64 {
    if index % 2 == 0 {
        (run as *const () as usize as u64).wrapping_add(0x40 * index as u64)
    } else {
        0x7e00_0000_0000 + 0x1000 * index as u64
    }
}

/// The JIT of `sets()[k]`.
fn jit(k: usize) -> &'static Jit<'static> {
    static JITS: [OnceLock<Jit<'static>>; 2] = [OnceLock::new(), OnceLock::new()];
    JITS[k].get_or_init(|| {
        let set = sets()[k];
        Jit::new(set, move |name| {
            set.symbols
                .iter()
                .position(|s| *s == name)
                .map(symbol_address)
        })
        .expect("the host's stencil set is accepted")
    })
}

/// Reads the fuzz input; runs out into zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, i| v | (self.byte() as u64) << (8 * i))
    }

    /// An operand, biased towards the edges of 8-, 16-, 32- and 64-bit immediates.
    fn operand(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            0x7f,
            0xff,
            0x7fff,
            0xffff,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_ffff_8000_0000,
            u64::MAX,
        ];
        match self.byte() % 4 {
            0 => EDGES[self.byte() as usize % EDGES.len()],
            1 => self.byte() as u64,
            _ => self.u64(),
        }
    }

    /// A stencil index below `count`, from two bytes: one byte reached only the first 256
    /// stencils of a larger set (issue 42: 256 of 1,140).
    fn stencil(&mut self, count: usize) -> usize {
        let index = u16::from_le_bytes([self.byte(), self.byte()]);
        usize::from(index) % count.max(1)
    }

    /// A jump target: an instance of the trace (possibly not pushed) or an address.
    fn target(&mut self, planned: usize) -> Target {
        match self.byte() % 4 {
            0 | 1 => Target::Instance(InstanceId::from_index(
                self.byte() as usize % planned.max(1),
            )),
            2 => Target::Address(
                (run as *const () as usize as u64).wrapping_add(self.byte() as u64 * 64),
            ),
            _ => Target::Address(self.u64()),
        }
    }
}

/// One accepted push: what the checker needs to recompute the instance's holes.
#[derive(Debug)]
pub struct Planned {
    pub stencil: usize,
    pub operands: Vec<u64>,
    pub targets: Vec<Target>,
}

/// The fuzz target's body.
pub fn run(bytes: &[u8]) -> Outcome {
    run_counting(bytes, &mut |_, _| {})
}

/// [`run`], telling `pushed` the set (0: default, 1: three-argument) and index of every
/// stencil the trace pushed (what a campaign counts as reached).
pub fn run_counting(bytes: &[u8], pushed: &mut dyn FnMut(usize, usize)) -> Outcome {
    let mut input = Input(bytes);
    let first = input.byte();
    let k = usize::from(first >= 0x80);
    let (set, jit) = (sets()[k], jit(k));
    let count = 1 + first as usize % 32;
    let mut builder = jit.trace();
    let mut plan = Vec::new();
    for _ in 0..count {
        let stencil = input.stencil(set.stencils.len());
        let s = &set.stencils[stencil];
        let operands: Vec<u64> = s.operands.iter().map(|_| input.operand()).collect();
        let targets: Vec<Target> = s.targets.iter().map(|_| input.target(count)).collect();
        if builder.push(stencil, &operands, &targets).is_ok() {
            pushed(k, stencil);
            plan.push(Planned {
                stencil,
                operands,
                targets,
            });
        }
    }
    let continuation = (input.byte() % 2 == 1).then(|| input.target(plan.len()));
    if let Some(c) = continuation {
        builder.continue_at(c);
    }
    // Errors (out-of-range targets, a trace ending in a continue hole, ...) are fine; an
    // accepted trace must be exactly right.
    match builder.finish() {
        Ok(trace) => {
            if let Err(e) = check(set, &plan, continuation, &trace, symbol_address) {
                panic!("stitched trace is wrong: {e}\nplan: {plan:#x?}\ncontinuation: {continuation:x?}");
            }
            Outcome::Checked
        }
        Err(_) => Outcome::Rejected,
    }
}

/// What became of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `finish` accepted the trace and the checker verified it.
    Checked,
    /// `finish` refused the trace with an error.
    Rejected,
}

/// Verifies a finished trace against its description, byte by byte.
pub fn check(
    set: &StencilSet<'_>,
    plan: &[Planned],
    continuation: Option<Target>,
    trace: &Trace,
    symbol: impl Fn(usize) -> u64,
) -> Result<(), String> {
    let offsets = trace.instance_offsets();
    if offsets.len() != plan.len() {
        return Err(format!(
            "{} instances pushed, {} laid out",
            plan.len(),
            offsets.len()
        ));
    }
    let code = Memory {
        start: trace.code_range().start as u64,
        bytes: trace.code_bytes(),
    };
    let data_range = trace.data_range();
    // SAFETY: the trace's data block is mapped readable for as long as `trace` lives.
    let data_bytes =
        unsafe { std::slice::from_raw_parts(data_range.start as *const u8, data_range.len()) };
    let data = Memory {
        start: data_range.start as u64,
        bytes: data_bytes,
    };
    let entry = |i: usize| code.start + offsets[i] as u64;
    let address_of = |t: Target| match t {
        Target::Instance(id) => (id.index() < plan.len()).then(|| entry(id.index())),
        Target::Address(a) => Some(a),
        // The plans push by stencil index with instance and address targets only.
        Target::Label(_) => None,
    };
    let cold = cold_parts(set, plan, offsets, continuation.is_some(), code.start);
    for (i, p) in plan.iter().enumerate() {
        let s = &set.stencils[p.stencil];
        let base = entry(i);
        let next = if i + 1 < plan.len() {
            Some(entry(i + 1))
        } else {
            continuation.and_then(address_of)
        };
        let instance = Instance {
            index: i,
            stencil: s,
            base,
            cold: cold[i],
            next,
            operands: &p.operands,
            targets: p.targets.iter().map(|t| address_of(*t)).collect(),
            symbol: &symbol,
        };
        instance.check(&code, &data)?;
        check_fall_through(&instance, &code, set.nop, i + 1 == plan.len())?;
    }
    Ok(())
}

/// Where each instance's cold part should be (the layout `Stencil::cold_len` documents):
/// after the last instance's hot code and the `jmp rel32` to the continuation, at the set's
/// largest code alignment, one after another in instance order, each at its alignment.
fn cold_parts(
    set: &StencilSet<'_>,
    plan: &[Planned],
    offsets: &[u32],
    continues: bool,
    start: u64,
) -> Vec<Option<u64>> {
    let align = set.stencils.iter().map(|s| s.code_align).max().unwrap_or(1);
    let hot_end = match (plan.last(), offsets.last()) {
        (Some(p), Some(&at)) => {
            at as u64 + set.stencils[p.stencil].hot_len() as u64 + if continues { 5 } else { 0 }
        }
        _ => 0,
    };
    let mut at = hot_end.next_multiple_of(u64::from(align));
    plan.iter()
        .map(|p| {
            let s = &set.stencils[p.stencil];
            (s.cold_len > 0).then(|| {
                let part = at.next_multiple_of(u64::from(s.code_align));
                at = part + u64::from(s.cold_len);
                start + part
            })
        })
        .collect()
}

/// A readable byte range at a known address.
struct Memory<'a> {
    start: u64,
    bytes: &'a [u8],
}

impl Memory<'_> {
    fn get(&self, address: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(address.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from.checked_add(len)?)
    }

    fn u64_at(&self, address: u64) -> Option<u64> {
        self.get(address, 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }
}

struct Instance<'p, F> {
    index: usize,
    stencil: &'p Stencil<'p>,
    base: u64,
    /// Where its cold part should be, if its stencil has one.
    cold: Option<u64>,
    /// Where the instance's continuation goes (`None`: nowhere was given).
    next: Option<u64>,
    operands: &'p [u64],
    targets: Vec<Option<u64>>,
    symbol: &'p F,
}

impl<F: Fn(usize) -> u64> Instance<'_, F> {
    fn fail(&self, what: String) -> String {
        format!(
            "instance {} ({}) at {:#x}: {what}",
            self.index, self.stencil.name, self.base
        )
    }

    /// The value `S` of a hole; `data` is this instance's data address once known.
    fn value(&self, hole: &Hole, data: Option<u64>) -> Result<Option<u64>, String> {
        Ok(match hole.value {
            HoleValue::Continue => Some(self.next.ok_or_else(|| {
                self.fail("accepted with a continue hole and no continuation".into())
            })?),
            HoleValue::Target(k) => Some(self.targets[k as usize].ok_or_else(|| {
                self.fail(format!("accepted with target[{k}] outside the trace"))
            })?),
            HoleValue::Operand(k) | HoleValue::OperandHigh(k) | HoleValue::OperandLow(k) => {
                let (_, part) = hole.value.operand().expect("an operand value");
                Some(part.of(self.operands[k as usize]))
            }
            HoleValue::Code => Some(self.base),
            HoleValue::Cold => self.cold,
            HoleValue::Data => data,
            HoleValue::Symbol(k) => Some((self.symbol)(k as usize)),
        })
    }

    fn check(&self, code: &Memory, data: &Memory) -> Result<(), String> {
        let s = self.stencil;
        // The hot code, then the cold part from where it should be: what the stencil's code
        // became, byte for byte.
        let hot_len = s.hot_len();
        let outside = || self.fail("code outside the trace".into());
        let mut copied = code.get(self.base, hot_len).ok_or_else(outside)?.to_vec();
        if let Some(cold) = self.cold {
            copied.extend_from_slice(code.get(cold, s.cold_len as usize).ok_or_else(outside)?);
        }
        let copied = &copied[..];
        // Bytes the holes (and the instructions of relaxed GOT loads) may change.
        let mut patched = vec![false; s.code.len()];
        let mut data_base: Option<u64> = None;
        for hole in s.code_holes() {
            let o = hole.offset as usize;
            // A relaxed GOT load rewrites its opcode and ModRM byte, and the REX prefix only
            // where the relocation says there is one: for the plain kind the byte before the
            // opcode belongs to another instruction and must stay as it is.
            let window = if hole.kind == HoleKind::X86RexGotPc32Relaxable {
                o.saturating_sub(3)..o + hole.kind.width()
            } else if hole.kind == HoleKind::X86GotPc32Relaxable {
                o.saturating_sub(2)..o + hole.kind.width()
            } else {
                o..o + hole.kind.width()
            };
            for b in &mut patched[window] {
                *b = true;
            }
            let place = match self.cold {
                Some(cold) if o >= hot_len => cold + (o - hot_len) as u64,
                _ => self.base + hole.offset as u64,
            };
            if hole.value == HoleValue::Data {
                // The data address is not part of the API: solve it from the first hole
                // that uses it and require every other hole to agree.
                let found = decode_target(hole, s.code, copied, place, code, data)
                    .map_err(|e| self.fail(format!("hole at +{o:#x} ({}): {e}", hole.kind)))?;
                match data_base {
                    None => data_base = Some(found),
                    Some(d) if d == found => {}
                    Some(d) => {
                        return Err(self.fail(format!(
                            "data hole at +{o:#x} points at {found:#x}, another at {d:#x}"
                        )))
                    }
                }
                continue;
            }
            let value = self
                .value(hole, None)?
                .expect("only data holes are unknown");
            // The shim's parameter count: a marker, nothing patched.
            if hole.kind == HoleKind::EntryParameters {
                continue;
            }
            // A narrow operand's range check writes nothing: the value must be in range.
            if let Some(range) = hole.kind.operand_check() {
                if !range.contains(value) {
                    return Err(self.fail(format!(
                        "accepted operand {value:#x} outside its declared range {}",
                        range.name()
                    )));
                }
                continue;
            }
            // An absolute imm32/disp32 holds the low 32 bits of `S + A`.
            if hole.kind == HoleKind::X86Abs32 {
                let want = value.wrapping_add(hole.addend as u64) as u32;
                let got = copied
                    .get(o..o + 4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
                if got != Some(want) {
                    return Err(self.fail(format!(
                        "imm32 hole at +{o:#x} holds {got:x?}, expected {want:#x}"
                    )));
                }
                continue;
            }
            let found = decode_target(hole, s.code, copied, place, code, data)
                .map_err(|e| self.fail(format!("hole at +{o:#x} ({}): {e}", hole.kind)))?;
            if found != value {
                return Err(self.fail(format!(
                    "hole at +{o:#x} ({} {}) reaches {found:#x}, expected {value:#x}",
                    hole.kind, hole.value
                )));
            }
        }
        for (o, (want, got)) in s.code.iter().zip(copied).enumerate() {
            if !patched[o] && want != got {
                return Err(self.fail(format!(
                    "byte +{o:#x} outside any hole is {got:#04x}, the stencil has {want:#04x}"
                )));
            }
        }
        if s.data_len == 0 {
            return Ok(());
        }
        let Some(d) = data_base else {
            // No code hole addresses the data, so there is no way to find it (and no
            // instruction can read it).
            return Ok(());
        };
        self.check_data(d, data)
    }

    fn check_data(&self, d: u64, data: &Memory) -> Result<(), String> {
        let s = self.stencil;
        let copied = data
            .get(d, s.data_len as usize)
            .ok_or_else(|| self.fail(format!("data at {d:#x} is outside the trace's data")))?;
        if d % s.data_align.max(1) as u64 != 0 {
            return Err(self.fail(format!("data at {d:#x} is not aligned to {}", s.data_align)));
        }
        let mut patched = vec![false; s.data_len as usize];
        for hole in s.data_holes() {
            let o = hole.offset as usize;
            if hole.kind != HoleKind::Abs64 {
                return Err(self.fail(format!("data hole of kind {}", hole.kind)));
            }
            patched[o..o + 8].iter_mut().for_each(|b| *b = true);
            let want = self
                .value(hole, Some(d))?
                .expect("data address known")
                .wrapping_add(hole.addend as u64);
            let got = u64::from_le_bytes(copied[o..o + 8].try_into().unwrap());
            if got != want {
                return Err(self.fail(format!(
                    "data hole at +{o:#x} holds {got:#x}, expected {want:#x}"
                )));
            }
        }
        // The initialized bytes, then zeros (zero-fill is written, not stored).
        let expected = s.init_data.iter().copied().chain(std::iter::repeat(0));
        for (o, (want, &got)) in expected.zip(copied).enumerate() {
            if !patched[o] && want != got {
                return Err(self.fail(format!(
                    "data byte +{o:#x} is {got:#04x}, expected {want:#04x}"
                )));
            }
        }
        Ok(())
    }
}

/// A falling-through instance must be followed by the next instance (nops allowed in
/// between) or, when it is the last, by a jump to the continuation.
fn check_fall_through<F: Fn(usize) -> u64>(
    instance: &Instance<'_, F>,
    code: &Memory,
    nop: &[u8],
    last: bool,
) -> Result<(), String> {
    if !instance.stencil.falls_through {
        return Ok(());
    }
    let end = instance.base + instance.stencil.hot_len() as u64;
    let Some(next) = instance.next else {
        return Err(instance.fail("falls through with no continuation".into()));
    };
    if !last {
        let gap = code
            .get(end, next.wrapping_sub(end) as usize)
            .ok_or_else(|| instance.fail("next instance is not after this one".into()))?;
        if nop.is_empty() || gap.chunks(nop.len()).any(|c| c != nop) {
            return Err(instance.fail(format!("falls through into non-nop bytes {gap:02x?}")));
        }
        return Ok(());
    }
    // The appended continuation jump: `jmp rel32`, possibly through a veneer.
    let jmp = code
        .get(end, 5)
        .ok_or_else(|| instance.fail("no continuation jump after the last instance".into()))?;
    if jmp[0] != 0xe9 {
        return Err(instance.fail(format!("continuation jump is {jmp:02x?}")));
    }
    let to =
        (end + 5).wrapping_add(i32::from_le_bytes(jmp[1..5].try_into().unwrap()) as i64 as u64);
    let to = through_veneer(to, code).unwrap_or(to);
    if to != next {
        return Err(instance.fail(format!(
            "continuation jump reaches {to:#x}, expected {next:#x}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift bytes: deterministic pseudo-random fuzz inputs.
    fn inputs(count: usize) -> impl Iterator<Item = Vec<u8>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..count).map(move |_| {
            (0..256)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        })
    }

    /// The target over a thousand inputs: a good share of traces is accepted and checked
    /// (a generator whose traces are all rejected would fuzz nothing).
    #[test]
    fn random_traces_are_accepted_and_check_clean() {
        let accepted = inputs(1000).filter(|b| run(b) == Outcome::Checked).count();
        eprintln!("{accepted} of 1000 traces accepted and checked");
        assert!(
            accepted >= 100,
            "only {accepted} of 1000 traces were accepted"
        );
    }

    /// The checker is not vacuous: the same trace with one operand described differently
    /// is reported, naming the instance and hole, on both sets (on x86-64 ELF the
    /// three-argument set's operand is a `movabs` imm64).
    #[test]
    fn checker_rejects_a_wrong_description() {
        for (k, set) in sets().into_iter().enumerate() {
            let pushable = |s: &Stencil<'_>| s.targets.is_empty() && Some(s) != set.shim();
            // Ends the trace: neither falls through nor continues.
            let ends = |s: &Stencil<'_>| {
                !s.falls_through && !s.holes.iter().any(|h| h.value == HoleValue::Continue)
            };
            let with_operand = |s: &Stencil<'_>| !s.operands.is_empty() && pushable(s);
            let stencils = set.stencils.iter().enumerate();
            let (index, s) = stencils
                .clone()
                .find(|(_, s)| with_operand(s) && ends(s))
                .or_else(|| stencils.clone().find(|(_, s)| with_operand(s)))
                .expect("a stencil with an operand and no jump target");
            let operands = vec![0x1234_5678_9abc_def0; s.operands.len()];
            let mut plan = vec![Planned {
                stencil: index,
                operands,
                targets: vec![],
            }];
            if !ends(s) {
                // Something to continue into: an op that ends the trace.
                let exit = set
                    .stencils
                    .iter()
                    .position(|e| e.operands.is_empty() && pushable(e) && ends(e))
                    .expect("an op without operands that ends a trace");
                plan.push(Planned {
                    stencil: exit,
                    operands: vec![],
                    targets: vec![],
                });
            }
            let mut builder = jit(k).trace();
            for p in &plan {
                builder.push(p.stencil, &p.operands, &[]).unwrap();
            }
            let trace = builder.finish().unwrap();
            check(set, &plan, None, &trace, symbol_address).unwrap();
            plan[0].operands[0] ^= 1;
            let err = check(set, &plan, None, &trace, symbol_address).unwrap_err();
            assert!(err.contains(s.name) && err.contains("operand[0]"), "{err}");
        }
    }

    /// Every stencil of every set the target picks from is reachable, and so is every index
    /// of a set as large as two bytes address.
    #[test]
    fn every_stencil_of_every_set_can_be_picked() {
        let mut counts: Vec<usize> = sets().iter().map(|s| s.stencils.len()).collect();
        counts.extend([257, 1_140, 65_536]);
        for count in counts {
            let mut seen = vec![false; count];
            for i in 0..=u16::MAX {
                let [lo, hi] = i.to_le_bytes();
                seen[Input(&[lo, hi]).stencil(count)] = true;
            }
            let missing = seen.iter().filter(|s| !**s).count();
            assert_eq!(missing, 0, "{missing} of {count} stencils cannot be picked");
        }
    }
}
