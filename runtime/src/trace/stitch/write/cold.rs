//! An instance's cold part in stage 3 ([`write()`](super::write)): copied to its place in
//! the trace's cold area (after the hot code and tail jump) and patched there. The commonest
//! one, a guard's exit (rel32 sites: branches to jump targets and back into the hot code),
//! is written inline in the copy loop ([`Writer::guard_exit`]); any other
//! ([`Writer::cold_part`]) runs its quick form or steps with the cold area as the code.

use super::{copy_code, pad_with_nops, Writer};
use crate::program::{Program, Quick};
use crate::trace::Instance;
use crate::Error;

impl Writer<'_, '_, '_, '_> {
    /// The commonest cold part, inline: a guard's exit, whose program is a few rel32
    /// sites (branches to jump targets and back into the hot code), with no padding
    /// before it (the caller checks). Copies it to `cold_at` and writes its sites in the
    /// cold area, without making it the writer's code (the swap and the call of
    /// [`cold_part`](Writer::cold_part) were 40 of its 145 instructions). `false` for any
    /// other cold part or a site the form cannot take: `cold_part` then copies and writes
    /// it again.
    #[inline(always)]
    pub(super) fn guard_exit(
        &mut self,
        inst: &Instance,
        cold: &Program,
        at: usize,
        cold_at: usize,
        data_at: usize,
    ) -> bool {
        let Quick::Mixed {
            len: 0,
            count,
            sites,
            ..
        } = cold.quick
        else {
            return false;
        };
        let len = self.cold.len();
        copy_code(self.cold, cold_at, cold, len);
        let code = (
            self.cold.as_mut_ptr(),
            self.cold_base,
            self.code_base + at as u64,
        );
        // SAFETY: the cold area, where the cold part was copied to `cold_at`.
        unsafe { self.sites_in(code, inst, cold_at, data_at, &sites[..count as usize]) }
    }

    /// Copies the cold part `cold` of instance `inst` (whose hot code is at `at`) to
    /// `cold_at` in the cold area (after the previous one's, which ends at `cold_end`) and
    /// runs its steps there, with the cold area as the code they patch and the hot code as
    /// the instance's other part.
    #[inline(never)]
    pub(super) fn cold_part(
        &mut self,
        inst: &Instance,
        cold: &Program,
        (at, cold_end, cold_at, data_at): (usize, usize, usize, usize),
        hot_len: u32,
    ) -> Result<(), Error> {
        let b = self.b;
        // (Most cold parts need no padding: no division by the nop's length then.)
        if cold_at != cold_end {
            let name = || b.jit.set.stencils[inst.stencil as usize].name.to_string();
            pad_with_nops(&mut self.cold[cold_end..cold_at], b.jit.set.nop).map_err(|reason| {
                Error::InvalidStencil {
                    stencil: name(),
                    reason: format!("its cold part: {reason}"),
                }
            })?;
        }
        let len = self.cold.len();
        copy_code(self.cold, cold_at, cold, len);
        self.other = self.code_base + at as u64;
        self.restore_at = hot_len as usize;
        std::mem::swap(&mut self.code, &mut self.cold);
        std::mem::swap(&mut self.code_base, &mut self.cold_base);
        // Its quick form, else the inline forms first, as for the hot code (its exits are
        // rel32 fields).
        let flat = &b.jit.operand_steps[..];
        let result = match self.quick(inst, cold, (cold_at, data_at), flat) {
            true => Ok(()),
            false => self.steps(inst, &cold.steps, cold_at, data_at),
        };
        std::mem::swap(&mut self.code, &mut self.cold);
        std::mem::swap(&mut self.code_base, &mut self.cold_base);
        self.restore_at = 0;
        result
    }
}
