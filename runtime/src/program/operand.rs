//! [`Quick::Operands`](super::Quick::Operands): a program all of whose steps take an
//! operand (an `imm32` field, an absolute 32-bit field, a range check of a narrow
//! operand), as a flat array of [`OperandStep`]s that `write` runs in one tight loop: per
//! step one load of the operand, one range test and one store, with no dispatch on the
//! step's form. Such programs are most of a client's stencils that are not already a
//! [`Quick`](super::Quick) form of one or two fields: the eBPF example's ALU and memory
//! ops (immediates, offsets and their range checks), the reference VM's local offsets.
//!
//! Every field of a step lies inside the stencil's code (checked here, once), so `write`
//! stores it without a bounds check; every value is range-checked per instance, as the
//! step's [`Fast`] form checks it, and a value out of range sends the whole program down
//! the steps' general path, which writes every field again and reports the error.

use super::{Fast, Section, Step};
use cpjit_model::OperandPart;

/// One step of a [`Quick::Operands`](super::Quick::Operands) program: the field at
/// `offset` in the instance's code takes the low 32 bits of `part(operand) + addend`
/// (`store`), which must lie in `lo..=lo + span`; a check stores nothing. The part is
/// `(operand << left) >> right`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OperandStep {
    /// The step's addend less the range's lowest value: `part + bias - ... <= span` is the
    /// range test, and the field's value is `part + bias + lo`.
    pub bias: u64,
    pub span: u64,
    /// The low 32 bits of the range's lowest value (what the field adds back).
    pub lo: u32,
    pub offset: u32,
    pub operand: u16,
    pub left: u8,
    pub right: u8,
    pub store: bool,
}

impl OperandStep {
    /// The operand steps of `steps` (of a stencil of `code_len` bytes of code taking
    /// `operands` operands), if every step is one; `None` otherwise.
    #[cfg(test)]
    pub fn of(steps: &[Step], code_len: u32, operands: u16) -> Option<Box<[OperandStep]>> {
        let mut out = Vec::new();
        OperandStep::extend(steps, code_len, operands, &mut out).then(|| out.into())
    }

    /// Appends the operand steps of `steps` to `out` if every step is one (and returns
    /// whether it did; otherwise `out` is as it was): straight into the JIT's flat array.
    pub fn extend(
        steps: &[Step],
        code_len: u32,
        operands: u16,
        out: &mut Vec<OperandStep>,
    ) -> bool {
        let from = out.len();
        for s in steps {
            match OperandStep::one(s, code_len, operands) {
                Some(step) => out.push(step),
                None => {
                    out.truncate(from);
                    return false;
                }
            }
        }
        true
    }

    fn one(s: &Step, code_len: u32, operands: u16) -> Option<OperandStep> {
        // (lo, hi) of the value, the addend added to the part, whether the field is stored.
        let (operand, part, (lo, hi), addend, store) = match s.fast {
            // `step`'s `imm32` form: the part itself, a sign-extended 32-bit immediate.
            Fast::Imm32 { operand, part } => {
                (operand, part, (i32::MIN as i64, i32::MAX as i64), 0, true)
            }
            // As `patch_x86_abs32` takes it.
            Fast::Abs32 { operand, part } => (
                operand,
                part,
                (i32::MIN as i64, u32::MAX as i64),
                s.addend,
                true,
            ),
            Fast::Check {
                operand,
                part,
                range,
            } => (operand, part, range.bounds(), s.addend, false),
            _ => return None,
        };
        let inside = s.section == Section::Code
            && s.offset.checked_add(4).is_some_and(|end| end <= code_len);
        if operand >= operands || (store && !inside) {
            return None;
        }
        let (left, right) = match part {
            OperandPart::Whole => (0, 0),
            OperandPart::High => (0, 32),
            OperandPart::Low => (32, 32),
        };
        Some(OperandStep {
            bias: (addend as u64).wrapping_sub(lo as u64),
            span: hi.wrapping_sub(lo) as u64,
            lo: lo as u32,
            offset: s.offset,
            operand,
            left,
            right,
            store,
        })
    }

    /// The step's part of `operand` plus its bias: in range exactly when at most `span`.
    #[inline(always)]
    pub fn biased(&self, operand: u64) -> u64 {
        ((operand << self.left) >> self.right).wrapping_add(self.bias)
    }
}

#[cfg(test)]
mod tests {
    use super::OperandStep;
    use crate::program::{Action, Checked, Fast, Source, Step};
    use cpjit_model::{HoleKind, OperandPart, OperandRange, Section};

    /// A code step of form `fast` at offset 4 with `addend`.
    fn step(fast: Fast, addend: i64) -> Step {
        Step {
            offset: 4,
            hole: 0,
            section: Section::Code,
            kind: HoleKind::X86Abs32,
            source: Source::Operand(1, OperandPart::Whole),
            addend,
            action: Action::Plain,
            checked: Checked::Nothing,
            fast,
        }
    }

    /// Each operand step accepts exactly the values its [`Fast`] form takes, as `write`'s
    /// step writes them, and stores the same field: every form, part, range and a spread
    /// of addends and values around each range's edges.
    #[test]
    fn operand_steps_take_what_the_fast_forms_take() {
        let parts = [OperandPart::Whole, OperandPart::High, OperandPart::Low];
        let mut forms = Vec::new();
        for part in parts {
            forms.push(Fast::Imm32 { operand: 1, part });
            forms.push(Fast::Abs32 { operand: 1, part });
            for range in OperandRange::ALL {
                forms.push(Fast::Check {
                    operand: 1,
                    part,
                    range,
                });
            }
        }
        let edges = [
            0i64, 1, -1, 127, 128, -129, 255, 256, 65_535, 65_536, -32_769,
        ];
        let edges = edges.into_iter().chain([
            i32::MAX as i64,
            i32::MIN as i64,
            u32::MAX as i64,
            1 << 32,
            i64::MIN,
            i64::MAX,
        ]);
        let values: Vec<u64> = edges
            .flat_map(|e| [e.wrapping_sub(1), e, e.wrapping_add(1)].map(|v| v as u64))
            .flat_map(|v| [v, v << 32, v | (7 << 32)])
            .collect();
        let mut checked = 0;
        for fast in forms {
            for addend in [0i64, -4, 3, -(1 << 31), 1 << 40] {
                let s = step(fast, addend);
                let [o] = *OperandStep::of(&[s], 8, 2).expect("an operand form") else {
                    unreachable!("one step")
                };
                for &v in &values {
                    let expected = match fast {
                        Fast::Imm32 { part, .. } => i32::try_from(part.of(v) as i64)
                            .ok()
                            .map(|i| Some(i as u32)),
                        Fast::Abs32 { part, .. } => {
                            let value = part.of(v).wrapping_add(addend as u64);
                            (i32::MIN as i64..=u32::MAX as i64)
                                .contains(&(value as i64))
                                .then_some(Some(value as u32))
                        }
                        Fast::Check { part, range, .. } => range
                            .contains(part.of(v).wrapping_add(addend as u64))
                            .then_some(None),
                        _ => unreachable!(),
                    };
                    let biased = o.biased(v);
                    let got = (biased <= o.span)
                        .then(|| o.store.then(|| (biased as u32).wrapping_add(o.lo)));
                    assert_eq!(got, expected, "{fast:?}, addend {addend}, value {v:#x}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// Steps of other forms, fields past the code, and operands the stencil does not take
    /// make no operand program.
    #[test]
    fn other_steps_make_no_operand_program() {
        let abs32 = Fast::Abs32 {
            operand: 1,
            part: OperandPart::Whole,
        };
        assert!(OperandStep::of(&[step(abs32, 0)], 8, 2).is_some());
        assert!(OperandStep::of(&[step(abs32, 0), step(Fast::Rel32, 0)], 8, 2).is_none());
        assert!(OperandStep::of(&[step(abs32, 0)], 7, 2).is_none());
        assert!(OperandStep::of(&[step(abs32, 0)], 8, 1).is_none());
    }
}
