//! Pinned float locals: besides its general pinned registers, a loop body keeps up to
//! [`FLOAT_PIN_REGS`] float locals in pinned FP registers (cpjit.h's `CPJIT_PIN_FLOAT_REGS`,
//! vm/templates/cached/pinned_float.h), so that a loop-carried float chain never makes a
//! store-to-load round trip through the frame. mandelbrot's loop carries four (zr, zi, zr2,
//! zi2): each iteration's chains are three FP ops long, and every float left in the frame
//! added a store-forwarding delay (about 5 cycles) to one of them; held in a general pinned
//! register one paid two moves between register files instead.
//!
//! The protocol is the general registers' ([`super`]): `PIN_FLOAT q` at the body's entry,
//! the members on register q for the body's ops on the local, `UNPIN_FLOAT q` at the start
//! of every exit stub the body leaves through (never in a whole exit stub, which writes back
//! the general registers only: a pinning with float registers has none), and side traces
//! inherit them ([`super::Pins`] holds them). A local qualifies when the body proves it a
//! float where it starts, reads it before it writes it (a temporary gains nothing), names it
//! only in ops with members on a float register ([`float_pinnable`]), and nothing names it
//! otherwise; the most used go first. Float-pinned locals are not offered to the general
//! registers.

use super::{Pinning, Uses};
use crate::jit::CachedOps;
use crate::ops::op;
use crate::trace::Trace;

/// Pinned float registers of the VM's cached ops (`CPJIT_PIN_FLOAT_REGS` in
/// vm/templates/cached/ops.c).
pub const FLOAT_PIN_REGS: usize = 4;

/// Whether op `op` has members on a pinned float register (families with `PINNED_FLOAT`):
/// a load, a store and the float ops on a local.
pub fn float_pinnable(op: u32) -> bool {
    matches!(
        op,
        op::LOAD | op::STORE | op::ADD_FLOAT_LOCAL | op::SUB_FLOAT_LOCAL | op::MUL_FLOAT_LOCAL
    )
}

/// Locals held in pinned float registers: register q holds `locals()[q]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloatPins {
    len: u8,
    locals: [u64; FLOAT_PIN_REGS],
}

impl FloatPins {
    /// `locals[q]` in pinned float register q.
    ///
    /// # Panics
    /// With more than [`FLOAT_PIN_REGS`] locals.
    pub fn new(locals: &[u64]) -> FloatPins {
        assert!(
            locals.len() <= FLOAT_PIN_REGS,
            "{} pinned float locals (at most {FLOAT_PIN_REGS} registers)",
            locals.len()
        );
        let mut pins = FloatPins {
            len: locals.len() as u8,
            ..FloatPins::default()
        };
        pins.locals[..locals.len()].copy_from_slice(locals);
        pins
    }

    /// The local in each pinned float register.
    pub fn locals(&self) -> &[u64] {
        &self.locals[..self.len as usize]
    }

    /// The register holding `local`, if one does.
    pub fn register_of(&self, local: u64) -> Option<usize> {
        self.locals().iter().position(|&l| l == local)
    }
}

/// The float locals a loop body pins ([`FLOAT_PIN_REGS`] at most, see the module doc), from
/// its uses by local; those chosen get no general register (their uses' count is zeroed).
/// Empty where `cached` lacks a register's `PIN_FLOAT` or `UNPIN_FLOAT`.
pub(super) fn pick_floats(
    trace: &Trace,
    uses: &mut [(u64, Uses)],
    cached: &CachedOps,
) -> FloatPins {
    // The registers with both copies, looked up at the first local that qualifies: most
    // bodies have none, and then nothing here costs more than a test per local.
    let mut copies = None;
    let mut chosen = [(0usize, 0u64); FLOAT_PIN_REGS];
    let mut len = 0;
    for &(local, u) in uses.iter() {
        let qualifies = !u.named_otherwise
            && !u.not_float
            && u.read_first
            && u.written
            && trace.loop_body_proves_float(local);
        if !qualifies {
            continue;
        }
        let copies = *copies.get_or_insert_with(|| {
            (0..FLOAT_PIN_REGS)
                .take_while(|&q| cached.pin_float(q).is_some() && cached.unpin_float(q).is_some())
                .count()
        });
        // Most used first, ties to the lower local (a body names a handful).
        let at = chosen[..len]
            .iter()
            .take_while(|c| c.0 > u.count || (c.0 == u.count && c.1 < local))
            .count();
        if at < copies {
            len = (len + 1).min(copies);
            for k in (at + 1..len).rev() {
                chosen[k] = chosen[k - 1];
            }
            chosen[at] = (u.count, local);
        }
    }
    if len == 0 {
        return FloatPins::default();
    }
    let mut locals = [0u64; FLOAT_PIN_REGS];
    for (l, c) in locals.iter_mut().zip(&chosen[..len]) {
        *l = c.1;
    }
    for (local, u) in uses.iter_mut() {
        if locals[..len].contains(local) {
            u.count = 0;
        }
    }
    FloatPins::new(&locals[..len])
}

impl Pinning {
    /// The locals in pinned float registers.
    pub fn float_locals(&self) -> &[u64] {
        self.pins.floats.locals()
    }

    /// Keeps no float local in a pinned float register; `false` if none was.
    pub fn drop_floats(&mut self) -> bool {
        if self.pins.floats.locals().is_empty() {
            return false;
        }
        self.pins.floats = FloatPins::default();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{FloatPins, FLOAT_PIN_REGS};

    #[test]
    fn float_pins_name_each_register_and_compare_only_what_they_hold() {
        let pins = FloatPins::new(&[7, 3, 5]);
        assert_eq!(pins.locals(), [7, 3, 5]);
        assert_eq!(pins.register_of(5), Some(2));
        assert_eq!(pins.register_of(4), None);
        assert_eq!(FloatPins::new(&[7, 3, 5]), pins);
        assert_ne!(FloatPins::new(&[7, 3]), pins);
        assert_eq!(FloatPins::new(&[]), FloatPins::default());
        let full: Vec<u64> = (0..FLOAT_PIN_REGS as u64).collect();
        assert_eq!(FloatPins::new(&full).locals().len(), FLOAT_PIN_REGS);
    }

    #[test]
    #[should_panic(expected = "pinned float locals")]
    fn more_float_pins_than_registers_are_refused() {
        FloatPins::new(&[0; FLOAT_PIN_REGS + 1]);
    }
}
