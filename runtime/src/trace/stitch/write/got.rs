//! The GOT slots of operands in stage 3's steps: a 64-bit operand that an instruction
//! loads from memory because it does not fit the instruction's immediate form
//! ([`Fast::Imm32`]) or because the instruction has none ([`Fast::Got`]). The full path
//! ([`Writer::step`], [`Writer::run`]) writes the same bytes after trying relaxations that
//! such a value cannot take; this path goes straight to the slot.

use super::{write_rel32, Writer};
use crate::program::{Action, Checked, Fast, Step};
use crate::trace::Instance;
use cpjit_isa::x86_64::GotUse;

impl Writer<'_, '_, '_, '_> {
    /// Writes step `step` of instance `inst` (code at `code_at`) as a load of its operand
    /// through the trace's GOT slot of that value (one slot per value, numbered in order
    /// of first use, as [`Writer::through_got`] numbers them), restoring the stencil's
    /// instruction where the program's code holds its `imm32` form. `false` where the full
    /// path writes something else (the operand fits the immediate, a `mov`'s direct form
    /// reaches the value) or must report an error (the slot's displacement does not fit):
    /// then nothing but the slot (which the full path finds again) was written.
    // Out of line: inlined into `steps`, it saved its frame (16 of its 123 instructions per
    // constant, the VM's calls compile 1.0 % fewer) but took 2 % more time there.
    #[inline(never)]
    pub(super) fn operand_slot(&mut self, inst: &Instance, step: &Step, code_at: usize) -> bool {
        let (operand, part, site) = match (step.fast, step.checked, step.action) {
            (Fast::Got { operand, part }, _, _) => (operand, part, None),
            (Fast::Imm32 { operand, part }, Checked::X86GotSite(site), Action::RelaxableGot) => {
                (operand, part, Some(site))
            }
            _ => return false,
        };
        let value = part.of(self.b.operands[inst.operands as usize + operand as usize]);
        let offset = code_at + step.offset as usize;
        let place = self.code_base + offset as u64;
        let addend = step.addend as u64;
        if let Some(site) = site {
            // The full path's order (`relaxable_got`): the immediate, then a `mov`'s `lea`
            // of the value itself where it is within reach, then the slot.
            let fits = i32::try_from(value as i64).is_ok();
            let direct = site.usage == GotUse::Mov
                && cpjit_isa::rel32(place, value.wrapping_add(addend)).is_some();
            if fits || direct {
                return false;
            }
            self.restore_before(inst, step, code_at);
        }
        let (slot, new) = self.got.slot(value);
        let at = self.got_base + 8 * slot as usize;
        if new {
            self.data[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        let got = self.data_base + at as u64;
        write_rel32(self.code, offset, place, got.wrapping_add(addend))
    }

    /// Puts back the stencil's REX prefix, opcode and ModRM before the field of `step` (a
    /// [`Fast::Imm32`] hole of instance `inst`, code at `code_at`) from the step itself
    /// ([`Step::before`]); [`restore`](Writer::restore) from the stencil where they are not
    /// all in the instance's part.
    #[inline(always)]
    pub(super) fn restore_before(&mut self, inst: &Instance, step: &Step, code_at: usize) {
        let end = code_at + step.offset as usize;
        match (step.offset >= 3)
            .then(|| self.code.get_mut(end - 3..end))
            .flatten()
        {
            Some(bytes) => bytes.copy_from_slice(&step.before),
            None => self.restore::<3>(inst, step, code_at),
        }
    }
}
