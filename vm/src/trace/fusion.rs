//! Recognisers for a typed binary op, tried by [`super::pass`] once the operands' types are
//! known: a division by a constant ([`divide_by_constant`]), a float op on a local
//! ([`float_op_on_local`]) and a comparison fused with the branch after it
//! ([`compare_and_branch`], itself a guard on low bits or against a constant where it can
//! be). Each emits its micro-ops and says so, or declines without touching the projector.

use super::{Path, Projector, Slot, Ty};
use crate::ops::op;
use crate::value::Value;

/// `const d; floordiv` (`mod`) on a dividend known to be an int: a shift, a mask or a
/// multiplication in place of the constant and the division ([`constant_division`]).
/// Whether it applied.
pub(super) fn divide_by_constant(p: &mut Projector<'_>, uop: u32) -> bool {
    let Some(c) = constant_division(p, uop) else {
        return false;
    };
    p.uops.pop();
    p.last_const = None;
    p.pop();
    if let Some(const_pc) = c.guard_at {
        p.guard(const_pc, &[(0, Ty::Int)]);
    }
    p.pop();
    p.emit(c.op, c.arg0, c.arg1);
    p.push(Ty::Int);
    true
}

/// `load b; add` on floats, at record `i` (the op `uop`, its operands guarded and popped by
/// the micro-ops from `before_guards` on; `top` its right operand): one micro-op reading b
/// ([`float_local_op`]). A guard of the other operand moves before the load and leaves
/// there, where the interpreter has not pushed b yet. Whether it applied.
pub(super) fn float_op_on_local(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
    uop: u32,
    top: Slot,
    before_guards: usize,
) -> bool {
    let pc = path.pc(i);
    let other_guarded = matches!(&p.uops[before_guards..], [g] if g.op == op::GUARD_FLOAT_NOS);
    let load_pc = pc.checked_sub(1).filter(|&l| {
        i > 0 && path.records[i - 1].pc as u32 == l && path.code[l as usize].op == op::LOAD
    });
    let fusion = float_local_op(p, uop, top, other_guarded);
    let (Some((fused, b)), Some(load_pc)) = (fusion, load_pc) else {
        return false;
    };
    if other_guarded {
        p.uops.pop();
        p.exit_uses.pop();
        p.exit_types.pop();
    }
    p.uops.pop();
    if other_guarded {
        p.emit_exiting(op::GUARD_FLOAT_TOS, 0, 0, load_pc);
    }
    p.emit(fused, b, 0);
    p.push(Ty::Float);
    true
}

/// A comparison `uop` at record `i` (its operands popped) fused with the conditional jump
/// recorded after it: one guard that leaves where the branch was not recorded going, on the
/// low bits of `x % 2**k` compared with 0 ([`pow2_multiple_guard`]), against a constant
/// ([`constant_compare_guard`]) or on the two operands ([`fused_compare_branch`]). Whether
/// it applied (it consumes the jump too).
pub(super) fn compare_and_branch(
    p: &mut Projector<'_>,
    path: &Path<'_>,
    i: usize,
    uop: u32,
    cmp: bool,
) -> bool {
    let pc = path.pc(i);
    let branch = path.records.get(i + 1).map(|r| path.code[r.pc as usize]);
    let fused = fused_compare_branch(uop).filter(|_| {
        cmp && path.records[i + 1].pc as u32 == pc + 1
            && matches!(
                branch.map(|b| b.op),
                Some(op::JUMP_IF_FALSE | op::JUMP_IF_TRUE)
            )
    });
    let (Some((on_true, on_false)), Some(b)) = (fused, branch) else {
        return false;
    };
    let taken = path.next_pc(i + 1) == Some(b.target);
    let truthy = taken == (b.op == op::JUMP_IF_TRUE);
    let other = if taken { pc + 2 } else { b.target };
    if let Some((guard, d)) = pow2_multiple_guard(p, uop, truthy) {
        p.uops.truncate(p.uops.len() - 2);
        p.last_const = None;
        p.emit_exiting(guard, d, (d - 1) << 16, other);
    } else if let Some((guard, c)) =
        constant_compare_guard(p, if truthy { on_true } else { on_false })
    {
        p.uops.pop();
        p.last_const = None;
        p.emit_exiting(guard, c.0, (c.as_int().unwrap_or(0) << 16) as u64, other);
    } else {
        p.emit_exiting(if truthy { on_true } else { on_false }, 0, 0, other);
    }
    true
}

/// What replaces `const d; floordiv` (`mod`) on an int: [`constant_division`].
pub(super) struct ConstantDivision {
    pub op: u32,
    pub arg0: u64,
    pub arg1: u64,
    /// Where the dividend's int guard resumes (the constant's bytecode), when the trace does
    /// not know the dividend's type yet.
    pub guard_at: Option<u32>,
}

/// The micro-op (and its operands) that replaces `uop` (`FLOORDIV_INT` or `MOD_INT`) and the
/// constant pushed just before it, when that constant is an int with a form of its own
/// ([`super::divide::division_by`]: a shift, a mask or a multiplication) and the dividend
/// below it was recorded as an int. None leaves the trace; a dividend of unknown type is
/// guarded before the constant. Divisors 0 and -1 keep the typed division.
pub(super) fn constant_division(p: &mut Projector<'_>, uop: u32) -> Option<ConstantDivision> {
    let floor = match uop {
        op::FLOORDIV_INT => true,
        op::MOD_INT => false,
        _ => return None,
    };
    let at = p.uops.len().checked_sub(1)?;
    let (_, const_pc) = p
        .last_const
        .filter(|&(i, _)| i == at && p.uops[at].op == op::CONST)?;
    let d = Value(p.uops[at].arg0).as_int()?;
    let (op, arg0, arg1) = super::divide::division_by(d, floor)?;
    let guard_at = (p.slot(1).ty != Ty::Int).then_some(const_pc);
    Some(ConstantDivision {
        op,
        arg0,
        arg1,
        guard_at,
    })
}

/// A comparison fused with the branch after it: (op if the branch goes on when true, op if
/// it goes on when false).
fn fused_compare_branch(specialised: u32) -> Option<(u32, u32)> {
    Some(match specialised {
        op::LT_INT => (op::LT_INT_GUARD_TRUE, op::LT_INT_GUARD_FALSE),
        op::LE_INT => (op::LE_INT_GUARD_TRUE, op::LE_INT_GUARD_FALSE),
        op::GT_INT => (op::GT_INT_GUARD_TRUE, op::GT_INT_GUARD_FALSE),
        op::GE_INT => (op::GE_INT_GUARD_TRUE, op::GE_INT_GUARD_FALSE),
        op::EQ_INT => (op::EQ_INT_GUARD_TRUE, op::EQ_INT_GUARD_FALSE),
        op::NE_INT => (op::NE_INT_GUARD_TRUE, op::NE_INT_GUARD_FALSE),
        op::LT_FLOAT => (op::LT_FLOAT_GUARD_TRUE, op::LT_FLOAT_GUARD_FALSE),
        op::GT_FLOAT => (op::GT_FLOAT_GUARD_TRUE, op::GT_FLOAT_GUARD_FALSE),
        op::LE_FLOAT => (op::LE_FLOAT_GUARD_TRUE, op::LE_FLOAT_GUARD_FALSE),
        op::GE_FLOAT => (op::GE_FLOAT_GUARD_TRUE, op::GE_FLOAT_GUARD_FALSE),
        _ => return None,
    })
}

/// `x % 2**k` (the last two micro-ops: `MOD_INT_POW2`, then `CONST 0`) compared by `uop`
/// (`EQ_INT` or `NE_INT`) before a branch that goes on when the comparison is `truthy`: the
/// guard on x's low bits that replaces the three (going on needs x to be a multiple of
/// 2**k: `GUARD_POW2_MULTIPLE`, else `GUARD_POW2_NOT_MULTIPLE`) and 2**k (the guard's
/// operands are 2**k and its low-bit mask scaled, (2**k - 1) * 2**16).
fn pow2_multiple_guard(p: &Projector<'_>, uop: u32, truthy: bool) -> Option<(u32, u64)> {
    let equal = match uop {
        op::EQ_INT => true,
        op::NE_INT => false,
        _ => return None,
    };
    let [.., rem, zero] = p.uops.get(p.fusion_floor..)? else {
        return None;
    };
    let fusable =
        rem.op == op::MOD_INT_POW2 && zero.op == op::CONST && Value(zero.arg0).as_int() == Some(0);
    let guard = if equal == truthy {
        op::GUARD_POW2_MULTIPLE
    } else {
        op::GUARD_POW2_NOT_MULTIPLE
    };
    fusable.then_some((guard, rem.arg0))
}

/// The fusion of `load b` and float op `uop` (add, sub, mul: they cannot fail, so no exit
/// needs b on the stack) into one micro-op reading local b, when the last micro-op is that
/// load of the value `top` (the op's right operand) or, if `other_guarded`, that load and
/// then the guard of the other operand, and b is proved a float: the fused op and b.
pub(super) fn float_local_op(
    p: &Projector<'_>,
    uop: u32,
    top: Slot,
    other_guarded: bool,
) -> Option<(u32, u64)> {
    let fused = match uop {
        op::ADD_FLOAT => op::ADD_FLOAT_LOCAL,
        op::SUB_FLOAT => op::SUB_FLOAT_LOCAL,
        op::MUL_FLOAT => op::MUL_FLOAT_LOCAL,
        _ => return None,
    };
    let load = match (p.uops.get(p.fusion_floor..)?, other_guarded) {
        ([.., load], false) | ([.., load, _], true) => load,
        _ => return None,
    };
    let b = top.local?;
    let float = |l: u64| p.locals.get(l as usize) == Some(&Ty::Float);
    (load.op == op::LOAD && load.arg0 == b && float(b) && top.ty == Ty::Float).then_some((fused, b))
}

/// An int compare guard `guard` whose right operand is the constant the last micro-op
/// pushed: the guard comparing the top with that constant instead, and the constant.
fn constant_compare_guard(p: &Projector<'_>, guard: u32) -> Option<(u32, Value)> {
    let fused = match guard {
        op::LT_INT_GUARD_TRUE => op::LT_INT_CONST_GUARD_TRUE,
        op::LT_INT_GUARD_FALSE => op::LT_INT_CONST_GUARD_FALSE,
        op::LE_INT_GUARD_TRUE => op::LE_INT_CONST_GUARD_TRUE,
        op::LE_INT_GUARD_FALSE => op::LE_INT_CONST_GUARD_FALSE,
        op::GT_INT_GUARD_TRUE => op::GT_INT_CONST_GUARD_TRUE,
        op::GT_INT_GUARD_FALSE => op::GT_INT_CONST_GUARD_FALSE,
        op::GE_INT_GUARD_TRUE => op::GE_INT_CONST_GUARD_TRUE,
        op::GE_INT_GUARD_FALSE => op::GE_INT_CONST_GUARD_FALSE,
        op::EQ_INT_GUARD_TRUE => op::EQ_INT_CONST_GUARD_TRUE,
        op::EQ_INT_GUARD_FALSE => op::EQ_INT_CONST_GUARD_FALSE,
        op::NE_INT_GUARD_TRUE => op::NE_INT_CONST_GUARD_TRUE,
        op::NE_INT_GUARD_FALSE => op::NE_INT_CONST_GUARD_FALSE,
        _ => return None,
    };
    let [.., c] = p.uops.get(p.fusion_floor..)? else {
        return None;
    };
    let value = Value(c.arg0);
    (c.op == op::CONST && value.as_int().is_some()).then_some((fused, value))
}

#[cfg(test)]
mod tests {
    use super::super::divide::{any_magic, small_magic};
    use super::super::testing::{function, names, path, project, projector, records};
    use super::super::{pass, Ty};
    use crate::abi::{TYPE_FLOAT, TYPE_INT, TYPE_NONE};
    use crate::parser::Function;

    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];
    const FLOATS: [u8; 3] = [TYPE_FLOAT, TYPE_FLOAT, TYPE_NONE];

    /// `load x; const d; OP; pop` projected with x proved as `x`: the micro-ops.
    fn divide(op: &str, d: i64, x: Ty) -> Vec<&'static str> {
        let prog = function("x", &format!("  load x; const {d}; {op}; pop"));
        let f = &prog.functions[prog.main];
        project(f, &records(0..4, &[(2, INTS)]), &[("x", x)])
    }

    #[test]
    fn a_division_by_a_constant_is_a_shift_a_mask_or_a_multiplication() {
        assert_eq!(
            divide("floordiv", 8, Ty::Int),
            ["LOAD_INT", "FLOORDIV_INT_POW2", "POP"]
        );
        assert_eq!(
            divide("mod", 8, Ty::Int),
            ["LOAD_INT", "MOD_INT_POW2", "POP"]
        );
        assert_eq!(
            divide("floordiv", 10, Ty::Int),
            ["LOAD_INT", "FLOORDIV_INT_BY", "POP"]
        );
        assert_eq!(
            divide("mod", 10, Ty::Int),
            ["LOAD_INT", "MOD_INT_BY", "POP"]
        );
        // A dividend not yet proved is guarded where the constant was pushed.
        assert_eq!(
            divide("floordiv", 8, Ty::Unknown),
            ["LOAD", "GUARD_INT_TOS", "FLOORDIV_INT_POW2", "POP"]
        );
        // Large and negative divisors multiply and shift.
        assert_eq!(
            divide("floordiv", 100_000, Ty::Int),
            ["LOAD_INT", "FLOORDIV_INT_BY_LARGE", "POP"]
        );
        assert_eq!(
            divide("mod", -4, Ty::Int),
            ["LOAD_INT", "MOD_INT_BY_NEGATIVE", "POP"]
        );
        // 0 and -1 keep the typed division.
        assert_eq!(
            divide("floordiv", -1, Ty::Int),
            ["LOAD_INT", "CONST", "FLOORDIV_INT", "POP"]
        );
        assert_eq!(
            divide("mod", 0, Ty::Int),
            ["LOAD_INT", "CONST", "MOD_INT", "POP"]
        );
    }

    #[test]
    fn the_division_operands_are_the_shift_count_or_the_divisor_and_its_magic() {
        for (op, d, arg0, arg1) in [
            ("floordiv", 8, 3, 0),
            ("mod", 8, 8, 0),
            ("floordiv", 10, 10, small_magic(10)),
            ("mod", 7, 7, small_magic(7)),
            ("mod", -7, -7i64 as u64, any_magic(7).0),
        ] {
            let prog = function("x", &format!("  load x; const {d}; {op}; pop"));
            let f = &prog.functions[prog.main];
            let mut p = projector(f, &[("x", Ty::Int)]);
            let rs = records(0..4, &[(2, INTS)]);
            pass::pass(&mut p, &path(f, &rs)).unwrap();
            assert_eq!((p.uops[1].arg0, p.uops[1].arg1), (arg0, arg1), "{op} {d}");
        }
    }

    /// A comparison `cmp` and a branch on it: `load i; OPERAND; cmp; jump_if_false done`,
    /// recorded going on (`taken`: jumping to `done`, where `const none` follows).
    fn branch(operand: &str, cmp: &str, taken: bool, proved: &[(&str, Ty)]) -> Vec<&'static str> {
        let body = format!("  load i; {operand}; {cmp}; jump_if_false done\n  load i; pop\ndone:");
        let prog = function("i n", &body);
        let f: &Function = &prog.functions[prog.main];
        let mut rs = records(0..4, &[(2, INTS)]);
        if taken {
            rs.extend(records(6..7, &[]));
        }
        project(f, &rs, proved)
    }

    #[test]
    fn a_comparison_and_its_branch_are_one_guard_on_the_way_recorded() {
        let ints = [("i", Ty::Int), ("n", Ty::Int)];
        let ops = branch("load n", "lt", false, &ints);
        assert_eq!(ops, ["LOAD_INT", "LOAD_INT", "LT_INT_GUARD_TRUE"]);
        let ops = branch("load n", "lt", true, &ints);
        assert_eq!(ops, ["LOAD_INT", "LOAD_INT", "LT_INT_GUARD_FALSE", "CONST"]);
        // Operands not proved are guarded first, both at once.
        let ops = branch("load n", "ge", false, &[]);
        assert_eq!(ops, ["LOAD", "LOAD", "GUARD_INT_BOTH", "GE_INT_GUARD_TRUE"]);
    }

    #[test]
    fn a_comparison_with_a_constant_is_a_guard_against_it() {
        let ops = branch("const 10", "lt", false, &[("i", Ty::Int)]);
        assert_eq!(ops, ["LOAD_INT", "LT_INT_CONST_GUARD_TRUE"]);
        let ops = branch("const 10", "eq", true, &[("i", Ty::Int)]);
        assert_eq!(ops, ["LOAD_INT", "EQ_INT_CONST_GUARD_FALSE", "CONST"]);
    }

    #[test]
    fn a_multiple_of_a_power_of_two_is_a_guard_on_its_low_bits() {
        let body = "  load x; const 4; mod; const 0; eq; jump_if_false done\n  load x; pop\ndone:";
        let prog = function("x", body);
        let f = &prog.functions[prog.main];
        let rs = records(0..6, &[(2, INTS), (4, INTS)]);
        let mut p = projector(f, &[("x", Ty::Int)]);
        pass::pass(&mut p, &path(f, &rs)).unwrap();
        let names = names(&p);
        assert_eq!(names, ["LOAD_INT", "GUARD_POW2_MULTIPLE"]);
        assert_eq!((p.uops[1].arg0, p.uops[1].arg1), (4, 3 << 16));
        assert_eq!(
            p.exit_uses,
            [(1, 8)],
            "leaves at `done` when not a multiple"
        );
    }

    #[test]
    fn a_float_op_on_a_float_local_reads_the_local() {
        let prog = function("a b", "  load a; load b; add; pop");
        let f = &prog.functions[prog.main];
        let rs = records(0..4, &[(2, FLOATS)]);
        let floats = [("a", Ty::Float), ("b", Ty::Float)];
        assert_eq!(project(f, &rs, &floats), ["LOAD", "ADD_FLOAT_LOCAL", "POP"]);
        // The other operand's guard moves before the load and leaves there.
        let mut p = projector(f, &[("b", Ty::Float)]);
        pass::pass(&mut p, &path(f, &rs)).unwrap();
        let names = names(&p);
        assert_eq!(names, ["LOAD", "GUARD_FLOAT_TOS", "ADD_FLOAT_LOCAL", "POP"]);
        assert_eq!(p.exit_uses, [(1, 1)]);
        // b not proved a float: the guard and the typed op.
        let ops = project(f, &rs, &[("a", Ty::Float)]);
        assert_eq!(ops, ["LOAD", "LOAD", "GUARD_FLOAT_TOS", "ADD_FLOAT", "POP"]);
    }
}
