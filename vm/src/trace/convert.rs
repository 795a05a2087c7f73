//! Conversions the trace has proved exact: `load i; float` on a local proved an int becomes
//! one `LOAD_INT_FLOAT i` (vm/templates/ops.def). The generic `FLOAT` calls a helper that
//! may fail (a big int's conversion), which kept a loop converting its counter from pinning
//! any local and spilled the cache around the call: on `examples/integrate.vm` that op was
//! about 30 of the loop's 120 instructions. A tagged int has at most 48 bits, so its float
//! is exact and the fused op has no exit.

use super::{Projector, Ty};
use crate::ops::op;

/// `float` of the top of the stack (record types say an int) where the last micro-op is the
/// `LOAD_INT` of the local the top still copies: that load becomes `LOAD_INT_FLOAT` of the
/// local and the top a float. `false` (nothing touched) otherwise.
pub(super) fn float_of_int_local(p: &mut Projector<'_>) -> bool {
    let top = *p.slot(0);
    let Some(last) = p.uops.len().checked_sub(1).filter(|&l| l >= p.fusion_floor) else {
        return false;
    };
    let load = p.uops[last];
    if load.op != op::LOAD_INT || top.ty != Ty::Int || top.local != Some(load.arg0) {
        return false;
    }
    p.uops[last].op = op::LOAD_INT_FLOAT;
    p.pop();
    p.push(Ty::Float);
    true
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, project, records};
    use super::super::Ty;
    use crate::abi::{TYPE_INT, TYPE_NONE};

    const INT: [u8; 3] = [TYPE_INT, TYPE_NONE, TYPE_NONE];

    /// `load i; float; store x` projected with i proved as `proved`: the micro-ops.
    fn convert(proved: &[(&str, Ty)]) -> Vec<&'static str> {
        let prog = function("i x", "  load i; float; store x");
        let f = &prog.functions[prog.main];
        project(f, &records(0..3, &[(1, INT)]), proved)
    }

    #[test]
    fn float_of_a_local_proved_an_int_is_one_conversion_without_an_exit() {
        assert_eq!(convert(&[("i", Ty::Int)]), ["LOAD_INT_FLOAT", "STORE"]);
    }

    #[test]
    fn float_of_a_value_not_proved_an_int_stays_the_generic_op() {
        // The generic op, which converts whatever it finds (a big int through its helper).
        assert_eq!(convert(&[]), ["LOAD", "FLOAT", "STORE"]);
        // An int local not loaded right before the conversion: nothing to fuse with.
        let prog = function("i x", "  load i; dup; pop; float; store x");
        let f = &prog.functions[prog.main];
        let ops = project(f, &records(0..5, &[(3, INT)]), &[("i", Ty::Int)]);
        assert!(
            ops.contains(&"FLOAT") && !ops.contains(&"LOAD_INT_FLOAT"),
            "{ops:?}"
        );
    }
}
