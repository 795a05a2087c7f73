//! A float stored and loaded straight back (`store x; load x`) stays on the stack: the two
//! micro-ops become `DUP; STORE x`, so the value goes on from its FP register instead of
//! making a round trip through the frame (or through a pinned general register, which holds
//! a float as its bits). On `examples/mandelbrot.vm`'s `store zr; load zr; load zr; mul`
//! that round trip (a store to load forwarding, or two moves between register files) was on
//! the loop-carried chain of every iteration: `zr2 = zr * zr` now multiplies the register.

use super::{Projector, Slot, Ty};
use crate::ops::op;

/// `load local` right after the micro-op `STORE local` (inside the part a fusion may
/// replace), where the local holds a float: the store becomes `DUP; STORE local` and the top
/// the local's value, as the load would have left it. `false` (nothing touched) otherwise,
/// and inside a statement whose exits resume at its start (`s = s + f(x)`), where a call's
/// argument loaded from a local is forwarded to the inlined callee as that local, which a
/// copy on the stack is not (`examples/integrate.vm`: two more micro-ops per call).
pub(super) fn load_of_stored_float(p: &mut Projector<'_>, local: u64) -> bool {
    let Some(last) = p.uops.len().checked_sub(1).filter(|&l| l >= p.fusion_floor) else {
        return false;
    };
    if p.statement_exits {
        return false;
    }
    let store = p.uops[last];
    let float = p.locals.get(local as usize) == Some(&Ty::Float);
    if store.op != op::STORE || store.arg0 != local || !float {
        return false;
    }
    // The same two micro-ops' effect: the value is copied, the copy stored, the value left.
    p.uops[last].op = op::DUP;
    p.uops[last].arg0 = 0;
    p.emit(op::STORE, local, 0);
    p.stack.push(Slot::of_local(Ty::Float, local));
    true
}

/// A float op `uop` (add, sub, mul) of an inlined body whose right operand the last micro-op
/// loaded from a float local b of the caller (a forwarded argument, `load x` in `f(x) = 4.0
/// / (1.0 + x * x)`): one micro-op reading b where it lives, as outside inlined bodies
/// (`fusion::float_op_on_local`; these ops cannot fail, so no exit needs b pushed). On
/// `examples/integrate.vm` the pushed copy made f's stack four deep, one more than the
/// float slots: a spill and a fill in every iteration. Whether it applied (the operands
/// popped and the result pushed).
pub(super) fn inlined_float_op_on_local(p: &mut Projector<'_>, uop: u32) -> bool {
    let top = *p.slot(0);
    if p.slot(1).ty != Ty::Float {
        return false;
    }
    let Some((fused, b)) = super::fusion::float_local_op(p, uop, top, false) else {
        return false;
    };
    p.uops.pop();
    p.pop();
    p.pop();
    p.emit(fused, b, 0);
    p.push(Ty::Float);
    true
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, project, records};
    use super::super::Ty;
    use crate::abi::{TYPE_FLOAT, TYPE_INT, TYPE_NONE};

    const FLOATS: [u8; 3] = [TYPE_FLOAT, TYPE_FLOAT, TYPE_NONE];
    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];

    /// `load a; store x; load x; load x; mul; store y` projected with the records' types
    /// `types` at the mul and a proved as `a`: the micro-ops.
    fn square(types: [u8; 3], a: Ty) -> Vec<&'static str> {
        let prog = function("a x y", "  load a; store x; load x; load x; mul; store y");
        let f = &prog.functions[prog.main];
        project(f, &records(0..6, &[(4, types)]), &[("a", a)])
    }

    #[test]
    fn a_float_stored_and_loaded_back_stays_on_the_stack() {
        // Both loads of x come from the stored value's register; the mul is the float op on
        // the two copies (not fused with a load of x from the frame).
        assert_eq!(
            square(FLOATS, Ty::Float),
            ["LOAD", "DUP", "DUP", "STORE", "MUL_FLOAT", "STORE"]
        );
    }

    #[test]
    fn an_int_or_an_unproved_value_is_loaded_back_as_before() {
        let ints = square(INTS, Ty::Int);
        assert!(!ints.contains(&"DUP"), "{ints:?}");
        let unknown = square(FLOATS, Ty::Unknown);
        assert!(!unknown.contains(&"DUP"), "{unknown:?}");
    }

    /// `s = s + f(x)` with f(x) = 4.0 / (1.0 + x * x) inlined, s and x proved `ty`: the
    /// micro-ops.
    fn accumulate_call(ty: Ty) -> Vec<&'static str> {
        use super::super::testing::{names, path, projector};
        use super::super::{pass, Inliner};
        let text =
            "func f(x)\n  const 4.0; const 1.0; load x; load x; mul; add; div; return\nend\n\
                    func main()\n  locals s x\n  load s; load x; call f; add; store s\n  \
                    const none; return\nend\n";
        let prog = crate::parser::parse(text).unwrap();
        let f = &prog.functions[prog.main];
        let inlining = crate::inline::Inlining::of(&prog);
        let mut p = projector(f, &[("s", ty), ("x", ty)]);
        p.inliner = Some(Inliner {
            program: &prog,
            inlining: &inlining,
        });
        let rs = records(0..5, &[(2, FLOATS), (3, FLOATS)]);
        pass::pass(&mut p, &path(f, &rs)).expect("projects");
        names(&p)
    }

    #[test]
    fn an_inlined_float_op_reads_a_forwarded_float_local_in_place() {
        // x * x is one load of x and a multiplication by x where it lives: f's stack is
        // three deep (4.0, 1.0, x), not four.
        let ops = accumulate_call(Ty::Float);
        assert_eq!(
            ops,
            [
                "GUARD_CALL_DEPTH",
                "CONST",
                "CONST",
                "LOAD",
                "MUL_FLOAT_LOCAL",
                "ADD_FLOAT",
                "DIV_FLOAT",
                "ADD_FLOAT_LOCAL",
                "STORE"
            ]
        );
        // Unproved, x is not forwarded and the body multiplies copies on the stack.
        let unknown = accumulate_call(Ty::Unknown);
        assert!(!unknown.contains(&"MUL_FLOAT_LOCAL"), "{unknown:?}");
    }

    #[test]
    fn a_store_before_the_body_or_inside_a_statement_is_kept() {
        use super::super::testing::{names, projector};
        let prog = function("a x", "");
        let mut p = projector(&prog.functions[prog.main], &[("x", Ty::Float)]);
        p.emit(crate::ops::op::STORE, 1, 0);
        // A peeled loop's body starts after the store (the back edge jumps to the load).
        p.fusion_floor = 1;
        assert!(!super::load_of_stored_float(&mut p, 1));
        assert!(!super::load_of_stored_float(&mut p, 0), "another local");
        p.fusion_floor = 0;
        // Inside `s = s + f(x)` a load of x stays a load (the call's argument forwarded).
        p.statement_exits = true;
        assert!(!super::load_of_stored_float(&mut p, 1));
        p.statement_exits = false;
        assert!(super::load_of_stored_float(&mut p, 1));
        assert_eq!(names(&p), ["DUP", "STORE"]);
    }
}
