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
/// `(operand >> right) & mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OperandStep {
    /// The step's addend less the range's lowest value: `part + bias - ... <= span` is the
    /// range test, and the field's value is `part + bias + lo`.
    pub bias: u64,
    pub span: u64,
    /// The low 32 bits of the range's lowest value (what the field adds back).
    pub lo: u32,
    pub offset: u32,
    /// The part's bits, after the shift (one `and` rather than a second shift by a
    /// loaded count).
    pub mask: u64,
    pub operand: u16,
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
        OperandStep::fold_checks(out, from);
        true
    }

    /// Folds each range check (a step that stores nothing) of `steps[from..]` into the
    /// first step there that stores the same part of the same operand, where the values
    /// both accept are one interval: that step then tests exactly those, and the check
    /// goes. A value either step refuses, the folded one refuses (and the steps' general
    /// path reports it, as before); a value both accept is stored as before. A narrow
    /// immediate or offset is such a pair (its `imm32` field and its declared range): the
    /// eBPF example's 100-instruction compile ran 1.9 k instructions fewer (issue 36).
    fn fold_checks(steps: &mut Vec<OperandStep>, from: usize) {
        let mut k = from;
        while k < steps.len() {
            let check = steps[k];
            let part = (check.operand, check.mask, check.right);
            let store = (from..steps.len()).find(|&j| {
                let s = &steps[j];
                s.store && (s.operand, s.mask, s.right) == part
            });
            let folded = match store.filter(|_| !check.store) {
                Some(j) => steps[j].within(&check).map(|s| steps[j] = s).is_some(),
                None => false,
            };
            if folded {
                steps.remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// This storing step restricted to the values `check` (of the same operand part) also
    /// accepts, if they are one interval and not empty; the field stored is unchanged.
    fn within(&self, check: &OperandStep) -> Option<OperandStep> {
        // In the check's biased values `y = part + check.bias` (it accepts `0..=check.span`)
        // this step accepts `t..=t + self.span`, modulo 2^64, with `t` below.
        let t = check.bias.wrapping_sub(self.bias) as u128;
        let (span, check_span) = (self.span as u128, check.span as u128);
        // Both ranges together shorter than 2^64: their meet is at most one interval.
        if span + check_span >= u64::MAX as u128 {
            return None;
        }
        let (y_lo, y_hi) = if t <= check_span {
            (t, check_span.min(t + span))
        } else if t + span >= 1 << 64 {
            (0, check_span.min(t + span - (1 << 64)))
        } else {
            return None;
        };
        // `part + bias = y - y_lo`; the field is `part + self.bias + self.lo`, as before.
        let bias = check.bias.wrapping_sub(y_lo as u64);
        Some(OperandStep {
            bias,
            span: (y_hi - y_lo) as u64,
            lo: (self.bias.wrapping_sub(bias) as u32).wrapping_add(self.lo),
            ..*self
        })
    }

    /// The operand step of `s`, if it is one (see [`OperandStep::extend`]).
    pub(super) fn one(s: &Step, code_len: u32, operands: u16) -> Option<OperandStep> {
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
        let (mask, right) = match part {
            OperandPart::Whole => (u64::MAX, 0),
            OperandPart::High => (u64::MAX, 32),
            OperandPart::Low => (u32::MAX as u64, 0),
        };
        Some(OperandStep {
            bias: (addend as u64).wrapping_sub(lo as u64),
            span: hi.wrapping_sub(lo) as u64,
            lo: lo as u32,
            offset: s.offset,
            mask,
            operand,
            right,
            store,
        })
    }

    /// The step's part of `operand` plus its bias: in range exactly when at most `span`.
    #[inline(always)]
    pub fn biased(&self, operand: u64) -> u64 {
        ((operand >> self.right) & self.mask).wrapping_add(self.bias)
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
            before: [0; 3],
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

    /// What `write`'s quick loop does with `steps` for `operand` (operand 1): the fields
    /// stored, or `None` if a value is out of its step's range.
    fn run(steps: &[OperandStep], operand: u64) -> Option<Vec<(u32, u32)>> {
        let mut fields = Vec::new();
        for s in steps {
            let v = s.biased(operand);
            if v > s.span {
                return None;
            }
            if s.store {
                fields.push((s.offset, (v as u32).wrapping_add(s.lo)));
            }
        }
        Some(fields)
    }

    /// A check folded into the store of the same operand part refuses every value either
    /// refused and stores the same field otherwise: every store form and part, every
    /// check range and part, addends on both, values around every edge; a check of
    /// another part stays a step of its own.
    #[test]
    fn folded_checks_take_what_store_and_check_took() {
        let parts = [OperandPart::Whole, OperandPart::High, OperandPart::Low];
        let edges = [
            0i64, 1, -1, 127, 128, -129, 255, 256, 4095, 4096, 65_535, 65_536,
        ];
        let edges = edges.into_iter().chain([
            -32_769,
            i32::MAX as i64,
            i32::MIN as i64,
            u32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ]);
        let values: Vec<u64> = edges
            .flat_map(|e| [e.wrapping_sub(1), e, e.wrapping_add(1)].map(|v| v as u64))
            .flat_map(|v| {
                [
                    v,
                    v << 32,
                    v | (7 << 32),
                    v.wrapping_sub(4),
                    v.wrapping_add(3),
                ]
            })
            .collect();
        let (mut folded, mut kept, mut checked) = (0, 0, 0);
        for store_part in parts {
            let stores = [
                Fast::Imm32 {
                    operand: 1,
                    part: store_part,
                },
                Fast::Abs32 {
                    operand: 1,
                    part: store_part,
                },
            ];
            for store in stores {
                for check_part in parts {
                    for range in OperandRange::ALL {
                        let check = Fast::Check {
                            operand: 1,
                            part: check_part,
                            range,
                        };
                        for (a, b) in [(0, 0), (-4, 0), (0, -4), (3, -4), (-(1 << 31), 1)] {
                            let pair = [step(store, a), step(check, b)];
                            let unfolded: Vec<OperandStep> = pair
                                .iter()
                                .map(|s| OperandStep::one(s, 8, 2).expect("an operand form"))
                                .collect();
                            let both = OperandStep::of(&pair, 8, 2).expect("operand steps");
                            if both.len() == 1 {
                                folded += 1;
                            } else {
                                assert_eq!(&both[..], &unfolded[..], "{store:?} {check:?}");
                                kept += 1;
                            }
                            assert!(check_part == store_part || both.len() == 2);
                            for &v in &values {
                                let what = format!("{store:?} +{a}, {check:?} +{b}, {v:#x}");
                                assert_eq!(run(&both, v), run(&unfolded, v), "{what}");
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(
            folded > 50 && kept > 50 && checked > 100_000,
            "{folded} {kept} {checked}"
        );
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
