//! The register-caching convention (cpjit.h's `CPJIT_CACHED_OP`): the toolchain accepts a
//! cached op only when its signature and IR match its declared cache state, on every target,
//! and names the target, the stencil and the cached register (parameter) otherwise.

use crate::common;

use common::{compiled_targets, set};

/// Checks that `err` names each `(stencil, says)` of `op.c` on `target`, and no `op_fine*`.
fn names_each(target: &str, err: &str, cases: &[(&str, &str)]) {
    for (stencil, says) in cases {
        let want = format!("{target}: op.c: stencil `{stencil}`: {says}");
        assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
    }
    assert!(
        !err.contains("op_fine"),
        "{target}: correct cached ops are accepted:\n{err}"
    );
}

#[test]
fn cached_ops_must_match_their_declared_cache_state_on_every_target() {
    for target in compiled_targets() {
        let err = common::build_error(&set("cached"), &target);
        names_each(
            &target,
            &err,
            &[
            (
                "op_reads_past_in",
                "reads cached register c2 (parameter 5), but the op declares IN = 1",
            ),
            (
                "op_link_reads_past_in",
                "reads cached register c1 (parameter 4), but the op declares IN = 0",
            ),
            (
                "op_short_exit",
                "passes no value in cached register c1 (argument 4) to `_JIT_CONTINUE`, but the op declares OUT = 2",
            ),
            (
                "op_value_past_out",
                "passes a value in cached register c0 (argument 3) to `_JIT_CONTINUE`, but the op declares OUT = 0",
            ),
            (
                "op_cached_into_spilled",
                "passes a value in cached register c1 (argument 4) to `_JIT_SIDE_TARGET`, which is declared spilled (CPJIT_DECLARE_SPILLED_TARGET: entered with nothing cached)",
            ),
            (
                "op_uncached_signature",
                "signature is `i64 (ptr, ptr)` but the op is declared cached (CPJIT_CACHED_OP, IN = 1, OUT = 1), which requires `i64 (ptr, ptr, i64, i64, i64)`",
            ),
            (
                "op_state_expression",
                "declared cache state `IN = 1 + 1, OUT = 2` with 3 cache registers is not two integer literals",
            ),
            ],
        );
    }
}

#[test]
fn ops_with_pinned_registers_read_and_set_them_and_must_take_them_on_every_target() {
    for target in compiled_targets() {
        let err = common::build_error(&set("cached_pinned"), &target);
        let want = format!(
            "{target}: op.c: stencil `op_no_pinned_parameters`: signature is `i64 (ptr, ptr, i64, \
             i64, i64)` but the op is declared cached (CPJIT_CACHED_OP, IN = 0, OUT = 0), which \
             requires `i64 (ptr, ptr, i64, i64, i64, i64, i64)`"
        );
        assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
        assert!(
            !err.contains("op_fine"),
            "{target}: ops reading and setting pinned registers are accepted:\n{err}"
        );
    }
}

/// Float cache slots (CPJIT_FLOAT_CACHE): a state names each slot's class, so an op may
/// read and must pass a slot's value only in the register of its class, on every target.
#[test]
fn float_cache_slots_are_checked_per_class_on_every_target() {
    for target in compiled_targets() {
        let err = common::build_error(&set("cached_float"), &target);
        names_each(
            &target,
            &err,
            &[
            (
                "op_reads_float_past_in",
                "reads cached register f1 (parameter 7), but the op declares IN = 2 (values in: f0)",
            ),
            (
                "op_reads_int_of_float_slot",
                "reads cached register c0 (parameter 3), but the op declares IN = 2 (values in: f0)",
            ),
            (
                "op_int_in_float_state",
                "passes a value in cached register c0 (argument 3) to `_JIT_CONTINUE`, but the op declares OUT = 2 (values in: f0)",
            ),
            ],
        );
    }
}

/// A target whose flags pass no `double` in FP registers refuses float cache slots, saying
/// why (x86-64 without SSE2, RISC-V under lp64; AArch64's clang refuses `double` itself).
#[test]
fn float_cache_slots_are_refused_where_doubles_are_not_passed_in_fp_registers() {
    for target in compiled_targets() {
        let err = common::build_error(&set("cached_float_soft"), &target);
        let want = if target.starts_with("aarch64") {
            "does not support it".to_string()
        } else {
            format!(
                "{target}: op.c: stencil `op_fadd`: has float cache registers (CPJIT_FLOAT_CACHE, \
                 CPJIT_PIN_FLOAT_REGS), but this target passes no `double` argument in an FP \
                 register: "
            )
        };
        assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
    }
}
