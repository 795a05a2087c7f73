//! A recogniser for a typed multiplication by a constant, tried by [`super::pass`] once the
//! operands' types are known: `const c; mul` on an int is one micro-op, `MUL_INT_CONST c`
//! ([`multiply_by_constant`]), whose stencils take c as an immediate. CONST_INT and MUL_INT
//! took six x86-64 instructions for calls.vm's `x * 3` (load the constant, scale it back,
//! copy, multiply, check, move); the fused op takes three (`imul r, r, imm32`, check, move).

use super::{Projector, Ty};
use crate::ops::op;
use crate::value::Value;

/// The largest factor MUL_INT_CONST takes: its stencils read it as a signed 32-bit
/// immediate (vm/templates/stencil.h, `MUL_FACTOR`).
pub(super) const MAX_FACTOR: i64 = i32::MAX as i64;

/// `const c; mul` (the op `uop`, specialised for ints) with c an int from 0 to
/// [`MAX_FACTOR`] pushed just before it: `MUL_INT_CONST c`, which leaves where the
/// constant was pushed when the product overflows (the interpreter pushes c again and
/// multiplies). A factor below it not yet proved an int is guarded there too. Whether it
/// applied; declines without touching the projector.
pub(super) fn multiply_by_constant(p: &mut Projector<'_>, uop: u32) -> bool {
    let Some((c, const_pc)) = constant_factor(p, uop) else {
        return false;
    };
    p.uops.pop();
    p.last_const = None;
    p.pop();
    if p.slot(0).ty != Ty::Int {
        p.guard(const_pc, &[(0, Ty::Int)]);
    }
    p.pop();
    p.emit_exiting(op::MUL_INT_CONST, c as u64, 0, const_pc);
    p.push(Ty::Int);
    true
}

/// The factor and the constant's bytecode, when `uop` is MUL_INT and the last micro-op
/// pushed an int constant in range.
fn constant_factor(p: &Projector<'_>, uop: u32) -> Option<(i64, u32)> {
    if uop != op::MUL_INT {
        return None;
    }
    let at = p.uops.len().checked_sub(1)?;
    let (_, const_pc) = p
        .last_const
        .filter(|&(i, _)| i == at && p.uops[at].op == op::CONST)?;
    let c = Value(p.uops[at].arg0)
        .as_int()
        .filter(|c| (0..=MAX_FACTOR).contains(c))?;
    Some((c, const_pc))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, path, project, projector, records};
    use super::super::{pass, Ty};
    use super::MAX_FACTOR;
    use crate::abi::{TYPE_INT, TYPE_NONE};
    use crate::ops::op;

    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];

    /// `load x; const c; mul; pop` projected with x proved as `x`: the micro-ops.
    fn multiply(c: i64, x: Ty) -> Vec<&'static str> {
        let prog = function("x", &format!("  load x; const {c}; mul; pop"));
        let f = &prog.functions[prog.main];
        project(f, &records(0..4, &[(2, INTS)]), &[("x", x)])
    }

    #[test]
    fn an_int_times_a_constant_is_one_multiplication_by_it() {
        assert_eq!(multiply(3, Ty::Int), ["LOAD_INT", "MUL_INT_CONST", "POP"]);
        assert_eq!(
            multiply(MAX_FACTOR, Ty::Int),
            ["LOAD_INT", "MUL_INT_CONST", "POP"]
        );
        // A factor not yet proved is guarded where the constant was pushed.
        assert_eq!(
            multiply(3, Ty::Unknown),
            ["LOAD", "GUARD_INT_TOS", "MUL_INT_CONST", "POP"]
        );
        // Constants no immediate takes keep the typed multiplication.
        assert_eq!(
            multiply(MAX_FACTOR + 1, Ty::Int),
            ["LOAD_INT", "CONST", "MUL_INT", "POP"]
        );
        assert_eq!(
            multiply(-3, Ty::Int),
            ["LOAD_INT", "CONST", "MUL_INT", "POP"]
        );
    }

    #[test]
    fn the_product_takes_the_factor_and_leaves_where_the_constant_was_pushed() {
        let prog = function("x", "  load x; const 7; mul; pop");
        let f = &prog.functions[prog.main];
        let mut p = projector(f, &[("x", Ty::Int)]);
        let rs = records(0..4, &[(2, INTS)]);
        pass::pass(&mut p, &path(f, &rs)).expect("projects");
        let mul = p
            .uops
            .iter()
            .position(|u| u.op == op::MUL_INT_CONST)
            .expect("fused");
        assert_eq!(p.uops[mul].arg0, 7);
        assert!(
            p.exit_uses.contains(&(mul, 1)),
            "leaves at the constant's pc 1: {:?}",
            p.exit_uses
        );
    }

    #[test]
    fn a_constant_below_the_other_factor_is_not_taken_for_it() {
        // `const 3; load x; mul`: the constant is not the last thing pushed.
        let prog = function("x", "  const 3; load x; mul; pop");
        let f = &prog.functions[prog.main];
        let ops = project(f, &records(0..4, &[(2, INTS)]), &[("x", Ty::Int)]);
        assert_eq!(ops, ["CONST", "LOAD_INT", "MUL_INT", "POP"]);
    }
}
