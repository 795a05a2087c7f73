//! The register-caching convention (cpjit.h's `CPJIT_CACHED_OP`): the toolchain accepts a
//! cached op only when its signature and IR match its declared cache state, on every target,
//! and names the target, the stencil and the cached register (parameter) otherwise.

use crate::common;

use common::{compiled_targets, set};

#[test]
fn cached_ops_must_match_their_declared_cache_state_on_every_target() {
    for target in compiled_targets() {
        let err = common::build_error(&set("cached"), &target);
        let at = |stencil: &str| format!("{target}: op.c: stencil `{stencil}`: ");
        for (stencil, says) in [
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
        ] {
            let want = format!("{}{says}", at(stencil));
            assert!(err.contains(&want), "{target}: missing `{want}` in:\n{err}");
        }
        assert!(
            !err.contains("op_fine"),
            "{target}: correct cached ops are accepted:\n{err}"
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
