//! The inline forms of stage 3's copy loop ([`write()`](super::write)): a program's
//! [`Quick`](crate::program::Quick) form (its stores with one range test for all) and,
//! hole by hole, the commonest [`Fast`] forms (`lean_step`), which the loop's `steps` runs
//! before it calls the out-of-line `step` for anything else.

use super::{index_of, Writer};
use crate::program::{Fast, OperandStep, Program, Quick, RelSite, RelTo, Source, Step};
use crate::trace::{Instance, Target};
use crate::Error;
use cpjit_model::OperandPart;

impl Writer<'_, '_, '_, '_> {
    /// Runs program `p`'s [`Quick`] form for instance `inst` (its code at `at`, copied; data
    /// at `data_at`; `flat`: the JIT's operand steps, loaded once per trace by the caller):
    /// `false` if it has none or a value does not fit it (the steps then write every
    /// field). For a cold part, `self.code` is the cold area.
    #[inline(always)]
    pub(super) fn quick(
        &mut self,
        inst: &Instance,
        p: &Program,
        (at, data_at): (usize, usize),
        flat: &[OperandStep],
    ) -> bool {
        match p.quick {
            Quick::Nothing => true,
            Quick::Imm32 { sites } => self.quick_imm32(inst, at, sites),
            Quick::DataRel32 { sites } => self.quick_data(at, data_at, sites),
            Quick::Symbol { offset, symbol, k } => {
                self.quick_rel32(at, offset, self.b.jit.resolved(symbol), k)
            }
            Quick::Target { offset, target, k } => {
                self.quick_rel32(at, offset, self.target_code(inst, target), k)
            }
            Quick::Operands { from, len } => {
                self.quick_operands::<true>(inst, at, flat, from as usize, len as usize)
            }
            Quick::Mixed {
                from,
                len,
                count,
                sites,
            } => {
                (len == 0
                    || self.quick_operands::<false>(inst, at, flat, from as usize, len as usize))
                    && self.quick_sites(inst, at, data_at, &sites[..count as usize])
            }
            Quick::General => false,
        }
    }

    /// Runs the rel32 sites of a [`Quick::Mixed`] program of instance `inst` (code at
    /// `code_at`, copied; data at `data_at`): `false` if a destination is not known inline
    /// or out of reach (the sites before it written; the steps then write every field).
    #[inline(always)]
    pub(super) fn quick_sites(
        &mut self,
        inst: &Instance,
        code_at: usize,
        data_at: usize,
        sites: &[RelSite],
    ) -> bool {
        let code = (self.code.as_mut_ptr(), self.code_base, self.other);
        // SAFETY: `code` is `self.code` and its run-time address.
        unsafe { self.sites_in(code, inst, code_at, data_at, sites) }
    }

    /// [`quick_sites`](Writer::quick_sites) in `code` (a pointer to the code the sites
    /// patch, its run-time address and that of the instance's other part): the trace's
    /// hot code, or its cold area for a cold part.
    ///
    /// # Safety
    /// `code.0` is `self.code` or `self.cold`, and the program's code was copied to
    /// `code_at` there ([`copy_code`] checked that it fits).
    #[inline(always)]
    pub(super) unsafe fn sites_in(
        &self,
        (code, code_base, other): (*mut u8, u64, u64),
        inst: &Instance,
        code_at: usize,
        data_at: usize,
        sites: &[RelSite],
    ) -> bool {
        let place = code_base.wrapping_add(code_at as u64);
        for site in sites {
            let to = match site.to {
                RelTo::Cold => other,
                RelTo::Target(k) => match self.target_code(inst, k) {
                    Some(to) => to,
                    None => return false,
                },
                RelTo::Code => place,
                RelTo::Data => self.data_base + data_at as u64,
                RelTo::Continue => match self.instances.get(index_of(self.instances, inst) + 1) {
                    Some(next) => self.trace_base + next.code_at as u64,
                    None => return false,
                },
                RelTo::Symbol(sym) => match self.b.jit.resolved(sym) {
                    Some(address) => address,
                    None => return false,
                },
            };
            let value = to
                .wrapping_add(site.addend as u64)
                .wrapping_sub(place.wrapping_add(site.offset as u64));
            if value.wrapping_add(1 << 31) >> 32 != 0 {
                return false;
            }
            let at = code_at + site.offset as usize;
            // SAFETY: the field lies inside the stencil's code (`RelSite::of`), which was
            // copied to `code_at` (the caller's promise).
            unsafe {
                code.add(at)
                    .cast::<u32>()
                    .write_unaligned((value as u32).to_le())
            };
        }
        true
    }

    /// Runs `steps` of instance `inst` (its code at `at`, data at `data_at`) one by one: each
    /// hole's inline form ([`lean_step`](Writer::lean_step)), else the out-of-line
    /// [`step`](Writer::step). Out of line itself, for a program with no quick form: inlined
    /// into the copy loop, its registers were the loop's, and every instance paid for the
    /// spills (callgrind, end to end: straight-1000 249.3 -> 245.2 instructions per
    /// instance; the VM's nbody compile, mostly such programs, 840 -> 843).
    #[inline(never)]
    pub(super) fn steps(
        &mut self,
        inst: &Instance,
        steps: &[Step],
        at: usize,
        data_at: usize,
    ) -> Result<(), Error> {
        let b = self.b;
        for step in steps {
            if self.lean_step(inst, step, at, data_at) {
                continue;
            }
            // An operand too wide for its instruction's immediate: its GOT slot, out of
            // line (the full path's relaxations and look-ups cost 200 instructions more).
            if matches!(step.fast, Fast::Imm32 { .. } | Fast::Got { .. })
                && self.operand_slot(inst, step, at)
            {
                continue;
            }
            // The instance's index, worked out here rather than counted for every instance.
            let i = index_of(b.instances, inst);
            self.step(i, inst, step, at, data_at)
                .map_err(|e| e.error(b, i))?;
        }
        Ok(())
    }

    /// The commonest fast forms of a hole of instance `inst` (code at `code_at`, data at
    /// `data_at`), inline in the copy loop: an operand's `imm32`, abs32 field (of the
    /// operand or a half) or range check, a rel32 to a jump target of the trace, the next
    /// instance, the instance's data, either part of its code or a resolved symbol. `false`, with nothing
    /// written, for every other hole and for a value its form cannot take:
    /// [`step`](Writer::step) (out of line) then writes it. (On the reference
    /// VM's traces, where most programs have no quick form, the call per step was two
    /// thirds of `write`'s instructions per hole.)
    #[inline(always)]
    pub(super) fn lean_step(
        &mut self,
        inst: &Instance,
        step: &Step,
        code_at: usize,
        data_at: usize,
    ) -> bool {
        let offset = code_at + step.offset as usize;
        let operand = |k: u16| self.b.operands[inst.operands as usize + k as usize];
        // The field's value, and the range it must lie in (as `value - lo <= span`).
        let (value, lo, span) = match step.fast {
            Fast::Imm32 {
                operand: k,
                part: OperandPart::Whole,
            } => (operand(k), i32::MIN as i64, u32::MAX as u64),
            Fast::Abs32 {
                operand: k,
                part: OperandPart::Whole,
            } => {
                let v = operand(k).wrapping_add(step.addend as u64);
                (v, i32::MIN as i64, u32::MAX as u64 + (1 << 31))
            }
            // A half of an operand (a client's 64-bit value read as two 32-bit immediates,
            // such as the reference VM's exits): the same field.
            Fast::Abs32 { operand: k, part } => {
                let v = part.of(operand(k)).wrapping_add(step.addend as u64);
                (v, i32::MIN as i64, u32::MAX as u64 + (1 << 31))
            }
            Fast::Check {
                operand: k,
                part: OperandPart::Whole,
                range,
            } => return range.contains(operand(k).wrapping_add(step.addend as u64)),
            // `Direct`: a GOT reference the program's code holds in its direct form (a
            // helper's `call`, a `lea` of data), the same field.
            Fast::Rel32 | Fast::Direct => {
                let to = match step.source {
                    Source::Data => self.data_base + data_at as u64,
                    // The instance's other part (a hot path's branch into its cold part, or
                    // back) and its own code (a cold part's steps see the cold area here).
                    Source::Cold => self.other,
                    Source::Code => self.code_base + code_at as u64,
                    Source::Continue => {
                        match self.instances.get(index_of(self.instances, inst) + 1) {
                            Some(next) => self.trace_base + next.code_at as u64,
                            None => return false,
                        }
                    }
                    Source::Target(k) => match self.target_code(inst, k) {
                        Some(to) => to,
                        None => return false,
                    },
                    // A symbol resolved already (the first use resolves it, out of line).
                    Source::Symbol(sym) => match self.b.jit.resolved(sym) {
                        Some(address) => address,
                        None => return false,
                    },
                    _ => return false,
                };
                let place = self.code_base + offset as u64;
                let v = to.wrapping_add(step.addend as u64).wrapping_sub(place);
                (v, i32::MIN as i64, u32::MAX as u64)
            }
            _ => return false,
        };
        if value.wrapping_sub(lo as u64) > span {
            return false;
        }
        match self.code.get_mut(offset..offset + 4) {
            Some(field) => {
                field.copy_from_slice(&(value as u32).to_le_bytes());
                true
            }
            None => false,
        }
    }

    /// Puts back the stencil's own instruction bytes (the `len` before the field) of a hole
    /// whose [`Fast`] form the program's code holds: the full path starts from them.
    #[cold]
    pub(super) fn restore<const LEN: usize>(
        &mut self,
        inst: &Instance,
        step: &Step,
        code_at: usize,
    ) {
        let original = self.b.jit.set.stencils[inst.stencil as usize].code;
        let original = &original[self.restore_at..];
        let end = step.offset as usize;
        // A length the compiler knows: a few moves rather than a `memcpy` call (53 → 42
        // instructions per 64-bit operand's GOT load in the reference VM's calls trace).
        let start = end.saturating_sub(LEN);
        if end - start == LEN {
            let from = &original[start..end];
            self.code[code_at + start..code_at + end].copy_from_slice(&from[..LEN]);
        } else {
            self.code[code_at + start..code_at + end].copy_from_slice(&original[start..end]);
        }
    }

    /// Runs a [`Quick::Imm32`] program of instance `inst` (code at `code_at`, copied): `false`
    /// if an operand does not fit its `imm32` (nothing written; the steps then write every
    /// field again).
    #[inline(always)]
    pub(super) fn quick_imm32(
        &mut self,
        inst: &Instance,
        code_at: usize,
        sites: [(u32, u16); 2],
    ) -> bool {
        let operands = self.b.operands;
        let first = inst.operands as usize;
        debug_assert!(sites
            .iter()
            .all(|s| first + (s.1 as usize) < operands.len()));
        // SAFETY: `push` recorded the instance with as many operands as its stencil takes,
        // from `first` on in the vector, and `Quick::of` took only sites whose operand is
        // one of them.
        let (a, b) = unsafe {
            (
                *operands.get_unchecked(first + sites[0].1 as usize),
                *operands.get_unchecked(first + sites[1].1 as usize),
            )
        };
        self.store_pair(code_at, (sites[0].0, a), (sites[1].0, b))
    }

    /// Runs a [`Quick::Operands`] program of instance `inst` (code at `code_at`, copied),
    /// steps `from..from + len` of the JIT's flat array `all`, `len` at least 1 (`STORES`:
    /// every one of them stores its field, as in an operands form): `false` if a value is
    /// out of its step's range (the fields before it written; the steps then write every
    /// field again, and report the value).
    #[inline(always)]
    pub(super) fn quick_operands<const STORES: bool>(
        &mut self,
        inst: &Instance,
        code_at: usize,
        all: &[OperandStep],
        from: usize,
        len: usize,
    ) -> bool {
        debug_assert!(len >= 1 && from + len <= all.len());
        let operands = self.b.operands;
        let first = inst.operands as usize;
        let code = self.code.as_mut_ptr();
        // SAFETY: `program::compile` made the range inside the flat array.
        let mut s = unsafe { all.as_ptr().add(from) };
        // SAFETY: as above.
        let end = unsafe { s.add(len) };
        // Tested at the bottom: a program has at least one step (most of the eBPF
        // example's have one, and the test before the first cost 4 instructions each).
        loop {
            // SAFETY: `s` is below `end` (tested below, `len >= 1` before the first).
            let step = unsafe { &*s };
            debug_assert!(!STORES || step.store);
            debug_assert!(first + (step.operand as usize) < operands.len());
            // SAFETY: `push` recorded the instance with as many operands as its stencil
            // takes, from `first` on in the vector, and `OperandStep::of` took only steps
            // whose operand is one of them.
            let v = step.biased(unsafe { *operands.get_unchecked(first + step.operand as usize) });
            if v > step.span {
                return false;
            }
            if STORES || step.store {
                let at = code_at + step.offset as usize;
                debug_assert!(at + 4 <= self.code.len());
                let field = (v as u32).wrapping_add(step.lo);
                // SAFETY: the field lies inside the stencil's code (`OperandStep::of`), which
                // was copied to `code_at` ([`copy_code`] checked that it fits `code`).
                unsafe { code.add(at).cast::<u32>().write_unaligned(field.to_le()) };
            }
            // SAFETY: at most one past the range's last step.
            s = unsafe { s.add(1) };
            if s == end {
                return true;
            }
        }
    }

    /// Runs a [`Quick::DataRel32`] program of an instance (code at `code_at`, copied; data
    /// at `data_at`): `false` if a displacement does not fit 32 bits (nothing written).
    #[inline(always)]
    pub(super) fn quick_data(
        &mut self,
        code_at: usize,
        data_at: usize,
        sites: [(u32, i64); 2],
    ) -> bool {
        // `data + addend - place` is `data - code + k` at each site (`k`: addend - offset).
        let to_data = self
            .data_from_code
            .wrapping_add(data_at as u64)
            .wrapping_sub(code_at as u64);
        let a = to_data.wrapping_add(sites[0].1 as u64);
        let b = to_data.wrapping_add(sites[1].1 as u64);
        self.store_pair(code_at, (sites[0].0, a), (sites[1].0, b))
    }

    /// The address of jump target `k` of instance `inst` if it is an instance of the trace
    /// (never the shim, which is no jump target).
    #[inline(always)]
    pub(super) fn target_code(&self, inst: &Instance, k: u16) -> Option<u64> {
        match self.b.targets[inst.targets as usize + k as usize] {
            Target::Instance(id) if id.0 != 0 || !self.shim_first => self
                .instances
                .get(id.index())
                .map(|to| self.trace_base + to.code_at as u64),
            _ => None,
        }
    }

    /// Runs a [`Quick::Symbol`] or [`Quick::Target`] program of an instance (code at
    /// `code_at`, copied): stores `to - code + k` (`to`: the symbol's or target's address,
    /// `k`: the step's addend less its offset) in the rel32 field at `offset`. `false`,
    /// nothing written, if `to` is `None` (a symbol not resolved yet, a target that is no
    /// instance of the trace) or out of the field's reach: the steps then resolve it, route
    /// it through a veneer, or report it.
    #[inline(always)]
    pub(super) fn quick_rel32(
        &mut self,
        code_at: usize,
        offset: u32,
        to: Option<u64>,
        k: i64,
    ) -> bool {
        let Some(to) = to else {
            return false;
        };
        let value = to
            .wrapping_add(k as u64)
            .wrapping_sub(self.code_base.wrapping_add(code_at as u64));
        self.store_pair(code_at, (offset, value), (offset, value))
    }

    /// Stores the low 32 bits of two values (the same site twice for one) at their offsets
    /// from `code_at`, if both are sign-extended 32-bit values: `false` otherwise, with
    /// nothing written. The sites are a quick form's, each field inside the stencil's code
    /// (`Quick::of`), and the instance's code was copied to `code_at` ([`copy_code`]
    /// checked that it fits `code`).
    #[inline(always)]
    fn store_pair(&mut self, code_at: usize, a: (u32, u64), b: (u32, u64)) -> bool {
        // Both fit exactly when neither biased value has upper bits.
        if (a.1.wrapping_add(1 << 31) | b.1.wrapping_add(1 << 31)) >> 32 != 0 {
            return false;
        }
        for (offset, value) in [a, b] {
            let at = code_at + offset as usize;
            debug_assert!(at + 4 <= self.code.len());
            // SAFETY: as above, `at + 4 <= self.code.len()`.
            unsafe {
                self.code
                    .as_mut_ptr()
                    .add(at)
                    .cast::<u32>()
                    .write_unaligned((value as u32).to_le())
            };
        }
        true
    }
}
